//! What the Flux stage shares: Flux's groups and marks, a Kustomization as found, and
//! the small readers of its YAML (documents, places, paths, URLs).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::spec::Location;

/// Flux's API groups end so.
pub(super) const TOOLKIT: &str = ".toolkit.fluxcd.io";
pub(super) const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
pub(super) const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
pub(super) const HELM_GROUP: &str = "helm.toolkit.fluxcd.io";
pub(super) const EXTENSIONS_GROUP: &str = "source.extensions.fluxcd.io";
/// The label Flux's controller puts on what a Kustomization applies.
pub(super) const NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
pub(super) const NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
pub(super) const SUBSTITUTE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/substitute";

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
    "serviceAccountName",
    "kubeConfig",
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
    pub spec: KustomizationSpec,
    /// Its place in `dependsOn` order: 0 depends on nothing.
    pub wave: i32,
    /// For a source that is an ArtifactGenerator's artifact (`ExternalArtifact`): how the
    /// artifact is made of this repository's files; `path` is then within the artifact.
    pub artifact: Option<Vec<CopyRule>>,
    /// Its `healthCheckExprs`, judging the objects it renders.
    pub health: Vec<std::sync::Arc<crate::spec::settings::HealthRule>>,
    /// Where its `kubeConfig` sends what it renders, with where it says so.
    pub destination: Option<(Destination, Location)>,
}

impl Kustomization {
    /// `Kustomization NS/NAME`, as its errors name it.
    pub(super) fn said(&self) -> String {
        format!("Kustomization {}/{}", self.namespace, self.name)
    }
}

/// A Flux Kustomization's `spec` (kustomize.toolkit.fluxcd.io/v1) as far as driftless reads
/// it, read once `shape::KUSTOMIZATION` has refused a field of the wrong type at its place.
/// Its `path` and `kubeConfig` are read apart, into the Kustomization's own fields.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KustomizationSpec {
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub source_ref: SourceRef,
    pub target_namespace: Option<String>,
    pub name_prefix: Option<String>,
    pub name_suffix: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub patches: Vec<Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub images: Vec<Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub components: Vec<Value>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub common_metadata: CommonMetadata,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub post_build: PostBuild,
    pub prune: Option<bool>,
    pub force: Option<bool>,
    pub suspend: Option<bool>,
    pub service_account_name: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub depends_on: Vec<NamedRef>,
}

/// A Flux source reference: a Kustomization's `sourceRef`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SourceRef {
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

/// Another object by name, in the referrer's namespace unless it says: `dependsOn`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NamedRef {
    pub name: Option<String>,
    pub namespace: Option<String>,
}

/// `commonMetadata`: labels and annotations put on every object built.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CommonMetadata {
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub annotations: BTreeMap<String, String>,
}

/// `postBuild`: the variables substituted in what is built.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostBuild {
    /// `None` when absent: no substitution is done, where an empty map still does one.
    pub substitute: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub substitute_from: Vec<SubstituteFrom>,
}

/// One of `postBuild.substituteFrom`: a ConfigMap or Secret whose data are variables.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SubstituteFrom {
    pub kind: Option<String>,
    pub name: Option<String>,
    pub optional: Option<bool>,
}

/// A Flux HelmRelease's `spec` (helm.toolkit.fluxcd.io/v2) as far as driftless reads it,
/// read once `shape::HELM_RELEASE` has refused a field of the wrong type at its place.
/// `driftDetection` and `postRenderers` stay as written: their readers check each entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HelmReleaseSpec {
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub chart: ChartTemplate,
    pub chart_ref: Option<SourceRef>,
    pub release_name: Option<String>,
    pub target_namespace: Option<String>,
    pub service_account_name: Option<String>,
    pub suspend: Option<bool>,
    /// `null` when absent.
    #[serde(default)]
    pub values: Value,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub values_from: Vec<ValuesReference>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub depends_on: Vec<NamedRef>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub install: Install,
    #[serde(default)]
    pub drift_detection: Value,
    #[serde(default)]
    pub post_renderers: Value,
}

/// `spec.chart`: the chart, as Flux's HelmChart template holds it.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ChartTemplate {
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub spec: ChartSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChartSpec {
    /// A name in a HelmRepository, or a path in a GitRepository.
    pub chart: Option<String>,
    pub version: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub source_ref: SourceRef,
    /// Refused when set: their names only, not their content.
    pub values_files: Option<Value>,
    pub values_file: Option<Value>,
}

/// One of `valuesFrom`: a ConfigMap's or Secret's key read as values.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ValuesReference {
    pub kind: Option<String>,
    pub name: Option<String>,
    pub values_key: Option<String>,
    pub target_path: Option<String>,
    pub optional: Option<bool>,
}

/// `spec.install`, as far as it changes what is rendered.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Install {
    /// `Skip` leaves the chart's CRDs out.
    pub crds: Option<String>,
}

use crate::spec::clusters::{Destination, SecretRef};

/// `spec.kubeConfig` of an object in `ns`, read after its shape is checked: the
/// Secret of the hub that holds the cluster's kubeconfig, which the operator declares
/// as a cluster's (`secret` in `--clusters`) or no cluster is reached through it. A
/// field not carried out: its key and why.
pub(super) fn kube_config(spec: &Value, ns: &str) -> Result<Option<Destination>, (String, String)> {
    let Some(kc) = spec.get("kubeConfig").and_then(Value::as_object) else {
        return Ok(None);
    };
    if let Some(key) = kc.keys().find(|k| *k != "secretRef") {
        let why =
            crate::hydrate::not_carried_out::NotCarriedOut::field(format!("spec.kubeConfig.{key}"))
                .instead("`secretRef`, a kubeconfig in a Secret, is");
        return Err((key.clone(), why.to_string()));
    }
    let secret = &kc["secretRef"];
    let name = secret["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        return Err((
            "secretRef".into(),
            "`spec.kubeConfig.secretRef` names no Secret".into(),
        ));
    }
    Ok(Some(Destination::Secret(SecretRef {
        namespace: ns.to_string(),
        name: name.to_string(),
        key: secret["key"].as_str().map(str::to_string),
        argocd: false,
    })))
}

