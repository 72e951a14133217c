//! Object identity across API versions, and the one order objects are applied in.

use serde::{Deserialize, Serialize};

/// A kind by its API group and name, as `ObjKey`s name it.
pub(crate) type GroupKind = (String, String);

/// Identity of an object across versions: group, kind, namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjKey {
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    /// Where this object goes in the apply order (prune goes in reverse).
    pub fn apply_phase(&self) -> u8 {
        apply_phase(&self.group, &self.kind)
    }

    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }

    /// Whether its (group, kind) is one of `kinds`.
    pub(crate) fn of_any(&self, kinds: &std::collections::BTreeSet<(String, String)>) -> bool {
        kinds.iter().any(|(g, k)| self.is(g, k))
    }
}

impl std::fmt::Display for ObjKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.kind)?;
        } else {
            write!(f, "{}.{}", self.kind, self.group)?;
        }
        if self.namespace.is_empty() {
            write!(f, " {}", self.name)
        } else {
            write!(f, " {}/{}", self.namespace, self.name)
        }
    }
}

/// `apiVersion` as (group, version); the core group is "".
pub(crate) fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// The API group of an `apiVersion` ("" for core).
pub(crate) fn group_of(api_version: &str) -> &str {
    split_api_version(api_version).0
}

/// Namespaces first, then CRDs, then everything else, so that what later objects need
/// exists when they are applied; prune deletes in the reverse order (custom resources
/// before their CRDs). The one ordering apply, render and prune share.
pub fn apply_phase(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, kind: &str, namespace: &str, name: &str) -> ObjKey {
        ObjKey {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn keys_display_as_kind_group_and_place() {
        assert_eq!(key("", "Pod", "dev", "a").to_string(), "Pod dev/a");
        assert_eq!(
            key("apps", "Deployment", "dev", "a").to_string(),
            "Deployment.apps dev/a"
        );
        assert_eq!(key("", "Namespace", "", "dev").to_string(), "Namespace dev");
    }

    #[test]
    fn api_versions_split_into_group_and_version() {
        assert_eq!(split_api_version("v1"), ("", "v1"));
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(group_of("infra.sealyun.com/v1"), "infra.sealyun.com");
    }

    #[test]
    fn namespaces_then_crds_then_the_rest() {
        let ns = key("", "Namespace", "", "a").apply_phase();
        let crd = key("apiextensions.k8s.io", "CustomResourceDefinition", "", "b").apply_phase();
        let cm = key("", "ConfigMap", "a", "c").apply_phase();
        let cr = key("infra.sealyun.com", "VirtulMachine", "a", "d").apply_phase();
        assert!(ns < crd && crd < cm && cm == cr);
    }
}
