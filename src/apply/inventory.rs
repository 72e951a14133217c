//! The inventory: what an instance has applied, kept in the cluster so that any process
//! (a restarted daemon, a one-shot `apply`) knows what it may prune.
//!
//! Stored as ConfigMaps `driftless-inventory-<instance>-<n>` in the inventory namespace,
//! each holding up to `SHARD_SIZE` entries as JSON (a ConfigMap holds at most 1 MiB).
//! Entries are written before an object is first applied (`uid: None`, "pending") and
//! confirmed after, so a crash in between never orphans an object: a pending entry is
//! matched to the live object by its ownership labels.

pub mod buckets;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::{ApplyError, ObjKey, Writes};
use crate::cluster::error_text;
use crate::object::ownership;

pub const DEFAULT_NAMESPACE: &str = "driftless-system";
const SHARD_SIZE: usize = 2000;
const DATA_KEY: &str = "entries.json";
/// Label on inventory ConfigMaps: the instance they belong to.
const INVENTORY_OF: &str = "driftless.dev/inventory-of";

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub key: ObjKey,
    pub version: String,
    /// The spec identity the object came from.
    pub spec: String,
    /// `None` until the object's first apply is confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Hash of the whole object as last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
    /// Hash of the object minus metadata as last applied: a Pod whose shape changes is
    /// replaced, as most of a Pod cannot change in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// Hash of the fields our field manager owned right after that apply. When someone
    /// else changes one of them, ownership moves and this no longer matches: drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<String>,
    /// Recorded by a sync whose prune was refused, and not released since (by a whole
    /// sync whose prune went ahead, or a prune of its spec that deleted something). Such
    /// entries are not part of the inventory a prune's share is judged against:
    /// otherwise a refused revision's own new objects would dilute the share until a
    /// retry passed (4 of 6 refused, then 4 of 8 allowed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// Pruned, but still there: being deleted (deletionTimestamp set), held by a
    /// finalizer or a grace period. Kept so that the object is not forgotten before it is
    /// gone: every sync checks it again (a GET, never another DELETE) until it is, and
    /// only then drops it. Not part of the share a new prune is judged against: that
    /// decision was taken.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// Its spec says `prune: disabled`: when the spec is removed the object stays, and
    /// only this entry goes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
    /// Decrypted from a SOPS file: once its file is gone, a diff of its prune still
    /// masks its values.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
    /// Its sync wave: prune deletes higher waves first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wave: i32,
    /// A hook (`spec::order`): its hash says whether it changed since it last ran; the
    /// object itself may be gone (deleted once it succeeded).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hook: bool,
    /// The Flux or Argo CD app its spec was rendered by (`flux/NS/NAME`, `argo/NAME`):
    /// the app's own prune guard judges it with the app's other objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The ServiceAccount it was applied as (`driftless.dev/service-account`): it is
    /// pruned only if that account may delete it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl Entry {
    /// An entry of `spec` for `key`, confirmed applied, every mark off: what tests start
    /// from.
    #[cfg(test)]
    pub(crate) fn recorded(key: ObjKey, spec: &str) -> Entry {
        Entry {
            uid: Some(format!("uid-{}", key.name)),
            key,
            version: "v1".into(),
            spec: spec.into(),
            applied: None,
            shape: None,
            fields: None,
            held: false,
            deleting: false,
            keep: false,
            sealed: false,
            wave: 0,
            hook: false,
            app: None,
            account: None,
        }
    }

    pub fn api_version(&self) -> String {
        if self.key.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.key.group, self.version)
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Boxed: the map's nodes hold each key and value inline, and filled in key order
    /// they are half empty. With entries of 304 bytes inline, 20,000 took
    /// 14.5 MiB of nodes beside the entries' own text.
    pub entries: BTreeMap<ObjKey, Box<Entry>>,
    /// Where it was read from, as the next save needs it (`buckets`).
    layout: Layout,
}

