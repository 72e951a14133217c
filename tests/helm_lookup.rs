//! Helm's `lookup` against the cluster: a chart that keeps a generated password by
//! looking up the Secret it made keeps it across upgrades and renders it the same on
//! every command (with helm 3 and helm 4), as `helm upgrade` does; with no cluster at
//! hand (`diff --base`) its lookups return nothing and the output says so. What helm is
//! pointed at may only read.

use crate::support;

use std::io::{Read, Write};
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use support::{
    ConfigRepo, GitDaemon, assert_exit, driftless_on_cluster, git, http, show, write_file as write,
};

/// A chart that makes a password once and keeps it: the common pattern (Bitnami's
/// `common.secrets.passwords.manage`, Grafana's admin password, ...).
fn chart(root: &Path) {
    write(
        root,
        "charts/db/Chart.yaml",
        "apiVersion: v2\nname: db\nversion: 0.1.0\n",
    );
    write(
        root,
        "charts/db/templates/secret.yaml",
        "{{- $old := lookup \"v1\" \"Secret\" .Release.Namespace \"db-auth\" }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: db-auth\ndata:\n  {{- if $old }}\n  password: {{ index $old.data \"password\" }}\n  {{- else }}\n  password: {{ randAlphaNum 24 | b64enc }}\n  {{- end }}\n",
    );
    write(
        root,
        "charts/db/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-config\ndata:\n  tier: {{ .Values.tier | quote }}\n",
    );
}

fn release(root: &Path, ns: &str, tier: &str) {
    write(
        root,
        "apps.toml",
        &format!(
            "namespace = \"{ns}\"\n\n[helm.db]\nchart = \"charts/db\"\nvalues = {{ tier = \"{tier}\" }}\n"
        ),
    );
}

#[tokio::test]
async fn a_chart_that_looks_up_its_password_keeps_it_across_upgrades() {
    let client = support::client().await;
    for (lane, which) in [
        ("lookup-h4", "DRIFTLESS_TEST_HELM4"),
        ("lookup-h3", "DRIFTLESS_TEST_HELM3"),
    ] {
        let helm = std::env::var(which).unwrap_or_else(|_| panic!("{which} (the testbed's env)"));
        let ns = support::namespace(&client, lane).await;
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        chart(root);
        release(root, &ns, "a");
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["add", "."]);
        git(root, &["commit", "-q", "-m", "db"]);
        let tree = root.to_str().unwrap();
        let run = |args: &[&str]| driftless_on_cluster(&ns, &[args, &["--helm", &helm]].concat());
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let configs: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let password = || async {
            let s = secrets.get("db-auth").await.unwrap();
            s.data.unwrap()["password"].0.clone()
        };

        let out = run(&["apply", tree]);
        assert_exit(&out, 0);
        let first = password().await;
        assert_eq!(first.len(), 24, "{lane}: a generated password");

        // Nothing changed: the chart renders the password it finds, so nothing differs.
        let out = run(&["diff", tree]);
        assert_exit(&out, 0);

        // An upgrade keeps it.
        release(root, &ns, "b");
        let out = run(&["apply", tree]);
        assert_exit(&out, 0);
        assert_eq!(password().await, first, "{lane}: {}", show(&out));
        let config = configs.get("db-config").await.unwrap();
        assert_eq!(config.data.unwrap()["tier"], "b", "{lane}");

        // With no cluster at hand, its lookups find nothing, and that is said.
        release(root, &ns, "c");
        let out = run(&["diff", "--base", "HEAD", tree]);
        let said = show(&out);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(
                "notice: chart charts/db calls lookup: with no cluster at hand its lookups return nothing"
            ),
            "{lane}: {said}"
        );
    }
}

