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
    let edge_server = SecondApiserver::apart().await;
    let edge = edge_server.client().await;
    Api::<Namespace>::all(edge.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();

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
