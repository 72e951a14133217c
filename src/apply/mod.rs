//! Apply: server-side apply of rendered objects, with ownership checks, no write when
//! nothing changed, and the inventory that prune relies on.
//!
//! "Nothing changed" is decided without comparing desired and live values (the
//! apiserver normalises quantities and defaults fields, so such a comparison writes on
//! every sync or loops): an object is unchanged when the hash of what we would send
//! equals the hash of what we last sent (inventory), and the fields our manager owns
//! are still the ones it owned right after that apply. Anyone changing one of our
//! fields moves its ownership, which shows up as drift.

pub mod inventory;
pub mod resolve;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
    Preconditions,
};
use serde_json::Value;

pub use inventory::{Entry, Inventory, ObjKey, Store};
pub use resolve::{Resolved, Resolver};

use crate::render::{Object, ownership};
use crate::spec::SpecId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Patch,
    Create,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Patch => "patch",
            Verb::Create => "create",
            Verb::Delete => "delete",
        }
    }
}

/// Every write sent to the apiserver, by verb: the metric, and what tests assert "0 writes" on.
#[derive(Debug, Default)]
pub struct Writes {
    patch: AtomicU64,
    create: AtomicU64,
    delete: AtomicU64,
}

impl Writes {
    pub fn count(&self, verb: Verb) {
        self.counter(verb).fetch_add(1, Ordering::Relaxed);
    }

    fn counter(&self, verb: Verb) -> &AtomicU64 {
        match verb {
            Verb::Patch => &self.patch,
            Verb::Create => &self.create,
            Verb::Delete => &self.delete,
        }
    }

    pub fn get(&self, verb: Verb) -> u64 {
        self.counter(verb).load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        [Verb::Patch, Verb::Create, Verb::Delete]
            .into_iter()
            .map(|v| self.get(v))
            .sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("inventory: {0}")]
    Inventory(String),
    #[error("listing {what}: {source}")]
    List { what: String, source: kube::Error },
    #[error("namespace {name}: {source}")]
    Namespace { name: String, source: kube::Error },
}

impl ApplyError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            ApplyError::Inventory(_) => "inventory",
            ApplyError::List { .. } => "list",
            ApplyError::Namespace { .. } => "namespace",
        }
    }
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
        }
    }
}

pub use crate::prune;

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
}

impl Action {
    pub fn is_error(&self) -> bool {
        matches!(self, Action::Conflict(_) | Action::Failed(_))
    }

    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Action::Created | Action::Configured | Action::Replaced
        )
    }

    pub fn label(&self) -> &'static str {
        match self {
            Action::Unchanged => "unchanged",
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Replaced => "replaced",
            Action::Conflict(_) => "conflict",
            Action::Failed(_) => "failed",
        }
    }
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
    /// The hash of the fields our field manager owns in the live object (see
    /// `owned_fields_hash`), also for an unchanged one.
    pub fields: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    pub objects: Vec<ObjectResult>,
    pub prune: prune::Report,
}

impl SyncReport {
    pub fn ok(&self) -> bool {
        !self.objects.iter().any(|o| o.action.is_error()) && self.prune.ok()
    }
}

/// Whose an object is, by its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Us,
    OtherInstance(String),
    Foreign,
}

pub fn owner_of(obj: &Value, instance: &str) -> Owner {
    let labels = &obj["metadata"]["labels"];
    if labels[ownership::MANAGED_BY].as_str() != Some(ownership::MANAGER) {
        return Owner::Foreign;
    }
    match labels[ownership::INSTANCE].as_str() {
        Some(i) if i == instance => Owner::Us,
        Some(i) => Owner::OtherInstance(i.to_string()),
        None => Owner::Foreign,
    }
}

/// A stable 64-bit FNV-1a hash, hex: stored in the inventory across releases. It is
/// the hash of `v`'s compact JSON, fed to the hash as it is written (not built first).
pub fn hash_value(v: &Value) -> String {
    hash_serialized(v)
}

/// FNV-1a over whatever is written to it.
struct Fnv(u64);

impl std::io::Write for Fnv {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for b in buf {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hash_serialized(v: &impl serde::Serialize) -> String {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    // Writing to a hasher cannot fail, and a Value always serialises.
    let _ = serde_json::to_writer(&mut h, v);
    format!("{:016x}", h.0)
}

/// The body without `metadata`, serialised as that map would be (keys in order).
struct Shape<'a>(&'a Value);

impl serde::Serialize for Shape<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_object() {
            Some(map) => s.collect_map(map.iter().filter(|(k, _)| k.as_str() != "metadata")),
            None => self.0.serialize(s),
        }
    }
}

/// The hash of everything but metadata (a Pod whose shape changed is replaced).
pub(crate) fn shape_hash(body: &Value) -> String {
    hash_serialized(&Shape(body))
}

/// The fields `manager` owns through apply, as the server recorded them.
pub fn owned_fields_hash(live: &Value, manager: &str) -> String {
    let owned: Vec<&Value> = live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m["manager"].as_str() == Some(manager) && m["operation"].as_str() == Some("Apply")
        })
        .map(|m| &m["fieldsV1"])
        .collect();
    hash_value(&Value::from(owned.into_iter().cloned().collect::<Vec<_>>()))
}

/// `owned_fields_hash` of a typed object's JSON, without building that JSON.
pub fn owned_fields_hash_of(meta: &ObjectMeta, manager: &str) -> String {
    let owned: Vec<&Value> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(manager) && m.operation.as_deref() == Some("Apply")
        })
        .map(|m| m.fields_v1.as_ref().map_or(&Value::Null, |f| &f.0))
        .collect();
    hash_serialized(&owned)
}

