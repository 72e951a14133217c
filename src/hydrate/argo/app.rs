//! One Application read: each source as what renders it (a directory, a Kustomize
//! directory, a chart release), and its marks. Every field that changes what Argo CD would
//! do is carried out or refused here, at its line.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::chart::{chart_release, local_release};
use super::{App, Part, PartSource, PluginPart, Repository, output_file};
use crate::hydrate::app_yaml::{clean_path, err, line_of, unknown};
use crate::hydrate::helm::ReleaseAt;
use crate::spec::helm::TargetedIgnore;
use crate::spec::select::{ObjectSelector, Pattern};
use crate::spec::{Location, SpecError};

/// `spec` fields carried out, or accepted as driftless already does what they ask.
const CARRIED: &[&str] = &[
    "project",
    "source",
    "sources",
    "destination",
    "syncPolicy",
    "ignoreDifferences",
    "info",
    "revisionHistoryLimit",
];
const SOURCE_CARRIED: &[&str] = &[
    "repoURL",
    "path",
    "targetRevision",
    "chart",
    "helm",
    "kustomize",
    "directory",
    "ref",
    "name",
    "plugin",
];
const KUSTOMIZE_CARRIED: &[&str] = &[
    "namePrefix",
    "nameSuffix",
    "images",
    "commonLabels",
    "commonAnnotations",
    "namespace",
    "patches",
    "replicas",
    "components",
    "version",
];
/// Sync options driftless carries out, or does always (it applies server-side, only
/// what differs, validates with the apiserver's schema, and prunes last).
const SYNC_OPTIONS: &[&str] = &[
    "CreateNamespace",
    "ServerSideApply",
    "Replace",
    "PruneLast",
    "Prune",
    "Validate",
    "RespectIgnoreDifferences",
    "ApplyOutOfSyncOnly",
    "SkipDryRunOnMissingResource",
];

/// What one Application renders, and its marks.
pub(super) struct Read {
    pub(super) app: App,
    /// The directories of this repository it reads (relative to it).
    pub(super) paths: Vec<String>,
    pub(super) parts: Vec<Part>,
    pub(super) plugins: Vec<PluginPart>,
    pub(super) releases: Vec<ReleaseAt>,
    pub(super) notices: Vec<String>,
}

/// A source of this repository is read in place, at the revision being synced: one whose
/// `targetRevision` names another (a tag, another branch) would be read there by Argo CD.
fn other_revisions(name: &str, sources: &[Value], repo: &Repository) -> Vec<String> {
    let Some(synced) = repo.revisions.first() else {
        return Vec::new();
    };
    sources
        .iter()
        .filter(|s| s["chart"].is_null() && repo.names(s["repoURL"].as_str().unwrap_or_default()))
        .filter_map(|s| s["targetRevision"].as_str())
        .filter(|t| !t.is_empty() && *t != "HEAD" && !repo.revisions.iter().any(|r| r == t))
        .map(|t| {
            format!(
                "Application {name} names revision {t} of this repository: driftless reads it in place, at the revision being synced ({synced}), not at {t}"
            )
        })
        .collect()
}

