//! `driftless diff --base REV`: a pull request previewed with no cluster. A git repository
//! holds plain YAML, two Kustomize apps (built by the testbed's real kubectl) and a chart
//! release of podinfo's upstream chart (the real helm 4); its commit is applied to the test
//! cluster, then the work tree changes as a pull request would. The preview, run with no
//! kubeconfig at all, must name exactly the objects (and actions) the live `diff` names for
//! the same change, grouped by app, Secret values masked; the app the change leaves alone
//! is rendered once for both sides; once the change is applied and committed, both say
//! nothing changes.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use support::{assert_exit, git, show};

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/sources/podinfo/6.2.3/charts/podinfo")
}

/// A kubectl that logs each `kustomize DIR` it builds, then runs the testbed's.
fn counting_kubectl(dir: &Path) -> (PathBuf, PathBuf) {
    let real = std::env::var("DRIFTLESS_KUSTOMIZE").expect(
        "DRIFTLESS_KUSTOMIZE names the testbed's kubectl 1.35 (source the testbed's env file)",
    );
    let log = dir.join("kustomize.log");
    let wrapper = dir.join("kubectl");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = kustomize ] && echo \"$2\" >> '{}'\nexec '{real}' \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (wrapper, log)
}

/// The tree in `specs/`: `password`, `greeting`, the web app's image tag and the release's
/// message as given; `doomed` before the change, `added` after it.
fn write_tree(root: &Path, ns: &str, v2: bool) {
    let (greeting, password, tag, message, extra) = match v2 {
        false => ("hello", "old-pass-4f1d", "1.27.0", "before", "doomed"),
        true => ("goodbye", "new-pass-9c2e", "1.27.1", "after", "added"),
    };
    let specs = root.join("specs");
    std::fs::create_dir_all(specs.join("web")).unwrap();
    std::fs::create_dir_all(specs.join("steady")).unwrap();
    std::fs::write(
        specs.join("plain.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}}}\ndata: {{greeting: {greeting}}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {extra}, namespace: {ns}}}\ndata: {{note: {extra}}}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: {ns}}}\nstringData: {{password: {password}}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        specs.join("web/kustomization.yaml"),
        format!("namespace: {ns}\nresources: [deployment.yaml]\nimages:\n  - name: nginx\n    newTag: {tag}\n"),
    )
    .unwrap();
    std::fs::write(
        specs.join("web/deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - {name: web, image: nginx}\n",
    )
    .unwrap();
    std::fs::write(
        specs.join("steady/kustomization.yaml"),
        format!(
            "namespace: {ns}\nconfigMapGenerator:\n  - name: steady\n    literals: [colour=blue]\n"
        ),
    )
    .unwrap();
    if !specs.join("charts/podinfo").exists() {
        support::copy_tree(&chart(), &specs.join("charts/podinfo"), &[]);
    }
    std::fs::write(
        specs.join("apps.toml"),
        format!(
            "namespace = \"{ns}\"\n\n[helm.podinfo]\nchart = \"charts/podinfo\"\nvalues = {{ ui = {{ message = \"{message}\" }}, hpa = {{ enabled = false }} }}\n"
        ),
    )
    .unwrap();
}

/// `driftless diff --base ARGS…` as a pull request's CI runs it: no kubeconfig anywhere
/// (no flag, no $KUBECONFIG, a $HOME without `.kube`).
fn preview(repo: &Path, kubectl: &Path, cache: &Path, ns: &str, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["--instance", ns, "diff"])
        .args(args)
        .arg(repo.join("specs"))
        .args(["--kustomize", kubectl.to_str().unwrap()])
        .args(["--helm", &helm()])
        .env("KUBECONFIG", home.path().join("no-such-kubeconfig"))
        .env("HOME", home.path())
        .env("DRIFTLESS_CACHE_DIR", cache)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn helm() -> String {
    std::env::var("DRIFTLESS_TEST_HELM4")
        .expect("DRIFTLESS_TEST_HELM4 names the testbed's helm 4 (source its env file)")
}

/// The live `diff` (or `apply`) of the work tree on the test cluster.
fn on_cluster(repo: &Path, kubectl: &Path, ns: &str, verb: &str, extra: &[&str]) -> Output {
    let specs = repo.join("specs");
    let mut args = vec![
        verb,
        specs.to_str().unwrap(),
        "--kustomize",
        kubectl.to_str().unwrap(),
    ];
    let helm = helm();
    args.extend(["--helm", helm.as_str()]);
    args.extend(extra);
    support::driftless_on_cluster(ns, &args)
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(out)))
}

