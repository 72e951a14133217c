//! `driftless run` as users run it: the real binary, a real directory or git repository
//! (served by `git daemon` on loopback), the real local cluster.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::{ConfigRepo, Daemon, GitDaemon, http};

const WAIT: Duration = Duration::from_secs(90);

/// `driftless run` with the cluster's kubeconfig in `KUBECONFIG`, as users run it.
fn start(instance: &str, args: &[&str]) -> Daemon {
    Daemon::builder(instance)
        .kubeconfig_in_env()
        .args(args)
        .wait(WAIT)
        .stop_within(Duration::from_secs(10))
        .start()
}

async fn get(daemon: &Daemon, path: &str) -> (u16, String) {
    http(daemon.metrics, "GET", path, &[], b"").await
}

fn spec_ready(status: &Value, id: &str) -> bool {
    status["specs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["id"] == id && s["ready"] == true)
}

fn web(name: &str, total_qps: u32) -> String {
    format!(
        "[elasticweb.{name}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

async fn replicas(client: &Client, ns: &str, name: &str) -> Result<i32, String> {
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?;
    d.and_then(|d| d.spec.replicas)
        .ok_or_else(|| format!("no Deployment {name}"))
}

async fn wait_replicas(client: &Client, ns: &str, name: &str, want: i32) {
    support::eventually(
        &format!("Deployment {name} with {want} replicas"),
        WAIT,
        || async {
            match replicas(client, ns, name).await {
                Ok(n) if n == want => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    support::eventually(&format!("{name} gone"), WAIT, || async {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
}

fn promtool_check(text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; testbed/install.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // promtool exits 3 for lint warnings (e.g. help text style); 1 for a broken exposition.
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(3),
        "promtool rejected /metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn dir_mode_applies_saves_prunes_and_keeps_the_last_good_revision() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-dir").await;
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path();
    std::fs::write(
        specs.join("web.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("a", 100), web("b", 100)),
    )
    .unwrap();
    std::fs::write(
        specs.join("c.toml"),
        format!("namespace = \"{ns}\"\n{}", web("c", 100)),
    )
    .unwrap();
    // A resync far away: every change below must come from the watch.
    let mut daemon = start(&ns, &["--dir", &specs.to_string_lossy(), "--resync", "1h"]);

    let id = |n: &str| format!("elasticweb/{ns}/{n}");
    let status = daemon
        .wait_status("all three specs ready", |s| {
            ["a", "b", "c"].iter().all(|n| spec_ready(s, &id(n)))
        })
        .await;
    let first_revision = status["revision_applied"].as_str().unwrap().to_string();
    assert_eq!(get(&daemon, "/readyz").await.0, 200);

    // Save: applied without waiting for a resync.
    std::fs::write(
        specs.join("web.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("a", 300), web("b", 100)),
    )
    .unwrap();
    wait_replicas(&client, &ns, "a", 3).await;
    // Only the spec the save changed was synced: the others' objects were not even read.
    let applied = |s: &Value, revision: &str| {
        s["revision_applied"] == s["revision_seen"] && s["revision_applied"] != revision
    };
    let status = daemon
        .wait_status("the save applied", |s| applied(s, &first_revision))
        .await;
    let second_revision = status["revision_applied"].as_str().unwrap().to_string();
    let objects_of_a = status["specs"]
        .as_array()
        .and_then(|specs| specs.iter().find(|s| s["id"] == id("a")))
        .and_then(|a| a["objects"].as_array())
        .map_or(0, Vec::len);
    let last = &status["last_sync"];
    assert!(objects_of_a > 0, "{status}");
    assert_eq!(
        (
            last["applied"].as_u64(),
            last["unchanged"].as_u64(),
            last["pruned"].as_u64()
        ),
        (Some(1), Some(objects_of_a as u64 - 1), Some(0)),
        "one changed Deployment, and no other spec's objects: {last}"
    );

    // Delete a file: its spec's objects are pruned (by a sync of that spec alone).
    std::fs::remove_file(specs.join("c.toml")).unwrap();
    wait_gone(&Api::<Deployment>::namespaced(client.clone(), &ns), "c").await;
    let status = daemon
        .wait_status("the removal applied", |s| applied(s, &second_revision))
        .await;
    let last = &status["last_sync"];
    assert_eq!(
        (
            last["applied"].as_u64(),
            last["unchanged"].as_u64(),
            last["pruned"].as_u64()
        ),
        (Some(0), Some(0), Some(objects_of_a as u64)),
        "c's objects (as many as a's) pruned, nothing else touched: {last}"
    );

    // A broken file: reported with its position; nothing of that revision applies. (The
    // broken file is written first: every state the watch may see is then invalid.)
    std::fs::write(
        specs.join("broken.toml"),
        "[elasticweb.x]\nimage = \"nginx\"\nsingle-pod-qps = 0\ntotal-qps = 1\n",
    )
    .unwrap();
    std::fs::write(
        specs.join("web.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("a", 500), web("b", 100)),
    )
    .unwrap();
    let status = daemon.wait_errors("the error reported").await;
    let err = &status["errors"][0];
    assert_eq!(
        (
            err["file"].as_str(),
            err["line"].as_u64(),
            err["column"].as_u64()
        ),
        (Some("broken.toml"), Some(3), Some(18)),
        "{err}"
    );
    assert_ne!(status["revision_seen"], status["revision_applied"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        replicas(&client, &ns, "a").await,
        Ok(3),
        "a change from an invalid revision was applied"
    );

    // Fixed: the whole revision converges.
    std::fs::remove_file(specs.join("broken.toml")).unwrap();
    wait_replicas(&client, &ns, "a", 5).await;
    let status = daemon
        .wait_status("errors cleared", |s| {
            s["errors"].as_array().is_some_and(|e| e.is_empty())
        })
        .await;
    assert_ne!(
        status["revision_applied"].as_str(),
        Some(first_revision.as_str())
    );

    // Metrics: a valid exposition, and the counters moved. Per-spec series follow the
    // readiness refresh (up to a second after the status file), and a save the watch saw
    // half-written (std::fs::write truncates first) may have removed them for a moment.
    let spec_a =
        format!("driftless_spec_ready{{kind=\"elasticweb\",namespace=\"{ns}\",name=\"a\"}}");
    let text = support::eventually("spec a's series in /metrics", WAIT, || async {
        let (code, text) = get(&daemon, "/metrics").await;
        if code == 200 && text.contains(&spec_a) {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    promtool_check(&text);
    assert!(
        metric(&text, "driftless_sync_total{result=\"success\"}").unwrap_or(0.0) >= 3.0,
        "{text}"
    );
    assert!(
        metric(&text, "driftless_pruned_objects_total").unwrap_or(0.0) >= 2.0,
        "{text}"
    );
    assert!(
        metric(&text, "driftless_api_writes_total{verb=\"patch\"}").unwrap_or(0.0) >= 6.0,
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "driftless_spec_ready{{kind=\"elasticweb\",namespace=\"{ns}\",name=\"a\"}}"
        )),
        "{text}"
    );

    // SIGTERM: exit 0, and the final status file is whole and says what it last saw.
    let at_five = |s: &Value| {
        s["specs"].as_array().into_iter().flatten().any(|spec| {
            spec["id"] == id("a")
                && spec["ready"] == true
                && spec["figures"]["desired_replicas"] == 5
                && spec["figures"]["available_replicas"] == 5
        })
    };
    daemon.wait_status("a ready at 5 replicas", at_five).await;
    assert_eq!(daemon.stop(), Some(0));
    let last = daemon.status().unwrap();
    assert!(at_five(&last), "{last}");
}

#[tokio::test]
async fn a_refused_prune_stays_refused_while_the_revision_is_retried() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-refused").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.toml");
    // `d` is two ConfigMaps: objects of a kind b and c do not have, so that b's and c's
    // leaving is a loss, not a rename (docs/src/apply.md: Prune).
    let tree = |names: &[&str]| {
        let webs: String = names
            .iter()
            .map(|n| match *n {
                "d" => (1..=2)
                    .map(|i| format!("[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata.name = \"d{i}\"\n"))
                    .collect(),
                _ => web(n, 0),
            })
            .collect();
        format!("namespace = \"{ns}\"\n{webs}")
    };
    std::fs::write(&file, tree(&["a", "b", "c"])).unwrap();
    let mut daemon = start(
        &ns,
        &["--dir", &dir.path().to_string_lossy(), "--resync", "1h"],
    );
    let id = |n: &str| format!("elasticweb/{ns}/{n}");
    daemon
        .wait_status("a, b and c ready", |s| {
            ["a", "b", "c"].iter().all(|n| spec_ready(s, &id(n)))
        })
        .await;

    // b and c leave (4 of the 6 objects, more than half) as d arrives: d is applied, the
    // prune refused. Retried spec by spec, b's and c's syncs would each prune 2 objects, a
    // small enough share; retried whole, 4 of 8 would pass were d's objects counted.
    std::fs::write(&file, tree(&["a", "d"])).unwrap();
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let configmaps = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns);
    support::eventually("d applied", WAIT, || async {
        match configmaps.get_opt("d2").await.map_err(|e| e.to_string())? {
            Some(_) => Ok(()),
            None => Err("no ConfigMap d2".into()),
        }
    })
    .await;
    support::eventually("the prune refused on three retries", WAIT, || async {
        let (_, text) = get(&daemon, "/metrics").await;
        let refused = metric(&text, "driftless_sync_total{result=\"refused\"}").unwrap_or(0.0);
        if refused >= 4.0 {
            Ok(())
        } else {
            Err(format!("{refused} refused syncs\n{}", daemon.log()))
        }
    })
    .await;
    for name in ["b", "c"] {
        assert!(
            deployments.get_opt(name).await.unwrap().is_some(),
            "{name} was pruned by a retry of a refused revision\n{}",
            daemon.log()
        );
    }
    let status = daemon.status().unwrap();
    assert_eq!(status["last_sync"]["result"], "refused", "{status}");
    assert!(
        status["last_sync"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4 of 6")),
        "{status}"
    );
    // A refused prune leaves its revision not applied, and `status` says so.
    assert_ne!(
        status["revision_applied"], status["revision_seen"],
        "{status}"
    );
    let out = support::driftless(&[
        "status",
        "--status-file",
        &daemon.status_file().to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("not converged:"), "{said}");
    assert!(said.contains("  - prune refused: "), "{said}");
    assert!(said.contains("is not applied (applied: "), "{said}");

    // Keeping b and c ends the refusal.
    std::fs::write(&file, tree(&["a", "b", "c", "d"])).unwrap();
    daemon
        .wait_status("the five specs synced and ready", |s| {
            s["last_sync"]["result"] == "success"
                && ["a", "b", "c"].iter().all(|n| spec_ready(s, &id(n)))
                && ["d1", "d2"]
                    .iter()
                    .all(|n| spec_ready(s, &format!("manifest/{ns}/ConfigMap/{n}")))
        })
        .await;
    assert_eq!(daemon.stop(), Some(0));
}

#[tokio::test]
async fn drift_is_corrected_and_deleted_objects_recreated() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-drift").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("x", 200), web("y", 100)),
    )
    .unwrap();
    let mut daemon = start(
        &ns,
        &[
            "--dir",
            &dir.path().to_string_lossy(),
            "--resync",
            "1h",
            "--events",
        ],
    );
    daemon
        .wait_status("x ready", |s| spec_ready(s, &format!("elasticweb/{ns}/x")))
        .await;

    // Someone else takes our field.
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let theirs = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 7}});
    deployments
        .patch(
            "x",
            &PatchParams::apply("someone").force(),
            &Patch::Apply(&theirs),
        )
        .await
        .unwrap();
    wait_replicas(&client, &ns, "x", 2).await;

    // Someone deletes an owned object.
    let services = Api::<Service>::namespaced(client.clone(), &ns);
    let old_uid = services.get("y").await.unwrap().uid();
    services
        .delete("y", &DeleteParams::default())
        .await
        .unwrap();
    support::eventually("Service y recreated", WAIT, || async {
        match services.get_opt("y").await.map_err(|e| e.to_string())? {
            Some(s) if s.uid() != old_uid => Ok(()),
            other => Err(format!("{:?}", other.map(|s| s.uid()))),
        }
    })
    .await;
    // Counted when the correcting sync returns, a moment after the object is back.
    support::eventually("two drift corrections counted", WAIT, || async {
        let (_, text) = get(&daemon, "/metrics").await;
        match metric(&text, "driftless_drift_corrections_total") {
            Some(n) if n >= 2.0 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // --events: what driftless did is on the objects, for `kubectl describe`.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &ns);
    support::eventually("Applied and drift events on Deployment x", WAIT, || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let on_x: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("x"))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Deployment"))
            .filter_map(|e| e.reason.clone())
            .collect();
        // The create, and the drift correction (folded into the same series or a second event).
        let applied = list
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Applied"))
            .count();
        if on_x.iter().any(|r| r == "Applied") && applied >= 2 {
            Ok(())
        } else {
            Err(format!("{on_x:?}"))
        }
    })
    .await;
    assert_eq!(daemon.stop(), Some(0));
}

#[tokio::test]
async fn localservice_follows_nodes_and_labels_pods() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-local").await;
    let app = format!("ls-{ns}");
    // Pods from someone's Deployment, selected by the localservice.
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "backend"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": app}},
                 "template": {"metadata": {"labels": {"app": app}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("l.toml"),
        format!("namespace = \"{ns}\"\n[localservice.ls]\nselector = {{ app = \"{app}\" }}\nports = [{{ name = \"http\", port = 80, target-port = 8080 }}]\n"),
    )
    .unwrap();
    let mut daemon = start(
        &ns,
        &["--dir", &dir.path().to_string_lossy(), "--resync", "1h"],
    );
    let services = Api::<Service>::namespaced(client.clone(), &ns);
    for n in ["ls-node-1", "ls-node-2", "ls-node-3"] {
        support::eventually(&format!("Service {n}"), WAIT, || async {
            services
                .get_opt(n)
                .await
                .map_err(|e| e.to_string())?
                .map(|_| ())
                .ok_or_else(|| "absent".to_string())
        })
        .await;
    }

    // Every selected Pod carries its node, so `ls-<node>` reaches only Pods on that node.
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    support::eventually("pods labelled with their node", WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .map_err(|e| e.to_string())?;
        let wrong: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                node.is_none() || p.labels().get("localservice.driftless.dev/node") != node.as_ref()
            })
            .map(|p| p.name_any())
            .collect();
        if list.items.len() == 3 && wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("{} pods, unlabelled {wrong:?}", list.items.len()))
        }
    })
    .await;

    // A node joins (with a name that is no valid Service-name part), then leaves.
    let suffix = ns.rsplit('-').next().unwrap();
    let node_name = format!("extra.{suffix}.example");
    let nodes = Api::<Node>::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": node_name, "labels": {"testbed.driftless.dev/fake-node": "true", "kubernetes.io/hostname": node_name}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let joined = support::eventually("a Service for the new node", WAIT, || async {
        let list = services
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .into_iter()
            .find(|s| {
                s.annotations().get("localservice.driftless.dev/node-name") == Some(&node_name)
            })
            .map(|s| s.name_any())
            .ok_or_else(|| "not yet".to_string())
    })
    .await;
    assert!(
        joined.starts_with(&format!("ls-extra-{suffix}-example-")) && joined.len() <= 63,
        "{joined}"
    );
    // The stand-in gave the joining node the labels a kubelet sets on registration.
    support::eventually("the joining node's kubelet labels", WAIT, || async {
        let labels = nodes
            .get(&node_name)
            .await
            .map_err(|e| e.to_string())?
            .labels()
            .clone();
        let want = [
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
        ];
        want.iter()
            .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
            .then_some(())
            .ok_or_else(|| format!("{labels:?}"))
    })
    .await;
    nodes
        .delete(&node_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&services, &joined).await;
    assert!(services.get_opt("ls-node-1").await.unwrap().is_some());
    assert_eq!(daemon.stop(), Some(0));
}