/// What a save must know of the ConfigMaps an inventory was read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Layout {
    /// The other layout's ConfigMaps that hold some of it: emptied of that (or deleted)
    /// once this layout's are written.
    pub others: Vec<String>,
    /// Held buckets read from the single layout: they have no ConfigMaps of their own yet.
    pub unwritten: std::collections::BTreeSet<u16>,
    /// This layout's ConfigMaps as read (of the held buckets, when sharded). Any a save
    /// does not leave among its parts is deleted: a part a crash left between writing the
    /// parts and deleting the surplus, or one past a gap another layout's move left,
    /// would otherwise be read again with entries since pruned.
    pub own: Vec<String>,
}

/// The ConfigMaps to delete once a save has written its parts: the old parts past the
/// new ones, and any of this layout read but not among the parts now (`valid`).
fn stale(
    own: &[String],
    surplus: impl Iterator<Item = String>,
    valid: &std::collections::BTreeSet<String>,
) -> std::collections::BTreeSet<String> {
    own.iter()
        .cloned()
        .chain(surplus)
        .filter(|name| !valid.contains(name))
        .collect()
}

impl Inventory {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[cfg(test)]
    fn shards(&self) -> Vec<String> {
        let entries: Vec<&Entry> = self.entries.values().map(Box::as_ref).collect();
        entries.chunks(SHARD_SIZE).map(text).collect()
    }
}

/// The text of one ConfigMap's part.
fn text(chunk: &[&Entry]) -> String {
    serde_json::to_string(chunk).unwrap_or_else(|_| "[]".to_string())
}

/// The entries of each group of parts: the single layout's under `None`, each bucket's
/// (when sharded) under its number. Each group is kept in parts of `SHARD_SIZE`.
type Groups<'a> = BTreeMap<Option<u16>, Vec<&'a Entry>>;

/// A digest of one part's entries.
type Digest = [u8; 32];

/// SHA-256 over the entries' own fields (their `Hash`), not their text: a save of an
/// unchanged inventory serialises nothing.
fn digest(chunk: &[&Entry]) -> Digest {
    use std::hash::Hash as _;
    /// Feeds what `Hash` writes into the digest; `finish` is never asked.
    struct Sha(sha2::Sha256);
    impl std::hash::Hasher for Sha {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0
        }
    }
    let mut sha = Sha(sha2::Sha256::new());
    chunk.hash(&mut sha);
    sha.0.finalize().into()
}

/// An inventory as it stands in its ConfigMaps (as read, or as last saved): what the next
/// save compares against to write only the parts that changed. It holds a digest of each
/// part, not the entries: a copy of them, kept through every apply for that comparison,
/// was 15 MiB at 10,000 specs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    layout: Layout,
    /// Each part's digest, by group (`Groups`).
    parts: BTreeMap<Option<u16>, Vec<Digest>>,
}

impl Written {
    fn of(layout: &Layout, groups: &Groups<'_>) -> Written {
        Written {
            layout: layout.clone(),
            parts: groups
                .iter()
                .map(|(b, es)| (*b, es.chunks(SHARD_SIZE).map(digest).collect()))
                .collect(),
        }
    }

    /// The digests of the part(s) of `bucket` (`None`: the single layout's).
    fn part(&self, bucket: Option<u16>) -> &[Digest] {
        self.parts
            .get(&bucket)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// Where an instance's inventory lives.
#[derive(Debug, Clone)]
pub struct Store {
    pub namespace: String,
    pub instance: String,
    pub field_manager: String,
    /// The buckets this replica holds when replicas share the tree (`run --shard`): only
    /// theirs are read and written, in the bucketed layout (`buckets`).
    pub buckets: Option<buckets::Held>,
}

impl Store {
    fn shard_name(&self, n: usize) -> String {
        format!("driftless-inventory-{}-{n}", self.instance)
    }

    fn selector(&self) -> String {
        format!("{INVENTORY_OF}={}", self.instance)
    }

    /// The instance's inventory ConfigMaps; none when the inventory namespace does not
    /// exist yet (nothing was ever applied).
    async fn configmaps(&self, client: &Client) -> Result<Vec<ConfigMap>, ApplyError> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        match api
            .list(&ListParams::default().labels(&self.selector()))
            .await
        {
            Ok(l) => Ok(l.items),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
            // Every sync reads the inventory first: what keeps it from the cluster is
            // said as what it is.
            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 401) => {
                Err(ApplyError::Unauthorized(crate::cluster::error_text(&e)))
            }
            Err(
                e @ (kube::Error::HyperError(_)
                | kube::Error::Service(_)
                | kube::Error::HttpError(_)),
            ) => Err(ApplyError::Unreachable(crate::cluster::error_text(&e))),
            Err(e) => Err(ApplyError::Inventory(format!(
                "reading it in {}: {}",
                self.namespace,
                crate::cluster::error_text(&e)
            ))),
        }
    }

