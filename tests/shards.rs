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
fn all_specs(ns: &str, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|i| format!("manifest/{ns}/ServiceAccount/{}", account_name(i)))
        .collect()
}

/// Writes every spec file (labelled `edited: <label>` if given) under `root/specs`, each
/// renamed into place from beside the tree: a daemon's watch never reads a file half
/// written (empty, its spec would be gone, and pruned).
fn write_specs(root: &Path, ns: &str, n: usize, label: Option<&str>) -> PathBuf {
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
fn division_problem(
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

async fn wait_accounts(
    client: &kube::Client,
    ns: &str,
    n: usize,
    label: Option<&str>,
    limit: Duration,
) {
    let what = format!("every ServiceAccount, labelled {label:?}");
    support::eventually(&what, limit, || accounts(client, ns, n, label)).await;
}

#[tokio::test]
async fn serial_three_replicas_divide_a_tree_and_take_over_a_killed_one() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards").await;
    let inv = support::namespace(&client, "shards-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, MANY, None);
    let want = all_specs(&ns, MANY);
    // Once the namespace's own `default` account is made.
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;

    let mut daemons = IDS.map(|id| member(&ns, &inv, &specs, id, None));
    let statuses = {
        let all: Vec<(&str, &Daemon)> = IDS.into_iter().zip(&daemons).collect();
        let statuses =
            wait_divided("three members dividing the tree", &all, &want, MANY_WAIT).await;
        table_agrees(&client, &ns, &inv, &all).await;
        statuses
    };
    // About a third each: at most 22 of the 64 buckets (the even share rounded up).
    for (id, status) in IDS.iter().zip(&statuses) {
        let own = own_ids(status).len();
        println!(
            "{id} holds {own} specs in {} buckets",
            buckets(status).len()
        );
        assert!(
            (MANY / 5..=MANY * 2 / 5).contains(&own),
            "{id} holds {own} of {MANY} specs, not about a third"
        );
    }
    accounts(&client, &ns, MANY, None).await.unwrap();
    let leases = Api::<Lease>::namespaced(client.clone(), &inv)
        .list(&ListParams::default().labels(&format!("driftless.dev/member-of={ns}")))
        .await
        .unwrap();
    assert_eq!(leases.items.len(), IDS.len(), "{:#?}", leases.items);
    // Each object written once: by one member, however they started.
    let settled = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(settled - before, MANY as u64, "ServiceAccount writes");

    // The member with the most specs dies; the tree changes while its Lease still runs.
    let victim = (0..IDS.len())
        .max_by_key(|&i| own_ids(&statuses[i]).len())
        .unwrap();
    println!(
        "killing {} ({} specs)",
        IDS[victim],
        own_ids(&statuses[victim]).len()
    );
    daemons[victim].sigkill();
    write_specs(dir.path(), &ns, MANY, Some("yes"));

    let survivors: Vec<(&str, &Daemon)> = IDS
        .into_iter()
        .zip(&daemons)
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, m)| m)
        .collect();
    wait_accounts(&client, &ns, MANY, Some("yes"), MANY_WAIT).await;
    wait_divided(
        "the two survivors dividing the tree",
        &survivors,
        &want,
        MANY_WAIT,
    )
    .await;
    table_agrees(&client, &ns, &inv, &survivors).await;
    let after = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    let logs: Vec<String> = survivors
        .iter()
        .map(|(id, d)| format!("--- {id}:\n{}", support::tail(&d.log(), 20000)))
        .collect();
    assert_eq!(
        after - settled,
        MANY as u64,
        "ServiceAccount writes after the kill: each object once, none twice\n{}",
        logs.join("\n")
    );
}

/// The rules of Role `name` in `file` of examples/kubernetes.
fn example_rules(file: &str, name: &str) -> Vec<Value> {
    let text = support::read(&support::example("kubernetes").join(file));
    support::yaml_docs(&text)
        .into_iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == name)
        .and_then(|d| d["rules"].as_array().cloned())
        .unwrap_or_else(|| panic!("no Role {name} with rules in {file}"))
}

/// What a member may do in the inventory namespace: rbac.yaml's rule for ConfigMaps and
/// the add-on for `--shard` (addons/rbac-shard.yaml), as a user grants them.
fn member_rules() -> Vec<Value> {
    let mut rules: Vec<Value> = example_rules("rbac.yaml", "driftless")
        .into_iter()
        .filter(|r| r["resources"] == json!(["configmaps"]))
        .collect();
    assert_eq!(rules.len(), 1, "rbac.yaml's rule for ConfigMaps");
    rules.extend(example_rules("addons/rbac-shard.yaml", "driftless-shard"));
    rules
}

