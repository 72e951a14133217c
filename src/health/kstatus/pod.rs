//! Pods (kstatus core.go, with the deviations listed on [`super`]): phase, readiness,
//! containers stuck waiting, and how long a Pod may stay unschedulable.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::fields::{Condition, find_condition, lenient, lenient_str, non_empty, with_detail};
use super::{ObjectStatus, Outcome};

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

pub(super) fn pod(obj: &Value, conditions: &[Condition<'_>], now: Timestamp) -> Outcome {
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
        .filter_map(|field| match lenient(obj, &["status", field]) {
            Some(Value::Array(items)) => Some(items.iter()),
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
        let code = lenient(cs, &["lastState", "terminated", "exitCode"]).and_then(Value::as_i64);
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
    use super::super::testkit::{check, fixture, load, now};
    use super::super::{Status, compute};
    use serde_json::json;

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
    fn pod_unknown_phase_is_unknown() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "status": {"phase": "Unknown"}});
        let got = compute(Some(&pod), now());
        assert_eq!(got.status, Status::Unknown);
        assert_eq!(got.message, "Unknown pod phase \"Unknown\"");
    }
}