fn built(log: &Path) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.rsplit('/').next().unwrap_or(l).to_string())
        .collect();
    dirs.sort();
    dirs
}

#[tokio::test]
async fn a_pull_request_is_previewed_without_a_cluster_as_the_cluster_would_take_it() {
    let client = support::client().await;
    let ns = support::namespace(&client, "preview").await;
    let tools = tempfile::tempdir().unwrap();
    let (kubectl, log) = counting_kubectl(tools.path());
    let cache = tools.path().join("cache");
    let repo = tempfile::tempdir().unwrap();
    let repo = repo.path();
    write_tree(repo, &ns, false);
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "base"]);
    let applied = on_cluster(repo, &kubectl, &ns, "apply", &["--wait", "--timeout", "3m"]);
    assert_exit(&applied, 0);

    // Nothing changed yet: both say so.
    let out = preview(repo, &kubectl, &cache, &ns, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("No changes: main ("));

    // The pull request.
    write_tree(repo, &ns, true);
    std::fs::remove_file(log.as_path()).unwrap();
    let out = preview(
        repo,
        &kubectl,
        &cache,
        &ns,
        &["--base", "main", "--output", "json"],
    );
    assert_exit(&out, 1);
    let doc = json(&out);
    // `web` changed and is built for the change only (its base was built above); `steady`
    // is not built again at all.
    assert_eq!(built(&log), ["web"], "kustomize builds");
    let want: BTreeSet<(String, String)> = [
        (format!("ConfigMap {ns}/settings"), "update"),
        (format!("ConfigMap {ns}/added"), "create"),
        (format!("ConfigMap {ns}/doomed"), "prune"),
        (format!("Secret {ns}/db"), "update"),
        (format!("Deployment.apps {ns}/web"), "update"),
        (format!("Deployment.apps {ns}/podinfo"), "update"),
    ]
    .into_iter()
    .map(|(id, action)| (id, action.to_string()))
    .collect();
    assert_eq!(support::diff_changes(&doc), want, "{doc:#}");
    let apps: Vec<(&str, &Value)> = doc["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["app"].as_str().unwrap(), &a["summary"]))
        .collect();
    let apps: Vec<&str> = apps.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        apps,
        ["helm/podinfo", "plain.yaml", "web/kustomization.yaml"],
        "{doc:#}"
    );
    let text = serde_json::to_string(&doc).unwrap();
    for secret in ["old-pass-4f1d", "new-pass-9c2e"] {
        assert!(!text.contains(secret), "{secret} shown: {doc:#}");
    }
    let podinfo = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "podinfo" && o["kind"] == "Deployment")
        .unwrap();
    let diff = podinfo["diff"].as_str().unwrap();
    let changed = |sign: char, value: &str| {
        diff.lines().any(|l| {
            l.starts_with(sign) && l.trim_start_matches(sign).trim() == format!("value: {value}")
        })
    };
    assert!(
        diff.starts_with(&format!("--- base/Deployment.apps/{ns}/podinfo\n"))
            && changed('-', "before")
            && changed('+', "after"),
        "{diff}"
    );

    // The live diff of the same change names the same objects, the same way.
    let live = on_cluster(repo, &kubectl, &ns, "diff", &["--output", "json"]);
    assert_exit(&live, 1);
    assert_eq!(support::diff_changes(&json(&live)), want, "{}", show(&live));

    // Markdown for the pull request: the table of apps, a section per object.
    std::fs::remove_file(log.as_path()).unwrap();
    let out = preview(
        repo,
        &kubectl,
        &cache,
        &ns,
        &["--base", "main", "--output", "markdown"],
    );
    assert_exit(&out, 1);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.starts_with("<!-- driftless diff --base -->\n### driftless diff: main ("),
        "{md}"
    );
    assert!(md.contains("| `plain.yaml` | 1 | 2 | 1 |\n"), "{md}");
    assert!(
        md.contains("| `web/kustomization.yaml` | 0 | 1 | 0 |\n"),
        "{md}"
    );
    assert_eq!(md.matches("<details>").count(), 6, "{md}");
    assert!(built(&log).is_empty(), "a second preview builds nothing");

    // Applied and committed: nothing left to preview, and the cluster agrees.
    assert_exit(
        &on_cluster(repo, &kubectl, &ns, "apply", &["--wait", "--timeout", "3m"]),
        0,
    );
    assert_exit(&on_cluster(repo, &kubectl, &ns, "diff", &[]), 0);
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "change"]);
    assert_exit(
        &preview(repo, &kubectl, &cache, &ns, &["--base", "HEAD"]),
        0,
    );
    // Between two commits, the work tree aside.
    let out = preview(
        repo,
        &kubectl,
        &cache,
        &ns,
        &["--base", "HEAD~1", "--head", "HEAD", "-o", "json"],
    );
    assert_exit(&out, 1);
    assert_eq!(support::diff_changes(&json(&out)), want);
}

