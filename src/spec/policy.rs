//! Per-object policies: what driftless does with a spec's objects besides applying them
//! (docs/src/policies.md). Written as `driftless.dev/*` annotations on a manifest, or as
//! keys of a TOML kind; read into an [`ObjectPolicy`] that render hands on with each
//! object.

/// How driftless treats one spec's objects. The default is what driftless always did:
/// apply every field, correct drift, prune on removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectPolicy {
    /// JSON pointers (RFC 6901) of fields sent when the object is created, never after:
    /// someone else (an HPA, an operator, a person) owns them from then on.
    pub ignore_fields: Vec<String>,
    /// Created when missing, never updated or drift-corrected afterwards.
    pub create_only: bool,
    /// Left in the cluster (and dropped from the inventory) when its spec is removed.
    pub keep: bool,
    /// Decrypted from a SOPS file: its values are never shown.
    pub sealed: bool,
    /// Whether an apply refused only for immutable fields deletes and recreates the
    /// object; `None`: as its kind's default (`apply::replace`).
    pub replace: Option<Replace>,
    /// Its sync wave (`spec::order`): applied and ready before any higher wave starts.
    pub wave: i32,
    /// When it is a hook: run before or after the rest of a revision that changes
    /// something, never drift-corrected or kept in step otherwise.
    pub hook: Option<super::order::Hook>,
    /// Field managers whose fields driftless leaves alone (`.driftless.toml` `[[ignore]]`
    /// `managers`): resolved against the live object into pointers, then as
    /// `ignore_fields`.
    pub ignore_managers: Vec<String>,
    /// The CEL rule that judges its readiness (`.driftless.toml` `[[health]]`).
    pub health: Option<std::sync::Arc<super::settings::HealthRule>>,
    /// Someone else's edit of its fields is reported, never taken back (`--drift report`
    /// for this object alone); a change of the spec is still applied.
    pub report_drift: bool,
    /// `NAMESPACE/NAME` of a ServiceAccount: the object is written only where that
    /// account may write it (Flux's `serviceAccountName`); driftless's own rights are
    /// never more than that for it.
    pub service_account: Option<String>,
    /// Why the tree holds it back (`driftless.dev/suspend: REASON`, Flux's `suspend:
    /// true`): neither applied, corrected nor pruned, as a spec suspended by hand.
    pub suspended: Option<String>,
}

/// `driftless.dev/replace`: what an apply refused only because of immutable fields does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Delete the object and create it again, then carry on.
    OnImmutable,
    /// Report the refusal.
    Never,
}

impl ObjectPolicy {
    /// A hook driftless does not run (a Helm `test`, Argo CD's `Skip`): never applied,
    /// recorded or shown.
    pub(crate) fn never_applied(&self) -> bool {
        self.hook.as_ref().is_some_and(super::order::Hook::skipped)
    }

    /// Whether driftless leaves the field `pointer` names to others once the object
    /// exists: a create-only object's every field, or one its ignore-fields cover.
    pub fn leaves(&self, pointer: &str) -> bool {
        self.create_only
            || self
                .ignore_fields
                .iter()
                .any(|p| crate::object::pointer::is_under(pointer, p))
    }
}

/// `driftless.dev/ignore-fields: /spec/replicas, /data/x`
pub(crate) const IGNORE_FIELDS: &str = "driftless.dev/ignore-fields";
/// `driftless.dev/apply: create-only`
pub const APPLY: &str = "driftless.dev/apply";
/// `driftless.dev/prune: disabled`
pub(crate) const PRUNE: &str = "driftless.dev/prune";
/// `driftless.dev/depends-on: elasticweb/dev/db, manifest/dev/ConfigMap/settings`
pub(crate) const DEPENDS_ON: &str = "driftless.dev/depends-on";
/// `driftless.dev/replace: on-immutable | never`
pub(crate) const REPLACE: &str = "driftless.dev/replace";
/// `driftless.dev/substitute: disabled`: `${...}` in the object is not a variable.
pub(crate) const SUBSTITUTE: &str = "driftless.dev/substitute";
/// `driftless.dev/drift: report`
pub(crate) const DRIFT: &str = "driftless.dev/drift";
/// `driftless.dev/service-account: NAMESPACE/NAME`
pub(crate) const SERVICE_ACCOUNT: &str = "driftless.dev/service-account";
/// `driftless.dev/suspend: REASON`
pub(crate) const SUSPEND: &str = "driftless.dev/suspend";

