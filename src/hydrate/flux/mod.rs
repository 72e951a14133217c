//! Flux's `Kustomization` (`kustomize.toolkit.fluxcd.io/v1`) carried out, not applied: a
//! Flux repository is read as Flux's kustomize-controller reads it, with no Flux
//! controller in the cluster. Each Kustomization found in the tree's YAML (written there or
//! rendered, nested ones in turn) builds its `path` of this repository as Flux does: the
//! directory's kustomization (one generated from its manifests when it has none) with
//! `targetNamespace`, `namePrefix`/`nameSuffix`, `patches`, `images` and `components` put
//! in, then `postBuild.substitute`, `commonMetadata` and Flux's own labels. Its objects are
//! handed on as `FILE#flux.NAMESPACE.NAME` (an app of its own), `dependsOn` as waves,
//! `prune: false` and `force` as driftless's marks. The build runs on a private copy of
//! what it reads, never in the tree.
//!
//! The source objects (`GitRepository`, `OCIRepository`, ...) are read, not applied; Flux's
//! own install (`gotk-components.yaml`) is left out, as driftless does its job. What this
//! does not carry out (another repository, a field that changes what Flux would do) is an
//! error at its place, and nothing is applied.

mod artifact;
pub(crate) mod build;
mod data;
pub(crate) mod model;
mod order;
mod release;
mod source;
mod verify;

pub use build::{Build, Copy};
pub use build::{Builds, substitute};
pub(crate) use build::{build_copy, prepare as prepare_build};
pub(crate) use data::TreeData;
pub use model::Kustomization;
#[cfg(test)]
pub(crate) use {artifact::Strategy, model::CopyRule};

use std::collections::BTreeMap;

use serde_json::Value;

use crate::hydrate::app_yaml::unknown;
use crate::hydrate::apps::{AppFormat, Found, Needs, Registered, Renders, Repository, Setting};
use crate::hydrate::held::AppError;
use crate::hydrate::not_carried_out::{NotCarriedOut, Refusal};
use crate::hydrate::shape;
use crate::spec::{Location, SourceFile, SpecError};
#[cfg(test)]
use build::finish;
use data::variables;
use model::*;

#[cfg(test)]
use artifact::materialise;
use order::order;
pub use release::Waits;
use release::{ChartSources, helm_releases};
use source::{from_source, generator, other_refs, source_spec};

/// Flux as an app format: its Kustomizations and HelmReleases carried out pass after pass.
pub(crate) struct Format<'a> {
    fleet: &'a crate::spec::clusters::Clusters,
    signatures: &'a crate::source::Signatures,
    /// Whether Flux's own install is left out (the tree holds Flux's app objects, which
    /// driftless carries out in Flux's place) or applied as any bundle.
    install: crate::hydrate::app_yaml::Install,
    /// The waves of the Kustomizations and HelmReleases found in earlier passes (by
    /// `kind/namespace/name`): what a later one depends on.
    waves: BTreeMap<String, i32>,
    /// What the last pass's HelmReleases wait for.
    release_waits: Vec<Waits>,
}

/// Flux among the stage's app formats.
pub(crate) const FORMAT: Registered = Registered {
    needs,
    new: new_format,
};

/// A file that may hold Flux's objects: its Kustomizations and HelmReleases read the
/// tree on disk, the HelmReleases render charts.
fn needs(bytes: &[u8]) -> Needs {
    let has = |needle: &str| crate::hydrate::tree::mentions(bytes, needle.as_bytes());
    let charts = has(HELM_GROUP);
    Needs {
        checkout: charts || has(KUSTOMIZE_GROUP),
        charts,
    }
}

fn new_format<'a>(files: &[SourceFile], s: &Setting<'a>) -> Box<dyn AppFormat + 'a> {
    Box::new(Format {
        fleet: s.fleet,
        signatures: s.signatures,
        install: crate::hydrate::app_yaml::Install::of(
            files,
            &[KUSTOMIZE_GROUP, HELM_GROUP],
            &["Kustomization", "HelmRelease"],
        ),
        waves: BTreeMap::new(),
        release_waits: Vec::new(),
    })
}

impl AppFormat for Format<'_> {
    fn find(
        &mut self,
        files: &mut [SourceFile],
        apps: &crate::spec::RenderedApps,
        repo: &mut Repository,
    ) -> Found {
        let (found, waits) = find(
            files,
            apps,
            repo,
            &mut self.waves,
            self.install,
            self.signatures,
            self.fleet,
        );
        self.release_waits = waits;
        found
    }

    fn rendered(&mut self, renders: &Renders, out: &mut crate::hydrate::Hydrated) {
        out.health.extend(
            renders
                .kustomizations
                .iter()
                .flat_map(|k| k.health.iter().cloned()),
        );
        hold_dependents_of_failed(&renders.kustomizations, out);
        release::hold_dependents_of_failed(&self.release_waits, out);
    }

    fn install_left_out(&self, objects: &str) -> String {
        format!(
            "{objects} of Flux's own install (gotk-components) not applied: driftless carries out Flux's Kustomizations itself"
        )
    }
}