/// A live object as the engine keeps it: its JSON without `metadata.managedFields`, and
/// the hash of the fields `manager` owns, taken from them first. managedFields are a
/// tree of many small maps, most of an object's memory as a `Value`; nothing else in
/// them is needed, and keeping them made a sync of a few thousand objects take hundreds
/// of MiB.
#[derive(Debug, Clone)]
struct Live {
    value: Value,
    fields: String,
}

/// A live object as one JSON value without its managedFields, and the hash of the fields
/// `manager` owns (taken from them first). The body is moved into the value, not
/// serialised as a second copy. `types` stands in for the apiVersion and kind of an
/// object that has none (list and watch items do not).
pub fn live_parts(
    mut obj: DynamicObject,
    types: Option<&kube::discovery::ApiResource>,
    manager: &str,
) -> (Value, String) {
    let fields = owned_fields_hash_of(&obj.metadata, manager);
    obj.metadata.managed_fields = None;
    let metadata = serde_json::to_value(&obj.metadata).unwrap_or(Value::Null);
    let mut v = match obj.data {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let (api_version, kind) = match (obj.types, types) {
        (Some(t), _) => (Some(t.api_version), Some(t.kind)),
        (None, Some(r)) => (Some(r.api_version.clone()), Some(r.kind.clone())),
        (None, None) => (None, None),
    };
    if let Some(a) = api_version {
        v.insert("apiVersion".into(), a.into());
    }
    if let Some(k) = kind {
        v.insert("kind".into(), k.into());
    }
    v.insert("metadata".into(), metadata);
    (Value::Object(v), fields)
}

impl Live {
    fn of(obj: DynamicObject, opts: &Options) -> Live {
        let (value, fields) = live_parts(obj, None, &opts.field_manager);
        let value = match opts.live_view {
            Some(view) => view(value),
            None => value,
        };
        Live { value, fields }
    }

    /// From a metadata-only list item: enough for ownership, the UID and the no-write
    /// rule, which is all a sync reads of an object it does not write.
    fn of_meta(mut meta: ObjectMeta, r: &Resolved, opts: &Options) -> Live {
        let fields = owned_fields_hash_of(&meta, &opts.field_manager);
        meta.managed_fields = None;
        Live {
            value: serde_json::json!({
                "apiVersion": r.resource.api_version,
                "kind": r.resource.kind,
                "metadata": meta,
            }),
            fields,
        }
    }
}

/// An object ready to apply (or diff): its API resolved (or the reason it is not).
#[derive(Clone)]
pub(crate) struct Planned<'a> {
    pub(crate) obj: &'a Object,
    pub(crate) key: ObjKey,
    /// The body with the namespace discovery says it has (none when cluster-scoped).
    pub(crate) body: Cow<'a, Value>,
    pub(crate) resolved: Result<Resolved, String>,
    pub(crate) adopt: bool,
}

pub struct Engine {
    pub client: Client,
    pub resolver: Resolver,
    pub opts: Options,
    pub writes: Arc<Writes>,
}

impl Engine {
    pub fn new(client: Client, opts: Options) -> Self {
        Engine {
            resolver: Resolver::new(client.clone()),
            client,
            opts,
            writes: Arc::new(Writes::default()),
        }
    }

    pub fn store(&self) -> Store {
        Store {
            namespace: self.opts.inventory_namespace.clone(),
            instance: self.opts.instance.clone(),
            field_manager: self.opts.field_manager.clone(),
        }
    }

