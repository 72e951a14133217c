//! Buckets: the fixed division of an instance's specs that replicas sharing one tree
//! (`run --shard`) hand between them, and the inventory's layout by bucket.
//!
//! A spec's bucket is a hash of its id alone, so it never moves while the number of
//! buckets stays: whoever holds the bucket finds every entry the spec ever recorded in
//! the bucket's own ConfigMaps (`driftless-buckets-<instance>-<bucket>-<n>`), written by
//! one member at a time. A replica that does not shard keeps the single layout
//! (`inventory`); each layout reads the other's ConfigMaps and empties them of what it
//! holds, so an instance can move between the two without losing an entry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use sha2::Digest;

use super::{DATA_KEY, Entry, Groups, INVENTORY_OF, Inventory, SHARD_SIZE, Store, Written};
use crate::apply::{ApplyError, Verb, Writes};
use crate::cluster::error_text;
use crate::object::ownership;

/// How many buckets an instance's specs fall into: enough for a few dozen replicas to
/// share evenly, few enough that the holders' table stays one small ConfigMap.
pub const BUCKETS: u16 = 64;

/// Label on the bucketed layout's ConfigMaps: the bucket they hold.
pub(super) const BUCKET_OF: &str = "driftless.dev/inventory-bucket";

/// The buckets one replica holds.
pub type Held = Arc<BTreeSet<u16>>;

/// The bucket of spec `id`.
pub fn bucket_of(id: &str) -> u16 {
    let digest = sha2::Sha256::digest(id.as_bytes());
    u16::from_be_bytes([digest[0], digest[1]]) % BUCKETS
}

fn chunk_name(instance: &str, bucket: u16, n: usize) -> String {
    format!("driftless-buckets-{instance}-{bucket}-{n}")
}

/// One ConfigMap of either layout, as listed.
pub(super) struct Listed {
    pub name: String,
    pub bucket: Option<u16>,
    pub entries: Vec<Entry>,
}

/// The inventory of the buckets `held`: a bucket's own ConfigMaps win over what the
/// single layout still lists for it (written before the bucket's were, or by a replica
/// that crashed between the two writes).
pub(super) fn load_held(held: &BTreeSet<u16>, listed: Vec<Listed>) -> Inventory {
    let bucketed: BTreeSet<u16> = listed.iter().filter_map(|l| l.bucket).collect();
    let mut inv = Inventory::default();
    let mut single = Vec::new();
    for l in listed {
        match l.bucket {
            Some(b) if held.contains(&b) => {
                inv.layout.own.push(l.name);
                for e in l.entries {
                    inv.entries.insert(e.key.clone(), Box::new(e));
                }
            }
            Some(_) => {}
            None => single.push(l),
        }
    }
    for l in single {
        let mut ours = false;
        for e in l.entries {
            let b = bucket_of(&e.spec);
            if !held.contains(&b) {
                continue;
            }
            ours = true;
            if !bucketed.contains(&b) {
                inv.layout.unwritten.insert(b);
                inv.entries
                    .entry(e.key.clone())
                    .or_insert_with(|| Box::new(e));
            }
        }
        if ours {
            inv.layout.others.push(l.name);
        }
    }
    inv
}

/// The single layout's inventory: its own entries win for any bucket it lists (it is
/// the newer when a replica that stopped sharding crashed before removing the
/// bucketed ConfigMaps); a bucket it does not list is read from the bucket's own.
pub(super) fn load_all(listed: Vec<Listed>) -> Inventory {
    let mut inv = Inventory::default();
    let mut bucketed = Vec::new();
    for l in listed {
        match l.bucket {
            Some(_) => bucketed.push(l),
            None => {
                inv.layout.own.push(l.name);
                for e in l.entries {
                    inv.entries.insert(e.key.clone(), Box::new(e));
                }
            }
        }
    }
    let single: BTreeSet<u16> = inv.entries.values().map(|e| bucket_of(&e.spec)).collect();
    for l in bucketed {
        if l.bucket.is_some_and(|b| !single.contains(&b)) {
            for e in l.entries {
                inv.entries
                    .entry(e.key.clone())
                    .or_insert_with(|| Box::new(e));
            }
        }
        inv.layout.others.push(l.name);
    }
    inv
}

/// Groups `inv`'s entries by bucket.
pub(super) fn by_bucket(inv: &Inventory) -> BTreeMap<u16, Vec<&Entry>> {
    let mut out: BTreeMap<u16, Vec<&Entry>> = BTreeMap::new();
    for e in inv.entries.values() {
        out.entry(bucket_of(&e.spec)).or_default().push(e);
    }
    out
}

