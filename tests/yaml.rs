//! Plain Kubernetes YAML in the spec tree (docs/src/yaml.md): an upstream-style bundle
//! applies beside TOML specs, settles with zero writes as the apiserver counts them, and
//! prunes by file; YAML errors name `file:line:col`; `.driftlessignore` keeps files unread.

use crate::support;

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

use support::{assert_exit, driftless, example, show};

/// The resources the bundle writes (their main resource, not status): what a no-op
/// apply must not write, inventory ConfigMaps included.
const BUNDLE_RESOURCES: [&str; 11] = [
    "configmaps",
    "namespaces",
    "serviceaccounts",
    "deployments",
    "services",
    "customresourcedefinitions",
    "clusterroles",
    "clusterrolebindings",
    "widgets",
    "gadgets",
    "hugethings",
];

/// A CRD of over 256 KiB, as big generated CRDs are (too big for client-side apply's
/// annotation; server-side apply has no such limit).
fn huge_crd(group: &str) -> String {
    let description = "A field of a very large generated schema. ".repeat(7_000);
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  creationTimestamp: null\n  name: hugethings.{group}\nspec:\n  group: {group}\n  names: {{kind: HugeThing, listKind: HugeThingList, plural: hugethings, singular: hugething}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        description: \"{description}\"\n        x-kubernetes-preserve-unknown-fields: true\nstatus:\n  acceptedNames: {{kind: \"\", plural: \"\"}}\n  conditions: []\n  storedVersions: []\n"
    )
}

fn run(instance: &str, args: &[&str]) -> std::process::Output {
    support::driftless_on_cluster(instance, args)
}

/// The example bundle (examples/operator-bundle) with a CRD of over 256 KiB added, in a
/// namespace, API group and cluster-scoped names of its own. Runs alone (`serial_`): it
/// counts the apiserver's own write requests.
#[tokio::test]
async fn serial_a_yaml_bundle_applies_settles_without_writes_and_prunes_by_file() {
    let client = support::client().await;
    let id = format!(
        "{:x}",
        std::process::id()
            ^ (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos())
    );
    let ns = format!("yaml-{id}");
    let group = format!("g{id}.driftless.test");
    let operator = format!("widget-operator-{id}");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::copy_tree(
        &example("operator-bundle"),
        root,
        &[
            ("gizmos.example.org", &group),
            ("widget-system", &ns),
            ("widget-operator", &operator),
        ],
    );
    std::fs::write(root.join("crds/huge.yaml"), huge_crd(&group)).unwrap();
    assert!(
        std::fs::metadata(root.join("crds/huge.yaml"))
            .unwrap()
            .len()
            > 256 << 10
    );
    std::fs::write(
        root.join("crds/huge-things.yaml"),
        format!("apiVersion: {group}/v1\nkind: HugeThing\nmetadata: {{name: one, namespace: {ns}}}\nspec: {{a: 1}}\n"),
    )
    .unwrap();
    let path = root.to_str().unwrap();

    let out = run(&ns, &["apply", path, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("not ready") && !stdout.contains("FAILED"),
        "{}",
        show(&out)
    );

    // What the bundle asked for is there, as asked.
    let deployment = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get(&operator)
        .await
        .unwrap();
    let pod = deployment.spec.template.spec.unwrap();
    assert_eq!(
        pod.node_selector
            .unwrap()
            .get("kubernetes.io/os")
            .map(String::as_str),
        Some("linux")
    );
    let svc = Api::<Service>::namespaced(client.clone(), &ns)
        .get(&format!("{operator}-metrics"))
        .await
        .unwrap();
    assert_eq!(
        svc.spec.unwrap().ports.unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    let crd = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1alpha1", kind), plural)
    };
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &crd("Widget", "widgets"));
    assert_eq!(
        widgets.get("front-door").await.unwrap().data["spec"]["size"],
        3
    );

    // A second apply: nothing sent, as the apiserver itself counts it.
    let before = support::apiserver_writes_when_quiet(&client, &BUNDLE_RESOURCES).await;
    let out = run(&ns, &["apply", path]);
    assert_exit(&out, 0);
    let after = support::apiserver_writes(&client, &BUNDLE_RESOURCES).await;
    support::assert_no_writes(&out);
    assert_eq!(
        after - before,
        0,
        "the apiserver counted writes: {}",
        show(&out)
    );

    // And diff agrees: nothing to show.
    let out = run(&ns, &["diff", path]);
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{}", show(&out));

    // Removing a YAML file prunes its objects, and only those.
    std::fs::remove_file(root.join("widgets.yaml")).unwrap();
    let out = run(&ns, &["apply", path, "--max-prune-ratio", "0.9"]);
    assert_exit(&out, 0);
    assert!(widgets.get_opt("front-door").await.unwrap().is_none());
    let gadgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &crd("Gadget", "gadgets"));
    assert!(gadgets.get_opt("doorbell").await.unwrap().is_none());
    assert!(
        Api::<Deployment>::namespaced(client.clone(), &ns)
            .get_opt(&operator)
            .await
            .unwrap()
            .is_some()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches(": pruned").count(), 2, "{}", show(&out));
}