    /// The entries one ConfigMap holds, read as `T` (`None`: it holds none).
    fn entries_of<T: serde::de::DeserializeOwned>(
        &self,
        cm: &ConfigMap,
    ) -> Result<Option<Vec<T>>, ApplyError> {
        let Some(text) = cm.data.as_ref().and_then(|d| d.get(DATA_KEY)) else {
            return Ok(None);
        };
        serde_json::from_str(text).map(Some).map_err(|e| {
            ApplyError::Inventory(format!(
                "{}/{} is corrupt: {e}",
                self.namespace,
                cm.name_any()
            ))
        })
    }

    pub async fn load(&self, client: &Client) -> Result<Inventory, ApplyError> {
        let items = self.configmaps(client).await?;
        let mut listed = Vec::with_capacity(items.len());
        for cm in items {
            let Some(entries) = self.entries_of::<Entry>(&cm)? else {
                continue;
            };
            let bucket = cm
                .labels()
                .get(buckets::BUCKET_OF)
                .and_then(|b| b.parse().ok());
            listed.push(buckets::Listed {
                name: cm.name_any(),
                bucket,
                entries,
            });
        }
        let mut inv = match &self.buckets {
            Some(held) => buckets::load_held(held, listed),
            None => buckets::load_all(listed),
        };
        // Built again in one pass from its sorted entries: filled entry by entry, in key
        // order, the map's nodes were about half empty (3.7 MiB of a 10,000-spec sync's
        // peak); built whole, they are full.
        inv.entries = std::mem::take(&mut inv.entries).into_iter().collect();
        Ok(inv)
    }

    /// The kinds (`apiVersion`, kind) of every object the instance's inventory records,
    /// in any bucket, hooks left out (readiness does not follow them): what a restarted
    /// daemon watches before its first sync. Only those fields of each entry are read.
    pub async fn kinds(&self, client: &Client) -> Result<BTreeSet<(String, String)>, ApplyError> {
        #[derive(Deserialize)]
        struct KindOf {
            #[serde(default)]
            group: String,
            kind: String,
            version: String,
            #[serde(default)]
            hook: bool,
        }
        let mut kinds = BTreeSet::new();
        for cm in self.configmaps(client).await? {
            let Some(entries) = self.entries_of::<KindOf>(&cm)? else {
                continue;
            };
            for e in entries.into_iter().filter(|e| !e.hook) {
                let api_version = match e.group.is_empty() {
                    true => e.version,
                    false => format!("{}/{}", e.group, e.version),
                };
                kinds.insert((api_version, e.kind));
            }
        }
        Ok(kinds)
    }