/// The same, without `verb` on Leases.
fn member_rules_without_lease(verb: &str) -> Vec<Value> {
    let mut rules = member_rules();
    for rule in &mut rules {
        if rule["resources"] == json!(["leases"]) {
            let verbs = rule["verbs"].as_array_mut().unwrap();
            assert!(verbs.iter().any(|v| v == verb), "leases: {verbs:?}");
            verbs.retain(|v| v != verb);
        }
    }
    rules
}

/// A ServiceAccount with all a member needs: cluster-wide, Nodes, the namespace of its
/// specs (`get`, before creating a missing one) and the watch of what it owns; in `ns`,
/// the Roles of `grant`. A kubeconfig for it in `dir`.
async fn replica_account(
    admin: &kube::Client,
    ns: &str,
    inv: &str,
    dir: &Path,
) -> (support::ClusterRbac, PathBuf) {
    let name = format!("driftless-shards-test-{}", support::suffix(ns));
    let cluster_rules = json!([
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["list", "watch"]},
    ]);
    let kubeconfig = dir.join("replica.kubeconfig");
    let cleanup =
        support::replica_account_with(admin, ns, &name, cluster_rules, &[ns, inv], &kubeconfig)
            .await;
    grant(admin, ns, inv, member_rules()).await;
    (cleanup, kubeconfig)
}

/// The member's Roles: in `ns`, the specs' ServiceAccounts; in `inv`, `inventory` (the
/// inventory, the holders' table, the parts of the status, the Leases).
async fn grant(admin: &kube::Client, ns: &str, inv: &str, inventory: Vec<Value>) {
    let specs = json!([
        {"apiGroups": [""], "resources": ["serviceaccounts"],
         "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    ]);
    for (namespace, rules) in [(ns, specs), (inv, json!(inventory))] {
        support::apply_manifest(
            admin,
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": "replica", "namespace": namespace}, "rules": rules}),
        )
        .await;
    }
}

/// Whether `status` says its member holds nothing, lists nothing, and why: its Lease.
fn stopped_for_its_lease(status: &Value) -> bool {
    buckets(status).is_empty()
        && own_ids(status).is_empty()
        && status["shard"]["problem"]
            .as_str()
            .is_some_and(|p| p.to_lowercase().contains("lease"))
}

#[tokio::test]
async fn serial_a_member_that_cannot_renew_its_lease_stops_writing_before_others_take_over() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-lease").await;
    let inv = support::namespace(&client, "shards-lease-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, SPECS, None);
    let want = all_specs(&ns, SPECS);
    let (_cleanup, kubeconfig) = replica_account(&client, &ns, &inv, dir.path()).await;
    // Once `default` and `replica` are made.
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;

    let a = member(&ns, &inv, &specs, "a", None);
    let b = member(&ns, &inv, &specs, "b", Some(&kubeconfig));
    let both = [("a", &a), ("b", &b)];
    let statuses = wait_divided("a and b dividing the tree", &both, &want, support::WAIT).await;
    table_agrees(&client, &ns, &inv, &both).await;
    let b_held = buckets(&statuses[1]);
    assert!(
        !own_ids(&statuses[1]).is_empty(),
        "b holds no spec, so its stopping proves nothing: {:#}",
        statuses[1]
    );
    let settled = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(settled - before, SPECS as u64, "ServiceAccount writes");

    // b may no longer renew its Lease. It gives up its buckets before the Lease expires,
    // and a takes them only once it has: whenever a's status shows one of b's buckets,
    // b's (read after a's) already holds none.
    grant(&client, &ns, &inv, member_rules_without_lease("update")).await;
    support::eventually("b stopped and a holding everything", TAKEOVER, || async {
        let a_status = a.status().unwrap_or(Value::Null);
        let b_status = b.status().unwrap_or(Value::Null);
        let took = !buckets(&a_status).is_disjoint(&b_held);
        assert!(
            !took || buckets(&b_status).is_empty(),
            "a took over b's buckets while b still held some: a {}, b {}",
            a_status["shard"],
            b_status["shard"]
        );
        if !stopped_for_its_lease(&b_status) {
            return Err(format!(
                "b: shard {}, {} specs\nlog (tail):\n{}",
                b_status["shard"],
                own_ids(&b_status).len(),
                support::tail(&b.log(), 4000)
            ));
        }
        divided(&[("a", &a)], &want).map(|_| ())
    })
    .await;
    println!("b: {}", b.status().unwrap()["shard"]["problem"]);
    table_agrees(&client, &ns, &inv, &[("a", &a)]).await;

    // A change of every spec: written by a alone, once each.
    write_specs(dir.path(), &ns, SPECS, Some("yes"));
    wait_accounts(&client, &ns, SPECS, Some("yes"), TAKEOVER).await;
    wait_divided("a holding the changed tree", &[("a", &a)], &want, TAKEOVER).await;
    let b_status = b.status().unwrap();
    assert!(stopped_for_its_lease(&b_status), "{b_status:#}");
    let after = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        after - settled,
        SPECS as u64,
        "ServiceAccount writes from b's stopping on: the change, once per object"
    );
}

/// The object a spec id names (`manifest/<ns>/ServiceAccount/<name>`): its last part.
fn object_of(id: &str) -> String {
    id.rsplit('/').next().unwrap_or(id).to_string()
}

/// The objects spec `ids` name.
fn objects(ids: &BTreeSet<String>) -> BTreeSet<String> {
    ids.iter().map(|id| object_of(id)).collect()
}

/// Removes spec `id`'s file from the tree: its object is to be pruned.
fn remove_spec(specs: &Path, id: &str) {
    std::fs::remove_file(specs.join(format!("{}.yaml", object_of(id)))).unwrap();
}

/// `driftless --instance ns apply SPECS --inventory-namespace inv`: one replica, once,
/// which keeps the single layout; it must succeed.
fn apply_once(ns: &str, inv: &str, specs: &Path) {
    let specs = specs.to_string_lossy().into_owned();
    let out = support::driftless_on_cluster(ns, &["apply", &specs, "--inventory-namespace", inv]);
    support::assert_exit(&out, 0);
}

/// The names of the specs' ServiceAccounts in `ns` (not the namespace's `default`).
async fn account_names(client: &kube::Client, ns: &str) -> Result<BTreeSet<String>, String> {
    let list = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|a| a.metadata.name)
        .filter(|n| n.starts_with("sa-"))
        .collect())
}

