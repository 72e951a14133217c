//! The checks a manifest passes whatever it was written in, on its JSON: it is a
//! Kubernetes object (apiVersion, kind, metadata.name), its names are valid, it sets none
//! of driftless's own marks, names no API version Kubernetes has removed, and it fits in
//! etcd. Problems name the path of what is wrong; each format's reader turns that into
//! `file:line:col`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{Manifest, ManifestMetadata};
use super::names;
use super::policy::{self, MarkProblem};

/// The most a manifest may be as JSON (see `too_large`).
const MAX_OBJECT_BYTES: usize = 1536 << 10;

/// What is wrong, and where: the path of the offending field (its key's place), or of
/// the map a missing field belongs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Problem {
    pub path: Vec<String>,
    pub message: String,
}

fn problem(path: &[&str], message: impl Into<String>) -> Problem {
    Problem {
        path: path.iter().map(|p| p.to_string()).collect(),
        message: message.into(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// A quoted, shortened value for messages.
fn q(s: &str) -> String {
    let mut shown: String = s.chars().take(64).collect();
    if shown.len() < s.len() {
        shown.push('…');
    }
    format!("{shown:?}")
}

/// The string at the end of `path` in `obj` (the map that holds it), or the problem.
fn string(
    obj: &serde_json::Map<String, Value>,
    path: &[&str],
    problems: &mut Vec<Problem>,
) -> Option<String> {
    let key = path[path.len() - 1];
    match obj.get(key) {
        None | Some(Value::Null) => {
            problems.push(problem(
                &path[..path.len() - 1],
                format!("not a Kubernetes object: missing `{}`", path.join(".")),
            ));
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            problems.push(problem(
                path,
                format!(
                    "`{}` must be a string, found {}",
                    path.join("."),
                    type_name(other)
                ),
            ));
            None
        }
    }
}

/// The manifest `doc` is, or every problem it has.
pub(super) fn check(doc: Value) -> Result<Manifest, Vec<Problem>> {
    let Value::Object(mut obj) = doc else {
        return Err(vec![problem(
            &[],
            format!(
                "not a Kubernetes object: a document must be a map with apiVersion, kind and metadata.name, found {}",
                type_name(&doc)
            ),
        )]);
    };
    let mut problems = Vec::new();
    let api_version = string(&obj, &["apiVersion"], &mut problems);
    let kind = string(&obj, &["kind"], &mut problems);
    let mut meta = match obj.remove("metadata") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => {
            problems.push(problem(
                &[],
                "not a Kubernetes object: missing `metadata.name`",
            ));
            serde_json::Map::new()
        }
        Some(other) => {
            problems.push(problem(
                &["metadata"],
                format!("`metadata` must be a map, found {}", type_name(&other)),
            ));
            serde_json::Map::new()
        }
    };
    let rule = names::NameRule::of(
        api_version.as_deref().unwrap_or_default(),
        kind.as_deref().unwrap_or_default(),
    );
    let mut generated = false;
    let name = if meta.is_empty() && problems.iter().any(|p| p.path.is_empty()) {
        None
    } else {
        // One problem each: a `generateName` refused is not also a missing name.
        let before = problems.len();
        match generate_name(&meta, rule, &mut problems) {
            Some(prefix) => {
                generated = true;
                Some(prefix)
            }
            None if problems.len() > before => None,
            None => string(&meta, &["metadata", "name"], &mut problems),
        }
    };
    let namespace = match meta.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            problems.push(problem(
                &["metadata", "namespace"],
                format!(
                    "`metadata.namespace` must be a string, found {}",
                    type_name(other)
                ),
            ));
            None
        }
    };
    if let Some(v) = &api_version
        && (v.is_empty() || v.split('/').count() > 2)
    {
        problems.push(problem(
            &["apiVersion"],
            format!(
                "invalid apiVersion {}: expected VERSION or GROUP/VERSION",
                q(v)
            ),
        ));
    }
    if let Some(k) = &kind
        && (k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()))
    {
        problems.push(problem(&["kind"], format!("invalid kind {}", q(k))));
    }
    if let (Some(v), Some(k)) = (&api_version, &kind)
        && let Some(gone) = super::removed::removed(v, k)
    {
        problems.push(problem(&["apiVersion"], gone.message()));
    }
    if let Some(n) = &name
        && !generated
        && let Err(why) = rule.check(n)
    {
        problems.push(problem(
            &["metadata", "name"],
            format!("invalid metadata.name {}: {why}", q(n)),
        ));
    }
    if let Some(ns) = &namespace
        && let Err(why) = names::dns1123_label(ns)
    {
        problems.push(problem(
            &["metadata", "namespace"],
            format!("invalid metadata.namespace {}: {why}", q(ns)),
        ));
    }
    for map in ["labels", "annotations"] {
        if let Some(v) = meta.get(map) {
            problems.extend(marks(map, v));
        }
    }
    let (Some(api_version), Some(kind), Some(name)) = (api_version, kind, name) else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    obj.remove("apiVersion");
    obj.remove("kind");
    meta.remove("name");
    meta.remove("namespace");
    let m = Manifest {
        api_version,
        kind,
        metadata: ManifestMetadata {
            name,
            namespace,
            generated,
            rest: meta.into_iter().collect::<BTreeMap<_, _>>(),
        },
        rest: obj.into_iter().collect(),
    };
    if let Some(why) = too_large(&m) {
        return Err(vec![problem(&[], why)]);
    }
    Ok(m)
}