/// Bad input: a revision that names nothing, a path outside any repository, and an
/// invalid tree on one side are each a clear error (exit 2) with no output on stdout.
#[test]
fn a_preview_that_cannot_be_made_says_why() {
    let repo = tempfile::tempdir().unwrap();
    let specs = repo.path().join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    std::fs::write(
        specs.join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: dev}\n",
    )
    .unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "-q", "-m", "one"]);
    let run = |args: &[&str]| support::driftless(&[&["diff"], args].concat());
    let specs_arg = specs.to_str().unwrap();

    let out = run(&["--base", "no-such-branch", specs_arg]);
    assert_exit(&out, 2);
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("driftless: \"no-such-branch\" names no commit in "),
        "{}",
        show(&out)
    );

    let outside = tempfile::tempdir().unwrap();
    let out = run(&["--base", "main", outside.path().to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not in a git repository"),
        "{}",
        show(&out)
    );

    let out = run(&["--head", "main", specs_arg]);
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--base"),
        "{}",
        show(&out)
    );

    std::fs::write(
        specs.join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: dev}\ndata: [oops\n",
    )
    .unwrap();
    let out = run(&["--base", "main", specs_arg]);
    assert_exit(&out, 2);
    assert!(out.stdout.is_empty(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("a.yaml:4:"), "{stderr}");
    assert!(
        stderr.trim_end().ends_with("(in the work tree)"),
        "{stderr}"
    );
}

