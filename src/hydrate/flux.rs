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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::cache::{self, KeyBuilder};
use super::kustomize::{self, Kustomize, closure};
use super::runner;
use super::stage::{Shared, error_at};
use super::tool::{Context, FindError, Rendered, Tool, ToolError, found_once};
use super::tree::KUSTOMIZATION_FILES;
use crate::spec::{Location, RenderedBy, SourceFile, SpecError};

/// Flux's API groups end so.
const TOOLKIT: &str = ".toolkit.fluxcd.io";
const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
const HELM_GROUP: &str = "helm.toolkit.fluxcd.io";
const EXTENSIONS_GROUP: &str = "source.extensions.fluxcd.io";
/// Kustomizations that render Kustomizations, this deep at most.
pub const MAX_DEPTH: usize = 8;
/// The label Flux's controller puts on what a Kustomization applies.
const NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
const NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
const SUBSTITUTE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/substitute";
const SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";
const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// `spec` fields carried out, or accepted as driftless already does what they ask
/// (it waits for every object's health; it has no interval).
const CARRIED: &[&str] = &[
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
    pub spec: Value,
    /// Its place in `dependsOn` order: 0 depends on nothing.
    pub wave: i32,
    /// For a source that is an ArtifactGenerator's artifact (`ExternalArtifact`): how the
    /// artifact is made of this repository's files; `path` is then within the artifact.
    pub artifact: Option<Vec<CopyRule>>,
}

/// One of an ArtifactGenerator's `copy` rules, on this repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRule {
    /// A path of the repository: a file, a directory, `DIR/**` (everything under it) or
    /// `DIR/*.yaml` (a glob in one directory).
    pub from: String,
    /// Where in the artifact (a directory when it ends in `/` or is empty).
    pub to: String,
}

/// What one pass over the tree's YAML found of Flux.
#[derive(Debug, Default)]
pub struct Found {
    pub items: Vec<Kustomization>,
    pub errors: Vec<SpecError>,
    /// Objects of Flux's own install left out.
    pub install_left_out: usize,
    /// Flux's HelmReleases, as chart releases of the `helm` kind.
    pub releases: Vec<super::helm::ReleaseAt>,
}

/// Finds Flux's objects in `files` (YAML, written or rendered), takes them out of what is
/// applied (their lines blanked, so every other document keeps its place), and returns the
/// Kustomizations to carry out. `root`: the spec root within the repository, `waves`: the
/// Kustomizations found in earlier passes (their waves, by `namespace/name`).
pub fn find(
    files: &mut [SourceFile],
    root: Option<&str>,
    waves: &mut BTreeMap<String, i32>,
) -> Found {
    let mut found = Found::default();
    let mut sources: BTreeMap<String, Value> = BTreeMap::new();
    let mut items = Vec::new();
    let mut releases = Vec::new();
    let mut generators = Vec::new();
    for f in files.iter_mut() {
        if f.path.ends_with(".toml") || !mentions_flux(&f.contents) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&f.contents) else {
            continue;
        };
        let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut blank = Vec::new();
        for (start, end) in documents(&lines) {
            let doc: String = lines[start..end].concat();
            let Ok(v) = serde_saphyr::from_str::<Value>(&doc) else {
                continue; // the spec loader says what is wrong with it
            };
            let api = v["apiVersion"].as_str().unwrap_or_default();
            let kind = v["kind"].as_str().unwrap_or_default();
            let group = api.split('/').next().unwrap_or_default();
            let at = |line: usize| Location {
                file: f.path.clone(),
                line: start + line + 1,
                column: 1,
            };
            if group == EXTENSIONS_GROUP && kind == "ArtifactGenerator" {
                blank.push((start, end));
                generators.push(v.clone());
            } else if group.ends_with(TOOLKIT) {
                blank.push((start, end));
                let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                match (group, kind) {
                    (KUSTOMIZE_GROUP, "Kustomization") => {
                        match item(&v, &doc, at(0), ns, name) {
                            Ok(k) => items.push(k),
                            Err(e) => found.errors.push(e),
                        }
                    }
                    (SOURCE_GROUP, "GitRepository" | "OCIRepository" | "HelmRepository" | "Bucket") => {
                        sources.insert(format!("{kind}/{ns}/{name}"), v.clone());
                    }
                    (HELM_GROUP, "HelmRelease") => releases.push((at(0), doc.clone(), v.clone())),
                    _ => found.errors.push(err(
                        at(0),
                        format!(
                            "Flux's {kind} ({api}) is not carried out by driftless yet: driftless reads Flux's Kustomization, HelmRelease and their sources; take it out of the tree"
                        ),
                    )),
                }
            } else if is_flux_install(&v) {
                blank.push((start, end));
                found.install_left_out += 1;
            }
        }
        if blank.is_empty() {
            continue;
        }
        for (start, end) in blank {
            for l in &mut lines[start..end] {
                *l = if l.ends_with('\n') { "\n" } else { "" };
            }
        }
        f.contents = lines.concat().into_bytes();
    }
    let url_of = |key: &str| {
        sources
            .get(key)
            .and_then(|v| v["spec"]["url"].as_str())
            .map(normalise_url)
    };
    let own = url_of("GitRepository/flux-system/flux-system");
    let git: BTreeMap<String, Option<String>> = sources
        .keys()
        .filter(|k| k.starts_with("GitRepository/"))
        .map(|k| (k.clone(), url_of(k)))
        .collect();
    items.retain_mut(
        |k| match from_source(k, &generators, &git, own.as_deref(), root) {
            Ok(true) => true,
            Ok(false) => {
                // The tree being read: its objects are those already read.
                waves.insert(format!("kustomization/{}/{}", k.namespace, k.name), 0);
                false
            }
            Err(e) => {
                found.errors.push(e);
                false
            }
        },
    );
    order(&mut items, waves, &mut found.errors);
    let mut data = TreeData::new(files);
    items.retain_mut(|k| match variables(k, &mut data) {
        Ok(()) => true,
        Err(e) => {
            found.errors.push(e);
            false
        }
    });
    found.items = items;
    let known = Known {
        sources: &sources,
        git: &git,
        own: own.as_deref(),
        root,
    };
    found.releases = chart_releases(releases, &known, waves, &mut data, &mut found.errors);
    found
}

fn mentions_flux(bytes: &[u8]) -> bool {
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    has(b"fluxcd.io") || has(b"part-of: flux")
}

/// Flux's own install, as `flux bootstrap` writes it (`gotk-components.yaml`).
fn is_flux_install(v: &Value) -> bool {
    let labels = &v["metadata"]["labels"];
    labels["app.kubernetes.io/part-of"] == "flux"
        && labels["app.kubernetes.io/instance"] == "flux-system"
}

/// The documents of a YAML stream, as line ranges (`---` lines between them).
fn documents(lines: &[&str]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_end();
        if t == "---" || t.starts_with("--- ") || t == "..." {
            if i > start {
                out.push((start, i));
            }
            start = i + 1;
        }
    }
    if start < lines.len() {
        out.push((start, lines.len()));
    }
    out
}

