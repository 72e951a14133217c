//! Apply: the engine that brings the cluster to the rendered objects, one file per verb
//! (as fluxcd/pkg's `ssa`): `plan` (what each object is and which API serves it), `list`
//! (what exists), `namespaces`, `patch` (one object's server-side apply or replacement),
//! `record` (the inventory's side of a sync), `phases` (the objects applied phase by
//! phase), `prune`, `diff` and `observe`; `sync` below strings them together.
//!
//! "Nothing changed" is decided without comparing desired and live values (the
//! apiserver normalises quantities and defaults fields, so such a comparison writes on
//! every sync or loops): an object is unchanged when the hash of what we would send
//! equals the hash of what we last sent (inventory), and the fields our manager owns
//! are still the ones it owned right after that apply. Anyone changing one of our
//! fields moves its ownership, which shows up as drift.

mod access;
mod adopt;
mod cluster;
pub mod diff;
pub mod drift;
mod follow;
mod hash;
mod held;
mod hooks;
pub mod inventory;
mod list;
mod live;
mod live_store;
mod managers;
mod namespaces;
mod normalize;
mod observe;
mod patch;
mod phases;
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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use serde_json::Value;

pub use cluster::Cluster;
pub(crate) use hash::owned_fields_hash_in;
pub use inventory::{Entry, Inventory, Store, buckets};
pub(crate) use list::Known;
pub(crate) use live::live_parts;
#[cfg(test)]
pub(crate) use live_store::LIST_EVERY;
pub(crate) use live_store::LiveStore;
pub(crate) use resolve::Resolved;
pub use resolve::Resolver;
pub(crate) use stages::{Gate, Step};
pub use stages::{NoWait, Readiness};
pub use writes::{Verb, Writes};