/// The `generateName` prefix a hook has instead of a name, when it has one (a problem
/// when the object is not a hook, or the prefix is not one its kind's names can start
/// with). The apiserver ignores `generateName` when a name is given, and so does this.
fn generate_name(
    meta: &serde_json::Map<String, Value>,
    rule: names::NameRule,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    if meta.get("name").is_some_and(|n| !n.is_null()) {
        return None;
    }
    let at = ["metadata", "generateName"];
    let prefix = match meta.get("generateName")? {
        Value::Null => return None,
        Value::String(s) if s.is_empty() => return None,
        Value::String(s) => s.clone(),
        other => {
            problems.push(problem(
                &at,
                format!(
                    "`metadata.generateName` must be a string, found {}",
                    type_name(other)
                ),
            ));
            return None;
        }
    };
    let annotations = meta.get("annotations");
    let get = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    if !super::order::is_hook(get) {
        problems.push(problem(
            &at,
            format!(
                "`metadata.generateName` is only for hooks (`{}`, `{}` or `{}`), which create a new object each run; an object driftless keeps in sync needs `metadata.name`",
                super::order::ARGO_HOOK,
                super::order::HELM_HOOK,
                super::order::HOOK,
            ),
        ));
        return None;
    }
    // As the apiserver checks it: the prefix, cut to the 58 characters it keeps, must
    // make a valid name once the 5 random ones are added.
    let kept: String = prefix.chars().take(58).collect();
    if let Err(why) = rule.check(&format!("{kept}x")) {
        problems.push(problem(
            &at,
            format!("invalid metadata.generateName {}: {why}", q(&prefix)),
        ));
        return None;
    }
    Some(prefix)
}

/// Why `m` is more than the apiserver stores for one object, if it is: etcd's default
/// request limit (`--max-request-bytes`, 1.5 MiB). Checked for TOML and YAML manifests.
pub(super) fn too_large(m: &Manifest) -> Option<String> {
    let size = serde_json::to_vec(&m.to_json()).map_or(usize::MAX, |v| v.len());
    (size > MAX_OBJECT_BYTES).then(|| {
        format!(
            "manifest {}/{} is {size} bytes as JSON, more than the {} KiB the apiserver stores for one object",
            m.kind,
            m.metadata.name,
            MAX_OBJECT_BYTES >> 10
        )
    })
}