fn err(at: Location, message: String) -> SpecError {
    error_at(&at.file, at.line, at.column, message)
}

/// The line of `key:` in `doc` (its first), counted from the document's start.
fn line_of(doc: &str, key: &str) -> usize {
    doc.lines()
        .position(|l| l.trim_start().starts_with(&format!("{key}:")))
        .unwrap_or(0)
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
    let spec = v["spec"].as_object().cloned().unwrap_or_default();
    if name.is_empty() {
        return Err(err(at, "a Flux Kustomization without metadata.name".into()));
    }
    for key in spec.keys() {
        if !CARRIED.contains(&key.as_str()) {
            return Err(err(
                field_at(key),
                format!(
                    "Kustomization {ns}/{name}: `spec.{key}` is not carried out by driftless yet; nothing is applied"
                ),
            ));
        }
    }
    if spec.get("suspend").and_then(Value::as_bool) == Some(true) {
        return Err(err(
            field_at("suspend"),
            format!(
                "Kustomization {ns}/{name}: `suspend: true` is not carried out by driftless yet (use driftless suspend); nothing is applied"
            ),
        ));
    }
    if let Some(pb) = spec.get("postBuild").and_then(Value::as_object)
        && let Some(key) = pb
            .keys()
            .find(|k| *k != "substitute" && *k != "substituteFrom")
    {
        return Err(err(
            field_at(key),
            format!(
                "Kustomization {ns}/{name}: `spec.postBuild.{key}` is not carried out by driftless yet"
            ),
        ));
    }
    let raw = spec.get("path").and_then(Value::as_str).unwrap_or("");
    let path = clean_path(raw).ok_or_else(|| {
        err(
            field_at("path"),
            format!("Kustomization {ns}/{name}: path {raw:?} leads out of the repository"),
        )
    })?;
    Ok(Kustomization {
        at,
        namespace: ns.to_string(),
        name: name.to_string(),
        path,
        spec: Value::Object(spec),
        wave: 0,
        artifact: None,
    })
}

/// `./apps/staging/` as `apps/staging`; `None` when it climbs out.
fn clean_path(raw: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in raw.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// `https://github.com/Org/Repo.git/` and `ssh://git@github.com/org/repo` alike.
fn normalise_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/').trim_end_matches(".git");
    let url = url.split_once("://").map_or(url, |(_, rest)| rest);
    let url = url.split_once('@').map_or(url, |(_, rest)| rest);
    url.replacen(':', "/", 1).to_lowercase()
}

/// Whether `k` is built here, from this repository or from an artifact an
/// ArtifactGenerator makes of it (then its copy rules are put on `k`).
fn from_source(
    k: &mut Kustomization,
    generators: &[Value],
    sources: &BTreeMap<String, Option<String>>,
    own: Option<&str>,
    root: Option<&str>,
) -> Result<bool, SpecError> {
    if k.spec["sourceRef"]["kind"] != "ExternalArtifact" {
        return followed(k, sources, own, root);
    }
    let name = k.spec["sourceRef"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = k.spec["sourceRef"]["namespace"]
        .as_str()
        .unwrap_or(&k.namespace)
        .to_string();
    let said = |why: String| {
        err(
            k.at.clone(),
            format!(
                "Kustomization {}/{}: its ExternalArtifact {ns}/{name} {why}; nothing is applied",
                k.namespace, k.name
            ),
        )
    };
    let found = generators.iter().find_map(|g| {
        let gns = g["metadata"]["namespace"].as_str().unwrap_or("default");
        let artifact = g["spec"]["artifacts"]
            .as_array()?
            .iter()
            .find(|a| a["name"] == name.as_str())?;
        (gns == ns).then_some((g, artifact))
    });
    let Some((generator, artifact)) = found else {
        return Err(said(
            "is made by no ArtifactGenerator the tree holds".into(),
        ));
    };
    let gns = generator["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let mut rules = Vec::new();
    for rule in artifact["copy"].as_array().into_iter().flatten() {
        if rule.get("exclude").is_some() {
            return Err(said(
                "has a copy rule with `exclude`, not carried out by driftless yet".into(),
            ));
        }
        let from = rule["from"].as_str().unwrap_or_default();
        let to = rule["to"].as_str().unwrap_or_default();
        let Some((alias, rest)) = from.strip_prefix('@').and_then(|f| f.split_once('/')) else {
            return Err(said(format!("copies from {from:?}, which names no source")));
        };
        let source = generator["spec"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["alias"] == alias);
        let this_repo = source.is_some_and(|s| {
            let sname = s["name"].as_str().unwrap_or_default();
            let sns = s["namespace"].as_str().unwrap_or(gns);
            s["kind"] == "GitRepository"
                && ((sns == "flux-system" && sname == "flux-system")
                    || own.is_some_and(|own| {
                        sources
                            .get(&format!("GitRepository/{sns}/{sname}"))
                            .cloned()
                            .flatten()
                            .as_deref()
                            == Some(own)
                    }))
        });
        if !this_repo {
            return Err(said(format!(
                "copies from source {alias:?}, which is not the repository being read"
            )));
        }
        let Some(to) = to.strip_prefix("@artifact") else {
            return Err(said(format!("copies to {to:?}, not into `@artifact/`")));
        };
        let dir = to.ends_with('/') || to.is_empty();
        let (Some(from_path), Some(mut to_path)) = (clean_path(rest), clean_path(to)) else {
            return Err(said(format!("copies {from:?} to {to:?}, which leads out")));
        };
        if dir && !to_path.is_empty() {
            to_path.push('/');
        }
        let from_path = if rest.ends_with("/**") || rest == "**" {
            format!(
                "{}/**",
                from_path.trim_end_matches("/**").trim_end_matches("**")
            )
            .trim_start_matches('/')
            .to_string()
        } else {
            from_path
        };
        rules.push(CopyRule {
            from: from_path,
            to: to_path,
        });
    }
    k.artifact = Some(rules);
    Ok(true)
}

/// Makes the artifact `rules` describe of `repo` in `into`.
fn materialise(repo: &Path, rules: &[CopyRule], into: &Path) -> Result<(), String> {
    let inside = |p: &Path| -> Result<PathBuf, String> {
        let real = p
            .canonicalize()
            .map_err(|e| format!("{}: {e}", p.strip_prefix(repo).unwrap_or(p).display()))?;
        match real.starts_with(repo) {
            true => Ok(real),
            false => Err(format!(
                "{} leads out of the repository",
                p.strip_prefix(repo).unwrap_or(p).display()
            )),
        }
    };
    let copy = |from: &Path, to: &Path| -> Result<(), String> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::copy(from, to).map(drop).map_err(|e| e.to_string())
    };
    let all_under = |dir: &Path, to: &Path| -> Result<(), String> {
        let mut pending = vec![dir.to_path_buf()];
        while let Some(d) = pending.pop() {
            for e in std::fs::read_dir(&d).map_err(|e| e.to_string())?.flatten() {
                let p = inside(&e.path())?;
                if p.is_dir() {
                    pending.push(p);
                } else {
                    copy(&p, &to.join(p.strip_prefix(dir).unwrap_or(&p)))?;
                }
            }
        }
        Ok(())
    };
    for rule in rules {
        let to = into.join(&rule.to);
        if let Some(dir) = rule.from.strip_suffix("**") {
            let dir = inside(&repo.join(dir.trim_end_matches('/')))?;
            all_under(&dir, &to)?;
        } else if rule
            .from
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains('*'))
        {
            let (dir, glob) = rule
                .from
                .rsplit_once('/')
                .unwrap_or(("", rule.from.as_str()));
            let dir = inside(&repo.join(dir))?;
            for e in std::fs::read_dir(&dir)
                .map_err(|e| e.to_string())?
                .flatten()
            {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = inside(&e.path())?;
                if p.is_file() && glob_match(glob, &name) {
                    copy(&p, &to.join(&name))?;
                }
            }
        } else {
            let src = inside(&repo.join(&rule.from))?;
            let base = src.file_name().map(PathBuf::from).unwrap_or_default();
            let into_dir = rule.to.is_empty() || rule.to.ends_with('/');
            match (src.is_dir(), into_dir) {
                (true, _) => all_under(&src, &to.join(base))?,
                (false, true) => copy(&src, &to.join(base))?,
                (false, false) => copy(&src, &to)?,
            }
        }
    }
    Ok(())
}

