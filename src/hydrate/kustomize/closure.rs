//! A kustomization's local closure: what it names (resources, bases, components,
//! patches, generators' files…), recursively, found on disk. It is the render's cache key,
//! and the place where a path or a symlink that leads out of the repository, or a remote
//! base the tree did not allow, is refused before kustomize sees it.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::super::cache::KeyBuilder;
use super::super::tree::KUSTOMIZATION_FILES;
use super::super::walk::{Hidden, Links, Revisit, Walk, WalkError};

/// What a closure may hold: a kustomization that names more is refused (a repository
/// is not rendered whole on every change through one overlay).
const MAX_CLOSURE_FILES: usize = 20_000;
const MAX_CLOSURE_BYTES: u64 = 256 << 20;

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

#[cfg(test)]
mod tests {
    use super::*;

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
