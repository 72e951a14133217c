//! Kustomize directories, built with an external `kustomize build` (or `kubectl
//! kustomize`), as Flux and Argo CD build them. Before a run, the kustomization's local
//! closure is walked: what it names (resources, bases, components, patches, generators'
//! files…), recursively. That closure is the render's cache key, and the place where a
//! path or a symlink that leads out of the repository, or a remote base the tree did not
//! allow, is refused before kustomize sees it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::cache::{self, KeyBuilder};
use super::runner;
use super::stage::Shared;
use super::tool::found_once;
use super::tool::{Context, FindError, Rendered, Tool, ToolError};
use super::tree::KUSTOMIZATION_FILES;
use super::walk::{Hidden, Links, Revisit, Walk, WalkError};
use crate::source::Checkout;
use crate::spec::{Location, RenderedBy};

/// What a closure may hold: a kustomization that names more is refused (a repository
/// is not rendered whole on every change through one overlay).
const MAX_CLOSURE_FILES: usize = 20_000;
const MAX_CLOSURE_BYTES: u64 = 256 << 20;

/// The program that builds kustomizations, and how it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kustomize {
    pub program: PathBuf,
    /// `kubectl kustomize DIR` rather than `kustomize build DIR`.
    pub via_kubectl: bool,
    pub version: String,
}

impl Kustomize {
    pub fn args(&self, dir: &Path) -> Vec<OsString> {
        let verb = if self.via_kubectl {
            "kustomize"
        } else {
            "build"
        };
        vec![verb.into(), dir.as_os_str().to_owned()]
    }

    /// The command as status shows it, with the directory relative to the spec root.
    pub fn shown(&self, dir: &str) -> String {
        let dir = if dir.is_empty() { "." } else { dir };
        match self.via_kubectl {
            true => format!("kubectl kustomize {dir}"),
            false => format!("kustomize build {dir}"),
        }
    }
}

/// The kustomize driftless needs, as its errors say.
const NEED: &str = "kustomize v5 (or kubectl 1.27 or newer)";

/// Finds the tool: `named` (`--kustomize` / `DRIFTLESS_KUSTOMIZE`), else `kustomize` on
/// `PATH`, else `kubectl` on `PATH`; then asks its version. kustomize older than v5 is
/// refused: its output differs (v4's `commonLabels` on selectors, v3's ordering).
pub fn find(named: Option<&Path>, limits: &super::runner::Limits) -> Result<Kustomize, FindError> {
    let program = match named {
        Some(p) if p.components().count() == 1 => super::runner::on_path(&p.to_string_lossy())
            .ok_or_else(|| FindError::NotOnPath(p.display().to_string()))?,
        Some(p) => p.to_path_buf(),
        None => super::runner::on_path("kustomize")
            .or_else(|| super::runner::on_path("kubectl"))
            .ok_or(FindError::NotInstalled(
                "kustomize is not installed: neither `kustomize` nor `kubectl` is on PATH (or name one with --kustomize)",
            ))?,
    };
    let via_kubectl = program
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("kubectl"));
    let args: Vec<OsString> = if via_kubectl {
        vec!["version".into(), "--client".into()]
    } else {
        vec!["version".into()]
    };
    let cwd = std::env::temp_dir();
    let out = super::runner::run(&program, &args, &cwd, limits, &super::runner::Slots::new(1))
        .map_err(|e| FindError::DoesNotRun {
            program: program.display().to_string(),
            message: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out);
    let version = if via_kubectl {
        text.lines()
            .find_map(|l| l.strip_prefix("Kustomize Version:"))
            .and_then(semver_in)
    } else {
        semver_in(&text)
    }
    .ok_or_else(|| FindError::NoVersion {
        program: program.display().to_string(),
        tool: "kustomize",
        need: NEED,
    })?;
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 5 {
        return Err(FindError::TooOld {
            program: program.display().to_string(),
            tool: "kustomize",
            version,
            need: NEED,
        });
    }
    Ok(Kustomize {
        program,
        via_kubectl,
        version,
    })
}