/// The status line of what `addr` answers `request`.
fn ask(addr: &str, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

/// What a chart's helm is pointed at answers reads with driftless's client, refuses any
/// other verb, and answers nothing to a caller without the secret in its path.
// Two workers: the listener answers on one while the test waits on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_chart_is_pointed_at_may_only_read() {
    let client = support::client().await;
    let lookup = driftless::cluster::lookup::start(client).await.unwrap();
    let kubeconfig = std::fs::read_to_string(&lookup.kubeconfig).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: http://"))
        .unwrap()
        .to_string();
    let (addr, prefix) = server.split_once('/').unwrap();
    let get =
        |path: &str| format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let read = ask(addr, &get(&format!("/{prefix}/api/v1/namespaces/default")));
    assert!(read.contains(" 200 "), "a read is answered: {read}");
    let missing = ask(
        addr,
        &get(&format!(
            "/{prefix}/api/v1/namespaces/default/secrets/no-such-secret"
        )),
    );
    // The apiserver's own answer, as lookup expects it for what is not there.
    assert!(missing.contains(" 404 "), "{missing}");
    let write = ask(
        addr,
        &format!(
            "POST /{prefix}/api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        ),
    );
    assert!(write.contains(" 405 "), "a write is refused: {write}");
    let stranger = ask(addr, &get("/api/v1/namespaces/default"));
    assert!(
        stranger.contains(" 404 "),
        "without the secret, nothing: {stranger}"
    );
}

/// The daemon renders each revision with what the cluster holds then: a new revision of
/// the release (an upgrade) keeps the password the first one made.
#[tokio::test]
async fn the_daemon_keeps_a_looked_up_password_across_revisions() {
    let client = support::client().await;
    let ns = support::namespace(&client, "lookup-daemon").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    chart(root);
    release(root, &ns, "a");
    let helm = support::helm4();
    let daemon = support::Daemon::builder(&ns)
        .args(&["--dir", root.to_str().unwrap(), "--helm", &helm])
        .start();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    daemon
        .wait_status("the release applied", |s| {
            s["specs"]
                .as_array()
                .is_some_and(|specs| specs.len() == 2 && specs.iter().all(|s| s["ready"] == true))
        })
        .await;
    let first = secrets.get("db-auth").await.unwrap().data.unwrap()["password"]
        .0
        .clone();
    release(root, &ns, "b");
    support::eventually(
        "the upgrade applied",
        std::time::Duration::from_secs(120),
        || async {
            match configs.get("db-config").await {
                Ok(c) if c.data.as_ref().is_some_and(|d| d["tier"] == "b") => Ok(()),
                other => Err(format!("{other:?}\n{}", daemon.log())),
            }
        },
    )
    .await;
    let after = secrets.get("db-auth").await.unwrap().data.unwrap()["password"]
        .0
        .clone();
    assert_eq!(after, first, "{}", daemon.log());
}

/// A chart that renders what it finds in the cluster: a ConfigMap `mirror` holding the
/// `value` of the ConfigMap `source`, which someone else keeps.
fn mirror_chart(root: &Path) {
    write(
        root,
        "charts/mirror/Chart.yaml",
        "apiVersion: v2\nname: mirror\nversion: 0.1.0\n",
    );
    write(
        root,
        "charts/mirror/templates/mirror.yaml",
        r#"{{- $src := lookup "v1" "ConfigMap" .Release.Namespace "source" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: mirror
data:
  value: {{ if $src }}{{ index $src.data "value" | quote }}{{ else }}"none"{{ end }}
"#,
    );
}

/// A helm that writes each of its command lines to `dir/runs` before it runs: the
/// renders the daemon made, seen from outside it.
fn counting_helm(dir: &Path) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let log = dir.join("runs");
    let program = dir.join("helm");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            support::helm4()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    (program.to_str().unwrap().to_string(), log)
}

/// The `helm template` command lines run so far, in order.
fn renders(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("template "))
        .map(str::to_string)
        .collect()
}

