//! The web UI's object view (`GET /api/v1/object`): one object of a spec as the cluster
//! has it and as the spec wants it, their diff (the server-side dry run `driftless diff`
//! makes), what it owns (a Deployment's ReplicaSets and their Pods, a Job's Pods…) and
//! the Kubernetes events of all of them. Read on demand, when a person opens the view:
//! nothing of it is kept in memory for every object. The API (`report::api`) asks it
//! through `Inspect`; the summaries of Pods and their owners are pure functions here.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::apply::Cluster;
use crate::apply::diff::{self, Change};
use crate::render::{self, NodeFacts};
use crate::report::api::{Inspect, InspectError};
use crate::spec::SpecTree;

/// Most Pods, ReplicaSets, Jobs or Events listed in one namespace for one view.
const LIST_LIMIT: u32 = 500;
/// Most events shown: the newest.
const EVENTS_SHOWN: usize = 100;

/// What the daemon renders the specs from: its current tree and the nodes it knows.
#[derive(Clone)]
pub(crate) struct Desired {
    pub tree: Arc<SpecTree>,
    pub nodes: Vec<NodeFacts>,
}

/// Why the live copy of an object could not be read (said in the view, `live_error`).
#[derive(Debug, thiserror::Error)]
enum LiveError {
    #[error("finding its API: {}", crate::cluster::error_text(.0))]
    Api(kube::Error),
    #[error("reading it: {}", crate::cluster::error_text(.0))]
    Read(kube::Error),
}

pub(crate) struct Inspector {
    cluster: Cluster,
    desired: watch::Receiver<Option<Desired>>,
}

impl Inspector {
    pub fn new(cluster: Cluster, desired: watch::Receiver<Option<Desired>>) -> Inspector {
        Inspector { cluster, desired }
    }

    /// The view of `object` (as the status names it: `Kind[.group] ns/name`) of `spec`.
    /// What cannot be read is said in the view (`diff_error`, `live_error`), not an error
    /// of the whole view: the Pods and events matter most when something is broken.
    pub async fn view(&self, spec: &str, object: &str) -> Result<Value, InspectError> {
        let desired = self.desired.borrow().clone().ok_or(InspectError::NoTree)?;
        let the_spec = desired
            .tree
            .specs
            .iter()
            .find(|s| s.id.to_string() == spec)
            .ok_or_else(|| InspectError::NoSpec(spec.to_string()))?;
        let facts = render::Facts {
            instance: self.cluster.instance().to_string(),
            nodes: desired.nodes.clone(),
        };
        let mut rendered = Vec::new();
        render::render_each(
            std::iter::once(the_spec),
            &desired.tree.settings,
            &facts,
            |_, objects| rendered = objects,
        )
        .map_err(|source| InspectError::Render {
            spec: spec.to_string(),
            source,
        })?;
        let wanted = rendered.into_iter().find(|o| o.key().to_string() == object);

        let mut view = json!({
            "spec": spec,
            "object": object,
            "read_at": k8s_openapi::jiff::Timestamp::now().to_string(),
        });
        let mut live: Option<Value> = None;
        match &wanted {
            None => {
                view["diff_error"] = json!(format!(
                    "{object} is no object of spec {spec} in the current revision"
                ));
            }
            Some(o) => {
                let adopt = desired.tree.adopt_specs();
                match self
                    .cluster
                    .diff_objects(std::slice::from_ref(o), &adopt)
                    .await
                {
                    Ok(diffs) => {
                        if let Some(d) = diffs.first() {
                            describe_change(&mut view, d);
                        }
                        // Nothing to change: what the spec wants is the rendered body,
                        // masked as the live object is.
                        if view.get("desired").is_none() {
                            let mut body = diff::clean(&o.body.value());
                            diff::mask_secrets(None, Some(&mut body));
                            if o.policy.sealed {
                                crate::spec::sops::mask_sealed(&mut body, None, "desired");
                            }
                            view["desired"] = json!(yaml(&body));
                        }
                    }
                    Err(e) => view["diff_error"] = json!(format!("diffing it: {e}")),
                }
                match self.read_live_of(o).await {
                    Ok(l) => live = l,
                    Err(e) => view["live_error"] = json!(e.to_string()),
                }
            }
        }
        if let Some(l) = &live {
            let mut shown = l.clone();
            if let Some(meta) = shown.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            diff::mask_secrets(Some(&mut shown), None);
            if wanted.as_ref().is_some_and(|o| o.policy.sealed) {
                crate::spec::sops::mask_sealed(&mut shown, None, "live");
            }
            view["live"] = json!(yaml(&shown));
            let namespace = l["metadata"]["namespace"].as_str().unwrap_or_default();
            let uid = l["metadata"]["uid"].as_str().unwrap_or_default();
            if !namespace.is_empty() && !uid.is_empty() {
                let (owned, uids) = self.owned(namespace, uid).await;
                view["owned"] = json!(owned);
                view["events"] = json!(self.events(namespace, &uids).await);
            }
        }
        Ok(view)
    }