/// Finds Flux's objects in `files` (YAML, written or rendered), takes them out of what is
/// applied (their lines blanked, so every other document keeps its place), and returns the
/// Kustomizations to carry out. `repo`: this repository (the spec root within it, the URLs
/// it is known by: bootstrap's GitRepository's added once found, so the formats and passes
/// after this one, a tenant's Kustomization another renders, know it), `apps`: the apps
/// that made each rendered file (a Kustomization another renders comes after it), `waves`: the
/// Kustomizations found in earlier passes (their waves, by `namespace/name`).
/// `install`: whether Flux's own install is left out (the tree holds Flux's app objects,
/// which driftless carries out in Flux's place) or applied as any bundle. With what is
/// found, what each HelmRelease waits for (`dependsOn`), to hold what waits for a failed
/// one.
fn find(
    files: &mut [SourceFile],
    apps: &crate::spec::RenderedApps,
    repo: &mut Repository,
    waves: &mut BTreeMap<String, i32>,
    install: crate::hydrate::app_yaml::Install,
    signatures: &crate::source::Signatures,
    fleet: &crate::spec::clusters::Clusters,
) -> (Found, Vec<Waits>) {
    let mut found = Found::default();
    let mut sources = Sources::new();
    let mut verify_asked = Vec::new();
    let mut items = Vec::new();
    let mut releases = Vec::new();
    let mut generators = Vec::new();
    crate::hydrate::app_yaml::take_out(files, mentions_flux, |at, doc, v| {
        let api = v["apiVersion"].as_str().unwrap_or_default();
        let kind = v["kind"].as_str().unwrap_or_default();
        let group = api.split('/').next().unwrap_or_default();
        if group == EXTENSIONS_GROUP && kind == "ArtifactGenerator" {
            generators.push(generator(&v, doc, &at));
            true
        } else if group.ends_with(TOOLKIT) {
            let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
            let name = v["metadata"]["name"].as_str().unwrap_or_default();
            match (group, kind) {
                (KUSTOMIZE_GROUP, "Kustomization") => match item(&v, doc, at, ns, name)
                    .and_then(|k| declared(k, fleet))
                {
                    Ok(k) => items.push(k),
                    // Without a name it is no app: what it applied could not be kept.
                    Err(e) if name.is_empty() => found.errors.push(e),
                    Err(e) => found.held.push(AppError::new(app_id(ns, name), e)),
                },
                (SOURCE_GROUP, "GitRepository" | "OCIRepository" | "HelmRepository" | "Bucket") => {
                    let key = format!("{kind}/{ns}/{name}");
                    if kind == "GitRepository" {
                        let verify_at = Location {
                            line: at.line + line_of(doc, "verify"),
                            ..at.clone()
                        };
                        verify_asked.extend(
                            verify::asked(&v, verify_at, ns, name).map(|a| (key.clone(), a)),
                        );
                    }
                    sources.insert(key, source_spec(&v, doc, &at, kind, ns, name));
                }
                (HELM_GROUP, "HelmRelease") => releases.push((at, doc.to_string(), v.clone())),
                _ => found.errors.push(err(
                    at,
                    format!(
                        "{}: driftless reads Flux's Kustomization, HelmRelease and their sources; take it out of the tree",
                        NotCarriedOut::named(format!("Flux's {kind} ({api})"))
                    ),
                )),
            }
            true
        } else if install == crate::hydrate::app_yaml::Install::LeftOut && is_flux_install(&v) {
            found.install_left_out += 1;
            true
        } else {
            false
        }
    });
    let url_of = |key: &str| {
        sources
            .get(key)
            .and_then(|s| s.as_ref().ok()?.url.as_deref())
            .map(normalise_url)
    };
    // The repository's own URLs (its remotes', the tree's `[repository] urls`) and
    // bootstrap's GitRepository's all name this repository.
    repo.urls
        .extend(url_of("GitRepository/flux-system/flux-system"));
    let root = repo.root;
    // An OCIRepository is this repository when it names the artifact being followed.
    let origins: Origins = sources
        .keys()
        .filter(|k| k.starts_with("GitRepository/") || k.starts_with("OCIRepository/"))
        .map(|k| {
            let origin = match (&sources[k], url_of(k)) {
                (Err(refused), _) => Origin::Refused(refused.clone()),
                (Ok(_), Some(u)) if repo.urls.contains(&u) => Origin::This,
                (Ok(_), other) => Origin::Other(other),
            };
            (k.clone(), origin)
        })
        .collect();
    found.notices = other_refs(&sources, &origins);
    let refused = sources.values().filter_map(|s| s.as_ref().err());
    let refused = refused.chain(generators.iter().filter_map(|g| g.spec.as_ref().err()));
    found.notices.extend(
        refused.map(|r| format!("{}: {}: {}; what reads it is held", r.at, r.source, r.why)),
    );
    // Only this repository's request is the daemon's to meet: another repository is
    // refused or said on its own.
    for (key, asked) in &verify_asked {
        if origins.get(key) == Some(&Origin::This) {
            match verify::check(asked, signatures) {
                Ok(notice) => found.notices.extend(notice),
                Err(e) => found.errors.push(e),
            }
        }
    }
    items.retain_mut(|k| match from_source(k, &generators, &origins, root) {
        Ok(true) => true,
        Ok(false) => {
            // The tree being read: its objects are those already read.
            waves.insert(format!("kustomization/{}/{}", k.namespace, k.name), 0);
            false
        }
        Err(e) => {
            found
                .held
                .push(AppError::new(app_id(&k.namespace, &k.name), e));
            false
        }
    });
    let mut data = TreeData::new(files);
    items.retain_mut(|k| match variables(k, &mut data) {
        Ok(()) => true,
        Err(e) => {
            found
                .held
                .push(AppError::new(app_id(&k.namespace, &k.name), e));
            false
        }
    });
    hold_dependents(&mut items, &mut found.held);
    order(&mut items, apps, waves, &mut found.errors);
    found.destinations.extend(items.iter().filter_map(|k| {
        let to = k.destination.clone()?;
        Some((app_id(&k.namespace, &k.name), to))
    }));
    found.renders.kustomizations = items;
    let known = ChartSources {
        sources: &sources,
        origins: &origins,
        root,
    };
    let waits = helm_releases(releases, &known, waves, &mut data, fleet, &mut found);
    (found, waits)
}

/// The Kustomization, when its `kubeConfig` names a cluster the operator declared (or
/// none); else why not, at its `kubeConfig`: nothing of it is rendered.
fn declared(
    k: Kustomization,
    fleet: &crate::spec::clusters::Clusters,
) -> Result<Kustomization, SpecError> {
    match &k.destination {
        Some((to, at)) => match fleet.destination(to) {
            Ok(_) => Ok(k),
            Err(why) => Err(err(
                at.clone(),
                format!("{}: {why}; nothing is applied", k.said()),
            )),
        },
        None => Ok(k),
    }
}

