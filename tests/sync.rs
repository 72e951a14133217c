//! The sync engine against the real local cluster: apply, no-op resync, diff, prune and
//! its guards, ownership, replacement, interrupted syncs, readiness failures, CRDs.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use driftless::apply::diff::Change;
use driftless::apply::prune;
use driftless::apply::{Action, Engine, Verb};
use driftless::health::{Figures, Status};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

/// `driftless apply DIR --instance INSTANCE EXTRA...` against the local cluster.
fn cli_apply(dir: &std::path::Path, instance: &str, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["apply", &dir.to_string_lossy(), "--instance", instance])
        .args(extra)
        .env(
            "KUBECONFIG",
            std::env::var_os(support::CLUSTER_ENV).unwrap(),
        )
        .output()
        .unwrap()
}

fn webs(ns: &str, names: &[&str], total_qps: u32) -> String {
    let mut text = format!("namespace = \"{ns}\"\n");
    for n in names {
        text.push_str(&format!(
            "\n[elasticweb.{n}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = {total_qps}\n"
        ));
    }
    text
}

/// resourceVersion of every object this instance owns in `ns`.
async fn versions(client: &Client, ns: &str, instance: &str) -> BTreeMap<String, String> {
    let lp = ListParams::default().labels(&format!("driftless.dev/instance={instance}"));
    let mut out = BTreeMap::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .unwrap()
    {
        out.insert(
            format!("Deployment/{}", d.name_any()),
            d.resource_version().unwrap_or_default(),
        );
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .unwrap()
    {
        out.insert(
            format!("Service/{}", s.name_any()),
            s.resource_version().unwrap_or_default(),
        );
    }
    for p in Api::<Pod>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .unwrap()
    {
        out.insert(
            format!("Pod/{}", p.name_any()),
            p.resource_version().unwrap_or_default(),
        );
    }
    out
}

#[tokio::test]
async fn each_kind_applies_and_becomes_ready_with_its_figures() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-kinds").await;
    let text = format!(
        r#"
namespace = "{ns}"

[workspace.ide]
image = "codercom/code-server:4"
cpu = "1"
memory = "1Gi"
storage = "1Gi"

[elasticweb.shop]
image = "nginx:1.17.1"
single-pod-qps = 100
total-qps = 250

[localservice.local]
selector = {{ app = "local" }}
ports = [{{ name = "http", port = 80, target-port = 8080 }}]
"#
    );
    let tree = support::tree(&[("all.toml", &text)]);
    let engine = support::engine(&client, &ns);
    let (objects, report) = support::sync(&engine, &tree).await;
    assert!(report.ok(), "{report:#?}");
    assert!(
        report.objects.iter().all(|o| o.action == Action::Created),
        "{report:#?}"
    );

    let health = support::health_until(&engine, &tree, &objects, "every spec ready", |h| {
        h.iter().all(|s| s.ready)
    })
    .await;
    let by_kind = |k: &str| {
        health
            .iter()
            .find(|h| h.id.starts_with(k))
            .unwrap()
            .figures
            .clone()
    };
    match by_kind("workspace") {
        Figures::Workspace {
            phase,
            node,
            pod_ip,
            url,
            ..
        } => {
            assert_eq!(phase.as_deref(), Some("Running"));
            assert!(node.is_some_and(|n| n.starts_with("node-")));
            assert!(pod_ip.is_some());
            assert_eq!(url, format!("http://ide.{ns}.svc.cluster.local:9999"));
        }
        other => panic!("{other:?}"),
    }
    match by_kind("elasticweb") {
        Figures::ElasticWeb {
            desired_replicas,
            available_replicas,
            real_qps,
        } => {
            assert_eq!(
                (desired_replicas, available_replicas, real_qps),
                (3, 3, 300)
            );
        }
        other => panic!("{other:?}"),
    }
    match by_kind("localservice") {
        Figures::LocalService { nodes, .. } => {
            for n in ["node-1", "node-2", "node-3"] {
                assert!(nodes.contains(&n.to_string()), "{nodes:?}");
            }
        }
        other => panic!("{other:?}"),
    }
    let services = Api::<Service>::namespaced(client.clone(), &ns);
    for n in ["local-node-1", "local-node-2", "local-node-3"] {
        let svc = services.get(n).await.unwrap();
        let selector = svc.spec.unwrap().selector.unwrap();
        assert_eq!(
            selector
                .get("localservice.driftless.dev/node")
                .map(String::as_str),
            Some(&n["local-".len()..])
        );
    }
}

#[tokio::test]
async fn reapplying_an_unchanged_tree_sends_no_writes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-noop").await;
    let text = format!(
        "{}\n[workspace.ide]\nimage = \"codercom/code-server:4\"\ncpu = \"500m\"\nmemory = \"1Gi\"\n",
        webs(&ns, &["a", "b"], 150)
    );
    let tree = support::tree(&[("t.toml", &text)]);
    let first = support::engine(&client, &ns);
    let (objects, report) = support::sync(&first, &tree).await;
    assert!(report.ok(), "{report:#?}");
    // Let controllers finish their own updates before snapshotting.
    support::health_until(&first, &tree, &objects, "ready", |h| {
        h.iter().all(|s| s.ready)
    })
    .await;
    let before = versions(&client, &ns, &ns).await;
    assert_eq!(before.len(), 6, "{before:?}");

    // A new process: nothing in memory, only the cluster and its inventory.
    let second = support::engine(&client, &ns);
    let (_, report) = support::sync(&second, &tree).await;
    assert!(
        report.objects.iter().all(|o| o.action == Action::Unchanged),
        "{report:#?}"
    );
    assert_eq!(
        second.writes.total(),
        0,
        "patch {} create {} delete {}",
        second.writes.get(Verb::Patch),
        second.writes.get(Verb::Create),
        second.writes.get(Verb::Delete)
    );
    assert_eq!(versions(&client, &ns, &ns).await, before);
    // And diff agrees: nothing to show.
    let diffs = second.diff(&objects, &Default::default()).await.unwrap();
    assert!(
        diffs.iter().all(|d| d.change == Change::Unchanged),
        "{diffs:#?}"
    );
}