    async fn read_live_of(&self, o: &render::Object) -> Result<Option<Value>, LiveError> {
        let (group, version) = crate::object::split_api_version(&o.api_version);
        let gvk = GroupVersionKind::gvk(group, version, &o.kind);
        let (resource, _) = kube::discovery::pinned_kind(self.cluster.client(), &gvk)
            .await
            .map_err(LiveError::Api)?;
        let api: Api<DynamicObject> = match &o.namespace {
            Some(ns) => Api::namespaced_with(self.cluster.client().clone(), ns, &resource),
            None => Api::all_with(self.cluster.client().clone(), &resource),
        };
        let got = api.get_opt(&o.name).await.map_err(LiveError::Read)?;
        Ok(got.and_then(|g| serde_json::to_value(g).ok()))
    }

    /// What `uid` owns, two levels down (Deployment → ReplicaSets → Pods, CronJob → Jobs
    /// → Pods): each with its phase, restarts and state; and every uid met, its own too.
    async fn owned(&self, namespace: &str, uid: &str) -> (Vec<Value>, HashSet<String>) {
        let mut uids: HashSet<String> = HashSet::from([uid.to_string()]);
        let mut shown = Vec::new();
        let lp = ListParams::default().limit(LIST_LIMIT);
        for (api_version, kind, plural) in [
            ("apps/v1", "ReplicaSet", "replicasets"),
            ("batch/v1", "Job", "jobs"),
        ] {
            let (group, version) = crate::object::split_api_version(api_version);
            let resource = kube::api::ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.cluster.client().clone(), namespace, &resource);
            let Ok(list) = api.list(&lp).await else {
                continue;
            };
            for item in list.items {
                let v = serde_json::to_value(&item).unwrap_or(Value::Null);
                if owned_by(&v, &uids) {
                    if let Some(u) = v["metadata"]["uid"].as_str() {
                        uids.insert(u.to_string());
                    }
                    let mut w = workload(&v, kind);
                    w["owner"] = json!(owner(&v));
                    shown.push(w);
                }
            }
        }
        let pods: Api<Pod> = Api::namespaced(self.cluster.client().clone(), namespace);
        if let Ok(list) = pods.list(&lp).await {
            let mut mine: Vec<Value> = list
                .items
                .iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .filter(|v| owned_by(v, &uids))
                .collect();
            mine.sort_by(|a, b| {
                a["metadata"]["name"]
                    .as_str()
                    .cmp(&b["metadata"]["name"].as_str())
            });
            for v in &mine {
                if let Some(u) = v["metadata"]["uid"].as_str() {
                    uids.insert(u.to_string());
                }
                let mut p = pod(v);
                p["owner"] = json!(owner(v));
                shown.push(p);
            }
        }
        (shown, uids)
    }

    /// The events of the objects `uids`, newest first.
    async fn events(&self, namespace: &str, uids: &HashSet<String>) -> Vec<Value> {
        let api: Api<Event> = Api::namespaced(self.cluster.client().clone(), namespace);
        let Ok(list) = api.list(&ListParams::default().limit(LIST_LIMIT)).await else {
            return Vec::new();
        };
        let mut events: Vec<Value> = list
            .items
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .filter(|e| {
                e["involvedObject"]["uid"]
                    .as_str()
                    .is_some_and(|u| uids.contains(u))
            })
            .map(|e| {
                let last = ["/lastTimestamp", "/eventTime", "/metadata/creationTimestamp"]
                    .iter()
                    .find_map(|p| e.pointer(p).and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_string();
                let o = &e["involvedObject"];
                json!({
                    "object": format!("{} {}", o["kind"].as_str().unwrap_or("?"), o["name"].as_str().unwrap_or("?")),
                    "type": e["type"],
                    "reason": e["reason"],
                    "message": e["message"],
                    "count": e["count"].as_u64().unwrap_or(1),
                    "last": last,
                })
            })
            .collect();
        // RFC 3339 in UTC sorts as text.
        events.sort_by(|a, b| b["last"].as_str().cmp(&a["last"].as_str()));
        events.truncate(EVENTS_SHOWN);
        events
    }
}

