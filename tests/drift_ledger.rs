//! The drift ledger against the real local cluster: `kubectl set image` (field manager
//! `kubectl-set`) on a Deployment the daemon applied is recorded with the field's JSON
//! pointer, the value applied and the value found, the manager and the times, in
//! correct and report modes; a Secret's values only as keyed hashes; served at
//! `/api/v1/drift`, counted in `/metrics`, and still there after a restart.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;

use serde_json::Value;
use support::{Daemon, Recorder, Request, http};

const IMAGE: &str = "/spec/template/spec/containers/0/image";

fn tree(dir: &Path, ns: &str, image: &str) {
    std::fs::write(
        dir.join("app.yaml"),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\n\
             spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"{image}\"}}]}}\n\
             ---\napiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: {ns}}}\n\
             stringData: {{password: applied-pw-7f3a}}\n"
        ),
    )
    .unwrap();
}

async fn ledger(addr: SocketAddr) -> Vec<Value> {
    let (code, body) = http(addr, "GET", "/api/v1/drift", &[], b"").await;
    assert_eq!(code, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    doc["drifts"].as_array().cloned().unwrap_or_default()
}

/// The ledger once `pred` holds of it.
async fn ledger_when(addr: SocketAddr, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    support::eventually(what, support::WAIT, || async {
        let drifts = ledger(addr).await;
        if pred(&drifts) {
            Ok(drifts)
        } else {
            Err(serde_json::to_string_pretty(&drifts).unwrap())
        }
    })
    .await
}

fn of<'a>(drifts: &'a [Value], object: &str) -> Vec<&'a Value> {
    drifts.iter().filter(|d| d["object"] == object).collect()
}

/// A daemon in `mode` telling `hooks` (a webhook at `/hook`, a chat at `/chat`).
fn start(ns: &str, dir: &Path, mode: &str, hooks: &Recorder) -> Daemon {
    Daemon::builder(ns)
        .args(&[
            "--dir",
            &dir.display().to_string(),
            "--resync",
            "1h",
            "--drift",
            mode,
            "--notify",
            &hooks.url("/hook"),
            "--notify-slack",
            &hooks.url("/chat"),
        ])
        .start()
}

/// The `drift` notices the webhook got, as JSON.
fn drift_notices(hooks: &Recorder) -> Vec<Value> {
    hooks
        .under("/hook")
        .iter()
        .map(Request::json)
        .filter(|b| b["event"] == "drift")
        .collect()
}

