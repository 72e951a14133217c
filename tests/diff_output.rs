//! `driftless diff --output markdown|json` against the real local cluster: a tree is
//! applied, then changed as a pull request would change it (one object updated, one
//! added, one removed, a Secret's value changed); both outputs must say exactly that,
//! with the right counts, actions and diff lines, and never a Secret value.

use crate::support;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use support::{driftless, show};

/// `driftless --kubeconfig <the test cluster> --instance NS ARGS...`.
fn cli(ns: &str, args: &[&str]) -> Output {
    let kubeconfig = std::env::var(support::CLUSTER_ENV).expect("the test cluster's kubeconfig");
    let mut all = vec!["--kubeconfig", &kubeconfig, "--instance", ns];
    all.extend_from_slice(args);
    driftless(&all)
}

fn diff(ns: &str, dir: &Path, output: &str) -> Output {
    cli(ns, &["diff", &dir.to_string_lossy(), "--output", output])
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// Every document of the tree: a Secret (stringData and data), two ConfigMaps and a
/// Deployment, with `settings`' greeting, the Secret's values and whether `doomed`
/// (there) or `added` (not yet) exists as given.
fn tree(ns: &str, greeting: &str, password: &str, token_b64: &str, v2: bool) -> String {
    let extra = if v2 { "added" } else { "doomed" };
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: db, namespace: {ns}}}
stringData:
  password: {password}
data:
  token: {token_b64}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {ns}}}
data:
  greeting: {greeting}
  colour: blue
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: {extra}, namespace: {ns}}}
data:
  note: {extra}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: nginx:1.17.1
"#
    )
}

/// Random enough that finding it in an output means it leaked.
fn planted(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{what}-{nanos:x}-{:x}", std::process::id())
}

/// The sections of a markdown comment: (summary line, body up to `</details>`).
fn sections(md: &str) -> Vec<(String, String)> {
    md.split("<details")
        .skip(1)
        .map(|s| {
            let (head, body) = s.split_once("</summary>").expect("a <summary>");
            let body = body.split("</details>").next().unwrap_or_default();
            (head.to_string(), body.to_string())
        })
        .collect()
}

