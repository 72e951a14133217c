//! One Application read: each source as what renders it (a directory, a Kustomize
//! directory, a chart release), and its marks. Every field that changes what Argo CD would
//! do is carried out or refused here, at its line.

use std::collections::BTreeMap;

use serde_json::Value;

use super::chart::{chart_release, local_release};
use super::model::{ApplicationSpec, Source, not_carried_out};
use super::options::{ignore, kustomization};
use super::{App, Part, PartSource, PluginPart, output_file};
use crate::hydrate::app_yaml::{clean_path, err, line_of, unknown};
use crate::hydrate::apps::Repository;
use crate::hydrate::helm::ReleaseAt;
use crate::hydrate::not_carried_out::{NotCarriedOut, Refusal};
use crate::hydrate::shape;
use crate::spec::{AppId, Location, SpecError};

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
fn other_revisions(name: &str, sources: &[Source], repo: &Repository) -> Vec<String> {
    let Some(synced) = repo.revisions.first() else {
        return Vec::new();
    };
    sources
        .iter()
        .filter(|s| s.chart.is_none() && repo.names(s.repo_url.as_deref().unwrap_or_default()))
        .filter_map(|s| s.target_revision.as_deref())
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
    spec: ApplicationSpec,
}

pub(super) fn read(
    at: &Location,
    doc: &str,
    v: &Value,
    repo: &Repository,
) -> Result<Read, SpecError> {
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let mut r = Reading {
        at,
        doc,
        v,
        repo,
        name,
        spec: ApplicationSpec::default(),
    };
    if name.is_empty() {
        return Err(err(
            at.clone(),
            "an Argo CD Application without metadata.name".into(),
        ));
    }
    if let Some(key) = unknown(&v["spec"], CARRIED) {
        return Err(r.refuse(key, NotCarriedOut::field(format!("spec.{key}"))));
    }
    shape::check(&v["spec"], &shape::APPLICATION, "spec")
        .map_err(|e| r.refuse(&e.key.clone(), e))?;
    // Its shape is checked: what is left is `null` where a map is wanted in a list.
    r.spec = shape::or_default(&v["spec"]).map_err(|e| r.refuse("spec", format!("spec: {e}")))?;
    let app = r.app()?;
    let sources: Vec<Source> = match (r.spec.source.take(), r.spec.sources.take()) {
        (Some(s), None) => vec![s],
        (None, Some(list)) if !list.is_empty() => list,
        (Some(_), Some(_)) => {
            return Err(r.refuse("sources", "has both `source` and `sources`"));
        }
        _ => return Err(r.refuse("spec", "names no source")),
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

    /// The app this Application is.
    fn id(&self) -> AppId {
        AppId::Argo {
            name: self.name.to_string(),
        }
    }

    fn refuse(&self, key: &str, what: impl Into<Refusal>) -> SpecError {
        err(
            self.field_at(key),
            format!(
                "Application {}: {}; nothing is applied",
                self.name,
                what.into()
            ),
        )
    }

    /// The app the Application is: its destination, wave, sync policy and options, and
    /// what it leaves to others.
    fn app(&self) -> Result<App, SpecError> {
        let (v, spec) = (self.v, &self.spec);
        let destination = &spec.destination;
        let automated = &spec.sync_policy.automated;
        let mut app = App {
            name: self.name.to_string(),
            namespace: destination.namespace.clone().filter(|n| !n.is_empty()),
            prune: automated.prune == Some(true),
            self_heal: automated.self_heal == Some(true),
            ..App::default()
        };
        use crate::spec::clusters::Destination;
        app.destination = match (destination.name.as_deref(), destination.server.as_deref()) {
            (Some(name), Some(server)) if !name.is_empty() && !server.is_empty() => {
                return Err(self.refuse(
                    "destination",
                    "its destination gives both `name` and `server`; Argo CD takes one",
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
        for (i, d) in spec.ignore_differences.iter().enumerate() {
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
        for text in &self.spec.sync_policy.sync_options {
            let (key, value) = text.split_once('=').unwrap_or((text, ""));
            if !SYNC_OPTIONS.contains(&key) {
                return Err(self.refuse(
                    "syncOptions",
                    NotCarriedOut::named(format!("sync option {text:?}")),
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
                "`CreateNamespace=true` with no `destination.namespace`",
            ));
        }
        Ok(())
    }

    /// `ref` sources: their repository's root, for `$ref/...` values files.
    fn refs(&self, sources: &[Source]) -> Result<BTreeMap<String, ()>, SpecError> {
        let mut refs: BTreeMap<String, ()> = BTreeMap::new();
        for s in sources {
            if let Some(r) = s.root_name.as_deref() {
                let url = s.repo_url.as_deref().unwrap_or_default();
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
        s: &Source,
        refs: &BTreeMap<String, ()>,
    ) -> Result<(), SpecError> {
        let (at, name) = (self.at, self.name);
        let file = output_file(&at.file, name, index);
        if let Some(key) = not_carried_out(&s.other, &["name"]) {
            return Err(self.refuse(key, NotCarriedOut::field(format!("source.{key}"))));
        }
        let url = s.repo_url.as_deref().unwrap_or_default();
        if s.root_name.is_some() && s.path.is_none() && s.chart.is_none() {
            return Ok(()); // only a root for values files
        }
        if let Some(chart) = s.chart.as_deref() {
            let release = chart_release(at, name, &out.app, s, chart, refs, self.repo)
                .map_err(|why| self.refuse("chart", why.to_string()))?;
            out.releases.push(ReleaseAt {
                release,
                file,
                app: Some(self.id()),
                app_marks: Some(super::marks(&out.app)),
            });
            return Ok(());
        }
        if !self.repo.names(url) {
            return Err(self.refuse(
                "repoURL",
                Refusal::OtherRepository {
                    named: format!("source {url}"),
                    hint: Some(
                        "not followed: name this repository's URLs in .driftless.toml [repository] urls if it is",
                    ),
                },
            ));
        }
        let raw = s.path.as_deref().unwrap_or("");
        let path = clean_path(raw).ok_or_else(|| {
            self.refuse(
                "path",
                Refusal::LeadsOut {
                    what: "path",
                    path: raw.to_string(),
                },
            )
        })?;
        out.paths.push(path.clone());
        match &s.plugin {
            Some(plugin) => self.plugin(out, file, s, plugin, path),
            None => self.directory(out, file, s, path, refs),
        }
    }

    /// A source rendered by a config management plugin.
    fn plugin(
        &self,
        out: &mut Read,
        file: String,
        s: &Source,
        plugin: &Value,
        path: String,
    ) -> Result<(), SpecError> {
        let named = [
            ("helm", s.helm.is_some()),
            ("kustomize", s.kustomize.is_some()),
            ("directory", s.directory.is_some()),
        ];
        if let Some((other, _)) = named.into_iter().find(|(_, named)| *named) {
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
            marks: super::marks(&out.app),
            namespace: out.app.namespace.clone().unwrap_or_default(),
            project: self.spec.project.clone().unwrap_or_default(),
            repo_url: s.repo_url.clone().unwrap_or_default(),
            target_revision: s.target_revision.clone().unwrap_or_default(),
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
        s: &Source,
        path: String,
        refs: &BTreeMap<String, ()>,
    ) -> Result<(), SpecError> {
        let (at, name) = (self.at, self.name);
        let on_disk = |f: &str| {
            self.repo
                .repo
                .is_some_and(|r| r.join(&path).join(f).is_file())
        };
        let is_helm = s.helm.is_some() || on_disk("Chart.yaml");
        let is_kustomize = s.kustomize.is_some()
            || crate::hydrate::tree::KUSTOMIZATION_FILES
                .iter()
                .any(|f| on_disk(f));
        if is_helm {
            let release = local_release(at, name, &out.app, s, &path, refs, self.repo)
                .map_err(|why| self.refuse("helm", why.to_string()))?;
            out.releases.push(ReleaseAt {
                release,
                file,
                app: Some(self.id()),
                app_marks: Some(super::marks(&out.app)),
            });
        } else if is_kustomize {
            let k = kustomization(name, s, &path)
                .map_err(|why| self.refuse("kustomize", why.to_string()))?;
            out.parts.push(Part {
                at: at.clone(),
                by: format!("Argo CD Application {name}"),
                app: self.id(),
                marks: super::marks(&out.app),
                output: file,
                source: PartSource::Kustomize(Box::new(k)),
            });
        } else {
            let d = s.directory.clone().unwrap_or_default();
            if let Some(key) = not_carried_out(&d.other, &[]) {
                return Err(self.refuse(key, NotCarriedOut::field(format!("directory.{key}"))));
            }
            if d.jsonnet
                .as_ref()
                .and_then(Value::as_object)
                .is_some_and(|j| !j.is_empty())
            {
                return Err(self.refuse("jsonnet", NotCarriedOut::field("directory.jsonnet")));
            }
            out.parts.push(Part {
                at: at.clone(),
                by: format!("Argo CD Application {name}"),
                app: self.id(),
                marks: super::marks(&out.app),
                output: file,
                source: PartSource::Directory {
                    path,
                    recurse: d.recurse == Some(true),
                    include: d.include,
                    exclude: d.exclude,
                },
            });
        }
        Ok(())
    }
}