#[tokio::test]
async fn one_changed_field_shows_in_diff_and_only_its_object_is_written() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-change").await;
    let engine = support::engine(&client, &ns);
    let (_, report) = support::sync(
        &engine,
        &support::tree(&[("t.toml", &webs(&ns, &["a", "b"], 300))]),
    )
    .await;
    assert!(report.ok());

    let mut changed = webs(&ns, &["a"], 300);
    changed.push_str(
        "\n[elasticweb.b]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = 500\n",
    );
    let tree = support::tree(&[("t.toml", &changed)]);
    let objects = support::render(&client, &ns, &tree).await;
    let diffs = engine.diff(&objects, &Default::default()).await.unwrap();
    let changes: Vec<_> = diffs
        .iter()
        .filter(|d| d.change != Change::Unchanged)
        .collect();
    assert_eq!(changes.len(), 1, "{diffs:#?}");
    assert_eq!(
        (changes[0].key.kind.as_str(), changes[0].key.name.as_str()),
        ("Deployment", "b")
    );
    let text = driftless::apply::diff::render_change(changes[0], false);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(lines, ["-  replicas: 3", "+  replicas: 5"], "{text}");

    let writes_before = engine.writes.total();
    let report = engine
        .sync(&objects, &Default::default(), &driftless::apply::NoWait)
        .await
        .unwrap();
    let written: Vec<_> = report
        .objects
        .iter()
        .filter(|o| o.action != Action::Unchanged)
        .collect();
    assert_eq!(written.len(), 1, "{report:#?}");
    assert_eq!(written[0].action, Action::Configured);
    assert_eq!(written[0].key.name, "b");
    // The Deployment, and the inventory record of its new hash.
    assert_eq!(engine.writes.total() - writes_before, 2);
    let d = Api::<Deployment>::namespaced(client, &ns)
        .get("b")
        .await
        .unwrap();
    assert_eq!(d.spec.replicas, Some(5));
}

#[tokio::test]
async fn prune_removes_only_what_left_and_is_ours_and_guards_hold() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-prune").await;
    // Someone else's Service with the name a spec will want.
    let services = Api::<Service>::namespaced(client.clone(), &ns);
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": "d", "labels": {"owner": "someone-else"}},
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}]},
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();

    let engine = support::engine(&client, &ns);
    let (_, report) = support::sync(
        &engine,
        &support::tree(&[("t.toml", &webs(&ns, &["a", "b", "c", "d"], 0))]),
    )
    .await;
    // The foreign Service is reported, not taken; everything else applies.
    let conflicts: Vec<_> = report
        .objects
        .iter()
        .filter(|o| matches!(o.action, Action::Conflict(_)))
        .collect();
    assert_eq!(conflicts.len(), 1, "{report:#?}");
    assert_eq!(
        (
            conflicts[0].key.kind.as_str(),
            conflicts[0].key.name.as_str()
        ),
        ("Service", "d")
    );
    assert!(!report.ok());
    let untouched = services.get("d").await.unwrap();
    assert_eq!(
        untouched.labels().get("owner").map(String::as_str),
        Some("someone-else")
    );
    assert!(!untouched.labels().contains_key("driftless.dev/instance"));
    assert!(
        untouched
            .managed_fields()
            .iter()
            .all(|m| m.manager.as_deref() != Some("driftless"))
    );

    // c and d leave: c's Deployment + Service and d's Deployment go; the foreign Service stays.
    let (_, report) = support::sync(
        &engine,
        &support::tree(&[("t.toml", &webs(&ns, &["a", "b"], 0))]),
    )
    .await;
    assert!(report.prune.refused.is_none(), "{:?}", report.prune);
    let mut pruned: Vec<String> = report
        .prune
        .objects
        .iter()
        .filter(|o| o.action == prune::PruneAction::Pruned)
        .map(|o| format!("{}/{}", o.key.kind, o.key.name))
        .collect();
    pruned.sort();
    assert_eq!(
        pruned,
        ["Deployment/c", "Deployment/d", "Service/c"],
        "{:#?}",
        report.prune
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    assert!(deployments.get_opt("c").await.unwrap().is_none());
    assert!(deployments.get_opt("a").await.unwrap().is_some());
    assert!(
        services.get_opt("d").await.unwrap().is_some(),
        "someone else's Service was deleted"
    );

    // The prune was refused, with a reason that says all of `parts`.
    let refused_saying = |report: &driftless::apply::SyncReport, parts: &[&str]| {
        assert!(
            report
                .prune
                .refused
                .as_deref()
                .is_some_and(|r| parts.iter().all(|p| r.contains(p))),
            "{:?}",
            report.prune
        );
    };
    // An empty revision would prune everything: refused, nothing deleted.
    let (_, report) = support::sync(&engine, &support::tree(&[])).await;
    refused_saying(&report, &["no objects"]);
    assert!(deployments.get_opt("a").await.unwrap().is_some());
    // As is one that would prune more than half of the inventory (all 4 of a's and b's
    // objects, while adding 4 ConfigMaps: objects of another kind, so no renames)...
    let configmaps: String = (1..=4)
        .map(|i| format!("[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"x{i}\", namespace = \"{ns}\" }}\n"))
        .collect();
    let replaced = support::tree(&[("t.toml", &configmaps)]);
    let (_, report) = support::sync(&engine, &replaced).await;
    refused_saying(&report, &["4 of 4"]);
    assert!(deployments.get_opt("b").await.unwrap().is_some());
    let cms = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns);
    assert!(cms.get_opt("x4").await.unwrap().is_some());
    // ...and stays refused when retried, although the 4 ConfigMaps are now in the
    // inventory too (4 of 8 would be within the share).
    let (_, report) = support::sync(&engine, &replaced).await;
    refused_saying(&report, &["4 of 4", "4 more, recorded since"]);
    assert!(deployments.get_opt("a").await.unwrap().is_some());
    assert!(deployments.get_opt("b").await.unwrap().is_some());
    // ...unless explicitly allowed.
    let allowed = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: ns.clone(),
            prune: prune::Options {
                allow_mass: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let (_, report) = support::sync(&allowed, &support::tree(&[])).await;
    assert_eq!(report.prune.pruned(), 8, "{:#?}", report.prune);
    assert!(cms.get_opt("x1").await.unwrap().is_none());
    assert!(deployments.get_opt("a").await.unwrap().is_none());
    assert!(
        services.get_opt("d").await.unwrap().is_some(),
        "someone else's Service was deleted"
    );
}