/// The only `driftless.dev` marks a manifest may set: the rest are driftless's own.
pub(crate) const ANNOTATIONS: [&str; 11] = [
    IGNORE_FIELDS,
    APPLY,
    PRUNE,
    DEPENDS_ON,
    REPLACE,
    SUBSTITUTE,
    DRIFT,
    SERVICE_ACCOUNT,
    SUSPEND,
    super::order::WAVE,
    super::order::HOOK,
];

/// Whether a manifest may set annotation `key` (a policy, not an identity mark).
pub(crate) fn is_policy_annotation(key: &str) -> bool {
    ANNOTATIONS.contains(&key)
}

/// What is wrong with a `driftless.dev` annotation a manifest sets: its key (one of
/// driftless's own marks, or unknown), or its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkProblem {
    Key(String),
    Value(String),
}

/// Whether a manifest may carry annotation `key: value`: anything outside driftless's
/// domain; of driftless's keys, only the policy annotations, with valid values.
pub fn annotation(key: &str, value: &str) -> Result<(), MarkProblem> {
    use crate::object::ownership::{INSTANCE, NODE, NODE_NAME, SPEC};
    if !super::names::is_driftless_key(key) {
        Ok(())
    } else if is_policy_annotation(key) {
        check_annotation(key, value).map_err(MarkProblem::Value)
    } else if [INSTANCE, SPEC, NODE, NODE_NAME].contains(&key) {
        Err(MarkProblem::Key(format!(
            "annotation `{key}` in `metadata.annotations` is set by driftless; remove it"
        )))
    } else {
        Err(MarkProblem::Key(format!(
            "unknown driftless annotation `{key}`: a manifest may set only {}",
            ANNOTATIONS.join(", ")
        )))
    }
}

/// Why the value of policy annotation `key` is wrong, if it is.
pub(crate) fn check_annotation(key: &str, value: &str) -> Result<(), String> {
    let expect = |want: &str| match value.trim() {
        v if v == want => Ok(()),
        v => Err(format!(
            "invalid value {v:?} for annotation `{key}`: the only value is {want:?}"
        )),
    };
    match key {
        APPLY => expect("create-only"),
        PRUNE | SUBSTITUTE => expect("disabled"),
        DRIFT => expect("report"),
        SERVICE_ACCOUNT => check_service_account(value),
        SUSPEND => match value.trim() {
            "" => Err(format!(
                "annotation `{key}` gives no reason: say why it is held back (\"incident 42\")"
            )),
            _ => Ok(()),
        },
        REPLACE => match value.trim() {
            "on-immutable" | "never" => Ok(()),
            v => Err(format!(
                "invalid value {v:?} for annotation `{key}`: \"on-immutable\" or \"never\""
            )),
        },
        IGNORE_FIELDS => list(
            key,
            value,
            "fields: give JSON pointers such as /spec/replicas",
            check_pointer,
        ),
        DEPENDS_ON => list(
            key,
            value,
            "specs: give spec ids (kind/namespace/name)",
            check_spec_id,
        ),
        super::order::WAVE | super::order::HOOK => super::order::check(key, value),
        _ => Err(format!(
            "unknown driftless annotation `{key}`: a manifest may set only {}",
            ANNOTATIONS.join(", ")
        )),
    }
}

/// Why a comma-separated list annotation is wrong: an item `check` refuses, or no item.
fn list(
    key: &str,
    value: &str,
    what: &str,
    check: fn(&str) -> Result<(), String>,
) -> Result<(), String> {
    let mut any = false;
    for item in super::order::items(value) {
        any = true;
        check(item).map_err(|why| format!("in annotation `{key}`: {why}"))?;
    }
    match any {
        true => Ok(()),
        false => Err(format!(
            "annotation `{key}` lists no {what}, comma-separated"
        )),
    }
}

