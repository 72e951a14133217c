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
mod model;
mod options;
pub(crate) mod part;

pub(crate) use build::Directories;
pub(crate) use marks::marks;
pub(crate) use part::{Part, PartSource, PluginParameter, PluginPart, PluginSource};

use std::collections::BTreeSet;

use serde_json::Value;

use super::app_yaml::err;
use super::apps::{AppFormat, Found, Needs, Registered, Renders, Repository, Setting};
use crate::spec::{Location, SourceFile};

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

/// Argo CD as an app format: its Applications (and ApplicationSets) carried out pass after
/// pass.
pub(crate) struct Format<'a> {
    fleet: &'a crate::spec::clusters::Clusters,
    /// Whether Argo CD's own install is left out (the tree holds Applications, which
    /// driftless carries out in Argo CD's place) or applied as any bundle.
    install: super::app_yaml::Install,
    /// The Applications found in earlier passes, so one met twice (a cycle of apps of
    /// apps) is an error.
    seen: BTreeSet<String>,
    /// The last pass's Applications: their marks go on what they rendered.
    apps: Vec<App>,
}

/// Argo CD among the stage's app formats.
pub(crate) const FORMAT: Registered = Registered {
    needs,
    new: new_format,
};

/// A file that may hold an Application: its sources are read from disk, and may be
/// charts.
fn needs(bytes: &[u8]) -> Needs {
    let has = |needle: &[u8]| super::tree::mentions(bytes, needle);
    // Argo Rollouts' and Workflows' bundles name the group too, and need no disk.
    let app = has(GROUP.as_bytes()) && (has(b"kind: Application") || has(b"kind: \"Application"));
    Needs {
        checkout: app,
        charts: app,
    }
}

fn new_format<'a>(files: &[SourceFile], s: &Setting<'a>) -> Box<dyn AppFormat + 'a> {
    Box::new(Format {
        fleet: s.fleet,
        install: super::app_yaml::Install::of(files, &[GROUP], &["Application", "ApplicationSet"]),
        seen: BTreeSet::new(),
        apps: Vec::new(),
    })
}

impl AppFormat for Format<'_> {
    fn find(
        &mut self,
        files: &mut [SourceFile],
        _: &crate::spec::RenderedApps,
        repo: &mut Repository,
    ) -> Found {
        let (found, apps) = find(files, repo, self.fleet, &mut self.seen, self.install);
        self.apps = apps;
        found
    }

    fn rendered(&mut self, _: &Renders, out: &mut super::Hydrated) {
        out.destinations.extend(self.apps.iter().filter_map(|a| {
            let (to, at) = a.destination.clone()?;
            let app = crate::spec::AppId::Argo {
                name: a.name.clone(),
            };
            Some((app.to_string(), (to, at)))
        }));
    }

    fn install_left_out(&self, objects: &str) -> String {
        format!(
            "{objects} of Argo CD's own install not applied: driftless carries out Argo CD's Applications itself"
        )
    }
}

/// Finds Argo CD's objects in `files`, takes them out of what is applied (their lines
/// blanked), and returns what to render and the Applications that render it. `seen`: the
/// Applications found in earlier passes, so one met twice (a cycle of apps of apps) is an
/// error. `install`: whether Argo CD's own install is left out.
fn find(
    files: &mut [SourceFile],
    repo: &Repository,
    fleet: &crate::spec::clusters::Clusters,
    seen: &mut BTreeSet<String>,
    install: super::app_yaml::Install,
) -> (Found, Vec<App>) {
    let mut found = Found::default();
    let mut found_apps = Vec::new();
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
            (Err(e), Some(name)) => {
                let app = crate::spec::AppId::Argo {
                    name: name.to_string(),
                };
                found
                    .held
                    .push(crate::hydrate::held::AppError::new(app.to_string(), e))
            }
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
    for (at, mut r) in read {
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
        let app = r.app;
        // Argo CD creates the namespace once for the app: with its first render.
        if let Some(ns) = app.namespace.as_ref().filter(|_| app.create_namespace) {
            let first = (r.parts.iter_mut().map(|p| &mut p.marks))
                .chain(r.plugins.iter_mut().map(|p| &mut p.marks))
                .chain(r.releases.iter_mut().filter_map(|r| r.app_marks.as_mut()))
                .next();
            if let Some(marks) = first {
                marks.creates_namespace = Some(ns.clone());
            }
        }
        found.renders.parts.extend(r.parts);
        found.renders.plugins.extend(r.plugins);
        found.renders.releases.extend(r.releases);
        found.notices.extend(r.notices);
        found_apps.push(app);
    }
    (found, found_apps)
}

fn mentions_argo(bytes: &[u8]) -> bool {
    let has = |needle: &[u8]| crate::hydrate::tree::mentions(bytes, needle);
    has(b"argoproj.io") || has(b"part-of: argocd")
}

/// Argo CD's own install (`install.yaml`, its chart): labelled as a part of Argo CD.
fn is_argo_install(v: &Value) -> bool {
    v["metadata"]["labels"]["app.kubernetes.io/part-of"] == "argocd"
}

pub(crate) use crate::spec::argo_output_file as output_file;

#[cfg(test)]
mod tests;