#[tokio::test]
async fn an_invalid_tree_applies_nothing_and_prunes_nothing() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-invalid").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("web.toml"), webs(&ns, &["a", "b"], 100)).unwrap();
    let run = |dir: &std::path::Path| cli_apply(dir, &ns, &[]);
    let out = run(dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let generation = |d: &Deployment| d.metadata.generation;
    let (a, b) = (
        deployments.get("a").await.unwrap(),
        deployments.get("b").await.unwrap(),
    );

    // One spec changed, one removed, and one broken file: none of it may take effect.
    std::fs::write(dir.path().join("web.toml"), webs(&ns, &["a"], 900)).unwrap();
    std::fs::write(
        dir.path().join("broken.toml"),
        "[elasticweb.c]\nimage = 1\n",
    )
    .unwrap();
    let out = run(dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("broken.toml:2:9: `image` must be a string, found an integer"),
        "{stderr}"
    );
    let a_after = deployments.get("a").await.unwrap();
    assert_eq!(
        generation(&a_after),
        generation(&a),
        "the changed spec was applied"
    );
    assert_eq!(a_after.spec.replicas, Some(1));
    let b_after = deployments
        .get_opt("b")
        .await
        .unwrap()
        .expect("the removed spec's Deployment was pruned");
    assert_eq!(generation(&b_after), generation(&b));
    assert!(deployments.get_opt("c").await.unwrap().is_none());
}

#[tokio::test]
async fn an_interrupted_sync_leaves_no_orphans_and_the_next_converges() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-kill").await;
    let names: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let tree = support::tree(&[("t.toml", &webs(&ns, &refs, 0))]);
    let objects = support::render(&client, &ns, &tree).await;

    let engine = support::engine(&client, &ns);
    let facts = Default::default();
    let sync = engine.sync(&objects, &facts, &driftless::apply::NoWait);
    let midway = async {
        while engine.writes.total() < 15 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::select! {
        _ = sync => panic!("the sync finished before it could be interrupted"),
        _ = midway => {} // the sync future is dropped here, mid-apply
    }

    let fresh = support::engine(&client, &ns);
    let report = fresh
        .sync(&objects, &Default::default(), &driftless::apply::NoWait)
        .await
        .unwrap();
    assert!(report.ok(), "{report:#?}");
    // Every object labelled ours is desired and inventoried with its UID.
    let live = versions(&client, &ns, &ns).await;
    assert_eq!(live.len(), 120);
    let inventory = fresh.store().load(&client).await.unwrap();
    assert_eq!(inventory.len(), 120);
    assert!(
        inventory.entries.values().all(|e| e.uid.is_some()),
        "pending entries left"
    );

    // Which also means all of it can be pruned: nothing orphaned.
    let cleanup = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: ns.clone(),
            prune: prune::Options {
                allow_mass: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let report = cleanup
        .sync(&[], &Default::default(), &driftless::apply::NoWait)
        .await
        .unwrap();
    assert_eq!(report.prune.pruned(), 120);
    assert!(versions(&client, &ns, &ns).await.is_empty());
}

#[tokio::test]
async fn simulated_failures_fail_their_spec_with_the_reason() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-fail").await;
    let text = format!(
        r#"
namespace = "{ns}"

[workspace.crashing]
image = "example.com/crashloop:1"

[workspace.nopull]
image = "example.com/unpullable:1"

[workspace.toobig]
image = "codercom/code-server:4"
cpu = "100000"

[elasticweb.webcrash]
image = "example.com/crashloop:2"
single-pod-qps = 1
total-qps = 1

[workspace.fine]
image = "codercom/code-server:4"
"#
    );
    let tree = support::tree(&[("t.toml", &text)]);
    let engine = support::engine(&client, &ns);
    let (objects, report) = support::sync(&engine, &tree).await;
    assert!(report.ok(), "{report:#?}");
    // Unschedulable only counts as failed after 15 s: wait for every spec to settle.
    let health = support::health_until(
        &engine,
        &tree,
        &objects,
        "every spec ready or failed",
        |h| h.iter().all(|s| s.status != Status::InProgress),
    )
    .await;
    let reason = |name: &str| {
        let h = health
            .iter()
            .find(|h| h.id.ends_with(&format!("/{name}")))
            .unwrap();
        (h.status, h.reason.clone().unwrap_or_default())
    };
    assert_eq!(
        reason("crashing"),
        (Status::Failed, "CrashLoopBackOff".into())
    );
    assert_eq!(
        reason("nopull"),
        (Status::Failed, "ImagePullBackOff".into())
    );
    assert_eq!(reason("toobig"), (Status::Failed, "Unschedulable".into()));
    assert_eq!(
        reason("webcrash"),
        (Status::Failed, "CrashLoopBackOff".into())
    );
    assert_eq!(reason("fine").0, Status::Current);
    // A spec's reason agrees with its objects: the object that carries its verdict says
    // the same (the Deployment takes its crashing Pod's reason, not "LessAvailable").
    for h in health.iter().filter(|h| h.status == Status::Failed) {
        assert!(
            h.objects
                .iter()
                .any(|o| o.status.status == Status::Failed && o.status.reason == h.reason),
            "{}: Failed {:?}, but no object of it says so: {:#?}",
            h.id,
            h.reason,
            h.objects
        );
        assert!(
            h.objects
                .iter()
                .all(|o| o.status.status != Status::InProgress
                    || o.status.reason.as_deref() != Some("LessAvailable")),
            "{}: {:#?}",
            h.id,
            h.objects
        );
    }
    let webcrash = health.iter().find(|h| h.id.ends_with("/webcrash")).unwrap();
    let deployment = webcrash
        .objects
        .iter()
        .find(|o| o.object.starts_with("Deployment.apps "))
        .unwrap();
    assert!(
        deployment.status.message.starts_with("Pod ")
            && deployment.status.message.contains("(Available: 0/1)"),
        "{deployment:#?}"
    );

    // The CLI's --wait exits non-zero naming the reason.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.toml"), &text).unwrap();
    let out = cli_apply(dir.path(), &ns, &["--wait", "--timeout", "60s"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("workspace/{ns}/crashing"))
            && stdout.contains("FAILED [CrashLoopBackOff]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAILED [ImagePullBackOff]") && stdout.contains("FAILED [Unschedulable]"),
        "{stdout}"
    );
}

