//! One Application read: each source as what renders it (a directory, a Kustomize
//! directory, a chart release), and its marks. Every field that changes what Argo CD would
//! do is carried out or refused here, at its line.

use std::collections::BTreeMap;

use serde_json::Value;

use super::chart::{chart_release, local_release};
use super::options::{ignore, kustomization};
use super::{App, Part, PartSource, PluginPart, output_file};
use crate::hydrate::app_yaml::{clean_path, err, line_of, unknown};
use crate::hydrate::apps::Repository;
use crate::hydrate::helm::ReleaseAt;
use crate::hydrate::not_carried_out::NotCarriedOut;
use crate::hydrate::shape;
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

/// One Application as it is read: where it is, its name, and its refusals, each at the
/// line of the field at fault.
struct Reading<'a> {
    at: &'a Location,
    doc: &'a str,
    v: &'a Value,
    repo: &'a Repository<'a>,
    name: &'a str,
}

pub(super) fn read(
    at: &Location,
    doc: &str,
    v: &Value,
    repo: &Repository,
) -> Result<Read, SpecError> {
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let r = Reading {
        at,
        doc,
        v,
        repo,
        name,
    };
    if name.is_empty() {
        return Err(err(
            at.clone(),
            "an Argo CD Application without metadata.name".into(),
        ));
    }
    let spec = v["spec"].as_object().cloned().unwrap_or_default();
    if let Some(key) = unknown(&v["spec"], CARRIED) {
        return Err(r.refuse(key, NotCarriedOut::field(format!("spec.{key}")).to_string()));
    }
    shape::check(&v["spec"], &shape::APPLICATION, "spec")
        .map_err(|e| r.refuse(&e.key, e.to_string()))?;
    let app = r.app()?;
    let sources: Vec<Value> = match (spec.get("source"), spec.get("sources")) {
        (Some(s), None) => vec![s.clone()],
        (None, Some(Value::Array(list))) if !list.is_empty() => list.clone(),
        (Some(_), Some(_)) => {
            return Err(r.refuse("sources", "has both `source` and `sources`".into()));
        }
        _ => return Err(r.refuse("spec", "names no source".into())),
    };
    let refs = r.refs(&sources)?;
    let mut out = Read {
        app,
        paths: Vec::new(),
        parts: Vec::new(),
        plugins: Vec::new(),
        releases: Vec::new(),
        notices: other_revisions(name, &sources, repo),
    };
    for (index, s) in sources.iter().enumerate() {
        r.source(&mut out, index, s, &refs)?;
    }
    Ok(out)
}

