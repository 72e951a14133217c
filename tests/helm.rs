//! The `helm` kind and chart directories (DESIGN 1.10) with the real helm 3 and helm 4
//! (the testbed's `DRIFTLESS_TEST_HELM3`/`DRIFTLESS_TEST_HELM4`), on podinfo's chart as
//! upstream ships it (`../shared/sources`, never edited): what driftless applies is what
//! `helm template` renders; the release installs, re-applies with no write, diffs quiet,
//! upgrades to the newer chart and uninstalls; a template error and a missing helm are
//! one line each, with nothing written.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::Value;

use support::{assert_exit, show};

fn chart(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/sources/podinfo")
        .join(version)
        .join("charts/podinfo")
}

fn helm(which: &str) -> String {
    std::env::var(which)
        .unwrap_or_else(|_| panic!("{which} names a helm of the testbed's (source its env file)"))
}

/// A tree of one release of podinfo's chart `version` in namespace `ns`.
fn tree(root: &Path, version: &str, ns: &str) {
    let charts = root.join("charts");
    if charts.exists() {
        std::fs::remove_dir_all(&charts).unwrap();
    }
    support::copy_tree(&chart(version), &charts.join("podinfo"), &[]);
    // A values file of the tree's own, beside the specs: helm's to read, not a spec. The
    // inline values turn off the HorizontalPodAutoscaler podinfo's prod values enable:
    // podinfo 6.x renders it as `autoscaling/v2beta2`, which Kubernetes 1.26 removed.
    std::fs::create_dir_all(root.join("values")).unwrap();
    std::fs::write(root.join("values/web.yaml"), "ui:\n  color: \"#34577c\"\n").unwrap();
    std::fs::write(
        root.join("apps.toml"),
        format!(
            "namespace = \"{ns}\"\n\n[helm.podinfo]\nchart = \"charts/podinfo\"\nvalues-files = [\"charts/podinfo/values-prod.yaml\", \"values/web.yaml\"]\nvalues = {{ replicaCount = 2, ui = {{ message = \"from driftless\" }}, hpa = {{ enabled = false }} }}\n"
        ),
    )
    .unwrap();
}