/// The first `vN.N.N` in `text`.
fn semver_in(text: &str) -> Option<String> {
    text.split(|c: char| {
        c.is_whitespace() || c == '/' || c == '"' || c == ',' || c == '{' || c == '}' || c == ':'
    })
    .map(|w| w.trim())
    .find(|w| {
        // A pre-release or build suffix may follow the patch number (kubectl 1.30's
        // kustomize is `v5.0.4-0.20230601165947-6ce0bf390ce3`).
        let core = w
            .trim_start_matches('v')
            .split(['-', '+'])
            .next()
            .unwrap_or_default();
        w.starts_with('v')
            && core.split('.').count() == 3
            && core
                .split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    })
    .map(str::to_string)
}

/// A kustomization's local closure: every file it reads, found on disk.
#[derive(Debug, Default)]
pub struct Closure {
    /// Files (absolute, canonical), each once.
    pub files: BTreeSet<PathBuf>,
    /// Whether it names a remote base (allowed by the tree's settings).
    pub remote: bool,
    dirs: BTreeSet<PathBuf>,
}

/// Why a kustomization's closure was refused or could not be walked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClosureError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path} is not valid YAML: {message}")]
    NotYaml { path: String, message: String },
    /// A path a kustomization's field names.
    #[error("`{field}` in {dir}{why}", why = why.said(path))]
    Named {
        field: &'static str,
        dir: String,
        path: String,
        why: Named,
    },
    #[error("{0} is a symlink that leads out of the repository; refused")]
    LeadsOut(String),
    #[error("the kustomization reads more than {MAX_CLOSURE_FILES} files; not built")]
    TooManyFiles,
    #[error("the kustomization reads more than {} MiB of files; not built", MAX_CLOSURE_BYTES >> 20)]
    TooManyBytes,
}

/// What is wrong with a path a kustomization names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    RemoteRefused,
    Outside,
    Missing,
    Unresolved(String),
    LeadsOut,
}

impl Named {
    fn said(&self, path: &str) -> String {
        match self {
            Named::RemoteRefused => format!(
                " names the remote base {path:?}; remote bases are refused unless .driftless.toml has [kustomize] remote-bases = true"
            ),
            Named::Outside => format!(
                ": {path:?} lies outside the repository; driftless builds only what the repository holds"
            ),
            Named::Missing => format!(": {path:?} does not exist"),
            Named::Unresolved(e) => format!(": {path:?}: {e}"),
            Named::LeadsOut => {
                format!(": {path:?} is a symlink that leads out of the repository; refused")
            }
        }
    }
}

/// Walks the closure of the kustomization in `dir`, all within `repo` (both canonical).
pub fn closure(repo: &Path, dir: &Path, remote_ok: bool) -> Result<Closure, ClosureError> {
    let mut c = Closure::default();
    visit(repo, dir, remote_ok, &mut c)?;
    Ok(c)
}

impl Closure {
    /// The key of a render of it: every file's path (relative to `repo`) and contents.
    pub fn digest(&self, repo: &Path, key: &mut KeyBuilder) -> Result<(), ClosureError> {
        let mut bytes = 0u64;
        for f in &self.files {
            let rel = f.strip_prefix(repo).unwrap_or(f);
            let contents = std::fs::read(f).map_err(|e| ClosureError::Read {
                path: rel.display().to_string(),
                message: e.to_string(),
            })?;
            bytes += contents.len() as u64;
            if bytes > MAX_CLOSURE_BYTES {
                return Err(ClosureError::TooManyBytes);
            }
            key.part(rel.to_string_lossy().as_bytes()).part(&contents);
        }
        Ok(())
    }
}

