//! Argo CD's `Application` (`argoproj.io/v1alpha1`) carried out, not applied: an Argo CD
//! repository is read as Argo CD's repo-server and application controller read it, with no
//! Argo CD in the cluster. Each Application found in the tree's YAML (written there or
//! rendered by another Application: app of apps) renders each of its sources of this
//! repository as Argo CD does: a directory of manifests (`directory.recurse`, `include`,
//! `exclude`), a Kustomize directory (`kustomize.namePrefix`, `images`, `patches`,
//! `commonLabels`, `namespace`...), or a chart (from the repository, or from a chart
//! repository the `helm` kind reaches: `helm.valueFiles`, `values`, `valuesObject`,
//! `parameters`, `releaseName`, `skipCrds`, and `$ref/...` values of another source).
//! Its objects are handed on as `FILE#argo.NAME` (an app of its own, `argo/NAME`) with
//! driftless's marks for what the Application says: `destination.namespace` for objects
//! that name none, its sync wave, `prune`, `Replace=true`, `CreateNamespace=true` and
//! `ignoreDifferences`.
//!
//! An `ApplicationSet`'s `list` and `git` generators make its Applications
//! (`appset.rs`). `AppProject`s are read, not applied; Argo CD's own install is left out, as driftless
//! does its job. What this does not carry out (another repository, a field that changes
//! what Argo CD would do) is an error at its place, and nothing is applied.

mod app;
mod appset;
mod build;
mod chart;
mod marks;
mod options;

pub use build::Directories;
pub use marks::mark;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::app_yaml::{err, normalise_url};
use crate::spec::{Location, SourceFile, SpecError};

const GROUP: &str = "argoproj.io";

/// One Application's marks: what its objects carry once rendered.
#[derive(Debug, Clone, Default)]
pub struct App {
    pub name: String,
    /// `destination.namespace`: where its namespaced objects that name none go.
    pub namespace: Option<String>,
    /// Its `argocd.argoproj.io/sync-wave`.
    pub wave: i32,
    /// `syncPolicy.automated.prune` and not `Prune=false`.
    pub prune: bool,
    /// `syncPolicy.automated.selfHeal`: without it, someone else's edit is reported
    /// (out of sync, in Argo CD's words), not taken back.
    pub self_heal: bool,
    /// `Replace=true`.
    pub replace: bool,
    /// `CreateNamespace=true`.
    pub create_namespace: bool,
    /// Its `ignoreDifferences`, as JSON pointers.
    pub ignore: Vec<crate::spec::helm::TargetedIgnore>,
    /// Its `destination` when it names a cluster (by name or server), with where it
    /// says so: which cluster that is, and whether it is the one served, is the spec
    /// loader's to say (`crate::spec::clusters::Target::place`).
    pub destination: Option<(crate::spec::clusters::Destination, Location)>,
}

/// A directory or Kustomize source of this repository, rendered by [`Directories`].
#[derive(Debug, Clone)]
pub struct Part {
    pub at: Location,
    pub app: String,
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
    Kustomize(Box<super::flux::Build>),
}

/// A source a config management plugin renders (`source.plugin`; the plugin tool,
/// `plugin/`, runs it): where it is and what the plugin is told.
#[derive(Debug, Clone)]
pub struct PluginPart {
    pub at: Location,
    /// The file its output is handed on as.
    pub output: String,
    pub app: String,
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

/// Why `source.plugin` is not read: it is not what Argo CD's `plugin` holds.
#[derive(Debug, thiserror::Error)]
#[error("`source.plugin`: {0}")]
pub(super) struct PluginSourceError(serde_json::Error);

/// `source.plugin` read, or why not (in one line).
fn plugin_source(v: &Value) -> Result<PluginSource, PluginSourceError> {
    if v.is_null() {
        return Ok(PluginSource::default());
    }
    let mut wanted: PluginSource = serde_json::from_value(v.clone()).map_err(PluginSourceError)?;
    wanted.name = wanted.name.filter(|n| !n.is_empty());
    Ok(wanted)
}

/// What one pass over the tree's YAML found of Argo CD.
#[derive(Debug, Default)]
pub struct Found {
    pub parts: Vec<Part>,
    pub plugins: Vec<PluginPart>,
    pub releases: Vec<super::helm::ReleaseAt>,
    pub apps: Vec<App>,
    pub errors: Vec<SpecError>,
    /// Applications read but not carried out, each an app held with its reason.
    pub held: Vec<crate::hydrate::held::AppError>,
    /// Objects of Argo CD's own install left out.
    pub install_left_out: usize,
    /// Directories of the spec root (relative to it) an Application renders: their files
    /// are its, not the tree's own.
    pub consumed: Vec<String>,
    /// What is read otherwise than Argo CD would, said by `validate` and the daemon.
    pub notices: Vec<String>,
}

/// What the finder knows of this repository: where it lies, the spec root within it,
/// and the URLs it is named by.
pub struct Repository<'a> {
    pub repo: Option<&'a Path>,
    /// The spec root, relative to the repository.
    pub root: Option<&'a str>,
    /// Normalised.
    pub urls: BTreeSet<String>,
    /// The names the revision being read goes by (`source::Checkout::revisions`).
    pub revisions: &'a [String],
}

impl Repository<'_> {
    pub(super) fn names(&self, url: &str) -> bool {
        self.urls.contains(&normalise_url(url))
    }
}

