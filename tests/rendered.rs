//! Rendered sources (DESIGN 1.9) against the real tools and the local cluster: podinfo's
//! `kustomize/` as upstream ships it, built by a real `kubectl kustomize` (the testbed's
//! kubectl 1.35, `DRIFTLESS_KUSTOMIZE`), through install, no-op, upgrade, the
//! rendered-manifests pattern and uninstall; kube-state-metrics' Jsonnet against its
//! committed `examples/standard`; a daemon that renders only what changed; and renders
//! that fail, which apply and prune nothing.
//!
//! The inputs come from `../shared/sources`, never edited. Tests that count the
//! apiserver's writes are named `serial_*` (scripts/test runs them alone).

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use support::{Daemon, assert_exit, show};

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/sources")
}

/// The kubectl whose `kubectl kustomize` the tests build with (the testbed's env names it).
fn kubectl() -> String {
    std::env::var("DRIFTLESS_KUSTOMIZE").expect(
        "DRIFTLESS_KUSTOMIZE names the testbed's kubectl 1.35 (source the testbed's env file)",
    )
}

/// podinfo's kustomization at `version`, into `app`, less its HorizontalPodAutoscaler:
/// podinfo 6.x ships it as `autoscaling/v2beta2`, which Kubernetes 1.26 removed (and
/// `validate` refuses, tests/kubernetes.rs), so a user of a current cluster leaves it out
/// of their copy, as here. The rest is upstream's, byte for byte.
fn podinfo_kustomize(version: &str, app: &Path) {
    support::copy_tree(
        &sources().join("podinfo").join(version).join("kustomize"),
        app,
        &[("  - hpa.yaml\n", "")],
    );
    std::fs::remove_file(app.join("hpa.yaml")).unwrap();
}

fn on_cluster(instance: &str, args: &[&str]) -> Output {
    support::driftless_on_cluster(instance, args)
}

/// The writes the apiserver counts to what podinfo's kustomization holds.
const PODINFO: [&str; 4] = [
    "deployments",
    "services",
    "horizontalpodautoscalers",
    "configmaps",
];

