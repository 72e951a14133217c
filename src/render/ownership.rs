//! The labels and annotations that mark an object as driftless's (DESIGN §2). Prune and
//! adoption decisions read these; changing a key here orphans every object in the field.

use std::collections::BTreeMap;

use crate::spec::SpecId;

pub const MANAGER: &str = "driftless";
pub const DEFAULT_INSTANCE: &str = "default";

/// `app.kubernetes.io/managed-by: driftless`
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Which driftless instance owns the object: instances sharing a cluster never touch
/// each other's objects.
pub const INSTANCE: &str = "driftless.dev/instance";
/// Annotation: the spec identity `kind/namespace/name` the object was rendered from.
pub const SPEC: &str = "driftless.dev/spec";
pub const APP_NAME: &str = "app.kubernetes.io/name";
pub const APP_INSTANCE: &str = "app.kubernetes.io/instance";
/// On the Pods a `localservice` selects: the node they run on (as a label value), which
/// the per-node Services select on. Kept up to date by the daemon.
pub const NODE: &str = "localservice.driftless.dev/node";
/// Annotation on a per-node Service: the node's real name.
pub const NODE_NAME: &str = "localservice.driftless.dev/node-name";

/// The labels every object of `spec` carries.
pub fn labels(spec: &SpecId, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.to_string(), MANAGER.to_string()),
        (INSTANCE.to_string(), instance.to_string()),
    ])
    .into_iter()
    .chain(selector(spec))
    .collect()
}

/// The labels a workload's Pods carry and its Service selects on: unique per spec within
/// a namespace (the original operator shared one constant selector across instances).
pub fn selector(spec: &SpecId) -> BTreeMap<String, String> {
    BTreeMap::from([
        (APP_NAME.to_string(), spec.kind.as_str().to_string()),
        (APP_INSTANCE.to_string(), spec.name.clone()),
    ])
}

pub fn annotations(spec: &SpecId) -> BTreeMap<String, String> {
    BTreeMap::from([(SPEC.to_string(), spec.to_string())])
}