/// Finds Argo CD's objects in `files`, takes them out of what is applied (their lines
/// blanked), and returns what to render. `seen`: the Applications found in earlier
/// passes, so one met twice (a cycle of apps of apps) is an error.
/// `install`: whether Argo CD's own install is left out (the tree holds Applications,
/// which driftless carries out in Argo CD's place) or applied as any bundle.
pub fn find(
    files: &mut [SourceFile],
    repo: &Repository,
    fleet: &crate::spec::clusters::Clusters,
    seen: &mut BTreeSet<String>,
    install: super::app_yaml::Install,
) -> Found {
    let mut found = Found::default();
    let mut apps: Vec<(Location, String, Value)> = Vec::new();
    super::app_yaml::take_out(files, mentions_argo, |at, doc, v| {
        let api = v["apiVersion"].as_str().unwrap_or_default();
        let group = api.split('/').next().unwrap_or_default();
        if group != GROUP {
            // Argo CD's own install is left out: driftless does its job.
            let left_out = install == super::app_yaml::Install::LeftOut && is_argo_install(&v);
            found.install_left_out += usize::from(left_out);
            return left_out;
        }
        match v["kind"].as_str().unwrap_or_default() {
            "Application" => {
                apps.push((at, doc.to_string(), v));
                true
            }
            // Projects limit what Argo CD's users may sync; driftless's operator says
            // that with its own flags.
            "AppProject" => true,
            // Not a Kubernetes object, and a tree never brings a command to run.
            "ConfigManagementPlugin" => {
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                found.notices.push(format!(
                    "{at}: ConfigManagementPlugin {name} is not run from the tree: plugins are declared by driftless's operator (--plugins-dir)"
                ));
                true
            }
            "ApplicationSet" => {
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                match appset::applications(&v, doc, repo, fleet) {
                    Ok(made) => {
                        apps.extend(made.into_iter().map(|a| (at.clone(), doc.to_string(), a)))
                    }
                    Err((line, why)) => found.errors.push(err(
                        Location {
                            line: at.line + line,
                            ..at
                        },
                        format!("ApplicationSet {name}: {why}; nothing is applied"),
                    )),
                }
                true
            }
            // Argo Rollouts, Workflows and Events are ordinary objects to apply.
            _ => false,
        }
    });
    let mut read = Vec::new();
    for (at, doc, v) in apps {
        match (
            app::read(&at, &doc, &v, repo),
            v["metadata"]["name"].as_str(),
        ) {
            (Ok(r), _) => read.push((at, r)),
            // Without a name it is no app: what it applied could not be kept.
            (Err(e), None | Some("")) => found.errors.push(e),
            (Err(e), Some(name)) => found.held.push(crate::hydrate::held::AppError::new(
                format!("argo/{name}"),
                e,
            )),
        }
    }
    // Where a file lies in the repository, and a repository path within the spec root.
    let root = repo.root.unwrap_or_default();
    let in_repo = |file: &str| {
        let base = file.split('#').next().unwrap_or(file);
        match root {
            "" => base.to_string(),
            r => format!("{r}/{base}"),
        }
    };
    let under =
        |p: &str, dir: &str| dir.is_empty() || p == dir || p.starts_with(&format!("{dir}/"));
    // An Application whose directory holds it is the tree being read (the usual root app
    // that manages itself): its files are read as they are.
    read.retain(|(at, r)| !r.paths.iter().any(|p| under(&in_repo(&at.file), p)));
    let within_root = |p: &String| match root {
        "" => Some(p.clone()),
        r => p
            .strip_prefix(&format!("{r}/"))
            .map(str::to_string)
            .or((p == r).then(String::new)),
    };
    let all: Vec<String> = read
        .iter()
        .flat_map(|(_, r)| r.paths.iter().filter_map(within_root))
        .collect();
    // An Application in a directory another renders comes back through that render.
    read.retain(|(at, _)| {
        let base = at.file.split('#').next().unwrap_or(&at.file);
        !all.iter().any(|c| under(base, c))
    });
    found.consumed = read
        .iter()
        .flat_map(|(_, r)| r.paths.iter().filter_map(within_root))
        .collect();
    for (at, r) in read {
        if !seen.insert(r.app.name.clone()) {
            found.errors.push(err(
                at,
                format!(
                    "Application {:?} is met twice (two with one name, or apps of apps in a cycle); nothing is applied",
                    r.app.name
                ),
            ));
            continue;
        }
        found.parts.extend(r.parts);
        found.plugins.extend(r.plugins);
        found.releases.extend(r.releases);
        found.notices.extend(r.notices);
        found.apps.push(r.app);
    }
    found
}

fn mentions_argo(bytes: &[u8]) -> bool {
    let has = |needle: &[u8]| crate::hydrate::tree::mentions(bytes, needle);
    has(b"argoproj.io") || has(b"part-of: argocd")
}

/// Argo CD's own install (`install.yaml`, its chart): labelled as a part of Argo CD.
fn is_argo_install(v: &Value) -> bool {
    v["metadata"]["labels"]["app.kubernetes.io/part-of"] == "argocd"
}

pub use crate::spec::{argo_app_name as app_of, argo_output_file as output_file};

/// The apps found, by name: what [`mark`] reads.
pub fn by_name(apps: &[App]) -> BTreeMap<&str, &App> {
    apps.iter().map(|a| (a.name.as_str(), a)).collect()
}

#[cfg(test)]
mod tests;