/// `*` matches any run of characters within a name; nothing else is special.
fn glob_match(glob: &str, name: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return glob == name;
    }
    if !name.starts_with(first)
        || !name[first.len()..].ends_with(last)
        || name.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `k` is built here (`false`: it is the tree being read); an error when its
/// source is not this repository.
fn followed(
    k: &Kustomization,
    sources: &BTreeMap<String, Option<String>>,
    own: Option<&str>,
    root: Option<&str>,
) -> Result<bool, SpecError> {
    let r = &k.spec["sourceRef"];
    let kind = r["kind"].as_str().unwrap_or("GitRepository");
    let name = r["name"].as_str().unwrap_or_default();
    let ns = r["namespace"].as_str().unwrap_or(&k.namespace);
    let this_repo = kind == "GitRepository"
        && ((ns == "flux-system" && name == "flux-system")
            || own.is_some_and(|own| {
                sources
                    .get(&format!("GitRepository/{ns}/{name}"))
                    .cloned()
                    .flatten()
                    .as_deref()
                    == Some(own)
            }));
    if !this_repo {
        return Err(err(
            k.at.clone(),
            format!(
                "Kustomization {}/{}: its source {kind} {ns}/{name} is not the repository being read; driftless follows only this one, and nothing is applied",
                k.namespace, k.name
            ),
        ));
    }
    let Some(root) = root else {
        // No tree on disk: the tool says so for each.
        return Ok(true);
    };
    let shown = |p: &str| match p {
        "" => ".".to_string(),
        p => p.to_string(),
    };
    let under =
        |inner: &str, outer: &str| outer.is_empty() || inner.starts_with(&format!("{outer}/"));
    if k.path == root {
        return Ok(false);
    }
    if under(root, &k.path) {
        return Err(err(
            k.at.clone(),
            format!(
                "Kustomization {}/{}: path {:?} holds the tree being read ({}); point driftless at {:?} instead",
                k.namespace,
                k.name,
                shown(&k.path),
                shown(root),
                shown(&k.path)
            ),
        ));
    }
    if under(&k.path, root) {
        return Err(err(
            k.at.clone(),
            format!(
                "Kustomization {}/{}: path {:?} lies in the tree being read ({}), whose files driftless reads already: point driftless at the path Flux's own Kustomization names (as clusters/NAME)",
                k.namespace,
                k.name,
                shown(&k.path),
                shown(root)
            ),
        ));
    }
    Ok(true)
}

/// Each Kustomization's wave: one past the highest it depends on; a cycle or an unknown
/// dependency is an error, and that Kustomization is not carried out.
fn order(
    items: &mut Vec<Kustomization>,
    waves: &mut BTreeMap<String, i32>,
    errors: &mut Vec<SpecError>,
) {
    let nodes: Vec<Node> = items
        .iter()
        .map(|k| Node {
            key: format!("kustomization/{}/{}", k.namespace, k.name),
            deps: depends_on(&k.spec["dependsOn"], &k.namespace)
                .into_iter()
                .map(|d| format!("kustomization/{d}"))
                .collect(),
            at: k.at.clone(),
            base: 0,
        })
        .collect();
    let ws = waves_of(&nodes, waves, errors);
    let mut kept = Vec::new();
    for (mut k, w) in items.drain(..).zip(ws) {
        if let Some(w) = w {
            k.wave = w;
            kept.push(k);
        }
    }
    *items = kept;
}

/// HelmRelease `spec` fields carried out, or accepted (driftless renders and applies a
/// release itself: there is no Helm storage, history or remediation to configure).
const RELEASE_CARRIED: &[&str] = &[
    "chart",
    "chartRef",
    "releaseName",
    "targetNamespace",
    "values",
    "install",
    "upgrade",
    "valuesFrom",
    "dependsOn",
    "suspend",
    "interval",
    "timeout",
    "maxHistory",
    "storageNamespace",
    "driftDetection",
    "rollback",
    "uninstall",
    "test",
];

/// Each HelmRelease as a chart release of the `helm` kind: its chart from its source (a
/// HelmRepository over HTTP or OCI, an OCIRepository, or this repository), its values,
/// release name and namespace as Flux names them, and its waves.
/// What a HelmRelease's chart is found by: the tree's sources, its GitRepositories' URLs,
/// this repository's, and the spec root within it.
struct Known<'a> {
    sources: &'a BTreeMap<String, Value>,
    git: &'a BTreeMap<String, Option<String>>,
    own: Option<&'a str>,
    root: Option<&'a str>,
}

fn chart_releases(
    found: Vec<(Location, String, Value)>,
    known: &Known<'_>,
    waves: &mut BTreeMap<String, i32>,
    data: &mut TreeData<'_>,
    errors: &mut Vec<SpecError>,
) -> Vec<super::helm::ReleaseAt> {
    let mut out = Vec::new();
    let mut nodes = Vec::new();
    for (at, doc, v) in found {
        let converted = chart_release(&at, &doc, &v, known).and_then(|mut r| {
            values_from(&at, &v, &mut r.release, data)?;
            Ok(r)
        });
        match converted {
            Ok(r) => {
                let deps = depends_on(&v["spec"]["dependsOn"], &r.namespace_of_object);
                nodes.push(Node {
                    key: format!("helmrelease/{}/{}", r.namespace_of_object, r.release.name),
                    deps: deps
                        .into_iter()
                        .map(|d| format!("helmrelease/{d}"))
                        .collect(),
                    at: at.clone(),
                    base: r.wave,
                });
                out.push(super::helm::ReleaseAt {
                    file: format!(
                        "{}#flux-helm.{}.{}",
                        at.file, r.namespace_of_object, r.release.name
                    ),
                    release: r.release,
                });
            }
            Err(e) => errors.push(e),
        }
    }
    let ws = waves_of(&nodes, waves, errors);
    let mut kept = Vec::new();
    for (mut r, w) in out.into_iter().zip(ws) {
        if let Some(w) = w {
            if w > 0 {
                r.release
                    .annotations
                    .insert(crate::spec::order::WAVE.to_string(), w.to_string());
            }
            kept.push(r);
        }
    }
    kept
}

