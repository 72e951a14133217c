//! Apply: the engine that brings the cluster to the rendered objects, one file per verb
//! (as fluxcd/pkg's `ssa`): `plan` (what each object is and which API serves it), `list`
//! (what exists), `namespaces`, `patch` (one object's server-side apply or replacement),
//! `record` (the inventory's side of a sync), `prune`, `diff` and `observe`; `sync`
//! below strings them together.
//!
//! "Nothing changed" is decided without comparing desired and live values (the
//! apiserver normalises quantities and defaults fields, so such a comparison writes on
//! every sync or loops): an object is unchanged when the hash of what we would send
//! equals the hash of what we last sent (inventory), and the fields our manager owns
//! are still the ones it owned right after that apply. Anyone changing one of our
//! fields moves its ownership, which shows up as drift.

mod access;
mod adopt;
pub mod diff;
pub mod drift;
mod follow;
mod hash;
mod held;
mod hooks;
pub mod inventory;
mod list;
mod live;
mod managers;
mod namespaces;
mod normalize;
mod observe;
mod patch;
mod plan;
pub mod prune;
mod record;
mod release;
mod replace;
pub mod resolve;
mod runs;
pub mod secret_key;
pub mod stages;
pub mod suspensions;
mod validate;
mod warned;
mod without_apply;
mod writes;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::Client;
use serde_json::Value;

pub use hash::owned_fields_hash_in;
pub use inventory::{Entry, Inventory, Store, buckets};
pub use list::Known;
pub use live::{Listed, live_parts};
pub use resolve::{Resolved, Resolver};
pub use stages::{Gate, NoWait, Readiness, Step};
pub use writes::{Verb, Writes};

use crate::object::ownership;
use crate::object::{ObjKey, Observed, Packed};
use crate::render::Object;
use crate::spec::{SpecId, TreeFacts};
use plan::Planned;

/// One applied object as its apply answers: its place in the batch (its result's slot),
/// its result and its inventory entry.
type Outcome = (usize, ObjectResult, Option<Entry>);

/// Whether `p`, now gone, is a Job that deletes itself once finished
/// (`ttlSecondsAfterFinished`, as ingress-nginx's certificate Jobs do) and that this
/// instance created (`e`): it has run, and is not created again, so not run again, until
/// what it runs changes (the caller compares `e`'s intent). Anything else that is gone is
/// created again.
fn removed_by_its_ttl(p: &plan::Shaped<'_, '_>, e: &inventory::Entry) -> bool {
    p.key.is("batch", "Job")
        && p.body.pointer("/spec/ttlSecondsAfterFinished").is_some()
        && e.uid.is_some()
}

/// A server-side apply as driftless sends every one: as `manager`, with the server's
/// strict field validation (1.27+), so an unknown or duplicated field is refused, never
/// dropped in silence (the default, `Warn`, would apply the rest).
pub(crate) fn apply_params(manager: &str) -> kube::api::PatchParams {
    kube::api::PatchParams::apply(manager).validation(kube::api::ValidationDirective::Strict)
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("inventory: {0}")]
    Inventory(String),
    #[error("listing {what}: {}", crate::cluster::error_text(source))]
    List { what: String, source: kube::Error },
    #[error("namespace {name}: {}", crate::cluster::error_text(source))]
    Namespace { name: String, source: kube::Error },
}

#[derive(Debug, Clone)]
pub struct Options {
    pub instance: String,
    pub field_manager: String,
    pub inventory_namespace: String,
    /// Objects applied at once.
    pub concurrency: usize,
    /// Take fields other managers own (`--force-conflicts`).
    pub force_conflicts: bool,
    /// Take over objects driftless did not create, for every spec (`--adopt`).
    pub adopt: bool,
    pub prune: prune::Options,
    /// How long a custom resource waits for its CRD to be Established.
    pub crd_wait: Duration,
    /// Cuts down the live objects results carry (the daemon keeps only what readiness
    /// reads); `None` keeps them whole but for managedFields.
    pub live_view: Option<fn(Value) -> Value>,
    /// Take back fields someone else changed (`--drift correct`); off, such an object is
    /// left as it is and reported `Drifted` (`--drift report`).
    pub correct_drift: bool,
    /// (group, kind) of what is also replaced when only immutable fields refuse an apply
    /// (`--replace-on-immutable`; `replace`).
    pub replace_on_immutable: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            instance: ownership::DEFAULT_INSTANCE.to_string(),
            field_manager: ownership::MANAGER.to_string(),
            inventory_namespace: inventory::DEFAULT_NAMESPACE.to_string(),
            concurrency: 8,
            force_conflicts: false,
            adopt: false,
            prune: prune::Options::default(),
            crd_wait: Duration::from_secs(60),
            live_view: None,
            correct_drift: true,
            replace_on_immutable: Vec::new(),
        }
    }
}