/// Regression: the first sync must wait for the node list, or a localservice renders no
/// Services and prune deletes the ones a previous run created.
#[tokio::test]
async fn a_restarted_daemon_does_not_prune_localservice_services_before_it_knows_the_nodes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-restart").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("l.toml"),
        format!(
            "namespace = \"{ns}\"\n[localservice.ls]\nselector = {{ app = \"x\" }}\nports = [{{ port = 80 }}]\n{}{}",
            web("a", 0),
            web("b", 0)
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["apply", &dir.path().to_string_lossy(), "--instance", &ns])
        .env(
            "KUBECONFIG",
            std::env::var_os(support::CLUSTER_ENV).unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let services = Api::<Service>::namespaced(client.clone(), &ns);
    let uid_of = |list: Vec<Service>| -> std::collections::BTreeMap<String, String> {
        list.into_iter()
            .map(|s| (s.name_any(), s.uid().unwrap_or_default()))
            .collect()
    };
    let before = uid_of(services.list(&ListParams::default()).await.unwrap().items);
    assert!(before.contains_key("ls-node-1"), "{before:?}");

    let mut daemon = start(
        &ns,
        &["--dir", &dir.path().to_string_lossy(), "--resync", "1h"],
    );
    daemon
        .wait_status("first sync", |s| s["last_sync"]["result"] == "success")
        .await;
    let (_, text) = get(&daemon, "/metrics").await;
    assert_eq!(
        metric(&text, "driftless_pruned_objects_total"),
        Some(0.0),
        "{text}\n{}",
        daemon.log()
    );
    let after = uid_of(services.list(&ListParams::default()).await.unwrap().items);
    // Nodes other tests add meanwhile may bring new Services; none may have been replaced.
    for (name, uid) in &before {
        assert_eq!(
            after.get(name),
            Some(uid),
            "Service {name} was deleted (and recreated)"
        );
    }
    assert_eq!(daemon.stop(), Some(0));
}