/// What driftless renders equals `helm template` with the same values, the objects placed
/// in the release namespace: with helm 3 and with helm 4.
#[test]
fn a_release_renders_what_helm_template_renders() {
    for which in ["DRIFTLESS_TEST_HELM3", "DRIFTLESS_TEST_HELM4"] {
        let helm = helm(which);
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("specs");
        tree(&root, "6.2.3", "web");
        let out_dir = dir.path().join("out");
        let out = support::driftless(&[
            "render",
            root.to_str().unwrap(),
            "--helm",
            &helm,
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert_exit(&out, 0);
        let ours = support::yaml_docs(
            &std::fs::read_to_string(out_dir.join("apps.helm-podinfo.yaml")).unwrap(),
        );
        let values = dir.path().join("values.json");
        std::fs::write(
            &values,
            r#"{"replicaCount":2,"ui":{"message":"from driftless"},"hpa":{"enabled":false}}"#,
        )
        .unwrap();
        let real = Command::new(&helm)
            .args(["template", "podinfo"])
            .arg(root.join("charts/podinfo"))
            .args([
                "--namespace",
                "web",
                "--include-crds",
                "--skip-tests",
                "--values",
            ])
            .arg(root.join("charts/podinfo/values-prod.yaml"))
            .arg("--values")
            .arg(root.join("values/web.yaml"))
            .arg("--values")
            .arg(&values)
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(
            real.status.success(),
            "{}",
            String::from_utf8_lossy(&real.stderr)
        );
        let theirs: Vec<Value> = support::yaml_docs(&String::from_utf8_lossy(&real.stdout))
            .into_iter()
            .map(|mut d| {
                d["metadata"]["namespace"] = "web".into();
                d
            })
            .collect();
        let key = |v: &Value| serde_json::to_string(v).unwrap();
        assert_eq!(
            ours.iter().map(key).collect::<BTreeSet<_>>(),
            theirs.iter().map(key).collect::<BTreeSet<_>>(),
            "{which}"
        );
        let deployment = ours.iter().find(|d| d["kind"] == "Deployment").unwrap();
        // The inline values came last, over the values file.
        assert!(
            deployment.to_string().contains("from driftless"),
            "{which}: {deployment}"
        );
        // The rendered tree holds no release any more: its objects are plain YAML.
        let toml = std::fs::read_to_string(out_dir.join("apps.toml")).unwrap();
        assert!(!toml.contains("[helm"), "{toml}");
    }
}

const PODINFO: [&str; 4] = [
    "deployments",
    "services",
    "horizontalpodautoscalers",
    "configmaps",
];

#[tokio::test]
async fn serial_a_release_installs_upgrades_and_uninstalls_with_helm_3_and_4() {
    let client = support::client().await;
    let ns = support::namespace(&client, "helm").await;
    let instance = format!("helm-{}", support::suffix(&ns));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("specs");
    let r = root.to_str().unwrap().to_string();
    let (helm3, helm4) = (helm("DRIFTLESS_TEST_HELM3"), helm("DRIFTLESS_TEST_HELM4"));
    let run = |helm: &str, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend([r.as_str(), "--helm", helm]);
        support::driftless_on_cluster(&instance, &all)
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let image = |d: Deployment| {
        d.spec.template.spec.unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };

    // Install with helm 3; nothing to do after, with either.
    tree(&root, "6.0.0", &ns);
    assert_exit(&run(&helm3, &["apply"]), 0);
    assert_eq!(
        image(deployments.get("podinfo").await.unwrap()),
        "ghcr.io/stefanprodan/podinfo:6.0.0"
    );
    for helm in [&helm3, &helm4] {
        let out =
            support::no_writes(&client, &PODINFO, "a re-apply", || run(helm, &["apply"])).await;
        assert_exit(&out, 0);
        support::assert_no_writes(&out);
        assert_exit(&run(helm, &["diff"]), 0);
    }

    // A template error: one line at the spec, naming the chart's file and line.
    let broken = root.join("charts/podinfo/templates/broken.yaml");
    std::fs::write(&broken, "kind: ConfigMap\nx: {{ .Values.nothing.here }}\n").unwrap();
    let out = support::no_writes(&client, &PODINFO, "a template error", || {
        run(&helm4, &["apply"])
    })
    .await;
    assert_exit(&out, 2);
    // The release is an app of its own: held, in one line, and nothing else of the tree
    // is refused.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let held = "held: app helm/podinfo, neither applied nor pruned: ";
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("helm template failed"))
        .collect();
    assert_eq!(said.len(), 1, "{}", show(&out));
    assert!(
        said[0].starts_with(&format!("{held}apps.toml:3:7: helm template failed: "))
            && said[0].contains("podinfo/templates/broken.yaml:2:"),
        "{}",
        show(&out)
    );
    assert!(stderr.contains("\n1 app held: "), "{}", show(&out));
    std::fs::remove_file(&broken).unwrap();
    // No helm at all: one line, nothing written.
    let out = support::no_writes(&client, &PODINFO, "a missing helm", || {
        run("/nonexistent/helm", &["apply"])
    })
    .await;
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("held: app helm/podinfo, neither applied nor pruned: apps.toml:3:7: /nonexistent/helm does not run"),
        "{}",
        show(&out)
    );

    // Upgrade to the newer chart with helm 4, told the cluster's version and APIs; the
    // diff first shows the change under the release.
    tree(&root, "6.2.3", &ns);
    let out = run(&helm4, &["diff"]);
    assert_exit(&out, 1);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.starts_with(&format!(
            "# release {ns}/podinfo: chart charts/podinfo 6.2.3 (app 6.2.3)\n"
        )) && shown
            .lines()
            .any(|l| l.starts_with('+') && l.contains("image: ghcr.io/stefanprodan/podinfo:6.2.3")),
        "{}",
        show(&out)
    );
    let out = run(&helm4, &["apply"]);
    assert_exit(&out, 0);
    assert_eq!(
        image(deployments.get("podinfo").await.unwrap()),
        "ghcr.io/stefanprodan/podinfo:6.2.3"
    );
    // Readiness reported, not required (as for the real bundles): the rollout settles.
    let out = run(&helm4, &["apply", "--wait", "--timeout", "20s"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", show(&out));
    let out = support::no_writes(&client, &PODINFO, "a re-apply after the upgrade", || {
        run(&helm4, &["apply"])
    })
    .await;
    support::assert_no_writes(&out);
    assert_exit(&run(&helm4, &["diff"]), 0);

    // Uninstall.
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    assert_exit(&run(&helm4, &["apply", "--allow-mass-prune"]), 0);
    support::eventually("podinfo gone", Duration::from_secs(60), || async {
        match deployments.get_opt("podinfo").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// A chart directory no spec names is a release of its own (Argo CD's rule): its own
/// values, its directory's name.
#[test]
fn a_chart_nobody_names_is_rendered_with_its_own_values() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::copy_tree(&chart("6.2.3"), &root.join("apps/frontend"), &[]);
    let out = support::driftless(&[
        "validate",
        root.to_str().unwrap(),
        "--helm",
        &helm("DRIFTLESS_TEST_HELM4"),
    ]);
    assert_exit(&out, 0);
    let text = support::printed(&out);
    assert!(
        text.contains("default/Deployment.apps/frontend-podinfo"),
        "{}",
        show(&out)
    );
    assert!(
        text.contains("rendered: apps/frontend/Chart.yaml: helm template frontend apps/frontend --namespace default"),
        "{}",
        show(&out)
    );

    // A chart that is the spec root itself has no directory of its own in the tree: it
    // is named by its chart, wherever the tree lies (a work tree, a commit's checkout).
    let out = support::driftless(&[
        "validate",
        root.join("apps/frontend").to_str().unwrap(),
        "--helm",
        &helm("DRIFTLESS_TEST_HELM4"),
    ]);
    assert_exit(&out, 0);
    assert!(
        support::printed(&out)
            .contains("rendered: Chart.yaml: helm template podinfo . --namespace default"),
        "{}",
        show(&out)
    );
}

/// A helm that appends what `record` (a shell command) prints to `log` in `dir`, then
/// runs the real one; the log's path is written in, as a run's environment is cleared.
fn recording_helm(dir: &Path, log: &str, record: &str) -> (PathBuf, PathBuf) {
    let log = dir.join(log);
    let wrapper = dir.join("helm");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n{record} >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            helm("DRIFTLESS_TEST_HELM4")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (wrapper, log)
}

/// A helm that logs each `template` (the release), then runs the real one.
fn counting_helm(dir: &Path) -> (PathBuf, PathBuf) {
    recording_helm(dir, "templates.log", "[ \"$1\" = template ] && echo \"$2\"")
}

// Serial: the restart below must find its renders by the same cluster facts, and the
// group/versions a chart is told change whenever a parallel test makes or drops a CRD.
#[tokio::test]
async fn serial_a_daemon_runs_helm_only_for_the_release_that_changed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "helm-daemon").await;
    let tools = tempfile::tempdir().unwrap();
    let (wrapper, log) = counting_helm(tools.path());
    let templates = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::copy_tree(&chart("6.2.3"), &root.join("charts/podinfo"), &[]);
    let releases = |b_message: &str| {
        format!(
            "namespace = \"{ns}\"\n[helm.a]\nchart = \"charts/podinfo\"\nvalues = {{ ui = {{ message = \"a\" }} }}\n[helm.b]\nchart = \"charts/podinfo\"\nvalues = {{ ui = {{ message = \"{b_message}\" }} }}\n"
        )
    };
    std::fs::write(root.join("apps.toml"), releases("b1")).unwrap();
    let mut daemon = support::Daemon::builder(&format!("hd-{}", support::suffix(&ns)))
        .args(&[
            "--dir",
            root.to_str().unwrap(),
            "--resync",
            "1s",
            "--helm",
            wrapper.to_str().unwrap(),
        ])
        .start();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let message = |name: &'static str, want: &'static str| {
        let deployments = deployments.clone();
        async move {
            match deployments.get_opt(name).await {
                Ok(Some(d))
                    if serde_json::to_string(&d)
                        .unwrap_or_default()
                        .contains(&format!("\"{want}\"")) =>
                {
                    Ok(())
                }
                other => Err(format!("{name}: {:?}", other.map(|d| d.is_some()))),
            }
        }
    };
    support::eventually("both releases applied", Duration::from_secs(60), || async {
        message("a-podinfo", "a").await?;
        message("b-podinfo", "b1").await
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
        .find(|s| s["id"] == format!("manifest/{ns}/Deployment.apps/a-podinfo"))
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(a["rendered_by"]["tool"], "helm", "{a}");
    assert_eq!(templates().len(), 2, "{:?}", templates());
    // Each release is a unit: its figures, its specs, ready when they all are.
    let status = daemon
        .wait_status("both releases ready", |s| {
            s["releases"]
                .as_array()
                .is_some_and(|r| r.len() == 2 && r.iter().all(|r| r["ready"] == true))
        })
        .await;
    let release_a = &status["releases"][0];
    assert_eq!(
        (
            &release_a["name"],
            &release_a["namespace"],
            &release_a["chart"],
            &release_a["version"],
            &release_a["app_version"],
            &release_a["status"],
        ),
        (
            &Value::from("a"),
            &Value::from(ns.as_str()),
            &Value::from("charts/podinfo"),
            &Value::from("6.2.3"),
            &Value::from("6.2.3"),
            &Value::from("Ready"),
        ),
        "{release_a}"
    );
    let specs = release_a["specs"].as_array().unwrap();
    assert!(
        specs.contains(&Value::from(format!(
            "manifest/{ns}/Deployment.apps/a-podinfo"
        ))) && specs.len() == release_a["ready_specs"].as_u64().unwrap() as usize,
        "{release_a}"
    );
    // The web UI shows the release with a spec of it.
    let browser = support::Browser::start().await;
    browser
        .goto(&format!(
            "http://{}/#/spec/manifest/{ns}/Deployment.apps/a-podinfo",
            daemon.metrics
        ))
        .await;
    browser
        .wait_for_text(
            "#detail-body",
            &[
                "Release",
                &format!(
                    "{ns}/a: chart charts/podinfo 6.2.3 (app 6.2.3) · {n}/{n} specs ready",
                    n = specs.len()
                ),
            ],
        )
        .await;
    browser.close().await;
    let table = daemon.status_table();
    assert!(
        table.contains(&format!(
            "{ns}/a: chart charts/podinfo 6.2.3 (app 6.2.3), {n}/{n} specs ready",
            n = specs.len()
        )),
        "{table}"
    );

    // Resyncs of an unchanged tree run no helm.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(templates().len(), 2, "{:?}", templates());

    // New values for one release: that one is rendered again, only.
    std::fs::write(root.join("apps.toml"), releases("b2")).unwrap();
    support::eventually("b's values applied", Duration::from_secs(60), || {
        message("b-podinfo", "b2")
    })
    .await;
    let mut runs = templates();
    assert_eq!(runs.pop().as_deref(), Some("b"), "{:?}", templates());
    runs.sort();
    // The first two ran side by side, in either order.
    assert_eq!(runs, ["a", "b"]);

    // A restart renders nothing again: the renders are kept in the cache directory.
    assert_eq!(daemon.stop(), Some(0));
    let before = templates().len();
    // The old status must not answer for the new process.
    std::fs::remove_file(daemon.status_file()).unwrap();
    daemon.restart();
    daemon
        .wait_status("the restarted daemon applied the revision", |s| {
            s["revision_applied"].is_string() && s["revision_applied"] == s["revision_seen"]
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(templates().len(), before, "{:?}", templates());
    assert_eq!(daemon.stop(), Some(0));
}

/// `driftless render --out` of a tree with release `podinfo`, charts pulled into `cache`:
/// the release's objects.
fn render_release(helm: &str, root: &Path, out: &Path, cache: &Path) -> Vec<Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "render",
            root.to_str().unwrap(),
            "--helm",
            helm,
            "--out",
            out.to_str().unwrap(),
        ])
        .env("DRIFTLESS_CACHE_DIR", cache)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert_exit(&o, 0);
    support::yaml_docs(&std::fs::read_to_string(out.join("apps.helm-podinfo.yaml")).unwrap())
}

/// A chart repository on loopback: static files over HTTP/1.1, each request's path
/// counted.
pub(crate) struct ChartRepo {
    pub(crate) url: String,
    gets: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ChartRepo {
    /// `helm package` of podinfo's chart and `helm repo index`, served from `dir`.
    pub(crate) fn start(dir: &Path) -> ChartRepo {
        ChartRepo::serve(dir, None)
    }

    /// As [`ChartRepo::start`], answering 401 to a request without `user:password`.
    fn serve(dir: &Path, basic_auth: Option<(&str, &str)>) -> ChartRepo {
        use base64::Engine as _;
        let wanted = basic_auth.map(|(u, p)| {
            format!(
                "authorization: basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
            .to_lowercase()
        });
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let helm = helm("DRIFTLESS_TEST_HELM4");
        let run = |args: &[&str]| {
            let out = Command::new(&helm)
                .args(args)
                .env("HOME", dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let served = dir.join("served");
        for v in ["6.0.0", "6.2.3"] {
            run(&[
                "package",
                chart(v).to_str().unwrap(),
                "-d",
                served.to_str().unwrap(),
            ]);
        }
        run(&["repo", "index", served.to_str().unwrap(), "--url", &url]);
        let gets = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = gets.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // The headers, up to the blank line.
                let mut h = String::new();
                let mut authorized = wanted.is_none();
                while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                    authorized |= wanted.as_deref() == Some(h.trim().to_lowercase().as_str());
                    h.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                seen.lock().unwrap().push(path.clone());
                let mut stream = stream;
                if !authorized {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"charts\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    continue;
                }
                match std::fs::read(served.join(path.trim_start_matches('/'))) {
                    Ok(body) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(&body);
                    }
                    Err(_) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                    }
                }
            }
        });
        ChartRepo { url, gets }
    }

    fn archives_fetched(&self) -> usize {
        self.gets
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.ends_with(".tgz"))
            .count()
    }
}