/// Why `value` is not a ServiceAccount as `NAMESPACE/NAME`, if it is not.
fn check_service_account(value: &str) -> Result<(), String> {
    let ok = |part: &str| {
        !part.is_empty()
            && part.len() <= 253
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    match value.trim().split_once('/') {
        Some((ns, name)) if ok(ns) && ok(name) => Ok(()),
        _ => Err(format!(
            "invalid value {:?} for annotation `{SERVICE_ACCOUNT}`: a ServiceAccount as NAMESPACE/NAME",
            value.trim()
        )),
    }
}

/// Why `id` is not a spec identity another spec may depend on, if it is not.
pub(crate) fn check_spec_id(id: &str) -> Result<(), String> {
    id.parse::<super::SpecId>().map(drop).map_err(|_| {
        format!("{id:?} is not a spec id (kind/namespace/name, as `driftless status` lists them)")
    })
}

/// Why `p` is not a field driftless can stop sending, if it is not: a JSON pointer
/// (RFC 6901) to a field below the object's identity.
pub(crate) fn check_pointer(p: &str) -> Result<(), String> {
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!(
            "{p:?} is not a JSON pointer: it starts with '/', as in /spec/replicas"
        ));
    };
    let mut segments = Vec::new();
    for raw in rest.split('/') {
        if raw.is_empty() {
            return Err(format!("JSON pointer {p:?} has an empty step"));
        }
        let mut seg = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            match (c, c == '~') {
                (_, true) => match chars.next() {
                    Some('0') => seg.push('~'),
                    Some('1') => seg.push('/'),
                    _ => {
                        return Err(format!(
                            "JSON pointer {p:?}: '~' must be followed by 0 ('~') or 1 ('/')"
                        ));
                    }
                },
                (c, false) => seg.push(c),
            }
        }
        segments.push(seg);
    }
    let identity = match segments.as_slice() {
        [top] => matches!(top.as_str(), "apiVersion" | "kind" | "metadata"),
        [m, field] if m == "metadata" => {
            matches!(
                field.as_str(),
                "name" | "namespace" | "labels" | "annotations"
            )
        }
        [m, map, key, ..] if m == "metadata" && (map == "labels" || map == "annotations") => {
            super::names::is_driftless_key(key)
        }
        _ => false,
    };
    match identity {
        true => Err(format!(
            "{p:?} is part of the object's identity or driftless's marks, which are always sent"
        )),
        false => Ok(()),
    }
}

