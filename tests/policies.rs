//! Per-object policies (docs/src/policies.md) against the local cluster: ignored fields stay
//! someone else's with zero writes, create-only objects keep hand edits, `prune: disabled`
//! objects survive their removal, and `depends-on` orders applies in one-shot `apply` and
//! in the daemon.

use crate::support;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, Patch, PatchParams};

use support::{Daemon, assert_exit, show};

const WAIT: Duration = Duration::from_secs(90);

fn run(instance: &str, args: &[&str]) -> std::process::Output {
    support::driftless_on_cluster(instance, args)
}

fn write(root: &Path, name: &str, text: &str) {
    std::fs::write(root.join(name), text).unwrap();
}

fn deployment(
    name: &str,
    ns: &str,
    annotations: &str,
    replicas: u32,
    pod_annotations: &str,
) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    {annotations}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations:\n        {pod_annotations}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n"
    )
}

async fn replicas(api: &Api<Deployment>, name: &str) -> i32 {
    let d = api.get(name).await.unwrap();
    d.spec.replicas.unwrap_or_default()
}

/// Whether driftless's field manager owns `/spec/replicas` of the Deployment.
async fn we_own_replicas(api: &Api<Deployment>, name: &str) -> bool {
    let d = api.get(name).await.unwrap();
    d.metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .any(|m| {
            m.manager.as_deref() == Some("driftless")
                && m.fields_v1
                    .as_ref()
                    .is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
        })
}

/// `ignore-fields: /spec/replicas` on a YAML Deployment and on a TOML elasticweb: sent on
/// create, then scaled by `kubectl scale` and by a `kubectl patch` (which, unlike scale on
/// 1.20, takes the field's ownership): re-applies, `diff` and a daemon's syncs keep the
/// new counts, and the apiserver counts no write to either Deployment. `serial_`: it
/// counts the apiserver's own write requests.
#[tokio::test]
async fn serial_ignored_replicas_stay_as_scaled_with_zero_writes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ignore").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "web.yaml",
        &deployment(
            "web",
            &ns,
            "driftless.dev/ignore-fields: /spec/replicas",
            2,
            "team: web",
        ),
    );
    write(
        root,
        "shop.toml",
        &format!(
            "[elasticweb.shop]\nnamespace = \"{ns}\"\nimage = \"nginx:1.25\"\nsingle-pod-qps = 100\ntotal-qps = 100\nignore-fields = [\"/spec/replicas\"]\n"
        ),
    );
    let path = root.to_str().unwrap();
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert_eq!(
        replicas(&deployments, "web").await,
        2,
        "the spec's count on create"
    );
    assert_eq!(replicas(&deployments, "shop").await, 1);
    assert!(
        !we_own_replicas(&deployments, "web").await,
        "let go of after create"
    );
    assert!(!we_own_replicas(&deployments, "shop").await);

    support::kubectl(&["-n", &ns, "scale", "deployment/web", "--replicas=4"]);
    support::kubectl(&[
        "-n",
        &ns,
        "patch",
        "deployment/shop",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    let before = support::apiserver_writes_when_quiet(&client, &["deployments"]).await;
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    support::assert_no_writes(&out);
    let out = run(&ns, &["diff", path]);
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{}", show(&out));

    // A daemon's first sync, and a resync after an unrelated edit, write neither.
    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", path])
        .wait(WAIT)
        .start();
    daemon
        .wait_status("the first sync", |s| !s["last_sync"].is_null())
        .await;
    let annotate = Patch::Merge(serde_json::json!({"metadata": {"annotations": {"seen": "yes"}}}));
    deployments
        .patch("web", &PatchParams::default(), &annotate)
        .await
        .unwrap();
    // The daemon's watch sees the edit; wait for the sync it may start to end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    daemon
        .wait_status("a finished sync", |s| s["syncing"] == false)
        .await;
    daemon.stop();
    let after = support::apiserver_writes(&client, &["deployments"]).await;
    assert_eq!(
        after - before,
        1,
        "writes to the Deployments besides the test's own annotation: {}",
        daemon.log()
    );
    assert_eq!(replicas(&deployments, "web").await, 4);
    assert_eq!(replicas(&deployments, "shop").await, 3);
}

/// `driftless.dev/drift: report` on a Deployment: `kubectl scale` moves its replicas, and
/// `apply` says `drifted` and leaves them (the apiserver counts no write to it) while it
/// takes back the same kind of edit on an unmarked ConfigMap; `diff` shows nothing; a
/// daemon that corrects drift lists the Deployment drifted in its status and leaves it.
/// A new revision of the Deployment is applied whole: the replicas come back with it.
/// `serial_`: it counts the apiserver's own write requests.
#[tokio::test]
async fn serial_reported_drift_is_left_as_edited_with_zero_writes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "drift-report").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let web = |image_note: &str| {
        deployment(
            "web",
            &ns,
            "driftless.dev/drift: report",
            2,
            &format!("note: {image_note}"),
        )
    };
    write(root, "web.yaml", &web("one"));
    write(
        root,
        "settings.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  level: info\n"
        ),
    );
    let path = root.to_str().unwrap();
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert_eq!(replicas(&deployments, "web").await, 2);

    support::kubectl(&["-n", &ns, "scale", "deployment/web", "--replicas=4"]);
    let edit = |level: &str| {
        support::kubectl(&[
            "-n",
            &ns,
            "patch",
            "configmap/settings",
            "--type=merge",
            "-p",
            &format!(r#"{{"data":{{"level":"{level}"}}}}"#),
        ])
    };
    edit("debug");
    let level = || async {
        let m = maps.get("settings").await.unwrap();
        m.data.unwrap_or_default().get("level").cloned()
    };
    let before = support::apiserver_writes_when_quiet(&client, &["deployments"]).await;
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    let id = format!("manifest/{ns}/Deployment.apps/web");
    let says = |out: &std::process::Output, what: &str| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with(&id) && l.ends_with(what))
    };
    assert!(says(&out, " 1 drifted"), "{}", show(&out));
    assert_eq!(replicas(&deployments, "web").await, 4, "left as scaled");
    assert_eq!(
        level().await.as_deref(),
        Some("info"),
        "unmarked: taken back"
    );
    let out = run(&ns, &["diff", path]);
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{}", show(&out));

    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", path])
        .wait(WAIT)
        .start();
    let object = format!("Deployment.apps {ns}/web");
    let status = daemon
        .wait_status("the drift listed", |s| {
            support::spec_or_null(s, &id)["drifted"]
                .as_array()
                .is_some_and(|d| d.iter().any(|o| o == object.as_str()))
        })
        .await;
    assert_eq!(status["drift"], "correct", "the daemon corrects the rest");
    edit("trace");
    support::eventually("the ConfigMap's edit taken back", WAIT, || async {
        match level().await.as_deref() {
            Some("info") => Ok(()),
            other => Err(format!("level {other:?}")),
        }
    })
    .await;
    daemon
        .wait_status("a finished sync", |s| s["syncing"] == false)
        .await;
    daemon.stop();
    let after = support::apiserver_writes(&client, &["deployments"]).await;
    assert_eq!(after, before, "writes to the Deployment: {}", daemon.log());
    assert_eq!(replicas(&deployments, "web").await, 4);

    // A new revision: applied whole, the scaled replicas taken back with it.
    write(root, "web.yaml", &web("two"));
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    assert!(says(&out, " 1 updated"), "{}", show(&out));
    assert_eq!(replicas(&deployments, "web").await, 2);
}

