//! What the Flux stage shares: Flux's groups and marks, a Kustomization as found, and
//! the small readers of its YAML (documents, places, paths, URLs).

use serde_json::Value;

use crate::hydrate::stage::error_at;
use crate::spec::{Location, SpecError};

/// Flux's API groups end so.
pub(super) const TOOLKIT: &str = ".toolkit.fluxcd.io";
pub(super) const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
pub(super) const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
pub(super) const HELM_GROUP: &str = "helm.toolkit.fluxcd.io";
pub(super) const EXTENSIONS_GROUP: &str = "source.extensions.fluxcd.io";
/// Kustomizations that render Kustomizations, this deep at most.
pub const MAX_DEPTH: usize = 8;
/// The label Flux's controller puts on what a Kustomization applies.
pub(super) const NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
pub(super) const NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
pub(super) const SUBSTITUTE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/substitute";
pub(super) const SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";
pub(super) const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// `spec` fields carried out, or accepted as driftless already does what they ask
/// (it waits for every object's health; it has no interval).
pub(super) const CARRIED: &[&str] = &[
    "sourceRef",
    "path",
    "targetNamespace",
    "namePrefix",
    "nameSuffix",
    "patches",
    "images",
    "components",
    "commonMetadata",
    "postBuild",
    "prune",
    "dependsOn",
    "force",
    "suspend",
    "interval",
    "retryInterval",
    "timeout",
    "wait",
    "healthChecks",
    "healthCheckExprs",
];

/// One Flux Kustomization to carry out.
#[derive(Debug, Clone)]
pub struct Kustomization {
    /// Where it is written (a file, or a render's output).
    pub at: Location,
    pub namespace: String,
    pub name: String,
    /// The directory to build, relative to the repository ("" for its root).
    pub path: String,
    pub spec: Value,
    /// Its place in `dependsOn` order: 0 depends on nothing.
    pub wave: i32,
    /// For a source that is an ArtifactGenerator's artifact (`ExternalArtifact`): how the
    /// artifact is made of this repository's files; `path` is then within the artifact.
    pub artifact: Option<Vec<CopyRule>>,
}

/// One of an ArtifactGenerator's `copy` rules, on this repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRule {
    /// A path of the repository: a file, a directory, `DIR/**` (everything under it) or
    /// `DIR/*.yaml` (a glob in one directory).
    pub from: String,
    /// Where in the artifact (a directory when it ends in `/` or is empty).
    pub to: String,
}

/// The documents of a YAML stream, as line ranges (`---` lines between them).
pub(super) fn documents(lines: &[&str]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_end();
        if t == "---" || t.starts_with("--- ") || t == "..." {
            if i > start {
                out.push((start, i));
            }
            start = i + 1;
        }
    }
    if start < lines.len() {
        out.push((start, lines.len()));
    }
    out
}

pub(super) fn err(at: Location, message: String) -> SpecError {
    error_at(&at.file, at.line, at.column, message)
}

/// The line of `key:` in `doc` (its first), counted from the document's start.
pub(super) fn line_of(doc: &str, key: &str) -> usize {
    doc.lines()
        .position(|l| l.trim_start().starts_with(&format!("{key}:")))
        .unwrap_or(0)
}

/// `./apps/staging/` as `apps/staging`; `None` when it climbs out.
pub(super) fn clean_path(raw: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in raw.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// `https://github.com/Org/Repo.git/` and `ssh://git@github.com/org/repo` alike.
pub(super) fn normalise_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/').trim_end_matches(".git");
    let url = url.split_once("://").map_or(url, |(_, rest)| rest);
    let url = url.split_once('@').map_or(url, |(_, rest)| rest);
    url.replacen(':', "/", 1).to_lowercase()
}

/// Whether GitRepository `ns/name` is the repository being read: bootstrap's
/// `flux-system/flux-system`, or one whose URL (`git`: each GitRepository's, normalised)
/// is that one's (`own`).
pub(super) fn is_this_repository(
    ns: &str,
    name: &str,
    git: &std::collections::BTreeMap<String, Option<String>>,
    own: Option<&str>,
) -> bool {
    (ns == "flux-system" && name == "flux-system")
        || own.is_some_and(|own| {
            git.get(&format!("GitRepository/{ns}/{name}"))
                .and_then(Option::as_deref)
                == Some(own)
        })
}
