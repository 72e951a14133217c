//! What an app's sources render as, for the tools that render them: a directory or a
//! Kustomize directory of this repository (any app format's, rendered by `build.rs`), a
//! source a config management plugin renders (`plugin/`). Apart from the finder, so that
//! `hydrate/apps.rs`, which every format's finder imports, can name them.

use std::collections::BTreeMap;

use crate::spec::Location;

/// A directory or Kustomize source of this repository, rendered by [`super::Directories`] (for
/// any app format).
#[derive(Debug, Clone)]
pub struct Part {
    pub at: Location,
    /// The app that renders it, as its render's command names it (`Argo CD Application
    /// NAME`).
    pub by: String,
    /// The app it is the render of.
    pub app: crate::spec::AppId,
    /// What its app puts on its objects.
    pub marks: crate::hydrate::marks::AppMarks,
    /// The file its output is handed on as.
    pub output: String,
    pub source: PartSource,
}

#[derive(Debug, Clone)]
pub enum PartSource {
    /// Plain manifests of a directory of the repository (relative to it).
    Directory {
        path: String,
        recurse: bool,
        include: Option<String>,
        exclude: Option<String>,
    },
    /// A Kustomize directory, with the Application's `kustomize` options put in.
    Kustomize(Box<crate::hydrate::flux::build::Build>),
}

/// A source a config management plugin renders (`source.plugin`; the plugin tool,
/// `plugin/`, runs it): where it is and what the plugin is told.
#[derive(Debug, Clone)]
pub struct PluginPart {
    pub at: Location,
    /// The file its output is handed on as.
    pub output: String,
    pub app: String,
    /// What its app puts on its objects.
    pub marks: crate::hydrate::marks::AppMarks,
    /// `destination.namespace` (empty when none).
    pub namespace: String,
    pub project: String,
    pub repo_url: String,
    pub target_revision: String,
    /// Its directory, relative to the repository.
    pub path: String,
    pub wanted: PluginSource,
}

/// An Application's `source.plugin`: the plugin it names (none: the one whose discover
/// rules match), its `env` and its `parameters`, as written.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSource {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub env: Vec<PluginEnv>,
    #[serde(default)]
    pub parameters: Vec<PluginParameter>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginEnv {
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// One parameter: a string, an array or a map (sent to the plugin as Argo CD sends it).
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PluginParameter {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<BTreeMap<String, String>>,
}
