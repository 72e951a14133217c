//! A fleet from one tree (docs "Fleets"): the operator declares clusters (`--clusters`),
//! a tree's `[[cluster]]` rules send files to them by name or by label, and each
//! command serves one cluster (`--cluster`), reached with its own kubeconfig. Two real
//! control planes: the local cluster (the home cluster) and a second apiserver with a
//! storage of its own (`SecondApiserver::apart`).

use crate::support;

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use support::{SecondApiserver, assert_exit, printed, show};

fn write(root: &Path, name: &str, text: &str) {
    let path = root.join(name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn configmap(name: &str, ns: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  v: \"{value}\"\n"
    )
}

fn rules(edge_goes_to: &str) -> String {
    format!(
        "[vars]\n\n[[cluster]]\npath = \"edge/**\"\nnames = [\"{edge_goes_to}\"]\n\n[[cluster]]\npath = \"all/**\"\nlabels = {{ fleet = \"yes\" }}\n"
    )
}

/// The ConfigMaps of `ns` on a cluster, with their `v`.
async fn config_maps(client: &Client, ns: &str) -> Vec<(String, String)> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .map(|c| {
            (
                c.metadata.name.unwrap_or_default(),
                c.data.and_then(|d| d.get("v").cloned()).unwrap_or_default(),
            )
        })
        .collect()
}

/// A second cluster (an apiserver with a storage of its own) with the namespace `ns`.
async fn edge_cluster(ns: &str) -> (SecondApiserver, Client) {
    let server = SecondApiserver::apart().await;
    let client = server.client().await;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    (server, client)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// One tree, two clusters: each file goes where its rule says (none: the home cluster),
/// with that cluster's variables; a file moved to another cluster is pruned from the
/// first and applied to the second; a rule naming a cluster the operator did not
/// declare is an error at its place and nothing of the revision is applied; `validate`
/// checks each cluster's view.
#[tokio::test]
async fn one_tree_sends_each_file_to_its_clusters() {
    let home = support::client().await;
    let ns = support::namespace(&home, "fleet").await;
    let (edge_server, edge) = edge_cluster(&ns).await;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    let path = root.to_str().unwrap();
    let clusters = dir.path().join("clusters.toml");
    std::fs::copy(edge_server.kubeconfig(), dir.path().join("edge.kubeconfig")).unwrap();
    std::fs::write(
        &clusters,
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { fleet = \"yes\", region = \"eu\" }\n\n[cluster.in-cluster]\nlabels = { fleet = \"yes\", region = \"us\" }\n",
    )
    .unwrap();
    let clusters = clusters.to_str().unwrap();
    write(&root, ".driftless.toml", &rules("edge"));
    write(
        &root,
        "core.yaml",
        &configmap("core", &ns, "${cluster.name}"),
    );
    write(
        &root,
        "edge/app.yaml",
        &configmap("edge-app", &ns, "${cluster.labels.region}"),
    );
    write(
        &root,
        "all/common.yaml",
        &configmap("common", &ns, "${cluster.name}"),
    );
    let apply = |cluster: Option<&str>| {
        let mut args = vec!["apply", path, "--clusters", clusters];
        args.extend(cluster.iter().flat_map(|c| ["--cluster", *c]));
        support::driftless_on_cluster(&ns, &args)
    };

    let out = apply(None);
    assert_exit(&out, 0);
    let out = apply(Some("edge"));
    assert_exit(&out, 0);
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("common", "in-cluster"), ("core", "in-cluster")]),
        "the home cluster"
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("common", "edge"), ("edge-app", "eu")]),
        "the edge cluster"
    );

    // The edge's file goes home: the edge prunes it, home applies it with its values.
    write(&root, ".driftless.toml", &rules("in-cluster"));
    let out = apply(Some("edge"));
    assert_exit(&out, 0);
    let out = apply(None);
    assert_exit(&out, 0);
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[
            ("common", "in-cluster"),
            ("core", "in-cluster"),
            ("edge-app", "us")
        ]),
        "the home cluster, after the move"
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("common", "edge")]),
        "the edge cluster, after the move"
    );

    // A cluster the operator did not declare: one line at its place, nothing applied
    // to either cluster (the edge's file would otherwise be pruned from home).
    write(&root, ".driftless.toml", &rules("mars"));
    write(&root, "core.yaml", &configmap("core", &ns, "changed"));
    for cluster in [None, Some("edge")] {
        let out = apply(cluster);
        assert_exit(&out, 2);
        assert!(
            printed(&out).contains(
                ".driftless.toml:5:10: cluster \"mars\" is not declared: the declared clusters are edge, in-cluster (home)"
            ) || show(&out).contains(
                ".driftless.toml:5:10: cluster \"mars\" is not declared: the declared clusters are edge, in-cluster (home)"
            ),
            "{}",
            show(&out)
        );
    }
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[
            ("common", "in-cluster"),
            ("core", "in-cluster"),
            ("edge-app", "us")
        ]),
        "the home cluster, after the refused revision"
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("common", "edge")]),
        "the edge cluster, after the refused revision"
    );

    // validate: each cluster's view, under its name.
    write(&root, ".driftless.toml", &rules("edge"));
    let out = support::driftless(&["validate", path, "--clusters", clusters]);
    assert_exit(&out, 0);
    let text = printed(&out);
    let (edge_part, home_part) = text
        .split_once("cluster in-cluster:")
        .unwrap_or_else(|| panic!("{}", show(&out)));
    assert!(edge_part.starts_with("cluster edge:\n"), "{}", show(&out));
    assert!(edge_part.contains("valid: 2 specs"), "{}", show(&out));
    assert!(home_part.contains("valid: 2 specs"), "{}", show(&out));

    // A --cluster that is not declared is refused before anything is read.
    let out = apply(Some("mars"));
    assert_exit(&out, 2);
    assert!(
        show(&out).contains(
            "--cluster mars: not a declared cluster; the declared clusters are edge, in-cluster (home)"
        ),
        "{}",
        show(&out)
    );
}