    /// The key, namespace-corrected body and API of each object. A kind not served yet
    /// (its CRD is in this revision) keeps its error for now.
    pub(crate) async fn plan<'a>(
        &self,
        objects: &'a [Object],
        adopt_specs: &BTreeSet<SpecId>,
    ) -> Vec<Planned<'a>> {
        let mut out = Vec::with_capacity(objects.len());
        for obj in objects {
            let resolved = self
                .resolver
                .resolve(&obj.api_version, &obj.kind)
                .await
                .map_err(|e| {
                    format!(
                        "{} {} is not served by the cluster: {e}",
                        obj.api_version, obj.kind
                    )
                });
            let (body, namespace) = fix_namespace(obj, resolved.as_ref().ok());
            out.push(Planned {
                key: ObjKey {
                    group: obj.group().to_string(),
                    kind: obj.kind.clone(),
                    namespace: namespace.unwrap_or_default(),
                    name: obj.name.clone(),
                },
                body,
                resolved,
                adopt: self.opts.adopt || adopt_specs.contains(&obj.spec),
                obj,
            });
        }
        out
    }

    /// One sync: apply every object (Namespaces, then CRDs, then the rest), then prune
    /// what left the specs. `objects` come from `render` (already in apply order).
    pub async fn sync(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
    ) -> Result<SyncReport, ApplyError> {
        self.sync_inner(objects, adopt_specs, None).await
    }

    /// Syncs some specs: applies `objects` (everything `specs` render now; a spec that
    /// was removed renders nothing) and prunes what the inventory lists for those specs
    /// that they no longer render. The rest of the inventory counts as still desired,
    /// so the prune plan, its refusals included, is the one a whole sync would make
    /// when the other specs are as last applied.
    pub async fn sync_subset(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
        specs: &BTreeSet<SpecId>,
    ) -> Result<SyncReport, ApplyError> {
        self.sync_inner(objects, adopt_specs, Some(specs)).await
    }

    /// `scope`: the specs `objects` stand for, or `None` for the whole tree.
    async fn sync_inner(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
        scope: Option<&BTreeSet<SpecId>>,
    ) -> Result<SyncReport, ApplyError> {
        let store = self.store();
        // Independent round trips (the inventory; discovery of each kind), taken at once.
        let (loaded, mut planned) =
            tokio::join!(store.load(&self.client), self.plan(objects, adopt_specs));
        let loaded = loaded?;
        // The inventory names specs by their identity's text.
        let scope: Option<BTreeSet<String>> =
            scope.map(|specs| specs.iter().map(SpecId::to_string).collect());
        let mut desired: BTreeSet<ObjKey> = planned.iter().map(|p| p.key.clone()).collect();
        if let Some(specs) = &scope {
            desired.extend(
                loaded
                    .entries
                    .values()
                    .filter(|e| !specs.contains(&e.spec))
                    .map(|e| e.key.clone()),
            );
        }
        let prune_plan = prune::plan(&loaded, &desired, &self.opts.prune);
        drop(desired);

        // What exists of the desired objects: ours by one list per kind, then the rest read
        // directly, so nothing is recorded (or written) for an object we may not take.
        // A sync of a few specs reads their objects directly; listing a kind would read
        // all of this instance's objects of it. A whole sync lists every kind, and so
        // learns which kinds it may not list.
        let list_from = if scope.is_some() { LIST_FROM } else { 1 };
        let (mut live, forbidden) = self.list_owned(&planned, false, list_from).await?;
        let mut skipped: BTreeSet<ObjKey> = BTreeSet::new();
        for p in planned.iter_mut() {
            let id = p.resolved.as_ref().ok().map(resource_id);
            if let Some(why) = id.and_then(|id| forbidden.get(&id)) {
                p.resolved = Err(why.clone());
                skipped.insert(p.key.clone());
            }
        }
        let mut known: BTreeSet<ObjKey> = live.keys().cloned().collect();
        for (key, found) in self.read_unlisted(&planned, &live).await {
            if let Some(v) = found {
                live.insert(key.clone(), v);
            }
            known.insert(key);
        }

        // Record before apply: a crash after the apply must leave the object findable.
        let mut inv = loaded.clone();
        // What a refused revision adds is held out of the share later prunes are judged
        // against (`Entry::held`), until a whole sync's prune goes ahead or a prune of
        // those specs deletes something. A sync of specs that prunes nothing proves
        // nothing: a sync of only the spec that added objects (after drift, say) would
        // otherwise release them while the refusal stands.
        let prune_on = self.opts.prune.enabled;
        let hold = prune_on && prune_plan.refused.is_some();
        if prune_on && !hold && (scope.is_none() || !prune_plan.candidates.is_empty()) {
            for e in inv.entries.values_mut() {
                if scope.as_ref().is_none_or(|s| s.contains(&e.spec)) {
                    e.held = false;
                }
            }
        }
        for p in planned.iter().filter(|p| !skipped.contains(&p.key)) {
            let takeable = match live
                .get(&p.key)
                .map(|l| owner_of(&l.value, &self.opts.instance))
            {
                None | Some(Owner::Us) => true,
                Some(Owner::Foreign) => p.adopt,
                Some(Owner::OtherInstance(_)) => false,
            };
            if !takeable {
                continue;
            }
            inv.entries.entry(p.key.clone()).or_insert_with(|| Entry {
                key: p.key.clone(),
                version: resolve::split_api_version(&p.obj.api_version).1.to_string(),
                spec: p.obj.spec.to_string(),
                uid: None,
                applied: None,
                shape: None,
                fields: None,
                held: hold,
            });
        }
        store
            .save(&self.client, &loaded, &inv, &self.writes)
            .await?;
        let saved = inv.clone();

        let mut results: Vec<ObjectResult> = Vec::with_capacity(planned.len());
        let namespaces = namespaces_needed(&planned);
        let mut ensured: BTreeSet<String> = BTreeSet::new();
        // Each object moves to its phase's batch (no copy of every body).
        let mut phases: [Vec<Planned>; 3] = Default::default();
        for p in planned {
            phases[usize::from(p.obj.apply_phase().min(2))].push(p);
        }
        for phase in 0..=2u8 {
            if phase == 1 {
                // After Namespace manifests, so only namespaces nobody declared get created.
                self.ensure_namespaces(&namespaces).await?;
                ensured.extend(namespaces.iter().cloned());
            }
            let batch = std::mem::take(&mut phases[usize::from(phase)]);
            let batch = if phase == 2 {
                let batch = self.resolve_deferred(batch, &results).await;
                // Custom resources resolved only now may need a namespace as well.
                let more: BTreeSet<String> = namespaces_needed(&batch)
                    .into_iter()
                    .filter(|ns| !ensured.contains(ns))
                    .collect();
                self.ensure_namespaces(&more).await?;
                batch
            } else {
                batch
            };
            let outcomes: Vec<(usize, ObjectResult, Option<Entry>)> =
                futures::stream::iter(batch.iter().enumerate())
                    .map(|(i, p)| {
                        // Known absent, known present, or (a kind served only now) unknown.
                        // Moved, not copied: each object is applied once.
                        let live = known.contains(&p.key).then(|| live.remove(&p.key));
                        let entry = inv.entries.get(&p.key).cloned();
                        async move {
                            let (r, e) = self.apply_one(p, live, entry).await;
                            (i, r, e)
                        }
                    })
                    .buffer_unordered(self.opts.concurrency.max(1))
                    .collect()
                    .await;
            let mut outcomes = outcomes;
            outcomes.sort_by_key(|(i, _, _)| *i);
            for (_, result, entry) in outcomes {
                match entry {
                    Some(e) => {
                        let held = inv.entries.get(&e.key).is_some_and(|old| old.held);
                        inv.entries.insert(e.key.clone(), Entry { held, ..e });
                    }
                    // Never ours: no pending record may make it look prunable later.
                    None => {
                        if inv
                            .entries
                            .get(&result.key)
                            .is_some_and(|e| e.uid.is_none())
                        {
                            inv.entries.remove(&result.key);
                        }
                    }
                }
                results.push(result);
            }
        }
        store.save(&self.client, &saved, &inv, &self.writes).await?;

        let before_prune = inv.clone();
        let prune_report = if self.opts.prune.enabled {
            prune::execute(self, &prune_plan, &mut inv).await
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
        Ok(SyncReport {
            objects: results,
            prune: prune_report,
        })
    }

    /// Everything this instance owns among the kinds of `planned`, by key: one list call
    /// per kind, not one GET per object. `whole` lists full objects (readiness needs
    /// them); a sync lists metadata only (ownership, UID and managedFields are all its
    /// no-write rule reads, a fraction of what the apiserver must serialise), except
    /// CRDs, whose group and kind a deferred custom resource is matched by.
    /// Kinds this identity may not list come back in the second map (by resource id,
    /// with the reason): their objects fail alone instead of sinking the whole sync.
    /// Only kinds with at least `list_from` objects in `planned` are listed.
    async fn list_owned(
        &self,
        planned: &[Planned<'_>],
        whole: bool,
        list_from: usize,
    ) -> Result<(HashMap<ObjKey, Live>, BTreeMap<String, String>), ApplyError> {
        let mut kinds: BTreeMap<String, (&Resolved, usize)> = BTreeMap::new();
        for p in planned {
            if let Ok(r) = &p.resolved {
                kinds.entry(resource_id(r)).or_insert((r, 0)).1 += 1;
            }
        }
        // Kinds with fewer desired objects than `list_from` are left to `read_unlisted`.
        kinds.retain(|_, (_, n)| *n >= list_from);
        let kinds = kinds.into_iter().map(|(what, (r, _))| (what, r));
        let selector = format!("{}={}", ownership::INSTANCE, self.opts.instance);
        let selector = selector.as_str();
        // The kinds are listed at once (a no-op sync is mostly these round trips); the
        // pages of one kind follow each other, each slimmed before the next is read (a
        // whole list of full objects was the largest allocation of a sync).
        let lists = futures::future::try_join_all(kinds.map(|(what, r)| async move {
            let api = r.api_all(&self.client);
            let key = |meta: &ObjectMeta| ObjKey {
                group: r.resource.group.clone(),
                kind: r.resource.kind.clone(),
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: meta.name.clone().unwrap_or_default(),
            };
            let listed = if whole || r.resource.kind == "CustomResourceDefinition" {
                list_map(&api, selector, |mut obj| {
                    // List items carry no apiVersion/kind of their own.
                    obj.types = Some(kube::core::TypeMeta {
                        api_version: r.resource.api_version.clone(),
                        kind: r.resource.kind.clone(),
                    });
                    (key(&obj.metadata), Live::of(obj, &self.opts))
                })
                .await
            } else {
                list_meta_map(&api, selector, |meta| {
                    (key(&meta), Live::of_meta(meta, r, &self.opts))
                })
                .await
            };
            match listed {
                Ok(items) => Ok(Ok(items)),
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    tracing::warn!(kind = %what, "may not list this kind; its objects are skipped");
                    let why = format!(
                        "forbidden: this identity may not list {} cluster-wide ({}); grant get/list/watch/create/patch/delete on it",
                        r.resource.plural, e.message
                    );
                    Ok(Err((what, why)))
                }
                Err(source) => Err(ApplyError::List { what, source }),
            }
        }))
        .await?;
        let mut out = HashMap::new();
        let mut forbidden = BTreeMap::new();
        for list in lists {
            match list {
                Ok(items) => out.extend(items),
                Err((what, why)) => {
                    forbidden.insert(what, why);
                }
            }
        }
        Ok((out, forbidden))
    }

    /// Reads the desired objects that are not among ours: absent, or someone else's. A
    /// group of many in one namespace is listed once; a few are read one by one.
    async fn read_unlisted(
        &self,
        planned: &[Planned<'_>],
        ours: &HashMap<ObjKey, Live>,
    ) -> Vec<(ObjKey, Option<Live>)> {
        let mut groups: BTreeMap<(String, String), Vec<&Planned<'_>>> = BTreeMap::new();
        for p in planned.iter().filter(|p| !ours.contains_key(&p.key)) {
            if let Ok(r) = &p.resolved {
                let kind = format!(
                    "{}/{}/{}",
                    r.resource.group, r.resource.version, r.resource.plural
                );
                groups
                    .entry((kind, p.key.namespace.clone()))
                    .or_default()
                    .push(p);
            }
        }
        let mut out = Vec::new();
        for ((_, namespace), members) in groups {
            let Some(Ok(resolved)) = members.first().map(|p| &p.resolved) else {
                continue;
            };
            if members.len() >= LIST_FROM {
                let api = resolved.api(
                    &self.client,
                    (!namespace.is_empty()).then_some(namespace.as_str()),
                );
                // A failed list leaves them unread; apply_one reads them itself.
                let opts = &self.opts;
                if let Ok(items) = list_map(&api, "", |o| {
                    (
                        o.metadata.name.clone().unwrap_or_default(),
                        Live::of(o, opts),
                    )
                })
                .await
                {
                    let mut existing: HashMap<String, Live> = items.into_iter().collect();
                    out.extend(
                        members
                            .iter()
                            .map(|p| (p.key.clone(), existing.remove(&p.key.name))),
                    );
                }
                continue;
            }
            let reads: Vec<(ObjKey, Option<Live>)> = futures::stream::iter(members)
                .map(|p| async move {
                    let ns = (!p.key.namespace.is_empty()).then_some(p.key.namespace.as_str());
                    let r = match &p.resolved {
                        Ok(r) => r.api(&self.client, ns).get_opt(&p.key.name).await.ok(),
                        Err(_) => None,
                    };
                    (p.key.clone(), r)
                })
                .buffer_unordered(self.opts.concurrency.max(1))
                .filter_map(
                    |(k, r)| async move { r.map(|o| (k, o.map(|o| Live::of(o, &self.opts)))) },
                )
                .collect()
                .await;
            out.extend(reads);
        }
        out
    }

    /// Creates the namespaces specs need that do not exist, labelled as driftless's.
    /// They never enter the inventory: a namespace is never pruned.
    async fn ensure_namespaces(&self, needed: &BTreeSet<String>) -> Result<(), ApplyError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let err = |name: &str, source| ApplyError::Namespace {
            name: name.to_string(),
            source,
        };
        if needed.is_empty() {
            return Ok(());
        }
        // Which exist: one metadata list when there are several (an identity that may
        // not list namespaces reads them one by one), read at once rather than in turn.
        let listed: Option<BTreeSet<String>> = if needed.len() >= 4 {
            api.list_metadata(&ListParams::default())
                .await
                .ok()
                .map(|l| {
                    l.items
                        .into_iter()
                        .filter_map(|n| n.metadata.name)
                        .collect()
                })
        } else {
            None
        };
        let mut missing = BTreeSet::new();
        if let Some(existing) = listed {
            missing.extend(
                needed
                    .iter()
                    .map(String::as_str)
                    .filter(|n| !existing.contains(*n)),
            );
        } else {
            let found: Vec<(&str, Result<bool, kube::Error>)> =
                futures::stream::iter(needed.iter().map(String::as_str))
                    .map(|name| {
                        let api = &api;
                        async move { (name, api.get_opt(name).await.map(|ns| ns.is_some())) }
                    })
                    .buffer_unordered(self.opts.concurrency.max(1))
                    .collect()
                    .await;
            for (name, exists) in found {
                if !exists.map_err(|e| err(name, e))? {
                    missing.insert(name);
                }
            }
        }
        for name in missing {
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    labels: Some(BTreeMap::from([
                        (
                            ownership::MANAGED_BY.to_string(),
                            ownership::MANAGER.to_string(),
                        ),
                        (ownership::INSTANCE.to_string(), self.opts.instance.clone()),
                    ])),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            self.writes.count(Verb::Create);
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => tracing::info!(namespace = name, "created namespace"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(err(name, e)),
            }
        }
        Ok(())
    }

    /// Custom resources whose kind was not served at planning time: wait (bounded) for
    /// their CRD, applied in phase 1, to be Established, then resolve again.
    async fn resolve_deferred<'a>(
        &self,
        batch: Vec<Planned<'a>>,
        applied: &[ObjectResult],
    ) -> Vec<Planned<'a>> {
        let mut out = Vec::with_capacity(batch.len());
        for mut p in batch {
            if p.resolved.is_err() {
                let crd = applied.iter().find(|r| {
                    r.key.kind == "CustomResourceDefinition"
                        && r.live.as_ref().map(Packed::value).is_some_and(|crd| {
                            crd["spec"]["group"].as_str() == Some(p.key.group.as_str())
                                && crd["spec"]["names"]["kind"].as_str()
                                    == Some(p.key.kind.as_str())
                        })
                });
                if let Some(crd) = crd {
                    let deadline = tokio::time::Instant::now() + self.opts.crd_wait;
                    loop {
                        if let Ok(r) = self.resolver.resolve(&p.obj.api_version, &p.obj.kind).await
                        {
                            let (body, namespace) = fix_namespace(p.obj, Some(&r));
                            p.body = body;
                            p.key.namespace = namespace.unwrap_or_default();
                            p.resolved = Ok(r);
                            break;
                        }
                        if tokio::time::Instant::now() >= deadline {
                            p.resolved = Err(format!(
                                "its CustomResourceDefinition {} was not Established within {:?}",
                                crd.key.name, self.opts.crd_wait
                            ));
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
            }
            out.push(p);
        }
        out
    }

    async fn apply_one(
        &self,
        p: &Planned<'_>,
        live: Option<Option<Live>>,
        entry: Option<Entry>,
    ) -> (ObjectResult, Option<Entry>) {
        use tracing::Instrument as _;
        let span = tracing::info_span!("apply", spec = %p.obj.spec, object = %p.key);
        self.apply_one_inner(p, live, entry).instrument(span).await
    }

    async fn apply_one_inner(
        &self,
        p: &Planned<'_>,
        live: Option<Option<Live>>,
        entry: Option<Entry>,
    ) -> (ObjectResult, Option<Entry>) {
        let result = |action: Action, live: Option<Live>| {
            let (live, fields) = live.map(|l| (Packed::new(&l.value), l.fields)).unzip();
            ObjectResult {
                key: p.key.clone(),
                spec: p.obj.spec.clone(),
                action,
                live,
                fields,
            }
        };
        let resolved = match &p.resolved {
            Ok(r) => r,
            Err(e) => return (result(Action::Failed(e.clone()), None), entry),
        };
        let api = resolved.api(
            &self.client,
            (!p.key.namespace.is_empty()).then_some(p.key.namespace.as_str()),
        );
        // Not read yet (its kind was served only after planning): read it now.
        let live = match live {
            Some(v) => v,
            None => match api.get_opt(&p.key.name).await {
                Ok(o) => o.map(|o| Live::of(o, &self.opts)),
                Err(e) => {
                    return (
                        result(Action::Failed(format!("reading it: {e}")), None),
                        entry,
                    );
                }
            },
        };
        let applied = hash_value(&p.body);
        let shape = shape_hash(&p.body);
        let mut force = self.opts.force_conflicts;
        let mut replace = false;
        if let Some(live) = &live {
            match owner_of(&live.value, &self.opts.instance) {
                Owner::Us => {}
                Owner::OtherInstance(other) => {
                    let msg = format!(
                        "owned by driftless instance {other:?}; instances never touch each other's objects"
                    );
                    return (
                        result(Action::Conflict(msg), Some(live.clone())),
                        entry.filter(|e| e.uid.is_some()),
                    );
                }
                Owner::Foreign if !p.adopt => {
                    let msg = "exists and was not created by driftless; set `adopt = true` on the spec or pass --adopt to take it over".to_string();
                    return (
                        result(Action::Conflict(msg), Some(live.clone())),
                        entry.filter(|e| e.uid.is_some()),
                    );
                }
                Owner::Foreign => force = true,
            }
            let uid = live.value["metadata"]["uid"].as_str();
            if let Some(e) = &entry
                && e.uid.as_deref() == uid
                && uid.is_some()
            {
                if e.applied.as_deref() == Some(applied.as_str())
                    && e.fields.as_deref() == Some(live.fields.as_str())
                {
                    // Listed as metadata only (but CRDs): no body to hand on.
                    let crd = p.key.kind == "CustomResourceDefinition";
                    let unchanged = ObjectResult {
                        live: crd.then(|| Packed::new(&live.value)),
                        fields: Some(live.fields.clone()),
                        ..result(Action::Unchanged, None)
                    };
                    return (unchanged, Some(e.clone()));
                }
                replace = is_pod(&p.key) && e.shape.as_deref().is_some_and(|s| s != shape);
                // Our intent is what we last applied, so only someone else's edit moved our
                // fields: that is drift, and we take them back. A change of *our* intent that
                // collides with another manager's fields is a conflict to report instead.
                if e.applied.as_deref() == Some(applied.as_str()) {
                    force = true;
                }
            }
        }

        if replace && let Some(live) = &live {
            return self.replace(p, &api, &live.value, applied, shape).await;
        }
        let pp = PatchParams {
            force,
            ..PatchParams::apply(&self.opts.field_manager)
        };
        self.writes.count(Verb::Patch);
        match api.patch(&p.key.name, &pp, &Patch::Apply(&p.body)).await {
            Ok(obj) => {
                let v = Live::of(obj, &self.opts);
                let action = if live.is_some() {
                    Action::Configured
                } else {
                    Action::Created
                };
                tracing::info!(action = action.label(), "applied");
                let e = self.entry_for(p, &v, applied, shape);
                (result(action, Some(v)), Some(e))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let msg = format!(
                    "field conflict with another manager (pass --force-conflicts to take the fields): {}",
                    e.message
                );
                (result(Action::Conflict(msg), live), entry)
            }
            // Most of a Pod's spec cannot change in place.
            Err(kube::Error::Api(e)) if e.code == 422 && is_pod(&p.key) && live.is_some() => {
                match &live {
                    Some(l) => self.replace(p, &api, &l.value, applied, shape).await,
                    None => (result(Action::Failed(e.message.clone()), None), entry),
                }
            }
            Err(e) => (result(Action::Failed(e.to_string()), live), entry),
        }
    }

    fn entry_for(&self, p: &Planned<'_>, live: &Live, applied: String, shape: String) -> Entry {
        Entry {
            key: p.key.clone(),
            version: resolve::split_api_version(&p.obj.api_version).1.to_string(),
            spec: p.obj.spec.to_string(),
            uid: live.value["metadata"]["uid"].as_str().map(str::to_string),
            applied: Some(applied),
            shape: Some(shape),
            fields: Some(live.fields.clone()),
            held: false,
        }
    }

    /// Delete, wait until gone, create: for changes the object cannot take in place.
    async fn replace(
        &self,
        p: &Planned<'_>,
        api: &Api<DynamicObject>,
        live: &Value,
        applied: String,
        shape: String,
    ) -> (ObjectResult, Option<Entry>) {
        // Only a successful replace has a live object we know the owned fields of.
        let result = |action: Action, live: Option<&Value>| ObjectResult {
            key: p.key.clone(),
            spec: p.obj.spec.clone(),
            action,
            live: live.map(Packed::new),
            fields: None,
        };
        let uid = live["metadata"]["uid"].as_str().map(str::to_string);
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.writes.count(Verb::Delete);
        match api.delete(&p.key.name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                return (
                    result(
                        Action::Failed(format!("replacing: delete failed: {e}")),
                        Some(live),
                    ),
                    None,
                );
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            match api.get_opt(&p.key.name).await {
                Ok(None) => break,
                Ok(Some(o)) if o.metadata.uid != uid => break,
                Ok(Some(_)) | Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                _ => {
                    return (
                        result(
                            Action::Failed("replacing: the old object did not go away".into()),
                            None,
                        ),
                        None,
                    );
                }
            }
        }
        self.writes.count(Verb::Patch);
        match api
            .patch(
                &p.key.name,
                &PatchParams::apply(&self.opts.field_manager),
                &Patch::Apply(&p.body),
            )
            .await
        {
            Ok(obj) => {
                let v = Live::of(obj, &self.opts);
                tracing::info!("replaced");
                let e = self.entry_for(p, &v, applied, shape);
                let fields = Some(v.fields);
                let r = ObjectResult {
                    fields,
                    ..result(Action::Replaced, Some(&v.value))
                };
                (r, Some(e))
            }
            Err(e) => (
                result(
                    Action::Failed(format!("replacing: create failed: {e}")),
                    None,
                ),
                None,
            ),
        }
    }

    /// The API kinds of `objects`, plus Endpoints when there are Services (their
    /// readiness figures): what the daemon watches.
    pub async fn resolved_kinds<'a>(
        &self,
        kinds: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<Resolved> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let kinds: Vec<(&str, &str)> = kinds.collect();
        let endpoints = kinds
            .iter()
            .any(|(api_version, kind)| *api_version == "v1" && *kind == "Service")
            .then_some(("v1", "Endpoints"));
        let kinds = kinds.into_iter().chain(endpoints);
        for (api_version, kind) in kinds {
            if !seen.insert((api_version.to_string(), kind.to_string())) {
                continue;
            }
            if let Ok(r) = self.resolver.resolve(api_version, kind).await {
                out.push(r);
            }
        }
        out
    }

    /// The Pods a Deployment's selector matches.
    pub async fn pods_of(
        &self,
        deployment: &ObjKey,
        observed: &Observed,
    ) -> Result<Vec<Value>, kube::Error> {
        match observed.objects.get(deployment) {
            Some(live) => {
                self.pods_matching(&deployment.namespace, &live.value())
                    .await
            }
            None => Ok(Vec::new()),
        }
    }

    /// The Pods in `namespace` that a live Deployment's matchLabels select.
    async fn pods_matching(
        &self,
        namespace: &str,
        deployment: &Value,
    ) -> Result<Vec<Value>, kube::Error> {
        let Some(labels) = deployment["spec"]["selector"]["matchLabels"].as_object() else {
            return Ok(Vec::new());
        };
        let selector: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default().labels(&selector.join(",")))
            .await?;
        Ok(list
            .items
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
            .collect())
    }

    /// The live state of `objects` (by key; absent = not found) and, for Services, their
    /// Endpoints: what readiness is computed from.
    pub async fn observe(&self, objects: &[Object]) -> Result<Observed, ApplyError> {
        let planned = self.plan(objects, &BTreeSet::new()).await;
        let wanted: BTreeSet<&ObjKey> = planned.iter().map(|p| &p.key).collect();
        let live: HashMap<ObjKey, Value> = self
            .list_owned(&planned, true, 1)
            .await?
            .0
            .into_iter()
            .filter(|(k, _)| wanted.contains(k))
            .map(|(k, l)| (k, l.value))
            .collect();
        let mut pods = HashMap::new();
        for p in planned
            .iter()
            .filter(|p| p.key.group == "apps" && p.key.kind == "Deployment")
        {
            let Some(deployment) = live.get(&p.key) else {
                continue;
            };
            if let Ok(items) = self.pods_matching(&p.key.namespace, deployment).await {
                pods.insert(p.key.clone(), items);
            }
        }
        let mut endpoints = HashMap::new();
        for p in planned
            .iter()
            .filter(|p| p.key.group.is_empty() && p.key.kind == "Service")
        {
            if !live.contains_key(&p.key) {
                continue;
            }
            let api: Api<k8s_openapi::api::core::v1::Endpoints> =
                Api::namespaced(self.client.clone(), &p.key.namespace);
            if let Ok(Some(ep)) = api.get_opt(&p.key.name).await {
                endpoints.insert(
                    (p.key.namespace.clone(), p.key.name.clone()),
                    Packed::new(&serde_json::to_value(ep).unwrap_or(Value::Null)),
                );
            }
        }
        Ok(Observed {
            objects: live
                .into_iter()
                .map(|(k, v)| (k, Packed::new(&v)))
                .collect(),
            endpoints,
            pods,
        })
    }
}