pub(super) fn read(
    at: &Location,
    doc: &str,
    v: &Value,
    repo: &Repository,
) -> Result<Read, SpecError> {
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let field_at = |key: &str| Location {
        line: at.line + line_of(doc, key),
        ..at.clone()
    };
    let refuse = |key: &str, what: String| {
        err(
            field_at(key),
            format!("Application {name}: {what}; nothing is applied"),
        )
    };
    if name.is_empty() {
        return Err(err(
            at.clone(),
            "an Argo CD Application without metadata.name".into(),
        ));
    }
    let spec = v["spec"].as_object().cloned().unwrap_or_default();
    if let Some(key) = unknown(&v["spec"], CARRIED) {
        return Err(refuse(
            key,
            format!("`spec.{key}` is not carried out by driftless yet"),
        ));
    }
    let mut app = App {
        name: name.to_string(),
        namespace: v["spec"]["destination"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_string),
        prune: v["spec"]["syncPolicy"]["automated"]["prune"].as_bool() == Some(true),
        self_heal: v["spec"]["syncPolicy"]["automated"]["selfHeal"].as_bool() == Some(true),
        ..App::default()
    };
    if let Some(server) = v["spec"]["destination"]["server"].as_str()
        && server != "https://kubernetes.default.svc"
    {
        return Err(refuse(
            "server",
            format!("its destination {server} is not the cluster driftless applies to"),
        ));
    }
    if let Some(cluster) = v["spec"]["destination"]["name"].as_str()
        && cluster != "in-cluster"
    {
        return Err(refuse(
            "destination",
            format!("its destination cluster {cluster:?} is not the cluster driftless applies to"),
        ));
    }
    if let Some(wave) = v["metadata"]["annotations"][crate::spec::order::ARGO_WAVE].as_str() {
        app.wave = wave.trim().parse().map_err(|_| {
            refuse(
                crate::spec::order::ARGO_WAVE,
                format!("sync wave {wave:?} is not a whole number"),
            )
        })?;
    }
    for option in v["spec"]["syncPolicy"]["syncOptions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = option.as_str().unwrap_or_default();
        let (key, value) = text.split_once('=').unwrap_or((text, ""));
        if !SYNC_OPTIONS.contains(&key) {
            return Err(refuse(
                "syncOptions",
                format!("sync option {text:?} is not carried out by driftless yet"),
            ));
        }
        let on = value.eq_ignore_ascii_case("true");
        match key {
            "CreateNamespace" => app.create_namespace = on,
            "Replace" => app.replace = on,
            "Prune" if value.eq_ignore_ascii_case("false") => app.prune = false,
            _ => {}
        }
    }
    if app.create_namespace && app.namespace.is_none() {
        return Err(refuse(
            "syncOptions",
            "`CreateNamespace=true` with no `destination.namespace`".into(),
        ));
    }
    for (i, d) in v["spec"]["ignoreDifferences"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        app.ignore.push(ignore(d).map_err(|why| {
            refuse(
                "ignoreDifferences",
                format!("ignoreDifferences[{i}]: {why}"),
            )
        })?);
    }
    let sources: Vec<Value> = match (spec.get("source"), spec.get("sources")) {
        (Some(s), None) => vec![s.clone()],
        (None, Some(Value::Array(list))) if !list.is_empty() => list.clone(),
        (Some(_), Some(_)) => {
            return Err(refuse("sources", "has both `source` and `sources`".into()));
        }
        _ => return Err(refuse("spec", "names no source".into())),
    };
    // `ref` sources: their repository's root, for `$ref/...` values files.
    let mut refs: BTreeMap<String, ()> = BTreeMap::new();
    for s in &sources {
        if let Some(r) = s["ref"].as_str() {
            let url = s["repoURL"].as_str().unwrap_or_default();
            if !repo.names(url) {
                return Err(refuse(
                    "ref",
                    format!("its source {r:?} is {url}, not the repository being read"),
                ));
            }
            refs.insert(r.to_string(), ());
        }
    }
    let mut out = Read {
        app,
        paths: Vec::new(),
        parts: Vec::new(),
        plugins: Vec::new(),
        releases: Vec::new(),
        notices: other_revisions(name, &sources, repo),
    };
    for (index, s) in sources.iter().enumerate() {
        let file = output_file(&at.file, name, index);
        if let Some(key) = unknown(s, SOURCE_CARRIED) {
            return Err(refuse(
                key,
                format!("`source.{key}` is not carried out by driftless yet"),
            ));
        }
        let url = s["repoURL"].as_str().unwrap_or_default();
        if s["ref"].is_string() && s["path"].is_null() && s["chart"].is_null() {
            continue; // only a root for values files
        }
        if let Some(chart) = s["chart"].as_str() {
            let release = chart_release(at, name, &out.app, s, chart, &refs, repo)
                .map_err(|why| refuse("chart", why.to_string()))?;
            out.releases.push(ReleaseAt { release, file });
            continue;
        }
        if !repo.names(url) {
            return Err(refuse(
                "repoURL",
                format!(
                    "its source {url} is not the repository being read (not followed: name this repository's URLs in .driftless.toml [repository] urls if it is)"
                ),
            ));
        }
        let raw = s["path"].as_str().unwrap_or("");
        let path = clean_path(raw)
            .ok_or_else(|| refuse("path", format!("path {raw:?} leads out of the repository")))?;
        out.paths.push(path.clone());
        if let Some(plugin) = s.get("plugin") {
            if let Some(other) = ["helm", "kustomize", "directory"]
                .into_iter()
                .find(|k| s.get(*k).is_some())
            {
                return Err(refuse(
                    "plugin",
                    format!("its source names both `plugin` and `{other}`; Argo CD takes one"),
                ));
            }
            let wanted =
                super::plugin_source(plugin).map_err(|why| refuse("plugin", why.to_string()))?;
            out.plugins.push(PluginPart {
                at: at.clone(),
                output: file,
                app: name.to_string(),
                namespace: out.app.namespace.clone().unwrap_or_default(),
                project: v["spec"]["project"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                repo_url: url.to_string(),
                target_revision: s["targetRevision"].as_str().unwrap_or_default().to_string(),
                path,
                wanted,
            });
            continue;
        }
        let on_disk = |f: &str| repo.repo.is_some_and(|r| r.join(&path).join(f).is_file());
        let is_helm = s.get("helm").is_some() || on_disk("Chart.yaml");
        let is_kustomize = s.get("kustomize").is_some()
            || crate::hydrate::tree::KUSTOMIZATION_FILES
                .iter()
                .any(|f| on_disk(f));
        if is_helm {
            let release = local_release(at, name, &out.app, s, &path, &refs, repo)
                .map_err(|why| refuse("helm", why.to_string()))?;
            out.releases.push(ReleaseAt { release, file });
        } else if is_kustomize {
            let k = kustomization(at, name, s, &path)
                .map_err(|why| refuse("kustomize", why.to_string()))?;
            out.parts.push(Part {
                at: at.clone(),
                app: name.to_string(),
                output: file,
                source: PartSource::Kustomize(k),
            });
        } else {
            let d = &s["directory"];
            if let Some(key) = unknown(d, &["recurse", "include", "exclude", "jsonnet"]) {
                return Err(refuse(
                    key,
                    format!("`directory.{key}` is not carried out by driftless yet"),
                ));
            }
            if d["jsonnet"].as_object().is_some_and(|j| !j.is_empty()) {
                return Err(refuse(
                    "jsonnet",
                    "`directory.jsonnet` is not carried out by driftless yet".into(),
                ));
            }
            out.parts.push(Part {
                at: at.clone(),
                app: name.to_string(),
                output: file,
                source: PartSource::Directory {
                    path,
                    recurse: d["recurse"].as_bool() == Some(true),
                    include: d["include"].as_str().map(str::to_string),
                    exclude: d["exclude"].as_str().map(str::to_string),
                },
            });
        }
    }
    Ok(out)
}

/// Why an `ignoreDifferences` entry is not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum IgnoreError {
    #[error(
        "`managedFieldsManagers` is not carried out by driftless yet (its fields are another manager's already)"
    )]
    ManagedFieldsManagers,
    #[error(
        "the jq expression {jq:?} is not a plain path (`.a.b`, `.a[\"k\"]`); write it as a JSON pointer"
    )]
    NotAPlainPath { jq: String },
    #[error("names no `kind`")]
    NoKind,
}