fn visit(repo: &Path, dir: &Path, remote_ok: bool, c: &mut Closure) -> Result<(), ClosureError> {
    if !c.dirs.insert(dir.to_path_buf()) {
        return Ok(());
    }
    let Some(file) = KUSTOMIZATION_FILES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
    else {
        // A plain directory as a resource: kustomize refuses it itself, with its words.
        return Ok(());
    };
    let rel_dir = shown(repo, dir);
    let text = std::fs::read_to_string(&file).map_err(|e| ClosureError::Read {
        path: shown(repo, &file),
        message: e.to_string(),
    })?;
    let doc: serde_json::Value =
        serde_saphyr::from_str(&text).map_err(|e| ClosureError::NotYaml {
            path: shown(repo, &file),
            message: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
    add_file(repo, &file, c)?;
    for (field, path) in named_paths(&doc) {
        let named = |why: Named| ClosureError::Named {
            field,
            dir: rel_dir.clone(),
            path: path.clone(),
            why,
        };
        if is_remote(&path) && !dir.join(&path).exists() {
            if !remote_ok {
                return Err(named(Named::RemoteRefused));
            }
            c.remote = true;
            continue;
        }
        let target = inside(repo, dir, &path).ok_or_else(|| named(Named::Outside))?;
        let meta = std::fs::metadata(&target).map_err(|_| named(Named::Missing))?;
        let real = target
            .canonicalize()
            .map_err(|e| named(Named::Unresolved(e.to_string())))?;
        if !real.starts_with(repo) {
            return Err(named(Named::LeadsOut));
        }
        if meta.is_dir() {
            visit(repo, &real, remote_ok, c)?;
            add_tree(repo, &real, c)?;
        } else {
            add_file(repo, &real, c)?;
        }
    }
    // What kustomize reads from its own directory without naming it (a generator's
    // `.env` under a glob, a patch file found by its target): the directory's files, not
    // its subdirectories (each is named, and visited, if used).
    add_dir_files(repo, dir, c)
}

fn add_file(repo: &Path, file: &Path, c: &mut Closure) -> Result<(), ClosureError> {
    let real = file.canonicalize().map_err(|e| ClosureError::Io {
        path: shown(repo, file),
        message: e.to_string(),
    })?;
    if !real.starts_with(repo) {
        return Err(ClosureError::LeadsOut(shown(repo, file)));
    }
    c.files.insert(real);
    if c.files.len() > MAX_CLOSURE_FILES {
        return Err(ClosureError::TooManyFiles);
    }
    Ok(())
}

fn add_dir_files(repo: &Path, dir: &Path, c: &mut Closure) -> Result<(), ClosureError> {
    let walk = Walk {
        hidden: Hidden::Skip,
        links: Links::Inside(repo),
        revisit: Revisit::Never,
        depth: Some(1),
    };
    for e in walk.iter(dir) {
        match e {
            Ok(e) if e.is_file() => add_file(repo, &e.path, c)?,
            Ok(_) | Err(WalkError::Missing { .. }) => {}
            // A subdirectory is read only when named (and then checked as named).
            Err(WalkError::LeadsOut { path }) if path.is_dir() => {}
            Err(e) => return Err(closure_error(repo, e)),
        }
    }
    Ok(())
}

/// Every file under `dir` (a base named whole): a base may read any of them.
fn add_tree(repo: &Path, dir: &Path, c: &mut Closure) -> Result<(), ClosureError> {
    let walk = Walk {
        hidden: Hidden::Skip,
        links: Links::Inside(repo),
        revisit: Revisit::Never,
        depth: None,
    };
    for e in walk.iter(dir) {
        match e {
            Ok(e) if e.is_file() => add_file(repo, &e.path, c)?,
            Ok(_) | Err(WalkError::Missing { .. }) => {}
            Err(e) => return Err(closure_error(repo, e)),
        }
    }
    Ok(())
}

/// A walk's error in the closure's words.
fn closure_error(repo: &Path, e: WalkError) -> ClosureError {
    match e {
        WalkError::Read { dir, source } => ClosureError::Io {
            path: shown(repo, &dir),
            message: source.to_string(),
        },
        WalkError::Missing { path, source } => ClosureError::Io {
            path: shown(repo, &path),
            message: source.to_string(),
        },
        WalkError::LeadsOut { path } => ClosureError::LeadsOut(shown(repo, &path)),
    }
}

/// `p` as a message shows it: relative to the repository.
fn shown(repo: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(repo).unwrap_or(p);
    match rel.as_os_str().is_empty() {
        true => ".".to_string(),
        false => rel.display().to_string(),
    }
}

/// `rel` (from `dir`) resolved without following links, if it stays inside `repo`.
fn inside(repo: &Path, dir: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    if rel.is_absolute() {
        return None;
    }
    let mut out = dir.to_path_buf();
    for c in rel.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    out.starts_with(repo).then_some(out)
}

/// Whether a kustomization names `path` by URL: kustomize's remote forms.
fn is_remote(path: &str) -> bool {
    path.contains("://")
        || path.starts_with("git@")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"]
            .iter()
            .any(|h| path.starts_with(h))
}

/// The paths a kustomization names, with the field naming each.
fn named_paths(doc: &serde_json::Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let strings = |v: Option<&serde_json::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
            // Inline patches and generator configs hold newlines; paths never do.
            .filter(|s| !s.contains('\n') && !s.trim().is_empty())
            .map(|s| s.trim().to_string())
            .collect()
    };
    for field in [
        "resources",
        "bases",
        "components",
        "crds",
        "configurations",
        "patchesStrategicMerge",
        "generators",
        "transformers",
        "validators",
    ] {
        for p in strings(doc.get(field)) {
            out.push((field, p));
        }
    }
    for field in ["patches", "patchesJson6902", "replacements"] {
        for item in doc
            .get(field)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(p) = item.get("path").and_then(|p| p.as_str()) {
                out.push((field, p.to_string()));
            }
        }
    }
    for field in ["configMapGenerator", "secretGenerator"] {
        for g in doc
            .get(field)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            for f in strings(g.get("files")) {
                // `key=path`: the path is after the first `=`.
                let p = f.split_once('=').map(|(_, p)| p.to_string()).unwrap_or(f);
                out.push((field, p));
            }
            for e in strings(g.get("envs")) {
                out.push((field, e));
            }
            if let Some(e) = g.get("env").and_then(|e| e.as_str()) {
                out.push((field, e.to_string()));
            }
        }
    }
    if let Some(p) = doc.pointer("/openapi/path").and_then(|p| p.as_str()) {
        out.push(("openapi", p.to_string()));
    }
    out
}