struct Converted {
    release: crate::spec::helm::HelmRelease,
    /// The HelmRelease object's own namespace (what `dependsOn` names).
    namespace_of_object: String,
    wave: i32,
}

fn chart_release(
    at: &Location,
    doc: &str,
    v: &Value,
    known: &Known<'_>,
) -> Result<Converted, SpecError> {
    let Known {
        sources,
        git,
        own,
        root,
    } = *known;
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let field_at = |key: &str| Location {
        line: at.line + line_of(doc, key),
        ..at.clone()
    };
    let refuse = |key: &str, what: String| {
        Err(err(
            field_at(key),
            format!("HelmRelease {ns}/{name}: {what}; nothing is applied"),
        ))
    };
    let spec = v["spec"].as_object().cloned().unwrap_or_default();
    for key in spec.keys() {
        if !RELEASE_CARRIED.contains(&key.as_str()) {
            return refuse(
                key,
                format!("`spec.{key}` is not carried out by driftless yet"),
            );
        }
    }
    if v["spec"]["test"]["enable"].as_bool() == Some(true) {
        return refuse(
            "test",
            "`test.enable: true` is not carried out: driftless does not run a chart's tests (its health checks judge the release)".into(),
        );
    }
    if spec.get("suspend").and_then(Value::as_bool) == Some(true) {
        return refuse(
            "suspend",
            "`suspend: true` is not carried out by driftless yet (use driftless suspend)".into(),
        );
    }
    for phase in ["install", "upgrade"] {
        for key in spec
            .get(phase)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            if ![
                "crds",
                "remediation",
                "strategy",
                "timeout",
                "createNamespace",
                "cleanupOnFail",
                "disableWait",
                "disableWaitForJobs",
            ]
            .contains(&key.as_str())
            {
                return refuse(
                    key,
                    format!("`spec.{phase}.{key}` is not carried out by driftless yet"),
                );
            }
        }
    }
    let target = spec.get("targetNamespace").and_then(Value::as_str);
    let namespace = target.unwrap_or(ns).to_string();
    let release_name = match (spec.get("releaseName").and_then(Value::as_str), target) {
        (Some(r), _) => r.to_string(),
        (None, Some(t)) => format!("{t}-{name}"),
        (None, None) => name.to_string(),
    };
    let mut release = crate::spec::helm::HelmRelease {
        name: name.to_string(),
        namespace,
        at: at.clone(),
        chart: String::new(),
        repository: None,
        version: None,
        plain_http: false,
        username_file: None,
        password_file: None,
        ca_file: None,
        insecure_skip_tls_verify: false,
        release_name,
        values_files: Vec::new(),
        values: spec.get("values").cloned().unwrap_or(Value::Null),
        include_crds: v["spec"]["install"]["crds"].as_str() != Some("Skip"),
        skip_tests: true,
        kube_version: None,
        api_versions: Vec::new(),
        annotations: BTreeMap::new(),
    };
    // The marks the Kustomization that rendered it put on it (its wave, prune, force)
    // hold for every object of the release.
    let mut wave = 0;
    for (k, value) in v["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if let (true, Some(value)) = (k.starts_with("driftless.dev/"), value.as_str()) {
            if k == crate::spec::order::WAVE {
                wave = value.trim().parse().unwrap_or(0);
            } else {
                release.annotations.insert(k.clone(), value.to_string());
            }
        }
    }
    let creds = |release: &mut crate::spec::helm::HelmRelease, source: &Value| {
        if let Some(secret) = source["spec"]["secretRef"]["name"].as_str() {
            release.username_file = Some(format!("{secret}/username"));
            release.password_file = Some(format!("{secret}/password"));
        }
        if let Some(secret) = source["spec"]["certSecretRef"]["name"].as_str() {
            release.ca_file = Some(format!("{secret}/ca.crt"));
        }
        release.plain_http = source["spec"]["insecure"].as_bool() == Some(true);
    };
    if let Some(chart_ref) = spec.get("chartRef") {
        let kind = chart_ref["kind"].as_str().unwrap_or_default();
        let rname = chart_ref["name"].as_str().unwrap_or_default();
        let rns = chart_ref["namespace"].as_str().unwrap_or(ns);
        let Some(source) = sources
            .get(&format!("{kind}/{rns}/{rname}"))
            .filter(|_| kind == "OCIRepository")
        else {
            return refuse(
                "chartRef",
                format!("its chartRef {kind} {rns}/{rname} is not an OCIRepository the tree holds"),
            );
        };
        release.chart = source["spec"]["url"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let reference = &source["spec"]["ref"];
        release.version = Some(
            reference["tag"]
                .as_str()
                .or_else(|| reference["semver"].as_str())
                .unwrap_or("*")
                .to_string(),
        );
        if reference["digest"].is_string() {
            return refuse(
                "chartRef",
                format!("OCIRepository {rns}/{rname}: a `ref.digest` is not carried out yet"),
            );
        }
        creds(&mut release, source);
        return Ok(Converted {
            release,
            namespace_of_object: ns.to_string(),
            wave,
        });
    }
    let chart = &spec.get("chart").cloned().unwrap_or_default()["spec"];
    let chart_name = chart["chart"].as_str().unwrap_or_default();
    if chart_name.is_empty() {
        return refuse(
            "chart",
            "names no chart (`spec.chart.spec.chart` or `spec.chartRef`)".into(),
        );
    }
    if chart.get("valuesFiles").is_some() || chart.get("valuesFile").is_some() {
        return refuse(
            "valuesFiles",
            "`spec.chart.spec.valuesFiles` is not carried out by driftless yet".into(),
        );
    }
    let kind = chart["sourceRef"]["kind"]
        .as_str()
        .unwrap_or("HelmRepository");
    let sname = chart["sourceRef"]["name"].as_str().unwrap_or_default();
    let sns = chart["sourceRef"]["namespace"].as_str().unwrap_or(ns);
    let version = chart["version"].as_str().unwrap_or("*").to_string();
    match kind {
        "HelmRepository" => {
            let Some(source) = sources.get(&format!("HelmRepository/{sns}/{sname}")) else {
                return refuse(
                    "sourceRef",
                    format!("its HelmRepository {sns}/{sname} is not in the tree"),
                );
            };
            let url = source["spec"]["url"]
                .as_str()
                .unwrap_or_default()
                .trim_end_matches('/');
            if source["spec"]["type"].as_str() == Some("oci") || url.starts_with("oci://") {
                release.chart = format!("{url}/{chart_name}");
            } else {
                release.chart = chart_name.to_string();
                release.repository = Some(url.to_string());
            }
            release.version = Some(version);
            creds(&mut release, source);
        }
        "GitRepository" => {
            let this_repo = (sns == "flux-system" && sname == "flux-system")
                || own.is_some_and(|own| {
                    git.get(&format!("GitRepository/{sns}/{sname}"))
                        .cloned()
                        .flatten()
                        .as_deref()
                        == Some(own)
                });
            if !this_repo {
                return refuse(
                    "sourceRef",
                    format!("its GitRepository {sns}/{sname} is not the repository being read"),
                );
            }
            let path = clean_path(chart_name).ok_or_else(|| {
                err(
                    field_at("chart"),
                    format!(
                        "HelmRelease {ns}/{name}: chart {chart_name:?} leads out of the repository"
                    ),
                )
            })?;
            // The chart's path from the spec root, which the `helm` kind reads from.
            let up = root.map_or(0, |r| {
                if r.is_empty() {
                    0
                } else {
                    r.split('/').count()
                }
            });
            release.chart = format!("{}{path}", "../".repeat(up));
        }
        other => {
            return refuse(
                "sourceRef",
                format!("a chart from a {other} is not carried out by driftless yet"),
            );
        }
    }
    Ok(Converted {
        release,
        namespace_of_object: ns.to_string(),
        wave,
    })
}