/// `apply --wait` stops as soon as waiting cannot help: here one object cannot be
/// applied (its kind is not served) and everything else is ready, so it exits 1 without
/// waiting out `--timeout`.
#[tokio::test]
async fn apply_wait_stops_once_every_object_not_ready_failed_to_apply() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-waitfail").await;
    let text = format!(
        r#"
namespace = "{ns}"

[[manifest]]
apiVersion = "v1"
kind = "ConfigMap"
metadata = {{ name = "fine" }}
data = {{ a = "1" }}

[[manifest]]
apiVersion = "nothing.driftless.test/v1"
kind = "Nope"
metadata = {{ name = "never" }}
spec = {{ a = 1 }}
"#
    );
    let stdout = apply_waits_not(&ns, &text, "failed to apply");
    assert!(stdout.contains("not served by the cluster"), "{stdout}");
}

/// The same when the sync stopped at a wave: wave 1's object cannot be applied, so wave 2
/// is never applied, and waiting for its ConfigMap to appear cannot help either.
#[tokio::test]
async fn apply_wait_stops_once_a_stopped_wave_leaves_the_rest_unapplied() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-wavefail").await;
    let text = format!(
        r#"
namespace = "{ns}"

[[manifest]]
apiVersion = "nothing.driftless.test/v1"
kind = "Nope"
metadata = {{ name = "never", annotations = {{ "driftless.dev/wave" = "1" }} }}
spec = {{ a = 1 }}

[[manifest]]
apiVersion = "v1"
kind = "ConfigMap"
metadata = {{ name = "later", annotations = {{ "driftless.dev/wave" = "2" }} }}
data = {{ a = "1" }}
"#
    );
    let stdout = apply_waits_not(&ns, &text, "failed to apply, was not applied");
    assert!(
        stdout.contains("wave 2 and what follows were not applied"),
        "{stdout}"
    );
}

/// `apply --wait --timeout 3m` of the tree `text` in `ns` exits 1 saying it stopped
/// waiting because every object not ready `why` (not that it timed out); its stdout.
fn apply_waits_not(ns: &str, text: &str, why: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.toml"), text).unwrap();
    let out = cli_apply(dir.path(), ns, &["--wait", "--timeout", "3m"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("stopped waiting: every object not ready {why}")),
        "{stderr}"
    );
    assert!(!stderr.contains("timed out"), "{stderr}");
    stdout
}