/// The policy of a manifest whose annotations passed [`check_annotation`], and the ids of
/// the specs it depends on, as written.
pub(crate) fn of_annotations(
    annotations: Option<&serde_json::Value>,
) -> (ObjectPolicy, Vec<String>) {
    let get = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(|v| v.as_str())
    };
    let (wave, hook) = super::order::of_annotations(get);
    let policy = ObjectPolicy {
        wave,
        hook,
        ignore_fields: get(IGNORE_FIELDS)
            .map(|v| super::order::items(v).map(String::from).collect())
            .unwrap_or_default(),
        create_only: get(APPLY).is_some_and(|v| v.trim() == "create-only"),
        keep: get(PRUNE).is_some_and(|v| v.trim() == "disabled"),
        sealed: false,
        replace: match get(REPLACE).map(str::trim) {
            Some("on-immutable") => Some(Replace::OnImmutable),
            Some("never") => Some(Replace::Never),
            _ => None,
        },
        ignore_managers: Vec::new(),
        health: None,
        report_drift: get(DRIFT).is_some_and(|v| v.trim() == "report"),
        service_account: get(SERVICE_ACCOUNT).map(|v| v.trim().to_string()),
        suspended: get(SUSPEND)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(String::from),
    };
    let depends_on = get(DEPENDS_ON)
        .map(|v| super::order::items(v).map(String::from).collect())
        .unwrap_or_default();
    (policy, depends_on)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_are_rfc_6901_below_the_identity() {
        for ok in [
            "/spec/replicas",
            "/data/a~1b",
            "/spec/template/spec/containers/0/image",
            "/metadata/labels/team",
            "/metadata/annotations/deployment.kubernetes.io~1revision",
        ] {
            assert_eq!(check_pointer(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("spec/replicas", "starts with '/'"),
            ("/spec//replicas", "empty step"),
            ("/data/a~2", "'~' must be followed"),
            ("/kind", "identity"),
            ("/metadata/name", "identity"),
            ("/metadata/labels", "identity"),
            ("/metadata/labels/driftless.dev~1instance", "identity"),
            ("/metadata/annotations/driftless.dev~1spec", "identity"),
        ] {
            let got = check_pointer(bad).unwrap_err();
            assert!(got.contains(says), "{bad}: {got}");
        }
    }

    #[test]
    fn each_policy_annotation_has_its_values_and_nothing_else_is_allowed() {
        assert_eq!(check_annotation(APPLY, "create-only"), Ok(()));
        assert_eq!(check_annotation(PRUNE, " disabled "), Ok(()));
        assert_eq!(
            check_annotation(IGNORE_FIELDS, "/spec/replicas, /data/x"),
            Ok(())
        );
        assert_eq!(
            check_annotation(DEPENDS_ON, "elasticweb/dev/db,manifest//Namespace/dev"),
            Ok(())
        );
        for (key, value, says) in [
            (APPLY, "always", "the only value is \"create-only\""),
            (PRUNE, "false", "the only value is \"disabled\""),
            (DRIFT, "correct", "the only value is \"report\""),
            (
                SERVICE_ACCOUNT,
                "dev-team",
                "a ServiceAccount as NAMESPACE/NAME",
            ),
            (
                SERVICE_ACCOUNT,
                "apps/Dev",
                "a ServiceAccount as NAMESPACE/NAME",
            ),
            (IGNORE_FIELDS, " , ", "lists no fields"),
            (
                IGNORE_FIELDS,
                "/spec/replicas,replicas",
                "is not a JSON pointer",
            ),
            (DEPENDS_ON, "db", "not a spec id"),
            (
                "driftless.dev/prune-policy",
                "x",
                "unknown driftless annotation",
            ),
        ] {
            let got = check_annotation(key, value).unwrap_err();
            assert!(got.contains(says), "{key}={value}: {got}");
        }
    }

    #[test]
    fn annotations_become_the_policy() {
        let (policy, depends) = of_annotations(Some(&json!({
            IGNORE_FIELDS: "/spec/replicas, /spec/template/metadata/annotations",
            APPLY: "create-only",
            PRUNE: "disabled",
            DEPENDS_ON: "elasticweb/dev/db",
            REPLACE: "never",
            DRIFT: "report",
            SERVICE_ACCOUNT: "apps/dev-team",
            SUSPEND: " incident 42 ",
            "other": "x",
        })));
        assert_eq!(
            policy,
            ObjectPolicy {
                ignore_fields: vec![
                    "/spec/replicas".into(),
                    "/spec/template/metadata/annotations".into()
                ],
                create_only: true,
                keep: true,
                sealed: false,
                replace: Some(Replace::Never),
                wave: 0,
                hook: None,
                ignore_managers: Vec::new(),
                health: None,
                report_drift: true,
                service_account: Some("apps/dev-team".into()),
                suspended: Some("incident 42".into()),
            }
        );
        assert!(
            check_annotation(SUSPEND, " ")
                .unwrap_err()
                .contains("gives no reason")
        );
        assert!(check_annotation(REPLACE, "on-immutable").is_ok());
        assert!(
            check_annotation(REPLACE, "always")
                .unwrap_err()
                .contains("\"on-immutable\" or \"never\"")
        );
        assert_eq!(depends, ["elasticweb/dev/db"]);
        assert_eq!(of_annotations(None).0, ObjectPolicy::default());
    }
}
