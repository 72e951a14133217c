//! Readiness, pure: live objects → per-object status (kstatus rules) → per-spec status
//! and the figures each kind reports.

pub mod kstatus;
mod memo;
mod view;

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

pub use kstatus::{ObjectStatus, Status};
pub use memo::Judged;
pub use view::readiness_view;
pub(crate) use view::readiness_view_of_text;

use crate::object::{ObjKey, Observed, Packed};
use crate::render::{Object, ownership};
use crate::spec::{Spec, SpecBody, SpecId};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectHealth {
    pub object: String,
    #[serde(flatten)]
    pub status: ObjectStatus,
}

/// What each kind reports beyond readiness (docs/src/daemon.md, the status file: `figures`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Figures {
    Workspace {
        state: String,
        phase: Option<String>,
        node: Option<String>,
        pod_ip: Option<String>,
        port: u16,
        url: String,
    },
    #[serde(rename = "elasticweb")]
    ElasticWeb {
        desired_replicas: u64,
        available_replicas: u64,
        /// Observed: available replicas × single-pod-qps.
        real_qps: u64,
    },
    #[serde(rename = "localservice")]
    LocalService {
        nodes: Vec<String>,
        ready_endpoints: BTreeMap<String, usize>,
    },
    Manifest {},
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecHealth {
    pub id: String,
    /// Current (ready), InProgress or Failed.
    pub status: Status,
    pub ready: bool,
    /// The first failing (or waiting) object's reason: CrashLoopBackOff, Unschedulable...
    pub reason: Option<String>,
    pub message: String,
    pub figures: Figures,
    pub objects: Vec<ObjectHealth>,
}

/// What readiness needs of a rendered object: which object it is and its spec, not its
/// body (the daemon keeps these for every object between syncs).
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub spec: SpecId,
    pub api_version: String,
    pub key: ObjKey,
    /// `Kind[.group] namespace/name`.
    pub display: String,
    /// A localservice's per-node Service: the node it serves.
    pub node: Option<String>,
    /// The replicas the object asks for, where it sets them: a change through the scale
    /// subresource moves no field ownership before Kubernetes 1.22, so it is drift only
    /// this value shows.
    pub replicas: Option<i64>,
    /// The tree's `[[health]]` rule for its kind, if any.
    pub rule: Option<std::sync::Arc<crate::spec::settings::HealthRule>>,
}

impl Expected {
    pub fn of(obj: &Object) -> Expected {
        let marks = Marks::of(&obj.body);
        Expected {
            spec: obj.spec.clone(),
            api_version: obj.api_version.clone(),
            key: obj.key(),
            display: obj.display_ref(),
            node: marks.node,
            // Replicas someone else owns (ignored, or a create-only object's) are no drift.
            replicas: marks
                .replicas
                .filter(|_| !obj.policy.leaves("/spec/replicas")),
            rule: obj.policy.health.clone(),
        }
    }
}

/// What `Expected` reads of a rendered body. Every object's is read after every sync, so
/// only these fields are read back (serde skips the rest without building it); a body
/// whose fields are not of the usual shapes is read whole.
#[derive(Debug, PartialEq)]
struct Marks {
    node: Option<String>,
    replicas: Option<i64>,
}

impl Marks {
    fn of(body: &Packed) -> Marks {
        #[derive(serde::Deserialize)]
        struct Body {
            #[serde(default)]
            metadata: Option<Meta>,
            #[serde(default)]
            spec: Option<Spec>,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(default)]
            annotations: Option<BTreeMap<String, Value>>,
        }
        #[derive(serde::Deserialize)]
        struct Spec {
            #[serde(default)]
            replicas: Option<Value>,
        }
        match serde_json::from_str::<Body>(body.text()) {
            Ok(b) => Marks {
                node: b
                    .metadata
                    .and_then(|m| m.annotations?.remove(ownership::NODE_NAME))
                    .and_then(|v| v.as_str().map(str::to_string)),
                replicas: b.spec.and_then(|s| s.replicas?.as_i64()),
            },
            Err(_) => Marks::whole(&body.value()),
        }
    }

    /// The same fields read from the whole body.
    fn whole(body: &Value) -> Marks {
        Marks {
            node: body["metadata"]["annotations"][ownership::NODE_NAME]
                .as_str()
                .map(str::to_string),
            replicas: body.pointer("/spec/replicas").and_then(Value::as_i64),
        }
    }
}