/// `driftless.dev/apply: create-only` keeps hand edits and spec changes out; a missing
/// object is created again. `driftless.dev/prune: disabled` and `prune = false` keep
/// objects in the cluster when their specs go, and out of the inventory.
#[tokio::test]
async fn create_only_keeps_hand_edits_and_kept_objects_survive_removal() {
    let client = support::client().await;
    let ns = support::namespace(&client, "policy").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let configmap = |name: &str, annotation: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    {annotation}\ndata:\n  a: \"{value}\"\n"
        )
    };
    write(
        root,
        "settings.yaml",
        &configmap("settings", "driftless.dev/apply: create-only", "1"),
    );
    write(
        root,
        "keep.yaml",
        &configmap("keepme", "driftless.dev/prune: disabled", "1"),
    );
    write(root, "plain.yaml", &configmap("plain", "note: x", "1"));
    write(
        root,
        "shop.toml",
        &format!(
            "[elasticweb.shop]\nnamespace = \"{ns}\"\nimage = \"nginx:1.25\"\nsingle-pod-qps = 100\ntotal-qps = 100\nprune = false\n"
        ),
    );
    let path = root.to_str().unwrap();
    assert_exit(&run(&ns, &["apply", path]), 0);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = |cm: ConfigMap| cm.data.unwrap_or_default()["a"].clone();

    // A hand edit stays through apply and is no difference; so does a spec change.
    let edit = Patch::Merge(serde_json::json!({"data": {"a": "by hand"}}));
    cms.patch("settings", &PatchParams::default(), &edit)
        .await
        .unwrap();
    write(
        root,
        "settings.yaml",
        &configmap("settings", "driftless.dev/apply: create-only", "2"),
    );
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    assert_eq!(data(cms.get("settings").await.unwrap()), "by hand");
    let out = run(&ns, &["diff", path]);
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{}", show(&out));

    // Missing: created again, from the spec as it is now.
    cms.delete("settings", &Default::default()).await.unwrap();
    support::eventually("settings deleted", WAIT, || async {
        cms.get_opt("settings")
            .await
            .unwrap()
            .map_or(Ok(()), |_| Err("still there".to_string()))
    })
    .await;
    let out = run(&ns, &["diff", path]);
    assert_exit(&out, 1);
    assert_exit(&run(&ns, &["apply", path]), 0);
    assert_eq!(data(cms.get("settings").await.unwrap()), "2");

    // Removed from the specs: the plain one is pruned, the kept ones stay, untracked.
    for f in ["keep.yaml", "plain.yaml", "shop.toml"] {
        std::fs::remove_file(root.join(f)).unwrap();
    }
    let out = run(&ns, &["apply", path, "--allow-mass-prune"]);
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kept (prune: disabled)"), "{}", show(&out));
    support::eventually("plain pruned", WAIT, || async {
        cms.get_opt("plain")
            .await
            .unwrap()
            .map_or(Ok(()), |_| Err("still there".to_string()))
    })
    .await;
    assert!(cms.get_opt("keepme").await.unwrap().is_some());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.get_opt("shop").await.unwrap().is_some());
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    assert!(services.get_opt("shop").await.unwrap().is_some());
    let inventory: Api<ConfigMap> = Api::namespaced(client.clone(), "driftless-system");
    let entries = inventory
        .get(&format!("driftless-inventory-{ns}-0"))
        .await
        .unwrap()
        .data
        .unwrap_or_default()["entries.json"]
        .clone();
    for gone in ["keepme", "\"shop\"", "plain"] {
        assert!(
            !entries.contains(gone),
            "{gone} still in the inventory: {entries}"
        );
    }
    assert!(entries.contains("settings"), "{entries}");
    // And nothing happens to them later.
    assert_exit(&run(&ns, &["apply", path]), 0);
    assert!(cms.get_opt("keepme").await.unwrap().is_some());
}

