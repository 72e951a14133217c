//! Readiness of a single object, ported from kstatus (sigs.k8s.io/cli-utils
//! `pkg/kstatus/status`): pure, object JSON in, [`ObjectStatus`] out.
//!
//! The order is kstatus's: generic rules first (deletion, observedGeneration, the
//! `Reconciling`/`Stalled` conditions), then rules for built-in kinds (by API group + kind),
//! then a generic fallback for everything else.
//!
//! Deliberate deviations from kstatus (so a sync can fail fast instead of waiting out a
//! timeout, and so "done" means done):
//! - Pod: a container or init container waiting with `CrashLoopBackOff`, `ImagePullBackOff`,
//!   `ErrImagePull`, `InvalidImageName` or `CreateContainerConfigError` is Failed (kstatus
//!   only knows CrashLoopBackOff, and only for Running pods); phase Failed is Failed (kstatus:
//!   Current); the 15 s grace for an unschedulable pod counts from the `PodScheduled`
//!   condition's `lastTransitionTime` (kstatus: creationTimestamp) against the `now` given.
//! - Deployment: `Progressing=False` with reason `ProgressDeadlineExceeded` is Failed (kstatus
//!   ignores the condition's status); `spec.replicas: 0` with an all-zero status is Current.
//! - Service: a LoadBalancer needs `status.loadBalancer.ingress` (kstatus: a clusterIP).
//! - PersistentVolumeClaim: the reason of a non-Bound claim is its phase.
//! - Job: a started but unfinished Job is InProgress (kstatus: Current).
//! - CustomResourceDefinition: `Established=False` is InProgress unless `NamesAccepted=False`.
//! - Generic objects: a `Ready` condition is honoured (True → Current, otherwise InProgress).
//! - An object without a kind, or that is not a JSON object, is Unknown.
//!
//! Where kstatus returns an error (malformed conditions, wrongly typed generation fields, an
//! unknown pod phase) the status is [`Status::Unknown`] with the problem as message. Nothing
//! here panics, whatever the input.

mod cel;
mod fields;
mod generic;
mod pod;
mod simple;
#[cfg(test)]
mod testkit;
mod workloads;

use std::fmt;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use fields::{conditions, lenient_str, type_name};

/// kstatus's status of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Status {
    /// Fully reconciled and ready.
    Current,
    /// Being reconciled; expected to become Current on its own.
    InProgress,
    /// Reconciliation failed or is stuck; will not become Current without a change.
    Failed,
    /// Being deleted.
    Terminating,
    /// Does not exist.
    NotFound,
    /// Could not be determined (malformed object).
    Unknown,
}

impl Status {
    /// The kstatus spelling ("Current", "InProgress", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Current => "Current",
            Status::InProgress => "InProgress",
            Status::Failed => "Failed",
            Status::Terminating => "Terminating",
            Status::NotFound => "NotFound",
            Status::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObjectStatus {
    pub status: Status,
    /// A short machine-friendly reason when there is one: e.g. "CrashLoopBackOff",
    /// "ImagePullBackOff", "ErrImagePull", "Unschedulable", "ProgressDeadlineExceeded",
    /// "LatestGenerationNotObserved", "NotEstablished", "JobFailed", "Stalled" ...
    pub reason: Option<String>,
    /// Human message, like kstatus's ("Deployment is available. Replicas: 3", "Available: 1/3", ...)
    pub message: String,
}

impl ObjectStatus {
    fn new(status: Status, reason: Option<&str>, message: impl Into<String>) -> Self {
        ObjectStatus {
            status,
            reason: reason.map(str::to_string),
            message: message.into(),
        }
    }

    fn current(message: impl Into<String>) -> Self {
        Self::new(Status::Current, None, message)
    }

    fn in_progress(reason: &str, message: impl Into<String>) -> Self {
        Self::new(Status::InProgress, Some(reason), message)
    }

