//! API versions Kubernetes no longer serves. A manifest that names one cannot be applied
//! to any cluster driftless supports (1.34 and newer are tested; the table reaches back to
//! 1.16), so `validate` refuses it with no cluster, naming the release that removed it and
//! what to use instead: what teams run pluto or kubent for.
//!
//! Only Kubernetes' own groups are listed: a custom resource's versions are its CRD's to
//! say, and an apiserver that lacks them answers for itself.

/// A kind at an API version that a Kubernetes release stopped serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    pub api_version: &'static str,
    pub kind: &'static str,
    /// The minor release of Kubernetes 1 that removed it.
    pub in_minor: u32,
    /// What to write instead.
    pub instead: &'static str,
}

impl Removed {
    /// The refusal, in the words `validate` prints after `file:line:col: `.
    pub fn message(&self) -> String {
        format!(
            "{} {} was removed in Kubernetes 1.{} (use {})",
            self.api_version, self.kind, self.in_minor, self.instead
        )
    }
}

macro_rules! removed {
    ($($v:literal $k:literal $m:literal $i:literal;)*) => {
        &[$(Removed { api_version: $v, kind: $k, in_minor: $m, instead: $i },)*]
    };
}

/// From Kubernetes' deprecated API migration guide.
const REMOVED: &[Removed] = removed! {
    "extensions/v1beta1" "Deployment" 16 "apps/v1";
    "extensions/v1beta1" "DaemonSet" 16 "apps/v1";
    "extensions/v1beta1" "ReplicaSet" 16 "apps/v1";
    "extensions/v1beta1" "NetworkPolicy" 16 "networking.k8s.io/v1";
    "extensions/v1beta1" "PodSecurityPolicy" 16 "Pod Security Admission; policy/v1beta1 went too, in 1.25";
    "apps/v1beta1" "Deployment" 16 "apps/v1";
    "apps/v1beta1" "StatefulSet" 16 "apps/v1";
    "apps/v1beta1" "ReplicaSet" 16 "apps/v1";
    "apps/v1beta2" "Deployment" 16 "apps/v1";
    "apps/v1beta2" "DaemonSet" 16 "apps/v1";
    "apps/v1beta2" "StatefulSet" 16 "apps/v1";
    "apps/v1beta2" "ReplicaSet" 16 "apps/v1";
    "extensions/v1beta1" "Ingress" 22 "networking.k8s.io/v1";
    "networking.k8s.io/v1beta1" "Ingress" 22 "networking.k8s.io/v1";
    "networking.k8s.io/v1beta1" "IngressClass" 22 "networking.k8s.io/v1";
    "admissionregistration.k8s.io/v1beta1" "MutatingWebhookConfiguration" 22 "admissionregistration.k8s.io/v1";
    "admissionregistration.k8s.io/v1beta1" "ValidatingWebhookConfiguration" 22 "admissionregistration.k8s.io/v1";
    "apiextensions.k8s.io/v1beta1" "CustomResourceDefinition" 22 "apiextensions.k8s.io/v1";
    "apiregistration.k8s.io/v1beta1" "APIService" 22 "apiregistration.k8s.io/v1";
    "authentication.k8s.io/v1beta1" "TokenReview" 22 "authentication.k8s.io/v1";
    "authorization.k8s.io/v1beta1" "SubjectAccessReview" 22 "authorization.k8s.io/v1";
    "authorization.k8s.io/v1beta1" "LocalSubjectAccessReview" 22 "authorization.k8s.io/v1";
    "authorization.k8s.io/v1beta1" "SelfSubjectAccessReview" 22 "authorization.k8s.io/v1";
    "certificates.k8s.io/v1beta1" "CertificateSigningRequest" 22 "certificates.k8s.io/v1";
    "coordination.k8s.io/v1beta1" "Lease" 22 "coordination.k8s.io/v1";
    "rbac.authorization.k8s.io/v1beta1" "ClusterRole" 22 "rbac.authorization.k8s.io/v1";
    "rbac.authorization.k8s.io/v1beta1" "ClusterRoleBinding" 22 "rbac.authorization.k8s.io/v1";
    "rbac.authorization.k8s.io/v1beta1" "Role" 22 "rbac.authorization.k8s.io/v1";
    "rbac.authorization.k8s.io/v1beta1" "RoleBinding" 22 "rbac.authorization.k8s.io/v1";
    "scheduling.k8s.io/v1beta1" "PriorityClass" 22 "scheduling.k8s.io/v1";
    "storage.k8s.io/v1beta1" "CSIDriver" 22 "storage.k8s.io/v1";
    "storage.k8s.io/v1beta1" "CSINode" 22 "storage.k8s.io/v1";
    "storage.k8s.io/v1beta1" "StorageClass" 22 "storage.k8s.io/v1";
    "storage.k8s.io/v1beta1" "VolumeAttachment" 22 "storage.k8s.io/v1";
    "batch/v1beta1" "CronJob" 25 "batch/v1";
    "discovery.k8s.io/v1beta1" "EndpointSlice" 25 "discovery.k8s.io/v1";
    "events.k8s.io/v1beta1" "Event" 25 "events.k8s.io/v1";
    "autoscaling/v2beta1" "HorizontalPodAutoscaler" 25 "autoscaling/v2";
    "policy/v1beta1" "PodDisruptionBudget" 25 "policy/v1";
    "policy/v1beta1" "PodSecurityPolicy" 25 "Pod Security Admission: namespace labels pod-security.kubernetes.io/*";
    "node.k8s.io/v1beta1" "RuntimeClass" 25 "node.k8s.io/v1";
    "autoscaling/v2beta2" "HorizontalPodAutoscaler" 26 "autoscaling/v2";
    "flowcontrol.apiserver.k8s.io/v1beta1" "FlowSchema" 26 "flowcontrol.apiserver.k8s.io/v1";
    "flowcontrol.apiserver.k8s.io/v1beta1" "PriorityLevelConfiguration" 26 "flowcontrol.apiserver.k8s.io/v1";
    "storage.k8s.io/v1beta1" "CSIStorageCapacity" 27 "storage.k8s.io/v1";
    "flowcontrol.apiserver.k8s.io/v1beta2" "FlowSchema" 29 "flowcontrol.apiserver.k8s.io/v1";
    "flowcontrol.apiserver.k8s.io/v1beta2" "PriorityLevelConfiguration" 29 "flowcontrol.apiserver.k8s.io/v1";
    "flowcontrol.apiserver.k8s.io/v1beta3" "FlowSchema" 32 "flowcontrol.apiserver.k8s.io/v1";
    "flowcontrol.apiserver.k8s.io/v1beta3" "PriorityLevelConfiguration" 32 "flowcontrol.apiserver.k8s.io/v1";
};