/// Why an Application's `kustomize` options are not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum KustomizeError {
    #[error("`kustomize.{key}` is not carried out by driftless yet")]
    NotCarriedOut { key: String },
    #[error("image {image:?} names no image")]
    NoImage { image: String },
}

/// An `ignoreDifferences` entry as JSON pointers: `jsonPointers` as they are, and
/// `jqPathExpressions` that are plain paths (`.spec.replicas`, `.data["k"]`).
fn ignore(d: &Value) -> Result<TargetedIgnore, IgnoreError> {
    if d.get("managedFieldsManagers").is_some() {
        return Err(IgnoreError::ManagedFieldsManagers);
    }
    let mut pointers: Vec<String> = d["jsonPointers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    for jq in d["jqPathExpressions"].as_array().into_iter().flatten() {
        let jq = jq.as_str().unwrap_or_default();
        pointers
            .push(jq_pointer(jq).ok_or_else(|| IgnoreError::NotAPlainPath { jq: jq.to_string() })?);
    }
    let kind = d["kind"].as_str().unwrap_or_default();
    if kind.is_empty() {
        return Err(IgnoreError::NoKind);
    }
    let exact = |key: &str| d[key].as_str().map(|s| Pattern::Exact(s.to_string()));
    Ok(TargetedIgnore {
        select: ObjectSelector {
            group: Some(d["group"].as_str().unwrap_or_default().to_string()),
            kind: Some(kind.to_string()),
            name: exact("name"),
            namespace: exact("namespace"),
            ..ObjectSelector::default()
        },
        pointers,
    })
}

/// `.spec.replicas` or `.data["a.b"]` as `/spec/replicas`, `/data/a.b`.
fn jq_pointer(jq: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = jq.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let key;
        if let Some(r) = rest.strip_prefix("[\"") {
            let end = r.find("\"]")?;
            key = &r[..end];
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            if let Some(r2) = r.strip_prefix("[\"") {
                let end = r2.find("\"]")?;
                key = &r2[..end];
                rest = &r2[end + 2..];
            } else {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                key = &r[..end];
                rest = &r[end..];
                if key.is_empty()
                    || !key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    return None;
                }
            }
        } else {
            return None;
        }
        out.push('/');
        out.push_str(&key.replace('~', "~0").replace('/', "~1"));
    }
    Some(out)
}

