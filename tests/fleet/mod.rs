//! A fleet from one tree (docs "Fleets"): the operator declares clusters (`--clusters`),
//! a tree's `[[cluster]]` rules send files to them by name or by label, and each
//! command serves one cluster (`--cluster`), reached with its own kubeconfig. Two real
//! control planes: the local cluster (the home cluster) and a second apiserver with a
//! storage of its own (`SecondApiserver::apart`).

use crate::support;

mod daemon;

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

/// Waits until the ConfigMaps of `ns` on a cluster are `want` (`what`: for the failure).
async fn until_config_maps(what: &str, client: &Client, ns: &str, want: &[(String, String)]) {
    support::eventually(what, support::WAIT, || async {
        match config_maps(client, ns).await {
            seen if seen == want => Ok(()),
            seen => Err(format!("{seen:?}")),
        }
    })
    .await;
}

/// Makes the namespace `name` on a cluster.
async fn create_namespace(client: &Client, name: &str) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
}

/// A second cluster (an apiserver with a storage of its own) with the namespace `ns`.
async fn edge_cluster(ns: &str) -> (SecondApiserver, Client) {
    with_namespace(SecondApiserver::apart().await, ns).await
}

/// `server` and a client of it, once it has the namespace `ns`.
async fn with_namespace(server: SecondApiserver, ns: &str) -> (SecondApiserver, Client) {
    let client = server.client().await;
    create_namespace(&client, ns).await;
    (server, client)
}

/// Two clusters with one namespace each (the home cluster and `edge`), and the
/// operator's clusters file `clusters(ns)` beside a copy of the edge's kubeconfig
/// (`edge.kubeconfig`), in a directory of the test's own.
struct TwoClusters {
    home: Client,
    ns: String,
    edge_server: SecondApiserver,
    edge: Client,
    dir: tempfile::TempDir,
    clusters: String,
}

async fn two_clusters(prefix: &str, clusters: impl Fn(&str) -> String) -> TwoClusters {
    let home = support::client().await;
    let ns = support::namespace(&home, prefix).await;
    let (edge_server, edge) = edge_cluster(&ns).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(edge_server.kubeconfig(), dir.path().join("edge.kubeconfig")).unwrap();
    let file = dir.path().join("clusters.toml");
    std::fs::write(&file, clusters(&ns)).unwrap();
    TwoClusters {
        home,
        edge_server,
        edge,
        clusters: file.to_str().unwrap().to_string(),
        dir,
        ns,
    }
}

/// The tree at `root` as a git repository of one commit whose remote is `remote`.
fn commit(root: &Path, remote: &str) {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["remote", "add", "origin", remote],
        &["add", "."],
        &["commit", "-q", "-m", "fleet"],
    ] {
        support::git(root, args);
    }
}