/// Kustomize as the stage drives it: the program, found once per process (not finding
/// it is asked again next revision: it may be installed meanwhile).
#[derive(Debug, Default)]
pub struct Kustomizations {
    found: Mutex<Option<Kustomize>>,
}

/// A kustomization: its directory and its file, relative to the spec root.
#[derive(Debug, Clone)]
pub struct Dir {
    pub dir: String,
    pub file: String,
}

impl Tool for Kustomizations {
    type Item = Dir;
    type Ready = Kustomize;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("a kustomization")
    }

    fn at(&self, item: &Dir) -> Location {
        Location {
            file: item.file.clone(),
            line: 1,
            column: 1,
        }
    }

    fn output_file(&self, item: &Dir) -> String {
        item.file.clone()
    }

    fn ready(&self, r: &Shared, _: &Context) -> Result<Kustomize, FindError> {
        found_once(&self.found, || {
            find(r.opts.kustomize.as_deref(), &r.opts.limits)
        })
    }

    fn render(
        &self,
        r: &Shared,
        tool: &Kustomize,
        item: &Dir,
        cx: &Context,
    ) -> Result<Rendered, ToolError> {
        let disk = cx.disk("a kustomization")?;
        let yaml = build(r, tool, disk, &item.dir, cx.settings.remote_bases)?;
        Ok(Rendered {
            yaml: yaml.to_vec(),
            by: RenderedBy {
                tool: "kustomize".into(),
                version: tool.version.clone(),
                command: tool.shown(&item.dir),
                release: None,
            },
            notices: Vec::new(),
            read_cluster: false,
        })
    }
}

/// One kustomization built (or answered from the cache by its closure).
fn build(
    r: &Shared,
    tool: &Kustomize,
    disk: &Checkout,
    dir: &str,
    remote_ok: bool,
) -> cache::Entry {
    let said = <ToolError as From<String>>::from;
    let abs = disk.root.join(dir);
    let abs = abs
        .canonicalize()
        .map_err(|e| said(format!("cannot read the kustomization's directory: {e}")))?;
    if !abs.starts_with(&disk.repo) {
        return Err(said(
            "the kustomization's directory leads out of the repository; refused".into(),
        ));
    }
    let closure = closure(&disk.repo, &abs, remote_ok).map_err(|e| said(e.to_string()))?;
    let mut key = cache::KeyBuilder::new("kustomize");
    key.part(tool.program.as_os_str().as_encoded_bytes())
        .part(tool.version.as_bytes())
        .part(tool.shown(dir).as_bytes());
    closure
        .digest(&disk.repo, &mut key)
        .map_err(|e| said(e.to_string()))?;
    let key = key.finish();
    let run = || {
        let span = tracing::info_span!("render", tool = "kustomize", dir = %if dir.is_empty() { "." } else { dir });
        let _enter = span.enter();
        run_build(r, tool, &abs, &[], &disk.repo)
    };
    // A remote base can change without the repository changing: never cached.
    match closure.remote {
        true => run(),
        false => r.cache.get_or_run(key, run),
    }
}