/// Problems of `metadata.labels` or `metadata.annotations`: a map of strings with valid
/// keys (and, for labels, values), none of them driftless's own.
fn marks(map: &str, v: &Value) -> Vec<Problem> {
    let key = format!("metadata.{map}");
    let noun = if map == "labels" {
        "label"
    } else {
        "annotation"
    };
    let Value::Object(entries) = v else {
        if v.is_null() {
            return Vec::new();
        }
        return vec![problem(
            &["metadata", map],
            format!("`{key}` must be a map of {noun}s, found {}", type_name(v)),
        )];
    };
    let mut out = Vec::new();
    for (name, val) in entries {
        let at = ["metadata", map, name.as_str()];
        let Value::String(s) = val else {
            out.push(problem(
                &at,
                format!("`{key}.{name}` must be a string, found {}", type_name(val)),
            ));
            continue;
        };
        if let Err(why) = names::label_key(name) {
            out.push(problem(
                &at,
                format!("invalid {noun} key {} in `{key}`: {why}", q(name)),
            ));
        } else if map == "annotations" {
            if let Err(MarkProblem::Key(why) | MarkProblem::Value(why)) =
                policy::annotation(name, s)
            {
                out.push(problem(&at, why));
            }
        } else if names::is_driftless_key(name) {
            out.push(problem(
                &at,
                format!("{noun} `{name}` in `{key}` is set by driftless; remove it"),
            ));
        }
        if map == "labels"
            && let Err(why) = names::label_value(s)
        {
            out.push(problem(
                &at,
                format!("invalid {noun} value {} in `{key}`: {why}", q(s)),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(doc: Value) -> Vec<(String, String)> {
        check(doc)
            .unwrap_err()
            .into_iter()
            .map(|p| (p.path.join("."), p.message))
            .collect()
    }

    #[test]
    fn a_kubernetes_object_becomes_a_manifest() {
        let m = check(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "dev", "labels": {"a": "b"}, "creationTimestamp": null},
            "spec": {"replicas": 1}
        }))
        .unwrap();
        assert_eq!(
            (m.group(), m.kind.as_str(), m.metadata.name.as_str()),
            ("apps", "Deployment", "web")
        );
        assert_eq!(m.metadata.namespace.as_deref(), Some("dev"));
        assert_eq!(m.metadata.rest["creationTimestamp"], Value::Null);
        assert_eq!(m.rest["spec"], json!({"replicas": 1}));
    }

    #[test]
    fn what_is_not_a_kubernetes_object_says_what_it_lacks() {
        assert_eq!(
            messages(json!({"apiVersion": "v1", "metadata": {"name": "x"}})),
            [(
                String::new(),
                "not a Kubernetes object: missing `kind`".to_string()
            )]
        );
        assert_eq!(
            messages(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
            [(
                "metadata".to_string(),
                "not a Kubernetes object: missing `metadata.name`".to_string()
            )]
        );
        assert_eq!(
            messages(json!({"apiVersion": "v1", "kind": "ConfigMap"})),
            [(
                String::new(),
                "not a Kubernetes object: missing `metadata.name`".to_string()
            )]
        );
        assert!(
            messages(json!(["a"]))[0]
                .1
                .starts_with("not a Kubernetes object")
        );
    }

    #[test]
    fn a_hook_may_use_generate_name_and_nothing_else_may() {
        let job = |annotations: Value, meta: Value| {
            let mut meta = meta;
            meta["annotations"] = annotations;
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {}})
        };
        for hook in [
            json!({"argocd.argoproj.io/hook": "PreSync"}),
            json!({"helm.sh/hook": "post-install"}),
            json!({"driftless.dev/hook": "pre"}),
            json!({"argocd.argoproj.io/hook": "Skip"}),
        ] {
            let m = check(job(hook.clone(), json!({"generateName": "migrate-"}))).unwrap();
            assert_eq!(m.metadata.name, "migrate-", "{hook}");
            assert!(m.metadata.generated);
            // Sent without a name: the apiserver makes one for each run.
            let sent = m.to_json();
            assert_eq!(sent["metadata"].get("name"), None);
            assert_eq!(sent["metadata"]["generateName"], "migrate-");
        }
        // A name wins, as the apiserver has it.
        let named = job(
            json!({"argocd.argoproj.io/hook": "PreSync"}),
            json!({"name": "once", "generateName": "migrate-"}),
        );
        let m = check(named).unwrap();
        assert_eq!(
            (m.metadata.name.as_str(), m.metadata.generated),
            ("once", false)
        );
        assert_eq!(m.to_json()["metadata"]["name"], "once");
        // Not a hook: one line saying why, not also a missing name.
        let plain = job(
            json!({"argocd.argoproj.io/sync-wave": "1"}),
            json!({"generateName": "x-"}),
        );
        let got = messages(plain);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "metadata.generateName");
        assert!(
            got[0]
                .1
                .starts_with("`metadata.generateName` is only for hooks"),
            "{got:?}"
        );
        assert!(got[0].1.contains("needs `metadata.name`"), "{got:?}");
        // A prefix no name of its kind can start with.
        let bad = job(
            json!({"argocd.argoproj.io/hook": "PreSync"}),
            json!({"generateName": "Migrate_"}),
        );
        let got = messages(bad);
        assert_eq!(got[0].0, "metadata.generateName");
        assert!(
            got[0]
                .1
                .starts_with("invalid metadata.generateName \"Migrate_\""),
            "{got:?}"
        );
        // A long prefix is cut by the apiserver, not refused.
        let long = "m".repeat(100);
        let m = check(job(
            json!({"helm.sh/hook": "pre-install"}),
            json!({"generateName": long}),
        ));
        assert!(m.is_ok());
    }

    #[test]
    fn bad_names_and_driftless_marks_are_refused_where_they_are() {
        let got = messages(json!({
            "apiVersion": "a/b/c", "kind": "Config Map",
            "metadata": {"name": "Bad_Name", "namespace": "x.y",
                         "labels": {"driftless.dev/instance": "me", "ok": "not ok!"},
                         "annotations": {"driftless.dev/spec": "x", "fine": "any text at all"}}
        }));
        let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "apiVersion",
                "kind",
                "metadata.name",
                "metadata.namespace",
                "metadata.labels.driftless.dev/instance",
                "metadata.labels.ok",
                "metadata.annotations.driftless.dev/spec",
            ]
        );
        assert!(
            got[4].1.contains("is set by driftless; remove it"),
            "{got:?}"
        );
    }

    #[test]
    fn helm_and_kustomize_labels_are_the_authors() {
        let m = check(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/instance": "release",
                "app.kubernetes.io/name": "chart"}}
        }))
        .unwrap();
        assert_eq!(
            m.metadata.rest["labels"]["app.kubernetes.io/managed-by"],
            "Helm"
        );
    }

    #[test]
    fn an_object_etcd_would_not_store_is_refused() {
        let big = "x".repeat(MAX_OBJECT_BYTES);
        let got = messages(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "big"}, "data": {"a": big}}));
        assert!(got[0].1.contains("more than the 1536 KiB"), "{got:?}");
    }

    #[test]
    fn a_removed_api_version_is_refused_at_its_apiversion() {
        let got = messages(
            json!({"apiVersion": "policy/v1beta1", "kind": "PodSecurityPolicy",
                                  "metadata": {"name": "restricted"}, "spec": {}}),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "apiVersion");
        assert!(
            got[0]
                .1
                .starts_with("policy/v1beta1 PodSecurityPolicy was removed in Kubernetes 1.25"),
            "{got:?}"
        );
    }
}