/// Syncs that succeeded so far, as the daemon's metrics count them.
async fn syncs(daemon: &support::Daemon) -> u64 {
    let (code, text) = http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("driftless_sync_total{result=\"success\"} "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A commit's render that read the cluster is made again at the resync, with what the
/// cluster holds then, and what changed is applied with no new commit; a commit whose
/// render read nothing is never rendered again for a resync or a poll: its helm never
/// runs twice in a row with the same command line. (It runs again when the cluster's
/// APIs change, which its command line then says: other tests share the cluster and
/// install CRDs.)
#[tokio::test]
async fn a_render_that_read_the_cluster_is_made_again_at_the_resync() {
    let client = support::client().await;
    let ns = support::namespace(&client, "lookup-resync").await;
    let still = support::namespace(&client, "lookup-still").await;
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let source = |value: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "source" },
            "data": { "value": value },
        }))
        .unwrap()
    };
    configs
        .create(&Default::default(), &source("one"))
        .await
        .unwrap();

    let finds = ConfigRepo::new();
    mirror_chart(finds.work());
    write(
        finds.work(),
        "apps.toml",
        &format!("namespace = \"{ns}\"\n\n[helm.mirror]\nchart = \"charts/mirror\"\n"),
    );
    let commit = finds.commit("a chart that mirrors what it finds");
    let plain = ConfigRepo::new();
    write(
        plain.work(),
        "charts/plain/Chart.yaml",
        "apiVersion: v2\nname: plain\nversion: 0.1.0\n",
    );
    write(
        plain.work(),
        "charts/plain/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  value: \"fixed\"\n",
    );
    write(
        plain.work(),
        "apps.toml",
        &format!("namespace = \"{still}\"\n\n[helm.plain]\nchart = \"charts/plain\"\n"),
    );
    plain.commit("a chart that looks nothing up");
    let (finds_git, plain_git) = (
        GitDaemon::serve(finds.base()),
        GitDaemon::serve(plain.base()),
    );
    let (finds_helm, plain_helm) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (finds_helm, finds_runs) = counting_helm(finds_helm.path());
    let (plain_helm, plain_runs) = counting_helm(plain_helm.path());
    // Polled often, resynced often: a poll of the same commit renders nothing again, a
    // resync renders again only what read the cluster.
    let run = |ns: &str, url: &str, helm: &str| {
        support::Daemon::builder(ns)
            .args(&[
                "--git",
                url,
                "--interval",
                "1s",
                "--resync",
                "2s",
                "--helm",
                helm,
            ])
            .start()
    };
    let mirror = run(&ns, &finds_git.url("config.git"), &finds_helm);
    let other = run(&still, &plain_git.url("config.git"), &plain_helm);

    let value = |want: &'static str| {
        let configs = configs.clone();
        let mirror = &mirror;
        async move {
            support::eventually(
                &format!("the mirror holding {want:?}"),
                support::WAIT,
                || async {
                    match configs.get("mirror").await {
                        Ok(c) if c.data.as_ref().is_some_and(|d| d["value"] == want) => Ok(()),
                        other => Err(format!(
                            "{:?}\n{}",
                            other.map(|c| c.data),
                            support::tail(&mirror.log(), 4000)
                        )),
                    }
                },
            )
            .await
        }
    };
    value("one").await;
    // Someone else changes what the chart reads; no commit follows.
    configs
        .replace("source", &Default::default(), &source("two"))
        .await
        .unwrap();
    value("two").await;
    let status = mirror.status().unwrap();
    assert_eq!(status["revision_applied"], commit.as_str(), "{status:#}");
    assert!(renders(&finds_runs).len() >= 2, "rendered again");

    // The other daemon resynced twice after its first sync, its commit rendered once.
    support::eventually("two resyncs", support::WAIT, || async {
        match syncs(&other).await {
            n if n >= 3 => Ok(()),
            n => Err(format!("{n} syncs\n{}", support::tail(&other.log(), 4000))),
        }
    })
    .await;
    let runs = renders(&plain_runs);
    assert!(!runs.is_empty());
    assert!(
        runs.windows(2).all(|w| w[0] != w[1]),
        "rendered again with nothing changed:\n{}",
        runs.join("\n")
    );
    let plain: Api<ConfigMap> = Api::namespaced(client.clone(), &still);
    assert_eq!(
        plain.get("plain").await.unwrap().data.unwrap()["value"],
        "fixed"
    );
}