/// The ConfigMaps and Secrets the tree holds (as written or rendered): what
/// `substituteFrom` and `valuesFrom` read, as Flux reads them from the cluster.
/// Read only when a Kustomization or HelmRelease asks: most trees never do.
pub struct TreeData<'a> {
    files: &'a [SourceFile],
    objects: Option<BTreeMap<String, Value>>,
}

impl<'a> TreeData<'a> {
    fn new(files: &'a [SourceFile]) -> TreeData<'a> {
        TreeData {
            files,
            objects: None,
        }
    }

    fn index(files: &[SourceFile]) -> BTreeMap<String, Value> {
        let mut objects = BTreeMap::new();
        for f in files.iter().filter(|f| !f.path.ends_with(".toml")) {
            let has = |needle: &[u8]| f.contents.windows(needle.len()).any(|w| w == needle);
            if !has(b"ConfigMap") && !has(b"Secret") {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&f.contents) else {
                continue;
            };
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            for (start, end) in documents(&lines) {
                let Ok(v) = serde_saphyr::from_str::<Value>(&lines[start..end].concat()) else {
                    continue;
                };
                if v["apiVersion"] != "v1"
                    || !matches!(v["kind"].as_str(), Some("ConfigMap" | "Secret"))
                {
                    continue;
                }
                let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                objects.insert(
                    format!("{}/{ns}/{name}", v["kind"].as_str().unwrap_or_default()),
                    v,
                );
            }
        }
        objects
    }

    /// The string data of ConfigMap or Secret `ns/name` (a Secret's `data` decoded);
    /// `Ok(None)` when the tree does not hold it.
    fn read(
        &mut self,
        kind: &str,
        ns: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        use base64::Engine as _;
        let files = self.files;
        let objects = self.objects.get_or_insert_with(|| TreeData::index(files));
        let Some(v) = objects.get(&format!("{kind}/{ns}/{name}")) else {
            return Ok(None);
        };
        if v.get("sops").is_some() {
            return Err(format!(
                "{kind} {ns}/{name} is encrypted with SOPS, and not read for this yet"
            ));
        }
        let mut out = BTreeMap::new();
        for (k, val) in v["data"].as_object().into_iter().flatten() {
            let text = val.as_str().unwrap_or_default();
            let text = match kind {
                "Secret" => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text.trim())
                        .map_err(|_| format!("{kind} {ns}/{name}: data.{k} is not base64"))?;
                    String::from_utf8(bytes)
                        .map_err(|_| format!("{kind} {ns}/{name}: data.{k} is not text"))?
                }
                _ => text.to_string(),
            };
            out.insert(k.clone(), text);
        }
        for (k, val) in v["stringData"].as_object().into_iter().flatten() {
            out.insert(k.clone(), val.as_str().unwrap_or_default().to_string());
        }
        Ok(Some(out))
    }
}

/// A Kustomization's `postBuild.substituteFrom` read from the tree into its `substitute`
/// (whose own values win, as in Flux).
fn variables(k: &mut Kustomization, data: &mut TreeData<'_>) -> Result<(), SpecError> {
    let from = k.spec["postBuild"]["substituteFrom"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if from.is_empty() {
        return Ok(());
    }
    let mut vars = BTreeMap::new();
    for source in &from {
        let kind = source["kind"].as_str().unwrap_or("ConfigMap");
        let name = source["name"].as_str().unwrap_or_default();
        let said = |why: String| {
            err(
                k.at.clone(),
                format!(
                    "Kustomization {}/{}: substituteFrom: {why}",
                    k.namespace, k.name
                ),
            )
        };
        match data.read(kind, &k.namespace, name).map_err(said)? {
            Some(values) => vars.extend(values),
            None if source["optional"].as_bool() == Some(true) => {}
            None => {
                return Err(said(format!(
                    "{kind} {}/{name} is not in the tree",
                    k.namespace
                )));
            }
        }
    }
    for (key, value) in k.spec["postBuild"]["substitute"]
        .as_object()
        .into_iter()
        .flatten()
    {
        vars.insert(
            key.clone(),
            value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string),
        );
    }
    k.spec["postBuild"]["substitute"] = json!(vars);
    Ok(())
}

/// A HelmRelease's `valuesFrom` read from the tree, in order, under its `values` (which
/// win, as in Flux); `targetPath` puts one value at a dotted path.
fn values_from(
    at: &Location,
    v: &Value,
    release: &mut crate::spec::helm::HelmRelease,
    data: &mut TreeData<'_>,
) -> Result<(), SpecError> {
    let Some(list) = v["spec"]["valuesFrom"].as_array() else {
        return Ok(());
    };
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
    let said = |why: String| {
        err(
            at.clone(),
            format!("HelmRelease {ns}/{}: valuesFrom: {why}", release.name),
        )
    };
    let mut merged = json!({});
    for source in list {
        let kind = source["kind"].as_str().unwrap_or("ConfigMap");
        let name = source["name"].as_str().unwrap_or_default();
        let key = source["valuesKey"].as_str().unwrap_or("values.yaml");
        let optional = source["optional"].as_bool() == Some(true);
        let found = data.read(kind, ns, name).map_err(&said)?;
        let Some(text) = found.as_ref().and_then(|d| d.get(key)) else {
            if optional {
                continue;
            }
            return Err(said(match found {
                Some(_) => format!("{kind} {ns}/{name} has no key {key:?}"),
                None => format!("{kind} {ns}/{name} is not in the tree"),
            }));
        };
        let parsed: Value = serde_saphyr::from_str(text)
            .map_err(|e| said(format!("{kind} {ns}/{name} key {key:?} is not YAML: {e}")))?;
        match source["targetPath"].as_str() {
            Some(path) => {
                let mut slot = &mut merged;
                for part in path.split('.') {
                    if !slot.is_object() {
                        *slot = json!({});
                    }
                    slot = slot
                        .as_object_mut()
                        .map(|m| m.entry(part.to_string()).or_insert(Value::Null))
                        .ok_or_else(|| said(format!("targetPath {path:?}")))?;
                }
                *slot = parsed;
            }
            None => merge(&mut merged, parsed),
        }
    }
    let own = std::mem::take(&mut release.values);
    merge(&mut merged, own);
    release.values = merged;
    Ok(())
}