/// `Expected::of` each object readiness is judged on.
pub fn expected(objects: &[Object]) -> Vec<Expected> {
    // Sized up front: grown by doubling, 20,000 expectations took 7.75 MiB, not 4.6.
    let mut out = Vec::with_capacity(objects.len());
    out.extend(objects.iter().filter(|o| judged(o)).map(Expected::of));
    out
}

/// Whether `expected(objects)` is `current`, each made only to be compared: a resync
/// renders the same objects, and made whole the list stood beside the one it equals.
pub(crate) fn expected_is(current: &[Expected], objects: &[Object]) -> bool {
    let mut made = objects.iter().filter(|o| judged(o)).map(Expected::of);
    current.iter().all(|e| made.next().is_some_and(|m| m == *e)) && made.next().is_none()
}

/// Whether a spec's readiness counts this object: not a hook, which is a run (waited
/// for as it runs, often deleted after), not part of the desired state.
pub fn judged(obj: &Object) -> bool {
    obj.policy.hook.is_none()
}

/// The health of one spec from the live state of its objects.
pub(crate) fn spec_health(
    spec: &Spec,
    objects: &[&Expected],
    observed: &Observed,
    now: Timestamp,
) -> SpecHealth {
    // Unpacked one spec at a time: the whole tree's live objects as values would be
    // several times the size of the cache.
    let lives: Vec<(&Expected, Option<Value>)> = objects
        .iter()
        .map(|o| (*o, observed.objects.get(&o.key).map(|s| s.view.value())))
        .collect();
    let mut statuses: Vec<ObjectHealth> = lives
        .iter()
        .map(|(o, live)| ObjectHealth {
            object: o.display.clone(),
            status: kstatus::compute_with(live.as_ref(), now, o.rule.as_deref()),
        })
        .collect();

    // A workload's Pods say why it is not progressing (CrashLoopBackOff, ImagePullBackOff,
    // Unschedulable); the Deployment itself only says "Available: 0/3". The Deployment's
    // own row takes its first failing Pod's verdict, so the spec's reason and its objects'
    // states never disagree (a spec Failed beside its only object "In progress").
    for (health, (o, _)) in statuses.iter_mut().zip(&lives) {
        if o.key.kind != "Deployment" || health.status.status == Status::Current {
            continue;
        }
        let pod_failure = observed
            .pods
            .get(&o.key)
            .into_iter()
            .flatten()
            .find_map(|pod| {
                let status = kstatus::compute(Some(pod), now);
                (status.status == Status::Failed).then_some((pod, status))
            });
        if let Some((pod, pod_status)) = pod_failure {
            // The Pod is in the Deployment's namespace: its name alone.
            let message = format!(
                "Pod {}: {} ({})",
                pod["metadata"]["name"].as_str().unwrap_or_default(),
                pod_status.message,
                health.status.message
            );
            health.status = ObjectStatus {
                message,
                ..pod_status
            };
        }
    }
    let failed = statuses.iter().find(|s| s.status.status == Status::Failed);
    let waiting = statuses.iter().find(|s| s.status.status != Status::Current);
    let (status, reason, message) = match (failed, waiting) {
        (Some(f), _) => (
            Status::Failed,
            f.status.reason.clone(),
            format!("{}: {}", f.object, f.status.message),
        ),
        (None, Some(w)) => (
            Status::InProgress,
            w.status.reason.clone(),
            format!("{}: {}", w.object, w.status.message),
        ),
        (None, None) if statuses.is_empty() => {
            (Status::Current, None, "no objects to run".to_string())
        }
        (None, None) => (Status::Current, None, "ready".to_string()),
    };

    let figures = match &spec.body {
        SpecBody::Workspace(w) => {
            let pod = lives
                .iter()
                .find(|(o, _)| o.key.kind == "Pod")
                .and_then(|(_, l)| l.as_ref());
            let text = |v: Option<&Value>, ptr: &str| {
                v.and_then(|p| p.pointer(ptr))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            Figures::Workspace {
                state: format!("{:?}", w.state).to_lowercase(),
                phase: text(pod, "/status/phase"),
                node: text(pod, "/spec/nodeName"),
                pod_ip: text(pod, "/status/podIP"),
                port: w.port,
                url: format!(
                    "http://{}.{}.svc.cluster.local:{}",
                    spec.id.name, spec.id.namespace, w.port
                ),
            }
        }
        SpecBody::ElasticWeb(e) => {
            let available = lives
                .iter()
                .find(|(o, _)| o.key.kind == "Deployment")
                .and_then(|(_, l)| {
                    l.as_ref()
                        .and_then(|d| d.pointer("/status/availableReplicas"))
                        .and_then(Value::as_u64)
                })
                .unwrap_or(0);
            Figures::ElasticWeb {
                desired_replicas: e.replicas(),
                available_replicas: available,
                real_qps: available.saturating_mul(e.single_pod_qps),
            }
        }
        SpecBody::LocalService(_) => {
            let mut nodes = Vec::new();
            let mut ready_endpoints = BTreeMap::new();
            for (o, _) in lives.iter().filter(|(o, _)| o.key.kind == "Service") {
                let node = o.node.clone().unwrap_or_else(|| o.key.name.clone());
                let ready = observed
                    .endpoints
                    .get(&(o.key.namespace.clone(), o.key.name.clone()))
                    .map(Packed::value)
                    .and_then(|ep| {
                        ep["subsets"].as_array().map(|subsets| {
                            subsets
                                .iter()
                                .map(|s| s["addresses"].as_array().map_or(0, Vec::len))
                                .sum()
                        })
                    })
                    .unwrap_or(0);
                ready_endpoints.insert(node.clone(), ready);
                nodes.push(node);
            }
            Figures::LocalService {
                nodes,
                ready_endpoints,
            }
        }
        SpecBody::Manifest(_) => Figures::Manifest {},
    };

    SpecHealth {
        id: spec.id.to_string(),
        ready: status == Status::Current,
        status,
        reason,
        message,
        figures,
        objects: statuses,
    }
}

/// Every spec's health, in tree order.
pub fn tree_health(
    specs: &[Spec],
    objects: &[Expected],
    observed: &Observed,
    now: Timestamp,
) -> Vec<SpecHealth> {
    memo::judge(None, specs, objects, observed, now)
        .into_iter()
        .map(std::sync::Arc::unwrap_or_clone)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expectations_compared_one_at_a_time_say_what_the_whole_list_would() {
        let text = "namespace = \"shop\"\n[elasticweb.web]\nimage = \"nginx\"\n\
                    single-pod-qps = 100\ntotal-qps = 100\n";
        let files = [crate::spec::SourceFile {
            path: "web.toml".into(),
            contents: text.as_bytes().to_vec(),
        }];
        let tree = crate::spec::parse_files(&files).expect("valid specs");
        let objects = crate::render::render(&tree, &crate::render::Facts::default())
            .expect("the specs render");
        assert_eq!(objects.len(), 2);
        let current = expected(&objects);
        assert!(expected_is(&current, &objects));
        // One object fewer, one more, or one of them named otherwise: not the same.
        assert!(!expected_is(&current, &objects[..1]));
        assert!(!expected_is(&current[..1], &objects));
        let mut renamed = objects.clone();
        renamed[1].name = "other".into();
        assert!(!expected_is(&current, &renamed));
        // A hook is no expectation: it neither adds to the list nor is compared.
        let mut hooked = objects.clone();
        hooked.push(Object {
            policy: std::sync::Arc::new(crate::spec::ObjectPolicy {
                hook: Some(crate::spec::order::Hook {
                    phases: vec![crate::spec::order::Phase::Pre],
                    weight: 0,
                    delete_succeeded: false,
                    delete_failed: false,
                    delete_before: true,
                    written: "argocd.argoproj.io/hook: PreSync".into(),
                }),
                ..(*objects[0].policy).clone()
            }),
            ..objects[0].clone()
        });
        assert!(expected_is(&current, &hooked));
    }

    #[test]
    fn the_marks_of_a_body_read_as_the_whole_body_says_whatever_its_shape() {
        let bodies = [
            json!({"metadata": {"name": "a", "annotations": {(ownership::NODE_NAME): "n1", "x": 1}},
                   "spec": {"replicas": 3, "template": {"spec": {}}}}),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
            json!({"metadata": {"annotations": null}, "spec": {"replicas": "3"}}),
            json!({"metadata": {"annotations": [1, 2]}, "spec": "a string"}),
            json!({"metadata": {"annotations": {(ownership::NODE_NAME): 7}}, "spec": {"replicas": 2.5}}),
            json!({"metadata": null, "spec": null}),
            json!("not an object"),
        ];
        for body in &bodies {
            assert_eq!(Marks::of(&Packed::new(body)), Marks::whole(body), "{body}");
        }
        assert_eq!(
            Marks::of(&Packed::new(&bodies[0])),
            Marks {
                node: Some("n1".into()),
                replicas: Some(3)
            }
        );
    }
}
