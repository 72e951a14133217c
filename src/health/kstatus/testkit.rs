//! What the tests of every kind share: the fixtures (under `src/health/fixtures/kstatus`)
//! and one assertion on a fixture's whole status.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::{ObjectStatus, Status, compute};

/// Fixtures are dated around this instant.
pub(super) fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

pub(super) fn load(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

pub(super) fn check(fixture: &str, status: Status, reason: Option<&str>, message: &str) {
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

/// A fixture's text, by name.
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../fixtures/kstatus/", $name, ".json"))
    };
}
pub(super) use fixture;

/// `(name, text)` of each fixture named.
macro_rules! fixtures {
    ($($name:literal),* $(,)?) => {
        &[$(($name, fixture!($name))),*]
    };
}

/// Every fixture, for the whole-corpus tests.
pub(super) const ALL: &[(&str, &str)] = fixtures![
    "configmap",
    "crd-established",
    "crd-names-not-accepted",
    "crd-not-established",
    "daemonset-ready",
    "daemonset-rolling",
    "daemonset-unobserved",
    "deployment-available",
    "deployment-default-replicas",
    "deployment-progress-deadline-exceeded",
    "deployment-rolling",
    "deployment-scaled-to-zero",
    "generic-no-status",
    "generic-observed-generation-mismatch",
    "generic-ready-false",
    "generic-ready-true",
    "generic-reconciling",
    "generic-stalled",
    "job-complete",
    "job-failed",
    "job-running",
    "pdb",
    "pod-crashloop",
    "pod-failed",
    "pod-imagepullbackoff",
    "pod-init-errimagepull",
    "pod-pending",
    "pod-ready",
    "pod-running-not-ready",
    "pod-succeeded",
    "pod-terminating",
    "pod-unschedulable-fresh",
    "pod-unschedulable-old",
    "pvc-bound",
    "pvc-pending",
    "replicaset-available",
    "replicaset-scaling",
    "service-clusterip",
    "service-headless",
    "service-loadbalancer-pending",
    "service-loadbalancer-ready",
    "statefulset-partition",
    "statefulset-ready",
    "statefulset-updating",
];
