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

use std::fmt;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value};

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

/// How long a pod may be unschedulable before it counts as Failed (kstatus's ScheduleWindow).
const SCHEDULE_WINDOW: SignedDuration = SignedDuration::from_secs(15);

/// Container waiting reasons that will not clear up on their own.
const FATAL_WAITING_REASONS: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
];

/// `None` = the object does not exist → NotFound. `now` is used for time-based rules.
pub fn compute(obj: Option<&Value>, now: Timestamp) -> ObjectStatus {
    let Some(obj) = obj else {
        return ObjectStatus::new(Status::NotFound, None, "Resource not found");
    };
    match compute_existing(obj, now) {
        Ok(status) => status,
        Err(problem) => ObjectStatus::new(Status::Unknown, None, problem),
    }
}

/// Where kstatus would return an error, this returns `Err(message)` (→ Unknown).
type Outcome = Result<ObjectStatus, String>;

fn compute_existing(obj: &Value, now: Timestamp) -> Outcome {
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
    if let Some(status) = deletion_and_generation(obj, kind)? {
        return Ok(status);
    }
    let conditions = conditions(obj)?;
    if let Some(status) = standard_conditions(&conditions) {
        return Ok(status);
    }
    let group = lenient_str(obj, &["apiVersion"])
        .and_then(|v| v.rsplit_once('/'))
        .map(|(group, _)| group)
        .unwrap_or("");
    match (group, kind) {
        ("", "Service") => Ok(service(obj)),
        ("", "Pod") => pod(obj, &conditions, now),
        ("", "PersistentVolumeClaim") => Ok(pvc(obj)),
        ("", "Secret" | "ConfigMap") | ("batch", "CronJob") => {
            Ok(ObjectStatus::current("Resource is always ready"))
        }
        ("apps" | "extensions", "Deployment") => Ok(deployment(obj, &conditions)),
        ("apps" | "extensions", "ReplicaSet") => Ok(replicaset(obj, &conditions)),
        ("apps" | "extensions", "DaemonSet") => daemonset(obj, kind),
        ("apps", "StatefulSet") => Ok(statefulset(obj)),
        ("batch", "Job") => Ok(job(obj, &conditions)),
        ("policy", "PodDisruptionBudget") => Ok(ObjectStatus::current(
            "AllowedDisruptions has been computed.",
        )),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Ok(crd(&conditions)),
        _ => Ok(generic_fallback(&conditions)),
    }
}