const REPO: &str = "https://github.com/acme/fleet.git";

fn application(name: &str, path: &str, destination: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: {REPO}\n    targetRevision: HEAD\n    path: {path}\n  destination:\n{destination}  syncPolicy:\n    automated:\n      prune: true\n"
    )
}

/// Argo CD's app of apps across clusters: each child Application's `destination` sends
/// its objects to that cluster alone (by name, or by the server of the cluster's
/// kubeconfig), the in-cluster one stays with the home cluster, and one naming a
/// cluster the operator did not declare is held with one line on every cluster while
/// the others apply. The edge cluster is served by a daemon (`run --cluster edge`),
/// the home cluster by `apply`.
#[tokio::test]
async fn argo_cd_destinations_send_each_app_to_its_cluster() {
    let home = support::client().await;
    let ns = support::namespace(&home, "fleet-argo").await;
    let (edge_server, edge) = edge_cluster(&ns).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(edge_server.kubeconfig(), dir.path().join("edge.kubeconfig")).unwrap();
    let clusters = dir.path().join("clusters.toml");
    std::fs::write(
        &clusters,
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\n",
    )
    .unwrap();
    let clusters = clusters.to_str().unwrap();

    let root = dir.path().join("repo");
    let edge_url = format!("https://127.0.0.1:{}", edge_server.port);
    write(
        &root,
        "argocd/root.yaml",
        &application(
            "root",
            "apps",
            "    server: https://kubernetes.default.svc\n",
        ),
    );
    write(
        &root,
        "apps/edge.yaml",
        &application(
            &format!("{ns}-edge"),
            "edge-app",
            &format!("    name: edge\n    namespace: {ns}\n"),
        ),
    );
    write(
        &root,
        "apps/edge-by-server.yaml",
        &application(
            &format!("{ns}-edge-by-server"),
            "edge-too",
            &format!("    server: {edge_url}\n    namespace: {ns}\n"),
        ),
    );
    write(
        &root,
        "apps/home.yaml",
        &application(
            &format!("{ns}-home"),
            "home-app",
            &format!("    server: https://kubernetes.default.svc\n    namespace: {ns}\n"),
        ),
    );
    write(
        &root,
        "apps/mars.yaml",
        &application(
            &format!("{ns}-mars"),
            "mars-app",
            &format!("    name: mars\n    namespace: {ns}\n"),
        ),
    );
    for (dir, name) in [
        ("edge-app", "edge-cm"),
        ("edge-too", "edge-too-cm"),
        ("home-app", "home-cm"),
        ("mars-app", "mars-cm"),
    ] {
        write(&root, &format!("{dir}/cm.yaml"), &configmap(name, &ns, dir));
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["remote", "add", "origin", REPO],
        &["add", "."],
        &["commit", "-q", "-m", "fleet"],
    ] {
        support::git(&root, args);
    }
    let tree = root.join("argocd");
    let tree = tree.to_str().unwrap();

    let out = support::driftless_on_cluster(&ns, &["apply", tree, "--clusters", clusters]);
    let mars = format!(
        "root.yaml:1:1: Application {ns}-mars: its destination cluster \"mars\" is not a declared cluster: the declared clusters are edge, in-cluster (home) (--clusters); nothing is applied (in what it renders: root.yaml#argo.root, line "
    );
    // The held app stops no other: exit 2 says something was not applied.
    assert_exit(&out, 2);
    assert!(show(&out).contains(&mars), "{}", show(&out));
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("home-cm", "home-app")]),
        "the home cluster: its app only\n{}",
        show(&out)
    );

    let hooks = support::Recorder::start().await;
    let hook_url = hooks.url("/hook");
    let daemon = support::Daemon::builder(&ns)
        .args(&[
            "--dir",
            tree,
            "--resync",
            "1h",
            "--clusters",
            clusters,
            "--cluster",
            "edge",
            "--notify",
            &hook_url,
        ])
        .start();
    let status = daemon
        .wait_status("the edge's apps applied, mars held", |s| {
            let apps = s["apps"].as_array().cloned().unwrap_or_default();
            let held = s.to_string().contains(&format!(
                "Application {ns}-mars: its destination cluster \\\"mars\\\" is not a declared cluster"
            ));
            held && apps.iter().filter(|a| a["ready"] == true).count() >= 2
        })
        .await;
    assert_eq!(
        status["cluster"], "edge",
        "the status names the cluster served"
    );
    // So does what it tells.
    hooks
        .wait_for("a notification naming the edge", "/hook", |seen| {
            !seen.is_empty() && seen.iter().all(|r| r.json()["cluster"] == "edge")
        })
        .await;
    let (_, api) = support::http(daemon.metrics, "GET", "/api/v1/status", &[], b"").await;
    assert!(
        api.contains("\"cluster\":\"edge\""),
        "the API names it: {api}"
    );
    assert!(
        daemon.status_table().contains("cluster:          edge\n"),
        "{}",
        daemon.status_table()
    );
    let mut ready: Vec<&str> = status["apps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["ready"] == true)
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    ready.sort();
    assert_eq!(
        ready,
        [
            format!("argo/{ns}-edge"),
            format!("argo/{ns}-edge-by-server")
        ],
        "{status:#}"
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("edge-cm", "edge-app"), ("edge-too-cm", "edge-too")]),
        "the edge cluster: its apps only"
    );
    // Home was not touched by the edge's daemon.
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("home-cm", "home-app")]),
        "the home cluster, with the edge's daemon running"
    );
}
