//! Kinds whose readiness is one field or condition (kstatus core.go): Service,
//! PersistentVolumeClaim, CustomResourceDefinition.

use serde_json::Value;

use super::ObjectStatus;
use super::fields::{Condition, find_condition, lenient, lenient_str, non_empty};

pub(super) fn pvc(obj: &Value) -> ObjectStatus {
    match lenient_str(obj, &["status", "phase"]) {
        Some("Bound") => ObjectStatus::current("PVC is Bound"),
        Some(phase) if !phase.is_empty() => {
            ObjectStatus::in_progress(phase, format!("PVC is not Bound. phase: {phase}"))
        }
        _ => ObjectStatus::in_progress("NotBound", "PVC is not Bound. phase: unknown"),
    }
}

pub(super) fn service(obj: &Value) -> ObjectStatus {
    if lenient_str(obj, &["spec", "type"]) != Some("LoadBalancer") {
        return ObjectStatus::current("Service is ready");
    }
    let ingress: Vec<&str> = match lenient(obj, &["status", "loadBalancer", "ingress"]) {
        Some(Value::Array(items)) => items
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

pub(super) fn crd(conditions: &[Condition<'_>]) -> ObjectStatus {
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

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::super::testkit::{check, fixture};

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
}