/// The Application's `kustomize` options as the Flux Kustomization fields the build
/// puts into the kustomization (Argo CD's `kustomize edit` does the same).
fn kustomization(
    at: &Location,
    name: &str,
    s: &Value,
    path: &str,
) -> Result<crate::hydrate::flux::Kustomization, KustomizeError> {
    let k = &s["kustomize"];
    if let Some(key) = unknown(k, KUSTOMIZE_CARRIED) {
        return Err(KustomizeError::NotCarriedOut {
            key: key.to_string(),
        });
    }
    let mut spec = serde_json::Map::new();
    if let Some(ns) = k["namespace"].as_str() {
        spec.insert("targetNamespace".into(), json!(ns));
    }
    for field in [
        "namePrefix",
        "nameSuffix",
        "patches",
        "components",
        "commonLabels",
        "commonAnnotations",
        "replicas",
    ] {
        if let Some(v) = k.get(field) {
            spec.insert(field.into(), v.clone());
        }
    }
    if let Some(images) = k["images"].as_array() {
        let list: Result<Vec<Value>, KustomizeError> = images
            .iter()
            .map(|i| image(i.as_str().unwrap_or_default()))
            .collect();
        spec.insert("images".into(), Value::Array(list?));
    }
    Ok(crate::hydrate::flux::Kustomization {
        at: at.clone(),
        namespace: "argo".into(),
        name: name.to_string(),
        path: path.to_string(),
        spec: Value::Object(spec),
        wave: 0,
        artifact: None,
        health: Vec::new(),
    })
}

/// `kustomize edit set image`'s `[OLD=]NEW[:TAG|@DIGEST]` as a kustomization image.
fn image(text: &str) -> Result<Value, KustomizeError> {
    let (old, new) = match text.split_once('=') {
        Some((o, n)) => (Some(o), n),
        None => (None, text),
    };
    let (new_name, tag, digest) = match new.split_once('@') {
        Some((n, d)) => (n, None, Some(d)),
        None => {
            let slash = new.rfind('/').map_or(0, |i| i + 1);
            match new[slash..].split_once(':') {
                Some((n, t)) => (&new[..slash + n.len()], Some(t), None),
                None => (new, None, None),
            }
        }
    };
    if new_name.is_empty() {
        return Err(KustomizeError::NoImage {
            image: text.to_string(),
        });
    }
    let mut out = serde_json::Map::new();
    out.insert("name".into(), json!(old.unwrap_or(new_name)));
    if old.is_some_and(|o| o != new_name) {
        out.insert("newName".into(), json!(new_name));
    }
    if let Some(t) = tag {
        out.insert("newTag".into(), json!(t));
    }
    if let Some(d) = digest {
        out.insert("digest".into(), json!(d));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn jq_paths_become_pointers() {
        assert_eq!(
            jq_pointer(".spec.replicas").as_deref(),
            Some("/spec/replicas")
        );
        assert_eq!(
            jq_pointer(".data[\"a.b/c\"]").as_deref(),
            Some("/data/a.b~1c")
        );
        assert_eq!(
            jq_pointer(".spec.template.spec.containers[] | select(.name == \"x\")"),
            None
        );
    }

    #[test]
    fn refusals_say_what_is_not_carried_out() {
        let jq = serde_json::json!({"kind": "Deployment", "jqPathExpressions": [".a | b"]});
        assert_eq!(
            ignore(&jq).unwrap_err().to_string(),
            "the jq expression \".a | b\" is not a plain path (`.a.b`, `.a[\"k\"]`); write it as a JSON pointer"
        );
        assert_eq!(
            ignore(&serde_json::json!({})).unwrap_err().to_string(),
            "names no `kind`"
        );
        assert_eq!(
            image("=:1").unwrap_err().to_string(),
            "image \"=:1\" names no image"
        );
    }

    #[test]
    fn images_as_kustomize_edit_reads_them() {
        assert_eq!(
            image("nginx=registry.local/nginx:1.27").unwrap(),
            json!({"name": "nginx", "newName": "registry.local/nginx", "newTag": "1.27"})
        );
        assert_eq!(
            image("localhost:5000/web:2").unwrap(),
            json!({"name": "localhost:5000/web", "newTag": "2"})
        );
        assert_eq!(
            image("web@sha256:abc").unwrap(),
            json!({"name": "web", "digest": "sha256:abc"})
        );
    }
}
