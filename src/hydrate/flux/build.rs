//! The Flux Kustomization tool: a path built as Flux builds it, on a private copy, then
//! what Flux does after the build.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use super::artifact::materialise;
use super::model::*;
use crate::hydrate::cache::KeyBuilder;
use crate::hydrate::kustomize::{self, Kustomize, Overlay, closure};
use crate::hydrate::marks::{AppMarks, Put, Words};
use crate::hydrate::stage::Shared;
use crate::hydrate::tool::{
    Context, Entry, FindError, Keyed, Output, Ran, Rendered, Tool, ToolError, found_once,
};
use crate::hydrate::tree::KUSTOMIZATION_FILES;
use crate::hydrate::walk::{Hidden, Links, Revisit, Walk, WalkError};
use crate::spec::{AppId, Location, RenderedBy};

/// The Flux Kustomization tool: kustomize found once.
#[derive(Default)]
pub struct Builds {
    found: Mutex<Option<Kustomize>>,
}

impl Tool for Builds {
    type Item = Kustomization;
    type Ready = Kustomize;
    type Prepared = Copy;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("a Flux Kustomization")
    }

    fn at(&self, item: &Kustomization) -> Location {
        item.at.clone()
    }

    fn app(&self, item: &Kustomization) -> Option<AppId> {
        Some(AppId::Flux {
            namespace: item.namespace.clone(),
            name: item.name.clone(),
        })
    }

    fn output_file(&self, item: &Kustomization) -> String {
        crate::spec::flux_output_file(&item.at.file, &item.namespace, &item.name)
    }

    fn marks(&self, item: &Kustomization) -> Vec<AppMarks> {
        vec![marks(item)]
    }

    fn ready(&self, r: &Shared, _: &Context) -> Result<Kustomize, FindError> {
        found_once(&self.found, || {
            kustomize::find(r.opts.kustomize.as_deref(), &r.opts.limits)
        })
    }

    fn prepare(
        &self,
        _: &Shared,
        tool: &Kustomize,
        k: &Kustomization,
        cx: &Context,
    ) -> Result<Keyed<Copy>, ToolError> {
        let disk = cx.disk("a Flux Kustomization")?;
        match &k.artifact {
            Some(rules) => {
                // Read whole into the copy: the artifact's directory goes with this call.
                let artifact = tempfile::Builder::new()
                    .prefix("driftless-artifact-")
                    .tempdir()
                    .map_err(|e| format!("a directory for the artifact: {e}"))?;
                let said = |e: String| ToolError::from(format!("making its artifact: {e}"));
                materialise(&disk.repo, rules, artifact.path()).map_err(|e| said(e.to_string()))?;
                let dir = artifact
                    .path()
                    .canonicalize()
                    .map_err(|e| said(e.to_string()))?;
                prepare(tool, &dir, &Build::of(k))
            }
            None => prepare(tool, &disk.repo, &Build::of(k)),
        }
    }

    fn run(
        &self,
        r: &Shared,
        tool: &Kustomize,
        _: &Kustomization,
        copy: &Copy,
        _: &Context,
    ) -> Ran {
        Ran::kept(build_copy(r, tool, copy))
    }

    fn finish(
        &self,
        _: &Shared,
        tool: &Kustomize,
        k: &Kustomization,
        _: Copy,
        built: Entry,
        _: &Context,
    ) -> Result<Rendered, ToolError> {
        Ok(Rendered {
            output: Output::Objects(finish(&built?, k)?),
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
            notices: Vec::new(),
            read_cluster: false,
        })
    }
}

/// Why the kustomization Flux would build could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KustomizationError {
    #[error(transparent)]
    Closure(#[from] crate::hydrate::kustomize::ClosureError),
    #[error("reading {0}: {1}")]
    Read(String, String),
    #[error("{0} is not valid YAML: {1}")]
    NotYaml(String, String),
    #[error("{0} is not a kustomization")]
    NotAKustomization(String),
    #[error("a component is not a path")]
    ComponentNotAPath,
    #[error("component {0:?}: {1}")]
    Component(String, String),
    #[error("component {0:?} lies outside the repository")]
    ComponentOutside(String),
    #[error("{0}")]
    Io(String),
}