/// Live objects by key, Endpoints by (namespace, name), and the Pods of each Deployment
/// (a Deployment never says why its Pods fail; they do).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub objects: HashMap<ObjKey, Packed>,
    pub endpoints: HashMap<(String, String), Packed>,
    pub pods: HashMap<ObjKey, Vec<Value>>,
}

/// A JSON value kept as its compact text, parsed again where it is read. The daemon
/// holds a readiness view of every owned object for as long as it runs: as a `Value`
/// (a map node is about 600 bytes, however few keys it has) a Deployment's view is
/// about 6 KiB, as text well under 1 KiB. Reading one back costs a few microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed(Box<str>);

impl Packed {
    pub fn new(value: &Value) -> Packed {
        // Serialising a `Value` cannot fail (its map keys are strings).
        Packed(serde_json::to_string(value).unwrap_or_default().into())
    }

    /// The value again (`Null` if the text were not JSON, which `new` never makes).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// From this many objects of one kind (in one namespace, for objects not ours) a list
/// is cheaper than reading each.
const LIST_FROM: usize = 8;

fn resource_id(r: &Resolved) -> String {
    format!(
        "{}/{}/{}",
        r.resource.group, r.resource.version, r.resource.plural
    )
}

fn is_pod(key: &ObjKey) -> bool {
    key.group.is_empty() && key.kind == "Pod"
}

/// Discovery knows the scope for certain: a cluster-scoped object loses any namespace, a
/// namespaced one without a namespace gets "default".
/// The body is borrowed when it already says so (every rendered kind's does): a copy of
/// every body per sync was a third of a sync's memory.
pub(crate) fn fix_namespace<'a>(
    obj: &'a Object,
    resolved: Option<&Resolved>,
) -> (Cow<'a, Value>, Option<String>) {
    let namespace = match resolved.map(|r| r.namespaced) {
        Some(false) => None,
        Some(true) => Some(
            obj.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
        ),
        None => obj.namespace.clone(),
    };
    if obj.body["metadata"].is_object()
        && obj.body["metadata"]["namespace"].as_str() == namespace.as_deref()
    {
        return (Cow::Borrowed(&obj.body), namespace);
    }
    let mut body = obj.body.clone();
    crate::render::set_namespace(&mut body, namespace.as_deref());
    (Cow::Owned(body), namespace)
}

