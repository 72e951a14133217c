//! driftless's ownership marks across an upgrade of driftless itself (docs/src/deployment.md:
//! Upgrading driftless). Earlier versions labelled what they applied `app.kubernetes.io/managed-by:
//! driftless` too, and manifests also `app.kubernetes.io/name` and `/instance`; such
//! objects carry the instance label, so they stay this instance's: no conflict, no
//! adoption, no surprise prune. Their next apply drops the old labels, and a workload's
//! Pods are not restarted for it.

use crate::support;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::Value;

use support::{assert_exit, show};

const OLD_LABELS: [&str; 3] = [
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
];

/// `body` as an earlier driftless rendered it: the old labels beside the new marks.
fn as_earlier_driftless_rendered(mut body: Value, kind: &str, name: &str) -> Value {
    let labels = body["metadata"]["labels"]
        .as_object_mut()
        .expect("rendered labels");
    labels.insert("app.kubernetes.io/managed-by".into(), "driftless".into());
    labels
        .entry("app.kubernetes.io/name")
        .or_insert_with(|| kind.to_ascii_lowercase().into());
    labels
        .entry("app.kubernetes.io/instance")
        .or_insert_with(|| name.into());
    body
}

#[tokio::test]
async fn objects_an_earlier_driftless_marked_stay_ours_and_take_the_new_marks() {
    let client = support::client().await;
    let ns = support::namespace(&client, "marks").await;
    let instance = ns.clone();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("web.toml"),
        format!("namespace = \"{ns}\"\n[elasticweb.web]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = 100\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("settings.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  a: \"1\"\n"),
    )
    .unwrap();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&instance, args);
    assert_exit(&run(&["apply", path, "--wait", "--timeout", "90s"]), 0);

    // What an earlier driftless left: the same objects, applied by the same field manager
    // with the old labels too (the inventory's format has not changed).
    let tree = driftless::spec::load_dir(root).unwrap();
    for o in support::render(&client, &instance, &tree).await {
        let old = as_earlier_driftless_rendered(o.body.value(), &o.kind, &o.name);
        support::apply_manifest_as(&client, &old, "driftless").await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let before = deployments.get("web").await.unwrap();
    assert_eq!(
        before.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
        "driftless"
    );

    // The upgraded driftless: its objects, with no conflict and no adoption.
    let out = run(&["apply", path]);
    assert_exit(&out, 0);
    let text = show(&out);
    assert!(
        !text.contains("conflict") && !text.contains("pruned"),
        "{text}"
    );
    let cm = configmaps.get("settings").await.unwrap();
    let labels = cm.metadata.labels.unwrap_or_default();
    for old in OLD_LABELS {
        assert!(
            !labels.contains_key(old),
            "{old} still on the ConfigMap: {labels:?}"
        );
    }
    assert_eq!(labels["driftless.dev/instance"], instance);
    let after = deployments.get("web").await.unwrap();
    let labels = after.metadata.labels.clone().unwrap_or_default();
    assert!(
        !labels.contains_key("app.kubernetes.io/managed-by"),
        "{labels:?}"
    );
    // The selector labels of driftless's own kinds stay: a Deployment's selector is
    // immutable, and its Pod template did not change, so nothing restarted.
    assert_eq!(labels["app.kubernetes.io/name"], "elasticweb");
    assert_eq!(after.spec.template, before.spec.template);
    let sets = replicasets.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        sets.items.len(),
        1,
        "a new ReplicaSet: the Pods were replaced"
    );

    // Settled: nothing more to write.
    let out = run(&["apply", path]);
    assert_exit(&out, 0);
    support::assert_no_writes(&out);
    // Still ours to prune.
    std::fs::remove_file(root.join("settings.yaml")).unwrap();
    let out = run(&["apply", path]);
    assert_exit(&out, 0);
    assert!(show(&out).contains("pruned"), "{}", show(&out));
    assert!(configmaps.get_opt("settings").await.unwrap().is_none());
}