/// Helm's coalescing: maps merge key by key, anything else replaces.
fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (_, Value::Null) => {}
        (slot, v) => *slot = v,
    }
}

/// `dependsOn` entries as `namespace/name` (the namespace defaults to the object's).
fn depends_on(list: &Value, ns: &str) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            let name = d["name"].as_str()?;
            Some(format!("{}/{name}", d["namespace"].as_str().unwrap_or(ns)))
        })
        .collect()
}

/// One object of a `dependsOn` graph.
struct Node {
    key: String,
    deps: Vec<String>,
    at: Location,
    /// The lowest wave it may take.
    base: i32,
}

/// Each node's wave (one past the highest it depends on, at least its base), recorded in
/// `waves`; `None` for one in a cycle or depending on what is not there (an error each).
fn waves_of(
    nodes: &[Node],
    waves: &mut BTreeMap<String, i32>,
    errors: &mut Vec<SpecError>,
) -> Vec<Option<i32>> {
    let mut out = vec![None; nodes.len()];
    let mut pending: Vec<usize> = (0..nodes.len()).collect();
    loop {
        let before = pending.len();
        pending.retain(|&i| {
            let known: Option<Vec<i32>> = nodes[i]
                .deps
                .iter()
                .map(|d| waves.get(d).copied())
                .collect();
            match known {
                Some(ws) => {
                    let wave = ws
                        .into_iter()
                        .map(|w| w + 1)
                        .max()
                        .unwrap_or(0)
                        .max(nodes[i].base);
                    waves.insert(nodes[i].key.clone(), wave);
                    out[i] = Some(wave);
                    false
                }
                None => true,
            }
        });
        if pending.is_empty() {
            return out;
        }
        if pending.len() == before {
            let here: BTreeSet<&str> = pending.iter().map(|&i| nodes[i].key.as_str()).collect();
            for &i in &pending {
                let n = &nodes[i];
                let (kind, key) = n.key.split_once('/').unwrap_or(("", &n.key));
                let missing: Vec<&str> = n
                    .deps
                    .iter()
                    .filter(|d| !waves.contains_key(*d))
                    .map(|d| d.split_once('/').map_or(d.as_str(), |(_, k)| k))
                    .collect();
                let what = if kind == "helmrelease" {
                    "HelmRelease"
                } else {
                    "Kustomization"
                };
                let why = match n
                    .deps
                    .iter()
                    .find(|d| !waves.contains_key(*d) && !here.contains(d.as_str()))
                {
                    Some(d) => format!(
                        "depends on {what} {}, which the tree does not hold",
                        d.split_once('/').map_or(d.as_str(), |(_, k)| k)
                    ),
                    None => format!("is in a dependsOn cycle ({})", missing.join(", ")),
                };
                errors.push(err(n.at.clone(), format!("{what} {key}: {why}")));
            }
            return out;
        }
    }
}

/// The Flux Kustomization tool: kustomize found once.
#[derive(Default)]
pub struct Kustomizations {
    found: Mutex<Option<Kustomize>>,
}

impl Tool for Kustomizations {
    type Item = Kustomization;
    type Ready = Kustomize;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("a Flux Kustomization")
    }

    fn at(&self, item: &Kustomization) -> Location {
        item.at.clone()
    }

    fn output_file(&self, item: &Kustomization) -> String {
        crate::spec::flux_output_file(&item.at.file, &item.namespace, &item.name)
    }

    fn ready(&self, r: &Shared, _: &Context) -> Result<Kustomize, FindError> {
        found_once(&self.found, || {
            kustomize::find(r.opts.kustomize.as_deref(), &r.opts.limits)
        })
    }

    fn render(
        &self,
        r: &Shared,
        tool: &Kustomize,
        k: &Kustomization,
        cx: &Context,
    ) -> Result<Rendered, ToolError> {
        let disk = cx
            .input
            .checkout
            .as_ref()
            .ok_or_else(|| "a Flux Kustomization needs its tree on disk".to_string())?;
        let built = match &k.artifact {
            Some(rules) => {
                let artifact = tempfile::Builder::new()
                    .prefix("driftless-artifact-")
                    .tempdir()
                    .map_err(|e| format!("a directory for the artifact: {e}"))?;
                let said = |e: String| ToolError::from(format!("making its artifact: {e}"));
                materialise(&disk.repo, rules, artifact.path()).map_err(said)?;
                let dir = artifact
                    .path()
                    .canonicalize()
                    .map_err(|e| said(e.to_string()))?;
                build(r, tool, &dir, k)?
            }
            None => build(r, tool, &disk.repo, k)?,
        };
        let yaml = finish(&built, k)?;
        Ok(Rendered {
            yaml,
            by: RenderedBy {
                tool: "kustomize".into(),
                version: tool.version.clone(),
                command: format!(
                    "Flux Kustomization {}/{}: {}",
                    k.namespace,
                    k.name,
                    tool.shown(if k.path.is_empty() { "." } else { &k.path })
                ),
                release: None,
            },
        })
    }
}

/// The kustomization Flux builds for `k` in `dir` (the repository's copy): the
/// directory's own, or one listing its manifests, with `k`'s fields put in. Returns the
/// file name and its text, and the files (relative to the repository) the build reads.
fn kustomization_for(
    repo: &Path,
    dir: &Path,
    k: &Kustomization,
) -> Result<(String, Value, BTreeSet<PathBuf>), String> {
    let mut files = BTreeSet::new();
    let add_closure = |d: &Path, files: &mut BTreeSet<PathBuf>| -> Result<(), String> {
        let c = closure(repo, d, false).map_err(|e| e.to_string())?;
        files.extend(c.files);
        Ok(())
    };
    let own = KUSTOMIZATION_FILES.iter().find(|n| dir.join(n).is_file());
    let (name, mut kus) = match own {
        Some(n) => {
            add_closure(dir, &mut files)?;
            let text =
                std::fs::read_to_string(dir.join(n)).map_err(|e| format!("reading {n}: {e}"))?;
            let v: Value =
                serde_saphyr::from_str(&text).map_err(|e| format!("{n} is not valid YAML: {e}"))?;
            (n.to_string(), v)
        }
        None => {
            // Flux's generator: every manifest under the directory, and each directory
            // holding a kustomization as one resource.
            let mut resources = Vec::new();
            let mut pending = vec![dir.to_path_buf()];
            while let Some(d) = pending.pop() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(&d)
                    .map_err(|e| format!("reading {}: {e}", d.display()))?
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                entries.sort();
                for p in entries {
                    let rel = p
                        .strip_prefix(dir)
                        .unwrap_or(&p)
                        .to_string_lossy()
                        .into_owned();
                    if p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                    {
                        continue;
                    }
                    if p.is_dir() {
                        if KUSTOMIZATION_FILES.iter().any(|n| p.join(n).is_file()) {
                            add_closure(&p, &mut files)?;
                            resources.push(format!("./{rel}"));
                        } else {
                            pending.push(p);
                        }
                    } else if rel.ends_with(".yaml") || rel.ends_with(".yml") {
                        files.insert(p.canonicalize().map_err(|e| e.to_string())?);
                        resources.push(format!("./{rel}"));
                    }
                }
            }
            resources.sort();
            (
                "kustomization.yaml".to_string(),
                json!({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}),
            )
        }
    };
    let spec = &k.spec;
    let Some(obj) = kus.as_object_mut() else {
        return Err(format!("{name} is not a kustomization"));
    };
    if let Some(ns) = spec["targetNamespace"].as_str() {
        obj.insert("namespace".into(), json!(ns));
    }
    for field in ["namePrefix", "nameSuffix"] {
        if let Some(s) = spec[field].as_str() {
            obj.insert(field.into(), json!(s));
        }
    }
    if let Some(ps) = spec["patches"].as_array() {
        let list = obj.entry("patches").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.extend(ps.iter().cloned());
        }
    }
    if let Some(images) = spec["images"].as_array() {
        let list = obj.entry("images").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            for image in images {
                match list.iter_mut().find(|i| i["name"] == image["name"]) {
                    Some(i) => *i = image.clone(),
                    None => list.push(image.clone()),
                }
            }
        }
    }
    if let Some(components) = spec["components"].as_array() {
        for c in components {
            let rel = c.as_str().ok_or("a component is not a path")?;
            let cdir = dir
                .join(rel)
                .canonicalize()
                .map_err(|e| format!("component {rel:?}: {e}"))?;
            if !cdir.starts_with(repo) {
                return Err(format!("component {rel:?} lies outside the repository"));
            }
            add_closure(&cdir, &mut files)?;
        }
        let list = obj.entry("components").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.extend(components.iter().cloned());
        }
    }
    Ok((name, kus, files))
}

