//! Secrets' inventory hashes are keyed: whoever can read the inventory ConfigMaps cannot
//! test guesses of a Secret's value offline, while an unchanged Secret is still never
//! written again (across processes) and a changed one is written once; an inventory
//! recorded before the keying keeps working without a write of the Secret.
//!
//! `serial_`: it counts the apiserver's own writes to Secrets and ConfigMaps, which
//! other tests' writes would disturb (`scripts/test` runs these alone).

use crate::support;

use driftless::apply::secret_key::secret_name;
use driftless::apply::{Action, Engine, Entry};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams};
use serde_json::Value;

/// The unkeyed hash the inventory used to record: FNV-1a 64 of the compact JSON. What
/// anyone reading the inventory could compute for a guess.
fn fnv(v: &Value) -> String {
    let h = v
        .to_string()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("{h:016x}")
}

/// `body` without metadata: what `Entry::shape` is a hash of.
fn shape(body: &Value) -> Value {
    let mut v = body.clone();
    v.as_object_mut().map(|o| o.remove("metadata"));
    v
}

fn specs(ns: &str, password_b64: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: {ns}}}\ntype: Opaque\ndata: {{password: {password_b64}}}\n\
         ---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain, namespace: {ns}}}\ndata: {{colour: blue}}\n"
    )
}

fn entry(inv: &driftless::apply::Inventory, kind: &str) -> Entry {
    inv.entries
        .values()
        .find(|e| e.key.kind == kind)
        .map(|e| Entry::clone(e))
        .unwrap_or_else(|| panic!("no {kind} in the inventory: {inv:#?}"))
}

fn engine(client: &kube::Client, ns: &str) -> Engine {
    support::engine(client, ns)
}

const RESOURCES: [&str; 2] = ["secrets", "configmaps"];

/// Syncs `tree` with `engine`: every object unchanged, and no write to `resources` as the
/// apiserver counts them.
async fn unchanged_without_writes(
    engine: &Engine,
    tree: &driftless::spec::SpecTree,
    resources: &[&str],
) {
    let before = support::apiserver_writes(&engine.client, resources).await;
    let (_, report) = support::sync(engine, tree).await;
    assert!(
        report.objects.iter().all(|o| o.action == Action::Unchanged),
        "{report:#?}"
    );
    assert_eq!(
        support::apiserver_writes(&engine.client, resources).await - before,
        0
    );
}

#[tokio::test]
async fn serial_secret_hashes_are_keyed_and_unchanged_secrets_are_not_written() {
    let client = support::client().await;
    let ns = support::namespace(&client, "secret-hash").await;
    let system: Api<Secret> = Api::namespaced(client.clone(), "driftless-system");
    let tree = support::tree(&[("s.yaml", &specs(&ns, "aHVudGVyMg=="))]); // "hunter2"
    let first = engine(&client, &ns);
    let (objects, report) = support::sync(&first, &tree).await;
    assert!(report.ok(), "{report:#?}");
    // The key was made, once, beside the inventory.
    let key_secret = system
        .get(&secret_name(&ns))
        .await
        .expect("the hash key Secret");
    assert!(
        key_secret
            .data
            .as_ref()
            .is_some_and(|d| d["key"].0.len() == 32)
    );

    // What anyone who reads the inventory sees.
    let inv = first.store().load(&client).await.unwrap();
    let body = |kind: &str| {
        objects
            .iter()
            .find(|o| o.kind == kind)
            .map(|o| o.body.value())
            .unwrap()
    };
    // The test reproduces the body driftless sends exactly: the ConfigMap's plain hash
    // is the FNV of it...
    let cm = entry(&inv, "ConfigMap");
    assert_eq!(cm.applied, Some(fnv(&body("ConfigMap"))));
    // ...but the Secret's hashes are not the FNV of its body, although this guess is the
    // right value: an offline guess with the old function no longer confirms anything.
    let secret = entry(&inv, "Secret");
    let recorded = secret.applied.clone().expect("a recorded hash");
    assert_ne!(
        recorded,
        fnv(&body("Secret")),
        "the plain hash of the Secret"
    );
    assert_ne!(secret.shape, Some(fnv(&shape(&body("Secret")))));
    assert_eq!(recorded.len(), 32, "{recorded}");
    let shard = Api::<ConfigMap>::namespaced(client.clone(), "driftless-system")
        .get(&format!("driftless-inventory-{ns}-0"))
        .await
        .unwrap();
    let text = &shard.data.unwrap()["entries.json"];
    assert!(
        !text.contains(&fnv(&body("Secret"))) && !text.contains(&fnv(&shape(&body("Secret")))),
        "{text}"
    );

    // A re-apply by another process (a fresh engine reads the same key): nothing written,
    // as the apiserver itself counts it.
    let restarted = engine(&client, &ns);
    unchanged_without_writes(&restarted, &tree, &RESOURCES).await;

    // A changed value: one write of the Secret (and the inventory's record of it).
    let changed = support::tree(&[("s.yaml", &specs(&ns, "aHVudGVyMw=="))]);
    let before = support::apiserver_writes(&client, &["secrets"]).await;
    let (_, report) = support::sync(&restarted, &changed).await;
    let actions: Vec<(&str, &Action)> = report
        .objects
        .iter()
        .map(|o| (o.key.kind.as_str(), &o.action))
        .collect();
    assert_eq!(
        actions,
        [
            ("Secret", &Action::Configured),
            ("ConfigMap", &Action::Unchanged)
        ]
    );
    assert_eq!(
        support::apiserver_writes(&client, &["secrets"]).await - before,
        1
    );
    let live = Api::<Secret>::namespaced(client.clone(), &ns)
        .get("db")
        .await
        .unwrap();
    assert_eq!(live.data.unwrap()["password"].0, b"hunter3");
    let keyed_now = entry(&restarted.store().load(&client).await.unwrap(), "Secret");
    assert_ne!(keyed_now.applied, Some(recorded.clone()));

    // An inventory from before the keying (the Secret recorded with its plain hashes):
    // taken as the same intent, no write of the Secret, and recorded keyed again.
    let changed_objects = support::render(&client, &ns, &changed).await;
    let secret_body = changed_objects
        .iter()
        .find(|o| o.kind == "Secret")
        .map(|o| o.body.value())
        .unwrap();
    support::rewrite_inventory(&client, &ns, |entries| {
        for e in entries.iter_mut().filter(|e| e["kind"] == "Secret") {
            e["applied"] = fnv(&secret_body).into();
            e["shape"] = fnv(&shape(&secret_body)).into();
        }
    })
    .await;
    let upgraded = engine(&client, &ns);
    unchanged_without_writes(&upgraded, &changed, &["secrets"]).await;
    let rekeyed = entry(&upgraded.store().load(&client).await.unwrap(), "Secret");
    assert_eq!(rekeyed.applied, keyed_now.applied);
    assert_eq!(rekeyed.shape, keyed_now.shape);

    // Cleanup: the objects (a whole prune) and this instance's key.
    let cleanup = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: ns.clone(),
            prune: driftless::apply::prune::Options {
                allow_mass: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let report = cleanup
        .sync(&[], &Default::default(), &driftless::apply::NoWait)
        .await
        .unwrap();
    assert!(report.ok(), "{report:#?}");
    let _ = system
        .delete(&secret_name(&ns), &DeleteParams::default())
        .await;
}