    fn failed(reason: &str, message: impl Into<String>) -> Self {
        Self::new(Status::Failed, Some(reason), message)
    }
}

/// `None` = the object does not exist → NotFound. `now` is used for time-based rules.
pub fn compute(obj: Option<&Value>, now: Timestamp) -> ObjectStatus {
    compute_with(obj, now, None)
}

/// [`compute`], with the tree's `[[health]]` rule for the object's kind when it has one
/// (`cel`): asked once kstatus's own checks of deletion and observed generation
/// pass, in place of the conditions a custom resource may not have.
pub(crate) fn compute_with(
    obj: Option<&Value>,
    now: Timestamp,
    rule: Option<&crate::spec::settings::HealthRule>,
) -> ObjectStatus {
    let Some(obj) = obj else {
        return ObjectStatus::new(Status::NotFound, None, "Resource not found");
    };
    match compute_existing(obj, now, rule) {
        Ok(status) => status,
        Err(problem) => ObjectStatus::new(Status::Unknown, None, problem),
    }
}

/// Where kstatus would return an error, this returns `Err(message)` (→ Unknown).
type Outcome = Result<ObjectStatus, String>;

fn compute_existing(
    obj: &Value,
    now: Timestamp,
    rule: Option<&crate::spec::settings::HealthRule>,
) -> Outcome {
    if !obj.is_object() {
        return Err(format!(
            "Object is {}, expected a JSON object",
            type_name(obj)
        ));
    }
    let kind = lenient_str(obj, &["kind"]).unwrap_or("");
    if kind.is_empty() {
        return Err("Object has no kind".to_string());
    }
    if let Some(status) = generic::deletion_and_generation(obj, kind)? {
        return Ok(status);
    }
    if let Some(rule) = rule {
        return Ok(cel::judge(rule, obj));
    }
    let conditions = conditions(obj)?;
    if let Some(status) = generic::standard_conditions(&conditions) {
        return Ok(status);
    }
    let group = lenient_str(obj, &["apiVersion"])
        .and_then(|v| v.rsplit_once('/'))
        .map(|(group, _)| group)
        .unwrap_or("");
    match (group, kind) {
        ("", "Service") => Ok(simple::service(obj)),
        ("", "Pod") => pod::pod(obj, &conditions, now),
        ("", "PersistentVolumeClaim") => Ok(simple::pvc(obj)),
        ("", "Secret" | "ConfigMap") | ("batch", "CronJob") => {
            Ok(ObjectStatus::current("Resource is always ready"))
        }
        ("apps" | "extensions", "Deployment") => Ok(workloads::deployment(obj, &conditions)),
        ("apps" | "extensions", "ReplicaSet") => Ok(workloads::replicaset(obj, &conditions)),
        ("apps" | "extensions", "DaemonSet") => workloads::daemonset(obj, kind),
        ("apps", "StatefulSet") => Ok(workloads::statefulset(obj)),
        ("batch", "Job") => Ok(workloads::job(obj, &conditions)),
        ("policy", "PodDisruptionBudget") => Ok(ObjectStatus::current(
            "AllowedDisruptions has been computed.",
        )),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Ok(simple::crd(&conditions)),
        _ => Ok(generic::fallback(&conditions)),
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::{ALL, check, fixture, load, now};
    use super::*;
    use serde_json::json;

    #[test]
    fn none_is_not_found() {
        let got = compute(None, now());
        assert_eq!(got.status, Status::NotFound);
        assert_eq!(got.reason, None);
        assert_eq!(got.message, "Resource not found");
    }

    #[test]
    fn pdb() {
        check(
            fixture!("pdb"),
            Status::Current,
            None,
            "AllowedDisruptions has been computed.",
        );
    }

    #[test]
    fn configmap() {
        check(
            fixture!("configmap"),
            Status::Current,
            None,
            "Resource is always ready",
        );
    }

    #[test]
    fn status_serializes_as_kstatus_strings() {
        let got = compute(Some(&load(fixture!("deployment-rolling"))), now());
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            json!({"status": "InProgress", "reason": "LessAvailable", "message": "Available: 1/3"})
        );
        for s in [
            Status::Current,
            Status::InProgress,
            Status::Failed,
            Status::Terminating,
            Status::NotFound,
            Status::Unknown,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
            assert_eq!(s.to_string(), s.as_str());
        }
    }

    #[test]
    fn fixtures_are_not_unknown() {
        for (name, text) in ALL {
            let got = compute(Some(&load(text)), now());
            assert_ne!(got.status, Status::Unknown, "{name}: {got:?}");
            assert!(!got.message.is_empty(), "{name}: {got:?}");
        }
    }

    #[test]
    fn malformed_shapes() {
        let cases = [
            (json!(null), Status::Unknown),
            (json!("Pod"), Status::Unknown),
            (json!([1, 2]), Status::Unknown),
            (json!({}), Status::Unknown),
            (
                json!({"apiVersion": "v1", "kind": "Pod", "status": "Running"}),
                Status::Unknown,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "status": {"conditions": {"type": "Available"}}}),
                Status::Unknown,
            ),
            (
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "status": {"conditions": ["Ready"]}}),
                Status::Unknown,
            ),
            (
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "status": {"conditions": [{"type": "Ready", "status": true}]}}),
                Status::Unknown,
            ),
            (
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"generation": "2"}, "status": {"observedGeneration": 2}}),
                Status::Unknown,
            ),
            (
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"deletionTimestamp": 5}}),
                Status::Unknown,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": "web",
                       "spec": {"replicas": "3"}}),
                Status::Unknown,
            ),
            // Wrongly typed counters fall back to their defaults, as kstatus's GetIntField.
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "spec": {"replicas": "3"},
                       "status": {"replicas": "3", "updatedReplicas": "3",
                                  "readyReplicas": 3.5, "availableReplicas": "x"}}),
                Status::InProgress,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": "x",
                       "status": {"replicas": [], "readyReplicas": {}}}),
                Status::InProgress,
            ),
            (
                json!({"apiVersion": "v1", "kind": "Pod",
                       "status": {"phase": "Running", "containerStatuses": "nope"}}),
                Status::InProgress,
            ),
            (
                json!({"apiVersion": "v1", "kind": "Pod",
                       "status": {"phase": "Pending",
                                  "initContainerStatuses": [null, 1, {"state": "x"},
                                      {"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
                Status::Failed,
            ),
            (json!({"kind": "Widget", "status": null}), Status::Current),
        ];
        for (obj, want) in cases {
            let got = compute(Some(&obj), now());
            assert_eq!(got.status, want, "{obj}: {got:?}");
            assert!(!got.message.is_empty(), "{obj}: {got:?}");
        }
    }

    /// Values that break naive code: wrong types, extremes, empties.
    fn odd_values() -> Vec<Value> {
        vec![
            json!(null),
            json!(true),
            json!("x"),
            json!(""),
            json!("2024-05-01T11:59:59Z"),
            json!(-1),
            json!(0),
            json!(1.5),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!([]),
            json!([null, "x", {}]),
            json!({}),
            json!({"type": "Ready", "status": "True"}),
        ]
    }

    /// Every path to every value in `v` (object keys and array indices).
    fn paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(prefix.clone());
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    prefix.push(k.clone());
                    paths(child, prefix, out);
                    prefix.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    prefix.push(i.to_string());
                    paths(child, prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }

    /// The value at `path`, one of those [`paths`] found.
    fn at_mut<'v>(v: &'v mut Value, path: &[String]) -> &'v mut Value {
        let mut cur = v;
        for key in path {
            cur = match cur {
                Value::Object(map) => map.get_mut(key).unwrap(),
                Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
                _ => unreachable!(),
            };
        }
        cur
    }

    /// Property: for every fixture, replacing any single subtree with any odd value (or
    /// deleting it) never panics and always yields a message; also at extreme `now`s.
    #[test]
    fn mutated_fixtures_never_panic() {
        let nows = [now(), Timestamp::MIN, Timestamp::MAX];
        let mut runs = 0usize;
        for (name, text) in ALL {
            let original = load(text);
            let mut all = Vec::new();
            paths(&original, &mut Vec::new(), &mut all);
            for path in &all {
                let mut variants: Vec<Value> = odd_values()
                    .into_iter()
                    .map(|odd| {
                        let mut v = original.clone();
                        *at_mut(&mut v, path) = odd;
                        v
                    })
                    .collect();
                if let Some((last, parent)) = path.split_last() {
                    let mut v = original.clone();
                    match at_mut(&mut v, parent) {
                        Value::Object(map) => {
                            map.remove(last);
                        }
                        Value::Array(items) => {
                            items.remove(last.parse::<usize>().unwrap());
                        }
                        _ => unreachable!(),
                    }
                    variants.push(v);
                }
                for v in &variants {
                    for t in nows {
                        let got = compute(Some(v), t);
                        assert!(!got.message.is_empty(), "{name} at {path:?}: {got:?}");
                        runs += 1;
                    }
                }
            }
        }
        assert!(runs > 10_000, "only {runs} runs");
    }
}
