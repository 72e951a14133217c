//! A custom resource whose new revision empties a map it had filled (kube-prometheus
//! 0.9's `ruleSelector: {}` after 0.8's `matchLabels`) applies, settles with no write and
//! diffs clean. A 1.20 apiserver cannot server-side apply that (the map comes out null
//! and its own validation refuses it); driftless empties the map with a merge patch
//! first there (docs/src/apply.md). On 1.21+ the apply alone does it.

use crate::support;

use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;

use support::{assert_exit, show};

fn tree(root: &std::path::Path, ns: &str, group: &str, selector: &str) {
    std::fs::write(
        root.join("crd.yaml"),
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: watchers.{group}\nspec:\n  group: {group}\n  names: {{kind: Watcher, plural: watchers, singular: watcher}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              ruleSelector:\n                type: object\n                properties:\n                  matchLabels: {{type: object, additionalProperties: {{type: string}}}}\n              replicas: {{type: integer}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("watcher.yaml"),
        format!("apiVersion: {group}/v1\nkind: Watcher\nmetadata:\n  name: w\n  namespace: {ns}\nspec:\n  replicas: 1\n  ruleSelector: {selector}\n"),
    )
    .unwrap();
}

#[tokio::test]
async fn a_map_the_new_revision_empties_is_applied_empty() {
    let client = support::client().await;
    let ns = support::namespace(&client, "emptied").await;
    let group = format!("{ns}.driftless.test");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);

    tree(root, &ns, &group, "{matchLabels: {role: alert-rules}}");
    assert_exit(&run(&["apply", path]), 0);
    tree(root, &ns, &group, "{}");
    let diff = run(&["diff", path]);
    assert_exit(&diff, 1);
    assert!(
        String::from_utf8_lossy(&diff.stdout).contains("matchLabels"),
        "{}",
        show(&diff)
    );
    let out = run(&["apply", path]);
    assert_exit(&out, 0);

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Watcher"),
        "watchers",
    );
    let watchers: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let live = watchers.get("w").await.unwrap();
    assert_eq!(
        live.data["spec"],
        serde_json::json!({"replicas": 1, "ruleSelector": {}}),
        "{}",
        show(&out)
    );
    let again = run(&["apply", path]);
    assert_exit(&again, 0);
    support::assert_no_writes(&again);
    assert_exit(&run(&["diff", path]), 0);
}
