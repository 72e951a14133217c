//! Prune and finalizers against the real local cluster (kube-controller-manager, and the
//! apiextensions controller that deletes a CRD's custom resources): an object a DELETE
//! leaves being deleted stays in the inventory, is never re-created nor deleted again,
//! and leaves the inventory only once the apiserver says it is gone.

use crate::support;

use driftless::apply::prune::{self, PruneAction};
use driftless::apply::{Engine, Entry, SyncReport};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const HOLD: &str = "driftless.test/hold";

/// Adds (`Some`) or removes (`None`) our finalizer, as a controller would: a merge patch
/// by another field manager.
async fn finalizer(api: &Api<DynamicObject>, name: &str, hold: bool) {
    let finalizers = if hold { json!([HOLD]) } else { Value::Null };
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
    )
    .await
    .unwrap_or_else(|e| panic!("finalizer of {name}: {e}"));
}

/// Releases the finalizers when dropped, also when the test fails, so a held object (and
/// a CRD waiting on it) never outlives the test on the shared cluster. From a thread of
/// its own with a client of its own: the test's client is bound to the test's runtime.
struct Release(Vec<(ApiResource, String, String)>);

impl Drop for Release {
    fn drop(&mut self) {
        let held = std::mem::take(&mut self.0);
        support::cleanup_on_own_thread(move |client| async move {
            for (resource, ns, name) in held {
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
                let _ = api
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                    )
                    .await;
            }
        });
    }
}

fn configmaps(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<ConfigMap>(&()))
}

fn configmap(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{a: \"1\"}}\n"
    )
}

/// The inventory entry of `kind`/`name`, if listed.
async fn listed(engine: &Engine, kind: &str, name: &str) -> Option<Entry> {
    let inv = engine
        .store()
        .load(&engine.client)
        .await
        .expect("load the inventory");
    inv.entries
        .into_values()
        .find(|e| e.key.kind == kind && e.key.name == name)
        .map(|e| *e)
}

/// The prune outcome for `name` in `report`.
fn outcome<'a>(report: &'a SyncReport, name: &str) -> &'a prune::Outcome {
    report
        .prune
        .objects
        .iter()
        .find(|o| o.key.name == name)
        .unwrap_or_else(|| panic!("no prune outcome for {name}: {:#?}", report.prune))
}

#[tokio::test]
async fn a_pruned_object_held_by_a_finalizer_stays_inventoried_until_it_is_gone() {
    let client = support::client().await;
    let ns = support::namespace(&client, "prune-fin").await;
    let engine = support::engine(&client, &ns);
    let both = support::tree(&[(
        "cm.yaml",
        &format!("{}---\n{}", configmap(&ns, "held"), configmap(&ns, "keep")),
    )]);
    let (_, report) = support::sync(&engine, &both).await;
    assert!(report.ok(), "{report:#?}");
    let api = configmaps(&client, &ns);
    finalizer(&api, "held", true).await;
    let _release = Release(vec![(
        ApiResource::erase::<ConfigMap>(&()),
        ns.clone(),
        "held".to_string(),
    )]);
    let uid = api.get("held").await.unwrap().uid();

    // Removed from the specs: deleted, but held by the finalizer.
    let only_keep = support::tree(&[("cm.yaml", &configmap(&ns, "keep"))]);
    let (objects, report) = support::sync(&engine, &only_keep).await;
    assert!(report.ok(), "{report:#?}");
    let first = outcome(&report, "held");
    assert_eq!(first.action, PruneAction::Pruned, "{:#?}", report.prune);
    assert!(
        first.waiting.as_deref().is_some_and(|w| w.contains(HOLD)),
        "{first:#?}"
    );
    let live = api.get("held").await.unwrap();
    assert!(live.metadata.deletion_timestamp.is_some(), "{live:#?}");
    let entry = listed(&engine, "ConfigMap", "held")
        .await
        .expect("the object being deleted left the inventory");
    assert!(entry.deleting, "{entry:#?}");
    // diff has nothing to say about it: the delete was sent.
    let diffs = engine.diff(&objects, &Default::default()).await.unwrap();
    assert!(diffs.iter().all(|d| d.key.name != "held"), "{diffs:#?}");

    // The next sync reads it again: no error, nothing written (neither a second DELETE,
    // nor a re-created object, nor an inventory change).
    let writes = engine.writes.total();
    let (_, report) = support::sync(&engine, &only_keep).await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!(engine.writes.total(), writes, "{report:#?}");
    let again = outcome(&report, "held");
    assert_eq!(again.action, PruneAction::Deleting);
    assert!(again.waiting.is_some(), "{again:#?}");
    assert_eq!(report.prune.pruned(), 0);
    let live = api.get("held").await.unwrap();
    assert_eq!(live.uid(), uid, "re-created");
    assert!(live.metadata.deletion_timestamp.is_some());
    assert!(listed(&engine, "ConfigMap", "held").await.is_some());

    // Released: it goes, and the next sync drops it from the inventory.
    finalizer(&api, "held", false).await;
    support::eventually("the released ConfigMap gone", support::WAIT, || async {
        match api.get_opt("held").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(o) => Err(format!("{:?}", o.metadata.finalizers)),
        }
    })
    .await;
    let (_, report) = support::sync(&engine, &only_keep).await;
    assert!(report.ok(), "{report:#?}");
    let last = outcome(&report, "held");
    assert_eq!(last.action, PruneAction::AlreadyGone);
    assert!(last.waiting.is_none());
    assert!(listed(&engine, "ConfigMap", "held").await.is_none());
    assert!(listed(&engine, "ConfigMap", "keep").await.is_some());
    // Settled: a further sync has nothing to prune.
    let (_, report) = support::sync(&engine, &only_keep).await;
    assert!(report.prune.objects.is_empty(), "{:#?}", report.prune);
}