#[tokio::test]
async fn git_mode_follows_commits_through_the_hook_and_survives_a_broken_push() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-git").await;
    let repo = ConfigRepo::new();
    let w = repo.work();
    std::fs::create_dir(w.join("clusters")).unwrap();
    let commit = |msg: &str| repo.commit(msg);
    std::fs::write(
        w.join("clusters/web.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("a", 100), web("b", 100)),
    )
    .unwrap();
    std::fs::write(
        w.join("clusters/c.toml"),
        format!("namespace = \"{ns}\"\n{}", web("c", 100)),
    )
    .unwrap();
    std::fs::write(w.join("README.md"), "not a spec").unwrap();
    commit("first");

    let server = GitDaemon::serve(repo.base());
    let url = server.url("config.git");
    // A long interval: every update below arrives through the hook.
    let mut daemon = start(
        &ns,
        &[
            "--git",
            &url,
            "--branch",
            "main",
            "--path",
            "clusters",
            "--interval",
            "1h",
        ],
    );
    let hook = |d: &Daemon| {
        let addr = d.metrics;
        async move {
            http(
                addr,
                "POST",
                "/hooks/git",
                &[("Content-Type", "application/json")],
                b"{}",
            )
            .await
            .0
        }
    };
    let id = |n: &str| format!("elasticweb/{ns}/{n}");
    let status = daemon
        .wait_status("specs ready", |s| {
            ["a", "b", "c"].iter().all(|n| spec_ready(s, &id(n)))
        })
        .await;
    assert!(
        status["source"]
            .as_str()
            .is_some_and(|s| s.contains("config.git")),
        "{status}"
    );

    // A change.
    std::fs::write(
        w.join("clusters/web.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("a", 400), web("b", 100)),
    )
    .unwrap();
    commit("scale a");
    assert_eq!(hook(&daemon).await, 202);
    wait_replicas(&client, &ns, "a", 4).await;

    // A deleted file.
    std::fs::remove_file(w.join("clusters/c.toml")).unwrap();
    commit("drop c");
    assert_eq!(hook(&daemon).await, 202);
    wait_gone(&Api::<Deployment>::namespaced(client.clone(), &ns), "c").await;

    // A broken push: nothing applied, the error in the status file with its position.
    std::fs::write(
        w.join("clusters/web.toml"),
        format!("namespace = \"{ns}\"\n{}{}", web("a", 900), web("b", 100)),
    )
    .unwrap();
    std::fs::write(w.join("clusters/bad.toml"), "[workspace.ide]\nimage = 42\n").unwrap();
    commit("broken");
    assert_eq!(hook(&daemon).await, 202);
    let status = daemon.wait_errors("the error reported").await;
    let err = &status["errors"][0];
    assert_eq!(
        (
            err["file"].as_str(),
            err["line"].as_u64(),
            err["column"].as_u64()
        ),
        (Some("bad.toml"), Some(2), Some(9)),
        "{err}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(replicas(&client, &ns, "a").await, Ok(4));

    // Fixed: converges.
    std::fs::remove_file(w.join("clusters/bad.toml")).unwrap();
    commit("fix");
    assert_eq!(hook(&daemon).await, 202);
    wait_replicas(&client, &ns, "a", 9).await;
    let head = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(w)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    daemon
        .wait_status("revision applied is HEAD", |s| {
            s["revision_applied"].as_str() == Some(head.trim())
        })
        .await;
    assert_eq!(daemon.stop(), Some(0));
    drop(server);
}

#[tokio::test]
async fn with_leader_election_only_the_leader_writes_and_a_standby_takes_over() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-ha").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w.toml"),
        format!("namespace = \"{ns}\"\n{}", web("x", 100)),
    )
    .unwrap();
    let args = |lease: &str| -> Vec<String> {
        [
            "--dir",
            &dir.path().to_string_lossy(),
            "--leader-elect",
            "--lease-namespace",
            &ns,
            "--lease-name",
            lease,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let a_args = args("lease");
    let a_refs: Vec<&str> = a_args.iter().map(String::as_str).collect();
    let mut first = start(&ns, &a_refs);
    first
        .wait_status("first is leader and synced", |s| {
            s["leader"] == true && s["revision_applied"].is_string()
        })
        .await;
    let mut second = start(&ns, &a_refs);
    second
        .wait_status("second stands by", |s| {
            s["leader"] == false && s["revision_seen"].is_string()
        })
        .await;
    let (_, text) = get(&second, "/metrics").await;
    assert_eq!(
        metric(&text, "driftless_api_writes_total{verb=\"patch\"}").unwrap_or(0.0),
        0.0,
        "the standby wrote: {text}"
    );

    assert_eq!(first.stop(), Some(0));
    // The lease expires (15 s) and the standby takes over and syncs.
    second
        .wait_status("second took over", |s| {
            s["leader"] == true && s["revision_applied"].is_string()
        })
        .await;
    std::fs::write(
        dir.path().join("w.toml"),
        format!("namespace = \"{ns}\"\n{}", web("x", 300)),
    )
    .unwrap();
    wait_replicas(&client, &ns, "x", 3).await;
    assert_eq!(second.stop(), Some(0));
}

#[tokio::test]
async fn run_refuses_protected_namespaces_unless_allowed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-protected").await;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("x-{}", &ns[ns.len() - 8..]);
    std::fs::write(
        dir.path().join("cm.toml"),
        format!(
            "[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\n\
             metadata = {{ name = \"{name}\", namespace = \"kube-public\" }}\n\
             data = {{ a = \"1\" }}\n"
        ),
    )
    .unwrap();
    let path = dir.path().to_string_lossy().to_string();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "kube-public");

    let mut refused = start(&ns, &["--dir", &path]);
    let status = refused
        .wait_errors("the protected namespace reported")
        .await;
    let message = status["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("namespace \"kube-public\" is protected")
            && message.contains("--allow-namespace kube-public"),
        "{message}"
    );
    assert_eq!(status["revision_applied"], Value::Null);
    assert!(cms.get_opt(&name).await.unwrap().is_none());
    assert_eq!(refused.stop(), Some(0));

    let mut allowed = start(
        &format!("{ns}-allowed"),
        &["--dir", &path, "--allow-namespace", "kube-public"],
    );
    allowed
        .wait_status("the ConfigMap applied", |s| {
            s["revision_applied"].is_string()
        })
        .await;
    let cm = cms.get(&name).await.unwrap();
    assert_eq!(cm.data.unwrap()["a"], "1");
    assert_eq!(allowed.stop(), Some(0));
}

