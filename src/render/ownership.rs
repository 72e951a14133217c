//! The labels and annotations rendering puts on every object, from the marks in
//! `object::ownership` (re-exported here, where rendering code looks for them).

use std::collections::BTreeMap;

pub use crate::object::ownership::*;
use crate::spec::SpecId;

/// The labels every object a driftless kind renders carries: the instance mark and the
/// workload's selector.
pub fn labels(spec: &SpecId, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(INSTANCE.to_string(), instance.to_string())])
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