/// `args` with `--cluster in-cluster` (the home cluster), then with `--cluster edge`:
/// each applies all it reads (and no other declared cluster is reached).
fn apply_home_then_edge(ns: &str, args: &[&str]) {
    for cluster in ["in-cluster", "edge"] {
        let mut all = args.to_vec();
        all.extend(["--cluster", cluster]);
        assert_exit(&support::driftless_on_cluster(ns, &all), 0);
    }
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
    let TwoClusters {
        home,
        ns,
        edge,
        dir,
        clusters,
        // Bound: the second apiserver lives as long as the test.
        edge_server: _edge_server,
    } = two_clusters("fleet", |_| {
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { fleet = \"yes\", region = \"eu\" }\n\n[cluster.in-cluster]\nlabels = { fleet = \"yes\", region = \"us\" }\n".into()
    })
    .await;
    let clusters = clusters.as_str();
    let root = dir.path().join("tree");
    let path = root.to_str().unwrap();
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
    let TwoClusters {
        home,
        ns,
        edge_server,
        edge,
        dir,
        clusters,
    } = two_clusters("fleet-argo", |_| {
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\n".into()
    })
    .await;
    let clusters = clusters.as_str();

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
    commit(&root, REPO);
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
    let (_, metrics) = support::http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert!(
        metrics.contains("driftless_sync_total{")
            && metrics
                .lines()
                .filter(|l| l.starts_with("driftless_"))
                .all(|l| l.contains("cluster=\"edge\"")),
        "every sample names the cluster: {metrics}"
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

/// Flux's hub and spokes (fluxcd/flux2-hub-spoke-example's shape): the hub keeps each
/// spoke's kubeconfig in a Secret, its Kustomizations name it in `kubeConfig.secretRef`
/// (or patch it into the HelmReleases they render, with a `serviceAccountName` the
/// spoke's tenants Kustomization makes), and the operator declares the spoke as the
/// cluster of that Secret. The hub's own objects stay on the hub; the spoke's are
/// installed, upgraded and uninstalled on the spoke alone, reached by the Secret's
/// kubeconfig; a Secret the operator did not declare holds its Kustomization with one
/// line on both; a Secret that is not there is one line and nothing is read.
#[tokio::test]
async fn flux_hub_and_spoke_sends_each_kustomization_to_the_cluster_of_its_kubeconfig_secret() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Secret;
    let TwoClusters {
        home,
        ns,
        edge_server: spoke_server,
        edge: spoke,
        dir,
        clusters,
    } = two_clusters("fleet-flux", |ns| {
        format!(
            "[cluster.spoke]\nsecret = \"{ns}/cluster-kubeconfig\"\nlabels = {{ env = \"staging\" }}\n\n[cluster.nowhere]\nsecret = \"{ns}/not-there\"\n"
        )
    })
    .await;
    let clusters = clusters.as_str();
    let kubeconfig = std::fs::read(spoke_server.kubeconfig()).unwrap();
    Api::<Secret>::namespaced(home.clone(), &ns)
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("cluster-kubeconfig".into()),
                    ..Default::default()
                },
                data: Some([("value".to_string(), k8s_openapi::ByteString(kubeconfig))].into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let charts_dir = tempfile::tempdir().unwrap();
    let charts = crate::helm::ChartRepo::start(charts_dir.path());

    let root = dir.path().join("repo");
    write(
        &root,
        "hub/flux-system/gotk-sync.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m\n  ref:\n    branch: main\n  url: https://github.com/acme/hub.git\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./hub\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    write(&root, "hub/own.yaml", &configmap("hub-own", &ns, "hub"));
    write(
        &root,
        "hub/.driftless.toml",
        "[[cluster]]\npath = \"own.yaml\"\nnames = [\"in-cluster\", \"nowhere\"]\n",
    );
    let kustomization = |name: &str, extra: &str| {
        format!(
            "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 1h\n  prune: true\n  wait: true\n  path: ./clusters/spoke/{name}\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n{extra}"
        )
    };
    let tenants = kustomization(
        "tenants",
        "  kubeConfig:\n    secretRef:\n      name: cluster-kubeconfig\n  postBuild:\n    substitute:\n      CLUSTER_NAME: spoke\n",
    );
    let apps = kustomization(
        "apps",
        &format!(
            "  dependsOn:\n    - name: tenants\n  targetNamespace: {ns}\n  patches:\n    - target:\n        kind: HelmRelease\n      patch: |\n        - op: add\n          path: /spec/kubeConfig\n          value:\n            secretRef:\n              name: cluster-kubeconfig\n        - op: add\n          path: /spec/serviceAccountName\n          value: flux-cluster-admin\n"
        ),
    );
    let lost = kustomization(
        "lost",
        "  kubeConfig:\n    secretRef:\n      name: other-kubeconfig\n",
    );
    write(&root, "hub/spoke.yaml", &format!("{tenants}{apps}{lost}"));
    write(
        &root,
        "clusters/spoke/tenants/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../../deploy/tenants\n",
    );
    write(
        &root,
        "deploy/tenants/flux.yaml",
        &format!(
            "{}---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: flux-cluster-admin\n  namespace: {ns}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {ns}-flux-cluster-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n  - kind: ServiceAccount\n    name: flux-cluster-admin\n    namespace: {ns}\n",
            configmap("tenant", &ns, "${CLUSTER_NAME}")
        ),
    );
    let release = |version: &str, message: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\nspec:\n  interval: 12h\n  url: {}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  releaseName: podinfo\n  interval: 50m\n  chart:\n    spec:\n      chart: podinfo\n      version: \"{version}\"\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n  values:\n    hpa:\n      enabled: false\n    ui:\n      message: {message}\n",
            charts.url
        )
    };
    write(
        &root,
        "clusters/spoke/apps/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../../deploy/apps\n",
    );
    write(
        &root,
        "deploy/apps/podinfo.yaml",
        &release("6.0.0", "first"),
    );
    for dir in ["apps", "tenants"] {
        let file = if dir == "apps" { "podinfo" } else { "flux" };
        write(
            &root,
            &format!("deploy/{dir}/kustomization.yaml"),
            &format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {file}.yaml\n"
            ),
        );
    }
    write(
        &root,
        "clusters/spoke/lost/cm.yaml",
        &configmap("lost", &ns, "lost"),
    );
    commit(&root, "https://github.com/acme/hub.git");
    let tree = root.join("hub");
    let tree = tree.to_str().unwrap();
    let apply = |cluster: Option<&str>| {
        let mut args = vec!["apply", tree, "--clusters", clusters];
        args.extend(cluster.iter().flat_map(|c| ["--cluster", *c]));
        support::driftless_helm4_on_cluster(&ns, &args)
    };
    let lost_line = format!(
        "spoke.yaml:67:1: Kustomization {ns}/lost: its kubeConfig Secret {ns}/other-kubeconfig is not a declared cluster's (`secret` in --clusters): the declared clusters are in-cluster (home), nowhere, spoke; nothing is applied"
    );
    let deployment = |client: &Client| Api::<Deployment>::namespaced(client.clone(), &ns);
    // What a Deployment of the chart says: its chart and its message.
    let podinfo = |d: Deployment| {
        let chart = d.metadata.labels.unwrap_or_default()["helm.sh/chart"].clone();
        let env = d.spec.template.spec.unwrap().containers[0]
            .env
            .clone()
            .unwrap_or_default();
        let message = env
            .iter()
            .find(|e| e.name == "PODINFO_UI_MESSAGE")
            .and_then(|e| e.value.clone())
            .unwrap_or_default();
        (chart, message)
    };

    // The hub: its own objects only; the lost Kustomization held.
    let out = apply(None);
    assert_exit(&out, 2);
    assert!(show(&out).contains(&lost_line), "{}", show(&out));
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("hub-own", "hub")]),
        "the hub: its own object only\n{}",
        show(&out)
    );
    assert!(
        deployment(&home)
            .get_opt("podinfo")
            .await
            .unwrap()
            .is_none(),
        "the spoke's release is not on the hub"
    );

    // The spoke, reached by the Secret's kubeconfig: tenants, then the release.
    let out = apply(Some("spoke"));
    assert_exit(&out, 2);
    assert!(show(&out).contains(&lost_line), "{}", show(&out));
    assert_eq!(
        config_maps(&spoke, &ns).await,
        pairs(&[("tenant", "spoke")]),
        "the spoke: the tenants' objects, substituted\n{}",
        show(&out)
    );
    let installed = deployment(&spoke)
        .get_opt("podinfo")
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("the release is installed on the spoke\n{}", show(&out)));
    assert_eq!(
        podinfo(installed),
        ("podinfo-6.0.0".to_string(), "first".to_string())
    );

    // An upgrade on the spoke leaves the hub as it was.
    write(
        &root,
        "deploy/apps/podinfo.yaml",
        &release("6.2.3", "second"),
    );
    let out = apply(Some("spoke"));
    assert_exit(&out, 2);
    let upgraded = deployment(&spoke)
        .get_opt("podinfo")
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("the release is upgraded on the spoke\n{}", show(&out)));
    assert_eq!(
        podinfo(upgraded),
        ("podinfo-6.2.3".to_string(), "second".to_string())
    );
    let out = apply(None);
    assert_exit(&out, 2);
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("hub-own", "hub")]),
        "the hub, after the spoke's upgrade"
    );

    // Uninstalled: the apps Kustomization leaves the hub's tree (and the lost one: while
    // an app is held, an app that left the tree is not pruned, as the held one may have
    // rendered it); the spoke prunes the release and keeps its tenants.
    write(&root, "hub/spoke.yaml", &tenants);
    let out = apply(Some("spoke"));
    assert_exit(&out, 0);
    assert!(
        deployment(&spoke)
            .get_opt("podinfo")
            .await
            .unwrap()
            .is_none(),
        "the release is pruned from the spoke\n{}",
        show(&out)
    );
    assert_eq!(
        config_maps(&spoke, &ns).await,
        pairs(&[("tenant", "spoke")]),
        "the spoke keeps its tenants"
    );

    // A cluster whose Secret is not there: one line, nothing written.
    let out = apply(Some("nowhere"));
    assert_exit(&out, 2);
    assert!(
        show(&out).contains(&format!(
            "reading the cluster's Secret {ns}/not-there of the home cluster: there is no such Secret"
        )),
        "{}",
        show(&out)
    );
}