impl Inspect for Inspector {
    fn object<'a>(
        &'a self,
        spec: &'a str,
        object: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Value, InspectError>> {
        Box::pin(self.view(spec, object))
    }
}

/// Puts the change's diff and desired manifest into `view`, Secret values masked as
/// `driftless diff` masks them.
fn describe_change(view: &mut Value, d: &diff::ObjectDiff) {
    let desired = match &d.change {
        Change::Create { desired }
        | Change::Update { desired, .. }
        | Change::Replace { desired, .. } => Some(desired.clone()),
        Change::Error(e) => {
            view["diff_error"] = json!(e);
            None
        }
        Change::Unchanged | Change::Delete { .. } => None,
    };
    if let Some(mut desired) = desired {
        diff::mask_secrets(None, Some(&mut desired));
        view["desired"] = json!(yaml(&desired));
    }
    let text = diff::render_change(d, false);
    if !text.is_empty() && !matches!(d.change, Change::Error(_)) {
        view["diff"] = json!(text);
    }
}

fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot show as YAML: {e}\n"))
}

fn owned_by(v: &Value, uids: &HashSet<String>) -> bool {
    v["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r["uid"].as_str().is_some_and(|u| uids.contains(u)))
        })
}

/// What owns `v`, as the view names objects (`ReplicaSet web-5d4f`): its controller, else
/// its first owner. What draws a tree of them nests each under its owner.
fn owner(v: &Value) -> Option<String> {
    let refs = v["metadata"]["ownerReferences"].as_array()?;
    let r = refs
        .iter()
        .find(|r| r["controller"] == true)
        .or_else(|| refs.first())?;
    Some(format!("{} {}", r["kind"].as_str()?, r["name"].as_str()?))
}

/// A ReplicaSet or Job in a line: its ready (or succeeded) count of its wanted.
fn workload(v: &Value, kind: &str) -> Value {
    let s = &v["status"];
    let (ready, phase) = match kind {
        "Job" => (
            format!(
                "{} succeeded, {} failed",
                s["succeeded"].as_u64().unwrap_or(0),
                s["failed"].as_u64().unwrap_or(0)
            ),
            match s["conditions"].as_array().into_iter().flatten().find(|c| {
                c["status"] == "True" && (c["type"] == "Complete" || c["type"] == "Failed")
            }) {
                Some(c) => c["type"].as_str().unwrap_or_default().to_string(),
                None => "Running".into(),
            },
        ),
        _ => (
            format!(
                "{}/{}",
                s["readyReplicas"].as_u64().unwrap_or(0),
                v["spec"]["replicas"].as_u64().unwrap_or(0)
            ),
            String::new(),
        ),
    };
    json!({
        "object": format!("{kind} {}", v["metadata"]["name"].as_str().unwrap_or_default()),
        "phase": (!phase.is_empty()).then_some(phase),
        "ready": ready,
    })
}

