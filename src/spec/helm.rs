//! The `helm` kind (DESIGN 1.10): a chart release, rendered by the rendering stage
//! (`hydrate::helm`) with `helm template` into manifests that go through everything else
//! as any manifest does. This is its model; `extract::helm` reads it from TOML with every
//! error at its `file:line:col`.

use std::collections::BTreeMap;

use super::{Location, SourceFile, SpecError};

/// One `[helm.NAME]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HelmRelease {
    /// The spec's name.
    pub name: String,
    /// The release namespace: where namespaced objects without one go.
    pub namespace: String,
    /// Where the spec is.
    pub at: Location,
    /// A chart directory in the repository, relative to the spec root; or, with
    /// `repository`, the chart's name there.
    pub chart: String,
    /// An HTTP(S) chart repository the chart is pulled from.
    pub repository: Option<String>,
    /// The chart's version (required with `repository` and for an `oci://` chart).
    pub version: Option<String>,
    /// An `oci://` registry over plain HTTP (only when asked).
    pub plain_http: bool,
    /// Credentials and CA for the chart's source: files in the operator's credentials
    /// directory (`--credentials-dir`), never in the tree.
    pub username_file: Option<String>,
    pub password_file: Option<String>,
    pub ca_file: Option<String>,
    /// TLS without verifying the source's certificate (only when asked).
    pub insecure_skip_tls_verify: bool,
    pub release_name: String,
    /// Relative to the spec root, in order.
    pub values_files: Vec<String>,
    /// Applied last, over the files.
    pub values: serde_json::Value,
    pub include_crds: bool,
    pub skip_tests: bool,
    pub kube_version: Option<String>,
    pub api_versions: Vec<String>,
    /// Policies for every object of the release, as driftless's annotations.
    pub annotations: BTreeMap<String, String>,
    /// Fields left to others on the objects a rule selects (Flux's
    /// `driftDetection.ignore`), joined to their `ignore-fields`.
    pub ignore: Vec<TargetedIgnore>,
    /// Kustomizations run over helm's output, in order, before anything else reads it
    /// (Flux's `postRenderers`): each a kustomization's `patches` and `images`.
    pub post_render: Vec<serde_json::Value>,
}

/// JSON pointers left to others on the objects that match every part given: Flux's
/// `driftDetection.ignore` on a release's objects, Argo CD's `ignoreDifferences` on an
/// app's. A group of `""` is the core group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetedIgnore {
    pub select: super::select::ObjectSelector,
    pub pointers: Vec<String>,
}

/// Every `[helm.NAME]` of the tree's TOML files, and what is wrong with them.
pub fn releases(files: &[SourceFile]) -> (Vec<HelmRelease>, Vec<SpecError>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.path.ends_with(".toml") && f.path != super::settings::SETTINGS_FILE)
    {
        let Ok(text) = std::str::from_utf8(&f.contents) else {
            continue;
        };
        // Only files that name the kind are read twice.
        if !text.contains("helm") {
            continue;
        }
        let (found, errs) = super::extract::helm_releases(&f.path, text);
        out.extend(found);
        errors.extend(errs);
    }
    (out, errors)
}