/// Argo CD's ApplicationSet `clusters` generator over the operator's clusters: one
/// Application per cluster whose labels the selector selects (the home cluster too when
/// its labels match), each sent to its cluster by `destination.name`; a cluster the
/// selector leaves out gets none.
#[tokio::test]
async fn an_application_set_s_clusters_generator_makes_an_app_per_selected_cluster() {
    let TwoClusters {
        home,
        ns,
        edge,
        dir,
        clusters,
        // Bound: the second apiserver lives as long as the test.
        edge_server: _edge_server,
    } = two_clusters("fleet-appset", |_| {
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { web = \"yes\", region = \"eu\" }\n\n[cluster.in-cluster]\nlabels = { web = \"yes\", region = \"us\" }\n\n[cluster.lab]\nkubeconfig = \"lab.kubeconfig\"\nlabels = { web = \"no\" }\n".into()
    })
    .await;
    let clusters = clusters.as_str();
    let root = dir.path().join("repo");
    write(
        &root,
        "argocd/web.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: web\n  namespace: argocd\nspec:\n  generators:\n    - clusters:\n        selector:\n          matchLabels:\n            web: \"yes\"\n        values:\n          region: '{{{{metadata.labels.region}}}}'\n  template:\n    metadata:\n      name: '{ns}-web-{{{{name}}}}'\n    spec:\n      project: default\n      source:\n        repoURL: {REPO}\n        targetRevision: HEAD\n        path: 'web/{{{{values.region}}}}'\n      destination:\n        name: '{{{{name}}}}'\n        namespace: {ns}\n      syncPolicy:\n        automated:\n          prune: true\n"
        ),
    );
    for region in ["eu", "us"] {
        write(
            &root,
            &format!("web/{region}/cm.yaml"),
            &configmap("web", &ns, region),
        );
    }
    commit(&root, REPO);
    let tree = root.join("argocd");
    let tree = tree.to_str().unwrap();
    apply_home_then_edge(&ns, &["apply", tree, "--clusters", clusters]);
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("web", "us")]),
        "the home cluster: its own Application's objects"
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("web", "eu")]),
        "the edge cluster: its own Application's objects"
    );
    // The lab cluster, which the selector leaves out, has no Application: its view of
    // the tree is empty.
    let out = support::driftless(&["validate", tree, "--clusters", clusters, "--cluster", "lab"]);
    assert_exit(&out, 2);
    assert!(
        show(&out).contains("the tree holds no specs"),
        "{}",
        show(&out)
    );
}