/// One inventory ConfigMap of an instance: the bucket it holds (`None`: the single
/// layout) and the objects its entries name.
#[derive(Debug)]
struct Recorded {
    name: String,
    bucket: Option<String>,
    objects: Vec<String>,
}

/// The inventory ConfigMaps of instance `ns` (in `inv`), of both layouts.
async fn inventory(client: &kube::Client, ns: &str, inv: &str) -> Result<Vec<Recorded>, String> {
    let list = Api::<ConfigMap>::namespaced(client.clone(), inv)
        .list(&ListParams::default().labels(&format!("{INVENTORY_OF}={ns}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut maps = Vec::new();
    for map in list.items {
        let name = map.metadata.name.clone().unwrap_or_default();
        let text = map
            .data
            .as_ref()
            .and_then(|d| d.get("entries.json"))
            .ok_or_else(|| format!("no entries.json in {name}"))?;
        let entries: Vec<Value> =
            serde_json::from_str(text).map_err(|e| format!("{name}: {e}: {text}"))?;
        let objects = entries
            .iter()
            .map(|e| {
                e["name"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{name}: an entry names no object: {e}"))
            })
            .collect::<Result<Vec<String>, String>>()?;
        let bucket = map
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BUCKET_OF))
            .cloned();
        maps.push(Recorded {
            name,
            bucket,
            objects,
        });
    }
    Ok(maps)
}

/// The objects the ConfigMaps of one layout (bucketed or not) list, sorted: one listed
/// twice shows twice.
fn listed(maps: &[Recorded], bucketed: bool) -> Vec<String> {
    let mut names: Vec<String> = maps
        .iter()
        .filter(|m| m.bucket.is_some() == bucketed)
        .flat_map(|m| m.objects.iter().cloned())
        .collect();
    names.sort();
    names
}

/// Ok when the inventory of `ns` is all in the single layout (`driftless-inventory-<ns>-<n>`,
/// none empty) and lists exactly `objects`, each once; no bucket's ConfigMap left.
fn single_layout(maps: &[Recorded], ns: &str, objects: &BTreeSet<String>) -> Result<(), String> {
    let prefix = format!("driftless-inventory-{ns}-");
    let wrong = maps
        .iter()
        .any(|m| m.bucket.is_some() || !m.name.starts_with(&prefix) || m.objects.is_empty());
    let want: Vec<String> = objects.iter().cloned().collect();
    if wrong || listed(maps, false) != want {
        return Err(format!(
            "not the single layout listing the {} objects {want:?}: {maps:#?}",
            want.len()
        ));
    }
    Ok(())
}

/// Ok once the members have moved what they wrote out of the single layout: every object
/// of `left` listed once, in either layout (none pruned listed any more); the objects of
/// `written` (the specs of the members that wrote) in their buckets' own ConfigMaps
/// (`driftless-buckets-<ns>-<bucket>-<n>`); no ConfigMap of the single layout left empty.
fn moved(
    maps: &[Recorded],
    ns: &str,
    left: &BTreeSet<String>,
    written: &BTreeSet<String>,
) -> Result<(), String> {
    let mut all = listed(maps, false);
    all.extend(listed(maps, true));
    all.sort();
    let single = listed(maps, false);
    let stayed: Vec<&String> = single.iter().filter(|n| written.contains(*n)).collect();
    let misnamed = maps.iter().any(|m| {
        m.bucket
            .as_ref()
            .is_some_and(|b| !m.name.starts_with(&format!("driftless-buckets-{ns}-{b}-")))
    });
    let emptied = maps
        .iter()
        .any(|m| m.bucket.is_none() && m.objects.is_empty());
    let why = if all != left.iter().cloned().collect::<Vec<_>>() {
        format!(
            "the inventory lists {all:?}, not the {} objects left",
            left.len()
        )
    } else if !stayed.is_empty() {
        format!("the single layout still lists {stayed:?}, whose buckets were written")
    } else if misnamed {
        "a bucket's ConfigMap is named for another".to_string()
    } else if emptied {
        "a ConfigMap of the single layout is left empty".to_string()
    } else {
        return Ok(());
    };
    Err(format!("{why}: {maps:#?}"))
}

/// Two specs to delete: one from each member where both list some (so both write their
/// buckets, and the single layout is emptied); else the first two the other lists.
fn two_to_delete(statuses: &[Value]) -> Vec<String> {
    let lists: Vec<BTreeSet<String>> = statuses.iter().map(own_ids).collect();
    let firsts: Vec<String> = lists.iter().filter_map(|l| l.first().cloned()).collect();
    if firsts.len() >= 2 {
        firsts[..2].to_vec()
    } else {
        lists.iter().flatten().take(2).cloned().collect()
    }
}

/// An instance moves from one replica (a one-shot `apply`: the inventory's single
/// layout) to two members sharing the tree (`run --shard`: a ConfigMap per bucket) and
/// back, pruning what left the tree at each step: the members find what the single
/// layout recorded for their buckets, and move it into their buckets' own ConfigMaps at
/// their first write; the `apply` after them reads those and puts everything back in the
/// single layout. No move writes an object: each ServiceAccount is written at its create
/// and at its delete, once.
#[tokio::test]
async fn serial_an_instance_moves_between_one_replica_and_shared_without_losing_what_it_prunes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-move").await;
    let inv = support::namespace(&client, "shards-move-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, SPECS, None);
    let mut want = all_specs(&ns, SPECS);
    // Once the namespace's own `default` account is made.
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;

    // One replica: all 30 recorded in the single layout.
    apply_once(&ns, &inv, &specs);
    accounts(&client, &ns, SPECS, None).await.unwrap();
    let maps = inventory(&client, &ns, &inv).await.unwrap();
    single_layout(&maps, &ns, &objects(&want)).unwrap_or_else(|e| panic!("{e}"));
    let applied = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        applied - before,
        SPECS as u64,
        "ServiceAccount writes of the apply"
    );

    // Two members: each adopts what the single layout recorded for its buckets, and
    // writes no object.
    let mut a = member(&ns, &inv, &specs, "a", None);
    let mut b = member(&ns, &inv, &specs, "b", None);
    let both = [("a", &a), ("b", &b)];
    let statuses = wait_divided("a and b dividing the tree", &both, &want, support::WAIT).await;
    table_agrees(&client, &ns, &inv, &both).await;
    let adopted = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        adopted - applied,
        0,
        "ServiceAccount writes of the members taking over the single layout's record"
    );

    // Two specs leave the tree: only the single layout recorded their objects, so their
    // pruning proves the members read it for their buckets.
    let deleted = two_to_delete(&statuses);
    for id in &deleted {
        remove_spec(&specs, id);
        want.remove(id);
    }
    let left = objects(&want);
    support::eventually("the two pruned", TAKEOVER, || async {
        let names = account_names(&client, &ns).await?;
        if names == left {
            Ok(())
        } else {
            Err(format!("ServiceAccounts {names:?}"))
        }
    })
    .await;
    let pruned = wait_divided("a and b dividing the 28 left", &both, &want, TAKEOVER).await;
    for (i, (id, _)) in both.iter().enumerate() {
        assert_eq!(
            buckets(&statuses[i]),
            buckets(&pruned[i]),
            "{id}'s buckets moved: which member wrote what is no longer known"
        );
    }
    // The members that pruned wrote every bucket they hold.
    let written: BTreeSet<String> = statuses
        .iter()
        .map(own_ids)
        .filter(|ids| deleted.iter().any(|d| ids.contains(d)))
        .flatten()
        .filter(|id| want.contains(id))
        .map(|id| object_of(&id))
        .collect();
    println!(
        "deleted {deleted:?}; {} of the {} left in buckets written since",
        written.len(),
        left.len()
    );
    support::eventually(
        "the written buckets moved out of the single layout",
        Duration::from_secs(30),
        || async { moved(&inventory(&client, &ns, &inv).await?, &ns, &left, &written) },
    )
    .await;
    let after_prune = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        after_prune - adopted,
        2,
        "ServiceAccount writes of the prune: the two deletes"
    );

    // Back to one replica: its apply reads the buckets' ConfigMaps, prunes what left the
    // tree since, and keeps the single layout alone.
    for (id, daemon) in [("a", &mut a), ("b", &mut b)] {
        assert_eq!(
            daemon.stop(),
            Some(0),
            "{id} stopping\n{}",
            support::tail(&daemon.log(), 3000)
        );
    }
    let last = want.first().cloned().unwrap();
    remove_spec(&specs, &last);
    want.remove(&last);
    apply_once(&ns, &inv, &specs);
    assert_eq!(
        account_names(&client, &ns).await.unwrap(),
        objects(&want),
        "ServiceAccounts after the apply that prunes {last}"
    );
    let maps = inventory(&client, &ns, &inv).await.unwrap();
    single_layout(&maps, &ns, &objects(&want)).unwrap_or_else(|e| panic!("{e}"));

    // Each object written at its create and its delete, and never by a move.
    let after = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(
        after - before,
        SPECS as u64 + 3,
        "ServiceAccount writes: 30 creates, 3 deletes"
    );
}