/// What happened to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Unchanged,
    Created,
    Configured,
    /// Deleted and created again: the change could not be made in place.
    Replaced,
    /// Not ours (or another manager's fields): left alone, reported.
    Conflict(String),
    Failed(String),
    /// Someone else changed fields we own, and drift is only reported
    /// (`Options::correct_drift` off): left as they set it.
    Drifted,
}

impl Action {
    pub fn is_error(&self) -> bool {
        matches!(self, Action::Conflict(_) | Action::Failed(_))
    }

    pub fn is_write(&self) -> bool {
        Self::WRITES.contains(self)
    }

    /// The actions that change an object.
    const WRITES: [Action; 3] = [Action::Created, Action::Configured, Action::Replaced];

    /// Whether `label` (as `label` names actions) names one that changes an object.
    pub fn is_write_label(label: &str) -> bool {
        Self::WRITES.iter().any(|a| a.label() == label)
    }

    pub fn label(&self) -> &'static str {
        match self {
            Action::Unchanged => "unchanged",
            Action::Created => "created",
            Action::Configured => "updated",
            Action::Replaced => "replaced",
            Action::Conflict(_) => "conflict",
            Action::Failed(_) => "failed",
            Action::Drifted => "drifted",
        }
    }
}

/// Which specs a sync stands for.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The whole tree: whatever else the inventory lists left the specs.
    All,
    /// These specs; the rest of the inventory counts as still desired.
    Only(&'a BTreeSet<SpecId>),
    /// The whole tree but these specs, whose objects are neither applied nor pruned.
    Except(&'a BTreeSet<SpecId>),
}

#[derive(Debug, Clone)]
pub struct ObjectResult {
    pub key: ObjKey,
    pub spec: SpecId,
    pub action: Action,
    /// The object as the apiserver returned it to a write (or a conflict's read), without
    /// `metadata.managedFields` and cut down by `Options::live_view`. `None` for an
    /// unchanged object: a sync reads those as metadata only. Packed: a sync of
    /// thousands of new objects holds all their results until it ends.
    pub live: Option<Packed>,
    /// The resourceVersion the apiserver answered a write with (none without a write;
    /// `live` may leave it out): where a watch that follows the object from that write
    /// starts (`follow`).
    pub resource_version: Option<String>,
    /// The hash of the fields our field manager owns in the live object (see
    /// `owned_fields_hash`), also for an unchanged one.
    pub fields: Option<String>,
    /// The drift apply found (and took back, or reporting only, left): field by field.
    pub drift: Option<Box<drift::DriftSeen>>,
    /// What the apiserver warned of when it took the write (its `Warning` headers), each
    /// once: a deprecated API, a finalizer name without a domain, a duplicate port.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    pub objects: Vec<ObjectResult>,
    pub prune: prune::Report,
    /// Why the sync stopped before its last stage (`stages`): a wave not ready, a hook
    /// that failed. What follows was not applied, and nothing was pruned.
    pub stopped: Option<String>,
    /// The apps held because the apiserver refused an object of theirs (its dry run), each
    /// with the first refusal: none of their objects was applied or pruned.
    pub held: BTreeMap<String, String>,
}

impl SyncReport {
    pub fn ok(&self) -> bool {
        !self.objects.iter().any(|o| o.action.is_error())
            && self.prune.ok()
            && self.stopped.is_none()
    }
}

pub struct Engine {
    pub client: Client,
    pub resolver: Resolver,
    pub opts: Options,
    pub writes: Arc<Writes>,
    /// What Secrets' inventory hashes are keyed with (`secret_key`), once read.
    hash_key: tokio::sync::OnceCell<hash::HashKey>,
    /// The apiserver's version (`major`, `minor`, `gitVersion`), once asked; `None` when
    /// it does not say.
    server_version: tokio::sync::OnceCell<Option<(String, String, String)>>,
    said_without_apply: std::sync::atomic::AtomicBool,
    /// Helm hooks of kinds driftless does not run, said once each (`stages`).
    said_skipped: std::sync::Mutex<BTreeSet<String>>,
    /// The buckets this replica holds when replicas share the tree: set by the daemon
    /// between syncs, read by every inventory access.
    held: std::sync::RwLock<Option<buckets::Held>>,
    /// The runs being waited for (hooks, a wave's Jobs the TTL controller deletes), each
    /// as a watch from its creation saw it: what readiness reads of a run that is already
    /// gone (`follow`).
    followed: follow::Runs,
}

impl Engine {
    pub fn new(client: Client, opts: Options) -> Self {
        Engine {
            resolver: Resolver::new(client.clone()),
            client,
            opts,
            writes: Arc::new(Writes::default()),
            hash_key: tokio::sync::OnceCell::new(),
            server_version: tokio::sync::OnceCell::new(),
            said_without_apply: Default::default(),
            said_skipped: Default::default(),
            held: Default::default(),
            followed: Default::default(),
        }
    }

    /// From now on, reads and writes only the inventory of `held` buckets (`None`: all,
    /// in the single layout).
    pub fn hold(&self, held: Option<buckets::Held>) {
        if let Ok(mut now) = self.held.write() {
            *now = held;
        }
    }

    /// The apiserver's version, read once.
    pub(crate) async fn server_version(&self) -> Option<&(String, String, String)> {
        self.server_version
            .get_or_init(|| async {
                self.client
                    .apiserver_version()
                    .await
                    .ok()
                    .map(|v| (v.major, v.minor, v.git_version))
            })
            .await
            .as_ref()
    }

    pub fn store(&self) -> Store {
        Store {
            namespace: self.opts.inventory_namespace.clone(),
            instance: self.opts.instance.clone(),
            field_manager: self.opts.field_manager.clone(),
            buckets: self.held.read().ok().and_then(|h| h.clone()),
        }
    }

    /// One sync: apply every object (Namespaces, then CRDs, then the rest), then prune
    /// what left the specs. `objects` come from `render` (already in apply order).
    pub async fn sync(
        &self,
        objects: &[Object],
        facts: &TreeFacts,
        gate: &impl Gate,
    ) -> Result<SyncReport, ApplyError> {
        self.sync_scope(objects, facts, Scope::All, gate).await
    }

    /// Syncs `scope` (`Scope`): `objects` are everything its specs render now (a spec
    /// that was removed renders nothing). What the inventory lists for specs outside the
    /// scope counts as still desired, so a sync of some specs makes the prune plan,
    /// refusals included, a whole sync would make were the other specs as last applied;
    /// and a whole sync but some (suspended) specs applies and prunes nothing of theirs.
    /// Waves and hooks go in stages (`stages`), `gate` waiting for each.
    pub async fn sync_scope(
        &self,
        objects: &[Object],
        facts: &TreeFacts,
        scope: Scope<'_>,
        gate: &impl Gate,
    ) -> Result<SyncReport, ApplyError> {
        self.sync_in(self.store(), objects, facts, scope, None, gate)
            .await
    }

    /// `sync_scope` with the inventory of `store`: the buckets held when `objects` were
    /// chosen. Read when the sync's task first runs, a share grown meanwhile would have
    /// the sync load buckets whose specs it does not render, and prune their objects.
    /// Objects of the kinds `known` holds are taken from it, not listed.
    pub async fn sync_in(
        &self,
        store: Store,
        objects: &[Object],
        facts: &TreeFacts,
        scope: Scope<'_>,
        known: Option<Known>,
        gate: &impl Gate,
    ) -> Result<SyncReport, ApplyError> {
        // Specs the tree holds back (`driftless.dev/suspend`) are left as a suspended
        // spec is: none of their objects applied, none pruned; nor is anything their
        // app applied before (an object its render no longer holds).
        let mut held: BTreeSet<SpecId> = objects
            .iter()
            .filter(|o| o.policy.suspended.is_some())
            .map(|o| o.spec.clone())
            .collect();
        let kept: Vec<Object>;
        let objects = match held.is_empty() {
            true => objects,
            false => {
                kept = objects
                    .iter()
                    .filter(|o| !held.contains(&o.spec))
                    .cloned()
                    .collect();
                &kept[..]
            }
        };
        let mut held_apps = BTreeMap::new();
        let mut timeline = crate::timeline::Timeline::start("sync step");
        // Independent round trips (the inventory; discovery of each kind), taken at once.
        let (loaded, mut planned) =
            tokio::join!(store.load(&self.client), self.plan(objects, &facts.adopt));
        let loaded = loaded?;
        timeline.mark("inventory read, objects planned");
        if !facts.held_apps.is_empty() || facts.hold_departed {
            let present: BTreeSet<&SpecId> = objects.iter().map(|o| &o.spec).collect();
            held.extend(
                loaded
                    .entries
                    .values()
                    .filter(|e| facts.holds(e.app.as_deref()))
                    .filter_map(|e| e.spec.parse::<SpecId>().ok())
                    // Only what the revision does not hold: the rest is applied.
                    .filter(|s| !present.contains(s)),
            );
        }
        let few = matches!(scope, Scope::Only(_));
        let mut existing = self.read_existing(&mut planned, few, known).await?;
        timeline.mark("live objects listed");

        // Before the first write (the inventory's too): a revision with a field the
        // cluster's schema refuses is applied not at all; where every object refused is
        // an app's, those apps are held and the rest goes on (DESIGN 1.12).
        let refused = self.refused_fields(&planned, &loaded).await;
        timeline.mark("fields checked");
        let mut held_results = Vec::new();
        if !refused.is_empty() {
            let Some(apps) = validate::refused_apps(&refused, &planned, facts) else {
                return Ok(SyncReport {
                    stopped: Some(validate::stopped_for_fields(&refused)),
                    objects: refused,
                    prune: prune::Report::default(),
                    held: BTreeMap::new(),
                });
            };
            let (results, specs) = validate::held_out(&mut planned, refused, &apps);
            held.extend(specs);
            held.extend(
                loaded
                    .entries
                    .values()
                    .filter(|e| e.app.as_ref().is_some_and(|a| apps.contains_key(a)))
                    .filter_map(|e| e.spec.parse::<SpecId>().ok()),
            );
            held_results = results;
            held_apps = apps;
        }
        let widened: BTreeSet<SpecId>;
        let scope = match (held.is_empty(), scope) {
            (true, scope) => scope,
            (false, Scope::Only(s)) => {
                widened = s.difference(&held).cloned().collect();
                Scope::Only(&widened)
            }
            (false, Scope::Except(h)) => {
                widened = h.union(&held).cloned().collect();
                Scope::Except(&widened)
            }
            (false, Scope::All) => Scope::Except(&held),
        };
        let covered = record::Covered::of(scope);
        let prune_plan = prune::plan(
            &loaded,
            &record::desired(&planned, &loaded, &covered),
            &self.opts.prune,
            &facts.apps,
        );

        // Record before apply: a crash after the apply must leave the object findable.
        // The inventory as read becomes the one recorded (no copy: at 10,000 specs it is
        // 15 MiB); saves compare against digests of what stands written.
        let written = store.written(&loaded);
        let mut inv = record::pending(
            loaded,
            &planned,
            &existing,
            &covered,
            &prune_plan,
            &self.opts,
        );
        let saved = store
            .save(&self.client, &written, &inv, &self.writes)
            .await?;
        timeline.mark("inventory recorded");
        gate.progress(Step::Planned {
            objects: planned.len(),
        });
        let (results, stopped) = match stages::staged(&planned) {
            false => {
                let results = self
                    .apply_in_phases(planned, &mut existing, &mut inv, gate)
                    .await?;
                let stopped = gate.cancelled().map(|why| {
                    format!("{why}; not every object was applied, and nothing was pruned")
                });
                (results, stopped)
            }
            true => {
                self.apply_staged(planned, &mut existing, &mut inv, gate)
                    .await?
            }
        };
        timeline.mark("applied");
        let before_prune = store.save(&self.client, &saved, &inv, &self.writes).await?;
        let prune_report = if let Some(why) = &stopped {
            tracing::info!(reason = %why, "sync stopped before its last stage");
            prune::Report::default()
        } else if self.opts.prune.enabled {
            gate.progress(Step::Pruning {
                objects: prune_plan.candidates.len(),
            });
            self.prune(&prune_plan, &mut inv).await
        } else {
            prune::Report {
                refused: None,
                objects: Vec::new(),
                disabled: true,
            }
        };
        store
            .save(&self.client, &before_prune, &inv, &self.writes)
            .await?;
        timeline.mark("pruned, inventory saved");
        let mut results = results;
        results.extend(held_results);
        Ok(SyncReport {
            objects: results,
            prune: prune_report,
            stopped,
            held: held_apps,
        })
    }

    /// Applies `planned` phase by phase (`object::apply_phase`), creating the namespaces
    /// objects need before the phase that needs them, and records each outcome in `inv`.
    /// Once `gate` says the sync is cancelled no further object is started: those under
    /// way finish and are recorded, the rest are left (their inventory entries were
    /// recorded before apply) for the next sync.
    async fn apply_in_phases(
        &self,
        planned: Vec<Planned<'_>>,
        existing: &mut list::Existing,
        inv: &mut Inventory,
        gate: &impl Gate,
    ) -> Result<Vec<ObjectResult>, ApplyError> {
        // Each result goes to its object's slot as it comes in, and its inventory entry
        // straight into the inventory: collected first and sorted after, 20,000 results
        // and their entries' copies stood twice over, with a sort's scratch beside them
        // (23 MiB of a 10,000-spec no-op's peak).
        let mut results: Vec<Option<ObjectResult>> = Vec::with_capacity(planned.len());
        let namespaces = namespaces::needed(&planned);
        let mut ensured: BTreeSet<String> = BTreeSet::new();
        // The phases are ranges of one vector, in apply order (a render's order already):
        // moved into a vector per phase, the objects stood twice while they were moved,
        // and the batch of most objects grew by doubling (4 MiB at 10,000 specs).
        let mut planned = planned;
        let phase_of = |p: &Planned<'_>| p.key.apply_phase().min(2);
        if !planned.is_sorted_by_key(phase_of) {
            planned.sort_by_key(phase_of);
        }
        let mut start = 0;
        for phase in 0..=2u8 {
            if gate.cancelled().is_some() {
                break;
            }
            if phase == 1 {
                // After Namespace manifests, so only namespaces nobody declared get created.
                self.ensure_namespaces(&namespaces).await?;
                ensured.extend(namespaces.iter().cloned());
            }
            let len = planned[start..]
                .iter()
                .take_while(|p| phase_of(p) == phase)
                .count();
            let batch = &mut planned[start..start + len];
            start += len;
            if phase == 2 {
                self.resolve_deferred(batch, &results).await;
                // Custom resources resolved only now may need a namespace as well.
                let more: BTreeSet<String> = namespaces::needed(batch)
                    .into_iter()
                    .filter(|ns| !ensured.contains(ns))
                    .collect();
                self.ensure_namespaces(&more).await?;
            }
            let batch = &*batch;
            let base = results.len();
            results.resize_with(base + batch.len(), || None);
            // At most `concurrency` applies exist at once, each made when a slot frees up:
            // made up front, 20,000 boxed futures (each several KiB of state) were the
            // largest allocation of a 10,000-spec sync, 170 MiB. They are boxed as `Send`
            // and pushed from a plain loop: a stream combinator holding a closure over
            // borrowed objects cannot be proven `Send` for every lifetime
            // (rust-lang/rust#102211), and the daemon runs each sync as a task.
            let limit = self.opts.concurrency.max(1);
            let mut queued = batch.iter().enumerate();
            let mut running: FuturesUnordered<futures::future::BoxFuture<'_, Option<Outcome>>> =
                FuturesUnordered::new();
            loop {
                while running.len() < limit {
                    let Some((i, p)) = queued.next() else { break };
                    // Known absent, known present, or (a kind served only now) unknown.
                    // Moved, not copied: each object is applied once.
                    let live = existing.take(&p.key);
                    let entry = inv.entries.get(&p.key).map(|e| Entry::clone(e));
                    running.push(Box::pin(async move {
                        // Asked when the object's turn comes, not when it was queued.
                        if gate.cancelled().is_some() {
                            return None;
                        }
                        let (r, e) = self.apply_one(p, live, entry).await;
                        gate.progress(Step::Applied);
                        Some((i, r, e))
                    }));
                }
                let (i, result, entry) = match running.next().await {
                    Some(Some(outcome)) => outcome,
                    Some(None) => continue,
                    None => break,
                };
                // The policy as it is now, also for an object left unchanged.
                let policy = &batch[i].obj.policy;
                let (keep, sealed, wave) = (policy.keep, policy.sealed, policy.wave);
                let hook = policy.hook.is_some();
                let entry = entry.map(|e| Entry {
                    keep,
                    sealed,
                    wave,
                    hook,
                    ..e
                });
                record::settle(inv, &result.key, entry);
                results[base + i] = Some(result);
            }
        }
        // Objects a cancelled sync never reached have no result.
        // In place: `flatten` would copy them into a new vector (8 MiB at 20,000).
        #[expect(
            clippy::filter_map_identity,
            reason = "flatten does not collect in place"
        )]
        let results = results.into_iter().filter_map(|r| r).collect();
        Ok(results)
    }
}
