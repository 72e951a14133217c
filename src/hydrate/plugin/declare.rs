//! The plugins an operator declares: each `ConfigManagementPlugin` file of
//! `--plugins-dir` read as Argo CD reads it, and named as an Application names it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::hydrate::walk::{Hidden, Links, Revisit, Walk, WalkError};

/// A `ConfigManagementPlugin` file as Argo CD reads one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PluginFile {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: PluginSpec,
}

#[derive(Debug, Clone, Deserialize)]
struct Metadata {
    name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PluginSpec {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    pub(super) init: Option<Command>,
    pub(super) generate: Command,
    #[serde(default)]
    pub(super) discover: Option<Discover>,
    /// What Argo CD's UI announces; the plugin itself is told only what the Application sets.
    #[serde(default, rename = "parameters")]
    _parameters: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(super) preserve_file_mode: bool,
    /// Git credentials are never handed to a plugin by driftless (a plugin that needs a
    /// private repository reaches it with the operator's own configuration).
    #[serde(default, rename = "provideGitCreds")]
    _provide_git_creds: bool,
    /// Each render has a private copy: there is nothing to lock.
    #[serde(default, rename = "lockRepo")]
    _lock_repo: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Command {
    #[serde(default)]
    pub(super) command: Vec<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Discover {
    #[serde(default)]
    pub(super) file_name: Option<String>,
    #[serde(default)]
    pub(super) find: Option<Find>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Find {
    #[serde(default)]
    pub(super) glob: Option<String>,
    #[serde(default)]
    pub(super) command: Vec<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
}

/// One declared plugin: the name an Application names it by, and its definition.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub(super) name: String,
    pub(super) spec: PluginSpec,
    /// The definition's bytes, for the cache key.
    pub(super) text: Vec<u8>,
}

/// Why the plugins of `--plugins-dir` are not read: every app of a plugin says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclareError {
    #[error("--plugins-dir {dir}: {why}")]
    Dir { dir: String, why: String },
    #[error("{file}: {why}")]
    Read { file: String, why: String },
    /// Not what Argo CD reads as one (the first line of the parser's reason).
    #[error("{file}: not a ConfigManagementPlugin: {why}")]
    NotAPlugin { file: String, why: String },
    #[error("{file}: a {kind} of {api_version}, not an argoproj.io ConfigManagementPlugin")]
    OtherKind {
        file: String,
        kind: String,
        api_version: String,
    },
    #[error("{file}: a ConfigManagementPlugin needs metadata.name and spec.generate.command")]
    Incomplete { file: String },
    #[error("{file}: a second plugin named {name}")]
    Twice { file: String, name: String },
}

/// The plugins declared in `dir`: each `*.yaml`/`*.yml` file one `ConfigManagementPlugin`.
pub fn declared(dir: &Path) -> Result<Vec<Plugin>, DeclareError> {
    let walk = Walk {
        hidden: Hidden::Keep,
        links: Links::Follow,
        revisit: Revisit::Never,
        depth: Some(1),
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for e in walk.iter(dir) {
        match e {
            Ok(e)
                if e.is_file()
                    && e.path
                        .extension()
                        .is_some_and(|x| x == "yaml" || x == "yml") =>
            {
                paths.push(e.path)
            }
            Ok(_) | Err(WalkError::Missing { .. } | WalkError::LeadsOut { .. }) => {}
            Err(WalkError::Read { source, .. }) => {
                return Err(DeclareError::Dir {
                    dir: dir.display().to_string(),
                    why: source.to_string(),
                });
            }
        }
    }
    let mut plugins: Vec<Plugin> = Vec::new();
    for p in paths {
        let shown = p.display().to_string();
        let text = std::fs::read(&p).map_err(|e| DeclareError::Read {
            file: shown.clone(),
            why: e.to_string(),
        })?;
        let file: PluginFile =
            serde_saphyr::from_slice(&text).map_err(|e| DeclareError::NotAPlugin {
                file: shown.clone(),
                why: e.to_string().lines().next().unwrap_or_default().to_string(),
            })?;
        if file.kind != "ConfigManagementPlugin" || !file.api_version.starts_with("argoproj.io/") {
            return Err(DeclareError::OtherKind {
                file: shown,
                kind: file.kind,
                api_version: file.api_version,
            });
        }
        if file.metadata.name.is_empty() || file.spec.generate.command.is_empty() {
            return Err(DeclareError::Incomplete { file: shown });
        }
        let name = match file.spec.version.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => format!("{}-{v}", file.metadata.name),
            None => file.metadata.name.clone(),
        };
        if plugins.iter().any(|q| q.name == name) {
            return Err(DeclareError::Twice { file: shown, name });
        }
        plugins.push(Plugin {
            name,
            spec: file.spec,
            text,
        });
    }
    Ok(plugins)
}