/// The same chart from a chart repository on loopback renders the objects the chart in
/// the tree does; it is pulled once, kept by digest, and never fetched again while its
/// version stays.
#[test]
fn a_chart_from_a_repository_is_pulled_once_and_renders_as_the_tree_s() {
    let dir = tempfile::tempdir().unwrap();
    let repo = ChartRepo::start(dir.path());
    let cache = dir.path().join("cache");
    let helm4 = helm("DRIFTLESS_TEST_HELM4");
    let render = |root: &Path, out: &Path| render_release(&helm4, root, out, &cache);
    let from_repo = dir.path().join("from-repo");
    std::fs::create_dir_all(&from_repo).unwrap();
    std::fs::write(
        from_repo.join("apps.toml"),
        format!("namespace = \"web\"\n[helm.podinfo]\nchart = \"podinfo\"\nrepository = \"{}\"\nversion = \"6.2.3\"\n", repo.url),
    )
    .unwrap();
    let in_tree = dir.path().join("in-tree");
    support::copy_tree(&chart("6.2.3"), &in_tree.join("charts/podinfo"), &[]);
    std::fs::write(
        in_tree.join("apps.toml"),
        "namespace = \"web\"\n[helm.podinfo]\nchart = \"charts/podinfo\"\n",
    )
    .unwrap();
    let pulled = render(&from_repo, &dir.path().join("out1"));
    assert_eq!(repo.archives_fetched(), 1);
    let vendored = render(&in_tree, &dir.path().join("out2"));
    let key = |v: &Value| serde_json::to_string(v).unwrap();
    assert_eq!(
        pulled.iter().map(key).collect::<BTreeSet<_>>(),
        vendored.iter().map(key).collect::<BTreeSet<_>>()
    );
    // Again: from the cache, nothing fetched.
    render(&from_repo, &dir.path().join("out3"));
    assert_eq!(
        repo.archives_fetched(),
        1,
        "{:?}",
        repo.gets.lock().unwrap()
    );
    // A cached archive that no longer has its digest is pulled again.
    let archive = std::fs::read_dir(cache.join("charts"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("chart.tgz"))
        .find(|p| p.is_file())
        .unwrap();
    std::fs::write(&archive, b"not the chart").unwrap();
    render(&from_repo, &dir.path().join("out4"));
    assert_eq!(repo.archives_fetched(), 2);
    // A version the repository does not have: one line at the spec.
    std::fs::write(
        from_repo.join("apps.toml"),
        format!(
            "[helm.podinfo]\nchart = \"podinfo\"\nrepository = \"{}\"\nversion = \"9.9.9\"\n",
            repo.url
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["validate", from_repo.to_str().unwrap(), "--helm", &helm4])
        .env("DRIFTLESS_CACHE_DIR", &cache)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = one_line_refusal(&o);
    assert!(
        stderr.starts_with("apps.toml:1:7: cannot pull chart podinfo 9.9.9 from http://127.0.0.1:"),
        "{stderr}"
    );
}

/// The chart pushed to an OCI registry on loopback renders what the chart in the tree
/// does, with helm 3 and helm 4; once pulled, the registry is not needed again.
#[test]
fn a_chart_from_an_oci_registry_renders_as_the_tree_s() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = support::TestRegistry::plain(dir.path());
    let (helm3, helm4) = (helm("DRIFTLESS_TEST_HELM3"), helm("DRIFTLESS_TEST_HELM4"));
    let packaged = dir.path().join("packaged");
    let helm_ok = |helm: &str, args: &[&str]| {
        let out = Command::new(helm)
            .args(args)
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    helm_ok(
        &helm4,
        &[
            "package",
            chart("6.2.3").to_str().unwrap(),
            "-d",
            packaged.to_str().unwrap(),
        ],
    );
    helm_ok(
        &helm4,
        &[
            "push",
            packaged.join("podinfo-6.2.3.tgz").to_str().unwrap(),
            &format!("oci://{}/charts", registry.host),
            "--plain-http",
        ],
    );
    let cache = dir.path().join("cache");
    let render = |helm: &str, root: &Path, out: &Path| render_release(helm, root, out, &cache);
    let from_oci = dir.path().join("from-oci");
    std::fs::create_dir_all(&from_oci).unwrap();
    std::fs::write(
        from_oci.join("apps.toml"),
        format!(
            "namespace = \"web\"\n[helm.podinfo]\nchart = \"oci://{}/charts/podinfo\"\nversion = \"6.2.3\"\nplain-http = true\n",
            registry.host
        ),
    )
    .unwrap();
    let in_tree = dir.path().join("in-tree");
    support::copy_tree(&chart("6.2.3"), &in_tree.join("charts/podinfo"), &[]);
    std::fs::write(
        in_tree.join("apps.toml"),
        "namespace = \"web\"\n[helm.podinfo]\nchart = \"charts/podinfo\"\n",
    )
    .unwrap();
    let key = |v: &Value| serde_json::to_string(v).unwrap();
    let pulled: BTreeSet<String> = render(&helm3, &from_oci, &dir.path().join("o1"))
        .iter()
        .map(key)
        .collect();
    let vendored: BTreeSet<String> = render(&helm4, &in_tree, &dir.path().join("o2"))
        .iter()
        .map(key)
        .collect();
    assert_eq!(pulled, vendored);
    // A range, resolved by the registry's tags, with either helm (each a cache of its own).
    let ranged = dir.path().join("ranged");
    std::fs::create_dir_all(&ranged).unwrap();
    std::fs::write(
        ranged.join("apps.toml"),
        format!(
            "namespace = \"web\"\n[helm.podinfo]\nchart = \"oci://{}/charts/podinfo\"\nversion = \"~6.2.0\"\nplain-http = true\n",
            registry.host
        ),
    )
    .unwrap();
    for (i, helm) in [&helm3, &helm4].into_iter().enumerate() {
        let objects: BTreeSet<String> = render_release(
            helm,
            &ranged,
            &dir.path().join(format!("r{i}")),
            &dir.path().join(format!("range-cache-{i}")),
        )
        .iter()
        .map(key)
        .collect();
        assert_eq!(objects, vendored, "{helm}");
    }
    // The registry gone: the pulled chart is in the cache, verified by its digest.
    registry.down();
    let again: BTreeSet<String> = render(&helm4, &from_oci, &dir.path().join("o3"))
        .iter()
        .map(key)
        .collect();
    assert_eq!(again, vendored);
}

/// A helm that logs every command line it is given, then runs the real one.
fn logging_helm(dir: &Path) -> (PathBuf, PathBuf) {
    recording_helm(dir, "argv.log", "echo \"$*\"")
}

/// `driftless render ROOT --out OUT` with `extra` flags: its output.
fn render_with(
    helm: &Path,
    root: &Path,
    out: &Path,
    cache: &Path,
    extra: &[&str],
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "render",
            root.to_str().unwrap(),
            "--helm",
            helm.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .env("DRIFTLESS_CACHE_DIR", cache)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// The command line keeps renders too: a second `render` or a `validate` of an unchanged
/// release runs no helm, a changed one runs it once, another tree's renders stay beside
/// it, and `--cache-dir` moves the cache (renders there are made anew).
#[test]
fn the_command_line_renders_an_unchanged_release_once_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (wrapper, log) = counting_helm(dir.path());
    let templates = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let cache = dir.path().join("cache");
    let root = dir.path().join("tree");
    tree(&root, "6.2.3", "web");
    let render = |root: &Path, out: &str, extra: &[&str]| {
        let o = render_with(&wrapper, root, &dir.path().join(out), &cache, extra);
        assert_exit(&o, 0);
        std::fs::read_to_string(dir.path().join(out).join("apps.helm-podinfo.yaml")).unwrap()
    };
    let first = render(&root, "out1", &[]);
    assert_eq!(templates(), 1);
    assert!(
        std::fs::read_dir(cache.join("renders")).unwrap().count() >= 1,
        "the render is kept on disk"
    );
    let again = render(&root, "out2", &[]);
    assert_eq!(templates(), 1, "an unchanged release is not rendered again");
    assert_eq!(again, first, "the kept render is what helm rendered");
    let validate = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "validate",
            root.to_str().unwrap(),
            "--helm",
            wrapper.to_str().unwrap(),
        ])
        .env("DRIFTLESS_CACHE_DIR", &cache)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert_exit(&validate, 0);
    assert_eq!(templates(), 1, "validate reads the same cache");

    // Another tree (the newer chart) renders once, and the first tree's render stays.
    let other = dir.path().join("other");
    tree(&other, "6.0.0", "web");
    render(&other, "out3", &[]);
    assert_eq!(templates(), 2);
    render(&root, "out4", &[]);
    assert_eq!(templates(), 2, "another tree's render did not push it out");

    // A changed values file: rendered once more, then kept.
    std::fs::write(root.join("values/web.yaml"), "ui:\n  color: \"#000000\"\n").unwrap();
    let changed = render(&root, "out5", &[]);
    assert_eq!(templates(), 3);
    assert!(changed.contains("#000000"), "{changed}");
    render(&root, "out6", &[]);
    assert_eq!(templates(), 3);

    // Elsewhere: nothing kept there yet.
    let moved = dir.path().join("moved");
    render(&root, "out7", &["--cache-dir", moved.to_str().unwrap()]);
    assert_eq!(templates(), 4);
    assert!(moved.join("renders").is_dir());
}