/// Argo CD's cluster Secrets (`--cluster-secrets-namespace`): a Secret labelled
/// `argocd.argoproj.io/secret-type: cluster` in a namespace the operator names is a
/// cluster by its `name`, `server` and labels, reached with its `config` (a bearer token
/// and the CA) when served; Applications name it by either, and the clusters generator
/// selects it by its labels.
#[tokio::test]
async fn argo_cd_cluster_secrets_are_clusters() {
    use k8s_openapi::api::core::v1::Secret;
    let TwoClusters {
        home,
        ns,
        edge_server,
        edge,
        dir,
        ..
    } = two_clusters("fleet-secrets", |_| String::new()).await;
    let kubeconfig: serde_json::Value =
        serde_json::from_slice(&std::fs::read(edge_server.kubeconfig()).unwrap()).unwrap();
    let edge_url = format!("https://127.0.0.1:{}", edge_server.port);
    let config = serde_json::json!({
        "bearerToken": kubeconfig["users"][0]["user"]["token"],
        "tlsClientConfig": {"caData": kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]},
    });
    let data = |pairs: &[(&str, String)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        k8s_openapi::ByteString(v.as_bytes().to_vec()),
                    )
                })
                .collect(),
        )
    };
    Api::<Secret>::namespaced(home.clone(), &ns)
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("cluster-edge".into()),
                    labels: Some(
                        [
                            ("argocd.argoproj.io/secret-type", "cluster"),
                            ("region", "eu"),
                        ]
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .into(),
                    ),
                    ..Default::default()
                },
                data: data(&[
                    ("name", "edge".into()),
                    ("server", edge_url.clone()),
                    ("config", config.to_string()),
                ]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let root = dir.path().join("repo");
    write(
        &root,
        "argocd/by-name.yaml",
        &application(
            &format!("{ns}-by-name"),
            "by-name",
            &format!("    name: edge\n    namespace: {ns}\n"),
        ),
    );
    write(
        &root,
        "argocd/by-server.yaml",
        &application(
            &format!("{ns}-by-server"),
            "by-server",
            &format!("    server: {edge_url}\n    namespace: {ns}\n"),
        ),
    );
    write(
        &root,
        "argocd/eu.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: eu\n  namespace: argocd\nspec:\n  generators:\n    - clusters:\n        selector:\n          matchLabels:\n            region: eu\n  template:\n    metadata:\n      name: '{ns}-eu-{{{{name}}}}'\n    spec:\n      project: default\n      source:\n        repoURL: {REPO}\n        targetRevision: HEAD\n        path: by-label\n      destination:\n        server: '{{{{server}}}}'\n        namespace: {ns}\n      syncPolicy:\n        automated:\n          prune: true\n"
        ),
    );
    write(
        &root,
        "argocd/home.yaml",
        &configmap("home-own", &ns, "home"),
    );
    for dir in ["by-name", "by-server", "by-label"] {
        write(&root, &format!("{dir}/cm.yaml"), &configmap(dir, &ns, dir));
    }
    commit(&root, REPO);
    let tree = root.join("argocd");
    let tree = tree.to_str().unwrap();
    apply_home_then_edge(
        &ns,
        &["apply", tree, "--cluster-secrets-namespace", ns.as_str()],
    );
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("home-own", "home")]),
        "the home cluster: its own object only"
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[
            ("by-label", "by-label"),
            ("by-name", "by-name"),
            ("by-server", "by-server")
        ]),
        "the edge, reached through its cluster Secret"
    );
    // Without the namespace, edge is no cluster: one line, nothing read.
    let out = support::driftless_on_cluster(&ns, &["apply", tree, "--cluster", "edge"]);
    assert_exit(&out, 2);
    assert!(
        show(&out).contains("--cluster edge: not a declared cluster"),
        "{}",
        show(&out)
    );
}