#[tokio::test]
async fn serial_podinfo_kustomize_installs_upgrades_hydrates_and_uninstalls() {
    let client = support::client().await;
    let ns = support::namespace(&client, "kz").await;
    let instance = format!("kz-{}", support::suffix(&ns));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("specs");
    let app = root.join("podinfo");
    std::fs::create_dir_all(&root).unwrap();
    // podinfo's kustomization sets no namespace: the tree places it.
    std::fs::write(
        root.join(".driftless.toml"),
        format!("[[namespace]]\npath = \"podinfo/**\"\nnamespace = \"{ns}\"\n"),
    )
    .unwrap();
    podinfo_kustomize("6.0.0", &app);
    let r = root.to_str().unwrap();

    // What driftless reads is byte for byte what kubectl kustomize prints.
    let out_dir = dir.path().join("out");
    let out = support::driftless(&["render", r, "--out", out_dir.to_str().unwrap()]);
    assert_exit(&out, 0);
    let rendered = std::fs::read_to_string(out_dir.join("podinfo/rendered.yaml")).unwrap();
    let (header, body) = rendered.split_once('\n').unwrap();
    assert!(header.starts_with("# Rendered by driftless from podinfo/kustomization.yaml: kubectl kustomize podinfo (kustomize v5."), "{header}");
    let real = Command::new(kubectl())
        .arg("kustomize")
        .arg(&app)
        .output()
        .unwrap();
    assert!(real.status.success());
    assert_eq!(body, String::from_utf8_lossy(&real.stdout));

    let out = support::driftless(&["validate", r]);
    assert_exit(&out, 0);
    let text = support::printed(&out);
    assert!(text.contains("valid: 2 specs"), "{}", show(&out));
    assert!(
        text.contains("rendered: podinfo/kustomization.yaml: kubectl kustomize podinfo"),
        "{}",
        show(&out)
    );

    // Install, then nothing to do.
    let out = on_cluster(&instance, &["apply", r]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let image = |d: Deployment| {
        d.spec.template.spec.unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(
        image(deployments.get("podinfo").await.unwrap()),
        "ghcr.io/stefanprodan/podinfo:6.0.0"
    );
    let out = support::no_writes(&client, &PODINFO, "a re-apply", || {
        on_cluster(&instance, &["apply", r])
    })
    .await;
    assert_exit(&out, 0);
    support::assert_no_writes(&out);
    assert_exit(&on_cluster(&instance, &["diff", r]), 0);

    // Renders that fail apply and prune nothing: one line at the file, exit 2.
    let broken = |what: &str, out: &Output, needle: &str| {
        assert_exit(out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            2,
            "{what}: one error and its count\n{}",
            show(out)
        );
        assert!(lines[0].starts_with(needle), "{what}: {}", show(out));
    };
    let kz = app.join("kustomization.yaml");
    let good = std::fs::read_to_string(&kz).unwrap();
    // Refused before kustomize runs: a file it names is not there.
    std::fs::write(&kz, good.replace("service.yaml", "no-such-file.yaml")).unwrap();
    let out = support::no_writes(
        &client,
        &PODINFO,
        "a kustomization naming a missing file",
        || on_cluster(&instance, &["apply", r]),
    )
    .await;
    broken(
        "closure",
        &out,
        "podinfo/kustomization.yaml:1:1: `resources` in podinfo: \"no-such-file.yaml\" does not exist",
    );
    // Refused by kustomize itself: the same resource twice.
    std::fs::write(&kz, good.replace("service.yaml", "deployment.yaml")).unwrap();
    let out = support::no_writes(&client, &PODINFO, "a broken kustomization", || {
        on_cluster(&instance, &["apply", r])
    })
    .await;
    broken(
        "kustomize",
        &out,
        "podinfo/kustomization.yaml:1:1: kustomize build failed: ",
    );
    std::fs::write(&kz, &good).unwrap();

    std::fs::write(
        root.join("extra.jsonnet"),
        "{\n  a: error 'not today',\n}\n",
    )
    .unwrap();
    let out = support::no_writes(&client, &PODINFO, "a Jsonnet error", || {
        on_cluster(&instance, &["apply", r])
    })
    .await;
    broken("jsonnet", &out, "extra.jsonnet:2:6: error: not today");
    std::fs::remove_file(root.join("extra.jsonnet")).unwrap();

    let out = support::no_writes(&client, &PODINFO, "a missing tool", || {
        on_cluster(
            &instance,
            &["apply", r, "--kustomize", "/nonexistent/kustomize"],
        )
    })
    .await;
    broken(
        "missing tool",
        &out,
        "podinfo/kustomization.yaml:1:1: /nonexistent/kustomize does not run",
    );

    // Upgrade: the newer release's kustomization, in place.
    std::fs::remove_dir_all(&app).unwrap();
    podinfo_kustomize("6.2.3", &app);
    let out = on_cluster(&instance, &["apply", r]);
    assert_exit(&out, 0);
    assert_eq!(
        image(deployments.get("podinfo").await.unwrap()),
        "ghcr.io/stefanprodan/podinfo:6.2.3"
    );
    let out = support::no_writes(&client, &PODINFO, "a re-apply after the upgrade", || {
        on_cluster(&instance, &["apply", r])
    })
    .await;
    support::assert_no_writes(&out);
    assert_exit(&on_cluster(&instance, &["diff", r]), 0);

    // The rendered-manifests pattern: what `render --out` wrote applies with no tool and
    // no write over what the tree itself applied.
    std::fs::remove_dir_all(&out_dir).unwrap();
    assert_exit(
        &support::driftless(&["render", r, "--out", out_dir.to_str().unwrap()]),
        0,
    );
    let o = out_dir.to_str().unwrap();
    let out = support::no_writes(&client, &PODINFO, "the rendered tree", || {
        on_cluster(
            &instance,
            &["apply", o, "--kustomize", "/nonexistent/kustomize"],
        )
    })
    .await;
    assert_exit(&out, 0);
    support::assert_no_writes(&out);

    // Uninstall: an emptied tree, as for any other.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = on_cluster(
        &instance,
        &["apply", empty.to_str().unwrap(), "--allow-mass-prune"],
    );
    assert_exit(&out, 0);
    support::eventually("podinfo gone", Duration::from_secs(60), || async {
        match deployments.get_opt("podinfo").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// kubectl 1.30's kustomize (a v5.0 pre-release) builds podinfo as kubectl 1.35's does,
/// and driftless reads what it prints, byte for byte.
#[test]
fn an_older_kubectl_kustomize_serves_too() {
    let old = std::env::var("DRIFTLESS_TEST_KUBECTL_V30")
        .expect("DRIFTLESS_TEST_KUBECTL_V30 names the testbed's kubectl 1.30");
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("specs/podinfo");
    podinfo_kustomize("6.2.3", &app);
    let out_dir = dir.path().join("out");
    let out = support::driftless(&[
        "render",
        dir.path().join("specs").to_str().unwrap(),
        "--kustomize",
        &old,
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let rendered = std::fs::read_to_string(out_dir.join("podinfo/rendered.yaml")).unwrap();
    let (header, body) = rendered.split_once('\n').unwrap();
    assert!(header.contains("(kustomize v5.0."), "{header}");
    let real = Command::new(&old)
        .arg("kustomize")
        .arg(&app)
        .output()
        .unwrap();
    assert_eq!(body, String::from_utf8_lossy(&real.stdout));
}

/// kube-state-metrics' own Jsonnet, with only `.driftless.toml` added (its one external
/// variable and library path), renders the objects upstream committed as
/// `examples/standard` for that version.
#[test]
fn kube_state_metrics_jsonnet_renders_its_examples_standard() {
    for (tag, version) in [("v2.0.0", "2.0.0"), ("v2.2.4", "2.2.4")] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        support::copy_tree(&sources().join("kube-state-metrics").join(tag), root, &[]);
        std::fs::write(
            root.join(".driftless.toml"),
            format!("[jsonnet]\nlibs = [\"jsonnet\"]\next-vars = {{ version = \"{version}\" }}\n"),
        )
        .unwrap();
        let out_dir = dir.path().join("../out-".to_string() + tag);
        let out = support::driftless(&[
            "render",
            root.to_str().unwrap(),
            "--allow-namespace",
            "kube-system",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert_exit(&out, 0);
        let text = std::fs::read_to_string(out_dir.join("scripts/standard.jsonnet.yaml")).unwrap();
        let ours = support::yaml_docs(&text);
        assert_eq!(ours.len(), 5, "{tag}: {text}");
        for o in &ours {
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/version"], version,
                "{tag}: {o}"
            );
        }
        // The older version's output is committed upstream: the same objects exactly.
        if tag == "v2.0.0" {
            let committed = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/realworld/kube-state-metrics/v2.0.0/examples/standard");
            let mut theirs = Vec::new();
            for e in std::fs::read_dir(&committed).unwrap() {
                theirs.extend(support::yaml_docs(
                    &std::fs::read_to_string(e.unwrap().path()).unwrap(),
                ));
            }
            let key = |v: &Value| serde_json::to_string(v).unwrap();
            let ours: BTreeSet<String> = ours.iter().map(key).collect();
            let theirs: BTreeSet<String> = theirs.iter().map(key).collect();
            assert_eq!(ours, theirs);
        }
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

/// A kustomize that logs each build (the directory it was asked for), then runs the real
/// one: the environment of a run is cleared, so the log's path is written in.
fn counting_kustomize(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("builds.log");
    let wrapper = dir.join("kubectl");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = kustomize ] && echo \"$2\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            kubectl()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (wrapper, log)
}

/// Whether ConfigMap `name` holds `value: want`.
async fn cm_value(cms: &Api<ConfigMap>, name: &str, want: &str) -> Result<(), String> {
    match cms.get_opt(name).await {
        Ok(Some(cm))
            if cm
                .data
                .as_ref()
                .and_then(|d| d.get("value"))
                .map(String::as_str)
                == Some(want) =>
        {
            Ok(())
        }
        other => Err(format!("{name}: {other:?}")),
    }
}

fn builds(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_daemon_renders_only_what_changed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "kz-daemon").await;
    let tools = tempfile::tempdir().unwrap();
    let (wrapper, log) = counting_kustomize(tools.path());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let app = |name: &str, value: &str| {
        let d = root.join("apps").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("kustomization.yaml"),
            format!("namespace: {ns}\nresources: [cm.yaml]\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n"),
        )
        .unwrap();
    };
    app("a", "1");
    app("b", "1");
    let mut daemon = Daemon::builder(&format!("kzd-{}", support::suffix(&ns)))
        .args(&[
            "--dir",
            root.to_str().unwrap(),
            "--resync",
            "1s",
            "--kustomize",
            wrapper.to_str().unwrap(),
        ])
        .start();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let value = |cms: Api<ConfigMap>, name: &'static str, want: &'static str| async move {
        cm_value(&cms, name, want).await
    };
    support::eventually("both apps applied", Duration::from_secs(60), || async {
        value(cms.clone(), "a", "1").await?;
        value(cms.clone(), "b", "1").await
    })
    .await;
    let status = daemon
        .wait_status("the revision applied", |s| {
            s["revision_applied"].is_string() && s["revision_applied"] == s["revision_seen"]
        })
        .await;
    let a = status["specs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == format!("manifest/{ns}/ConfigMap/a"))
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(a["rendered_by"]["tool"], "kustomize", "{a}");
    assert_eq!(
        a["rendered_by"]["command"], "kubectl kustomize apps/a",
        "{a}"
    );
    assert_eq!(builds(&log).len(), 2, "{:?}", builds(&log));

    // Resyncs of an unchanged tree run no tool.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        builds(&log).len(),
        2,
        "{:?}\n{}",
        builds(&log),
        daemon.log()
    );

    // A change to one application renders that one only.
    std::fs::write(
        root.join("apps/a/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  value: \"2\"\n",
    )
    .unwrap();
    support::eventually("a's change applied", Duration::from_secs(60), || {
        value(cms.clone(), "a", "2")
    })
    .await;
    let runs = builds(&log);
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs[2].ends_with("/apps/a"), "{runs:?}");
    assert_eq!(daemon.stop(), Some(0));
}

/// A git source whose `--path` overlay reaches a base outside it (as Argo CD's example
/// apps do): the commit is checked out once, beside the daemon's git cache, and a commit
/// that changes the base is rendered and applied.
#[tokio::test]
async fn a_git_overlay_builds_on_a_base_outside_its_path() {
    let client = support::client().await;
    let ns = support::namespace(&client, "kz-git").await;
    let server = support::GitDaemon::start();
    let (url, _) = server.create("apps.git");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    support::git(w, &["init", "-q", "-b", "main"]);
    let write = |rel: &str, text: &str| {
        let p = w.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let commit = |message: &str| {
        support::git(w, &["add", "-A"]);
        support::git(w, &["commit", "-q", "-m", message]);
        support::git(w, &["push", "-q", &url, "main"]);
    };
    write("base/kustomization.yaml", "resources: [cm.yaml]\n");
    let cm = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  value: \"{v}\"\n"
        )
    };
    write("base/cm.yaml", &cm("1"));
    write(
        "apps/prod/kustomization.yaml",
        &format!("namespace: {ns}\nresources: [../../base]\nnameSuffix: -prod\n"),
    );
    commit("one");

    let mut daemon = Daemon::builder(&format!("kzg-{}", support::suffix(&ns)))
        .args(&[
            "--git",
            url.as_str(),
            "--branch",
            "main",
            "--path",
            "apps/prod",
            "--interval",
            "1s",
        ])
        .start();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let value = |want: &'static str| {
        let cms = cms.clone();
        async move { cm_value(&cms, "app-prod", want).await }
    };
    support::eventually("the overlay applied", Duration::from_secs(60), || {
        value("1")
    })
    .await;
    // Checked out beside the bare cache, one commit at a time.
    let checkouts: Vec<PathBuf> = std::fs::read_dir(daemon.cache_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "checkout"))
        .collect();
    assert_eq!(checkouts.len(), 1, "{checkouts:?}");
    assert!(
        checkouts[0]
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("base/cm.yaml")
            .is_file()
    );

    write("base/cm.yaml", &cm("2"));
    commit("two");
    support::eventually("the base's change applied", Duration::from_secs(60), || {
        value("2")
    })
    .await;
    assert_eq!(
        std::fs::read_dir(&checkouts[0]).unwrap().count(),
        1,
        "only the newest commit's checkout is kept"
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// podinfo's kustomization as upstream ships it holds an `autoscaling/v2beta2`
/// HorizontalPodAutoscaler, which Kubernetes 1.26 removed. The error is found in what
/// `kubectl kustomize` rendered, which is nowhere on disk: it is said at the
/// kustomization, with the rendered line, never at a line of the kustomization that does
/// not hold it. `validate` and the daemon say it alike.
#[tokio::test]
async fn an_error_in_what_a_kustomization_renders_is_said_at_the_kustomization() {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("specs");
    let app = specs.join("podinfo");
    support::copy_tree(&sources().join("podinfo/6.2.3/kustomize"), &app, &[]);
    let rendered = Command::new(kubectl())
        .arg("kustomize")
        .arg(&app)
        .output()
        .unwrap();
    let rendered = String::from_utf8(rendered.stdout).unwrap();
    let line = rendered
        .lines()
        .position(|l| l == "apiVersion: autoscaling/v2beta2")
        .expect("podinfo's kustomization renders its HorizontalPodAutoscaler")
        + 1;
    let written = std::fs::read_to_string(app.join("kustomization.yaml")).unwrap();
    assert!(
        written.lines().count() < line,
        "the rendered line would be one of the kustomization too: the test shows nothing"
    );
    let want = format!("(line {line} of what it renders)");

    let out = support::driftless(&[
        "validate",
        specs.to_str().unwrap(),
        "--kustomize",
        &kubectl(),
    ]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("podinfo/kustomization.yaml:1:1: ")
            && first.contains("autoscaling/v2beta2 HorizontalPodAutoscaler was removed")
            && first.ends_with(&want),
        "{}",
        show(&out)
    );

    let client = support::client().await;
    let ns = support::namespace(&client, "kz-where").await;
    let daemon = Daemon::builder(&ns)
        .args(&["--dir", specs.to_str().unwrap(), "--kustomize", &kubectl()])
        .start();
    let status = daemon.wait_errors("the error reported").await;
    let err = &status["errors"][0];
    assert_eq!(
        (err["file"].as_str(), err["line"].as_u64()),
        (Some("podinfo/kustomization.yaml"), Some(1)),
        "{status:#}"
    );
    assert!(
        err["message"].as_str().is_some_and(|m| m.ends_with(&want)),
        "{status:#}"
    );
}