/// `.Capabilities.APIVersions` follow the cluster: a CRD the tree installs is seen by the
/// charts of the daemon's next render, with no restart.
#[tokio::test]
async fn a_crd_the_tree_installs_is_seen_by_the_next_render() {
    let client = support::client().await;
    let ns = support::namespace(&client, "lookup-caps").await;
    let group = format!("{ns}.example.org");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "crd.yaml",
        &format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          x-kubernetes-preserve-unknown-fields: true\n"
        ),
    );
    write(
        root,
        "charts/w/Chart.yaml",
        "apiVersion: v2\nname: w\nversion: 0.1.0\n",
    );
    write(
        root,
        "charts/w/templates/all.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\ndata:\n  rev: {{{{ .Values.rev | quote }}}}\n{{{{- if .Capabilities.APIVersions.Has \"{group}/v1\" }}}}\n---\napiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w\n{{{{- end }}}}\n"
        ),
    );
    let values = |rev: &str| {
        format!(
            "namespace = \"{ns}\"\n\n[helm.w]\nchart = \"charts/w\"\nvalues = {{ rev = \"{rev}\" }}\n"
        )
    };
    write(root, "apps.toml", &values("1"));
    let helm = support::helm4();
    let daemon = support::Daemon::builder(&ns)
        .args(&["--dir", root.to_str().unwrap(), "--helm", &helm])
        .start();
    daemon
        .wait_status("the CRD and the ConfigMap applied", |s| {
            s["specs"]
                .as_array()
                .is_some_and(|specs| specs.len() == 2 && specs.iter().all(|s| s["ready"] == true))
        })
        .await;
    write(root, "apps.toml", &values("2"));
    let status = daemon
        .wait_status("the Widget rendered and applied", |s| {
            s["specs"]
                .as_array()
                .is_some_and(|specs| specs.len() == 3 && specs.iter().all(|s| s["ready"] == true))
        })
        .await;
    assert!(
        status["specs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"].as_str().is_some_and(|id| id.contains("Widget"))),
        "{status:#}"
    );
}

/// A real chart that keeps its passwords with `lookup` (bitnami's mariadb, through its
/// `common.secrets.passwords.manage`), its `common` dependency in `charts/` as `helm
/// dependency build` leaves it: an upgrade keeps the root password it generated.
#[tokio::test]
async fn a_real_chart_keeps_its_generated_password_across_an_upgrade() {
    let client = support::client().await;
    let ns = support::namespace(&client, "lookup-mariadb").await;
    let charts = std::path::PathBuf::from(std::env::var("DRIFTLESS_TEST_BITNAMI_CHARTS").expect(
        "DRIFTLESS_TEST_BITNAMI_CHARTS (the testbed's env; testbed/tools.sh installs them)",
    ));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::copy_tree(&charts.join("mariadb"), &root.join("charts/mariadb"), &[]);
    support::copy_tree(
        &charts.join("common"),
        &root.join("charts/mariadb/charts/common"),
        &[],
    );
    let spec = |preset: &str| {
        format!(
            "namespace = \"{ns}\"\n\n[helm.db]\nchart = \"charts/mariadb\"\nvalues = {{ primary = {{ resourcesPreset = \"{preset}\" }} }}\n"
        )
    };
    write(root, "apps.toml", &spec("none"));
    let tree = root.to_str().unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let root_password = || async {
        let s = secrets.get("db-mariadb").await.unwrap();
        s.data.unwrap()["mariadb-root-password"].0.clone()
    };
    let out = support::driftless_helm4_on_cluster(&ns, &["apply", tree]);
    assert_exit(&out, 0);
    let first = root_password().await;
    assert_eq!(
        first.len(),
        10,
        "bitnami's generated password\n{}",
        show(&out)
    );

    write(root, "apps.toml", &spec("small"));
    let out = support::driftless_helm4_on_cluster(&ns, &["apply", tree]);
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("StatefulSet.apps/db-mariadb")
            && String::from_utf8_lossy(&out.stdout).contains("updated"),
        "the upgrade changed the StatefulSet\n{}",
        show(&out)
    );
    assert_eq!(root_password().await, first, "{}", show(&out));
}
