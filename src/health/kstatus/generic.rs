//! kstatus's generic rules (checkGenericProperties / checkGeneration), which come before any
//! kind's own, and its fallback for kinds without rules of their own.

use serde_json::Value;

use super::fields::{Condition, non_empty, strict_int, strict_str};
use super::{ObjectStatus, Status};

/// Terminating once deleted; InProgress while the controller has not seen the latest
/// generation. `Err` on a wrongly typed field (kstatus's NestedString/NestedInt64).
pub(super) fn deletion_and_generation(
    obj: &Value,
    kind: &str,
) -> Result<Option<ObjectStatus>, String> {
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
pub(super) fn standard_conditions(conditions: &[Condition<'_>]) -> Option<ObjectStatus> {
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
pub(super) fn fallback(conditions: &[Condition<'_>]) -> ObjectStatus {
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

#[cfg(test)]
mod tests {
    use super::super::testkit::{check, fixture, load, now};
    use super::super::{Status, compute};
    use serde_json::json;

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
}