use crate::object::ownership;
use crate::object::{ObjKey, Observed, Packed};
use crate::render::Object;
use crate::spec::{SpecId, TreeFacts};
use plan::Planned;

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
    /// The first request of a sync found no cluster: no fault of the inventory's.
    #[error("the cluster cannot be reached: {0}")]
    Unreachable(String),
    #[error("the cluster refused driftless's credentials: {0}")]
    Unauthorized(String),
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
    pub(crate) fn is_write_label(label: &str) -> bool {
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
    /// A sync of this engine was stopped mid-write (a member's Lease lapsed, a panic)
    /// and no whole sync has ended since: a changed intent may already be written, its
    /// record not (see `against_record`).
    cut_short: std::sync::atomic::AtomicBool,
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
            cut_short: Default::default(),
        }
    }

    /// Whether a sync was stopped mid-write since a whole one last ended: set when one
    /// is, cleared when a whole sync ends (the daemon tells it).
    pub fn set_cut_short(&self, cut_short: bool) {
        self.cut_short
            .store(cut_short, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn cut_short(&self) -> bool {
        self.cut_short.load(std::sync::atomic::Ordering::Relaxed)
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
    pub(crate) async fn sync_in(
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
        let (mut held, objects) = without_suspended(objects);
        let objects = &objects[..];
        let mut timeline = crate::timeline::Timeline::start("sync step");
        // Independent round trips (the inventory; discovery of each kind), taken at once.
        let (loaded, mut planned) =
            tokio::join!(store.load(&self.client), self.plan(objects, &facts.adopt));
        let loaded = loaded?;
        // What is written is recorded with its app, from the apps beside its spec's file.
        for p in &mut planned {
            p.app = p.obj.at.as_ref().and_then(|at| facts.app_of(&at.file));
        }
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
        let (held_results, held_apps) =
            match hold_refused(refused, &mut planned, &loaded, facts, &mut held) {
                ControlFlow::Continue(held) => held,
                ControlFlow::Break(stopped) => return Ok(stopped),
            };
        let covered = covered(scope, &held);
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
        let (mut results, stopped) = self
            .apply_planned(planned, &mut existing, &mut inv, gate)
            .await?;
        timeline.mark("applied");
        let before_prune = store.save(&self.client, &saved, &inv, &self.writes).await?;
        let prune_report = self
            .prune_unless_stopped(stopped.as_deref(), &prune_plan, &mut inv, gate)
            .await;
        store
            .save(&self.client, &before_prune, &inv, &self.writes)
            .await?;
        timeline.mark("pruned, inventory saved");
        results.extend(held_results);
        Ok(SyncReport {
            objects: results,
            prune: prune_report,
            stopped,
            held: held_apps,
        })
    }

    /// Applies `planned`, in stages where waves or hooks ask for them (`stages`): the
    /// results, and why the sync stopped before its last stage, if it did.
    async fn apply_planned(
        &self,
        planned: Vec<Planned<'_>>,
        existing: &mut list::Existing,
        inv: &mut Inventory,
        gate: &impl Gate,
    ) -> Result<(Vec<ObjectResult>, Option<String>), ApplyError> {
        if stages::staged(&planned) {
            return self.apply_staged(planned, existing, inv, gate).await;
        }
        let results = self.apply_in_phases(planned, existing, inv, gate).await?;
        let stopped = gate
            .cancelled()
            .map(|why| format!("{why}; not every object was applied, and nothing was pruned"));
        Ok((results, stopped))
    }

    /// Prunes what `plan` says, unless the sync `stopped` before its last stage or prune
    /// is off (`--no-prune`).
    async fn prune_unless_stopped(
        &self,
        stopped: Option<&str>,
        plan: &prune::Plan,
        inv: &mut Inventory,
        gate: &impl Gate,
    ) -> prune::Report {
        if let Some(why) = stopped {
            tracing::info!(reason = %why, "sync stopped before its last stage");
            prune::Report::default()
        } else if self.opts.prune.enabled {
            gate.progress(Step::Pruning {
                objects: plan.candidates.len(),
            });
            self.prune(plan, inv).await
        } else {
            prune::Report {
                refused: None,
                objects: Vec::new(),
                disabled: true,
            }
        }
    }
}

/// `objects` without those of the specs the tree holds back (`driftless.dev/suspend`),
/// and those specs.
fn without_suspended(objects: &[Object]) -> (BTreeSet<SpecId>, Cow<'_, [Object]>) {
    let held: BTreeSet<SpecId> = objects
        .iter()
        .filter(|o| o.policy.suspended.is_some())
        .map(|o| o.spec.clone())
        .collect();
    if held.is_empty() {
        return (held, Cow::Borrowed(objects));
    }
    let kept = objects
        .iter()
        .filter(|o| !held.contains(&o.spec))
        .cloned()
        .collect();
    (held, Cow::Owned(kept))
}

/// Holds the apps whose objects the cluster's schema `refused` (`validate`), and with
/// them the specs their inventory lists: their results, and each app's first refusal.
/// `Break`: the sync stops before its first write, a refused object being no app's (or
/// the tree all or nothing).
fn hold_refused(
    refused: Vec<ObjectResult>,
    planned: &mut Vec<Planned<'_>>,
    loaded: &Inventory,
    facts: &TreeFacts,
    held: &mut BTreeSet<SpecId>,
) -> ControlFlow<SyncReport, (Vec<ObjectResult>, BTreeMap<String, String>)> {
    if refused.is_empty() {
        return ControlFlow::Continue((Vec::new(), BTreeMap::new()));
    }
    let Some(apps) = validate::refused_apps(&refused, planned, facts) else {
        return ControlFlow::Break(SyncReport {
            stopped: Some(validate::stopped_for_fields(&refused)),
            objects: refused,
            prune: prune::Report::default(),
            held: BTreeMap::new(),
        });
    };
    let (results, specs) = validate::held_out(planned, refused, &apps);
    held.extend(specs);
    held.extend(
        loaded
            .entries
            .values()
            .filter(|e| e.app.as_ref().is_some_and(|a| apps.contains_key(a)))
            .filter_map(|e| e.spec.parse::<SpecId>().ok()),
    );
    ControlFlow::Continue((results, apps))
}

/// What a sync of `scope` stands for once the `held` specs are left out of it: their
/// objects are neither applied nor pruned.
fn covered(scope: Scope<'_>, held: &BTreeSet<SpecId>) -> record::Covered {
    let widened: BTreeSet<SpecId>;
    let scope = match (held.is_empty(), scope) {
        (true, scope) => scope,
        (false, Scope::Only(s)) => {
            widened = s.difference(held).cloned().collect();
            Scope::Only(&widened)
        }
        (false, Scope::Except(h)) => {
            widened = h.union(held).cloned().collect();
            Scope::Except(&widened)
        }
        (false, Scope::All) => Scope::Except(held),
    };
    record::Covered::of(scope)
}