/// `diff` and `apply` of a fleet with no `--cluster` serve each declared cluster in turn,
/// under its name: a cluster that cannot be reached is told (its name, why) and delays no
/// other, which is still diffed and applied; the exit code is the worst of them.
/// `--output json` is one document, a cluster's document (or its error) each.
#[tokio::test]
async fn diff_and_apply_without_a_cluster_serve_each_and_one_away_stops_none() {
    let TwoClusters {
        home,
        ns,
        edge_server,
        edge,
        dir,
        clusters,
    } = two_clusters("fleet-each", |_| {
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { fleet = \"yes\" }\n\n[cluster.in-cluster]\nlabels = { fleet = \"yes\" }\n\n[cluster.away]\nkubeconfig = \"away.kubeconfig\"\nlabels = { fleet = \"yes\" }\n".into()
    })
    .await;
    // The edge's kubeconfig, its server a port nothing listens on.
    let mut away: serde_json::Value =
        serde_json::from_slice(&std::fs::read(edge_server.kubeconfig()).unwrap()).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    away["clusters"][0]["cluster"]["server"] = format!("https://127.0.0.1:{port}").into();
    std::fs::write(dir.path().join("away.kubeconfig"), away.to_string()).unwrap();
    let root = dir.path().join("tree");
    let path = root.to_str().unwrap();
    write(
        &root,
        ".driftless.toml",
        "[vars]\n\n[[cluster]]\npath = \"all/**\"\nlabels = { fleet = \"yes\" }\n",
    );
    write(
        &root,
        "all/common.yaml",
        &configmap("common", &ns, "${cluster.name}"),
    );
    let run = |verb: &str, more: &[&str]| {
        let mut args = vec![verb, path, "--clusters", clusters.as_str()];
        args.extend(more);
        support::driftless_on_cluster(&ns, &args)
    };
    // Each cluster's part of stdout, by the name that heads it.
    let parts = |out: &std::process::Output| -> std::collections::BTreeMap<String, String> {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut parts = std::collections::BTreeMap::new();
        let mut name = None;
        for line in text.lines() {
            if let Some(n) = line
                .strip_prefix("cluster ")
                .and_then(|l| l.strip_suffix(':'))
            {
                name = Some(n.to_string());
                parts.insert(n.to_string(), String::new());
            } else if let Some(n) = &name {
                let part: &mut String = parts.get_mut(n).unwrap();
                part.push_str(line);
                part.push('\n');
            }
        }
        parts
    };
    let away_told = |out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            err.lines().any(|l| l
                .starts_with("driftless: cluster away: the cluster cannot be reached: ")
                && !l.contains("Error {")),
            "{}",
            show(out)
        );
    };

    let out = run("diff", &[]);
    assert_exit(&out, 2);
    away_told(&out);
    let diffed = parts(&out);
    assert_eq!(
        diffed.keys().collect::<Vec<_>>(),
        ["away", "edge", "in-cluster"],
        "{}",
        show(&out)
    );
    for name in ["edge", "in-cluster"] {
        assert!(
            diffed[name].contains("common") && diffed[name].contains(name),
            "{name}'s diff: {}",
            show(&out)
        );
    }
    assert_eq!(diffed["away"], "", "{}", show(&out));

    let out = run("diff", &["--output", "json"]);
    assert_exit(&out, 2);
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    let by_name: std::collections::BTreeMap<String, serde_json::Value> = doc["clusters"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .iter()
        .map(|c| (c["cluster"].as_str().unwrap().to_string(), c.clone()))
        .collect();
    assert!(by_name["away"]["error"].is_string(), "{doc:#}");
    for name in ["edge", "in-cluster"] {
        assert_eq!(
            by_name[name]["objects"].as_array().map(Vec::len),
            Some(1),
            "{doc:#}"
        );
        assert!(by_name[name].get("error").is_none(), "{doc:#}");
    }

    let out = run("apply", &[]);
    assert_exit(&out, 2);
    away_told(&out);
    assert_eq!(
        parts(&out).keys().collect::<Vec<_>>(),
        ["away", "edge", "in-cluster"],
        "{}",
        show(&out)
    );
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("common", "in-cluster")])
    );
    assert_eq!(config_maps(&edge, &ns).await, pairs(&[("common", "edge")]));

    // Narrowed with --cluster: that one alone, no heading; now as applied.
    let out = run("diff", &["--cluster", "edge"]);
    assert_exit(&out, 0);
    assert!(parts(&out).is_empty(), "{}", show(&out));
}

/// The `data` value `key` of ConfigMap `ns/name` on a cluster; `None`: no such ConfigMap.
async fn config_map_value(client: &Client, ns: &str, name: &str, key: &str) -> Option<String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
        .map(|c| {
            c.data
                .unwrap_or_default()
                .get(key)
                .cloned()
                .unwrap_or_default()
        })
}

