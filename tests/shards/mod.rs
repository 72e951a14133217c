//! Replicas of one instance share a tree (issue #47, items 4-5; the first test with the
//! issue's 3,000 specs, the others with 30): `run --shard` divides the
//! specs into 64 buckets by a hash of their ids and the buckets among the live members
//! (each renews a Lease of its own), so each member applies, prunes and reports only its
//! own. A member that dies (SIGKILL) has its buckets taken over once its Lease expires; a
//! member that can no longer renew its Lease stops writing before it expires. Either way
//! every object is written by one member, once. An instance moves between one replica and
//! members (the inventory's single layout and a ConfigMap per bucket) without losing what
//! it prunes. Each member shows the whole tree: its own specs, and the others' as they
//! publish them (a ConfigMap each). A member stopped hands its buckets over as it leaves.
//! The tests count the apiserver's own ServiceAccount writes (the specs' kind; the
//! inventory, the holders table and the parts are ConfigMaps, the membership Leases),
//! hence `serial_`.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use support::Daemon;

/// One ServiceAccount per spec file: a kind nothing else in the test namespace writes
/// (but its `default` account, made before the counts start).
const SPECS: usize = 30;
/// The tree of the first test, as issue #47 sizes it: three members hold about 1,000 each.
const MANY: usize = 3000;
/// A bound on the first sync of `MANY` specs by three members, and on their takeover of
/// a killed one's share; not a timing.
const MANY_WAIT: Duration = Duration::from_secs(600);
const BUCKETS: u64 = 64;
const WRITTEN: &[&str] = &["serviceaccounts"];
/// Short, so a takeover comes within the test's patience.
const LEASE: &str = "6s";
/// A bound on a takeover (the Lease expiring, then a sync of what it held), not a timing.
const TAKEOVER: Duration = Duration::from_secs(60);
/// The members of the first test.
const IDS: [&str; 3] = ["a", "b", "c"];
/// The label every spec gets when the tree changes.
const EDITED: &str = "edited";
/// The label on an instance's inventory ConfigMaps, of either layout.
const INVENTORY_OF: &str = "driftless.dev/inventory-of";
/// The label on the bucketed layout's ConfigMaps (`run --shard`): the bucket each holds.
const BUCKET_OF: &str = "driftless.dev/inventory-bucket";

fn account_name(i: usize) -> String {
    format!("sa-{i:04}")
}

/// The ids of all the specs, as the status files list them.
pub(crate) fn all_specs(ns: &str, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|i| format!("manifest/{ns}/ServiceAccount/{}", account_name(i)))
        .collect()
}

/// Writes every spec file (labelled `edited: <label>` if given) under `root/specs`, each
/// renamed into place from beside the tree: a daemon's watch never reads a file half
/// written (empty, its spec would be gone, and pruned).
pub(crate) fn write_specs(root: &Path, ns: &str, n: usize, label: Option<&str>) -> PathBuf {
    let specs = root.join("specs");
    let staging = root.join("staging");
    for d in [&specs, &staging] {
        std::fs::create_dir_all(d).unwrap();
    }
    let labels = label
        .map(|v| format!("  labels:\n    {EDITED}: \"{v}\"\n"))
        .unwrap_or_default();
    for i in 0..n {
        let name = account_name(i);
        let file = format!("{name}.yaml");
        let text = format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {ns}\n{labels}"
        );
        std::fs::write(staging.join(&file), text).unwrap();
        std::fs::rename(staging.join(&file), specs.join(&file)).unwrap();
    }
    specs
}

/// `run --shard` as member `identity` of instance `ns` (its inventory, Leases and holders
/// table in `inv`: the specs' own namespace is protected from them), as the admin unless
/// `kubeconfig` says otherwise. A resync far away: a takeover must sync what it took by
/// itself.
fn member(ns: &str, inv: &str, specs: &Path, identity: &str, kubeconfig: Option<&Path>) -> Daemon {
    member_with_lease(ns, inv, specs, identity, kubeconfig, LEASE)
}

fn member_with_lease(
    ns: &str,
    inv: &str,
    specs: &Path,
    identity: &str,
    kubeconfig: Option<&Path>,
    lease: &str,
) -> Daemon {
    let specs = specs.to_string_lossy().into_owned();
    let args = [
        "--dir",
        &specs,
        "--resync",
        "1h",
        "--shard",
        "--shard-identity",
        identity,
        "--shard-lease",
        lease,
        "--inventory-namespace",
        inv,
    ];
    let mut run = Daemon::builder(ns).args(&args);
    if let Some(path) = kubeconfig {
        run = run.kubeconfig(path);
    }
    run.start()
}

