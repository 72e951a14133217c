//! A member that cannot renew its Lease stops writing before the others take over, with
//! exactly the RBAC the examples grant.

use super::*;

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