/// The kustomization Flux builds in `dir` (the repository's copy): the directory's own,
/// or one listing its manifests, with `overlay` put in. Returns the file name and its
/// text, and the files (relative to the repository) the build reads.
pub(super) fn kustomization_for(
    repo: &Path,
    dir: &Path,
    overlay: &Overlay,
) -> Result<(String, Value, BTreeSet<PathBuf>), KustomizationError> {
    let mut files = BTreeSet::new();
    let add_closure = |d: &Path, files: &mut BTreeSet<PathBuf>| -> Result<(), KustomizationError> {
        let c = closure(repo, d, false)?;
        files.extend(c.files);
        Ok(())
    };
    let own = KUSTOMIZATION_FILES.iter().find(|n| dir.join(n).is_file());
    let (name, mut kus) = match own {
        Some(n) => {
            add_closure(dir, &mut files)?;
            let text = std::fs::read_to_string(dir.join(n))
                .map_err(|e| KustomizationError::Read(n.to_string(), e.to_string()))?;
            let v: Value = crate::spec::yaml::read_one(&text).map_err(|e| {
                KustomizationError::NotYaml(n.to_string(), crate::spec::yaml::said(&e))
            })?;
            (n.to_string(), v)
        }
        None => {
            // Flux's generator: every manifest under the directory, and each directory
            // holding a kustomization as one resource.
            let mut resources = Vec::new();
            let walk = Walk {
                hidden: Hidden::Skip,
                links: Links::Follow,
                revisit: Revisit::Never,
                depth: None,
            };
            let mut entries = walk.iter(dir);
            while let Some(e) = entries.next() {
                let e = match e {
                    Ok(e) => e,
                    Err(WalkError::Read { dir: d, source }) => {
                        return Err(KustomizationError::Read(
                            d.display().to_string(),
                            source.to_string(),
                        ));
                    }
                    // A link to nothing fails the build if it is a manifest.
                    Err(WalkError::Missing { path, source }) => {
                        let name = path.to_string_lossy();
                        if name.ends_with(".yaml") || name.ends_with(".yml") {
                            return Err(KustomizationError::Io(source.to_string()));
                        }
                        continue;
                    }
                    Err(WalkError::LeadsOut { .. }) => continue,
                };
                let rel = e.rel.to_string_lossy().into_owned();
                if e.is_dir() {
                    if KUSTOMIZATION_FILES.iter().any(|n| e.path.join(n).is_file()) {
                        entries.skip_dir();
                        add_closure(&e.path, &mut files)?;
                        resources.push(format!("./{rel}"));
                    }
                } else if rel.ends_with(".yaml") || rel.ends_with(".yml") {
                    files.insert(e.real);
                    resources.push(format!("./{rel}"));
                }
            }
            resources.sort();
            (
                "kustomization.yaml".to_string(),
                json!({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}),
            )
        }
    };
    let Some(obj) = kus.as_object_mut() else {
        return Err(KustomizationError::NotAKustomization(name));
    };
    for c in &overlay.components {
        let rel = c.as_str().ok_or(KustomizationError::ComponentNotAPath)?;
        let cdir = dir
            .join(rel)
            .canonicalize()
            .map_err(|e| KustomizationError::Component(rel.to_string(), e.to_string()))?;
        if !cdir.starts_with(repo) {
            return Err(KustomizationError::ComponentOutside(rel.to_string()));
        }
        add_closure(&cdir, &mut files)?;
    }
    overlay.put_into(obj);
    Ok((name, kus, files))
}

/// A kustomization built as Flux builds one (on a private copy of what it reads, its
/// load restrictions off, a kustomization made when the directory has none): a Flux
/// Kustomization's, or an Argo CD Kustomize source's.
#[derive(Debug, Clone)]
pub struct Build {
    /// The directory, relative to the repository ("" for its root).
    pub path: String,
    pub overlay: Overlay,
    /// How the log names it: `NAMESPACE/NAME`, or the Application.
    pub label: String,
}

/// A Flux Kustomization's fields as the overlay its build puts in.
fn overlay_of(spec: &KustomizationSpec) -> Overlay {
    Overlay {
        namespace: spec.target_namespace.clone(),
        name_prefix: spec.name_prefix.clone(),
        name_suffix: spec.name_suffix.clone(),
        patches: spec.patches.clone(),
        images: spec.images.clone(),
        components: spec.components.clone(),
        ..Overlay::default()
    }
}

impl Build {
    /// What a Flux Kustomization builds.
    pub fn of(k: &Kustomization) -> Build {
        Build {
            path: k.path.clone(),
            overlay: overlay_of(&k.spec),
            label: format!("{}/{}", k.namespace, k.name),
        }
    }
}

/// What a build reads, copied: the kustomization file Flux builds (its name and text)
/// and the files it reads, by path in the repository.
pub struct Copy {
    /// The Kustomization's `path`, where it is built.
    path: String,
    /// `NAMESPACE/NAME`, as the log names the build.
    kustomization: String,
    name: String,
    text: String,
    contents: Vec<(PathBuf, Vec<u8>)>,
}