fn validate(root: &Path) -> std::process::Output {
    driftless(&["validate", root.to_str().unwrap()])
}

fn errors(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn yaml_errors_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("team")).unwrap();
    // Line 5 is indented one space: not part of `metadata`, not a key of the document.
    std::fs::write(
        root.join("team/indent.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n data:\n  x: y\n",
    )
    .unwrap();
    // The second document has no kind: its place is where it starts (line 6).
    std::fs::write(
        root.join("nokind.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n---\napiVersion: v1\nmetadata:\n  name: nokind\n",
    )
    .unwrap();
    // A bad value is placed at its key.
    std::fs::write(
        root.join("label.yml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: l\n  labels:\n    ok: fine\n    driftless.dev/instance: me\n",
    )
    .unwrap();
    let out = validate(root);
    assert_exit(&out, 2);
    let text = errors(&out);
    assert!(text.contains("team/indent.yaml:5:2: YAML: "), "{text}");
    assert!(
        text.contains("nokind.yaml:6:1: not a Kubernetes object: missing `kind`"),
        "{text}"
    );
    assert!(
        text.contains("label.yml:7:5: label `driftless.dev/instance` in `metadata.labels` is set by driftless; remove it"),
        "{text}"
    );
}

#[test]
fn a_spec_in_toml_and_in_yaml_is_a_duplicate_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("a.toml"),
        "[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = { name = \"dup\", namespace = \"apps\" }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("b.yaml"),
        "# the same object\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dup\n  namespace: apps\n",
    )
    .unwrap();
    let out = validate(root);
    assert_exit(&out, 2);
    assert!(
        errors(&out).contains(
            "b.yaml:2:1: duplicate spec manifest/apps/ConfigMap/dup: first defined at a.toml:1:1"
        ),
        "{}",
        show(&out)
    );
}

#[test]
fn driftlessignore_keeps_a_kustomization_unread() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::copy_tree(&example("operator-bundle"), root, &[]);
    let out = validate(root);
    assert_exit(&out, 0);
    // Without the ignore file, the root is a kustomization: kustomize builds it (the
    // five files it names), and nothing under it is read on its own (apps.toml is not).
    std::fs::remove_file(root.join(".driftlessignore")).unwrap();
    let out = validate(root);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("valid: 10 specs"), "{}", show(&out));
    assert!(
        stdout.contains("rendered: kustomization.yaml: kubectl kustomize ."),
        "{}",
        show(&out)
    );
    // A directory pattern keeps everything under it unread.
    std::fs::write(
        root.join(".driftlessignore"),
        "kustomization.yaml\n/operator/\n",
    )
    .unwrap();
    let out = validate(root);
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("valid: 5 specs"),
        "{}",
        show(&out)
    );
}
