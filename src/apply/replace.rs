//! Replace on immutable fields: when the apiserver refuses an apply only because fields
//! that cannot change changed (a Job's `spec.template`, a Deployment's selector), an object
//! whose policy allows it is deleted and created again, then the sync carries on (Flux's
//! `force`, Argo CD's `Replace=true`, kapp's `fallback-on-replace`).
//!
//! Who is replaced: what `driftless.dev/replace` says; without it, a `Job.batch` (a Job
//! is a run: a changed committed Job means "run the new one") and the kinds
//! `--replace-on-immutable` names. Nothing else by default: PersistentVolumeClaims hold
//! data and Services their addresses, so the refusal says how to opt in instead.

use super::Options;
use crate::object::ObjKey;
use crate::spec::policy::{ObjectPolicy, REPLACE, Replace};

/// The fields a 422 refuses as immutable, when they are all it refuses; `None` when the
/// refusal is anything else (the apply fails as it is).
pub(super) fn immutable_fields(e: &kube::Error) -> Option<Vec<String>> {
    let kube::Error::Api(s) = e else {
        return None;
    };
    if s.code != 422 {
        return None;
    }
    let causes = s
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    // Field by field (`field is immutable`), a whole spec (a PVC's "spec is immutable
    // after creation ..."), or a kind's list of what may change (a StatefulSet's "updates
    // to statefulset spec for fields other than ... are forbidden"). A PVC's message
    // goes on with a diff on further lines: the first says it.
    let immutable = |m: &str| {
        let first = m.lines().next().unwrap_or_default();
        first.contains("immutable")
            || (first.contains("Forbidden: updates to") && first.ends_with("are forbidden"))
    };
    if causes.is_empty() || !causes.iter().all(|c| immutable(&c.message)) {
        return None;
    }
    Some(causes.iter().map(|c| c.field.clone()).collect())
}

/// Whether an object of `key` with `policy` is replaced when only immutable fields
/// refuse its apply.
pub(super) fn allowed(key: &ObjKey, policy: &ObjectPolicy, opts: &Options) -> bool {
    match policy.replace {
        Some(Replace::OnImmutable) => true,
        Some(Replace::Never) => false,
        None => {
            key.is("batch", "Job") || opts.replace_on_immutable.iter().any(|(g, k)| key.is(g, k))
        }
    }
}

/// The refusal of an object that is not replaced, with how to opt in, in one line.
pub(super) fn refusal(key: &ObjKey, fields: &[String], apiserver: &str) -> String {
    let kind = match key.group.is_empty() {
        true => key.kind.clone(),
        false => format!("{}.{}", key.kind, key.group),
    };
    format!(
        "{apiserver}; {} cannot change in place: annotate it `{REPLACE}: on-immutable` (or pass --replace-on-immutable {kind}) to delete and recreate it",
        fields.join(", ")
    )
}

/// How a replaced object's dependents go: a StatefulSet's Pods (and their volumes)
/// stay, for the new one to adopt; anything else takes its dependents with it.
pub(super) fn propagation(key: &ObjKey) -> kube::api::PropagationPolicy {
    match key.is("apps", "StatefulSet") {
        true => kube::api::PropagationPolicy::Orphan,
        false => kube::api::PropagationPolicy::Background,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use kube::core::response::{StatusCause, StatusDetails};

    fn refused(code: u16, causes: &[(&str, &str)]) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            details: Some(StatusDetails {
                causes: causes
                    .iter()
                    .map(|(field, message)| StatusCause {
                        field: field.to_string(),
                        message: message.to_string(),
                        reason: "FieldValueInvalid".into(),
                    })
                    .collect(),
                name: "x".into(),
                group: "batch".into(),
                kind: "jobs".into(),
                uid: String::new(),
                retry_after_seconds: 0,
            }),
            ..Default::default()
        }))
    }

    fn key(group: &str, kind: &str) -> ObjKey {
        ObjKey {
            group: group.into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: "x".into(),
        }
    }

    #[test]
    fn only_a_refusal_of_immutable_fields_alone_is_one() {
        let template = (
            "spec.template",
            "Invalid value: core.PodTemplateSpec{...}: field is immutable",
        );
        assert_eq!(
            immutable_fields(&refused(422, &[template])),
            Some(vec!["spec.template".to_string()])
        );
        let other = (
            "spec.replicas",
            "Invalid value: -1: must be greater than or equal to 0",
        );
        assert_eq!(immutable_fields(&refused(422, &[template, other])), None);
        assert_eq!(immutable_fields(&refused(422, &[])), None);
        // As Kubernetes words a whole spec that cannot change, and a StatefulSet's.
        let pvc = (
            "spec",
            "Forbidden: spec is immutable after creation except resources.requests for bound claims\n  core.PersistentVolumeClaimSpec{\n- \tAccessModes: ...",
        );
        assert_eq!(
            immutable_fields(&refused(422, &[pvc])),
            Some(vec!["spec".to_string()])
        );
        let sts = (
            "spec",
            "Forbidden: updates to statefulset spec for fields other than 'replicas', 'template', and 'updateStrategy' are forbidden",
        );
        assert!(immutable_fields(&refused(422, &[sts])).is_some());
        let forbidden = ("spec.x", "Forbidden: may not be set");
        assert_eq!(immutable_fields(&refused(422, &[forbidden])), None);
        assert_eq!(immutable_fields(&refused(409, &[template])), None);
    }

    #[test]
    fn jobs_are_replaced_by_default_and_the_rest_when_asked() {
        let opts = Options::default();
        let none = ObjectPolicy::default();
        assert!(allowed(&key("batch", "Job"), &none, &opts));
        for (g, k) in [
            ("", "Service"),
            ("", "PersistentVolumeClaim"),
            ("apps", "StatefulSet"),
        ] {
            assert!(!allowed(&key(g, k), &none, &opts), "{k}");
        }
        let never = ObjectPolicy {
            replace: Some(Replace::Never),
            ..ObjectPolicy::default()
        };
        assert!(!allowed(&key("batch", "Job"), &never, &opts));
        let on = ObjectPolicy {
            replace: Some(Replace::OnImmutable),
            ..ObjectPolicy::default()
        };
        assert!(allowed(&key("", "Service"), &on, &opts));
        let flagged = Options {
            replace_on_immutable: vec![("apps".into(), "StatefulSet".into())],
            ..Options::default()
        };
        assert!(allowed(&key("apps", "StatefulSet"), &none, &flagged));
        assert!(!allowed(&key("apps", "Deployment"), &none, &flagged));
        let said = refusal(&key("", "Service"), &["spec.clusterIP".into()], "refused");
        assert!(
            said.contains("(or pass --replace-on-immutable Service)"),
            "{said}"
        );
        assert!(!said.contains('\n'));
    }
}