/// `flux/NAMESPACE/NAME`: the app a Kustomization is, as said.
fn app_id(namespace: &str, name: &str) -> String {
    crate::spec::AppId::Flux {
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
    .to_string()
}

/// The Kustomizations of `items` that wait for a held app (`held`: their ids, grown by
/// those found), as Flux's wait for a dependency that is not ready: each one whose
/// `dependsOn` names a held one, in turn what depends on those; by index in `items`, each
/// with the error that holds it.
fn waiting_for_held(
    items: &[Kustomization],
    held: &mut std::collections::BTreeSet<String>,
) -> Vec<(usize, AppError)> {
    let mut waiting = Vec::new();
    loop {
        let more: Vec<(usize, String)> = items
            .iter()
            .enumerate()
            .filter(|(_, k)| !held.contains(&app_id(&k.namespace, &k.name)))
            .filter_map(|(i, k)| {
                let dep = order::depends_on(&k.spec.depends_on, &k.namespace)
                    .into_iter()
                    .find(|d| held.contains(&format!("flux/{d}")))?;
                Some((i, dep))
            })
            .collect();
        if more.is_empty() {
            waiting.sort_by_key(|(i, _)| *i);
            return waiting;
        }
        for (i, dep) in more {
            let k = &items[i];
            let app = app_id(&k.namespace, &k.name);
            held.insert(app.clone());
            let why = format!("{}: waits for Kustomization {dep}, which is held", k.said());
            waiting.push((i, AppError::new(app, err(k.at.clone(), why))));
        }
    }
}

/// Before a pass's builds: what waits for a Kustomization held as it was read is held too
/// and not built.
fn hold_dependents(items: &mut Vec<Kustomization>, held: &mut Vec<AppError>) {
    let mut ids = held.iter().map(|h| h.app.clone()).collect();
    for (i, e) in waiting_for_held(items, &mut ids).into_iter().rev() {
        items.remove(i);
        held.push(e);
    }
}

/// After a pass's builds: what waits for a Kustomization whose build failed (or that is
/// held) is held too, its render taken out.
fn hold_dependents_of_failed(items: &[Kustomization], out: &mut crate::hydrate::Hydrated) {
    hold_waiting(out, |failed| {
        waiting_for_held(items, failed)
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    });
}

/// Holds what `waiting` finds waiting for an app that failed in `out` (its error, or held):
/// each one's render taken out of what is applied.
fn hold_waiting(
    out: &mut crate::hydrate::Hydrated,
    waiting: impl FnOnce(&mut std::collections::BTreeSet<String>) -> Vec<AppError>,
) {
    let mut failed = out
        .errors
        .iter()
        .filter_map(|e| out.rendered_apps.app_of(&e.at.file))
        .map(ToString::to_string)
        .chain(out.held.iter().map(|h| h.app.clone()))
        .collect();
    for e in waiting(&mut failed) {
        let apps = &out.rendered_apps;
        out.files.retain(|f| !apps.rendered_by(&f.path, &e.app));
        out.held.push(e);
    }
}

fn mentions_flux(bytes: &[u8]) -> bool {
    let has = |needle: &[u8]| crate::hydrate::tree::mentions(bytes, needle);
    has(b"fluxcd.io") || has(b"part-of: flux")
}

/// Flux's own install, as `flux bootstrap` writes it (`gotk-components.yaml`).
fn is_flux_install(v: &Value) -> bool {
    let labels = &v["metadata"]["labels"];
    labels["app.kubernetes.io/part-of"] == "flux"
        && labels["app.kubernetes.io/instance"] == "flux-system"
}

/// A Kustomization read and checked: every field that changes what Flux does is carried
/// out or refused here.
fn item(
    v: &Value,
    doc: &str,
    at: Location,
    ns: &str,
    name: &str,
) -> Result<Kustomization, SpecError> {
    let field_at = |key: &str| Location {
        line: at.line + line_of(doc, key),
        ..at.clone()
    };
    let refuse = |key: &str, what: Refusal| {
        err(
            field_at(key),
            format!("Kustomization {ns}/{name}: {what}; nothing is applied"),
        )
    };
    let spec = v["spec"].as_object().cloned().unwrap_or_default();
    if name.is_empty() {
        return Err(err(at, "a Flux Kustomization without metadata.name".into()));
    }
    if let Some(key) = unknown(&v["spec"], CARRIED) {
        return Err(refuse(
            key,
            NotCarriedOut::field(format!("spec.{key}")).into(),
        ));
    }
    shape::check(&v["spec"], &shape::KUSTOMIZATION, "spec")
        .map_err(|e| refuse(&e.key.clone(), e.into()))?;
    if let Some(pb) = spec.get("postBuild").and_then(Value::as_object)
        && let Some(key) = pb
            .keys()
            .find(|k| *k != "substitute" && *k != "substituteFrom")
    {
        return Err(refuse(
            key,
            NotCarriedOut::field(format!("spec.postBuild.{key}")).into(),
        ));
    }
    let raw = spec.get("path").and_then(Value::as_str).unwrap_or("");
    let path = clean_path(raw).ok_or_else(|| {
        let leads_out = Refusal::LeadsOut {
            what: "path",
            path: raw.to_string(),
        };
        err(
            field_at("path"),
            format!("Kustomization {ns}/{name}: {leads_out}"),
        )
    })?;
    let health = health_checks(&spec, doc, &at, ns, name)?;
    let destination = kube_config(&v["spec"], ns)
        .map_err(|(key, why)| refuse(&key, why.into()))?
        .map(|to| (to, field_at("kubeConfig")));
    // Its shape is checked: what is left is `null` where a map is wanted in a list.
    let typed = serde_json::from_value(Value::Object(spec)).map_err(|e| {
        err(
            at.clone(),
            format!("Kustomization {ns}/{name}: spec: {e}; nothing is applied"),
        )
    })?;
    Ok(Kustomization {
        at,
        namespace: ns.to_string(),
        name: name.to_string(),
        path,
        spec: typed,
        wave: 0,
        artifact: None,
        health,
        destination,
    })
}

/// `healthCheckExprs` as health rules of the objects the Kustomization renders (its
/// output file's specs), as Flux judges them: `failed`, then `current`, else in progress.
fn health_checks(
    spec: &serde_json::Map<String, Value>,
    doc: &str,
    at: &Location,
    ns: &str,
    name: &str,
) -> Result<Vec<std::sync::Arc<crate::spec::settings::HealthRule>>, SpecError> {
    use crate::spec::settings::{BUILT_IN_GROUPS, Expr, HealthRule};
    let Some(exprs) = spec.get("healthCheckExprs") else {
        return Ok(Vec::new());
    };
    let key_line = at.line + line_of(doc, "healthCheckExprs");
    // An expression is found by its text; what is not is said where the list starts.
    let line_with = |text: &str| {
        doc.lines()
            .position(|l| !text.is_empty() && l.contains(text))
            .map_or(key_line, |n| at.line + n)
    };
    let fail = |line: usize, what: String| {
        err(
            Location { line, ..at.clone() },
            format!("Kustomization {ns}/{name}: healthCheckExprs: {what}; nothing is applied"),
        )
    };
    let Some(list) = exprs.as_array() else {
        return Err(fail(key_line, "not a list".into()));
    };
    let scope = crate::spec::flux_output_file(&at.file, ns, name);
    let mut rules = Vec::new();
    for item in list {
        let api_version = item["apiVersion"].as_str().unwrap_or_default();
        let kind = item["kind"].as_str().unwrap_or_default();
        if api_version.is_empty() || kind.is_empty() {
            return Err(fail(
                key_line,
                "an entry without `apiVersion` and `kind`".into(),
            ));
        }
        let group = crate::object::group_of(api_version);
        if BUILT_IN_GROUPS.contains(&group) {
            return Err(fail(
                line_with(api_version),
                format!(
                    "{api_version} is a Kubernetes kind whose readiness driftless already judges (kstatus); healthCheckExprs are for custom resources"
                ),
            ));
        }
        let compiled = |key: &str| -> Result<Option<Expr>, SpecError> {
            let Some(source) = item.get(key) else {
                return Ok(None);
            };
            let source = source.as_str().unwrap_or_default();
            Expr::compile(source).map(Some).map_err(|why| {
                fail(
                    line_with(source),
                    format!("`{key}` of {kind} is not a valid CEL expression: {why}"),
                )
            })
        };
        let (current, failed, in_progress) = (
            compiled("current")?,
            compiled("failed")?,
            compiled("inProgress")?,
        );
        if current.is_none() {
            return Err(fail(
                line_with(kind),
                format!("the entry for {kind} has no `current`"),
            ));
        }
        rules.push(std::sync::Arc::new(HealthRule {
            at: Location {
                line: line_with(current.as_ref().map_or("", |e| e.source.as_str())),
                ..at.clone()
            },
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            current,
            failed,
            in_progress,
            scope: Some(scope.clone()),
        }));
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every error a pass found, the tree's and the held apps', as they are said.
    fn said(found: &Found) -> Vec<String> {
        found
            .errors
            .iter()
            .chain(found.held.iter().map(|h| &h.error))
            .map(ToString::to_string)
            .collect()
    }

    /// `text`, as `a.yaml`, is refused in one line starting with `want`, and nothing of it
    /// is carried out.
    fn refused(text: &str, want: &str) {
        let mut files = vec![file("a.yaml", text)];
        let found = find_in(&mut files, Some("clusters/x"));
        // A Kustomization or HelmRelease refused is held (an app of its own); anything
        // else is the tree's.
        let said = said(&found);
        assert!(
            said.len() == 1 && said[0].starts_with(want),
            "{said:?}\nwanted {want}"
        );
        assert!(
            found
                .held
                .iter()
                .all(|h| h.app.starts_with("flux/flux-system/") || h.app.starts_with("flux-helm/")),
            "{:?}",
            found.held
        );
        assert!(found.renders.kustomizations.is_empty() && found.renders.releases.is_empty());
    }

    /// `find` with no earlier passes and no URLs the repository is known by.
    fn find_in(files: &mut [SourceFile], root: Option<&str>) -> Found {
        let (found, _) = find(
            files,
            &Default::default(),
            &mut repository(root),
            &mut BTreeMap::new(),
            crate::hydrate::app_yaml::Install::LeftOut,
            &Default::default(),
            &Default::default(),
        );
        found
    }

    /// This repository, its spec root at `root`, known by no URL yet.
    fn repository(root: Option<&str>) -> Repository<'_> {
        Repository {
            repo: None,
            root,
            urls: Default::default(),
            revisions: &[],
        }
    }

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            contents: text.as_bytes().to_vec(),
        }
    }

    const SYNC: &str = "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  url: ssh://git@github.com/acme/fleet\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  path: ./clusters/staging\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n";

    fn kustomization(name: &str, path: &str, extra: &str) -> String {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n{extra}"
        )
    }

    #[test]
    fn this_repositorys_verify_request_is_met_by_the_revisions_signatures_only() {
        use crate::source::Signatures;
        let asking = SYNC.replace(
            "  url: ssh://git@github.com/acme/fleet\n",
            "  url: ssh://git@github.com/acme/fleet\n  verify:\n    mode: HEAD\n    secretRef:\n      name: pgp-public-keys\n",
        );
        // Another repository's request is not this daemon's to meet.
        let other = "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: other\n  namespace: flux-system\nspec:\n  url: https://example.com/other\n  verify:\n    secretRef:\n      name: k\n";
        let run = |signatures: Signatures| {
            let mut files = vec![file(
                "flux-system/gotk-sync.yaml",
                &format!("{asking}{other}"),
            )];
            find(
                &mut files,
                &Default::default(),
                &mut repository(Some("clusters/staging")),
                &mut BTreeMap::new(),
                crate::hydrate::app_yaml::Install::LeftOut,
                &signatures,
                &Default::default(),
            )
            .0
        };
        let unchecked = run(Signatures::Unchecked);
        let said: Vec<String> = unchecked.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "flux-system/gotk-sync.yaml:9:1: GitRepository flux-system/flux-system asks for signed commits"
            ),
            "{said:?}"
        );
        let verified = run(Signatures::Verified {
            commit: Some("alice".into()),
            tag: None,
        });
        assert!(verified.errors.is_empty(), "{:?}", verified.errors);
        let dir = run(Signatures::NoCommit);
        assert!(dir.errors.is_empty(), "{:?}", dir.errors);
        assert!(
            dir.notices.iter().any(|n| n.contains("no commit to check")),
            "{:?}",
            dir.notices
        );
    }

    #[test]
    fn kustomizations_are_found_ordered_and_taken_out_of_what_is_applied() {
        let apps = format!(
            "{}---\n{}",
            kustomization(
                "apps",
                "./apps/staging",
                "  dependsOn:\n    - name: infra\n"
            ),
            kustomization("infra", "./infrastructure", "")
        );
        let mut files = vec![
            file("flux-system/gotk-sync.yaml", SYNC),
            file("apps.yaml", &apps),
            file(
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            ),
        ];
        let mut waves = BTreeMap::new();
        let (found, _) = find(
            &mut files,
            &Default::default(),
            &mut repository(Some("clusters/staging")),
            &mut waves,
            crate::hydrate::app_yaml::Install::LeftOut,
            &Default::default(),
            &Default::default(),
        );
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let got: Vec<(&str, &str, i32, usize)> = found
            .renders
            .kustomizations
            .iter()
            .map(|k| (k.name.as_str(), k.path.as_str(), k.wave, k.at.line))
            .collect();
        assert_eq!(
            got,
            [
                ("apps", "apps/staging", 1, 1),
                ("infra", "infrastructure", 0, 15)
            ]
        );
        // Blanked line for line: the ConfigMap file is untouched, the others hold nothing.
        let text = |i: usize| String::from_utf8(files[i].contents.clone()).unwrap();
        assert_eq!(text(1).lines().count(), apps.lines().count());
        assert!(
            text(1).trim_matches(|c| c == '\n' || c == '-').is_empty(),
            "{}",
            text(1)
        );
        assert!(text(0).trim_matches(|c| c == '\n' || c == '-').is_empty());
        assert!(text(2).contains("ConfigMap"));
        assert_eq!(
            waves.get("kustomization/flux-system/flux-system"),
            Some(&0),
            "the tree itself"
        );

        // A Kustomization that `apps` renders (the next pass) comes after it.
        let mut nested = vec![file(
            "apps.yaml#flux.flux-system.apps",
            &kustomization("tenant", "./tenant", ""),
        )];
        let mut apps = crate::spec::RenderedApps::new();
        apps.insert(
            "apps.yaml#flux.flux-system.apps".into(),
            vec![crate::spec::AppId::Flux {
                namespace: "flux-system".into(),
                name: "apps".into(),
            }],
        );
        let (found, _) = find(
            &mut nested,
            &apps,
            &mut repository(Some("clusters/staging")),
            &mut waves,
            crate::hydrate::app_yaml::Install::LeftOut,
            &Default::default(),
            &Default::default(),
        );
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert_eq!(
            found.renders.kustomizations[0].wave, 2,
            "one past apps' wave"
        );
    }

    #[test]
    fn what_is_not_carried_out_is_an_error_at_its_place() {
        let cases = [
            (
                kustomization("a", "./a", "  kubeConfig:\n    configMapRef: {name: x}\n"),
                "a.yaml:13:1: Kustomization flux-system/a: `spec.kubeConfig.configMapRef` is not carried out by driftless yet (`secretRef`, a kubeconfig in a Secret, is)",
            ),
            (
                kustomization("a", "./a", "  kubeConfig:\n    secretRef:\n      name: x\n      key: 7\n"),
                "a.yaml:15:1: Kustomization flux-system/a: `spec.kubeConfig.secretRef.key` is a number, not a string",
            ),
            (
                kustomization("a", "../../etc", ""),
                "a.yaml:7:1: Kustomization flux-system/a: path \"../../etc\" leads out",
            ),
            (
                kustomization("a", "./a", "  dependsOn:\n    - name: nobody\n"),
                "a.yaml:1:1: Kustomization flux-system/a: depends on Kustomization flux-system/nobody, which the tree does not hold",
            ),
            (
                kustomization("a", "./a", "  dependsOn:\n    - name: a\n"),
                "a.yaml:1:1: Kustomization flux-system/a: is in a dependsOn cycle (flux-system/a)",
            ),
            (
                kustomization("a", "./a", "").replace("name: flux-system\n", "name: tenant\n"),
                "a.yaml:1:1: Kustomization flux-system/a: its source GitRepository flux-system/tenant is not the repository being read",
            ),
            (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: r}\nspec:\n  postRenderers:\n    - kustomize:\n        patchesStrategicMerge: []\n"
                    .to_string(),
                "a.yaml:5:1: HelmRelease default/r: `postRenderers[].kustomize.patchesStrategicMerge` is not carried out by driftless yet",
            ),
            (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: r}\nspec:\n  test:\n    enable: true\n"
                    .to_string(),
                "a.yaml:5:1: HelmRelease default/r: `test.enable: true` is not carried out",
            ),
            (
                "apiVersion: notification.toolkit.fluxcd.io/v1\nkind: Alert\nmetadata: {name: r}\n"
                    .to_string(),
                "a.yaml:1:1: Flux's Alert (notification.toolkit.fluxcd.io/v1) is not carried out by driftless yet",
            ),
            (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: r}\nspec:\n  chart:\n    spec:\n      chart: x\n      sourceRef: {kind: HelmRepository, name: nowhere}\n"
                    .to_string(),
                "a.yaml:8:1: HelmRelease default/r: its HelmRepository default/nowhere is not in the tree",
            ),
            (
                kustomization("a", "./", ""),
                "a.yaml:1:1: Kustomization flux-system/a: path \".\" holds the tree being read",
            ),
            // Of another type than Flux's CRD has it: refused, not read as absent (a
            // number for a path was the repository's root).
            (
                kustomization("a", "5", ""),
                "a.yaml:7:1: Kustomization flux-system/a: `spec.path` is a number, not a string; nothing is applied",
            ),
            (
                kustomization("a", "./a", "  dependsOn:\n    name: infra\n"),
                "a.yaml:12:1: Kustomization flux-system/a: `spec.dependsOn` is a map, not a list; nothing is applied",
            ),
            (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: r}\nspec:\n  releaseName: [a]\n"
                    .to_string(),
                "a.yaml:5:1: HelmRelease default/r: `spec.releaseName` is a list, not a string; nothing is applied",
            ),
            // Read by hand, these were taken as absent: CRDs installed, no patches.
            (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: r}\nspec:\n  install:\n    crds: false\n"
                    .to_string(),
                "a.yaml:6:1: HelmRelease default/r: `spec.install.crds` is true or false, not a string; nothing is applied",
            ),
            (
                kustomization("a", "./a", "  patches:\n    patch: x\n"),
                "a.yaml:12:1: Kustomization flux-system/a: `spec.patches` is a map, not a list; nothing is applied",
            ),
        ];
        for (text, want) in cases {
            refused(&text, want);
        }
    }

    #[test]
    fn a_null_entry_of_a_list_is_as_absent() {
        let apps = format!(
            "{}---\n{}",
            kustomization(
                "apps",
                "./apps",
                "  dependsOn:\n    - null\n    - name: infra\n  postBuild:\n    substituteFrom: [~]\n"
            ),
            kustomization("infra", "./infra", "")
        );
        let mut files = vec![file("apps.yaml", &apps)];
        let found = find_in(&mut files, Some("clusters/x"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert!(found.held.is_empty(), "{:?}", found.held);
        let waves: Vec<(&str, i32)> = found
            .renders
            .kustomizations
            .iter()
            .map(|k| (k.name.as_str(), k.wave))
            .collect();
        assert_eq!(waves, [("apps", 1), ("infra", 0)]);
    }

    #[test]
    fn health_check_exprs_judge_the_objects_of_their_kustomization_only() {
        let exprs = "  healthCheckExprs:\n    - apiVersion: example.com/v1\n      kind: Widget\n      failed: status.phase == 'Broken'\n      current: status.phase == 'Ready'\n";
        let mut files = vec![file("a.yaml", &kustomization("a", "./a", exprs))];
        let found = find_in(&mut files, Some("clusters/x"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let rules = &found.renders.kustomizations[0].health;
        assert_eq!(rules.len(), 1);
        let r = &rules[0];
        assert_eq!(r.scope.as_deref(), Some("a.yaml#flux.flux-system.a"));
        assert_eq!(r.at.to_string(), "a.yaml:16:1");
        assert_eq!(
            r.current.as_ref().map(|e| e.source.as_str()),
            Some("status.phase == 'Ready'")
        );
        assert!(r.in_progress.is_none());
        // Scoped: the rule judges that file's objects, the tree's rule the rest.
        let mut settings = crate::spec::settings::Settings::default();
        let tree_wide = std::sync::Arc::new(crate::spec::settings::HealthRule {
            scope: None,
            ..(**r).clone()
        });
        settings.health = vec![tree_wide.clone(), r.clone()];
        let rule = |file: &str| {
            settings
                .health_for("example.com/v1", "Widget", file)
                .cloned()
        };
        assert_eq!(rule("a.yaml#flux.flux-system.a"), Some(r.clone()));
        assert_eq!(rule("b.yaml"), Some(tree_wide));
        assert_eq!(
            rule("a.yaml#flux.flux-system.a#flux-helm.x.y"),
            settings
                .health_for("example.com/v1", "Widget", "z")
                .cloned(),
            "a HelmRelease's objects are its own"
        );

        for (extra, want) in [
            (
                "  healthCheckExprs:\n    - apiVersion: example.com/v1\n      kind: Widget\n      current: status.phase ==\n",
                "a.yaml:15:1: Kustomization flux-system/a: healthCheckExprs: `current` of Widget is not a valid CEL expression",
            ),
            (
                "  healthCheckExprs:\n    - apiVersion: apps/v1\n      kind: Deployment\n      current: 'true'\n",
                "a.yaml:13:1: Kustomization flux-system/a: healthCheckExprs: apps/v1 is a Kubernetes kind whose readiness driftless already judges",
            ),
            (
                "  healthCheckExprs:\n    - apiVersion: example.com/v1\n      kind: Widget\n      failed: 'false'\n",
                "a.yaml:14:1: Kustomization flux-system/a: healthCheckExprs: the entry for Widget has no `current`",
            ),
        ] {
            refused(&kustomization("a", "./a", extra), want);
        }
    }

    #[test]
    fn drift_detection_is_drift_reported_or_corrected_and_its_ignore_rules_select_objects() {
        let release = |dd: &str| {
            format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: r, namespace: web}}\nspec:\n  chart:\n    spec:\n      chart: ./charts/r\n      sourceRef: {{kind: GitRepository, name: flux-system, namespace: flux-system}}\n{dd}"
            )
        };
        let converted = |dd: &str| {
            let mut files = vec![file("r.yaml", &release(dd))];
            let found = find_in(&mut files, Some("clusters/staging"));
            // A HelmRelease refused is held, an app of its own.
            assert!(found.held.iter().all(|h| h.app == "flux-helm/web/r"));
            let said = said(&found);
            (
                found.renders.releases.into_iter().map(|r| r.release).next(),
                said,
            )
        };
        let drift = |r: &crate::spec::helm::HelmRelease| {
            r.annotations.get(crate::spec::policy::DRIFT).cloned()
        };
        // Flux's default leaves a changed object as it is: reported, not corrected.
        for dd in [
            "",
            "  driftDetection: {mode: disabled}\n",
            "  driftDetection: {mode: warn}\n",
        ] {
            let (r, said) = converted(dd);
            assert!(said.is_empty(), "{said:?}");
            assert_eq!(drift(&r.unwrap()).as_deref(), Some("report"), "{dd}");
        }
        let (r, _) = converted(
            "  driftDetection:\n    mode: enabled\n    ignore:\n      - paths: [/spec/replicas]\n        target: {kind: Deployment, name: web}\n      - paths: [/data/x]\n",
        );
        let r = r.unwrap();
        assert_eq!(drift(&r), None);
        let mut out = crate::hydrate::helm::objects(
            b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, annotations: {driftless.dev/ignore-fields: /spec/paused}}\n",
        )
        .unwrap();
        crate::hydrate::marks::AppMarks::put_all(&[crate::hydrate::helm::marks(&r)], &mut out);
        let ignored =
            |i: usize| out[i]["metadata"]["annotations"]["driftless.dev/ignore-fields"].clone();
        assert_eq!(ignored(0), "/spec/replicas, /data/x");
        assert_eq!(
            ignored(1),
            "/spec/paused, /data/x",
            "its own first; no replicas"
        );
        for (dd, want) in [
            (
                "  driftDetection: {mode: sometimes}\n",
                "r.yaml:9:1: HelmRelease web/r: `driftDetection.mode: sometimes` is none of enabled, warn, disabled",
            ),
            (
                "  driftDetection:\n    ignore:\n      - paths: [spec/replicas]\n",
                "r.yaml:11:1: HelmRelease web/r: driftDetection.ignore: \"spec/replicas\" is not a JSON pointer",
            ),
            (
                "  driftDetection:\n    ignore:\n      - paths: [/spec/replicas]\n        target: {labelSelector: app=web}\n",
                "r.yaml:12:1: HelmRelease web/r: `driftDetection.ignore[].target.labelSelector` is not carried out",
            ),
            (
                "  driftDetection:\n    ignore:\n      - paths: [/spec/replicas]\n        target: {name: web-.*}\n",
                "r.yaml:12:1: HelmRelease web/r: `driftDetection.ignore[].target.name: web-.*` is a pattern",
            ),
        ] {
            let (r, said) = converted(dd);
            assert!(r.is_none());
            assert!(
                said.len() == 1 && said[0].starts_with(want),
                "{said:?}\nwanted {want}"
            );
        }
    }

    #[test]
    fn helm_releases_become_chart_releases_as_flux_names_them() {
        let text = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: podinfo, namespace: flux-system}\nspec:\n  url: https://charts.example/podinfo/\n  secretRef: {name: charts}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: oci, namespace: flux-system}\nspec: {type: oci, url: oci://registry.example/charts}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: web\n  annotations: {driftless.dev/wave: \"1\", driftless.dev/prune: disabled}\nspec:\n  targetNamespace: shop\n  chart:\n    spec:\n      chart: podinfo\n      version: '6.x'\n      sourceRef: {kind: HelmRepository, name: podinfo, namespace: flux-system}\n  install: {crds: Skip}\n  values: {replicaCount: 2}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cache, namespace: web}\nspec:\n  releaseName: redis\n  suspend: true\n  dependsOn: [{name: podinfo}]\n  chart:\n    spec:\n      chart: redis\n      sourceRef: {kind: HelmRepository, name: oci, namespace: flux-system}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: local, namespace: web}\nspec:\n  chart:\n    spec:\n      chart: ./charts/local\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n";
        let mut files = vec![file("apps.yaml", text)];
        let found = find_in(&mut files, Some("clusters/staging"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let r: Vec<&crate::spec::helm::HelmRelease> =
            found.renders.releases.iter().map(|r| &r.release).collect();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (
                r[0].release_name.as_str(),
                r[0].namespace.as_str(),
                r[0].chart.as_str(),
                r[0].repository.as_deref(),
                r[0].version.as_deref()
            ),
            (
                "shop-podinfo",
                "shop",
                "podinfo",
                Some("https://charts.example/podinfo"),
                Some("6.x")
            )
        );
        assert_eq!(r[0].username_file.as_deref(), Some("charts/username"));
        assert!(!r[0].include_crds);
        assert_eq!(r[0].values, json!({"replicaCount": 2}));
        assert_eq!(
            r[0].annotations
                .get("driftless.dev/wave")
                .map(String::as_str),
            Some("1")
        );
        assert_eq!(
            r[0].annotations
                .get("driftless.dev/prune")
                .map(String::as_str),
            Some("disabled")
        );
        assert_eq!(
            (
                r[1].release_name.as_str(),
                r[1].namespace.as_str(),
                r[1].chart.as_str(),
                r[1].version.as_deref()
            ),
            (
                "redis",
                "web",
                "oci://registry.example/charts/redis",
                Some("*")
            )
        );
        assert_eq!(
            r[1].annotations
                .get("driftless.dev/wave")
                .map(String::as_str),
            Some("2"),
            "after podinfo"
        );
        assert_eq!(
            r[1].annotations
                .get("driftless.dev/suspend")
                .map(String::as_str),
            Some("Flux HelmRelease web/cache is suspended (suspend: true)")
        );
        assert!(!r[0].annotations.contains_key("driftless.dev/suspend"));
        assert_eq!(r[2].chart, "../../charts/local");
        assert_eq!(
            found.renders.releases[0].file,
            "apps.yaml#flux-helm.web.podinfo"
        );
    }

    #[test]
    fn variables_and_values_come_from_the_tree_s_config_maps_and_secrets() {
        let vars = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-vars, namespace: flux-system}\ndata: {region: eu, env: prod}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: flux-system}\ndata: {token: czNjcmV0}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: podinfo-values, namespace: web}\ndata:\n  values.yaml: |\n    ui: {message: from-map, color: blue}\n    replicaCount: 3\n  color: red\n";
        let k = kustomization(
            "a",
            "./a",
            "  postBuild:\n    substitute: {env: staging}\n    substituteFrom:\n      - {kind: ConfigMap, name: cluster-vars}\n      - {kind: Secret, name: creds}\n      - {kind: ConfigMap, name: absent, optional: true}\n",
        );
        let release = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: podinfo, namespace: web}\nspec:\n  chart:\n    spec:\n      chart: ./charts/podinfo\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n  valuesFrom:\n    - {kind: ConfigMap, name: podinfo-values}\n    - {kind: ConfigMap, name: podinfo-values, valuesKey: color, targetPath: ui.color}\n  values: {replicaCount: 1}\n";
        let mut files = vec![
            file("vars.yaml", vars),
            file("a.yaml", &k),
            file("r.yaml", release),
        ];
        let found = find_in(&mut files, Some("clusters/x"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert_eq!(
            json!(found.renders.kustomizations[0].spec.post_build.substitute),
            json!({"env": "staging", "region": "eu", "token": "s3cret"}),
            "substitute wins over substituteFrom"
        );
        assert_eq!(
            found.renders.releases[0].release.values,
            json!({"ui": {"message": "from-map", "color": "red"}, "replicaCount": 1})
        );

        let missing = kustomization(
            "b",
            "./b",
            "  postBuild:\n    substituteFrom:\n      - {kind: ConfigMap, name: nowhere}\n",
        );
        let mut files = vec![file("b.yaml", &missing)];
        let found = find_in(&mut files, Some("clusters/x"));
        assert_eq!(found.held[0].app, "flux/flux-system/b");
        assert_eq!(
            found.held[0].error.to_string(),
            "b.yaml:1:1: Kustomization flux-system/b: substituteFrom: ConfigMap flux-system/nowhere is not in the tree"
        );
    }

    #[test]
    fn an_artifact_generator_s_artifact_is_made_of_this_repository() {
        // As flux2-kustomize-helm-example has it: apps/base and apps/staging copied into
        // one artifact, beside each other, and a Kustomization reading it.
        let generator = "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata: {name: flux-system, namespace: flux-system}\nspec:\n  sources:\n    - {alias: monorepo, kind: GitRepository, name: flux-system}\n  artifacts:\n    - name: apps\n      copy:\n        - {from: \"@monorepo/apps/base/**\", to: \"@artifact/base/\"}\n        - {from: \"@monorepo/apps/staging/**\", to: \"@artifact/staging/\"}\n        - {from: \"@monorepo/extra/*.yaml\", to: \"@artifact/staging/extra/\"}\n        - {from: \"@monorepo/README\", to: \"@artifact/docs/README.md\"}\n";
        let apps = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  sourceRef: {kind: ExternalArtifact, name: apps}\n  path: ./staging\n  prune: true\n";
        let mut files = vec![file("artifacts.yaml", generator), file("apps.yaml", apps)];
        let found = find_in(&mut files, Some("clusters/staging"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let k = &found.renders.kustomizations[0];
        assert_eq!(k.path, "staging");
        let rules = k.artifact.clone().unwrap();
        let rule = |from: &str, to: &str| CopyRule {
            from: from.into(),
            to: to.into(),
            exclude: Vec::new(),
            strategy: Strategy::Overwrite,
        };
        assert_eq!(
            rules,
            [
                rule("apps/base/**", "base/"),
                rule("apps/staging/**", "staging/"),
                rule("extra/*.yaml", "staging/extra/"),
                rule("README", "docs/README.md"),
            ]
        );
        assert!(
            files[0].contents.iter().all(|b| *b == b'\n'),
            "read, not applied"
        );

        let repo = tempfile::tempdir().unwrap();
        for p in [
            "apps/base/podinfo/release.yaml",
            "apps/staging/kustomization.yaml",
            "extra/a.yaml",
            "extra/b.txt",
            "README",
            "other/x.yaml",
        ] {
            let f = repo.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, p).unwrap();
        }
        let into = tempfile::tempdir().unwrap();
        let repo_dir = repo.path().canonicalize().unwrap();
        materialise(&repo_dir, &rules, into.path()).unwrap();
        let mut made: Vec<String> = Vec::new();
        let mut pending = vec![into.path().to_path_buf()];
        while let Some(d) = pending.pop() {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                match e.path().is_dir() {
                    true => pending.push(e.path()),
                    false => made.push(
                        e.path()
                            .strip_prefix(into.path())
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    ),
                }
            }
        }
        made.sort();
        assert_eq!(
            made,
            [
                "base/podinfo/release.yaml",
                "docs/README.md",
                "staging/extra/a.yaml",
                "staging/kustomization.yaml"
            ]
        );

        // Another source's files are refused.
        let foreign = generator.replace(
            "name: flux-system}\n  artifacts",
            "name: tenant}\n  artifacts",
        );
        let mut files = vec![file("artifacts.yaml", &foreign), file("apps.yaml", apps)];
        let found = find_in(&mut files, Some("clusters/staging"));
        let said = found.held[0].error.to_string();
        assert!(
            said.contains(
                "copies from source \"monorepo\", which is not the repository being read"
            ),
            "{said}"
        );
    }

    #[test]
    fn a_tenants_source_on_another_branch_of_this_repository_is_said_to_be_read_in_place() {
        // As flux2-multi-tenancy has it: the tenant's GitRepository is this repository at
        // the tenant's branch.
        let git = |ns: &str, name: &str, r: &str| {
            format!(
                "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  url: https://github.com/acme/fleet.git\n{r}"
            )
        };
        let bootstrap = git("flux-system", "flux-system", "  ref: {branch: main}\n");
        let same = git("team-a", "a", "  ref: {branch: main}\n");
        let other = git("dev-team", "dev-team", "  ref: {branch: dev-team}\n");
        let pinned = git("team-b", "b", "  ref: {tag: v1.2.0}\n");
        let elsewhere = "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: c, namespace: team-c}\nspec:\n  url: https://github.com/other/repo\n  ref: {branch: dev}\n";
        let text = [bootstrap, same, other, pinned, elsewhere.to_string()].concat();
        let mut files = vec![file("sources.yaml", &text)];
        let found = find_in(&mut files, Some("clusters/staging"));
        assert_eq!(
            found.notices,
            [
                "GitRepository/dev-team/dev-team names branch dev-team of this repository: driftless reads it in place, at the revision being synced (branch main of flux-system), not at that ref",
                "GitRepository/team-b/b names tag v1.2.0 of this repository: driftless reads it in place, at the revision being synced (branch main of flux-system), not at that ref",
            ]
        );
    }

    #[test]
    fn a_source_of_the_wrong_shape_holds_what_reads_it_at_its_own_line() {
        // podinfo's url is a list; charts' secretRef a string: read by hand, the first
        // was a repository of no URL and the second no credentials.
        let sources = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: podinfo, namespace: flux-system}\nspec:\n  url:\n    - https://example.com/podinfo\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: flux-system}\nspec:\n  url: https://charts.example\n  secretRef: creds\n";
        let reads_podinfo = kustomization("app", "./app", "")
            .replace("    name: flux-system\n", "    name: podinfo\n");
        let release = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: flux-system}\nspec:\n  chart:\n    spec:\n      chart: web\n      sourceRef: {kind: HelmRepository, name: charts}\n";
        let mut files = vec![
            file("sources.yaml", sources),
            file("app.yaml", &reads_podinfo),
            file("other.yaml", &kustomization("other", "./other", "")),
            file("release.yaml", release),
        ];
        let found = find_in(&mut files, Some("clusters/x"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let held: Vec<(String, String)> = found
            .held
            .iter()
            .map(|h| (h.app.clone(), h.error.to_string()))
            .collect();
        assert_eq!(
            held,
            [
                (
                    "flux/flux-system/app".to_string(),
                    "sources.yaml:5:1: Kustomization flux-system/app: its GitRepository flux-system/podinfo is refused (`spec.url` is a list, not a string); nothing is applied".to_string()
                ),
                (
                    "flux-helm/flux-system/web".to_string(),
                    "sources.yaml:13:1: HelmRelease flux-system/web: its HelmRepository flux-system/charts is refused (`spec.secretRef` is a string, not a map); nothing is applied".to_string()
                ),
            ]
        );
        // What reads another source is carried out; each refusal is said once on its own.
        let built: Vec<&str> = found
            .renders
            .kustomizations
            .iter()
            .map(|k| k.name.as_str())
            .collect();
        assert_eq!(built, ["other"]);
        let said: Vec<&String> = found
            .notices
            .iter()
            .filter(|n| n.contains("is a list") || n.contains("is a string"))
            .collect();
        assert_eq!(
            said,
            [
                "sources.yaml:5:1: GitRepository flux-system/podinfo: `spec.url` is a list, not a string; what reads it is held",
                "sources.yaml:13:1: HelmRepository flux-system/charts: `spec.secretRef` is a string, not a map; what reads it is held",
            ]
        );
    }

    #[test]
    fn an_artifact_generator_of_the_wrong_shape_holds_what_reads_its_artifact() {
        // A list as `strategy` was read as Overwrite: the artifact made otherwise than
        // Flux's would refuse to.
        let generator = "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata: {name: gen, namespace: flux-system}\nspec:\n  sources:\n    - {alias: monorepo, kind: GitRepository, name: flux-system}\n  artifacts:\n    - name: apps\n      copy:\n        - from: \"@monorepo/apps/**\"\n          to: \"@artifact/\"\n          strategy: [Merge]\n";
        let apps = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  sourceRef: {kind: ExternalArtifact, name: apps}\n  path: ./\n";
        let mut files = vec![file("gen.yaml", generator), file("apps.yaml", apps)];
        let found = find_in(&mut files, Some("clusters/staging"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert!(found.renders.kustomizations.is_empty());
        let held: Vec<String> = found.held.iter().map(|h| h.error.to_string()).collect();
        assert_eq!(
            held,
            [
                "gen.yaml:12:1: Kustomization flux-system/apps: its ArtifactGenerator flux-system/gen is refused (`spec.artifacts[0].copy[0].strategy` is a list, not a string); nothing is applied"
            ]
        );
        assert!(
            found
                .notices
                .iter()
                .any(|n| n.starts_with("gen.yaml:12:1: ArtifactGenerator flux-system/gen:")),
            "{:?}",
            found.notices
        );
    }

    #[test]
    fn bootstraps_source_refused_holds_what_reads_it_but_not_the_tree() {
        let sync = SYNC.replace(
            "  url: ssh://git@github.com/acme/fleet\n",
            "  url: ssh://git@github.com/acme/fleet\n  ref: main\n",
        );
        let mut files = vec![
            file("flux-system/gotk-sync.yaml", &sync),
            file("apps.yaml", &kustomization("apps", "./apps", "")),
        ];
        let found = find_in(&mut files, Some("clusters/staging"));
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let held: Vec<&str> = found.held.iter().map(|h| h.app.as_str()).collect();
        assert_eq!(held, ["flux/flux-system/apps"], "{:?}", found.held);
        assert!(
            found.held[0].error.to_string().contains(
                "its GitRepository flux-system/flux-system is refused (`spec.ref` is a string, not a map)"
            ),
            "{}",
            found.held[0].error
        );
        assert!(found.renders.kustomizations.is_empty());
    }

    #[test]
    fn flux_s_own_install_is_left_out() {
        let install = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n  labels:\n    app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux\n";
        let mut files = vec![file("gotk-components.yaml", install)];
        let found = find_in(&mut files, Some(""));
        assert_eq!(found.install_left_out, 1);
        assert!(files[0].contents.iter().all(|b| *b == b'\n'));
    }

    /// The build's objects with the Kustomization's marks, as the stage puts them on.
    fn finished(built: &[u8], k: &Kustomization) -> Vec<Value> {
        let mut docs = finish(built, k).unwrap();
        crate::hydrate::marks::AppMarks::put_all(&[build::marks(k)], &mut docs);
        docs
    }

    #[test]
    fn flux_s_marks_and_the_kustomization_s_become_driftless_s() {
        let mut k = item(
            &serde_saphyr::from_str::<Value>(&kustomization("a", "./a", "  force: true\n  commonMetadata:\n    labels: {team: x}\n  postBuild:\n    substitute: {v: one}\n")).unwrap(),
            "",
            Location::default(),
            "flux-system",
            "a",
        )
        .unwrap();
        k.wave = 2;
        k.spec.prune = Some(false);
        let built = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\ndata:\n  k: \"${v}\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  annotations:\n    kustomize.toolkit.fluxcd.io/reconcile: disabled\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  k: \"${v}\"\n";
        let docs = finished(built.as_bytes(), &k);
        let a = |i: usize, key: &str| docs[i]["metadata"]["annotations"][key].clone();
        assert_eq!(docs[0]["data"]["k"], "one");
        assert_eq!(docs[1]["data"]["k"], "${v}", "substitution disabled");
        assert_eq!(
            docs[0]["metadata"]["labels"],
            json!({"team": "x", NAME_LABEL: "a", NAMESPACE_LABEL: "flux-system"})
        );
        assert_eq!(a(0, "driftless.dev/wave"), "2");
        assert_eq!(a(0, "driftless.dev/prune"), "disabled");
        assert_eq!(a(0, "driftless.dev/replace"), "on-immutable");
        assert_eq!(a(0, "driftless.dev/apply"), "create-only");
        assert_eq!(a(1, "driftless.dev/apply"), "create-only");
        assert_eq!(a(1, "driftless.dev/substitute"), "disabled");
        assert_eq!(a(0, "driftless.dev/suspend"), Value::Null);
        assert_eq!(a(0, "driftless.dev/service-account"), Value::Null);

        // A tenant's account is asked; Flux's own controller's is driftless's own rights.
        let account = |k: &Kustomization| {
            let docs = finished(built.as_bytes(), k);
            docs[0]["metadata"]["annotations"]["driftless.dev/service-account"].clone()
        };
        k.spec.service_account_name = Some("dev-team".into());
        assert_eq!(account(&k), "flux-system/dev-team");
        k.spec.service_account_name = Some("kustomize-controller".into());
        assert_eq!(account(&k), Value::Null);
        k.spec.service_account_name = None;

        // Suspended: what it applies is held back; a HelmRelease it renders is Flux's
        // own object, held back only by its own `suspend`.
        k.spec.suspend = Some(true);
        let release = "---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: r\nspec: {}\n";
        let docs = finished(format!("{built}{release}").as_bytes(), &k);
        let a = |i: usize, key: &str| docs[i]["metadata"]["annotations"][key].clone();
        let held = "Flux Kustomization flux-system/a is suspended (suspend: true)";
        assert_eq!(a(0, "driftless.dev/suspend"), held);
        assert_eq!(a(1, "driftless.dev/suspend"), held);
        assert_eq!(a(2, "driftless.dev/suspend"), Value::Null, "{docs:?}");
    }

    #[test]
    fn substitution_is_flux_s() {
        let vars: BTreeMap<String, String> = [
            ("cluster".to_string(), "staging".to_string()),
            ("empty".to_string(), String::new()),
        ]
        .into();
        assert_eq!(
            substitute(
                "a: ${cluster}-$cluster ${missing} ${missing:=x} ${empty:-d} $$HOME ${not valid} $1",
                &vars
            ),
            "a: staging-staging  x d $HOME ${not valid} $1"
        );
    }

    #[test]
    fn urls_and_paths_normalise() {
        assert_eq!(
            normalise_url("https://GitHub.com/Acme/Fleet.git/"),
            "github.com/acme/fleet"
        );
        assert_eq!(
            normalise_url("ssh://git@github.com/acme/fleet"),
            "github.com/acme/fleet"
        );
        assert_eq!(
            normalise_url("git@github.com:acme/fleet.git"),
            "github.com/acme/fleet"
        );
        assert_eq!(clean_path("./apps/./staging/"), Some("apps/staging".into()));
        assert_eq!(clean_path("apps/../infra"), Some("infra".into()));
        assert_eq!(clean_path("../x"), None);
    }
}