#[tokio::test]
async fn markdown_and_json_show_a_pull_requests_changes_without_secret_values() {
    let client = support::client().await;
    let ns = support::namespace(&client, "diff-out").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.yaml");

    let (old_pw, new_pw) = (planted("old-password"), planted("new-password"));
    let (old_tok, new_tok) = (planted("old-token"), planted("new-token"));
    std::fs::write(
        &file,
        tree(
            &ns,
            "hello",
            &old_pw,
            &support::base64(old_tok.as_bytes()),
            false,
        ),
    )
    .unwrap();
    let out = cli(&ns, &["apply", &dir.path().to_string_lossy()]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));

    // Nothing to change: exit 0, a short markdown, an empty list.
    let out = diff(&ns, dir.path(), "markdown");
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "<!-- driftless diff -->\n### driftless diff\n\nNo changes: the cluster matches the specs.\n"
    );
    let out = diff(&ns, dir.path(), "json");
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc,
        json!({"summary": {"create": 0, "update": 0, "replace": 0, "prune": 0, "error": 0}, "objects": []})
    );

    // The pull request: settings' greeting changes, the Secret's values change, `doomed`
    // leaves the specs and `added` joins them; the Deployment stays as it is.
    std::fs::write(
        &file,
        tree(
            &ns,
            "goodbye",
            &new_pw,
            &support::base64(new_tok.as_bytes()),
            true,
        ),
    )
    .unwrap();
    let mut outputs = Vec::new();

    let out = diff(&ns, dir.path(), "markdown");
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let md = String::from_utf8(out.stdout.clone()).unwrap();
    outputs.push(("markdown", out));
    assert!(
        md.starts_with("<!-- driftless diff -->\n### driftless diff\n\n"),
        "{md}"
    );
    for row in [
        "| create | 1 |",
        "| update | 2 |",
        "| replace (deleted and recreated) | 0 |",
        "| prune (deleted: left the specs) | 1 |",
        "| error | 0 |",
    ] {
        assert!(md.contains(row), "no {row:?} in\n{md}");
    }
    let secs = sections(&md);
    let heads: Vec<&str> = secs.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(
        heads,
        [
            format!(
                "><summary><b>update</b> <code>Secret {ns}/db</code> from spec <code>manifest/{ns}/Secret/db</code>"
            ),
            format!(
                "><summary><b>update</b> <code>ConfigMap {ns}/settings</code> from spec <code>manifest/{ns}/ConfigMap/settings</code>"
            ),
            format!(
                "><summary><b>create</b> <code>ConfigMap {ns}/added</code> from spec <code>manifest/{ns}/ConfigMap/added</code>"
            ),
            format!(
                "><summary><b>prune</b> <code>ConfigMap {ns}/doomed</code> from spec <code>manifest/{ns}/ConfigMap/doomed</code>: left the specs (prune deletes it)"
            ),
        ],
        "{md}"
    );
    let body = |i: usize| secs[i].1.as_str();
    assert!(
        body(0).starts_with(&format!(
            "\n\n```diff\n--- live/Secret/{ns}/db\n+++ desired/Secret/{ns}/db\n"
        )) && body(0).contains(
            "-  password: \"*** (before)\"\n-  token: \"*** (before)\"\n\
                 +  password: \"*** (after)\"\n+  token: \"*** (after)\"\n"
        ) && body(0).ends_with("\n```\n\n"),
        "{}",
        body(0)
    );
    assert!(
        body(1).contains("-  greeting: hello\n+  greeting: goodbye\n")
            && body(1).contains("\n   colour: blue\n"),
        "{}",
        body(1)
    );
    assert!(
        body(2).contains(&format!("+++ desired/ConfigMap/{ns}/added\n"))
            && body(2).contains("\n+  note: added\n"),
        "{}",
        body(2)
    );
    assert!(
        body(3).contains(&format!("--- live/ConfigMap/{ns}/doomed\n"))
            && body(3).contains("\n-  note: doomed\n"),
        "{}",
        body(3)
    );
    assert!(
        !md.contains("Deployment"),
        "the unchanged Deployment is listed:\n{md}"
    );
    assert!(!md.contains('\x1b'), "{md}");

    let out = diff(&ns, dir.path(), "json");
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    outputs.push(("json", out));
    assert_eq!(
        doc["summary"],
        json!({"create": 1, "update": 2, "replace": 0, "prune": 1, "error": 0})
    );
    let objects = doc["objects"].as_array().expect("an objects array");
    let entry = |name: &str| -> &Value {
        objects
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("no entry for {name} in {doc:#}"))
    };
    assert_eq!(objects.len(), 4, "{doc:#}");
    for (name, kind, action) in [
        ("db", "Secret", "update"),
        ("settings", "ConfigMap", "update"),
        ("added", "ConfigMap", "create"),
        ("doomed", "ConfigMap", "prune"),
    ] {
        let e = entry(name);
        assert_eq!(e["id"], format!("{kind} {ns}/{name}"), "{e:#}");
        assert_eq!(e["spec"], format!("manifest/{ns}/{kind}/{name}"), "{e:#}");
        assert_eq!(
            (
                &e["kind"],
                &e["group"],
                &e["namespace"],
                &e["action"],
                &e["error"]
            ),
            (
                &json!(kind),
                &json!(""),
                &json!(ns),
                &json!(action),
                &Value::Null
            ),
            "{e:#}"
        );
        let diff = e["diff"].as_str().unwrap();
        assert!(
            diff.starts_with(&format!(
                "--- live/{kind}/{ns}/{name}\n+++ desired/{kind}/{ns}/{name}\n"
            )),
            "{diff}"
        );
    }
    assert!(
        entry("settings")["diff"]
            .as_str()
            .unwrap()
            .contains("-  greeting: hello\n+  greeting: goodbye\n")
    );
    assert!(
        entry("db")["diff"]
            .as_str()
            .unwrap()
            .contains("+  password: \"*** (after)\"\n")
    );

    // Today's text output is unchanged, and the same exit code.
    let out = diff(&ns, dir.path(), "text");
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!("# prune: ConfigMap {ns}/doomed left the specs\n"))
            && text.contains("+  greeting: goodbye\n"),
        "{text}"
    );
    outputs.push(("text", out));

    // No Secret value, old or new, plain or base64, anywhere in any output.
    for (what, out) in &outputs {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for secret in [&old_pw, &new_pw, &old_tok, &new_tok] {
            for form in [secret.to_string(), support::base64(secret.as_bytes())] {
                assert!(!all.contains(&form), "{what} output holds {form}:\n{all}");
            }
        }
    }
}