/// `diff --base` of a fleet, with no cluster reached: each declared cluster's view of the
/// change (its files by the tree's `[[cluster]]` rules, its `${cluster.name}`, charts told
/// the version the operator declared for it), under its name; one cluster's broken file
/// fails that cluster's preview alone; `--cluster` narrows it to one.
#[test]
fn a_fleet_s_change_is_previewed_per_cluster_with_each_declared_version() {
    let repo = tempfile::tempdir().unwrap();
    let specs = repo.path().join("specs");
    let chart = specs.join("shared/charts/versioned");
    std::fs::create_dir_all(specs.join("edge")).unwrap();
    std::fs::create_dir_all(specs.join("shared")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(specs.join(path), text).unwrap();
    write(
        ".driftless.toml",
        "[vars]\n\n[[cluster]]\npath = \"edge/**\"\nnames = [\"edge\"]\n\n[[cluster]]\npath = \"shared/**\"\nlabels = { fleet = \"yes\" }\n",
    );
    write(
        "shared/named.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: named, namespace: fleet-preview}\ndata: {cluster: '${cluster.name}', rev: one}\n",
    );
    write(
        "edge/only.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only, namespace: fleet-preview}\ndata: {v: '1'}\n",
    );
    write(
        "mgmt.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mgmt, namespace: fleet-preview}\ndata: {v: '1'}\n",
    );
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "-q", "-m", "one"]);

    // The pull request: a chart added and released, each cluster's own file changed, the
    // shared ConfigMap's value changed.
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: versioned\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: versioned, namespace: {{ .Release.Namespace }}}\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
    )
    .unwrap();
    write(
        "shared/apps.toml",
        "namespace = \"fleet-preview\"\n\n[helm.versioned]\nchart = \"shared/charts/versioned\"\n",
    );
    write(
        "edge/only.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only, namespace: fleet-preview}\ndata: {v: '2'}\n",
    );
    write(
        "mgmt.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mgmt, namespace: fleet-preview}\ndata: {v: '2'}\n",
    );
    write(
        "shared/named.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: named, namespace: fleet-preview}\ndata: {cluster: '${cluster.name}', rev: two}\n",
    );

    // The operator's clusters: the edge's kubeconfig is never read by a preview.
    let operator = tempfile::tempdir().unwrap();
    let clusters = operator.path().join("clusters.toml");
    std::fs::write(
        &clusters,
        "[cluster.home]\nkube-version = \"1.34.4\"\nlabels = { fleet = \"yes\" }\n\n[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nkube-version = \"v1.37.2\"\nlabels = { fleet = \"yes\" }\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let helm = helm();
    let run = |extra: &[&str]| {
        let home = tempfile::tempdir().unwrap();
        Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args(["diff", "--base", "main", specs.to_str().unwrap()])
            .args(["--clusters", clusters.to_str().unwrap(), "--helm", &helm])
            .args(extra)
            .env("KUBECONFIG", home.path().join("no-such-kubeconfig"))
            .env("HOME", home.path())
            .env("DRIFTLESS_CACHE_DIR", cache.path())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    // Each cluster's objects by id: action and diff.
    let objects = |doc: &Value| -> std::collections::BTreeMap<String, (String, String)> {
        doc["objects"]
            .as_array()
            .unwrap_or_else(|| panic!("no objects in {doc}"))
            .iter()
            .map(|o| {
                (
                    o["id"].as_str().unwrap().to_string(),
                    (
                        o["action"].as_str().unwrap().to_string(),
                        o["diff"].as_str().unwrap().to_string(),
                    ),
                )
            })
            .collect()
    };

    let out = run(&["-o", "json"]);
    assert_exit(&out, 1);
    let doc = json(&out);
    let docs = doc["clusters"].as_array().unwrap();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["edge", "home"], "{}", show(&out));
    for (doc, own, other, version, not_version) in [
        (
            &docs[0],
            "ConfigMap fleet-preview/only",
            "ConfigMap fleet-preview/mgmt",
            "v1.37.2",
            "v1.34.4",
        ),
        (
            &docs[1],
            "ConfigMap fleet-preview/mgmt",
            "ConfigMap fleet-preview/only",
            "v1.34.4",
            "v1.37.2",
        ),
    ] {
        let cluster = doc["cluster"].as_str().unwrap();
        let objects = objects(doc);
        let ids: BTreeSet<&str> = objects.keys().map(String::as_str).collect();
        assert_eq!(
            ids,
            BTreeSet::from([
                own,
                "ConfigMap fleet-preview/named",
                "ConfigMap fleet-preview/versioned"
            ]),
            "cluster {cluster}: {}",
            show(&out)
        );
        assert!(!ids.contains(other));
        let (action, diff) = &objects["ConfigMap fleet-preview/versioned"];
        assert_eq!(action, "create", "cluster {cluster}");
        assert!(
            diff.contains(version) && !diff.contains(not_version),
            "cluster {cluster}: the chart must be told its declared version {version}: {diff}"
        );
        let (action, diff) = &objects["ConfigMap fleet-preview/named"];
        assert_eq!(action, "update", "cluster {cluster}");
        assert!(
            diff.contains(&format!("cluster: {cluster}")),
            "cluster {cluster}: ${{cluster.name}} is its name: {diff}"
        );
    }

    let out = run(&[]);
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    let (edge, home) = text
        .strip_prefix("cluster edge:\n")
        .and_then(|t| t.split_once("cluster home:\n"))
        .unwrap_or_else(|| panic!("each cluster under its name: {}", show(&out)));
    assert!(
        edge.contains("ConfigMap/fleet-preview/only") && !edge.contains("/mgmt"),
        "{edge}"
    );
    assert!(
        home.contains("ConfigMap/fleet-preview/mgmt") && !home.contains("/only"),
        "{home}"
    );

    // --cluster narrows it to that cluster's preview, as a preview of one cluster is.
    let out = run(&["--cluster", "edge", "-o", "json"]);
    assert_exit(&out, 1);
    let doc = json(&out);
    assert!(doc.get("clusters").is_none(), "{doc}");
    assert!(objects(&doc).contains_key("ConfigMap fleet-preview/only"));

    // The edge's file broken: the edge's preview fails at its place, the home's is made.
    write(
        "edge/only.yaml",
        "apiVersion: v1\nkind: ConfigMap\ndata: [oops\n",
    );
    let out = run(&["-o", "json"]);
    assert_exit(&out, 2);
    let doc = json(&out);
    let docs = doc["clusters"].as_array().unwrap();
    assert_eq!(
        docs[0],
        serde_json::json!({"cluster": "edge", "error": "the tree as cluster edge reads it is invalid"})
    );
    assert_eq!(docs[1]["cluster"], "home");
    assert!(objects(&docs[1]).contains_key("ConfigMap fleet-preview/mgmt"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("edge/only.yaml:3:") && stderr.contains("(in the work tree)"),
        "{stderr}"
    );
}