/// Builds `k` on a private copy of what it reads (or answers from the cache).
fn build(r: &Shared, tool: &Kustomize, repo: &Path, k: &Kustomization) -> cache::Entry {
    let said = |message: String| ToolError { at: None, message };
    let dir = repo.join(&k.path);
    let dir = dir
        .canonicalize()
        .map_err(|e| said(format!("path {:?}: {e}", k.path)))?;
    if !dir.starts_with(repo) || !dir.is_dir() {
        return Err(said(format!(
            "path {:?} is not a directory of the repository",
            k.path
        )));
    }
    let (name, kus, files) = kustomization_for(repo, &dir, k).map_err(said)?;
    let text = serde_json::to_string_pretty(&kus).map_err(|e| said(e.to_string()))?;
    let mut key = KeyBuilder::new("flux-kustomization");
    key.part(tool.program.as_os_str().as_encoded_bytes())
        .part(tool.version.as_bytes())
        .part(k.path.as_bytes())
        .part(name.as_bytes())
        .part(text.as_bytes());
    let mut contents = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(repo).unwrap_or(f).to_path_buf();
        let bytes =
            std::fs::read(f).map_err(|e| said(format!("reading {}: {e}", rel.display())))?;
        key.part(rel.to_string_lossy().as_bytes()).part(&bytes);
        contents.push((rel, bytes));
    }
    let key = key.finish();
    if let Some(hit) = r.cache.get(&key) {
        return hit;
    }
    let copy = tempfile::Builder::new()
        .prefix("driftless-flux-")
        .tempdir()
        .map_err(|e| said(format!("a directory to build in: {e}")))?;
    for (rel, bytes) in &contents {
        let target = copy.path().join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| said(e.to_string()))?;
        }
        std::fs::write(&target, bytes).map_err(|e| said(e.to_string()))?;
    }
    let at = copy.path().join(&k.path);
    std::fs::create_dir_all(&at).map_err(|e| said(e.to_string()))?;
    std::fs::write(at.join(&name), &text).map_err(|e| said(e.to_string()))?;
    let span = tracing::info_span!("render", tool = "flux", kustomization = %format!("{}/{}", k.namespace, k.name));
    let _enter = span.enter();
    r.runs.fetch_add(1, Ordering::Relaxed);
    let mut args = tool.args(&at);
    // Flux builds with kustomize's load restrictions off, within the repository.
    args.extend(["--load-restrictor".into(), "LoadRestrictionsNone".into()]);
    let result = runner::run(&tool.program, &args, &at, &r.opts.limits, &r.slots)
        .map(Arc::new)
        .map_err(|e| {
            let said = match e {
                runner::RunError::Failed(line) => format!("kustomize build failed: {line}"),
                other => format!("kustomize build: {other}"),
            };
            ToolError::from(said.replace(&format!("{}/", copy.path().display()), ""))
        });
    tracing::info!(ok = result.is_ok(), "rendered");
    r.cache.put(key, result.clone());
    result
}

/// What Flux does after the build: `postBuild.substitute`, `commonMetadata`, its labels;
/// and driftless's marks for `dependsOn`, `prune: false` and `force`.
fn finish(built: &[u8], k: &Kustomization) -> Result<Vec<u8>, ToolError> {
    let text = std::str::from_utf8(built)
        .map_err(|_| ToolError::from("kustomize printed no UTF-8".to_string()))?;
    let vars: Option<BTreeMap<String, String>> =
        k.spec["postBuild"]["substitute"].as_object().map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )
                })
                .collect()
        });
    let meta = &k.spec["commonMetadata"];
    let mut out = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (start, end) in documents(&lines) {
        let mut doc = lines[start..end].concat();
        if doc.trim().is_empty() {
            continue;
        }
        let disabled = doc.contains(&format!("{SUBSTITUTE_ANNOTATION}: disabled"));
        if let (Some(vars), false) = (&vars, disabled) {
            doc = substitute(&doc, vars);
        }
        let mut v: Value = serde_saphyr::from_str(&doc)
            .map_err(|e| ToolError::from(format!("the build's output is not YAML: {e}")))?;
        let flux_mark = |key: &str| {
            v["metadata"]["annotations"][key]
                .as_str()
                .map(str::to_string)
        };
        let ssa = flux_mark(SSA_ANNOTATION);
        let reconcile = flux_mark(RECONCILE_ANNOTATION);
        let Some(metadata) = v.get_mut("metadata").and_then(Value::as_object_mut) else {
            out.push(v);
            continue;
        };
        let mut set = |field: &str, key: &str, value: &str| {
            let m = metadata.entry(field).or_insert_with(|| json!({}));
            if let Some(m) = m.as_object_mut() {
                m.insert(key.to_string(), json!(value));
            }
        };
        for (field, from) in [
            ("labels", &meta["labels"]),
            ("annotations", &meta["annotations"]),
        ] {
            for (key, value) in from.as_object().into_iter().flatten() {
                set(field, key, value.as_str().unwrap_or_default());
            }
        }
        set("labels", NAME_LABEL, &k.name);
        set("labels", NAMESPACE_LABEL, &k.namespace);
        // Flux's substitution is done: driftless's own `${...}` is not theirs.
        set("annotations", crate::spec::policy::SUBSTITUTE, "disabled");
        if k.wave > 0 {
            set("annotations", crate::spec::order::WAVE, &k.wave.to_string());
        }
        if k.spec["prune"].as_bool() == Some(false) {
            set("annotations", crate::spec::policy::PRUNE, "disabled");
        }
        if k.spec["force"].as_bool() == Some(true) {
            set("annotations", crate::spec::policy::REPLACE, "on-immutable");
        }
        // Flux's marks on an object: applied only when missing (IfNotPresent), or left
        // alone (Ignore, reconcile: disabled: created when missing, never changed or
        // pruned, the nearest driftless has).
        let left_alone =
            ssa.as_deref() == Some("Ignore") || reconcile.as_deref() == Some("disabled");
        if ssa.as_deref() == Some("IfNotPresent") || left_alone {
            set("annotations", crate::spec::policy::APPLY, "create-only");
        }
        if left_alone {
            set("annotations", crate::spec::policy::PRUNE, "disabled");
        }
        out.push(v);
    }
    Ok(super::stage::to_yaml(&out))
}