/// An object the apiserver would refuse is an error in `diff`, in the apiserver's words
/// and once, not a create that `apply` then fails; its namespace missing is no error.
#[tokio::test]
async fn an_object_the_apiserver_refuses_is_a_diff_error() {
    let client = support::client().await;
    let ns = support::namespace(&client, "diff-bad").await;
    let dir = tempfile::tempdir().unwrap();
    let fresh = format!("{ns}-new");
    std::fs::write(
        dir.path().join("app.yaml"),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\n\
             spec:\n  replicas: -1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: nginx}}]}}\n\
             ---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: {fresh}}}\ndata: {{a: b}}\n"
        ),
    )
    .unwrap();
    let out = diff(&ns, dir.path(), "json");
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["summary"]["error"], 1, "{doc:#}");
    assert_eq!(doc["summary"]["create"], 1, "{doc:#}");
    let text = doc.to_string();
    assert!(
        text.contains("spec.replicas: Invalid value: -1") && text.contains("(422 Invalid)"),
        "{doc:#}"
    );
    assert!(
        !text.contains("ApiError") && !text.contains("Status {"),
        "{doc:#}"
    );
    let out = cli(&ns, &["apply", &dir.path().to_string_lossy()]);
    assert_ne!(code(&out), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("spec.replicas: Invalid value: -1").count(),
        1,
        "{}",
        show(&out)
    );
}

/// Drift is drift in `diff`: after `kubectl set image` (manager `kubectl-set`) on a
/// Deployment driftless applied, `diff` shows the image `apply` would take back and exits
/// 1, not 2 for a conflict with that writer; `apply` then takes it back. A change of our
/// own intent to a field the other writer holds is still the conflict `apply` meets.
#[tokio::test]
async fn drift_by_another_writer_is_a_difference_not_a_conflict() {
    let client = support::client().await;
    let ns = support::namespace(&client, "diff-drift").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.yaml");
    let doc = |image: &str, replicas: u8| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\n\
             spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"{image}\"}}]}}\n"
        )
    };
    std::fs::write(&path, doc("nginx:1.17.1", 1)).unwrap();
    let dir_arg = dir.path().to_string_lossy().to_string();
    let out = cli(&ns, &["apply", &dir_arg]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let out = diff(&ns, dir.path(), "text");
    assert_eq!(code(&out), Some(0), "{}", show(&out));

    support::kubectl(&[
        "-n",
        &ns,
        "set",
        "image",
        "deployment/web",
        "web=nginx:1.99.0",
    ]);
    let out = diff(&ns, dir.path(), "text");
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with('-') && l.ends_with("image: nginx:1.99.0"))
            && text
                .lines()
                .any(|l| l.starts_with('+') && l.ends_with("image: nginx:1.17.1")),
        "{}",
        show(&out)
    );
    assert!(
        !support::printed(&out).contains("conflict"),
        "{}",
        show(&out)
    );
    let out = diff(&ns, dir.path(), "json");
    assert_eq!(code(&out), Some(1), "{}", show(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            json["summary"]["update"].as_u64(),
            json["summary"]["error"].as_u64()
        ),
        (Some(1), Some(0)),
        "{json:#}"
    );

    // Our intent changes too (replicas), while kubectl-set still holds the image field
    // we last applied with another value: apply forces neither, so both say conflict.
    std::fs::write(&path, doc("nginx:1.17.2", 2)).unwrap();
    let out = diff(&ns, dir.path(), "text");
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    assert!(
        support::printed(&out).contains("conflict"),
        "{}",
        show(&out)
    );

    // Back to the applied intent: apply takes the image back, and nothing differs.
    std::fs::write(&path, doc("nginx:1.17.1", 1)).unwrap();
    let out = cli(&ns, &["apply", &dir_arg]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let out = diff(&ns, dir.path(), "text");
    assert_eq!(code(&out), Some(0), "{}", show(&out));
}