/// A Deployment made by `kubectl apply` (client-side) with env A and B, adopted by a spec
/// that has only A: kubectl's ownership moves to driftless first (as `csaupgrade` does),
/// so B and kubectl's last-applied annotation go instead of staying for ever.
#[tokio::test]
async fn adopting_what_kubectl_applied_drops_what_the_spec_does_not_set() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-csa").await;
    let kubeconfig = std::env::var_os(support::CLUSTER_ENV).unwrap();
    let deployment = |env: &str| {
        format!(
            r#"{{"apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {{"name": "web", "namespace": "{ns}"}},
 "spec": {{"replicas": 1, "selector": {{"matchLabels": {{"app": "web"}}}},
  "template": {{"metadata": {{"labels": {{"app": "web"}}}},
   "spec": {{"containers": [{{"name": "c", "image": "nginx:1.17.1", "env": [{env}]}}]}}}}}}}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("kubectl.json");
    std::fs::write(
        &made,
        deployment(r#"{"name": "A", "value": "1"}, {"name": "B", "value": "2"}"#),
    )
    .unwrap();
    let kubectl = std::process::Command::new(support::kubectl_program())
        .args(["apply", "-f", &made.to_string_lossy()])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("kubectl on PATH (the machine image's; see docs/src/contributing/testbed.md)");
    assert!(kubectl.status.success(), "{kubectl:?}");

    let specs = dir.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&deployment(r#"{"name": "A", "value": "1"}"#)).unwrap();
    let toml = toml::to_string(&serde_json::json!({ "manifest": [manifest] })).unwrap();
    std::fs::write(specs.join("web.toml"), toml).unwrap();
    let out = cli_apply(&specs, &ns, &["--adopt"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let live = Api::<Deployment>::namespaced(client, &ns)
        .get("web")
        .await
        .unwrap();
    let env: Vec<String> = live.spec.template.spec.unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(env, ["A"]);
    assert!(
        !live
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("kubectl.kubernetes.io/last-applied-configuration")
    );
    let managers: Vec<String> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        !managers.iter().any(|m| m == "kubectl-client-side-apply"),
        "{managers:?}"
    );
}

#[tokio::test]
async fn a_crd_and_its_custom_resource_apply_in_one_revision() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-crd").await;
    let group = format!("{ns}.driftless.test");
    let text = format!(
        r#"
namespace = "{ns}"

[[manifest]]
apiVersion = "{group}/v1"
kind = "VirtulMachine"
metadata = {{ name = "vm-sample" }}
spec = {{ cpu = "1", memory = "2G" }}

[[manifest]]
apiVersion = "apiextensions.k8s.io/v1"
kind = "CustomResourceDefinition"
metadata = {{ name = "virtulmachines.{group}" }}
spec = {{ group = "{group}", scope = "Namespaced", names = {{ kind = "VirtulMachine", plural = "virtulmachines", singular = "virtulmachine", listKind = "VirtulMachineList" }}, versions = [{{ name = "v1", served = true, storage = true, schema = {{ openAPIV3Schema = {{ type = "object", x-kubernetes-preserve-unknown-fields = true }} }} }}] }}
"#
    );
    let tree = support::tree(&[("crd.toml", &text)]);
    let engine = support::engine(&client, &ns);
    let (objects, report) = support::sync(&engine, &tree).await;
    assert!(report.ok(), "{report:#?}");
    let kinds: Vec<(&str, &Action)> = report
        .objects
        .iter()
        .map(|o| (o.key.kind.as_str(), &o.action))
        .collect();
    assert_eq!(
        kinds,
        [
            ("CustomResourceDefinition", &Action::Created),
            ("VirtulMachine", &Action::Created)
        ]
    );
    let health = support::health_until(&engine, &tree, &objects, "CRD and CR ready", |h| {
        h.iter().all(|s| s.ready)
    })
    .await;
    assert_eq!(health.len(), 2);

    // Pruning both removes the resource first, then its CRD.
    let cleanup = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: ns.clone(),
            prune: prune::Options {
                allow_mass: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let report = cleanup
        .sync(&[], &Default::default(), &driftless::apply::NoWait)
        .await
        .unwrap();
    let order: Vec<&str> = report
        .prune
        .objects
        .iter()
        .map(|o| o.key.kind.as_str())
        .collect();
    assert_eq!(order, ["VirtulMachine", "CustomResourceDefinition"]);
    assert!(report.prune.ok(), "{:#?}", report.prune);
}

#[tokio::test]
async fn a_workspace_image_change_replaces_its_pod_and_diff_says_so() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-replace").await;
    let spec = |image: &str| {
        format!("namespace = \"{ns}\"\n[workspace.ide]\nimage = \"{image}\"\ncpu = \"1\"\n")
    };
    let engine = support::engine(&client, &ns);
    let (objects, _) = support::sync(
        &engine,
        &support::tree(&[("w.toml", &spec("code-server:1"))]),
    )
    .await;
    let tree = support::tree(&[("w.toml", &spec("code-server:1"))]);
    support::health_until(&engine, &tree, &objects, "ready", |h| {
        h.iter().all(|s| s.ready)
    })
    .await;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let old_uid = pods.get("ide").await.unwrap().uid();

    let tree = support::tree(&[("w.toml", &spec("code-server:2"))]);
    let objects = support::render(&client, &ns, &tree).await;
    let diffs = engine.diff(&objects, &Default::default()).await.unwrap();
    let pod_diff = diffs.iter().find(|d| d.key.kind == "Pod").unwrap();
    assert!(
        matches!(pod_diff.change, Change::Replace { .. }),
        "{pod_diff:#?}"
    );
    assert!(driftless::apply::diff::render_change(pod_diff, false).starts_with("# replace:"));

    let report = engine
        .sync(&objects, &Default::default(), &driftless::apply::NoWait)
        .await
        .unwrap();
    let pod = report.objects.iter().find(|o| o.key.kind == "Pod").unwrap();
    assert_eq!(pod.action, Action::Replaced, "{report:#?}");
    let new = pods.get("ide").await.unwrap();
    assert_ne!(new.uid(), old_uid);
    assert_eq!(
        new.spec.unwrap().containers[0].image.as_deref(),
        Some("code-server:2")
    );
    support::health_until(&engine, &tree, &objects, "ready after replace", |h| {
        h.iter().all(|s| s.ready)
    })
    .await;
}

#[tokio::test]
async fn instances_never_touch_each_others_objects_and_adopt_takes_over_foreign_ones() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-owners").await;
    let alpha = support::engine(&client, &format!("{ns}-alpha"));
    let beta = support::engine(&client, &format!("{ns}-beta"));
    let tree = support::tree(&[("t.toml", &webs(&ns, &["shared"], 100))]);
    let (_, report) = support::sync(&alpha, &tree).await;
    assert!(report.ok());
    let before = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("shared")
        .await
        .unwrap();

    let (_, report) = support::sync(&beta, &tree).await;
    assert_eq!(report.objects.len(), 2);
    for o in &report.objects {
        assert!(
            matches!(&o.action, Action::Conflict(m) if m.contains("alpha")),
            "{o:#?}"
        );
    }
    // Not even its own inventory: it has nothing it may own.
    assert_eq!(beta.writes.total(), 0, "beta wrote");
    let after = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("shared")
        .await
        .unwrap();
    // (resourceVersion moves with the controller's status updates; generation only with spec.)
    assert_eq!(before.metadata.generation, after.metadata.generation);
    assert_eq!(
        after.labels().get("driftless.dev/instance"),
        Some(&format!("{ns}-alpha"))
    );
    // Beta's empty-handed prune cannot reach alpha's objects either.
    assert!(beta.store().load(&client).await.unwrap().is_empty());

    // A foreign ConfigMap, adopted through --adopt.
    let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let foreign: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"mode": "old"}}))
            .unwrap();
    cms.create(&PostParams::default(), &foreign).await.unwrap();
    let manifest = format!(
        "namespace = \"{ns}\"\n[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"settings\" }}\ndata = {{ mode = \"new\" }}\n"
    );
    let tree = support::tree(&[("cm.toml", &manifest)]);
    let gamma = support::engine(&client, &format!("{ns}-gamma"));
    let (_, report) = support::sync(&gamma, &tree).await;
    assert!(
        matches!(report.objects[0].action, Action::Conflict(_)),
        "{report:#?}"
    );
    assert_eq!(
        cms.get("settings").await.unwrap().data.unwrap()["mode"],
        "old"
    );
    let adopting = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: format!("{ns}-gamma"),
            adopt: true,
            ..Default::default()
        },
    );
    let (_, report) = support::sync(&adopting, &tree).await;
    assert_eq!(report.objects[0].action, Action::Configured, "{report:#?}");
    let adopted = cms.get("settings").await.unwrap();
    assert_eq!(adopted.data.as_ref().unwrap()["mode"], "new");
    assert_eq!(
        adopted
            .labels()
            .get("driftless.dev/instance")
            .map(String::as_str),
        Some(format!("{ns}-gamma").as_str())
    );
}