/// One `kustomize build` of `at` (`extra`: flags after the tool's own), counted as a
/// run. A failure says paths as the tree names them: `copy/`, where this copy of the
/// tree lies, left out.
pub(super) fn run_build(
    r: &Shared,
    tool: &Kustomize,
    at: &Path,
    extra: &[&str],
    copy: &Path,
) -> cache::Entry {
    r.runs.fetch_add(1, Ordering::Relaxed);
    let mut args = tool.args(at);
    args.extend(extra.iter().map(OsString::from));
    let result = runner::run(&tool.program, &args, at, &r.opts.limits, &r.slots)
        .map(Arc::new)
        .map_err(|e| {
            let said = match e {
                runner::RunError::Failed(line) => format!("kustomize build failed: {line}"),
                other => format!("kustomize build: {other}"),
            };
            ToolError::from(said.replace(&format!("{}/", copy.display()), ""))
        });
    // A failure is the revision's error, said once, where errors are said.
    tracing::info!(ok = result.is_ok(), "rendered");
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_either_tool() {
        assert_eq!(semver_in("v5.7.1\n").as_deref(), Some("v5.7.1"));
        assert_eq!(
            semver_in("{Version:kustomize/v4.5.7 GitCommit:abc}").as_deref(),
            Some("v4.5.7")
        );
        assert_eq!(semver_in(" v5.5.0").as_deref(), Some("v5.5.0"));
        assert_eq!(
            semver_in("Kustomize Version: v5.0.4-0.20230601165947-6ce0bf390ce3").as_deref(),
            Some("v5.0.4-0.20230601165947-6ce0bf390ce3")
        );
        assert_eq!(semver_in("unknown"), None);
    }

    #[test]
    fn the_closure_follows_bases_and_refuses_what_leads_out() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().canonicalize().unwrap();
        let w = |p: &str, t: &str| {
            let p = repo.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w("base/kustomization.yaml", "resources: [deploy.yaml]\n");
        w("base/deploy.yaml", "kind: x\n");
        w("base/unused/other.yaml", "kind: y\n");
        w(
            "app/kustomization.yaml",
            "resources: [../base]\nconfigMapGenerator:\n- name: c\n  files: [k=conf/a.txt]\n",
        );
        w("app/conf/a.txt", "a");
        w("elsewhere/x.yaml", "kind: z\n");
        let c = closure(&repo, &repo.join("app"), false).unwrap();
        let rel: Vec<String> = c
            .files
            .iter()
            .map(|f| f.strip_prefix(&repo).unwrap().display().to_string())
            .collect();
        assert!(rel.contains(&"base/deploy.yaml".to_string()), "{rel:?}");
        assert!(rel.contains(&"base/unused/other.yaml".to_string()));
        assert!(rel.contains(&"app/conf/a.txt".to_string()));
        assert!(!rel.iter().any(|r| r.starts_with("elsewhere")));

        w("out/kustomization.yaml", "resources: [../../etc]\n");
        let e = closure(&repo, &repo.join("out"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the repository"), "{e}");

        std::os::unix::fs::symlink("/etc", repo.join("link")).unwrap();
        w("viasym/kustomization.yaml", "resources: [../link]\n");
        let e = closure(&repo, &repo.join("viasym"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("symlink that leads out"), "{e}");

        w(
            "remote/kustomization.yaml",
            "resources: [https://github.com/x/y//config?ref=v1]\n",
        );
        let e = closure(&repo, &repo.join("remote"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("remote-bases = true"), "{e}");
        assert!(closure(&repo, &repo.join("remote"), true).unwrap().remote);
    }
}