// ---------------------------------------------------------------------------------------------
// Field access. kstatus's GetIntField/GetStringField fall back to a default on a missing or
// wrongly typed field; its NestedInt64/NestedString (used for the generation and deletion
// fields) and its condition decoding fail instead. Both flavours are here. JSON null counts as
// absent.

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Ok(None)` when the field (or an ancestor) is absent or null; `Err` when an ancestor is
/// not an object.
fn lookup<'a>(obj: &'a Value, path: &[&str]) -> Result<Option<&'a Value>, String> {
    let mut current = obj;
    for (depth, key) in path.iter().enumerate() {
        match current {
            Value::Object(map) => match map.get(*key) {
                None | Some(Value::Null) => return Ok(None),
                Some(next) => current = next,
            },
            other => {
                return Err(format!(
                    "{} is {}, expected an object",
                    path[..depth].join("."),
                    type_name(other)
                ));
            }
        }
    }
    Ok(Some(current))
}

fn lenient_int(obj: &Value, path: &[&str], default: i64) -> i64 {
    match lookup(obj, path) {
        Ok(Some(v)) => v.as_i64().unwrap_or(default),
        _ => default,
    }
}

fn lenient_str<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    match lookup(obj, path) {
        Ok(Some(v)) => v.as_str(),
        _ => None,
    }
}

fn strict_int(obj: &Value, path: &[&str]) -> Result<Option<i64>, String> {
    match lookup(obj, path)? {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            format!(
                "{} is {}, expected an integer",
                path.join("."),
                type_name(v)
            )
        }),
    }
}

fn strict_str<'a>(obj: &'a Value, path: &[&str]) -> Result<Option<&'a str>, String> {
    match lookup(obj, path)? {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .map(Some)
            .ok_or_else(|| format!("{} is {}, expected a string", path.join("."), type_name(v))),
    }
}

/// One entry of `status.conditions`; absent string fields are "".
#[derive(Debug, Clone, Copy)]
struct Condition<'a> {
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
    last_transition_time: Option<&'a str>,
}

/// Decodes `status.conditions` the way kstatus does (it fails on a malformed list).
fn conditions(obj: &Value) -> Result<Vec<Condition<'_>>, String> {
    let Some(list) = lookup(obj, &["status", "conditions"])? else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = list else {
        return Err(format!(
            "status.conditions is {}, expected an array",
            type_name(list)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(map) = item else {
                return Err(format!(
                    "status.conditions[{i}] is {}, expected an object",
                    type_name(item)
                ));
            };
            Ok(Condition {
                type_: condition_field(map, i, "type")?,
                status: condition_field(map, i, "status")?,
                reason: condition_field(map, i, "reason")?,
                message: condition_field(map, i, "message")?,
                last_transition_time: map.get("lastTransitionTime").and_then(Value::as_str),
            })
        })
        .collect()
}

fn condition_field<'a>(
    map: &'a Map<String, Value>,
    i: usize,
    key: &str,
) -> Result<&'a str, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "status.conditions[{i}].{key} is {}, expected a string",
            type_name(other)
        )),
    }
}

fn find_condition<'c, 'a>(
    conditions: &'c [Condition<'a>],
    type_: &str,
    status: &str,
) -> Option<&'c Condition<'a>> {
    conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
}

fn non_empty<'a>(s: &'a str, fallback: &'a str) -> &'a str {
    if s.is_empty() { fallback } else { s }
}

/// `base` followed by `": detail"` when there is a detail.
fn with_detail(base: impl Into<String>, detail: &str) -> String {
    let mut message = base.into();
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(detail);
    }
    message
}

// ---------------------------------------------------------------------------------------------
// Generic rules (kstatus checkGenericProperties / checkGeneration).

fn deletion_and_generation(obj: &Value, kind: &str) -> Result<Option<ObjectStatus>, String> {
    if let Some(ts) = strict_str(obj, &["metadata", "deletionTimestamp"])?
        && !ts.is_empty()
    {
        return Ok(Some(ObjectStatus::new(
            Status::Terminating,
            None,
            "Resource scheduled for deletion",
        )));
    }

    if let Some(generation) = strict_int(obj, &["metadata", "generation"])?
        && let Some(observed) = strict_int(obj, &["status", "observedGeneration"])?
        && observed != generation
    {
        return Ok(Some(ObjectStatus::in_progress(
            "LatestGenerationNotObserved",
            format!(
                "{kind} generation is {generation}, but latest observed generation is {observed}"
            ),
        )));
    }
    Ok(None)
}

/// kstatus's standard conditions: whichever of `Reconciling`/`Stalled` is True first decides.
fn standard_conditions(conditions: &[Condition<'_>]) -> Option<ObjectStatus> {
    conditions.iter().find_map(|c| match (c.type_, c.status) {
        ("Reconciling", "True") => Some(ObjectStatus::in_progress(
            non_empty(c.reason, "Reconciling"),
            non_empty(c.message, "Resource is reconciling"),
        )),
        ("Stalled", "True") => Some(ObjectStatus::failed(
            non_empty(c.reason, "Stalled"),
            non_empty(c.message, "Resource is stalled"),
        )),
        _ => None,
    })
}

/// Anything without type-specific rules: kstatus says Current; we also honour `Ready`.
fn generic_fallback(conditions: &[Condition<'_>]) -> ObjectStatus {
    match conditions.iter().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == "True" => {
            ObjectStatus::current(non_empty(c.message, "Resource is Ready"))
        }
        Some(c) => ObjectStatus::in_progress(
            non_empty(c.reason, "NotReady"),
            non_empty(c.message, "Resource is not Ready"),
        ),
        None => ObjectStatus::current("Resource is current"),
    }
}

// ---------------------------------------------------------------------------------------------
// Built-in kinds (kstatus core.go).

fn deployment(obj: &Value, conditions: &[Condition<'_>]) -> ObjectStatus {
    // Without progressDeadlineSeconds the controller never sets Progressing; kstatus treats
    // MaxInt32 (the controller's "unset") the same way.
    let mut progressing = lenient_int(
        obj,
        &["spec", "progressDeadlineSeconds"],
        i64::from(i32::MAX),
    ) == i64::from(i32::MAX);
    let mut available = false;
    for c in conditions {
        match c.type_ {
            "Progressing" => {
                if c.status == "False" && c.reason == "ProgressDeadlineExceeded" {
                    return ObjectStatus::failed(
                        "ProgressDeadlineExceeded",
                        with_detail("Progress deadline exceeded", c.message),
                    );
                }
                if c.status == "True" && c.reason == "NewReplicaSetAvailable" {
                    progressing = true;
                }
            }
            "Available" if c.status == "True" => available = true,
            _ => {}
        }
    }

    let spec = lenient_int(obj, &["spec", "replicas"], 1);
    let replicas = lenient_int(obj, &["status", "replicas"], 0);
    let updated = lenient_int(obj, &["status", "updatedReplicas"], 0);
    let ready = lenient_int(obj, &["status", "readyReplicas"], 0);
    let avail = lenient_int(obj, &["status", "availableReplicas"], 0);

    if spec == 0 && replicas == 0 && updated == 0 && ready == 0 && avail == 0 {
        return ObjectStatus::current("Deployment is scaled to zero. Replicas: 0");
    }
    if spec > replicas {
        return ObjectStatus::in_progress("LessReplicas", format!("Replicas: {replicas}/{spec}"));
    }
    if spec > updated {
        return ObjectStatus::in_progress("LessUpdated", format!("Updated: {updated}/{spec}"));
    }
    if replicas > spec {
        return ObjectStatus::in_progress(
            "ExtraPods",
            format!("Pending termination: {}", replicas.saturating_sub(spec)),
        );
    }
    if updated > avail {
        return ObjectStatus::in_progress("LessAvailable", format!("Available: {avail}/{updated}"));
    }
    if spec > ready {
        return ObjectStatus::in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if !progressing {
        return ObjectStatus::in_progress("ReplicaSetNotAvailable", "ReplicaSet not Available");
    }
    if !available {
        return ObjectStatus::in_progress("DeploymentNotAvailable", "Deployment not Available");
    }
    ObjectStatus::current(format!("Deployment is available. Replicas: {replicas}"))
}

fn replicaset(obj: &Value, conditions: &[Condition<'_>]) -> ObjectStatus {
    if find_condition(conditions, "ReplicaFailure", "True").is_some() {
        return ObjectStatus::in_progress(
            "ReplicaFailure",
            "Replica Failure condition. Check Pods",
        );
    }
    let spec = lenient_int(obj, &["spec", "replicas"], 1);
    let replicas = lenient_int(obj, &["status", "replicas"], 0);
    let ready = lenient_int(obj, &["status", "readyReplicas"], 0);
    let avail = lenient_int(obj, &["status", "availableReplicas"], 0);
    let labelled = lenient_int(obj, &["status", "fullyLabeledReplicas"], 0);

    if spec > labelled {
        return ObjectStatus::in_progress("LessLabelled", format!("Labelled: {labelled}/{spec}"));
    }
    if spec > avail {
        return ObjectStatus::in_progress("LessAvailable", format!("Available: {avail}/{spec}"));
    }
    if spec > ready {
        return ObjectStatus::in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if replicas > spec {
        return ObjectStatus::in_progress(
            "ExtraPods",
            format!("Pending termination: {}", replicas.saturating_sub(spec)),
        );
    }
    ObjectStatus::current(format!("ReplicaSet is available. Replicas: {replicas}"))
}

fn statefulset(obj: &Value) -> ObjectStatus {
    if lenient_str(obj, &["spec", "updateStrategy", "type"]) == Some("OnDelete") {
        return ObjectStatus::current("StatefulSet is using the ondelete update strategy");
    }
    let spec = lenient_int(obj, &["spec", "replicas"], 1);
    let ready = lenient_int(obj, &["status", "readyReplicas"], 0);
    let current = lenient_int(obj, &["status", "currentReplicas"], 0);
    let updated = lenient_int(obj, &["status", "updatedReplicas"], 0);
    let replicas = lenient_int(obj, &["status", "replicas"], 0);
    let partition = lenient_int(
        obj,
        &["spec", "updateStrategy", "rollingUpdate", "partition"],
        -1,
    );

    if spec > replicas {
        return ObjectStatus::in_progress("LessReplicas", format!("Replicas: {replicas}/{spec}"));
    }
    if spec > ready {
        return ObjectStatus::in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if replicas > spec {
        return ObjectStatus::in_progress(
            "ExtraPods",
            format!("Pending termination: {}", replicas.saturating_sub(spec)),
        );
    }
    if partition != -1 {
        let wanted = spec.saturating_sub(partition);
        if updated < wanted {
            return ObjectStatus::in_progress(
                "PartitionRollout",
                format!("updated: {updated}/{wanted}"),
            );
        }
        return ObjectStatus::current(format!("Partition rollout complete. updated: {updated}"));
    }
    if spec > current {
        return ObjectStatus::in_progress("LessCurrent", format!("current: {current}/{spec}"));
    }
    let current_revision = lenient_str(obj, &["status", "currentRevision"]).unwrap_or("");
    let update_revision = lenient_str(obj, &["status", "updateRevision"]).unwrap_or("");
    if current_revision != update_revision {
        return ObjectStatus::in_progress(
            "RevisionMismatch",
            "Waiting for updated revision to match current",
        );
    }
    ObjectStatus::current(format!(
        "All replicas scheduled as expected. Replicas: {replicas}"
    ))
}

fn daemonset(obj: &Value, kind: &str) -> Outcome {
    // The DaemonSet controller always sets these once it has seen the object.
    if strict_int(obj, &["metadata", "generation"])?.is_none() {
        return Ok(ObjectStatus::in_progress(
            "NoGeneration",
            format!("{kind} metadata.generation not found"),
        ));
    }
    if strict_int(obj, &["status", "observedGeneration"])?.is_none() {
        return Ok(ObjectStatus::in_progress(
            "NoObservedGeneration",
            format!("{kind} status.observedGeneration not found"),
        ));
    }
    let desired = lenient_int(obj, &["status", "desiredNumberScheduled"], -1);
    let current = lenient_int(obj, &["status", "currentNumberScheduled"], 0);
    let updated = lenient_int(obj, &["status", "updatedNumberScheduled"], 0);
    let avail = lenient_int(obj, &["status", "numberAvailable"], 0);
    let ready = lenient_int(obj, &["status", "numberReady"], 0);

    Ok(if desired == -1 {
        ObjectStatus::in_progress("NoDesiredNumber", "Missing .status.desiredNumberScheduled")
    } else if desired > current {
        ObjectStatus::in_progress("LessCurrent", format!("Current: {current}/{desired}"))
    } else if desired > updated {
        ObjectStatus::in_progress("LessUpdated", format!("Updated: {updated}/{desired}"))
    } else if desired > avail {
        ObjectStatus::in_progress("LessAvailable", format!("Available: {avail}/{desired}"))
    } else if desired > ready {
        ObjectStatus::in_progress("LessReady", format!("Ready: {ready}/{desired}"))
    } else {
        ObjectStatus::current(format!(
            "All replicas scheduled as expected. Replicas: {desired}"
        ))
    })
}

fn pvc(obj: &Value) -> ObjectStatus {
    match lenient_str(obj, &["status", "phase"]) {
        Some("Bound") => ObjectStatus::current("PVC is Bound"),
        Some(phase) if !phase.is_empty() => {
            ObjectStatus::in_progress(phase, format!("PVC is not Bound. phase: {phase}"))
        }
        _ => ObjectStatus::in_progress("NotBound", "PVC is not Bound. phase: unknown"),
    }
}

fn service(obj: &Value) -> ObjectStatus {
    if lenient_str(obj, &["spec", "type"]) != Some("LoadBalancer") {
        return ObjectStatus::current("Service is ready");
    }
    let ingress: Vec<&str> = match lookup(obj, &["status", "loadBalancer", "ingress"]) {
        Ok(Some(Value::Array(items))) => items
            .iter()
            .map(|i| {
                lenient_str(i, &["ip"])
                    .or_else(|| lenient_str(i, &["hostname"]))
                    .unwrap_or("")
            })
            .collect(),
        _ => Vec::new(),
    };
    if ingress.is_empty() {
        return ObjectStatus::in_progress(
            "NoIPAssigned",
            "LoadBalancer ingress not assigned. Service type: LoadBalancer",
        );
    }
    let addresses: Vec<&str> = ingress.into_iter().filter(|a| !a.is_empty()).collect();
    if addresses.is_empty() {
        ObjectStatus::current("Service is ready")
    } else {
        ObjectStatus::current(format!(
            "Service is ready. LoadBalancer ingress: {}",
            addresses.join(",")
        ))
    }
}

fn job(obj: &Value, conditions: &[Condition<'_>]) -> ObjectStatus {
    let parallelism = lenient_int(obj, &["spec", "parallelism"], 1);
    let completions = lenient_int(obj, &["spec", "completions"], parallelism);
    let succeeded = lenient_int(obj, &["status", "succeeded"], 0);
    let active = lenient_int(obj, &["status", "active"], 0);
    let failed = lenient_int(obj, &["status", "failed"], 0);

    for c in conditions {
        if c.status != "True" {
            continue;
        }
        match c.type_ {
            "Complete" => {
                return ObjectStatus::current(format!(
                    "Job Completed. succeeded: {succeeded}/{completions}"
                ));
            }
            "Failed" => {
                return ObjectStatus::failed(
                    non_empty(c.reason, "JobFailed"),
                    with_detail(
                        format!("Job Failed. failed: {failed}/{completions}"),
                        c.message,
                    ),
                );
            }
            // A suspended Job will not progress until someone resumes it.
            "Suspended" => return ObjectStatus::current("Job is suspended"),
            _ => {}
        }
    }
    if lenient_str(obj, &["status", "startTime"])
        .unwrap_or("")
        .is_empty()
    {
        return ObjectStatus::in_progress("JobNotStarted", "Job not started");
    }
    ObjectStatus::in_progress(
        "JobRunning",
        format!("Job in progress. succeeded: {succeeded}, active: {active}, failed: {failed}"),
    )
}

fn crd(conditions: &[Condition<'_>]) -> ObjectStatus {
    if let Some(c) = find_condition(conditions, "NamesAccepted", "False") {
        return ObjectStatus::failed(
            non_empty(c.reason, "NamesNotAccepted"),
            non_empty(c.message, "CRD names not accepted"),
        );
    }
    if find_condition(conditions, "Established", "True").is_some() {
        return ObjectStatus::current("CRD is established");
    }
    ObjectStatus::in_progress("NotEstablished", "Install in progress")
}

fn pod(obj: &Value, conditions: &[Condition<'_>], now: Timestamp) -> Outcome {
    let phase = lenient_str(obj, &["status", "phase"]).unwrap_or("");
    match phase {
        "Succeeded" => return Ok(ObjectStatus::current("Pod has completed successfully")),
        "Failed" => {
            let reason = lenient_str(obj, &["status", "reason"]).unwrap_or("");
            let message = lenient_str(obj, &["status", "message"]).unwrap_or("");
            return Ok(ObjectStatus::failed(
                non_empty(reason, "PodFailed"),
                with_detail("Pod has completed, but not successfully", message),
            ));
        }
        "Running" | "Pending" | "" => {}
        other => return Err(format!("Unknown pod phase {other:?}")),
    }

    if phase == "Running" && find_condition(conditions, "Ready", "True").is_some() {
        return Ok(ObjectStatus::current("Pod is Ready"));
    }
    if let Some(failure) = stuck_containers(obj) {
        return Ok(failure);
    }
    Ok(match phase {
        "Running" => {
            ObjectStatus::in_progress("PodRunningNotReady", "Pod is running but is not Ready")
        }
        "Pending" => match find_condition(conditions, "PodScheduled", "False") {
            Some(c) if c.reason == "Unschedulable" => unschedulable(obj, c, now),
            _ => ObjectStatus::in_progress("PodPending", "Pod is in the Pending phase"),
        },
        _ => ObjectStatus::in_progress("PodNotObserved", "Pod phase not available"),
    })
}

/// Unschedulable for longer than the window → Failed; the clock starts at the condition's
/// lastTransitionTime (else the pod's creationTimestamp; with neither there is no grace).
fn unschedulable(obj: &Value, c: &Condition<'_>, now: Timestamp) -> ObjectStatus {
    let since = c
        .last_transition_time
        .and_then(|t| t.parse::<Timestamp>().ok())
        .or_else(|| {
            lenient_str(obj, &["metadata", "creationTimestamp"])
                .and_then(|t| t.parse::<Timestamp>().ok())
        });
    match since {
        Some(since) if now.duration_since(since) <= SCHEDULE_WINDOW => ObjectStatus::in_progress(
            "PodNotScheduled",
            with_detail("Pod has not been scheduled", c.message),
        ),
        _ => ObjectStatus::failed(
            "Unschedulable",
            with_detail("Pod could not be scheduled", c.message),
        ),
    }
}

/// The first (init) container waiting for a reason that will not clear up by itself, with
/// every other container waiting for the same reason.
fn stuck_containers(obj: &Value) -> Option<ObjectStatus> {
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .into_iter()
        .filter_map(|field| match lookup(obj, &["status", field]) {
            Ok(Some(Value::Array(items))) => Some(items.iter()),
            _ => None,
        })
        .flatten();

    let mut found: Option<(&str, Vec<&str>, String)> = None;
    for cs in statuses {
        let Some(reason) = lenient_str(cs, &["state", "waiting", "reason"]) else {
            continue;
        };
        if !FATAL_WAITING_REASONS.contains(&reason) {
            continue;
        }
        let name = lenient_str(cs, &["name"]).unwrap_or("?");
        match &mut found {
            None => found = Some((reason, vec![name], container_detail(cs, reason))),
            Some((first, names, _)) if *first == reason => names.push(name),
            Some(_) => {}
        }
    }
    let (reason, names, detail) = found?;
    Some(ObjectStatus::failed(
        reason,
        with_detail(
            format!("Containers in {reason} state: {}", names.join(",")),
            &detail,
        ),
    ))
}

/// For a crash loop, how the container last ended; otherwise the kubelet's waiting message.
fn container_detail(cs: &Value, reason: &str) -> String {
    if reason == "CrashLoopBackOff" {
        let why = lenient_str(cs, &["lastState", "terminated", "reason"]).unwrap_or("");
        let code = match lookup(cs, &["lastState", "terminated", "exitCode"]) {
            Ok(Some(v)) => v.as_i64(),
            _ => None,
        };
        return match (why, code) {
            ("", None) => String::new(),
            ("", Some(code)) => format!("last exit code {code}"),
            (why, None) => format!("last terminated: {why}"),
            (why, Some(code)) => format!("last terminated: {why}, exit code {code}"),
        };
    }
    lenient_str(cs, &["state", "waiting", "message"])
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Fixtures are dated around this instant.
    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().unwrap()
    }

    fn load(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn check(fixture: &str, status: Status, reason: Option<&str>, message: &str) {
        let obj = load(fixture);
        let got = compute(Some(&obj), now());
        assert_eq!(
            got,
            ObjectStatus {
                status,
                reason: reason.map(str::to_string),
                message: message.to_string(),
            },
            "object: {obj:#}"
        );
    }

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("fixtures/kstatus/", $name, ".json"))
        };
    }

    /// Every fixture, for the whole-corpus tests below.
    const ALL: &[(&str, &str)] = &[
        ("configmap", fixture!("configmap")),
        ("crd-established", fixture!("crd-established")),
        ("crd-names-not-accepted", fixture!("crd-names-not-accepted")),
        ("crd-not-established", fixture!("crd-not-established")),
        ("daemonset-ready", fixture!("daemonset-ready")),
        ("daemonset-rolling", fixture!("daemonset-rolling")),
        ("daemonset-unobserved", fixture!("daemonset-unobserved")),
        ("deployment-available", fixture!("deployment-available")),
        (
            "deployment-default-replicas",
            fixture!("deployment-default-replicas"),
        ),
        (
            "deployment-progress-deadline-exceeded",
            fixture!("deployment-progress-deadline-exceeded"),
        ),
        ("deployment-rolling", fixture!("deployment-rolling")),
        (
            "deployment-scaled-to-zero",
            fixture!("deployment-scaled-to-zero"),
        ),
        ("generic-no-status", fixture!("generic-no-status")),
        (
            "generic-observed-generation-mismatch",
            fixture!("generic-observed-generation-mismatch"),
        ),
        ("generic-ready-false", fixture!("generic-ready-false")),
        ("generic-ready-true", fixture!("generic-ready-true")),
        ("generic-reconciling", fixture!("generic-reconciling")),
        ("generic-stalled", fixture!("generic-stalled")),
        ("job-complete", fixture!("job-complete")),
        ("job-failed", fixture!("job-failed")),
        ("job-running", fixture!("job-running")),
        ("pdb", fixture!("pdb")),
        ("pod-crashloop", fixture!("pod-crashloop")),
        ("pod-failed", fixture!("pod-failed")),
        ("pod-imagepullbackoff", fixture!("pod-imagepullbackoff")),
        ("pod-init-errimagepull", fixture!("pod-init-errimagepull")),
        ("pod-pending", fixture!("pod-pending")),
        ("pod-ready", fixture!("pod-ready")),
        ("pod-running-not-ready", fixture!("pod-running-not-ready")),
        ("pod-succeeded", fixture!("pod-succeeded")),
        ("pod-terminating", fixture!("pod-terminating")),
        (
            "pod-unschedulable-fresh",
            fixture!("pod-unschedulable-fresh"),
        ),
        ("pod-unschedulable-old", fixture!("pod-unschedulable-old")),
        ("pvc-bound", fixture!("pvc-bound")),
        ("pvc-pending", fixture!("pvc-pending")),
        ("replicaset-available", fixture!("replicaset-available")),
        ("replicaset-scaling", fixture!("replicaset-scaling")),
        ("service-clusterip", fixture!("service-clusterip")),
        ("service-headless", fixture!("service-headless")),
        (
            "service-loadbalancer-pending",
            fixture!("service-loadbalancer-pending"),
        ),
        (
            "service-loadbalancer-ready",
            fixture!("service-loadbalancer-ready"),
        ),
        ("statefulset-partition", fixture!("statefulset-partition")),
        ("statefulset-ready", fixture!("statefulset-ready")),
        ("statefulset-updating", fixture!("statefulset-updating")),
    ];

    // --- NotFound ---------------------------------------------------------------------------

    #[test]
    fn none_is_not_found() {
        let got = compute(None, now());
        assert_eq!(got.status, Status::NotFound);
        assert_eq!(got.reason, None);
        assert_eq!(got.message, "Resource not found");
    }

    // --- Deployment -------------------------------------------------------------------------

    #[test]
    fn deployment_available() {
        check(
            fixture!("deployment-available"),
            Status::Current,
            None,
            "Deployment is available. Replicas: 3",
        );
    }

    #[test]
    fn deployment_rolling() {
        check(
            fixture!("deployment-rolling"),
            Status::InProgress,
            Some("LessAvailable"),
            "Available: 1/3",
        );
    }

    #[test]
    fn deployment_progress_deadline_exceeded() {
        check(
            fixture!("deployment-progress-deadline-exceeded"),
            Status::Failed,
            Some("ProgressDeadlineExceeded"),
            "Progress deadline exceeded: ReplicaSet \"web-7d4b9c8f6\" has timed out progressing.",
        );
    }

    #[test]
    fn deployment_scaled_to_zero() {
        check(
            fixture!("deployment-scaled-to-zero"),
            Status::Current,
            None,
            "Deployment is scaled to zero. Replicas: 0",
        );
    }

    #[test]
    fn deployment_replicas_default_to_one() {
        check(
            fixture!("deployment-default-replicas"),
            Status::InProgress,
            Some("LessReplicas"),
            "Replicas: 0/1",
        );
    }

    // --- ReplicaSet / StatefulSet / DaemonSet -----------------------------------------------

    #[test]
    fn replicaset_available() {
        check(
            fixture!("replicaset-available"),
            Status::Current,
            None,
            "ReplicaSet is available. Replicas: 2",
        );
    }

    #[test]
    fn replicaset_scaling() {
        check(
            fixture!("replicaset-scaling"),
            Status::InProgress,
            Some("LessAvailable"),
            "Available: 1/2",
        );
    }

    #[test]
    fn statefulset_ready() {
        check(
            fixture!("statefulset-ready"),
            Status::Current,
            None,
            // The apiserver defaults partition to 0, so kstatus takes the partition branch.
            "Partition rollout complete. updated: 3",
        );
    }

    #[test]
    fn statefulset_updating() {
        check(
            fixture!("statefulset-updating"),
            Status::InProgress,
            Some("PartitionRollout"),
            "updated: 1/3",
        );
    }

    #[test]
    fn statefulset_without_partition_checks_revisions() {
        let mut obj = load(fixture!("statefulset-ready"));
        obj["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
        let got = compute(Some(&obj), now());
        assert_eq!(got.status, Status::Current);
        assert_eq!(
            got.message,
            "All replicas scheduled as expected. Replicas: 3"
        );

        obj["status"]["updateRevision"] = json!("db-84f5d6c7b9");
        let got = compute(Some(&obj), now());
        assert_eq!(got.status, Status::InProgress);
        assert_eq!(got.reason.as_deref(), Some("RevisionMismatch"));
        assert_eq!(got.message, "Waiting for updated revision to match current");

        obj["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        let got = compute(Some(&obj), now());
        assert_eq!(got.status, Status::Current);
        assert_eq!(
            got.message,
            "StatefulSet is using the ondelete update strategy"
        );
    }

    #[test]
    fn statefulset_partition() {
        check(
            fixture!("statefulset-partition"),
            Status::InProgress,
            Some("PartitionRollout"),
            "updated: 1/2",
        );
    }

    #[test]
    fn daemonset_ready() {
        check(
            fixture!("daemonset-ready"),
            Status::Current,
            None,
            "All replicas scheduled as expected. Replicas: 2",
        );
    }

    #[test]
    fn daemonset_rolling() {
        check(
            fixture!("daemonset-rolling"),
            Status::InProgress,
            Some("LessUpdated"),
            "Updated: 1/2",
        );
    }

    #[test]
    fn daemonset_unobserved() {
        check(
            fixture!("daemonset-unobserved"),
            Status::InProgress,
            Some("NoObservedGeneration"),
            "DaemonSet status.observedGeneration not found",
        );
    }

    // --- Pod --------------------------------------------------------------------------------

    #[test]
    fn pod_ready() {
        check(fixture!("pod-ready"), Status::Current, None, "Pod is Ready");
    }

    #[test]
    fn pod_running_not_ready() {
        check(
            fixture!("pod-running-not-ready"),
            Status::InProgress,
            Some("PodRunningNotReady"),
            "Pod is running but is not Ready",
        );
    }

    #[test]
    fn pod_crashloop() {
        check(
            fixture!("pod-crashloop"),
            Status::Failed,
            Some("CrashLoopBackOff"),
            "Containers in CrashLoopBackOff state: app: last terminated: Error, exit code 1",
        );
    }

    #[test]
    fn pod_imagepullbackoff() {
        check(
            fixture!("pod-imagepullbackoff"),
            Status::Failed,
            Some("ImagePullBackOff"),
            "Containers in ImagePullBackOff state: app: Back-off pulling image \"registry.example/app:nope\"",
        );
    }

    #[test]
    fn pod_init_container_errimagepull() {
        check(
            fixture!("pod-init-errimagepull"),
            Status::Failed,
            Some("ErrImagePull"),
            "Containers in ErrImagePull state: migrate: rpc error: code = NotFound desc = failed to pull and unpack image \"registry.example/migrate:nope\": not found",
        );
    }

    #[test]
    fn pod_pending() {
        check(
            fixture!("pod-pending"),
            Status::InProgress,
            Some("PodPending"),
            "Pod is in the Pending phase",
        );
    }

    #[test]
    fn pod_unschedulable_old() {
        check(
            fixture!("pod-unschedulable-old"),
            Status::Failed,
            Some("Unschedulable"),
            "Pod could not be scheduled: 0/3 nodes are available: 3 Insufficient cpu.",
        );
    }

    #[test]
    fn pod_unschedulable_fresh() {
        check(
            fixture!("pod-unschedulable-fresh"),
            Status::InProgress,
            Some("PodNotScheduled"),
            "Pod has not been scheduled: 0/3 nodes are available: 3 Insufficient cpu.",
        );
    }

    #[test]
    fn pod_unschedulable_window_boundary() {
        // The fresh fixture became unschedulable at 11:59:55; it is Failed once more than 15 s
        // have passed.
        let obj = load(fixture!("pod-unschedulable-fresh"));
        let at = |t: &str| compute(Some(&obj), t.parse().unwrap()).status;
        assert_eq!(at("2024-05-01T12:00:10Z"), Status::InProgress);
        assert_eq!(at("2024-05-01T12:00:11Z"), Status::Failed);
    }

    #[test]
    fn pod_succeeded() {
        check(
            fixture!("pod-succeeded"),
            Status::Current,
            None,
            "Pod has completed successfully",
        );
    }

    #[test]
    fn pod_failed() {
        check(
            fixture!("pod-failed"),
            Status::Failed,
            Some("Evicted"),
            "Pod has completed, but not successfully: The node was low on resource: memory.",
        );
    }

    #[test]
    fn pod_terminating() {
        check(
            fixture!("pod-terminating"),
            Status::Terminating,
            None,
            "Resource scheduled for deletion",
        );
    }

    #[test]
    fn terminating_wins_over_malformed_conditions() {
        let mut obj = load(fixture!("pod-terminating"));
        obj["status"]["conditions"] = json!("garbage");
        assert_eq!(compute(Some(&obj), now()).status, Status::Terminating);
    }

    #[test]
    fn pod_unknown_phase_is_unknown() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "status": {"phase": "Unknown"}});
        let got = compute(Some(&pod), now());
        assert_eq!(got.status, Status::Unknown);
        assert_eq!(got.message, "Unknown pod phase \"Unknown\"");
    }

    // --- Service / PVC ----------------------------------------------------------------------

    #[test]
    fn service_clusterip() {
        check(
            fixture!("service-clusterip"),
            Status::Current,
            None,
            "Service is ready",
        );
    }

    #[test]
    fn service_headless() {
        check(
            fixture!("service-headless"),
            Status::Current,
            None,
            "Service is ready",
        );
    }

    #[test]
    fn service_loadbalancer_pending() {
        check(
            fixture!("service-loadbalancer-pending"),
            Status::InProgress,
            Some("NoIPAssigned"),
            "LoadBalancer ingress not assigned. Service type: LoadBalancer",
        );
    }

    #[test]
    fn service_loadbalancer_ready() {
        check(
            fixture!("service-loadbalancer-ready"),
            Status::Current,
            None,
            "Service is ready. LoadBalancer ingress: 203.0.113.10",
        );
    }

    #[test]
    fn pvc_bound() {
        check(fixture!("pvc-bound"), Status::Current, None, "PVC is Bound");
    }

    #[test]
    fn pvc_pending() {
        check(
            fixture!("pvc-pending"),
            Status::InProgress,
            Some("Pending"),
            "PVC is not Bound. phase: Pending",
        );
    }

    // --- Job / CRD / PDB / always-ready ----------------------------------------------------

    #[test]
    fn job_complete() {
        check(
            fixture!("job-complete"),
            Status::Current,
            None,
            "Job Completed. succeeded: 1/1",
        );
    }

    #[test]
    fn job_failed() {
        check(
            fixture!("job-failed"),
            Status::Failed,
            Some("BackoffLimitExceeded"),
            "Job Failed. failed: 7/1: Job has reached the specified backoff limit",
        );
    }

    #[test]
    fn job_failed_without_reason() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                         "status": {"conditions": [{"type": "Failed", "status": "True"}]}});
        let got = compute(Some(&job), now());
        assert_eq!(got.status, Status::Failed);
        assert_eq!(got.reason.as_deref(), Some("JobFailed"));
        assert_eq!(got.message, "Job Failed. failed: 0/1");
    }

    #[test]
    fn job_running() {
        check(
            fixture!("job-running"),
            Status::InProgress,
            Some("JobRunning"),
            "Job in progress. succeeded: 2, active: 3, failed: 0",
        );
    }

    #[test]
    fn crd_established() {
        check(
            fixture!("crd-established"),
            Status::Current,
            None,
            "CRD is established",
        );
    }

    #[test]
    fn crd_not_established() {
        check(
            fixture!("crd-not-established"),
            Status::InProgress,
            Some("NotEstablished"),
            "Install in progress",
        );
    }

    #[test]
    fn crd_names_not_accepted() {
        check(
            fixture!("crd-names-not-accepted"),
            Status::Failed,
            Some("ConflictingNames"),
            "\"widgets\" is already in use",
        );
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

    // --- Generic ----------------------------------------------------------------------------

    #[test]
    fn generic_ready_true() {
        check(
            fixture!("generic-ready-true"),
            Status::Current,
            None,
            "Certificate is up to date and has not expired",
        );
    }

    #[test]
    fn generic_ready_false() {
        check(
            fixture!("generic-ready-false"),
            Status::InProgress,
            Some("DoesNotExist"),
            "Issuing certificate as Secret does not exist",
        );
    }

    #[test]
    fn generic_stalled() {
        check(
            fixture!("generic-stalled"),
            Status::Failed,
            Some("InvalidSpec"),
            "spec.size must be positive",
        );
    }

    #[test]
    fn generic_reconciling() {
        check(
            fixture!("generic-reconciling"),
            Status::InProgress,
            Some("Progressing"),
            "Creating 2 buckets",
        );
    }

    #[test]
    fn generic_observed_generation_mismatch() {
        check(
            fixture!("generic-observed-generation-mismatch"),
            Status::InProgress,
            Some("LatestGenerationNotObserved"),
            "Widget generation is 3, but latest observed generation is 2",
        );
    }

    #[test]
    fn generic_no_status() {
        check(
            fixture!("generic-no-status"),
            Status::Current,
            None,
            "Resource is current",
        );
    }

    #[test]
    fn generic_rules_come_before_kind_rules() {
        // A deployment that would be Current, but its controller has not seen generation 5.
        let mut obj = load(fixture!("deployment-available"));
        obj["metadata"]["generation"] = json!(5);
        let got = compute(Some(&obj), now());
        assert_eq!(got.status, Status::InProgress);
        assert_eq!(got.reason.as_deref(), Some("LatestGenerationNotObserved"));
        assert_eq!(
            got.message,
            "Deployment generation is 5, but latest observed generation is 4"
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

    // --- Robustness -------------------------------------------------------------------------

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

    fn replace_at(v: &mut Value, path: &[String], new: Value) {
        let mut cur = v;
        for key in path {
            cur = match cur {
                Value::Object(map) => map.get_mut(key).unwrap(),
                Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
                _ => unreachable!(),
            };
        }
        *cur = new;
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
                        replace_at(&mut v, path, odd);
                        v
                    })
                    .collect();
                if let Some((last, parent)) = path.split_last() {
                    let mut v = original.clone();
                    let mut cur = &mut v;
                    for key in parent {
                        cur = match cur {
                            Value::Object(map) => map.get_mut(key).unwrap(),
                            Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
                            _ => unreachable!(),
                        };
                    }
                    match cur {
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