/// A Deployment run as a hook (`hook` its annotation, as `key: value`) whose Pod is
/// ready `delay` seconds after it starts (the testbed's kubelet stand-in): 600 is never,
/// as far as a test goes.
fn hook_deployment(ns: &str, name: &str, hook: &str, delay: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{hook}}}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {{testbed.driftless.dev/ready-delay-seconds: \"{delay}\"}}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n"
    )
}

fn config_map(ns: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  value: \"{value}\"\n"
    )
}

/// A tree in `dir` of the hook `migrate` (ready `delay` seconds after it starts) and the
/// ConfigMap `app` it comes before.
fn write_hook_and_app(dir: &std::path::Path, ns: &str, hook: &str, delay: u32) {
    std::fs::write(
        dir.join("migrate.yaml"),
        hook_deployment(ns, "migrate", hook, delay, "nginx:1.21"),
    )
    .unwrap();
    std::fs::write(dir.join("app.yaml"), config_map(ns, "app", "one")).unwrap();
}

/// While a sync waits on a hook that is never ready, the daemon goes on: its status says
/// what it waits on (and with `rewritten`, the loop goes on until the status file was
/// written again meanwhile: the periodic rewrite), `driftless status` says a sync is in
/// progress and not that the file is stale, the API answers, and while `ready` is none of
/// that it fails. Returns the status seen last.
async fn still_serving_while_waiting(
    daemon: &Daemon,
    hook: &str,
    for_: Duration,
    rewritten: bool,
) -> Value {
    // hang guard: the daemon rewrites its status every 10 s; twelve periods without a
    // write is a daemon that stopped writing, not a slow one.
    let limit = Duration::from_secs(120);
    let started = std::time::Instant::now();
    let mut last = Value::Null;
    let mut written = std::collections::BTreeSet::new();
    while started.elapsed() < for_ || (rewritten && written.len() < 2) {
        // hang guard: see `limit`.
        assert!(
            started.elapsed() < limit,
            "the status file was not written again in {limit:?} of waiting: {last:#}"
        );
        let status = daemon.status().expect("a status file");
        written.insert(status["written"].to_string());
        assert_eq!(status["syncing"], true, "{status:#}");
        let progress = &status["sync_progress"];
        assert_eq!(progress["phase"], "waiting", "{status:#}");
        assert!(
            progress["waiting_for"]
                .as_str()
                .is_some_and(|w| w.contains(hook)),
            "{status:#}"
        );
        // hang guard: an answer takes milliseconds; an API held up by the waiting sync
        // would answer only once the wait ends (the hook's ready timeout, 5 min).
        let (code, body) =
            tokio::time::timeout(Duration::from_secs(30), get(daemon, "/api/v1/specs"))
                .await
                .unwrap_or_else(|_| {
                    panic!("GET /api/v1/specs unanswered for 30 s while a sync waits")
                });
        assert_eq!(code, 200, "{body}");
        last = status;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let out = support::driftless(&[
        "status",
        "--status-file",
        daemon.status_file().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    let said = support::show(&out);
    assert!(said.contains("sync in progress"), "{said}");
    assert!(!said.contains("stale"), "{said}");
    let (_, body) = get(daemon, "/api/v1/status").await;
    assert!(body.contains("\"sync_progress\""), "{body}");
    last
}

#[tokio::test]
async fn a_fix_supersedes_a_hook_that_never_gets_ready_and_sigterm_stops_a_waiting_sync() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-supersede").await;
    let dir = tempfile::tempdir().unwrap();
    let hook = "driftless.dev/hook: pre";
    write_hook_and_app(dir.path(), &ns, hook, 600);
    // hang guard: a waiting sync ends at once on SIGTERM (well under a second); one
    // that waited out its hook would take the ready timeout (5 min). 30 s is the
    // kubelet's default grace period, after which it would kill the daemon.
    let mut daemon = Daemon::builder(&ns)
        .kubeconfig_in_env()
        .args(&["--dir", dir.path().to_str().unwrap()])
        .wait(WAIT)
        .stop_within(Duration::from_secs(30))
        .start();
    daemon
        .wait_status("the sync waiting on the hook", |s| {
            s["sync_progress"]["phase"] == "waiting"
                && s["sync_progress"]["waiting_on"]
                    .as_str()
                    .is_some_and(|w| w.contains("migrate"))
        })
        .await;
    // Until the periodic rewrite (every 10 s) has happened.
    still_serving_while_waiting(&daemon, "migrate", Duration::from_secs(3), true).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(
        cms.get_opt("app").await.unwrap().is_none(),
        "applied before its hook"
    );

    // The fix: the hook now gets ready. Applied at once, not once the old wait ends.
    let fixed = std::time::Instant::now();
    std::fs::write(
        dir.path().join("migrate.yaml"),
        hook_deployment(&ns, "migrate", hook, 0, "nginx:1.22"),
    )
    .unwrap();
    std::fs::write(dir.path().join("app.yaml"), config_map(&ns, "app", "two")).unwrap();
    let status = daemon
        .wait_status("the fix applied", |s| {
            s["last_sync"]["result"] == "success"
                && s["revision_applied"] == s["revision_seen"]
                && s["syncing"] == false
        })
        .await;
    let took = fixed.elapsed();
    // hang guard: the fix lands in seconds; had it waited for the old wait to end, that
    // is the hook's ready timeout (5 min). The log says it superseded (below).
    assert!(
        took < Duration::from_secs(60),
        "the fix took {took:?}: {status:#}"
    );
    let app = cms.get("app").await.unwrap();
    assert_eq!(app.data.unwrap()["value"], "two");
    let log = daemon.log();
    assert!(
        log.contains("superseded by revision"),
        "{}",
        support::tail(&log, 4000)
    );

    // Broken again, and SIGTERM while it waits: the daemon ends (within the harness's
    // `stop_within`, above) and says so in a final status.
    std::fs::write(
        dir.path().join("migrate.yaml"),
        hook_deployment(&ns, "migrate", hook, 600, "nginx:1.23"),
    )
    .unwrap();
    daemon
        .wait_status("the sync waiting on the hook again", |s| {
            s["sync_progress"]["waiting_on"]
                .as_str()
                .is_some_and(|w| w.contains("migrate"))
        })
        .await;
    assert_eq!(daemon.stop(), Some(0));
    // Only the final status says `stopped`: none written before the SIGTERM could.
    let status = daemon.status().expect("a final status");
    assert_eq!(status["syncing"], false, "{status:#}");
    assert_eq!(status["last_sync"]["result"], "stopped", "{status:#}");
}

#[tokio::test]
async fn a_pushed_fix_supersedes_a_helm_pre_hook_that_never_gets_ready() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-supersede-git").await;
    let repo = ConfigRepo::new();
    let w = repo.work();
    let hook = "helm.sh/hook: \"pre-install,pre-upgrade\"";
    write_hook_and_app(w, &ns, hook, 600);
    repo.commit("a hook that never gets ready");
    let server = GitDaemon::serve(repo.base());
    let url = server.url("config.git");
    // A long interval: the fix arrives through the hook.
    let daemon = start(
        &ns,
        &["--git", &url, "--branch", "main", "--interval", "1h"],
    );
    daemon
        .wait_status("the sync waiting on the hook", |s| {
            s["sync_progress"]["waiting_on"]
                .as_str()
                .is_some_and(|w| w.contains("migrate"))
        })
        .await;
    still_serving_while_waiting(&daemon, "migrate", Duration::from_secs(3), false).await;

    std::fs::write(
        w.join("migrate.yaml"),
        hook_deployment(&ns, "migrate", hook, 0, "nginx:1.22"),
    )
    .unwrap();
    std::fs::write(w.join("app.yaml"), config_map(&ns, "app", "two")).unwrap();
    let fix = repo.commit("the fix");
    let pushed = std::time::Instant::now();
    let (code, _) = http(
        daemon.metrics,
        "POST",
        "/hooks/git",
        &[("Content-Type", "application/json")],
        b"{}",
    )
    .await;
    assert_eq!(code, 202);
    let status = daemon
        .wait_status("the fix applied", |s| {
            s["revision_applied"] == fix.as_str() && s["last_sync"]["result"] == "success"
        })
        .await;
    let took = pushed.elapsed();
    // hang guard: the pushed fix lands in seconds; waiting out the old hook would take
    // its ready timeout (5 min).
    assert!(
        took < Duration::from_secs(60),
        "the fix took {took:?}: {status:#}"
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert_eq!(cms.get("app").await.unwrap().data.unwrap()["value"], "two");
}

#[tokio::test]
async fn a_fix_supersedes_a_wave_and_releases_a_depends_on_chain_waiting_on_an_unready_object() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-supersede-wave").await;
    let dir = tempfile::tempdir().unwrap();
    let wave = "driftless.dev/wave: \"1\"";
    std::fs::write(
        dir.path().join("db.yaml"),
        hook_deployment(&ns, "db", wave, 600, "nginx:1.21"),
    )
    .unwrap();
    // Wave 2: applied once db is ready.
    std::fs::write(
        dir.path().join("app.yaml"),
        config_map(&ns, "app", "one").replace(
            "  namespace:",
            "  annotations: {driftless.dev/wave: \"2\"}\n  namespace:",
        ),
    )
    .unwrap();
    // And a spec that waits for db through depends-on.
    std::fs::write(
        dir.path().join("after.yaml"),
        config_map(&ns, "after", "one").replace(
            "  namespace:",
            &format!(
                "  annotations: {{driftless.dev/depends-on: manifest/{ns}/Deployment.apps/db}}\n  namespace:"
            ),
        ),
    )
    .unwrap();
    let daemon = start(&ns, &["--dir", dir.path().to_str().unwrap()]);
    daemon
        .wait_status("the sync waiting on wave 1", |s| {
            s["sync_progress"]["waiting_for"]
                .as_str()
                .is_some_and(|w| w.contains("wave 1"))
                && s["sync_progress"]["waiting_on"]
                    .as_str()
                    .is_some_and(|w| w.contains("db"))
        })
        .await;
    still_serving_while_waiting(&daemon, "wave 1", Duration::from_secs(3), false).await;

    let fixed = std::time::Instant::now();
    std::fs::write(
        dir.path().join("db.yaml"),
        hook_deployment(&ns, "db", wave, 0, "nginx:1.22"),
    )
    .unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    support::eventually("wave 2 and the dependent applied", WAIT, || async {
        let app = cms.get_opt("app").await.map_err(|e| e.to_string())?;
        let after = cms.get_opt("after").await.map_err(|e| e.to_string())?;
        (app.is_some() && after.is_some())
            .then_some(())
            .ok_or_else(|| format!("app {:?}, after {:?}", app.is_some(), after.is_some()))
    })
    .await;
    let took = fixed.elapsed();
    // hang guard: the fix lands in seconds; waiting out the old wave would take db's
    // ready timeout (5 min). The log says it superseded (below).
    assert!(
        took < Duration::from_secs(60),
        "the fix took {took:?}\n{}",
        support::tail(&daemon.log(), 4000)
    );
    assert!(daemon.log().contains("superseded by revision"));
}

/// The resync period counts from the end of the last whole sync, as Flux's interval
/// does: a sync longer than the period (the first here waits about 4 s on its hook,
/// with `--resync 2s`) is not followed at once by another. At 10,000 specs the first
/// sync outlasted the default 10 min, and the resync right after it raised the daemon's
/// peak by 48 MiB.
#[tokio::test]
async fn the_resync_period_counts_from_the_end_of_the_last_whole_sync() {
    let client = support::client().await;
    let ns = support::namespace(&client, "run-resync-period").await;
    let dir = tempfile::tempdir().unwrap();
    let hook = "driftless.dev/hook: pre";
    write_hook_and_app(dir.path(), &ns, hook, 4);
    let daemon = start(
        &ns,
        &["--dir", dir.path().to_str().unwrap(), "--resync", "2s"],
    );
    // Two syncs show it: the first outlasts the period, the second waits it out after the
    // first's end. A hang guard of its own: on a machine shared with a Kubernetes build
    // (CI's first run) one sync of this tree took a minute.
    let syncs = support::eventually("two syncs in the history", WAIT * 3, || async {
        let (code, body) = get(&daemon, "/api/v1/syncs").await;
        let doc: Value = serde_json::from_str(&body).map_err(|e| format!("{code} {e}: {body}"))?;
        let syncs = doc["syncs"].as_array().cloned().unwrap_or_default();
        (syncs.len() >= 2).then_some(syncs).ok_or(body)
    })
    .await;
    let at = |s: &Value, field: &str| -> k8s_openapi::jiff::Timestamp {
        s[field]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no {field} time: {s:#}"))
    };
    let held = at(&syncs[0], "ended").duration_since(at(&syncs[0], "started"));
    // A lower bound: the hook held the first sync past the period, or the test shows
    // nothing.
    assert!(
        held.as_secs_f64() > 2.0,
        "the first sync did not outlast the period: {syncs:#?}"
    );
    for pair in syncs.windows(2) {
        let gap = at(&pair[1], "started").duration_since(at(&pair[0], "ended"));
        // A lower bound: each sync waited out the period after the last one's end.
        assert!(
            gap.as_secs_f64() >= 1.8,
            "a sync started {gap:?} after the last one ended: {syncs:#?}"
        );
    }
    assert_eq!(syncs[0]["result"], "success", "{syncs:#?}");
}