/// Flux's post-build substitution (drone/envsubst as Flux uses it): `${name}`, `$name`,
/// `${name:=default}` and `${name:-default}`; a name with no value and no default becomes
/// empty; `$$` is a `$` never substituted.
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            match body.find('}') {
                Some(close) => {
                    let inner = &body[..close];
                    let (name, default) = match inner.find(":=").or_else(|| inner.find(":-")) {
                        Some(p) => (&inner[..p], Some(&inner[p + 2..])),
                        None => (inner, None),
                    };
                    if !name.is_empty()
                        && name.chars().all(is_name)
                        && !name.starts_with(|c: char| c.is_ascii_digit())
                    {
                        let value = vars
                            .get(name)
                            .filter(|v| !v.is_empty() || default.is_none());
                        out.push_str(value.map(String::as_str).or(default).unwrap_or(""));
                    } else {
                        out.push_str(&rest[i..i + 2 + close + 1]);
                    }
                    rest = &body[close + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            let len = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            let name = &after[..len];
            if len > 0 && !name.starts_with(|c: char| c.is_ascii_digit()) {
                out.push_str(vars.get(name).map_or("", String::as_str));
            } else {
                out.push('$');
                out.push_str(name);
            }
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let found = find(&mut files, Some("clusters/staging"), &mut waves);
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let got: Vec<(&str, &str, i32, usize)> = found
            .items
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
    }

    #[test]
    fn what_is_not_carried_out_is_an_error_at_its_place() {
        let cases = [
            (
                kustomization("a", "./a", "  kubeConfig:\n    secretRef: {name: x}\n"),
                "a.yaml:12:1: Kustomization flux-system/a: `spec.kubeConfig` is not carried out",
            ),
            (
                kustomization("a", "./a", "  suspend: true\n"),
                "a.yaml:12:1: Kustomization flux-system/a: `suspend: true`",
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
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: r}\nspec:\n  postRenderers: []\n"
                    .to_string(),
                "a.yaml:5:1: HelmRelease default/r: `spec.postRenderers` is not carried out by driftless yet",
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
        ];
        for (text, want) in cases {
            let mut files = vec![file("a.yaml", &text)];
            let found = find(&mut files, Some("clusters/x"), &mut BTreeMap::new());
            let said: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            assert!(
                said.len() == 1 && said[0].starts_with(want),
                "{said:?}\nwanted {want}"
            );
            assert!(found.items.is_empty());
        }
    }

    #[test]
    fn helm_releases_become_chart_releases_as_flux_names_them() {
        let text = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: podinfo, namespace: flux-system}\nspec:\n  url: https://charts.example/podinfo/\n  secretRef: {name: charts}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: oci, namespace: flux-system}\nspec: {type: oci, url: oci://registry.example/charts}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: web\n  annotations: {driftless.dev/wave: \"1\", driftless.dev/prune: disabled}\nspec:\n  targetNamespace: shop\n  chart:\n    spec:\n      chart: podinfo\n      version: '6.x'\n      sourceRef: {kind: HelmRepository, name: podinfo, namespace: flux-system}\n  install: {crds: Skip}\n  values: {replicaCount: 2}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cache, namespace: web}\nspec:\n  releaseName: redis\n  dependsOn: [{name: podinfo}]\n  chart:\n    spec:\n      chart: redis\n      sourceRef: {kind: HelmRepository, name: oci, namespace: flux-system}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: local, namespace: web}\nspec:\n  chart:\n    spec:\n      chart: ./charts/local\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n";
        let mut files = vec![file("apps.yaml", text)];
        let found = find(&mut files, Some("clusters/staging"), &mut BTreeMap::new());
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let r: Vec<&crate::spec::helm::HelmRelease> =
            found.releases.iter().map(|r| &r.release).collect();
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
        assert_eq!(r[2].chart, "../../charts/local");
        assert_eq!(found.releases[0].file, "apps.yaml#flux-helm.web.podinfo");
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
        let found = find(&mut files, Some("clusters/x"), &mut BTreeMap::new());
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert_eq!(
            found.items[0].spec["postBuild"]["substitute"],
            json!({"env": "staging", "region": "eu", "token": "s3cret"}),
            "substitute wins over substituteFrom"
        );
        assert_eq!(
            found.releases[0].release.values,
            json!({"ui": {"message": "from-map", "color": "red"}, "replicaCount": 1})
        );

        let missing = kustomization(
            "b",
            "./b",
            "  postBuild:\n    substituteFrom:\n      - {kind: ConfigMap, name: nowhere}\n",
        );
        let mut files = vec![file("b.yaml", &missing)];
        let found = find(&mut files, Some("clusters/x"), &mut BTreeMap::new());
        assert_eq!(
            found.errors[0].to_string(),
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
        let found = find(&mut files, Some("clusters/staging"), &mut BTreeMap::new());
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let k = &found.items[0];
        assert_eq!(k.path, "staging");
        let rules = k.artifact.clone().unwrap();
        let rule = |from: &str, to: &str| CopyRule {
            from: from.into(),
            to: to.into(),
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
        let found = find(&mut files, Some("clusters/staging"), &mut BTreeMap::new());
        let said = found.errors[0].to_string();
        assert!(
            said.contains(
                "copies from source \"monorepo\", which is not the repository being read"
            ),
            "{said}"
        );
        assert!(glob_match("*.yaml", "a.yaml") && !glob_match("*.yaml", "a.yml"));
        assert!(glob_match("a*b*c", "axxbyyc") && !glob_match("a*b*c", "ac"));
    }

    #[test]
    fn flux_s_own_install_is_left_out() {
        let install = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n  labels:\n    app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux\n";
        let mut files = vec![file("gotk-components.yaml", install)];
        let found = find(&mut files, Some(""), &mut BTreeMap::new());
        assert_eq!(found.install_left_out, 1);
        assert!(files[0].contents.iter().all(|b| *b == b'\n'));
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
        k.spec["prune"] = json!(false);
        let built = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\ndata:\n  k: \"${v}\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  annotations:\n    kustomize.toolkit.fluxcd.io/reconcile: disabled\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  k: \"${v}\"\n";
        let out = finish(built.as_bytes(), &k).unwrap();
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(std::str::from_utf8(&out).unwrap()).unwrap();
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