/// A Pod in a line: phase, ready containers, restarts, what its containers do now and
/// how they last ended.
fn pod(v: &Value) -> Value {
    let statuses: Vec<&Value> = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|k| v["status"][k].as_array().into_iter().flatten())
        .collect();
    // As kubectl counts them: the containers, and the sidecars (init containers that
    // restart always, GA in 1.33), which run beside them for the Pod's life.
    let sidecars: BTreeSet<&str> = v["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str())
        .collect();
    let ready_in = |key: &str, only_sidecars: bool| {
        v["status"][key]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| !only_sidecars || c["name"].as_str().is_some_and(|n| sidecars.contains(n)))
            .filter(|c| c["ready"] == true)
            .count()
    };
    let ready = ready_in("containerStatuses", false) + ready_in("initContainerStatuses", true);
    let total = v["spec"]["containers"].as_array().map_or(0, Vec::len) + sidecars.len();
    let restarts: u64 = statuses
        .iter()
        .map(|c| c["restartCount"].as_u64().unwrap_or(0))
        .sum();
    let mut states = BTreeSet::new();
    let mut last = BTreeSet::new();
    for c in &statuses {
        let name = c["name"].as_str().unwrap_or("?");
        if let Some(w) = c["state"]["waiting"].as_object() {
            let reason = w.get("reason").and_then(Value::as_str).unwrap_or("Waiting");
            states.insert(format!("{name}: {reason}"));
        } else if let Some(t) = c["state"]["terminated"].as_object() {
            states.insert(format!("{name}: {}", ended(t)));
        }
        if let Some(t) = c["lastState"]["terminated"].as_object() {
            last.insert(format!("{name}: {}", ended(t)));
        }
    }
    json!({
        "object": format!("Pod {}", v["metadata"]["name"].as_str().unwrap_or_default()),
        "phase": v["status"]["phase"],
        "ready": format!("{ready}/{total}"),
        "restarts": restarts,
        "state": (!states.is_empty()).then(|| states.into_iter().collect::<Vec<_>>().join(", ")),
        "last_state": (!last.is_empty()).then(|| format!("last ended {}", last.into_iter().collect::<Vec<_>>().join(", "))),
    })
}

/// `Error (exit 1) at 2026-…`.
fn ended(t: &serde_json::Map<String, Value>) -> String {
    let reason = t
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("Terminated");
    let code = t.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
    match t.get("finishedAt").and_then(Value::as_str) {
        Some(at) => format!("{reason} (exit {code}) at {at}"),
        None => format!("{reason} (exit {code})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_object_names_its_controller() {
        let v = json!({"metadata": {"ownerReferences": [
            {"kind": "Node", "name": "n1"},
            {"kind": "ReplicaSet", "name": "web-5d4f", "controller": true},
        ]}});
        assert_eq!(owner(&v).as_deref(), Some("ReplicaSet web-5d4f"));
        assert_eq!(owner(&json!({"metadata": {}})), None);
    }

    #[test]
    fn a_crash_looping_pod_says_its_restarts_and_how_it_last_ended() {
        let p = json!({
            "metadata": {"name": "web-1"},
            "spec": {"containers": [{"name": "web"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "web", "ready": false, "restartCount": 5,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": "2026-01-01T00:00:00Z"}},
            }]},
        });
        assert_eq!(
            pod(&p),
            json!({"object": "Pod web-1", "phase": "Running", "ready": "0/1", "restarts": 5,
                   "state": "web: CrashLoopBackOff",
                   "last_state": "last ended web: Error (exit 1) at 2026-01-01T00:00:00Z"})
        );
    }

    #[test]
    fn a_sidecar_counts_as_a_running_container_and_a_finished_init_container_does_not() {
        let p = json!({
            "metadata": {"name": "web-1"},
            "spec": {"containers": [{"name": "web"}],
                     "initContainers": [{"name": "migrate"}, {"name": "proxy", "restartPolicy": "Always"}]},
            "status": {"phase": "Running",
                "initContainerStatuses": [
                    {"name": "migrate", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
                    {"name": "proxy", "ready": true, "restartCount": 0, "state": {"running": {}}}],
                "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
        });
        assert_eq!(pod(&p)["ready"], "2/2");
    }
}