#[tokio::test]
async fn corrected_drift_is_recorded_with_fields_values_manager_and_times_and_survives_a_restart() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ledger").await;
    let specs = tempfile::tempdir().unwrap();
    tree(specs.path(), &ns, "nginx:1.17.1");
    let hooks = Recorder::start().await;
    let mut daemon = start(&ns, specs.path(), "correct", &hooks);
    daemon
        .wait_status("both ready", |s| {
            support::all_ready(s) && s["specs"].as_array().is_some_and(|a| a.len() == 2)
        })
        .await;
    assert!(ledger(daemon.metrics).await.is_empty());

    support::kubectl(&[
        "-n",
        &ns,
        "set",
        "image",
        "deployment/web",
        "web=nginx:1.99.0",
    ]);
    let web = format!("Deployment.apps {ns}/web");
    let drifts = ledger_when(daemon.metrics, "the image drift recorded, corrected", |d| {
        of(d, &web).iter().any(|r| !r["corrected"].is_null())
    })
    .await;
    let record = of(&drifts, &web)[0].clone();
    assert_eq!(record["mode"], "corrected", "{record:#}");
    assert_eq!(record["spec"], format!("manifest/{ns}/Deployment.apps/web"));
    assert_eq!(
        record["managers"],
        serde_json::json!(["kubectl-set"]),
        "{record:#}"
    );
    let fields = record["fields"].as_array().unwrap();
    assert_eq!(fields.len(), 1, "{record:#}");
    assert_eq!(fields[0]["pointer"], IMAGE);
    assert_eq!(fields[0]["applied"], "nginx:1.17.1");
    assert_eq!(fields[0]["found"], "nginx:1.99.0");
    let time = |name: &str| -> k8s_openapi::jiff::Timestamp {
        record[name]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{name} is no RFC 3339 time: {record:#}"))
    };
    // managedFields' time has whole seconds: the drift began within the second before.
    let began = time("began");
    assert!(
        began <= time("seen") && time("seen") <= time("corrected"),
        "{record:#}"
    );
    // Told once, to the webhook with the record's fields and writer, and to the chat.
    hooks
        .wait_for("the drift told", "/hook", |seen| {
            seen.iter().any(|s| s.json()["event"] == "drift")
        })
        .await;
    let told = drift_notices(&hooks);
    assert_eq!(told.len(), 1, "{told:#?}");
    let notice = &told[0];
    assert_eq!(notice["drift"]["object"], web, "{notice:#}");
    assert_eq!(notice["drift"]["mode"], "corrected", "{notice:#}");
    assert_eq!(notice["drift"]["fields"], record["fields"], "{notice:#}");
    assert_eq!(
        notice["drift"]["managers"], record["managers"],
        "{notice:#}"
    );
    assert_eq!(notice["drift"]["began"], record["began"], "{notice:#}");
    assert_eq!(
        notice["specs"],
        serde_json::json!([format!("manifest/{ns}/Deployment.apps/web")])
    );
    assert_eq!(
        notice["message"],
        format!("{web}: {IMAGE} changed by kubectl-set; taken back"),
        "{notice:#}"
    );
    hooks
        .wait_for("the chat told", "/chat", |seen| {
            seen.iter().any(|s| {
                s.json()["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(": drift at "))
            })
        })
        .await;

    // Taken back in the cluster.
    let live = kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns)
        .get("web")
        .await
        .unwrap();
    let image =
        serde_json::to_value(&live).unwrap()["spec"]["template"]["spec"]["containers"][0]["image"]
            .clone();
    assert_eq!(image, "nginx:1.17.1");

    // A Secret's values: hashes only, never the values.
    support::kubectl(&[
        "-n",
        &ns,
        "patch",
        "secret",
        "db",
        "--type=merge",
        "-p",
        "{\"stringData\":{\"password\":\"by-hand-pw-91c2\"}}",
    ]);
    let secret = format!("Secret {ns}/db");
    let drifts = ledger_when(daemon.metrics, "the Secret's drift recorded", |d| {
        !of(d, &secret).is_empty()
    })
    .await;
    let text = serde_json::to_string(&drifts).unwrap();
    for plain in ["applied-pw-7f3a", "by-hand-pw-91c2"] {
        assert!(!text.contains(plain), "{plain} in the ledger: {text}");
        assert!(!text.contains(&support::base64(plain.as_bytes())), "{text}");
    }
    // Its notice, like the ledger, carries hashes only.
    hooks
        .wait_for("the Secret's drift told", "/hook", |seen| {
            seen.iter()
                .any(|s| s.json()["drift"]["object"] == secret.as_str())
        })
        .await;
    let told: String = hooks
        .under("/")
        .iter()
        .map(|s| String::from_utf8_lossy(&s.body).into_owned())
        .collect();
    for plain in ["applied-pw-7f3a", "by-hand-pw-91c2"] {
        assert!(!told.contains(plain), "{plain} told: {told}");
        assert!(!told.contains(&support::base64(plain.as_bytes())), "{told}");
    }
    let field = &of(&drifts, &secret)[0]["fields"][0];
    assert_eq!(field["pointer"], "/data/password", "{field:#}");
    assert!(
        field["applied"].as_str().unwrap().starts_with("hmac:")
            && field["found"].as_str().unwrap().starts_with("hmac:")
            && field["applied"] != field["found"],
        "{field:#}"
    );

    // Counted in the metrics.
    let (_, metrics) = http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "driftless_drift_recorded_total 2"),
        "{metrics}"
    );

    // The history of syncs beside it: the first created both objects, a later one took
    // the image back.
    let (code, body) = http(daemon.metrics, "GET", "/api/v1/syncs", &[], b"").await;
    assert_eq!(code, 200, "{body}");
    let syncs: Value = serde_json::from_str(&body).unwrap();
    let syncs = syncs["syncs"].as_array().unwrap().clone();
    let changed = |s: &Value, what: &str| {
        s["changed"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c == what))
    };
    let first = &syncs[0];
    assert_eq!(first["result"], "success", "{syncs:#?}");
    assert!(
        changed(first, &format!("{web}: created")) && first["applied"] == 2,
        "{syncs:#?}"
    );
    assert!(
        first["revision"].is_string() && first["started"].is_string(),
        "{syncs:#?}"
    );
    assert!(
        syncs[1..]
            .iter()
            .any(|s| changed(s, &format!("{web}: updated")) && s["result"] == "success"),
        "{syncs:#?}"
    );

    // Kept beside the status file, and read back after a restart.
    let file = daemon.status_file().with_file_name("status.drift.json");
    assert!(file.is_file(), "{}", file.display());
    daemon.stop();
    daemon.restart();
    daemon.wait_status("ready again", support::all_ready).await;
    let after = ledger(daemon.metrics).await;
    assert_eq!(after, drifts, "the ledger after a restart");
    let (_, body) = http(daemon.metrics, "GET", "/api/v1/syncs", &[], b"").await;
    let again: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        again["syncs"].as_array().unwrap()[..syncs.len()],
        syncs[..],
        "the history after a restart"
    );
}