/// Two clusters of different Kubernetes versions (the local cluster, and an apiserver of
/// the testbed's other version) from one tree: a chart is rendered for each cluster's own
/// version (`.Capabilities.KubeVersion`, and the objects it makes only for newer
/// clusters), then installed, upgraded and uninstalled on each by `apply` of the fleet.
/// scripts/test runs it on the 1.34 lane, where both versions are built.
#[tokio::test]
async fn mixed_versions_each_cluster_gets_the_render_of_its_own_version() {
    let home = support::client().await;
    let ns = support::namespace(&home, "fleet-versions").await;
    let (edge_server, _) = SecondApiserver::apart_of_other_version().await;
    let (edge_server, edge) = with_namespace(edge_server, &ns).await;
    let version =
        |v: k8s_openapi::apimachinery::pkg::version::Info| (v.git_version.clone(), v.minor.clone());
    let (home_version, home_minor) = version(home.apiserver_version().await.unwrap());
    let (edge_version, edge_minor) = version(edge.apiserver_version().await.unwrap());
    assert_ne!(
        home_minor, edge_minor,
        "two versions: {home_version} and {edge_version}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(edge_server.kubeconfig(), dir.path().join("edge.kubeconfig")).unwrap();
    let clusters = dir.path().join("clusters.toml");
    std::fs::write(
        &clusters,
        "[cluster.in-cluster]\nlabels = { fleet = \"yes\" }\n\n[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { fleet = \"yes\" }\n",
    )
    .unwrap();
    let root = dir.path().join("tree");
    write(
        &root,
        ".driftless.toml",
        "[[cluster]]\npath = \"all/**\"\nlabels = { fleet = \"yes\" }\n",
    );
    write(&root, "all/anchor.yaml", &configmap("anchor", &ns, "kept"));
    let chart = "all/charts/versioned";
    write(
        &root,
        &format!("{chart}/Chart.yaml"),
        "apiVersion: v2\nname: versioned\nversion: 0.1.0\n",
    );
    write(
        &root,
        &format!("{chart}/templates/objects.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: versioned\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  v: {{ .Values.rev | quote }}\n---\n{{- if semverCompare \">=1.36-0\" .Capabilities.KubeVersion.Version }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: newer\ndata:\n  v: {{ .Values.rev | quote }}\n{{- else }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: older\ndata:\n  v: {{ .Values.rev | quote }}\n{{- end }}\n",
    );
    let release = |rev: &str| {
        format!(
            "namespace = \"{ns}\"\n\n[helm.versioned]\nchart = \"{chart}\"\nvalues = {{ rev = \"{rev}\" }}\n"
        )
    };
    write(&root, "all/apps.toml", &release("one"));
    let path = root.to_str().unwrap();
    let apply = |more: &[&str]| {
        let mut args = vec!["apply", path, "--clusters", clusters.to_str().unwrap()];
        args.extend(more);
        let out = support::driftless_helm4_on_cluster(&ns, &args);
        assert_exit(&out, 0);
        out
    };
    let clusters_of = [
        ("in-cluster", &home, &home_version),
        ("edge", &edge, &edge_version),
    ];
    // Each cluster's objects as its version's render makes them: (kube, v) of
    // `versioned`, and `v` of `newer` and `older`.
    let check = |rev: Option<&'static str>| {
        let clusters_of = &clusters_of;
        let ns = &ns;
        async move {
            for (name, client, version) in clusters_of {
                // `v1.37.2`: minor 37.
                let minor: u32 = version
                    .split('.')
                    .nth(1)
                    .and_then(|m| m.parse().ok())
                    .unwrap_or_else(|| panic!("cluster {name}: version {version}"));
                let newer = minor >= 36;
                let kube = config_map_value(client, ns, "versioned", "kube").await;
                let v = config_map_value(client, ns, "versioned", "v").await;
                let by_version =
                    config_map_value(client, ns, if newer { "newer" } else { "older" }, "v").await;
                let other =
                    config_map_value(client, ns, if newer { "older" } else { "newer" }, "v").await;
                match rev {
                    Some(rev) => {
                        assert_eq!(
                            kube.as_deref(),
                            Some(version.as_str()),
                            "cluster {name}: told its own version"
                        );
                        assert_eq!(v.as_deref(), Some(rev), "cluster {name}");
                        assert_eq!(
                            by_version.as_deref(),
                            Some(rev),
                            "cluster {name} ({version}): its version's object"
                        );
                    }
                    None => {
                        assert_eq!(
                            (kube, by_version),
                            (None, None),
                            "cluster {name}: uninstalled"
                        );
                    }
                }
                assert_eq!(
                    other, None,
                    "cluster {name} ({version}): not the other version's object"
                );
                assert_eq!(
                    config_map_value(client, ns, "anchor", "v").await.as_deref(),
                    Some("kept"),
                    "cluster {name}"
                );
            }
        }
    };

    apply(&[]);
    check(Some("one")).await;
    // Each cluster's diff says nothing differs: what was applied is what its render is.
    let out = support::driftless_helm4_on_cluster(
        &ns,
        &["diff", path, "--clusters", clusters.to_str().unwrap()],
    );
    assert_exit(&out, 0);

    write(&root, "all/apps.toml", &release("two"));
    apply(&[]);
    check(Some("two")).await;

    std::fs::remove_file(root.join("all/apps.toml")).unwrap();
    std::fs::remove_dir_all(root.join(chart)).unwrap();
    // (Two of each cluster's three objects go: the uninstall is meant.)
    apply(&["--allow-mass-prune"]);
    check(None).await;
}

/// A ServiceAccount `account` of the edge (in `ns`) bound to `cluster-admin`, and a
/// kubeconfig of the edge with its token.
async fn edge_account(edge: &Client, server: &SecondApiserver, ns: &str, account: &str) -> Vec<u8> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": account}})).unwrap();
    Api::<ServiceAccount>::namespaced(edge.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    let crb: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{ns}-{account}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(edge.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    let token = support::account_token(edge, ns, account, None).await;
    let mut kubeconfig: serde_json::Value =
        serde_json::from_slice(&std::fs::read(server.kubeconfig()).unwrap()).unwrap();
    kubeconfig["users"][0]["user"] = serde_json::json!({ "token": token });
    kubeconfig.to_string().into_bytes()
}

/// A credential rotated in a cluster's Secret is taken without a restart: the edge is
/// reached by a ServiceAccount's token in a Secret of the home cluster; the account is
/// deleted (its token revoked), and the daemon's syncs are refused and say so, with
/// nothing of the edge changed; a new account's token is put in the Secret, and the
/// daemon, never restarted, converges with it.
#[tokio::test]
async fn a_credential_rotated_in_the_cluster_secret_is_taken_without_a_restart() {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let TwoClusters {
        home,
        ns,
        edge_server,
        edge,
        dir,
        clusters,
    } = two_clusters("fleet-rotate", |ns| {
        format!("[cluster.edge]\nsecret = \"{ns}/edge-kubeconfig\"\n")
    })
    .await;
    let secret = |kubeconfig: Vec<u8>| Secret {
        metadata: ObjectMeta {
            name: Some("edge-kubeconfig".into()),
            ..Default::default()
        },
        data: Some([("value".to_string(), k8s_openapi::ByteString(kubeconfig))].into()),
        ..Default::default()
    };
    let secrets = Api::<Secret>::namespaced(home.clone(), &ns);
    let first = edge_account(&edge, &edge_server, &ns, "deployer-1").await;
    secrets
        .create(&PostParams::default(), &secret(first))
        .await
        .unwrap();
    let root = dir.path().join("tree");
    write(
        &root,
        ".driftless.toml",
        "[[cluster]]\npath = \"edge/**\"\nnames = [\"edge\"]\n",
    );
    write(&root, "edge/a.yaml", &configmap("a", &ns, "one"));
    let daemon = support::Daemon::builder(&ns)
        .args(&[
            "--dir",
            root.to_str().unwrap(),
            "--resync",
            "2s",
            "--clusters",
            clusters.as_str(),
            "--cluster",
            "edge",
        ])
        .start();
    daemon
        .wait_status("the edge's ConfigMap applied", support::all_ready)
        .await;
    assert_eq!(config_maps(&edge, &ns).await, pairs(&[("a", "one")]));

    // Revoked: the account is gone, and with it what its token may do.
    Api::<ServiceAccount>::namespaced(edge.clone(), &ns)
        .delete("deployer-1", &Default::default())
        .await
        .unwrap();
    let refused = |s: &serde_json::Value| {
        s["last_sync"]["result"] == "failed"
            && s["last_sync"]["message"].as_str().is_some_and(|m| {
                m.starts_with("the cluster refused driftless's credentials: ")
                    && m.contains("(401 Unauthorized)")
            })
    };
    // (The apiserver keeps a token it authenticated for up to 10 s: wait until it
    // refuses it before changing the tree.)
    let before = daemon
        .wait_status("a sync the edge refused for the revoked token", refused)
        .await;
    write(&root, "edge/a.yaml", &configmap("a", &ns, "two"));
    let during = daemon
        .wait_status("the changed tree's sync refused too", |s| {
            refused(s)
                && s["revision_seen"] != before["revision_seen"]
                && s["last_sync"]["time"] != before["last_sync"]["time"]
        })
        .await;
    // What the edge's specs are is not known while it refuses the daemon.
    for spec in during["specs"].as_array().unwrap() {
        assert_eq!(
            (&spec["ready"], &spec["status"], &spec["reason"]),
            (
                &serde_json::json!(false),
                &serde_json::json!("Unknown"),
                &serde_json::json!("ClusterUnauthorized")
            ),
            "{during:#}"
        );
        assert_eq!(spec["message"], during["last_sync"]["message"]);
    }
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("a", "one")]),
        "nothing of the edge changed with a revoked credential"
    );

    // Rotated: a new account's token in the same Secret.
    let second = edge_account(&edge, &edge_server, &ns, "deployer-2").await;
    secrets
        .replace("edge-kubeconfig", &PostParams::default(), &{
            let mut s = secret(second);
            s.metadata.resource_version = secrets
                .get("edge-kubeconfig")
                .await
                .unwrap()
                .metadata
                .resource_version;
            s
        })
        .await
        .unwrap();
    support::eventually(
        "the edge's ConfigMap applied with the rotated credential",
        support::WAIT,
        || async {
            match config_maps(&edge, &ns).await == pairs(&[("a", "two")]) {
                true => Ok(()),
                false => Err(format!("not yet; the daemon's log:\n{}", daemon.log())),
            }
        },
    )
    .await;
    daemon
        .wait_status("a sync of the edge that succeeded again", |s| {
            s["last_sync"]["result"] == "success" && support::all_ready(s)
        })
        .await;
    assert!(
        daemon.log().contains(
            "the cluster's Secret changed: the cluster is reached with what it holds now"
        ),
        "{}",
        daemon.log()
    );
}