/// A chart repository that wants a password: the credentials are read from the operator's
/// directory only (never the command line), a range resolves to the newest matching
/// version, and that resolution holds without asking the repository again.
#[test]
fn a_chart_behind_a_password_is_pulled_by_range_with_the_operator_s_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let repo = ChartRepo::serve(dir.path(), Some(("alice", "s3cret-pass")));
    let (wrapper, argv) = logging_helm(dir.path());
    let cache = dir.path().join("cache");
    let creds = dir.path().join("creds");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::write(creds.join("user"), "alice\n").unwrap();
    std::fs::write(creds.join("pass"), "s3cret-pass\n").unwrap();
    let root = dir.path().join("tree");
    std::fs::create_dir_all(&root).unwrap();
    let spec = |range: &str| {
        format!(
            "namespace = \"web\"\n[helm.podinfo]\nchart = \"podinfo\"\nrepository = \"{}\"\nversion = \"{range}\"\nusername-file = \"user\"\npassword-file = \"pass\"\n",
            repo.url
        )
    };
    std::fs::write(root.join("apps.toml"), spec("^6.0")).unwrap();
    let creds_flag = ["--credentials-dir", creds.to_str().unwrap()];

    // Without the operator's directory the files cannot be read: one line at the spec.
    let o = render_with(&wrapper, &root, &dir.path().join("out0"), &cache, &[]);
    let stderr = one_line_refusal(&o);
    assert!(stderr.starts_with("apps.toml:2:7: `username-file` names a file in the credentials directory, and none is set (--credentials-dir)"),
        "{}",
        show(&o)
    );
    assert_eq!(
        repo.gets.lock().unwrap().len(),
        0,
        "nothing was asked of the repository"
    );

    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("out1"),
        &cache,
        &creds_flag,
    );
    assert_exit(&o, 0);
    let objects = support::yaml_docs(
        &std::fs::read_to_string(dir.path().join("out1/apps.helm-podinfo.yaml")).unwrap(),
    );
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["metadata"]["labels"]["helm.sh/chart"], "podinfo-6.2.3",
        "^6.0 resolves to the newest 6.x the repository has"
    );
    assert_eq!(repo.archives_fetched(), 1);
    let lines = std::fs::read_to_string(&argv).unwrap();
    assert!(
        !lines.contains("s3cret-pass"),
        "the password was on a command line:\n{lines}"
    );
    assert!(lines.contains("--password-stdin"), "{lines}");

    // Again, within the resolution's time: the repository is not asked at all.
    let asked = repo.gets.lock().unwrap().len();
    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("out2"),
        &cache,
        &creds_flag,
    );
    assert_exit(&o, 0);
    assert_eq!(
        repo.gets.lock().unwrap().len(),
        asked,
        "{:?}",
        repo.gets.lock().unwrap()
    );

    // A wrong password: one line naming the chart and the repository.
    std::fs::write(creds.join("pass"), "wrong\n").unwrap();
    std::fs::write(root.join("apps.toml"), spec("~6.0.0")).unwrap();
    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("out3"),
        &cache,
        &creds_flag,
    );
    let stderr = one_line_refusal(&o);
    assert!(
        stderr.starts_with(&format!(
            "apps.toml:2:7: cannot pull chart podinfo ~6.0.0 from {}",
            repo.url
        )),
        "{stderr}"
    );

    // A credentials file named outside the directory is refused where it is written.
    std::fs::write(
        root.join("apps.toml"),
        spec("6.2.3").replace("\"pass\"", "\"../../etc/passwd\""),
    )
    .unwrap();
    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("out4"),
        &cache,
        &creds_flag,
    );
    assert_exit(&o, 2);
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("apps.toml:7:17: invalid `password-file`"),
        "{}",
        show(&o)
    );
}