#[tokio::test]
async fn drift_is_taken_back_but_a_new_collision_is_a_reported_conflict() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sync-drift").await;
    let cm = |data: &str| {
        format!(
            "namespace = \"{ns}\"\n[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"cfg\" }}\ndata = {{ {data} }}\n"
        )
    };
    let engine = support::engine(&client, &ns);
    let (_, report) =
        support::sync(&engine, &support::tree(&[("c.toml", &cm("a = \"ours\""))])).await;
    assert!(report.ok());
    let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns);

    // Another manager takes our field, and sets one of its own.
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "theirs", "b": "theirs"}});
    cms.patch(
        "cfg",
        &PatchParams::apply("someone").force(),
        &Patch::Apply(&theirs),
    )
    .await
    .unwrap();

    // Unchanged specs: that was drift, and the next sync takes `a` back.
    let (_, report) =
        support::sync(&engine, &support::tree(&[("c.toml", &cm("a = \"ours\""))])).await;
    assert_eq!(report.objects[0].action, Action::Configured, "{report:#?}");
    let data = cms.get("cfg").await.unwrap().data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("ours", "theirs"));

    // Our spec now wants `b`, which another manager owns: a conflict, reported.
    let tree = support::tree(&[("c.toml", &cm("a = \"ours\", b = \"ours\""))]);
    let (_, report) = support::sync(&engine, &tree).await;
    assert!(
        matches!(&report.objects[0].action, Action::Conflict(m) if m.contains("--force-conflicts")),
        "{report:#?}"
    );
    assert_eq!(cms.get("cfg").await.unwrap().data.unwrap()["b"], "theirs");
    // --force-conflicts takes it.
    let forcing = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: ns.clone(),
            force_conflicts: true,
            ..Default::default()
        },
    );
    let (_, report) = support::sync(&forcing, &tree).await;
    assert_eq!(report.objects[0].action, Action::Configured);
    assert_eq!(cms.get("cfg").await.unwrap().data.unwrap()["b"], "ours");
}

/// What one `diff` cost the apiserver, as it counted it: dry runs, and reads of one
/// object by name (GETs) and lists, of the resources asked about.
#[derive(Debug, PartialEq)]
struct DiffCost {
    dry_runs: u64,
    gets: u64,
    lists: u64,
}

/// `driftless diff TREE` as `ns`, and what it cost the apiserver for `resources` (dry
/// runs of all of them; GETs and lists of `read`, those whose objects diff reads).
async fn diff_cost(
    client: &Client,
    ns: &str,
    tree: &str,
    resources: &[&str],
    read: &[&str],
) -> (std::process::Output, DiffCost) {
    let count = || async {
        DiffCost {
            dry_runs: support::apiserver_dry_runs(client, resources).await,
            gets: support::apiserver_gets(client, read).await,
            lists: support::apiserver_lists(client, read).await,
        }
    };
    // The namespace controller lists each kind of a namespace it deletes (an earlier
    // test's): counted before it is done, its list was taken for the diff's.
    support::no_namespace_terminating(client).await;
    let before = count().await;
    let out = support::driftless_on_cluster(ns, &["diff", tree]);
    let after = count().await;
    let cost = DiffCost {
        dry_runs: after.dry_runs - before.dry_runs,
        gets: after.gets - before.gets,
        lists: after.lists - before.lists,
    };
    (out, cost)
}

