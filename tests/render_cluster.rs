//! Rendered objects of every kind are accepted by the real apiserver (server-side apply,
//! dry-run), through discovery as apply will do it.

use crate::support;

use std::time::Duration;

use driftless::render::{Facts, render};
use driftless::spec::{SourceFile, parse_files};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, ResourceExt};

async fn dry_run(
    client: &Client,
    obj: &driftless::render::Object,
) -> Result<DynamicObject, kube::Error> {
    let (group, version) = match obj.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", obj.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &obj.kind);
    let (ar, caps) = pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = match (caps.scope, &obj.namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    let pp = PatchParams::apply("driftless").dry_run();
    api.patch(&obj.name, &pp, &Patch::Apply(&obj.body.value()))
        .await
}

#[tokio::test]
async fn every_kind_renders_to_objects_the_apiserver_accepts() {
    let client = support::client().await;
    let ns = support::namespace(&client, "render-dry").await;
    let suffix = ns.rsplit('-').next().unwrap_or("x");
    let group = format!("dryrun-{suffix}.driftless.test");
    let text = format!(
        r#"
namespace = "{ns}"

[workspace.ide]
image = "codercom/code-server:4"
cpu = "500m"
memory = "1Gi"
storage = "1Gi"
storage-class = "standard"

[workspace.parked]
image = "codercom/code-server:4"
state = "stopped"

[elasticweb.shop]
image = "nginx:1.17.1"
port = 32199
single-pod-qps = 100
total-qps = 250

[elasticweb.cold]
image = "nginx:1.17.1"
single-pod-qps = 100
total-qps = 0

[localservice.local]
selector = {{ app = "local" }}
ports = [{{ name = "http", port = 80, target-port = 8080 }}, {{ name = "metrics", port = 9090, protocol = "TCP" }}]

[[manifest]]
apiVersion = "v1"
kind = "Namespace"
metadata = {{ name = "{ns}-extra" }}

[[manifest]]
apiVersion = "v1"
kind = "ConfigMap"
metadata = {{ name = "settings" }}
data = {{ mode = "on" }}

[[manifest]]
apiVersion = "apiextensions.k8s.io/v1"
kind = "CustomResourceDefinition"
metadata = {{ name = "gadgets.{group}" }}
spec = {{ group = "{group}", scope = "Namespaced", names = {{ kind = "Gadget", plural = "gadgets", singular = "gadget", listKind = "GadgetList" }}, versions = [{{ name = "v1", served = true, storage = true, schema = {{ openAPIV3Schema = {{ type = "object", properties = {{ spec = {{ type = "object", x-kubernetes-preserve-unknown-fields = true }} }} }} }} }}] }}

[[manifest]]
apiVersion = "{group}/v1"
kind = "Gadget"
metadata = {{ name = "g1" }}
spec = {{ size = 3 }}
"#
    );
    let tree = parse_files(&[SourceFile {
        path: "all.toml".into(),
        contents: text.into_bytes(),
    }])
    .unwrap();
    let nodes = driftless::cluster::node_facts(&client).await.unwrap();
    let facts = Facts {
        instance: "dry-run".into(),
        nodes,
    };
    let objects = render(&tree, &facts).unwrap();

    let kinds: Vec<&str> = objects.iter().map(|o| o.kind.as_str()).collect();
    for k in [
        "Namespace",
        "CustomResourceDefinition",
        "PersistentVolumeClaim",
        "Pod",
        "Service",
        "Deployment",
        "ConfigMap",
        "Gadget",
    ] {
        assert!(kinds.contains(&k), "no {k} rendered: {kinds:?}");
    }
    let local_services = objects
        .iter()
        .filter(|o| o.name.starts_with("local-"))
        .count();
    assert!(
        local_services >= 3,
        "one Service per fake node expected, got {local_services}"
    );

    // The custom resource can only be checked once its CRD really exists.
    let (custom, builtin): (Vec<_>, Vec<_>) = objects.iter().partition(|o| o.kind == "Gadget");
    for obj in &builtin {
        let returned = dry_run(&client, obj)
            .await
            .unwrap_or_else(|e| panic!("apiserver rejected {}: {e}", obj.display_ref()));
        assert_eq!(returned.name_any(), obj.name);
        assert_eq!(
            returned
                .labels()
                .get("driftless.dev/instance")
                .map(String::as_str),
            Some("dry-run")
        );
        assert!(
            !returned
                .labels()
                .contains_key("app.kubernetes.io/managed-by")
        );
    }

    let crd_obj = builtin
        .iter()
        .find(|o| o.kind == "CustomResourceDefinition")
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &crd_obj.name,
        &PatchParams::apply("driftless-test"),
        &Patch::Apply(&crd_obj.body.value()),
    )
    .await
    .unwrap();
    support::eventually("CRD Established", Duration::from_secs(60), || {
        let crds = crds.clone();
        let name = crd_obj.name.clone();
        async move {
            let crd = crds.get(&name).await.map_err(|e| e.to_string())?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                Ok(())
            } else {
                Err("not established".into())
            }
        }
    })
    .await;
    // Discovery may lag the Established condition briefly.
    let cr = custom[0];
    support::eventually(
        "custom resource accepted",
        Duration::from_secs(60),
        || async {
            dry_run(&client, cr)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await;
    crds.delete(&crd_obj.name, &DeleteParams::default())
        .await
        .unwrap();
}