    /// How `inv` is divided into ConfigMaps: the single layout's parts, or each bucket's.
    fn groups<'a>(&self, inv: &'a Inventory) -> Groups<'a> {
        match self.buckets {
            None => BTreeMap::from([(None, inv.entries.values().map(Box::as_ref).collect())]),
            Some(_) => buckets::by_bucket(inv)
                .into_iter()
                .map(|(b, es)| (Some(b), es))
                .collect(),
        }
    }

    /// `inv` as its ConfigMaps hold it: what a save compares against.
    pub fn written(&self, inv: &Inventory) -> Written {
        Written::of(&inv.layout, &self.groups(inv))
    }

    /// Writes `next` where it differs from `prev` (no write when nothing changed), and
    /// says what stands written now.
    pub async fn save(
        &self,
        client: &Client,
        prev: &Written,
        next: &Inventory,
        writes: &Writes,
    ) -> Result<Written, ApplyError> {
        let groups = self.groups(next);
        let now = Written::of(&next.layout, &groups);
        if *prev == now {
            return Ok(now);
        }
        self.ensure_namespace(client, writes).await?;
        if let Some(held) = &self.buckets {
            buckets::save_held(self, held, client, prev, &groups, &now, writes).await?;
            return Ok(now);
        }
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        // Read partly from the bucketed layout, which is removed below: what this layout
        // holds is not what `prev` says, so every part is written.
        let old = match prev.layout.others.is_empty() {
            true => prev.part(None),
            false => &[],
        };
        let new = groups.get(&None).map(Vec::as_slice).unwrap_or_default();
        let new: Vec<&[&Entry]> = new.chunks(SHARD_SIZE).collect();
        let old_count = prev.part(None).len();
        let pp = PatchParams::apply(&self.field_manager).force();
        for (n, chunk) in new.iter().enumerate() {
            if old.get(n) == now.part(None).get(n) {
                continue;
            }
            let data = text(chunk);
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(self.shard_name(n)),
                    namespace: Some(self.namespace.clone()),
                    labels: Some(BTreeMap::from([
                        (INVENTORY_OF.to_string(), self.instance.clone()),
                        (ownership::INSTANCE.to_string(), self.instance.clone()),
                    ])),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([(DATA_KEY.to_string(), data)])),
                ..ConfigMap::default()
            };
            writes.count(super::Verb::Patch);
            api.patch(&self.shard_name(n), &pp, &Patch::Apply(&cm))
                .await
                .map_err(|e| {
                    ApplyError::Inventory(format!(
                        "writing {}: {}",
                        self.shard_name(n),
                        error_text(&e)
                    ))
                })?;
        }
        let valid = (0..new.len()).map(|n| self.shard_name(n)).collect();
        let surplus = (new.len()..old_count).map(|n| self.shard_name(n));
        for name in stale(&prev.layout.own, surplus, &valid) {
            writes.count(super::Verb::Delete);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    return Err(ApplyError::Inventory(format!(
                        "deleting {name}: {}",
                        error_text(&e)
                    )));
                }
            }
        }
        buckets::remove_bucketed(self, client, &prev.layout.others, writes).await?;
        // An instance that holds nothing any more (uninstalled) keeps no suspensions of
        // specs it no longer has either.
        if next.is_empty() {
            let name = super::suspensions::configmap_name(&self.instance);
            if api.get_opt(&name).await.ok().flatten().is_some() {
                writes.count(super::Verb::Delete);
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!(configmap = %name, "suspensions of an instance that holds nothing removed")
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        return Err(ApplyError::Inventory(format!(
                            "deleting {name}: {}",
                            error_text(&e)
                        )));
                    }
                }
            }
        }
        Ok(now)
    }

    pub(super) async fn ensure_namespace(
        &self,
        client: &Client,
        writes: &Writes,
    ) -> Result<(), ApplyError> {
        let api: Api<Namespace> = Api::all(client.clone());
        if api
            .get_opt(&self.namespace)
            .await
            .map_err(|e| ApplyError::Inventory(crate::cluster::error_text(&e)))?
            .is_some()
        {
            return Ok(());
        }
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(self.namespace.clone()),
                // Shared by every instance: none of them may prune it.
                labels: Some(BTreeMap::from([(
                    ownership::SYSTEM.to_string(),
                    "true".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        writes.count(super::Verb::Create);
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(ApplyError::Inventory(format!(
                "creating namespace {}: {}",
                self.namespace,
                error_text(&e)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> Entry {
        Entry {
            key: ObjKey {
                group: String::new(),
                kind: "Service".into(),
                namespace: "ns".into(),
                name: format!("s{i:05}"),
            },
            version: "v1".into(),
            spec: "localservice/ns/s".into(),
            uid: Some(format!("uid-{i}")),
            applied: Some("h".into()),
            shape: None,
            fields: Some("f".into()),
            held: i.is_multiple_of(2),
            deleting: i.is_multiple_of(3),
            keep: i.is_multiple_of(5),
            sealed: i.is_multiple_of(7),
            wave: (i % 3) as i32 - 1,
            hook: i.is_multiple_of(11),
            app: i.is_multiple_of(13).then(|| "argo/web".into()),
            account: i.is_multiple_of(17).then(|| "apps/dev-team".into()),
        }
    }

    #[test]
    fn shards_split_at_the_shard_size_and_round_trip() {
        let mut inv = Inventory::default();
        for i in 0..(SHARD_SIZE * 2 + 5) {
            let e = entry(i);
            inv.entries.insert(e.key.clone(), Box::new(e));
        }
        let shards = inv.shards();
        assert_eq!(shards.len(), 3);
        // Well under a ConfigMap's 1 MiB.
        assert!(
            shards.iter().all(|s| s.len() < 700 * 1024),
            "{}",
            shards[0].len()
        );
        let mut back = Inventory::default();
        for s in &shards {
            for e in serde_json::from_str::<Vec<Entry>>(s).unwrap() {
                back.entries.insert(e.key.clone(), Box::new(e));
            }
        }
        assert_eq!(back, inv);
    }

    #[test]
    fn what_stands_written_changes_in_the_one_part_whose_entries_changed() {
        let store = |buckets| Store {
            namespace: "ns".into(),
            instance: "i".into(),
            field_manager: "driftless".into(),
            buckets,
        };
        let mut inv = Inventory::default();
        for i in 0..(SHARD_SIZE * 2 + 5) {
            let e = entry(i);
            inv.entries.insert(e.key.clone(), Box::new(e));
        }
        for store in [
            store(None),
            store(Some(std::sync::Arc::new((0..64).collect()))),
        ] {
            let before = store.written(&inv);
            assert_eq!(before, store.written(&inv.clone()));
            let mut next = inv.clone();
            let key = next.entries.keys().nth(SHARD_SIZE + 1).unwrap().clone();
            next.entries.get_mut(&key).unwrap().uid = Some("another".into());
            let after = store.written(&next);
            let changed: Vec<(Option<u16>, usize)> = before
                .parts
                .iter()
                .flat_map(|(b, ds)| ds.iter().enumerate().map(move |(n, d)| (*b, n, d)))
                .filter(|(b, n, d)| after.part(*b).get(*n) != Some(d))
                .map(|(b, n, _)| (b, n))
                .collect();
            let bucket = store
                .buckets
                .as_ref()
                .map(|_| buckets::bucket_of(&next.entries[&key].spec));
            // Every entry is of one spec, so one bucket holds them all, in parts of the
            // same size as the single layout's.
            assert_eq!(changed, [(bucket, 1)]);
        }
    }

    #[test]
    fn a_save_deletes_the_parts_it_leaves_out_also_past_a_gap() {
        let valid = ["inv-0".to_string()].into();
        // Read: parts 0 and 2 (1 was emptied and deleted by a sharded member's move).
        let own = ["inv-0".to_string(), "inv-2".to_string()];
        let gone = stale(&own, ["inv-1".to_string()].into_iter(), &valid);
        assert_eq!(gone, ["inv-1".to_string(), "inv-2".to_string()].into());
    }

    #[test]
    fn pending_entries_omit_uid_and_hashes() {
        let mut e = entry(1);
        e.uid = None;
        e.applied = None;
        e.fields = None;
        let json = serde_json::to_string(&e).unwrap();
        assert!(!json.contains("uid") && !json.contains("applied"), "{json}");
        assert_eq!(serde_json::from_str::<Entry>(&json).unwrap(), e);
    }
}