/// A ConfigMap that depends on a Deployment whose Pods become ready only after 6 s is
/// created after that, by `apply` and by the daemon (whose status says what it waits
/// for); a cycle is refused with exit 2, naming the file.
#[tokio::test]
async fn depends_on_applies_after_what_it_waits_for_is_ready() {
    let client = support::client().await;
    for daemon in [false, true] {
        let ns = support::namespace(&client, if daemon { "dep-run" } else { "dep-apply" }).await;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let delay = "testbed.driftless.dev/ready-delay-seconds: \"6\"";
        let db = deployment("db", &ns, "note: slow", 1, delay);
        write(root, "db.yaml", &db);
        let app = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\n  annotations:\n    driftless.dev/depends-on: manifest/{ns}/Deployment.apps/db\ndata:\n  a: \"1\"\n"
        );
        write(root, "app.yaml", &app);
        let path = root.to_str().unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let app_id = format!("manifest/{ns}/ConfigMap/app");
        if daemon {
            let mut d = Daemon::builder(&ns)
                .args(&["--dir", path])
                .wait(WAIT)
                .start();
            let status = d
                .wait_status("app waiting for db", |s| {
                    support::spec_or_null(s, &app_id)["message"]
                        .as_str()
                        .is_some_and(|m| {
                            m.contains("waiting for manifest/") && m.contains("Deployment.apps/db")
                        })
                })
                .await;
            assert_eq!(
                support::spec(&status, &app_id)["reason"],
                "WaitingForDependencies"
            );
            assert!(
                cms.get_opt("app").await.unwrap().is_none(),
                "applied before db was ready"
            );
            d.wait_status("everything ready", support::all_ready).await;
            d.stop();
        } else {
            let out = run(&ns, &["apply", path, "--timeout", "90s"]);
            assert_exit(&out, 0);
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("waiting for 1 spec"),
                "{}",
                show(&out)
            );
        }
        let created = |t: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            t.expect("creationTimestamp").0.as_second()
        };
        let db_at = created(
            deployments
                .get("db")
                .await
                .unwrap()
                .metadata
                .creation_timestamp,
        );
        let app_at = created(cms.get("app").await.unwrap().metadata.creation_timestamp);
        assert!(
            app_at - db_at >= 5,
            "app created {}s after db (daemon: {daemon})",
            app_at - db_at
        );
    }

    // A cycle: db depends on app, which depends on db.
    let ns = "dep-cycle";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "db.yaml",
        &deployment(
            "db",
            ns,
            &format!("driftless.dev/depends-on: manifest/{ns}/ConfigMap/app"),
            1,
            "x: y",
        ),
    );
    write(
        root,
        "app.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\n  annotations:\n    driftless.dev/depends-on: manifest/{ns}/Deployment.apps/db\n"
        ),
    );
    let out = run(ns, &["apply", root.to_str().unwrap()]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cycle") && err.contains("app.yaml:7:5"),
        "{}",
        show(&out)
    );
}
