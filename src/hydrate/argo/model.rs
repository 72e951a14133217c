//! An Argo CD Application's `spec` (argoproj.io/v1alpha1) as far as driftless reads it,
//! typed: read once `shape::APPLICATION` has refused a field of the wrong type at its
//! place. A source's keys that are not carried out are kept (`other`), for its reader to
//! refuse at the line it always has.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ApplicationSpec {
    pub(super) project: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) destination: Destination,
    pub(super) source: Option<Source>,
    pub(super) sources: Option<Vec<Source>>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) sync_policy: SyncPolicy,
    /// Each entry is read, and refused, by `options::ignore`.
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) ignore_differences: Vec<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Destination {
    pub(super) server: Option<String>,
    pub(super) name: Option<String>,
    pub(super) namespace: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SyncPolicy {
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) automated: Automated,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) sync_options: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Automated {
    pub(super) prune: Option<bool>,
    pub(super) self_heal: Option<bool>,
}

/// One of `source` or `sources`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Source {
    #[serde(rename = "repoURL")]
    pub(super) repo_url: Option<String>,
    pub(super) path: Option<String>,
    pub(super) target_revision: Option<String>,
    pub(super) chart: Option<String>,
    /// A name for this source's root, read by another's `$NAME/...` values files.
    #[serde(rename = "ref")]
    pub(super) root_name: Option<String>,
    pub(super) helm: Option<HelmSource>,
    pub(super) kustomize: Option<KustomizeSource>,
    pub(super) directory: Option<DirectorySource>,
    /// Read by `plugin_source`, which says what of it is not Argo CD's.
    pub(super) plugin: Option<Value>,
    /// The keys not read: `name` (the source's name in Argo CD's UI) is accepted.
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct HelmSource {
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) value_files: Vec<String>,
    pub(super) ignore_missing_value_files: Option<bool>,
    /// Values as YAML text; `values_object` wins.
    pub(super) values: Option<String>,
    pub(super) values_object: Option<serde_json::Map<String, Value>>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) parameters: Vec<HelmParameter>,
    pub(super) release_name: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) skip_crds: Option<bool>,
    pub(super) kube_version: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) api_versions: Vec<String>,
    /// The keys not read: those of `HELM_ACCEPTED` are accepted.
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

/// `helm.parameters[]`: a `--set` (or `--set-string`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct HelmParameter {
    pub(super) name: Option<String>,
    pub(super) value: Option<String>,
    pub(super) force_string: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct KustomizeSource {
    pub(super) name_prefix: Option<String>,
    pub(super) name_suffix: Option<String>,
    pub(super) namespace: Option<String>,
    /// `kustomize edit set image`'s `[OLD=]NEW[:TAG|@DIGEST]`.
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) images: Vec<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) common_labels: serde_json::Map<String, Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) common_annotations: serde_json::Map<String, Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) patches: Vec<Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) replicas: Vec<Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) components: Vec<Value>,
    /// The keys not read: `version` is accepted (the `kustomize` kind is the version).
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct DirectorySource {
    pub(super) recurse: Option<bool>,
    pub(super) include: Option<String>,
    pub(super) exclude: Option<String>,
    /// Refused unless empty.
    pub(super) jsonnet: Option<Value>,
    /// The keys not read: each refused.
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

/// `helm` keys accepted as driftless already does what they ask: no tests are run,
/// credentials go to the chart's own repository only, the `helm` kind is the version.
pub(super) const HELM_ACCEPTED: &[&str] = &["skipTests", "passCredentials", "version"];

/// The first of a source's (or its `helm`'s, `kustomize`'s, `directory`'s) keys that
/// is not read nor `accepted`: not carried out.
pub(super) fn not_carried_out<'a>(
    other: &'a BTreeMap<String, Value>,
    accepted: &[&str],
) -> Option<&'a String> {
    other.keys().find(|k| !accepted.contains(&k.as_str()))
}

/// An ApplicationSet's `spec` as far as driftless reads it, read once
/// `shape::APPLICATION_SET` has refused a field of the wrong type. Its template stays as
/// written: the generators' parameters are put in its strings before it is read as an
/// Application.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ApplicationSetSpec {
    /// Each a map from its kind to its body, read as the generator of that kind when it
    /// is carried out (`ListGenerator`, `GitGenerator`, `ClustersGenerator`).
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) generators: Vec<BTreeMap<String, Value>>,
    #[serde(default)]
    pub(super) template: Value,
    pub(super) go_template: Option<bool>,
}

/// A `list` generator: each element's keys are its parameters.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ListGenerator {
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) elements: Vec<serde_json::Map<String, Value>>,
    /// Over the ApplicationSet's template, field by field.
    pub(super) template: Option<serde_json::Map<String, Value>>,
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

/// A `git` generator: this repository's directories or files that match.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct GitGenerator {
    #[serde(rename = "repoURL")]
    pub(super) repo_url: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) directories: Vec<PathRule>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) files: Vec<PathRule>,
    pub(super) template: Option<serde_json::Map<String, Value>>,
    /// `revision` and `requeueAfterSeconds` are accepted (the tree read is the revision
    /// driftless fetched); any other key is refused.
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

/// A `clusters` generator: which of the declared clusters, and values made of their
/// parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClustersGenerator {
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) selector: Selector,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) values: serde_json::Map<String, Value>,
    pub(super) flat_list: Option<bool>,
    pub(super) template: Option<serde_json::Map<String, Value>>,
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

/// A git generator's `directories[]` or `files[]` entry.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct PathRule {
    pub(super) path: Option<String>,
    pub(super) exclude: Option<bool>,
}

/// A Kubernetes label selector: a clusters generator's `selector`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Selector {
    /// Each value checked to be a string as the selector is read.
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub(super) match_labels: BTreeMap<String, Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) match_expressions: Vec<Expression>,
    #[serde(flatten)]
    pub(super) other: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Expression {
    pub(super) key: Option<String>,
    pub(super) operator: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub(super) values: Vec<String>,
}