/// What building `k` reads, from the repository at `repo`, and the key of the build.
pub(crate) fn prepare(tool: &Kustomize, repo: &Path, k: &Build) -> Result<Keyed<Copy>, ToolError> {
    let said = <ToolError as From<String>>::from;
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
    let (name, kus, files) =
        kustomization_for(repo, &dir, &k.overlay).map_err(|e| said(e.to_string()))?;
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
    Ok(Keyed {
        inputs: Copy {
            path: k.path.clone(),
            kustomization: k.label.clone(),
            name,
            text,
            contents,
        },
        key: Some(key.finish()),
    })
}

/// `k` built on a private copy of what it reads.
pub(crate) fn build_copy(r: &Shared, tool: &Kustomize, copy: &Copy) -> Entry {
    let said = <ToolError as From<String>>::from;
    let dir = tempfile::Builder::new()
        .prefix("driftless-flux-")
        .tempdir()
        .map_err(|e| said(format!("a directory to build in: {e}")))?;
    for (rel, bytes) in &copy.contents {
        let target = dir.path().join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| said(e.to_string()))?;
        }
        std::fs::write(&target, bytes).map_err(|e| said(e.to_string()))?;
    }
    let at = dir.path().join(&copy.path);
    std::fs::create_dir_all(&at).map_err(|e| said(e.to_string()))?;
    std::fs::write(at.join(&copy.name), &copy.text).map_err(|e| said(e.to_string()))?;
    let span = tracing::info_span!("render", tool = "flux", kustomization = %copy.kustomization);
    let _enter = span.enter();
    // Flux builds with kustomize's load restrictions off, within the repository.
    let unrestricted = ["--load-restrictor", "LoadRestrictionsNone"];
    kustomize::run_build(r, tool, &at, &unrestricted, dir.path())
}

/// What Flux does after the build, before its marks: `postBuild.substitute`.
pub(super) fn finish(built: &[u8], k: &Kustomization) -> Result<Vec<Value>, ToolError> {
    let text = std::str::from_utf8(built)
        .map_err(|_| ToolError::from("kustomize printed no UTF-8".to_string()))?;
    let vars = &k.spec.post_build.substitute;
    let mut out = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (start, end) in documents(&lines) {
        let mut doc = lines[start..end].concat();
        if doc.trim().is_empty() {
            continue;
        }
        let disabled = doc.contains(&format!("{SUBSTITUTE_ANNOTATION}: disabled"));
        if let (Some(vars), false) = (vars, disabled) {
            doc = substitute(&doc, vars);
        }
        let v: Value = crate::spec::yaml::read_one(&doc).map_err(|e| {
            ToolError::from(format!(
                "the build's output is not YAML: {}",
                crate::spec::yaml::said(&e)
            ))
        })?;
        out.push(v);
    }
    Ok(out)
}

/// What a Kustomization puts on every object it applies: `commonMetadata`, Flux's labels,
/// its service account (Flux impersonates it: driftless writes only what it may),
/// `suspend`; and driftless's marks for `dependsOn`, `prune: false` and `force`. Flux's
/// own words on an object (`ssa`, `reconcile`) are read as it reads them ([`Words::Flux`]).
pub(super) fn marks(k: &Kustomization) -> AppMarks {
    let meta = &k.spec.common_metadata;
    let pairs = |m: &BTreeMap<String, String>| -> Vec<(String, String)> {
        m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    // What every object of the Kustomization is given, in order: a later one wins.
    let mut labels = pairs(&meta.labels);
    labels.push((NAME_LABEL.into(), k.name.clone()));
    labels.push((NAMESPACE_LABEL.into(), k.namespace.clone()));
    let mut annotations = pairs(&meta.annotations);
    // Flux's substitution is done: driftless's own `${...}` is not theirs.
    annotations.push((crate::spec::policy::SUBSTITUTE.into(), "disabled".into()));
    if k.wave > 0 {
        annotations.push((crate::spec::order::WAVE.into(), k.wave.to_string()));
    }
    if k.spec.prune == Some(false) {
        annotations.push((crate::spec::policy::PRUNE.into(), "disabled".into()));
    }
    if k.spec.force == Some(true) {
        annotations.push((crate::spec::policy::REPLACE.into(), "on-immutable".into()));
    }
    if k.spec.suspend == Some(true) {
        let why = format!("Flux {} is suspended (suspend: true)", k.said());
        annotations.push((crate::spec::policy::SUSPEND.into(), why));
    }
    if let Some(account) = k
        .spec
        .service_account_name
        .as_deref()
        .filter(|a| !is_flux_controller(&k.namespace, a))
    {
        let account = format!("{}/{account}", k.namespace);
        annotations.push((crate::spec::policy::SERVICE_ACCOUNT.into(), account));
    }
    AppMarks {
        labels,
        annotations,
        ..AppMarks::new(format!("Flux {}", k.said()), Put::Over, Words::Flux)
    }
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