/// A chart repository over TLS whose certificate a test CA signed: refused without that
/// CA, pulled with it as `ca-file`, and pulled unverified only when asked.
#[test]
fn a_chart_repository_over_tls_is_verified_against_the_named_ca() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let creds = d.join("creds");
    std::fs::create_dir_all(&creds).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    support::openssl(
        &creds,
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-subj",
                "/CN=driftless test CA",
                "-days",
                "2",
            ],
        ]
        .concat(),
    );
    support::openssl(
        d,
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "srv.key",
                "-out",
                "srv.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    std::fs::write(d.join("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    let ca = creds.join("ca.crt");
    let ca_key = creds.join("ca.key");
    support::openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            ca.to_str().unwrap(),
            "-CAkey",
            ca_key.to_str().unwrap(),
            "-CAcreateserial",
            "-out",
            "srv.crt",
            "-days",
            "2",
            "-extfile",
            "ext",
        ],
    );
    let port = support::free_port();
    let url = format!("https://127.0.0.1:{port}");
    let served = d.join("served");
    let helm4 = helm("DRIFTLESS_TEST_HELM4");
    let (chart_dir, served_dir) = (chart("6.2.3"), served.to_str().unwrap().to_string());
    for args in [
        &["package", chart_dir.to_str().unwrap(), "-d", &served_dir][..],
        &["repo", "index", &served_dir, "--url", &url],
    ] {
        let out = Command::new(&helm4)
            .args(args)
            .env("HOME", d)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // openssl's own web server: serves the files of its directory, over TLS.
    let server = Command::new("openssl")
        .args([
            "s_server",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-cert",
            "../srv.crt",
            "-key",
            "../srv.key",
            "-WWW",
            "-quiet",
        ])
        .current_dir(&served)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut server = support::await_ready(server, Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .expect("openssl s_server did not start");
    let root = d.join("tree");
    std::fs::create_dir_all(&root).unwrap();
    let cache = d.join("cache");
    let creds_flag = ["--credentials-dir", creds.to_str().unwrap()];
    let spec = |extra: &str| {
        std::fs::write(
            root.join("apps.toml"),
            format!("namespace = \"web\"\n[helm.podinfo]\nchart = \"podinfo\"\nrepository = \"{url}\"\nversion = \"6.2.3\"\n{extra}"),
        )
        .unwrap()
    };
    let helm4 = PathBuf::from(helm4);

    spec("");
    let o = render_with(&helm4, &root, &d.join("out1"), &cache, &creds_flag);
    let stderr = one_line_refusal(&o);
    assert!(
        stderr.contains("certificate signed by unknown authority"),
        "{stderr}"
    );

    spec("ca-file = \"ca.crt\"\n");
    let o = render_with(&helm4, &root, &d.join("out2"), &cache, &creds_flag);
    assert_exit(&o, 0);
    let with_ca = std::fs::read_to_string(d.join("out2/apps.helm-podinfo.yaml")).unwrap();
    assert!(with_ca.contains("podinfo-6.2.3"), "{with_ca}");

    // Unverified only when asked (a fresh cache, so it is pulled again).
    spec("insecure-skip-tls-verify = true\n");
    let o = render_with(&helm4, &root, &d.join("out3"), &d.join("cache2"), &[]);
    assert_exit(&o, 0);
    let _ = server.kill();
    let _ = server.wait();
}

/// A chart in the tree with a dependency from a chart repository (not vendored) and one
/// given as `file://`: the first is fetched on a private copy, the checkout stays as it
/// was; a repository that is away is one line naming the chart and the dependency.
#[test]
fn a_chart_s_dependencies_are_built_on_a_private_copy() {
    let dir = tempfile::tempdir().unwrap();
    let repo = ChartRepo::start(dir.path());
    let root = dir.path().join("tree");
    let write = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let chart_yaml = |repository: &str| {
        format!(
            "apiVersion: v2\nname: shop\nversion: 0.1.0\ndependencies:\n- name: podinfo\n  version: \"^6.0\"\n  repository: {repository}\n- name: common\n  version: 0.1.0\n  repository: file://../common\n"
        )
    };
    write("charts/shop/Chart.yaml", &chart_yaml(&repo.url));
    write(
        "charts/shop/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\ndata: {}\n",
    );
    write(
        "charts/common/Chart.yaml",
        "apiVersion: v2\nname: common\nversion: 0.1.0\n",
    );
    write(
        "charts/common/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common-{{ .Values.flavour }}\ndata: {}\n",
    );
    write("charts/common/values.yaml", "flavour: plain\n");
    write(
        "apps.toml",
        "namespace = \"web\"\n[helm.shop]\nchart = \"charts/shop\"\n",
    );
    let helm4 = PathBuf::from(helm("DRIFTLESS_TEST_HELM4"));
    let cache = dir.path().join("cache");
    let o = render_with(&helm4, &root, &dir.path().join("out1"), &cache, &[]);
    assert_exit(&o, 0);
    let objects = support::yaml_docs(
        &std::fs::read_to_string(dir.path().join("out1/apps.helm-shop.yaml")).unwrap(),
    );
    let names: BTreeSet<String> = objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    for want in [
        "ConfigMap/shop",
        "ConfigMap/common-plain",
        "Deployment/shop-podinfo",
    ] {
        assert!(names.contains(want), "{want} not in {names:?}");
    }
    assert!(
        !root.join("charts/shop/charts").exists() && !root.join("charts/shop/Chart.lock").exists(),
        "the build ran in the checkout"
    );
    // A change in the file:// dependency is a new render.
    write("charts/common/values.yaml", "flavour: spicy\n");
    let o = render_with(&helm4, &root, &dir.path().join("out2"), &cache, &[]);
    assert_exit(&o, 0);
    assert!(
        std::fs::read_to_string(dir.path().join("out2/apps.helm-shop.yaml"))
            .unwrap()
            .contains("common-spicy")
    );

    // The dependency's repository is away: one line naming the chart and the dependency.
    let away = format!("http://127.0.0.1:{}", support::free_port());
    write("charts/shop/Chart.yaml", &chart_yaml(&away));
    let o = render_with(&helm4, &root, &dir.path().join("out3"), &cache, &[]);
    let stderr = one_line_refusal(&o);
    assert!(stderr.starts_with(&format!(
            "apps.toml:2:7: chart charts/shop: dependency podinfo ^6.0 from {away} cannot be fetched: "
        )), "{stderr}");
}

/// A chart in a registry over TLS (a test CA) that wants a password: pulled after `helm
/// registry login` with the operator's files, the password on stdin; refused without the
/// CA or with a wrong password, in one line each.
#[test]
fn a_chart_from_a_registry_with_a_password_and_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let registry = support::TestRegistry::tls(dir.path());
    let ca = registry.ca.clone().unwrap();
    let helm4 = helm("DRIFTLESS_TEST_HELM4");
    let home = dir.path().join("pusher");
    let helm_ok = |args: &[&str], stdin: Option<&str>| {
        let mut c = Command::new(&helm4);
        c.args(args)
            .env("HOME", &home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(text) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let packaged = dir.path().join("packaged");
    let ca_s = ca.to_str().unwrap();
    helm_ok(
        &[
            "package",
            chart("6.2.3").to_str().unwrap(),
            "-d",
            packaged.to_str().unwrap(),
        ],
        None,
    );
    helm_ok(
        &[
            "registry",
            "login",
            &registry.host,
            "--username",
            support::REGISTRY_USER,
            "--password-stdin",
            "--ca-file",
            ca_s,
        ],
        Some(support::REGISTRY_PASSWORD),
    );
    helm_ok(
        &[
            "push",
            packaged.join("podinfo-6.2.3.tgz").to_str().unwrap(),
            &format!("oci://{}/charts", registry.host),
            "--ca-file",
            ca_s,
        ],
        None,
    );
    let creds = dir.path().join("creds");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::write(creds.join("user"), support::REGISTRY_USER).unwrap();
    std::fs::write(creds.join("pass"), support::REGISTRY_PASSWORD).unwrap();
    std::fs::copy(&ca, creds.join("ca.crt")).unwrap();
    let root = dir.path().join("tree");
    std::fs::create_dir_all(&root).unwrap();
    let spec = |extra: &str| {
        std::fs::write(
            root.join("apps.toml"),
            format!(
                "namespace = \"web\"\n[helm.podinfo]\nchart = \"oci://{}/charts/podinfo\"\nversion = \"6.2.3\"\nusername-file = \"user\"\npassword-file = \"pass\"\n{extra}",
                registry.host
            ),
        )
        .unwrap()
    };
    let (wrapper, argv) = logging_helm(dir.path());
    let flag = ["--credentials-dir", creds.to_str().unwrap()];

    spec("");
    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("o1"),
        &dir.path().join("c1"),
        &flag,
    );
    let stderr = one_line_refusal(&o);
    assert!(
        stderr.contains("certificate signed by unknown authority"),
        "{stderr}"
    );

    spec("ca-file = \"ca.crt\"\n");
    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("o2"),
        &dir.path().join("c2"),
        &flag,
    );
    assert_exit(&o, 0);
    let rendered = std::fs::read_to_string(dir.path().join("o2/apps.helm-podinfo.yaml")).unwrap();
    assert!(rendered.contains("podinfo-6.2.3"), "{rendered}");
    let lines = std::fs::read_to_string(&argv).unwrap();
    assert!(
        !lines.contains(support::REGISTRY_PASSWORD),
        "the password was on a command line:\n{lines}"
    );
    assert!(lines.contains("registry login"), "{lines}");

    std::fs::write(creds.join("pass"), "wrong").unwrap();
    let o = render_with(
        &wrapper,
        &root,
        &dir.path().join("o3"),
        &dir.path().join("c3"),
        &flag,
    );
    let stderr = one_line_refusal(&o);
    assert!(
        stderr.starts_with(&format!(
            "apps.toml:2:7: cannot pull chart oci://{}/charts/podinfo 6.2.3 from oci://",
            registry.host
        )),
        "{stderr}"
    );
}

/// A refusal in one line (and the count line after it), exit 2: the line. A release's
/// refusal holds its app alone (`held: app helm/NAME, ...: REFUSAL`): the refusal.
fn one_line_refusal(o: &std::process::Output) -> String {
    assert_exit(o, 2);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 2, "{}", show(o));
    let line = stderr.lines().next().unwrap_or_default();
    match line.split_once(", neither applied nor pruned: ") {
        Some((app, refusal)) => {
            assert!(app.starts_with("held: app helm/"), "{}", show(o));
            refusal.to_string()
        }
        None => line.to_string(),
    }
}
