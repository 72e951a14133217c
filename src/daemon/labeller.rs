//! LocalService Pod labelling: every Pod a `localservice` selects carries the node it
//! runs on as a label, which the per-node Services select on. One Pod watch per
//! namespace that has localservices; a write only when the label is missing or wrong,
//! through server-side apply of that one label under its own field manager.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::apply::{Verb, Writes};
use crate::render::ownership;
use crate::spec::{Spec, SpecBody, names};

pub(crate) const FIELD_MANAGER: &str = "driftless-localservice";

type Selector = BTreeMap<String, String>;

/// Selectors of the localservices, by namespace.
pub(crate) type Selectors = BTreeMap<String, Vec<Selector>>;

/// The selectors of the localservices among `specs`, by namespace.
pub(crate) fn selectors_of(specs: &[Spec]) -> Selectors {
    let mut out = Selectors::new();
    for s in specs {
        if let SpecBody::LocalService(l) = &s.body {
            out.entry(s.id.namespace.clone())
                .or_default()
                .push(l.selector.clone());
        }
    }
    out
}

/// The label value `pod` should carry and does not, if any.
pub(crate) fn wanted_label(pod: &Pod, selectors: &[BTreeMap<String, String>]) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let node = pod.spec.as_ref()?.node_name.as_deref()?;
    let labels = pod.labels();
    let selected = selectors
        .iter()
        .any(|sel| !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
    if !selected {
        return None;
    }
    let want = names::as_label_value(node);
    (labels.get(ownership::NODE) != Some(&want)).then_some(want)
}

/// Keeps one watch task per namespace in `selectors`, restarting a namespace's task when
/// its selectors change (its initial list then re-labels every Pod).
pub async fn run(
    client: Client,
    mut selectors: watch::Receiver<Selectors>,
    writes: Arc<Writes>,
    active: watch::Receiver<bool>,
) {
    let mut tasks: HashMap<String, (Vec<Selector>, JoinHandle<()>)> = HashMap::new();
    loop {
        let current = selectors.borrow_and_update().clone();
        tasks.retain(|ns, (sel, handle)| {
            let keep = current.get(ns) == Some(sel);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (ns, sel) in &current {
            if tasks.contains_key(ns) {
                continue;
            }
            let handle = tokio::spawn(watch_namespace(
                client.clone(),
                ns.clone(),
                sel.clone(),
                writes.clone(),
                active.clone(),
            ));
            tasks.insert(ns.clone(), (sel.clone(), handle));
        }
        if selectors.changed().await.is_err() {
            break;
        }
    }
    for (_, (_, handle)) in tasks {
        handle.abort();
    }
}

async fn watch_namespace(
    client: Client,
    namespace: String,
    selectors: Vec<BTreeMap<String, String>>,
    writes: Arc<Writes>,
    active: watch::Receiver<bool>,
) {
    let api: Api<Pod> = Api::namespaced(client, &namespace);
    let mut events = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    loop {
        let pod = match events.try_next().await {
            Ok(Some(pod)) => pod,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(namespace, error = %crate::cluster::error_text(&e), "pod watch error");
                continue;
            }
        };
        // A standby replica keeps watching (warm) but does not write.
        if !*active.borrow() {
            continue;
        }
        let Some(value) = wanted_label(&pod, &selectors) else {
            continue;
        };
        let patch = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod.name_any(), "labels": {ownership::NODE: value}},
        });
        writes.count(Verb::Patch);
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
        {
            Ok(_) => {
                tracing::debug!(namespace, pod = %pod.name_any(), node = %value, "labelled pod with its node")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(namespace, pod = %pod.name_any(), error = %crate::cluster::error_text(&e), "could not label pod")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(labels: serde_json::Value, node: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": labels},
            "spec": {"containers": [], "nodeName": node},
        }))
        .unwrap()
    }

    fn sel(pairs: &[(&str, &str)]) -> Vec<BTreeMap<String, String>> {
        vec![
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ]
    }

    #[test]
    fn selected_scheduled_pods_get_their_node_once() {
        let s = sel(&[("app", "x")]);
        assert_eq!(
            wanted_label(&pod(json!({"app": "x"}), Some("node-1")), &s),
            Some("node-1".into())
        );
        // Already right: no write.
        assert_eq!(
            wanted_label(
                &pod(
                    json!({"app": "x", ownership::NODE: "node-1"}),
                    Some("node-1")
                ),
                &s
            ),
            None
        );
        // Wrong (a reused name on another node): fixed.
        assert_eq!(
            wanted_label(
                &pod(
                    json!({"app": "x", ownership::NODE: "node-2"}),
                    Some("node-1")
                ),
                &s
            ),
            Some("node-1".into())
        );
        // Not selected, not scheduled, or an empty selector: left alone.
        assert_eq!(
            wanted_label(&pod(json!({"app": "y"}), Some("node-1")), &s),
            None
        );
        assert_eq!(wanted_label(&pod(json!({"app": "x"}), None), &s), None);
        assert_eq!(
            wanted_label(&pod(json!({"app": "x"}), Some("node-1")), &sel(&[])),
            None
        );
        assert_eq!(wanted_label(&pod(json!(null), Some("node-1")), &s), None);
    }

    #[test]
    fn long_node_names_become_valid_label_values() {
        let s = sel(&[("app", "x")]);
        let long = "n".repeat(100);
        let v = wanted_label(&pod(json!({"app": "x"}), Some(&long)), &s).unwrap();
        assert!(names::label_value(&v).is_ok() && v.len() <= 63, "{v}");
    }
}