pub(crate) use super::artifact::CopyRule;

/// Whether ServiceAccount `ns/name` is one of Flux's own controllers' (made by its install,
/// which driftless leaves out, doing its job): naming it (flux2-multi-tenancy's platform
/// Kustomization names `kustomize-controller`) asks for the rights Flux's install gives
/// that account, the cluster's, which are driftless's own here.
pub(super) fn is_flux_controller(ns: &str, name: &str) -> bool {
    const CONTROLLERS: [&str; 7] = [
        "source-controller",
        "kustomize-controller",
        "helm-controller",
        "notification-controller",
        "image-reflector-controller",
        "image-automation-controller",
        "source-watcher",
    ];
    ns == "flux-system" && CONTROLLERS.contains(&name)
}

pub(super) use crate::hydrate::app_yaml::{clean_path, documents, err, line_of, normalise_url};

/// What a GitRepository or OCIRepository of the tree reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Origin {
    /// The repository being read: its URL is a remote of the work tree, bootstrap's,
    /// the artifact being followed (`run --oci`), or one the tree's `[repository] urls`
    /// lists.
    This,
    /// Another repository (its URL, normalised), or one that gives none.
    Other(Option<String>),
    /// Not known: the source is refused for a field of the wrong type.
    Refused(Refused),
}

/// The tree's GitRepositories and OCIRepositories by `Kind/namespace/name`.
pub(super) type Origins = std::collections::BTreeMap<String, Origin>;

/// Whether source `kind/ns/name` is the repository being read: bootstrap's
/// `GitRepository/flux-system/flux-system`, or one whose origin is this repository.
pub(super) fn is_this_repository(kind: &str, ns: &str, name: &str, origins: &Origins) -> bool {
    (kind == "GitRepository" && ns == "flux-system" && name == "flux-system")
        || origins.get(&format!("{kind}/{ns}/{name}")) == Some(&Origin::This)
}

/// Why source `kind/ns/name` holds what reads it, when the tree holds it refused.
pub(super) fn refusal<'a>(
    kind: &str,
    ns: &str,
    name: &str,
    origins: &'a Origins,
) -> Option<&'a Refused> {
    match origins.get(&format!("{kind}/{ns}/{name}")) {
        Some(Origin::Refused(r)) => Some(r),
        _ => None,
    }
}

/// A Flux source's `spec` (GitRepository, OCIRepository, HelmRepository, Bucket) as far as
/// driftless reads it, read once `shape::FLUX_SOURCE` has refused a field of the wrong type.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SourceSpec {
    pub url: Option<String>,
    #[serde(
        rename = "ref",
        default,
        deserialize_with = "crate::hydrate::shape::or_default"
    )]
    pub reference: Reference,
    /// A HelmRepository's `type`: `oci`, or `default` (an HTTP index).
    #[serde(rename = "type")]
    pub repository_type: Option<String>,
    pub insecure: Option<bool>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub secret_ref: NamedRef,
    #[serde(default, deserialize_with = "crate::hydrate::shape::or_default")]
    pub cert_secret_ref: NamedRef,
}

/// A GitRepository's or OCIRepository's `ref`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub(super) struct Reference {
    pub branch: Option<String>,
    pub tag: Option<String>,
    pub semver: Option<String>,
    pub name: Option<String>,
    pub commit: Option<String>,
    pub digest: Option<String>,
}

/// A source of the tree, by `Kind/namespace/name`: what it reads, or why it is refused.
pub(super) type Sources = BTreeMap<String, Result<SourceSpec, Refused>>;

/// An ArtifactGenerator of the tree: the artifacts it makes of its sources.
#[derive(Debug, Clone)]
pub(super) struct Generator {
    pub namespace: String,
    /// Its artifacts' names, read even when it is refused, so that what reads one is held
    /// by its refusal.
    pub names: Vec<String>,
    pub spec: Result<GeneratorSpec, Refused>,
}

/// An ArtifactGenerator's `spec` as far as driftless reads it, read once
/// `shape::ARTIFACT_GENERATOR` has refused a field of the wrong type.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GeneratorSpec {
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub sources: Vec<GeneratorSource>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub artifacts: Vec<ArtifactSpec>,
    /// Not carried out: refused for what reads the generator.
    pub path_pattern: Option<Value>,
}

/// One of an ArtifactGenerator's `sources`: a Flux source, by the alias its rules use.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct GeneratorSource {
    pub alias: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

/// One of an ArtifactGenerator's `artifacts`: its copy rules, read by `artifact::options`
/// (which refuses a key it does not know) and their `from` and `to`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ArtifactSpec {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "crate::hydrate::shape::without_nulls")]
    pub copy: Vec<Value>,
}

/// A source refused for a field of the wrong type: said at that field; what reads the
/// source (a Kustomization, a HelmRelease, an artifact made of it) is held, as Flux's
/// would wait for a source that is never ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    pub at: Location,
    /// `GitRepository NS/NAME`.
    pub source: String,
    pub why: String,
}

impl Refused {
    /// The error that holds `app` (`Kustomization NS/NAME`), said at the source's field.
    pub(super) fn holds(&self, app: &str) -> crate::spec::SpecError {
        err(
            self.at.clone(),
            format!(
                "{app}: its {} is refused ({}); nothing is applied",
                self.source, self.why
            ),
        )
    }
}