/// `diff` of what the last apply left as it was costs the apiserver no dry run, as the
/// no-op apply costs it no write, and no read of any object by itself: like that apply it
/// lists each kind once, and an object whose intent is the one applied and whose owned
/// fields are as driftless left them is unchanged. A changed object, one whose fields
/// someone else moved, and one scaled through the scale subresource (which moves the
/// ownership of its replicas, since Kubernetes 1.22) are read and dry-run as before, and
/// only they.
#[tokio::test]
async fn serial_a_diff_dry_runs_only_what_may_have_changed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "diff-dry").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let config = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  mode: {value}\n"
        )
    };
    support::write_file(root, "settings.yaml", &config("fast"));
    support::write_file(
        root,
        "other.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: {ns}\ndata:\n  a: b\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: token\n  namespace: {ns}\nstringData:\n  token: s3cret\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  ports:\n    - port: 80\n"
        ),
    );
    support::write_file(
        root,
        "web.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n"
        ),
    );
    let tree = root.to_str().unwrap();
    let out = support::driftless_on_cluster(&ns, &["apply", tree]);
    support::assert_exit(&out, 0);
    let resources = ["configmaps", "secrets", "services", "deployments"];
    // The Secret's kind is read for the key its inventory hash is keyed with, a GET of
    // its own: the objects' reads are told apart on the other kinds.
    let read = ["configmaps", "services", "deployments"];

    // The apiserver counts every client's lists: another controller's (the namespace
    // controller's for an earlier test's namespace, an informer's list again) may fall
    // within a run, more often on the 1.34 lane. Of up to three runs of the same diff, the
    // cheapest is its own: a diff that listed more would list more in every run.
    let mut runs = Vec::new();
    while runs.len() < 3 {
        let (out, cost) = diff_cost(&client, &ns, tree, &resources, &read).await;
        support::assert_exit(&out, 0);
        let alone = cost.lists <= 4;
        runs.push((out, cost));
        if alone {
            break;
        }
    }
    let (out, cost) = runs
        .into_iter()
        .min_by_key(|(_, cost)| cost.lists)
        .expect("a run");
    assert_eq!(
        cost.dry_runs,
        0,
        "an unchanged tree was dry-run\n{}",
        support::show(&out)
    );
    assert_eq!(
        cost.gets,
        0,
        "an unchanged tree was read object by object\n{}",
        support::show(&out)
    );
    // A list per kind, and the inventory's (ConfigMaps).
    assert_eq!(cost.lists, 4, "{cost:?}\n{}", support::show(&out));
    // One object changed: it alone is read and dry-run, and its change shown.
    support::write_file(root, "settings.yaml", &config("slow"));
    let (out, cost) = diff_cost(&client, &ns, tree, &resources, &read).await;
    support::assert_exit(&out, 1);
    assert_eq!(
        (cost.dry_runs, cost.gets),
        (1, 1),
        "{}",
        support::show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("+  mode: slow"),
        "{}",
        support::show(&out)
    );

    // Someone else moves a field of ours: dry-run, and shown as the drift it is.
    support::write_file(root, "settings.yaml", &config("fast"));
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    configs
        .patch(
            "other",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "changed"}}),
            ),
        )
        .await
        .unwrap();
    let (out, cost) = diff_cost(&client, &ns, tree, &resources, &read).await;
    support::assert_exit(&out, 1);
    assert_eq!(
        (cost.dry_runs, cost.gets),
        (1, 1),
        "{}",
        support::show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("-  a: changed"),
        "{}",
        support::show(&out)
    );

    // Taken back, then scaled through the scale subresource: the listed metadata shows
    // the replicas' ownership moved, so it is read and dry-run, and shown.
    let out = support::driftless_on_cluster(&ns, &["apply", tree]);
    support::assert_exit(&out, 0);
    support::kubectl(&["-n", &ns, "scale", "deployment/web", "--replicas=3"]);
    let (out, cost) = diff_cost(&client, &ns, tree, &resources, &read).await;
    support::assert_exit(&out, 1);
    assert_eq!(
        (cost.dry_runs, cost.gets),
        (1, 1),
        "{}",
        support::show(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("-  replicas: 3") && stdout.contains("+  replicas: 2"),
        "{}",
        support::show(&out)
    );
}