#[tokio::test]
async fn a_crd_and_its_resources_one_held_removed_in_one_revision_converge() {
    let client = support::client().await;
    let ns = support::namespace(&client, "prune-crd").await;
    let group = format!("{ns}.driftless.test");
    let crd_name = format!("gadgets.{group}");
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {crd_name}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"#
    );
    let gadget = |name: &str| {
        format!(
            "apiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{size: 1}}\n"
        )
    };
    let all = support::tree(&[
        ("crd.yaml", &crd),
        (
            "gadgets.yaml",
            &format!("{}---\n{}", gadget("free"), gadget("held")),
        ),
        ("cm.yaml", &configmap(&ns, "keep")),
    ]);
    let only_keep = support::tree(&[("cm.yaml", &configmap(&ns, "keep"))]);
    // Three of four objects go in one revision: past the default share on purpose.
    let engine = Engine::new(
        client.clone(),
        driftless::apply::Options {
            instance: ns.clone(),
            prune: prune::Options {
                max_ratio: 1.0,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let (_, report) = support::sync(&engine, &all).await;
    assert!(report.ok(), "{report:#?}");
    let gadget_resource = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &gadget_resource);
    finalizer(&gadgets, "held", true).await;
    let _release = Release(vec![(gadget_resource, ns.clone(), "held".to_string())]);

    // CRD and both resources leave: the resources are deleted first, then the CRD, which
    // waits (the apiextensions controller's cleanup finalizer) on the held resource.
    let (_, report) = support::sync(&engine, &only_keep).await;
    assert!(report.ok(), "{report:#?}");
    let order: Vec<&str> = report
        .prune
        .objects
        .iter()
        .map(|o| o.key.kind.as_str())
        .collect();
    assert_eq!(order, ["Gadget", "Gadget", "CustomResourceDefinition"]);
    assert!(
        report
            .prune
            .objects
            .iter()
            .all(|o| o.action == PruneAction::Pruned),
        "{:#?}",
        report.prune
    );
    assert!(outcome(&report, "held").waiting.is_some());
    assert!(
        outcome(&report, &crd_name).waiting.is_some(),
        "{:#?}",
        report.prune
    );
    assert!(listed(&engine, "Gadget", "free").await.is_none());
    for (kind, name) in [("Gadget", "held"), ("CustomResourceDefinition", &crd_name)] {
        let entry = listed(&engine, kind, name)
            .await
            .unwrap_or_else(|| panic!("{kind} {name} left the inventory while there"));
        assert!(entry.deleting, "{entry:#?}");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get(&crd_name)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    // While they wait, a sync neither fails nor writes, and a fresh engine (a restarted
    // process, with no discovery cached) sees the same.
    let writes = engine.writes.total();
    let (_, report) = support::sync(&engine, &only_keep).await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!(engine.writes.total(), writes, "{report:#?}");
    assert_eq!(report.prune.waiting().count(), 2, "{:#?}", report.prune);
    let restarted = Engine::new(client.clone(), engine.opts.clone());
    let (_, report) = support::sync(&restarted, &only_keep).await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!(restarted.writes.total(), 0, "{report:#?}");
    assert_eq!(report.prune.waiting().count(), 2, "{:#?}", report.prune);

    // Released: the resource goes, then the CRD; syncs converge without an error and the
    // inventory is left with what the specs still name.
    finalizer(&gadgets, "held", false).await;
    support::eventually(
        "the CRD and its resources gone, inventory emptied of them",
        support::WAIT,
        || async {
            let (_, report) = support::sync(&engine, &only_keep).await;
            assert!(report.ok(), "{report:#?}");
            let inv = engine
                .store()
                .load(&client)
                .await
                .map_err(|e| e.to_string())?;
            let left: Vec<String> = inv.entries.keys().map(|k| k.to_string()).collect();
            let crd_left = crds.get_opt(&crd_name).await.map_err(|e| e.to_string())?;
            if left.len() == 1 && crd_left.is_none() {
                Ok(())
            } else {
                Err(format!(
                    "inventory {left:?}; CRD there: {}",
                    crd_left.is_some()
                ))
            }
        },
    )
    .await;
    assert!(listed(&engine, "ConfigMap", "keep").await.is_some());
}

/// Uninstall in one run: an emptied tree applied with `--allow-mass-prune --wait` waits
/// for what its prune left being deleted, and the instance's suspensions go with it.
// Multi-threaded: the finalizer is released while the CLI runs (a blocking call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uninstall_with_wait_waits_for_what_is_being_deleted() {
    let client = support::client().await;
    let ns = support::namespace(&client, "uninstall").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    std::fs::write(dir.path().join("held.yaml"), configmap(&ns, "held")).unwrap();
    support::assert_exit(&run(&["apply", path]), 0);
    let api = configmaps(&client, &ns);
    let _release = Release(vec![(
        ApiResource::erase::<ConfigMap>(&()),
        ns.clone(),
        "held".into(),
    )]);
    finalizer(&api, "held", true).await;
    let engine = support::engine(&client, &ns);
    let store = engine.store();
    let suspension = driftless::apply::suspensions::Suspension {
        reason: "incident".into(),
        since: "2026-11-24T10:00:00Z".into(),
        declared: false,
    };
    store
        .set_suspension(
            &client,
            &engine.writes,
            &format!("manifest/{ns}/ConfigMap/held"),
            Some(&suspension),
        )
        .await
        .unwrap();
    let records: Api<ConfigMap> = Api::namespaced(
        client.clone(),
        driftless::apply::inventory::DEFAULT_NAMESPACE,
    );
    let record = driftless::apply::suspensions::configmap_name(&ns);
    assert!(records.get_opt(&record).await.unwrap().is_some());

    // Its controller lets go a few seconds into the uninstall.
    let releasing = api.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        finalizer(&releasing, "held", false).await;
    });
    std::fs::remove_file(dir.path().join("held.yaml")).unwrap();
    let out = run(&[
        "apply",
        path,
        "--allow-mass-prune",
        "--wait",
        "--timeout",
        "60s",
    ]);
    support::assert_exit(&out, 0);
    assert!(
        support::printed(&out).contains("every object prune deleted is gone"),
        "{}",
        support::show(&out)
    );
    assert!(api.get_opt("held").await.unwrap().is_none());
    assert!(listed(&engine, "ConfigMap", "held").await.is_none());
    assert!(records.get_opt(&record).await.unwrap().is_none());
}