/// The specs a status says its own member holds.
fn own_ids(status: &Value) -> BTreeSet<String> {
    held_by(status)
        .into_iter()
        .filter(|(_, m)| *m == status["shard"]["member"])
        .map(|(id, _)| id)
        .collect()
}

/// Each spec a status lists, with the member it says holds it (null: none reported it).
fn held_by(status: &Value) -> BTreeMap<String, Value> {
    status["specs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["id"].as_str()?.to_string(), s["member"].clone())))
        .collect()
}

fn buckets(status: &Value) -> BTreeSet<u64> {
    status["shard"]["buckets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect()
}

fn seen_members(status: &Value) -> Vec<&str> {
    status["shard"]["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// What keeps `statuses` (of `members`, sorted by identity) from dividing the tree:
/// each member sees exactly these members, holds a bucket, no problem; the buckets and the
/// specs each holds disjoint, all 64 and all of `specs`; and each shows the whole tree,
/// every spec ready and said held by the member that holds it.
pub(crate) fn division_problem(
    members: &[(&str, &Daemon)],
    statuses: &[Value],
    specs: &BTreeSet<String>,
) -> Option<String> {
    let identities: Vec<&str> = members.iter().map(|(id, _)| *id).collect();
    let (mut held, mut listed) = (BTreeSet::new(), BTreeSet::new());
    for (id, status) in identities.iter().zip(statuses) {
        let shard = &status["shard"];
        if shard["member"] != *id {
            return Some(format!("{id}'s status names no member, or another"));
        }
        if seen_members(status) != identities {
            return Some(format!("{id} sees other members than {identities:?}"));
        }
        if !shard["problem"].is_null() {
            return Some(format!("{id} has a problem"));
        }
        let its = buckets(status);
        if its.is_empty() {
            return Some(format!("{id} holds no bucket"));
        }
        if !its.is_disjoint(&held) {
            return Some(format!("{id} holds a bucket another member holds"));
        }
        held.extend(its);
        let ids = own_ids(status);
        if !ids.is_disjoint(&listed) {
            return Some(format!("{id} holds a spec another member holds"));
        }
        listed.extend(ids);
    }
    let holder: BTreeMap<String, Value> = identities
        .iter()
        .zip(statuses)
        .flat_map(|(id, status)| own_ids(status).into_iter().map(move |s| (s, json!(id))))
        .collect();
    for (id, status) in identities.iter().zip(statuses) {
        if held_by(status) != holder {
            return Some(format!(
                "{id} does not show the whole tree held as the members say: {:?}",
                held_by(status)
            ));
        }
        if let Some(s) = status["specs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["ready"] != true)
        {
            return Some(format!("{id} shows a spec not ready: {s}"));
        }
    }
    if held != (0..BUCKETS).collect::<BTreeSet<u64>>() {
        return Some(format!("the buckets held are not all {BUCKETS}: {held:?}"));
    }
    if listed != *specs {
        let missing: Vec<_> = specs.difference(&listed).collect();
        let extra: Vec<_> = listed.difference(specs).collect();
        return Some(format!(
            "the specs listed are not the tree's: missing {missing:?}, extra {extra:?}"
        ));
    }
    None
}

/// The members' statuses once they divide the tree (`division_problem`); else what is
/// not so yet, with what each status says of its shard and the end of each log.
fn divided(members: &[(&str, &Daemon)], specs: &BTreeSet<String>) -> Result<Vec<Value>, String> {
    let statuses: Vec<Value> = members
        .iter()
        .map(|(_, d)| d.status().unwrap_or(Value::Null))
        .collect();
    let Some(why) = division_problem(members, &statuses, specs) else {
        return Ok(statuses);
    };
    let each: Vec<String> = members
        .iter()
        .zip(&statuses)
        .map(|((id, daemon), status)| {
            format!(
                "--- {id}: shard {}, {} specs of its own, {} shown, errors {}\nlog (tail):\n{}",
                status["shard"],
                own_ids(status).len(),
                status["specs"].as_array().map_or(0, Vec::len),
                status["errors"],
                support::tail(&daemon.log(), 3000)
            )
        })
        .collect();
    Err(format!("{why}\n{}", each.join("\n")))
}

/// Waits (up to `limit`) until `members` divide the tree; their statuses then.
async fn wait_divided(
    what: &str,
    members: &[(&str, &Daemon)],
    specs: &BTreeSet<String>,
    limit: Duration,
) -> Vec<Value> {
    support::eventually(what, limit, || async { divided(members, specs) }).await
}

/// The holders table of instance `ns` (in `inv`): bucket → member.
async fn holders(
    client: &kube::Client,
    ns: &str,
    inv: &str,
) -> Result<BTreeMap<u64, String>, String> {
    let name = format!("driftless-shards-{ns}");
    let map = Api::<ConfigMap>::namespaced(client.clone(), inv)
        .get_opt(&name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no ConfigMap {name}"))?;
    let text = map
        .data
        .and_then(|d| d.get("holders.json").cloned())
        .ok_or_else(|| format!("no holders.json in {name}"))?;
    let table: BTreeMap<String, String> =
        serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    table
        .into_iter()
        .map(|(bucket, holder)| {
            let number: u64 = bucket
                .parse()
                .map_err(|e| format!("bucket {bucket:?}: {e}"))?;
            Ok::<_, String>((number, holder))
        })
        .collect()
}

/// Waits until the holders table says what the members' statuses say: each bucket held
/// by the member that says it holds it, and no other entry. (Read again each time: the
/// table and a status are written one after the other.)
async fn table_agrees(client: &kube::Client, ns: &str, inv: &str, members: &[(&str, &Daemon)]) {
    support::eventually(
        "the holders table to agree with the statuses",
        Duration::from_secs(30),
        || async {
            let table = holders(client, ns, inv).await?;
            let mut said = BTreeMap::new();
            for (id, daemon) in members {
                let status = daemon.status().unwrap_or(Value::Null);
                said.extend(buckets(&status).into_iter().map(|b| (b, id.to_string())));
            }
            if table == said {
                Ok(())
            } else {
                Err(format!("table {table:?}\nstatuses {said:?}"))
            }
        },
    )
    .await;
}

/// Ok once every spec's ServiceAccount exists (labelled `edited: <label>`, if given).
async fn accounts(
    client: &kube::Client,
    ns: &str,
    n: usize,
    label: Option<&str>,
) -> Result<(), String> {
    let list = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    let by_name: BTreeMap<&str, &ServiceAccount> = list
        .items
        .iter()
        .filter_map(|a| Some((a.metadata.name.as_deref()?, a)))
        .collect();
    let not_yet: Vec<String> = (0..n)
        .map(account_name)
        .filter(|name| {
            !by_name.get(name.as_str()).is_some_and(|a| {
                label.is_none_or(|v| {
                    a.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(EDITED))
                        .is_some_and(|l| l == v)
                })
            })
        })
        .collect();
    if not_yet.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} not (yet) as the specs say, among them {:?}",
            not_yet.len(),
            &not_yet[..not_yet.len().min(10)]
        ))
    }
}

pub(crate) async fn wait_accounts(
    client: &kube::Client,
    ns: &str,
    n: usize,
    label: Option<&str>,
    limit: Duration,
) {
    let what = format!("every ServiceAccount, labelled {label:?}");
    support::eventually(&what, limit, || accounts(client, ns, n, label)).await;
}

/// The names of the Leases and of the published parts of the status of instance `ns`.
async fn membership(client: &kube::Client, ns: &str, inv: &str) -> (Vec<String>, Vec<String>) {
    let leases = Api::<Lease>::namespaced(client.clone(), inv)
        .list(&ListParams::default().labels(&format!("driftless.dev/member-of={ns}")))
        .await
        .unwrap();
    let parts = Api::<ConfigMap>::namespaced(client.clone(), inv)
        .list(&ListParams::default().labels(&format!("driftless.dev/status-of={ns}")))
        .await
        .unwrap();
    let names = |items: Vec<Option<String>>| items.into_iter().flatten().collect::<Vec<_>>();
    (
        names(leases.items.into_iter().map(|l| l.metadata.name).collect()),
        names(parts.items.into_iter().map(|p| p.metadata.name).collect()),
    )
}

mod divide;
mod layout;
mod lease;
mod leave;
