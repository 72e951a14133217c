//! Objects the apiserver refuses (docs/src/apply.md: a safe CI gate), against the
//! local cluster: `diff` fails on them as `apply` would, and the daemon says why in its
//! status file, API and log, in the CLI's words, not "Resource not found" and not a
//! library's log line.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{Daemon, assert_exit, http, printed, show};

/// A boolean where a ConfigMap holds strings, and a typo'd field of a Deployment: both
/// valid YAML, both refused by the apiserver.
fn broken(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: prefs, namespace: {ns}}}\ndata:\n  dark-mode: yes\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replica: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: web, image: nginx:1.21}}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: fine, namespace: {ns}}}\ndata: {{a: b}}\n"
    )
}

const PREFS: &str = ".data.dark-mode: expected string, got boolean";
const WEB: &str = "app.yaml:7:1: unknown field spec.replica";

#[tokio::test]
async fn diff_fails_where_apply_would_and_the_daemon_says_why() {
    let client = support::client().await;
    let ns = support::namespace(&client, "refusals").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("app.yaml"), broken(&ns)).unwrap();

    // A CI gate on diff: exit 2, both named, in one line each.
    let out = support::driftless_on_cluster(&ns, &["diff", path]);
    assert_exit(&out, 2);
    let said = printed(&out);
    for (object, why) in [
        (format!("ConfigMap {ns}/prefs"), PREFS),
        (format!("Deployment.apps {ns}/web"), WEB),
    ] {
        assert!(
            said.lines()
                .any(|l| l.starts_with(&format!("error: {object} ")) && l.contains(why)),
            "{object}: {}",
            show(&out)
        );
    }
    // The fine one is still shown as the create it is.
    assert!(
        said.contains(&format!("+++ desired/ConfigMap/{ns}/fine")),
        "{}",
        show(&out)
    );

    // As a user runs it: RUST_LOG names no library.
    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", path, "--resync", "1h"])
        .log_level("info")
        .start();
    let status = daemon
        .wait_status("the failed sync", |s| {
            s["last_sync"]["result"] == "failed"
                && s["last_sync"]["message"].is_string()
                && s["specs"].as_array().is_some_and(|specs| {
                    specs
                        .iter()
                        .all(|s| !s["objects"].as_array().is_none_or(Vec::is_empty))
                })
        })
        .await;
    // Which instance says this, as status, API and UI name it.
    assert_eq!(status["instance"], ns.as_str());
    let message = status["last_sync"]["message"].as_str().unwrap();
    assert!(message.starts_with("2 objects not applied: "), "{message}");
    assert!(
        message.contains(PREFS) && message.contains(WEB),
        "{message}"
    );
    let prefs = format!("manifest/{ns}/ConfigMap/prefs");
    let web = format!("manifest/{ns}/Deployment.apps/web");
    for (id, why) in [(&prefs, PREFS), (&web, WEB)] {
        let spec = support::spec(&status, id);
        assert_eq!(spec["reason"], "ApplyFailed", "{spec}");
        assert_eq!(spec["status"], "Failed", "{spec}");
        assert!(spec["message"].as_str().unwrap().contains(why), "{spec}");
        assert_eq!(spec["objects"][0]["action"], "failed", "{spec}");
        assert!(
            spec["objects"][0]["error"].as_str().unwrap().contains(why),
            "{spec}"
        );
        // The API says the same.
        let (code, body) = http(
            daemon.metrics,
            "GET",
            &format!("/api/v1/specs/{id}"),
            &[],
            b"",
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let api: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(api["reason"], "ApplyFailed", "{api}");
        assert!(api["message"].as_str().unwrap().contains(why), "{api}");
    }

    // Fixed: the reasons go.
    std::fs::write(
        dir.path().join("app.yaml"),
        broken(&ns)
            .replace("dark-mode: yes", "dark-mode: \"yes\"")
            .replace("replica: 2", "replicas: 2"),
    )
    .unwrap();
    let status = daemon
        .wait_status("the fixed sync", |s| s["last_sync"]["result"] == "success")
        .await;
    assert!(status["last_sync"]["message"].is_null(), "{status}");
    let spec = support::spec(&status, &prefs);
    assert!(spec["objects"][0]["error"].is_null(), "{spec}");
    assert_ne!(spec["reason"], "ApplyFailed", "{spec}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    daemon.stop();

    let log = daemon.log();
    assert!(!log.contains("kube_client"), "{log}");
    assert!(
        !log.contains("SpecId {") && !log.contains("key=Spec("),
        "{log}"
    );
    assert!(log.contains("not applied"), "{log}");
}