/// Long enough that a member taking a leaver's buckets before this has passed can only
/// have been handed them: one round (a fifth of it) and a sync, well within `TAKEOVER`.
const LONG_LEASE: &str = "100s";

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

/// A member stopped (SIGTERM) gives its buckets up and deletes its Lease and its part of
/// the status as it leaves, so the other takes them at its next round, long before the
/// lease would have run out, and converges them without writing an object again.
#[tokio::test]
async fn serial_a_member_stopped_hands_its_buckets_over_at_once() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-leave").await;
    let inv = support::namespace(&client, "shards-leave-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, SPECS, None);
    let want = all_specs(&ns, SPECS);
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;

    let a = member_with_lease(&ns, &inv, &specs, "a", None, LONG_LEASE);
    let mut b = member_with_lease(&ns, &inv, &specs, "b", None, LONG_LEASE);
    let both = [("a", &a), ("b", &b)];
    let statuses = wait_divided("a and b dividing the tree", &both, &want, support::WAIT).await;
    assert!(
        !own_ids(&statuses[1]).is_empty(),
        "b holds no spec, so its leaving proves nothing: {:#}",
        statuses[1]
    );
    let (leases, parts) = membership(&client, &ns, &inv).await;
    assert_eq!(
        (leases.len(), parts.len()),
        (2, 2),
        "a Lease and a part each: {leases:?} {parts:?}"
    );
    let settled = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(settled - before, SPECS as u64, "ServiceAccount writes");

    assert_eq!(
        b.stop(),
        Some(0),
        "b stopping\n{}",
        support::tail(&b.log(), 3000)
    );
    let stopped = std::time::Instant::now();
    let (leases, parts) = membership(&client, &ns, &inv).await;
    assert_eq!(
        (leases, parts),
        (
            vec![format!("driftless-member-{ns}-a")],
            vec![format!("driftless-status-{ns}-a")]
        ),
        "b's Lease and part once it has left"
    );
    wait_divided("a holding the whole tree", &[("a", &a)], &want, TAKEOVER).await;
    // Told, not judged (a shared machine's clock): a round is 20 s with this lease, and
    // the next exchange (2 s) that finds b's part gone starts one at once.
    eprintln!("a held b's buckets {:?} after b stopped", stopped.elapsed());
    table_agrees(&client, &ns, &inv, &[("a", &a)]).await;
    let after = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    assert_eq!(after - settled, 0, "ServiceAccount writes of the hand-over");
}