/// Writes the held buckets of the inventory `groups` holds by bucket (`now`: their
/// digests) where they differ from `prev`, then takes what they hold out of the single
/// layout's ConfigMaps (once their own are written).
pub(super) async fn save_held(
    store: &Store,
    held: &BTreeSet<u16>,
    client: &Client,
    prev: &Written,
    groups: &Groups<'_>,
    now: &Written,
    writes: &Writes,
) -> Result<(), ApplyError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &store.namespace);
    let stray = groups
        .iter()
        .filter(|(b, _)| b.is_none_or(|b| !held.contains(&b)))
        .find_map(|(_, entries)| entries.first());
    if let Some(Entry { spec, .. }) = stray {
        // Never written into a bucket another replica may hold: that would lose its
        // entries. The daemon syncs only the specs of held buckets.
        return Err(ApplyError::Inventory(format!(
            "spec {spec} is not in a bucket this replica holds; its objects were not recorded"
        )));
    }
    let pp = PatchParams::apply(&store.field_manager).force();
    let (mut valid, mut surplus) = (BTreeSet::new(), Vec::new());
    for &b in held {
        let entries = groups.get(&Some(b)).map(Vec::as_slice).unwrap_or_default();
        let new_chunks: Vec<&[&Entry]> = entries.chunks(SHARD_SIZE).collect();
        // A bucket read from the single layout has no ConfigMap of its own yet.
        let old_chunks = match prev.layout.unwritten.contains(&b) {
            true => &[],
            false => prev.part(Some(b)),
        };
        for (n, chunk) in new_chunks.iter().enumerate() {
            let name = chunk_name(&store.instance, b, n);
            valid.insert(name.clone());
            if old_chunks.get(n) == now.part(Some(b)).get(n) {
                continue;
            }
            let data = super::text(chunk);
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(store.namespace.clone()),
                    labels: Some(BTreeMap::from([
                        (INVENTORY_OF.to_string(), store.instance.clone()),
                        (ownership::INSTANCE.to_string(), store.instance.clone()),
                        (BUCKET_OF.to_string(), b.to_string()),
                    ])),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([(DATA_KEY.to_string(), data)])),
                ..ConfigMap::default()
            };
            writes.count(Verb::Patch);
            api.patch(&name, &pp, &Patch::Apply(&cm))
                .await
                .map_err(|e| {
                    ApplyError::Inventory(format!("writing {name}: {}", error_text(&e)))
                })?;
        }
        surplus.extend(
            (new_chunks.len()..old_chunks.len()).map(|n| chunk_name(&store.instance, b, n)),
        );
    }
    for name in &prev.layout.others {
        take_out(&api, name, held, writes).await?;
    }
    for name in super::stale(&prev.layout.own, surplus.into_iter(), &valid) {
        delete(&api, &name, None, writes).await?;
    }
    Ok(())
}

/// Removes the entries of `held` buckets from the single layout's ConfigMap `name`
/// (deleted once empty). Other replicas do the same for their buckets at the same
/// time: each write names the version it read, and a conflict reads again.
async fn take_out(
    api: &Api<ConfigMap>,
    name: &str,
    held: &BTreeSet<u16>,
    writes: &Writes,
) -> Result<(), ApplyError> {
    for _ in 0..8 {
        let Some(mut cm) = api
            .get_opt(name)
            .await
            .map_err(|e| ApplyError::Inventory(format!("reading {name}: {}", error_text(&e))))?
        else {
            return Ok(());
        };
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(DATA_KEY))
            .cloned()
            .unwrap_or_else(|| "[]".to_string());
        let entries: Vec<Entry> = serde_json::from_str(&text)
            .map_err(|e| ApplyError::Inventory(format!("{name} is corrupt: {e}")))?;
        let before = entries.len();
        let rest: Vec<Entry> = entries
            .into_iter()
            .filter(|e| !held.contains(&bucket_of(&e.spec)))
            .collect();
        if rest.len() == before {
            return Ok(());
        }
        let version = cm.resource_version();
        let result = if rest.is_empty() {
            delete(api, name, version, writes).await.map(|_| true)
        } else {
            let data = serde_json::to_string(&rest).unwrap_or_else(|_| "[]".to_string());
            cm.data = Some(BTreeMap::from([(DATA_KEY.to_string(), data)]));
            // A replace, counted with the other changes of an existing object.
            writes.count(Verb::Patch);
            match api.replace(name, &PostParams::default(), &cm).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(ApplyError::Inventory(format!(
                    "writing {name}: {}",
                    error_text(&e)
                ))),
            }
        };
        if result? {
            return Ok(());
        }
    }
    Err(ApplyError::Inventory(format!(
        "{name}: other replicas kept changing it; tried 8 times"
    )))
}