/// A sync cut short after its writes were answered (a crash; a member whose Lease
/// lapsed, stopped at once) leaves their entries pending: no UID, no hashes. The next
/// sync dry-runs each such object that carries this instance's mark, writes none the
/// dry run shows unchanged and records it; one whose intent changed meanwhile is written,
/// once. The sync after writes and dry-runs nothing.
#[tokio::test]
async fn serial_what_a_sync_cut_short_wrote_is_recorded_not_written_again() {
    let client = support::client().await;
    let ns = support::namespace(&client, "cut-short").await;
    let accounts = |label: &str| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: one\n  namespace: {ns}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: two\n  namespace: {ns}\n  labels: {{tier: {label}}}\n"
        )
    };
    let first = support::engine(&client, &ns);
    let (_, report) = support::sync(&first, &support::tree(&[("a.yaml", &accounts("web"))])).await;
    assert!(report.ok(), "{report:#?}");

    // The inventory as a sync cut short after its writes leaves it.
    support::rewrite_inventory(&client, &ns, |entries| {
        assert_eq!(entries.len(), 2, "{entries:#?}");
        for e in entries {
            let e = e.as_object_mut().unwrap();
            for confirmed in ["uid", "applied", "shape", "fields"] {
                assert!(e.remove(confirmed).is_some(), "{e:#?} had no {confirmed}");
            }
        }
    })
    .await;

    let resources = ["serviceaccounts"];
    let before = support::apiserver_writes_when_quiet(&client, &resources).await;
    let dry_before = support::apiserver_dry_runs(&client, &resources).await;
    let next = support::engine(&client, &ns);
    let (_, report) = support::sync(&next, &support::tree(&[("a.yaml", &accounts("api"))])).await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!(action_of(&report, "one"), Action::Unchanged, "{report:#?}");
    assert_eq!(action_of(&report, "two"), Action::Configured, "{report:#?}");
    assert_eq!(
        support::apiserver_writes(&client, &resources).await - before,
        1,
        "ServiceAccount writes: the changed one alone"
    );
    // The schema check's before any write (the entries are not confirmed, so both may
    // change), then the one that tells whether the write would change the object.
    assert_eq!(
        support::apiserver_dry_runs(&client, &resources).await - dry_before,
        4,
        "each unconfirmed object dry-run twice"
    );
    // Both confirmed again: the UIDs of the live objects.
    let live = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &ns);
    let recorded = next.store().load(&client).await.unwrap();
    for name in ["one", "two"] {
        let uid = live.get(name).await.unwrap().uid();
        let entry = recorded
            .entries
            .values()
            .find(|e| e.key.name == name)
            .unwrap_or_else(|| panic!("no {name} in {recorded:#?}"));
        assert_eq!(entry.uid, uid, "{entry:#?}");
        assert!(
            entry.applied.is_some() && entry.fields.is_some(),
            "{entry:#?}"
        );
    }
    // And the sync after writes nothing, dry-runs nothing.
    resync_writes_and_dry_runs_nothing(&client, &next, &accounts("api")).await;
}

/// A sync of `yaml` (as `a.yaml`) that finds every ServiceAccount unchanged and asks
/// the apiserver no write and no dry run of one.
async fn resync_writes_and_dry_runs_nothing(client: &kube::Client, engine: &Engine, yaml: &str) {
    let resources = ["serviceaccounts"];
    let before = support::apiserver_writes(client, &resources).await;
    let dry_before = support::apiserver_dry_runs(client, &resources).await;
    let (_, report) = support::sync(engine, &support::tree(&[("a.yaml", yaml)])).await;
    assert!(
        report.objects.iter().all(|o| o.action == Action::Unchanged),
        "{report:#?}"
    );
    assert_eq!(
        (
            support::apiserver_writes(client, &resources).await - before,
            support::apiserver_dry_runs(client, &resources).await - dry_before
        ),
        (0, 0)
    );
}

/// What the sync did to the object named `name`.
fn action_of(report: &driftless::apply::SyncReport, name: &str) -> Action {
    report
        .objects
        .iter()
        .find(|o| o.key.name == name)
        .map(|o| o.action.clone())
        .unwrap_or_else(|| panic!("no {name} in {report:#?}"))
}

/// A sync cut short after writing a *changed* intent (the daemon aborts it when a
/// member's Lease lapses) leaves the entry as the last sync recorded it: confirmed, with
/// the old intent's hashes. The engine told so dry-runs each changed intent first: one
/// already applied is recorded, not written again; one not written yet is written, once.
#[tokio::test]
async fn serial_a_changed_intent_written_but_not_recorded_is_not_written_again() {
    let client = support::client().await;
    let ns = support::namespace(&client, "cut-short-changed").await;
    let accounts = |one: &str, two: &str| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: one\n  namespace: {ns}\n  labels: {{tier: {one}}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: two\n  namespace: {ns}\n  labels: {{tier: {two}}}\n"
        )
    };
    let first = support::engine(&client, &ns);
    let (_, report) = support::sync(
        &first,
        &support::tree(&[("a.yaml", &accounts("web", "web"))]),
    )
    .await;
    assert!(report.ok(), "{report:#?}");
    let mut as_recorded = Vec::new();
    support::rewrite_inventory(&client, &ns, |entries| as_recorded = entries.clone()).await;
    // `one`'s new intent written; then the inventory as that sync, cut short before it
    // could record the write, leaves it.
    let (_, report) = support::sync(
        &first,
        &support::tree(&[("a.yaml", &accounts("api", "web"))]),
    )
    .await;
    assert!(report.ok(), "{report:#?}");
    support::rewrite_inventory(&client, &ns, |entries| *entries = as_recorded).await;

    let resources = ["serviceaccounts"];
    let before = support::apiserver_writes_when_quiet(&client, &resources).await;
    let next = support::engine(&client, &ns);
    next.set_cut_short(true);
    let (_, report) = support::sync(
        &next,
        &support::tree(&[("a.yaml", &accounts("api", "api"))]),
    )
    .await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!(action_of(&report, "one"), Action::Unchanged, "{report:#?}");
    assert_eq!(action_of(&report, "two"), Action::Configured, "{report:#?}");
    assert_eq!(
        support::apiserver_writes(&client, &resources).await - before,
        1,
        "ServiceAccount writes: the one not written yet alone"
    );
    // Recorded with this intent: the sync after writes nothing, dry-runs nothing.
    resync_writes_and_dry_runs_nothing(&client, &next, &accounts("api", "api")).await;
}