/// One cluster stopped delays no other: two daemons follow one tree, the home cluster's
/// and the edge's. The edge's apiserver is stopped, and a change (an edit, a removal) is
/// made to what both read: the home cluster's daemon applies and prunes it, while the
/// edge's says its specs are `Unknown` (`ClusterUnreachable`). Once the edge is back, its
/// daemon converges: the edit applied, the removed object pruned.
#[tokio::test]
async fn a_stopped_cluster_delays_no_other_and_converges_when_it_returns() {
    let TwoClusters {
        home,
        ns,
        mut edge_server,
        edge,
        dir,
        clusters,
    } = two_clusters("fleet-stop", |_| {
        "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { fleet = \"yes\" }\n\n[cluster.in-cluster]\nlabels = { fleet = \"yes\" }\n".into()
    })
    .await;
    let root = dir.path().join("tree");
    write(
        &root,
        ".driftless.toml",
        "[[cluster]]\npath = \"all/**\"\nlabels = { fleet = \"yes\" }\n",
    );
    for name in ["a", "b", "c"] {
        write(
            &root,
            &format!("all/{name}.yaml"),
            &configmap(name, &ns, "one"),
        );
    }
    let daemon_of = |cluster: &str| {
        support::Daemon::builder(&ns)
            .args(&[
                "--dir",
                root.to_str().unwrap(),
                "--resync",
                "2s",
                "--clusters",
                clusters.as_str(),
                "--cluster",
                cluster,
            ])
            .start()
    };
    let home_daemon = daemon_of("in-cluster");
    let edge_daemon = daemon_of("edge");
    for d in [&home_daemon, &edge_daemon] {
        d.wait_status("the tree applied", support::all_ready).await;
    }
    let first = pairs(&[("a", "one"), ("b", "one"), ("c", "one")]);
    assert_eq!(config_maps(&home, &ns).await, first);
    assert_eq!(config_maps(&edge, &ns).await, first);

    edge_server.stop();
    write(&root, "all/a.yaml", &configmap("a", &ns, "two"));
    std::fs::remove_file(root.join("all/c.yaml")).unwrap();
    let changed = pairs(&[("a", "two"), ("b", "one")]);
    until_config_maps(
        "the home cluster's daemon to apply and prune the change",
        &home,
        &ns,
        &changed,
    )
    .await;
    let away = edge_daemon
        .wait_status("the edge's specs unknown while it is away", |s| {
            s["specs"].as_array().is_some_and(|specs| {
                !specs.is_empty()
                    && specs.iter().all(|spec| {
                        spec["status"] == "Unknown" && spec["reason"] == "ClusterUnreachable"
                    })
            })
        })
        .await;
    assert!(
        away["last_sync"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the cluster cannot be reached: ")),
        "{away:#}"
    );
    home_daemon
        .wait_status("the home cluster's daemon settled", |s| {
            support::all_ready(s) && s["last_sync"]["result"] == "success"
        })
        .await;
    // The fleet at a glance: a row per cluster, the edge not reached.
    let fleet_status = || {
        support::driftless(&[
            "status",
            "--status-file",
            home_daemon.status_file().to_str().unwrap(),
            "--status-file",
            edge_daemon.status_file().to_str().unwrap(),
        ])
    };
    let rows = |out: &std::process::Output| -> Vec<Vec<String>> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().take(5).map(str::to_string).collect())
            .collect()
    };
    let version = |c: &Client| {
        let c = c.clone();
        async move { c.apiserver_version().await.unwrap().git_version }
    };
    let home_version = version(&home).await;
    let out = fleet_status();
    assert_exit(&out, 1);
    let seen = rows(&out);
    assert_eq!(
        seen[1],
        ["in-cluster", "yes", &home_version, "2", "0"],
        "{}",
        show(&out)
    );
    assert_eq!(
        seen[2][..4],
        ["edge", "no", &home_version, "0"],
        "{}",
        show(&out)
    );
    assert_eq!(seen.len(), 3, "{}", show(&out));
    assert!(
        printed(&out).contains("edge: not converged:"),
        "{}",
        show(&out)
    );

    edge_server.start_again();
    until_config_maps(
        "the edge's daemon to converge once the edge is back",
        &edge,
        &ns,
        &changed,
    )
    .await;
    edge_daemon
        .wait_status("the edge's specs ready again, its watches too", |s| {
            support::all_ready(s)
                && s["last_sync"]["result"] == "success"
                && s["errors"].as_array().is_some_and(Vec::is_empty)
        })
        .await;
    // (Each daemon resyncs every 2 s: one caught mid-sync has not converged yet.)
    let edge_version = version(&edge).await;
    let want = [
        ["in-cluster", "yes", home_version.as_str(), "2", "0"],
        ["edge", "yes", edge_version.as_str(), "2", "0"],
    ];
    support::eventually(
        "driftless status of the fleet to say both converged",
        support::WAIT,
        || async {
            let out = fleet_status();
            match out.status.code() == Some(0) && rows(&out)[1..] == want {
                true => Ok(()),
                false => Err(show(&out)),
            }
        },
    )
    .await;
}