/// Deletes ConfigMap `name` (as of `version`, when given). Gone already is done; a
/// version that moved on is `Ok(false)`, to be read again.
async fn delete(
    api: &Api<ConfigMap>,
    name: &str,
    version: Option<String>,
    writes: &Writes,
) -> Result<bool, ApplyError> {
    let dp = DeleteParams {
        preconditions: version.map(|v| Preconditions {
            resource_version: Some(v),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    writes.count(Verb::Delete);
    match api.delete(name, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(ApplyError::Inventory(format!(
            "deleting {name}: {}",
            error_text(&e)
        ))),
    }
}

/// Removes the bucketed layout's ConfigMaps `names` once the single layout holds all
/// they did.
pub(super) async fn remove_bucketed(
    store: &Store,
    client: &Client,
    names: &[String],
    writes: &Writes,
) -> Result<(), ApplyError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &store.namespace);
    for name in names {
        delete(&api, name, None, writes).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjKey;

    fn entry(name: &str, spec: &str) -> Entry {
        let key = ObjKey {
            group: String::new(),
            kind: "ServiceAccount".into(),
            namespace: "ns".into(),
            name: name.into(),
        };
        Entry::recorded(key, spec)
    }

    /// Two spec ids in different buckets.
    fn two_buckets() -> (String, String) {
        let a = "yaml/a.yaml".to_string();
        let b = (0..)
            .map(|i| format!("yaml/b{i}.yaml"))
            .find(|b| bucket_of(b) != bucket_of(&a))
            .unwrap();
        (a, b)
    }

    #[test]
    fn a_spec_keeps_its_bucket_and_buckets_are_used_evenly() {
        assert_eq!(bucket_of("yaml/a.yaml"), bucket_of("yaml/a.yaml"));
        let mut counts = [0u32; BUCKETS as usize];
        for i in 0..6400 {
            counts[bucket_of(&format!("elasticweb/ns/w{i:05}")) as usize] += 1;
        }
        // 100 each on average.
        assert!(
            counts.iter().all(|&c| (60..=140).contains(&c)),
            "{counts:?}"
        );
    }

    #[tokio::test]
    async fn a_replica_writes_nothing_when_an_entry_is_of_a_bucket_it_does_not_hold() {
        let (a, b) = two_buckets();
        let held = Arc::new(BTreeSet::from([bucket_of(&a)]));
        let store = Store {
            namespace: "ns".into(),
            instance: "i".into(),
            field_manager: "driftless".into(),
            buckets: Some(held.clone()),
        };
        let mut inv = Inventory::default();
        for e in [entry("sa", &a), entry("sb", &b)] {
            inv.entries.insert(e.key.clone(), Box::new(e));
        }
        // Nothing listens there: a request would fail with another error.
        let client =
            Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        let groups = store.groups(&inv);
        let now = store.written(&inv);
        let prev = store.written(&Inventory::default());
        let writes = Writes::default();
        let err = save_held(&store, &held, &client, &prev, &groups, &now, &writes)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            ApplyError::Inventory(format!(
                "spec {b} is not in a bucket this replica holds; its objects were not recorded"
            ))
            .to_string()
        );
        assert_eq!(writes.total(), 0);
    }

    #[test]
    fn a_buckets_own_configmap_wins_over_the_single_layout() {
        let (a, b) = two_buckets();
        let (ba, bb) = (bucket_of(&a), bucket_of(&b));
        let held = BTreeSet::from([ba, bb]);
        let listed = vec![
            Listed {
                name: "driftless-inventory-i-0".into(),
                bucket: None,
                entries: vec![entry("old-a", &a), entry("sb", &b)],
            },
            Listed {
                name: format!("driftless-buckets-i-{ba}-0"),
                bucket: Some(ba),
                entries: vec![entry("new-a", &a)],
            },
        ];
        let inv = load_held(&held, listed);
        let names: Vec<&str> = inv.entries.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["new-a", "sb"]);
        assert_eq!(inv.layout.unwritten, BTreeSet::from([bb]));
        assert_eq!(inv.layout.others, ["driftless-inventory-i-0"]);
        assert_eq!(inv.layout.own, [format!("driftless-buckets-i-{ba}-0")]);
    }

    #[test]
    fn a_replica_reads_only_the_buckets_it_holds() {
        let (a, b) = two_buckets();
        let listed = vec![
            Listed {
                name: "driftless-inventory-i-0".into(),
                bucket: None,
                entries: vec![entry("sa", &a), entry("sb", &b)],
            },
            Listed {
                name: format!("driftless-buckets-i-{}-0", bucket_of(&b)),
                bucket: Some(bucket_of(&b)),
                entries: vec![entry("sb2", &b)],
            },
        ];
        let inv = load_held(&BTreeSet::from([bucket_of(&a)]), listed);
        let names: Vec<&str> = inv.entries.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["sa"]);
    }

    #[test]
    fn the_single_layout_wins_for_a_bucket_it_lists_and_reads_the_rest_from_theirs() {
        let (a, b) = two_buckets();
        let listed = vec![
            Listed {
                name: format!("driftless-buckets-i-{}-0", bucket_of(&a)),
                bucket: Some(bucket_of(&a)),
                entries: vec![entry("stale-a", &a)],
            },
            Listed {
                name: "driftless-inventory-i-0".into(),
                bucket: None,
                entries: vec![entry("sa", &a)],
            },
            Listed {
                name: format!("driftless-buckets-i-{}-0", bucket_of(&b)),
                bucket: Some(bucket_of(&b)),
                entries: vec![entry("sb", &b)],
            },
        ];
        let inv = load_all(listed);
        let names: Vec<&str> = inv.entries.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["sa", "sb"]);
        assert_eq!(inv.layout.others.len(), 2);
    }
}