#[tokio::test]
async fn reported_drift_stands_in_the_ledger_diff_shows_it_and_a_correcting_sync_closes_it() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ledger-report").await;
    let specs = tempfile::tempdir().unwrap();
    tree(specs.path(), &ns, "nginx:1.17.1");
    let hooks = Recorder::start().await;
    let daemon = start(&ns, specs.path(), "report", &hooks);
    daemon
        .wait_status("both ready", |s| {
            support::all_ready(s) && s["specs"].as_array().is_some_and(|a| a.len() == 2)
        })
        .await;

    support::kubectl(&[
        "-n",
        &ns,
        "set",
        "image",
        "deployment/web",
        "web=nginx:1.99.0",
    ]);
    let web = format!("Deployment.apps {ns}/web");
    let drifts = ledger_when(daemon.metrics, "the image drift recorded", |d| {
        !of(d, &web).is_empty()
    })
    .await;
    let record = of(&drifts, &web)[0].clone();
    assert_eq!(record["mode"], "reported", "{record:#}");
    assert!(record["corrected"].is_null(), "{record:#}");
    assert_eq!(
        record["managers"],
        serde_json::json!(["kubectl-set"]),
        "{record:#}"
    );
    assert_eq!(record["fields"][0]["pointer"], IMAGE);
    assert_eq!(record["fields"][0]["found"], "nginx:1.99.0");
    hooks
        .wait_for("the drift told", "/hook", |seen| {
            seen.iter().any(|s| s.json()["event"] == "drift")
        })
        .await;
    let told = drift_notices(&hooks);
    assert_eq!(told[0]["drift"]["mode"], "reported", "{told:#?}");
    assert_eq!(
        told[0]["message"],
        format!("{web}: {IMAGE} changed by kubectl-set; left as found (drift report)"),
        "{told:#?}"
    );

    // `diff` shows that drift as the change apply would take back: exit 1, not 2.
    let out = support::driftless_on_cluster(&ns, &["diff", &specs.path().display().to_string()]);
    support::assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with('-') && l.ends_with("image: nginx:1.99.0")),
        "{text}"
    );

    // The same instance, now correcting, on the same state directory: its first sync
    // takes the drift back, and the standing record says when.
    let mut daemon = daemon;
    daemon.stop();
    let status_file = daemon.status_file().to_path_buf();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &specs.path().display().to_string(),
            "--resync",
            "1h",
        ])
        .status_file(&status_file)
        .start();
    let drifts = ledger_when(daemon.metrics, "the standing drift corrected", |d| {
        of(d, &web).iter().all(|r| !r["corrected"].is_null())
    })
    .await;
    let records = of(&drifts, &web);
    assert_eq!(records.len(), 1, "{drifts:#?}");
    assert_eq!(records[0]["mode"], "corrected", "{drifts:#?}");
    assert_eq!(records[0]["began"], record["began"], "{drifts:#?}");
    // A drift is told once: seen again by the reporting daemon's syncs, it was not told
    // again.
    assert_eq!(
        drift_notices(&hooks).len(),
        1,
        "{:#?}",
        drift_notices(&hooks)
    );
}