/// Objects per page when listing, full or metadata only (each metadata item's
/// managedFields still parse as JSON trees: a page of 2,000 held 13 MiB).
const LIST_PAGE: u32 = 500;

/// The namespaces the namespaced objects of `planned` live in.
fn namespaces_needed(planned: &[Planned<'_>]) -> BTreeSet<String> {
    planned
        .iter()
        .filter(|p| p.resolved.as_ref().is_ok_and(|r| r.namespaced))
        .map(|p| p.key.namespace.clone())
        .filter(|ns| !ns.is_empty())
        .collect()
}

/// A full list, page by page, each item passed through `f` before the next page is read
/// (so a whole list of full objects is never held at once).
pub async fn list_map<T>(
    api: &Api<DynamicObject>,
    selector: &str,
    f: impl FnMut(DynamicObject) -> T,
) -> Result<Vec<T>, kube::Error> {
    paged(selector, |lp| async move { api.list(&lp).await }, f).await
}

/// `list_map` of metadata only (`PartialObjectMetadataList`).
async fn list_meta_map<T>(
    api: &Api<DynamicObject>,
    selector: &str,
    mut f: impl FnMut(ObjectMeta) -> T,
) -> Result<Vec<T>, kube::Error> {
    paged(
        selector,
        |lp| async move { api.list_metadata(&lp).await },
        |item| f(item.metadata),
    )
    .await
}

/// The paging loop both lists share: `fetch` reads one page for the given parameters.
async fn paged<I: Clone, T, Fut>(
    selector: &str,
    mut fetch: impl FnMut(ListParams) -> Fut,
    mut f: impl FnMut(I) -> T,
) -> Result<Vec<T>, kube::Error>
where
    Fut: std::future::Future<Output = Result<kube::core::ObjectList<I>, kube::Error>>,
{
    let mut out = Vec::new();
    let mut lp = ListParams::default().labels(selector).limit(LIST_PAGE);
    loop {
        let page = fetch(lp.clone()).await?;
        out.extend(page.items.into_iter().map(&mut f));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ownership_is_read_from_labels() {
        let obj = |labels: Value| json!({"metadata": {"labels": labels}});
        assert_eq!(
            owner_of(
                &obj(json!({ownership::MANAGED_BY: "driftless", ownership::INSTANCE: "a"})),
                "a"
            ),
            Owner::Us
        );
        assert_eq!(
            owner_of(
                &obj(json!({ownership::MANAGED_BY: "driftless", ownership::INSTANCE: "b"})),
                "a"
            ),
            Owner::OtherInstance("b".into())
        );
        assert_eq!(
            owner_of(&obj(json!({ownership::MANAGED_BY: "helm"})), "a"),
            Owner::Foreign
        );
        assert_eq!(owner_of(&json!({}), "a"), Owner::Foreign);
    }

    #[test]
    fn owned_fields_hash_sees_only_our_apply_entries() {
        let live = |ours: Value, theirs: Value| {
            json!({"metadata": {"managedFields": [
                {"manager": "driftless", "operation": "Apply", "fieldsV1": ours},
                {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": theirs},
                {"manager": "driftless", "operation": "Update", "fieldsV1": {"f:x": {}}},
            ]}})
        };
        let base = owned_fields_hash(
            &live(json!({"f:spec": {"f:replicas": {}}}), json!({})),
            "driftless",
        );
        // Someone else's fields changing is not our drift...
        assert_eq!(
            base,
            owned_fields_hash(
                &live(json!({"f:spec": {"f:replicas": {}}}), json!({"f:a": {}})),
                "driftless"
            )
        );
        // ...losing one of ours is.
        assert_ne!(
            base,
            owned_fields_hash(
                &live(json!({"f:spec": {}}), json!({"f:spec": {"f:replicas": {}}})),
                "driftless"
            )
        );
    }

    #[test]
    fn live_objects_drop_managed_fields_but_keep_their_hash() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "managedFields": [
                {"manager": "driftless", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80}": {".": {}}}}}},
                {"manager": "kube-controller-manager", "operation": "Update",
                 "fieldsV1": {"f:status": {}}},
                {"manager": "driftless", "operation": "Apply", "apiVersion": "v1"},
            ]},
            "spec": {"ports": [{"port": 80}]}
        }))
        .unwrap();
        let full = serde_json::to_value(&obj).unwrap();
        let want = owned_fields_hash(&full, "driftless");
        assert_eq!(owned_fields_hash_of(&obj.metadata, "driftless"), want);
        let live = Live::of(obj, &Options::default());
        assert_eq!(live.fields, want);
        assert!(live.value["metadata"].get("managedFields").is_none());
        assert_eq!(live.value["spec"], full["spec"]);
    }

    #[test]
    fn hashes_are_stable_and_shape_ignores_metadata() {
        let a = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"image": "a"}});
        let b = json!({"metadata": {"labels": {"x": "2"}}, "spec": {"image": "a"}});
        assert_eq!(hash_value(&a), hash_value(&a.clone()));
        assert_ne!(hash_value(&a), hash_value(&b));
        assert_eq!(shape_hash(&a), shape_hash(&b));
        // Fixed across releases: the inventory stores it (FNV-1a 64 of `{"a":1}`).
        assert_eq!(hash_value(&json!({"a": 1})), "9c3e82dd6fcae8b1");
    }

    #[test]
    fn streamed_hashes_equal_the_hash_of_the_built_text() {
        let fnv = |text: String| format!("{:016x}", crate::spec::names::fnv1a64(text.bytes()));
        let v = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "labels": {"a": "é \"q\" \n"}},
            "spec": {"replicas": 2, "ratio": 0.5, "list": [null, true, {"z": [], "a": {}}]},
            "zzz": "after metadata"
        });
        assert_eq!(hash_value(&v), fnv(v.to_string()));
        let mut shape = v.clone();
        shape.as_object_mut().map(|o| o.remove("metadata"));
        assert_eq!(shape_hash(&v), fnv(shape.to_string()));
        assert_eq!(shape_hash(&json!("scalar")), fnv("\"scalar\"".to_string()));
    }

    #[test]
    fn a_packed_value_reads_back_as_the_same_value() {
        let v = json!({
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"a": "é \" \\ 1"}},
            "status": {"replicas": 3, "ratio": 0.5, "conditions": [{"type": "Available"}], "none": null}
        });
        let packed = Packed::new(&v);
        assert_eq!(packed.value(), v);
        assert_eq!(Packed::new(&packed.value()), packed);
    }
}
