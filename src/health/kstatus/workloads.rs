//! Workload kinds (kstatus core.go): Deployment, ReplicaSet, StatefulSet, DaemonSet, Job.

use serde_json::Value;

use super::fields::{
    Condition, find_condition, lenient_int, lenient_str, non_empty, strict_int, with_detail,
};
use super::{ObjectStatus, Outcome};

pub(super) fn deployment(obj: &Value, conditions: &[Condition<'_>]) -> ObjectStatus {
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
        return extra_pods(replicas, spec);
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

pub(super) fn replicaset(obj: &Value, conditions: &[Condition<'_>]) -> ObjectStatus {
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
        return extra_pods(replicas, spec);
    }
    ObjectStatus::current(format!("ReplicaSet is available. Replicas: {replicas}"))
}

pub(super) fn statefulset(obj: &Value) -> ObjectStatus {
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
        return extra_pods(replicas, spec);
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

pub(super) fn daemonset(obj: &Value, kind: &str) -> Outcome {
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

pub(super) fn job(obj: &Value, conditions: &[Condition<'_>]) -> ObjectStatus {
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

/// More Pods than wanted: the extra ones are still terminating.
fn extra_pods(replicas: i64, spec: i64) -> ObjectStatus {
    ObjectStatus::in_progress(
        "ExtraPods",
        format!("Pending termination: {}", replicas.saturating_sub(spec)),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{check, fixture, load, now};
    use super::super::{Status, compute};
    use serde_json::json;

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

    /// A 1.31+ Job controller says `SuccessCriteriaMet` (or `FailureTarget`) first, while
    /// its Pods may still terminate, and `Complete` (`Failed`) only once they have: a hook
    /// or a wave waits for the last word.
    #[test]
    fn job_with_only_the_early_condition_is_still_running() {
        for early in ["SuccessCriteriaMet", "FailureTarget"] {
            let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                             "status": {"startTime": "2024-05-01T11:30:00Z", "active": 1,
                                        "conditions": [{"type": early, "status": "True"}]}});
            let got = compute(Some(&job), now());
            assert_eq!(got.status, Status::InProgress, "{early}: {got:?}");
            assert_eq!(got.reason.as_deref(), Some("JobRunning"), "{early}");
        }
        let done = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                          "status": {"startTime": "2024-05-01T11:30:00Z", "succeeded": 1,
                                     "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                                    {"type": "Complete", "status": "True"}]}});
        assert_eq!(compute(Some(&done), now()).status, Status::Current);
        let failed = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                            "status": {"startTime": "2024-05-01T11:30:00Z", "failed": 1,
                                       "conditions": [{"type": "FailureTarget", "status": "True"},
                                                      {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}});
        assert_eq!(compute(Some(&failed), now()).status, Status::Failed);
    }
}
