//! Reading a spec tree: the files under a root (or handed over by a source, such as a git
//! commit's tree), then the checks that need the whole tree.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::extract::{self, FileCtx, Found};
use super::{
    Kind, Location, Spec, SpecBody, SpecError, SpecErrors, SpecId, SpecTree, defaults_for_manifest,
};

/// A spec file's path (relative to the tree's root, '/'-separated) and raw contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub contents: Vec<u8>,
}

/// No spec file is this large; a bigger one is a mistake (or an attack), not a spec.
pub const MAX_FILE_BYTES: usize = 8 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("spec root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(#[from] SpecErrors),
}

/// Loads and validates the tree under `root`.
pub fn load_dir(root: &Path) -> Result<SpecTree, LoadError> {
    let files = read_dir(root)?;
    Ok(parse_files(&files)?)
}

/// Every `*.toml` under `root`, recursively, sorted by path. Hidden files and
/// directories are skipped (a ConfigMap mount's `..2024_…` data dirs and `..data` link
/// among them); symlinks are followed, each directory at most once.
pub fn read_dir(root: &Path) -> Result<Vec<SourceFile>, LoadError> {
    let meta = std::fs::metadata(root).map_err(|source| LoadError::Root {
        path: root.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        // A single file is a tree of one.
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let contents = read_capped(root).map_err(|source| LoadError::Root {
            path: root.to_path_buf(),
            source,
        })?;
        return Ok(vec![SourceFile {
            path: name,
            contents,
        }]);
    }
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    let mut problems = Vec::new();
    walk(root, "", &mut seen, &mut files, &mut problems);
    if !problems.is_empty() {
        problems.sort();
        return Err(SpecErrors(problems).into());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

fn walk(
    dir: &Path,
    rel: &str,
    seen: &mut HashSet<PathBuf>,
    files: &mut Vec<SourceFile>,
    problems: &mut Vec<SpecError>,
) {
    let at = |file: &str| Location {
        file: file.to_string(),
        line: 1,
        column: 1,
    };
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if !seen.insert(canonical) {
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(SpecError {
                at: at(if rel.is_empty() { "." } else { rel }),
                message: format!("cannot read directory: {e}"),
            });
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        // Follows symlinks; a dangling link is skipped like any non-file.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, &child, seen, files, problems);
        } else if meta.is_file() && name.ends_with(".toml") {
            match read_capped(&path) {
                Ok(contents) => files.push(SourceFile {
                    path: child,
                    contents,
                }),
                Err(e) => problems.push(SpecError {
                    at: at(&child),
                    message: format!("cannot read file: {e}"),
                }),
            }
        }
    }
}

/// Validates a set of spec files as one tree: every error of every file, in file order,
/// or the tree.
pub fn parse_files(files: &[SourceFile]) -> Result<SpecTree, SpecErrors> {
    let mut errors = Vec::new();
    let mut found = Vec::new();
    for f in files {
        let start = Location {
            file: f.path.clone(),
            line: 1,
            column: 1,
        };
        if f.contents.len() > MAX_FILE_BYTES {
            errors.push(SpecError {
                at: start,
                message: format!(
                    "file is larger than {} MiB; not a spec file",
                    MAX_FILE_BYTES >> 20
                ),
            });
            continue;
        }
        let text = match std::str::from_utf8(&f.contents) {
            Ok(t) => t,
            Err(e) => {
                let valid = std::str::from_utf8(&f.contents[..e.valid_up_to()]).unwrap_or_default();
                let ctx = FileCtx::new(&f.path, valid);
                errors.push(SpecError {
                    at: ctx.loc(valid.len()),
                    message: "file is not valid UTF-8".into(),
                });
                continue;
            }
        };
        let mut ctx = FileCtx::new(&f.path, text);
        found.extend(extract::file(&mut ctx, text));
        errors.extend(ctx.errors);
    }

    let scopes = crd_scopes(&found);
    let mut specs = Vec::with_capacity(found.len());
    let mut ids: BTreeMap<SpecId, Location> = BTreeMap::new();
    let mut node_ports: BTreeMap<u16, (SpecId, Location)> = BTreeMap::new();
    for f in found {
        let id = match &f.body {
            SpecBody::Manifest(m) => {
                let (namespace, name) = defaults_for_manifest(m, f.namespace.as_deref(), &scopes);
                SpecId {
                    kind: Kind::Manifest,
                    namespace,
                    name,
                }
            }
            _ => SpecId {
                kind: f.kind,
                namespace: f.namespace.clone().unwrap_or_default(),
                name: f.name.clone(),
            },
        };
        if let Some(first) = ids.get(&id) {
            errors.push(SpecError {
                at: f.at.clone(),
                message: format!("duplicate spec {id}: first defined at {first}"),
            });
            continue;
        }
        if let Some(port) = f.node_port {
            if let Some((other, at)) = node_ports.get(&port) {
                errors.push(SpecError {
                    at: f.at.clone(),
                    message: format!("NodePort {port} is already used by {other} at {at}"),
                });
                continue;
            }
            node_ports.insert(port, (id.clone(), f.at.clone()));
        }
        ids.insert(id.clone(), f.at.clone());
        specs.push(Spec {
            id,
            at: f.at,
            body: f.body,
        });
    }

    if errors.is_empty() {
        Ok(SpecTree { specs })
    } else {
        errors.sort();
        errors.dedup();
        Err(SpecErrors(errors))
    }
}

/// `(group, kind)` of the custom resources whose CRD in this tree says `scope = Cluster`.
fn crd_scopes(found: &[Found]) -> BTreeSet<(String, String)> {
    found
        .iter()
        .filter_map(|f| match &f.body {
            SpecBody::Manifest(m)
                if m.kind == "CustomResourceDefinition" && m.group() == "apiextensions.k8s.io" =>
            {
                let spec = m.rest.get("spec")?;
                (spec.get("scope")?.as_str()? == "Cluster").then(|| {
                    let group = spec
                        .get("group")
                        .and_then(|g| g.as_str())
                        .unwrap_or_default();
                    let kind = spec
                        .pointer("/names/kind")
                        .and_then(|k| k.as_str())
                        .unwrap_or_default();
                    (group.to_string(), kind.to_string())
                })
            }
            _ => None,
        })
        .collect()
}