/// The removal `api_version` `kind` names, if Kubernetes no longer serves it.
pub fn removed(api_version: &str, kind: &str) -> Option<&'static Removed> {
    REMOVED
        .iter()
        .find(|r| r.api_version == api_version && r.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_versions_name_the_release_and_the_replacement() {
        let psp = removed("policy/v1beta1", "PodSecurityPolicy").unwrap();
        assert!(
            psp.message().starts_with(
                "policy/v1beta1 PodSecurityPolicy was removed in Kubernetes 1.25 (use "
            ),
            "{}",
            psp.message()
        );
        assert_eq!(
            removed("batch/v1beta1", "CronJob").unwrap().message(),
            "batch/v1beta1 CronJob was removed in Kubernetes 1.25 (use batch/v1)"
        );
        assert_eq!(
            removed("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema")
                .unwrap()
                .in_minor,
            32
        );
    }

    #[test]
    fn served_versions_and_custom_groups_pass() {
        assert_eq!(removed("networking.k8s.io/v1", "Ingress"), None);
        assert_eq!(removed("batch/v1", "CronJob"), None);
        assert_eq!(removed("example.com/v1beta1", "CronJob"), None);
        assert_eq!(removed("policy/v1beta1", "Eviction"), None);
    }

    #[test]
    fn the_table_has_no_duplicates() {
        let mut seen = std::collections::BTreeSet::new();
        for r in REMOVED {
            assert!(seen.insert((r.api_version, r.kind)), "{r:?} twice");
        }
    }
}