impl Reading<'_> {
    fn field_at(&self, key: &str) -> Location {
        Location {
            line: self.at.line + line_of(self.doc, key),
            ..self.at.clone()
        }
    }

    fn refuse(&self, key: &str, what: String) -> SpecError {
        err(
            self.field_at(key),
            format!("Application {}: {what}; nothing is applied", self.name),
        )
    }

    /// The app the Application is: its destination, wave, sync policy and options, and
    /// what it leaves to others.
    fn app(&self) -> Result<App, SpecError> {
        let v = self.v;
        let mut app = App {
            name: self.name.to_string(),
            namespace: v["spec"]["destination"]["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            prune: v["spec"]["syncPolicy"]["automated"]["prune"].as_bool() == Some(true),
            self_heal: v["spec"]["syncPolicy"]["automated"]["selfHeal"].as_bool() == Some(true),
            ..App::default()
        };
        use crate::spec::clusters::Destination;
        let destination = &v["spec"]["destination"];
        app.destination = match (destination["name"].as_str(), destination["server"].as_str()) {
            (Some(name), Some(server)) if !name.is_empty() && !server.is_empty() => {
                return Err(self.refuse(
                    "destination",
                    "its destination gives both `name` and `server`; Argo CD takes one".into(),
                ));
            }
            (Some(name), _) if !name.is_empty() => {
                // `name:` first matches the Application's own.
                Some((
                    Destination::Named(name.to_string()),
                    self.field_at("destination"),
                ))
            }
            (_, Some(server)) if !server.is_empty() => Some((
                Destination::Server(server.to_string()),
                self.field_at("server"),
            )),
            _ => None,
        };
        if let Some(wave) = v["metadata"]["annotations"][crate::spec::order::ARGO_WAVE].as_str() {
            app.wave = wave.trim().parse().map_err(|_| {
                self.refuse(
                    crate::spec::order::ARGO_WAVE,
                    format!("sync wave {wave:?} is not a whole number"),
                )
            })?;
        }
        self.sync_options(&mut app)?;
        for (i, d) in v["spec"]["ignoreDifferences"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            app.ignore.push(ignore(d).map_err(|why| {
                self.refuse(
                    "ignoreDifferences",
                    format!("ignoreDifferences[{i}]: {why}"),
                )
            })?);
        }
        Ok(app)
    }

    /// `syncPolicy.syncOptions`: those carried out set on `app`, the rest refused.
    fn sync_options(&self, app: &mut App) -> Result<(), SpecError> {
        for option in self.v["spec"]["syncPolicy"]["syncOptions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let text = option.as_str().unwrap_or_default();
            let (key, value) = text.split_once('=').unwrap_or((text, ""));
            if !SYNC_OPTIONS.contains(&key) {
                return Err(self.refuse(
                    "syncOptions",
                    NotCarriedOut::named(format!("sync option {text:?}")).to_string(),
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
            return Err(self.refuse(
                "syncOptions",
                "`CreateNamespace=true` with no `destination.namespace`".into(),
            ));
        }
        Ok(())
    }

    /// `ref` sources: their repository's root, for `$ref/...` values files.
    fn refs(&self, sources: &[Value]) -> Result<BTreeMap<String, ()>, SpecError> {
        let mut refs: BTreeMap<String, ()> = BTreeMap::new();
        for s in sources {
            if let Some(r) = s["ref"].as_str() {
                let url = s["repoURL"].as_str().unwrap_or_default();
                if !self.repo.names(url) {
                    return Err(self.refuse(
                        "ref",
                        format!("its source {r:?} is {url}, not the repository being read"),
                    ));
                }
                refs.insert(r.to_string(), ());
            }
        }
        Ok(refs)
    }

    /// Source `index` as what renders it: a chart release, a plugin's render, or a
    /// directory of this repository.
    fn source(
        &self,
        out: &mut Read,
        index: usize,
        s: &Value,
        refs: &BTreeMap<String, ()>,
    ) -> Result<(), SpecError> {
        let (at, name) = (self.at, self.name);
        let file = output_file(&at.file, name, index);
        if let Some(key) = unknown(s, SOURCE_CARRIED) {
            return Err(self.refuse(
                key,
                NotCarriedOut::field(format!("source.{key}")).to_string(),
            ));
        }
        let url = s["repoURL"].as_str().unwrap_or_default();
        if s["ref"].is_string() && s["path"].is_null() && s["chart"].is_null() {
            return Ok(()); // only a root for values files
        }
        if let Some(chart) = s["chart"].as_str() {
            let release = chart_release(at, name, &out.app, s, chart, refs, self.repo)
                .map_err(|why| self.refuse("chart", why.to_string()))?;
            out.releases.push(ReleaseAt { release, file });
            return Ok(());
        }
        if !self.repo.names(url) {
            return Err(self.refuse(
                "repoURL",
                format!(
                    "its source {url} is not the repository being read (not followed: name this repository's URLs in .driftless.toml [repository] urls if it is)"
                ),
            ));
        }
        let raw = s["path"].as_str().unwrap_or("");
        let path = clean_path(raw).ok_or_else(|| {
            self.refuse("path", format!("path {raw:?} leads out of the repository"))
        })?;
        out.paths.push(path.clone());
        match s.get("plugin") {
            Some(plugin) => self.plugin(out, file, s, plugin, path),
            None => self.directory(out, file, s, path, refs),
        }
    }

    /// A source rendered by a config management plugin.
    fn plugin(
        &self,
        out: &mut Read,
        file: String,
        s: &Value,
        plugin: &Value,
        path: String,
    ) -> Result<(), SpecError> {
        if let Some(other) = ["helm", "kustomize", "directory"]
            .into_iter()
            .find(|k| s.get(*k).is_some())
        {
            return Err(self.refuse(
                "plugin",
                format!("its source names both `plugin` and `{other}`; Argo CD takes one"),
            ));
        }
        let wanted =
            super::plugin_source(plugin).map_err(|why| self.refuse("plugin", why.to_string()))?;
        out.plugins.push(PluginPart {
            at: self.at.clone(),
            output: file,
            app: self.name.to_string(),
            namespace: out.app.namespace.clone().unwrap_or_default(),
            project: self.v["spec"]["project"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            repo_url: s["repoURL"].as_str().unwrap_or_default().to_string(),
            target_revision: s["targetRevision"].as_str().unwrap_or_default().to_string(),
            path,
            wanted,
        });
        Ok(())
    }

    /// A directory of this repository: a chart, a Kustomize directory, or plain files, as
    /// the source or the files there say.
    fn directory(
        &self,
        out: &mut Read,
        file: String,
        s: &Value,
        path: String,
        refs: &BTreeMap<String, ()>,
    ) -> Result<(), SpecError> {
        let (at, name) = (self.at, self.name);
        let on_disk = |f: &str| {
            self.repo
                .repo
                .is_some_and(|r| r.join(&path).join(f).is_file())
        };
        let is_helm = s.get("helm").is_some() || on_disk("Chart.yaml");
        let is_kustomize = s.get("kustomize").is_some()
            || crate::hydrate::tree::KUSTOMIZATION_FILES
                .iter()
                .any(|f| on_disk(f));
        if is_helm {
            let release = local_release(at, name, &out.app, s, &path, refs, self.repo)
                .map_err(|why| self.refuse("helm", why.to_string()))?;
            out.releases.push(ReleaseAt { release, file });
        } else if is_kustomize {
            let k = kustomization(name, s, &path)
                .map_err(|why| self.refuse("kustomize", why.to_string()))?;
            out.parts.push(Part {
                at: at.clone(),
                by: format!("Argo CD Application {name}"),
                output: file,
                source: PartSource::Kustomize(Box::new(k)),
            });
        } else {
            let d = &s["directory"];
            if let Some(key) = unknown(d, &["recurse", "include", "exclude", "jsonnet"]) {
                return Err(self.refuse(
                    key,
                    NotCarriedOut::field(format!("directory.{key}")).to_string(),
                ));
            }
            if d["jsonnet"].as_object().is_some_and(|j| !j.is_empty()) {
                return Err(self.refuse(
                    "jsonnet",
                    NotCarriedOut::field("directory.jsonnet").to_string(),
                ));
            }
            out.parts.push(Part {
                at: at.clone(),
                by: format!("Argo CD Application {name}"),
                output: file,
                source: PartSource::Directory {
                    path,
                    recurse: d["recurse"].as_bool() == Some(true),
                    include: d["include"].as_str().map(str::to_string),
                    exclude: d["exclude"].as_str().map(str::to_string),
                },
            });
        }
        Ok(())
    }
}