/// A Deployment whose Pod the testbed's kubelet makes ready `delay` seconds after it
/// starts.
fn deployment(ns: &str, name: &str, delay: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {{testbed.driftless.dev/ready-delay-seconds: \"{delay}\"}}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n"
    )
}

/// The first of `name-0`, `name-1`, … whose spec id (`id(name)`) falls in a bucket
/// `table` gives `member`.
fn name_held_by(
    table: &BTreeMap<u64, String>,
    member: &str,
    name: &str,
    id: impl Fn(&str) -> String,
) -> String {
    (0..1000)
        .map(|i| format!("{name}-{i}"))
        .find(|n| {
            let bucket = u64::from(driftless::apply::buckets::bucket_of(&id(n)));
            table.get(&bucket).is_some_and(|h| h == member)
        })
        .unwrap_or_else(|| panic!("no {name}-N in {member}'s buckets: {table:?}"))
}

/// A spec whose `depends-on` names a spec another member holds waits until that member
/// publishes it ready at the same revision: not applied while it is not, applied once it
/// is.
#[tokio::test]
async fn a_dependency_another_member_holds_is_waited_for() {
    let client = support::client().await;
    let ns = support::namespace(&client, "shards-dep").await;
    let inv = support::namespace(&client, "shards-dep-inv").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = write_specs(dir.path(), &ns, 0, None);
    let a = member(&ns, &inv, &specs, "a", None);
    let b = member(&ns, &inv, &specs, "b", None);
    let table = support::eventually("a and b holding every bucket", support::WAIT, || async {
        let table = holders(&client, &ns, &inv).await?;
        let members: BTreeSet<&String> = table.values().collect();
        if table.len() == BUCKETS as usize && members.len() == 2 {
            Ok(table)
        } else {
            Err(format!("{table:?}"))
        }
    })
    .await;
    // db in a's buckets, never ready while the test looks; after, in b's, depends on it.
    let db = name_held_by(&table, "a", "db", |n| {
        format!("manifest/{ns}/Deployment.apps/{n}")
    });
    let after = name_held_by(&table, "b", "after", |n| {
        format!("manifest/{ns}/ConfigMap/{n}")
    });
    let db_id = format!("manifest/{ns}/Deployment.apps/{db}");
    let after_id = format!("manifest/{ns}/ConfigMap/{after}");
    std::fs::write(
        specs.join("db.yaml"),
        deployment(&ns, &db, 600, "nginx:1.21"),
    )
    .unwrap();
    std::fs::write(
        specs.join("after.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {after}\n  namespace: {ns}\n  annotations: {{driftless.dev/depends-on: {db_id}}}\ndata:\n  value: one\n"
        ),
    )
    .unwrap();

    let spec = |status: &Value, id: &str| {
        status["specs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    support::eventually("b holding after back for db", support::WAIT, || async {
        let status = b.status().unwrap_or(Value::Null);
        let waits = spec(&status, &after_id);
        // b sees db as a publishes it.
        let dep = spec(&status, &db_id);
        if waits["reason"] == "WaitingForDependencies" && dep["member"] == "a" {
            Ok(())
        } else {
            Err(format!("after: {waits}\ndb: {dep}"))
        }
    })
    .await;
    assert!(
        cms.get_opt(&after).await.unwrap().is_none(),
        "{after} applied while {db} is not ready"
    );

    // db made ready: a says so, and b applies after.
    std::fs::write(specs.join("db.yaml"), deployment(&ns, &db, 0, "nginx:1.22")).unwrap();
    support::eventually("after applied once db is ready", support::WAIT, || async {
        let status = b.status().unwrap_or(Value::Null);
        match cms.get_opt(&after).await.map_err(|e| e.to_string())? {
            Some(_) if spec(&status, &after_id)["ready"] == true => Ok(()),
            found => Err(format!(
                "{after} exists: {}; b shows after {} and db {}\na's log:\n{}",
                found.is_some(),
                spec(&status, &after_id),
                spec(&status, &db_id),
                support::tail(&a.log(), 2000)
            )),
        }
    })
    .await;
}
