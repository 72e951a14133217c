//! The files of a tree on disk: which files a source reads, `.driftlessignore`, the limits
//! of a file and of a tree, and the walk that reads them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::super::{Location, SpecError, SpecErrors};

/// A spec file's path (relative to the tree's root, '/'-separated) and raw contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub contents: Vec<u8>,
}

/// Whether a file is read as specs: TOML specs, or YAML manifests.
pub(crate) fn is_spec_file(name: &str) -> bool {
    name.ends_with(".toml") || is_yaml(name)
}

/// Whether a spec file is read as YAML manifests.
pub(crate) fn is_yaml(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

/// Whether a source reads the file: a spec file, or one the rendering stage takes (JSON,
/// Jsonnet, a `Kustomization`). Every other file is only listed, by path.
pub(crate) fn is_source_file(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    is_spec_file(name)
        || name.ends_with(".json")
        || name.ends_with(".jsonnet")
        || name.ends_with(".libsonnet")
        || base == "Kustomization"
}

/// At the spec root, in gitignore syntax: paths it matches are not read, so a repository
/// can keep a `kustomization.yaml`, a Helm `Chart.yaml` or docs beside its specs.
pub(crate) const IGNORE_FILE: &str = ".driftlessignore";

/// The rules of a `.driftlessignore` (none when there is no such file).
#[derive(Debug, Clone, Default)]
pub(crate) struct IgnoreRules(Option<ignore::gitignore::Gitignore>);

impl IgnoreRules {
    /// The rules in `text`; a line that is not a valid pattern is an error naming it.
    pub fn parse(text: &str) -> Result<IgnoreRules, SpecError> {
        let mut b = ignore::gitignore::GitignoreBuilder::new("/");
        for (i, line) in text.lines().enumerate() {
            b.add_line(None, line).map_err(|e| SpecError {
                at: Location {
                    file: IGNORE_FILE.to_string(),
                    line: i + 1,
                    column: 1,
                },
                message: format!("invalid pattern: {e}"),
            })?;
        }
        let rules = b.build().map_err(|e| SpecError {
            at: Location {
                file: IGNORE_FILE.to_string(),
                line: 1,
                column: 1,
            },
            message: format!("invalid rules: {e}"),
        })?;
        Ok(IgnoreRules(Some(rules)))
    }

    /// Whether `path` (relative to the root, '/'-separated) is left unread. Walks skip an
    /// ignored directory whole, so a file is judged by its own path.
    pub fn ignores(&self, path: &str, is_dir: bool) -> bool {
        self.0
            .as_ref()
            .is_some_and(|g| g.matched(Path::new("/").join(path), is_dir).is_ignore())
    }
}

/// No spec file is this large; a bigger one is a mistake (or an attack), not a spec. It
/// is refused unread (the readers stop one byte past the limit).
pub const MAX_FILE_BYTES: usize = 4 << 20;

/// Errors reported per file: past these, one line says how many more there are. A file of
/// garbage would otherwise give millions of lines.
pub const MAX_ERRORS_PER_FILE: usize = 100;

/// A tree holds at most this many spec files, and this many bytes of them. The per-file
/// cap alone lets a million small files (or sixteen thousand 4 MiB ones) through, read
/// into memory whole and parsed on every change. A platform team's tree of 20,000 apps a
/// file (the biggest driftless is measured with, issue 47) is about 4 MiB; a tree past
/// either limit is refused unread, the last good revision staying in force.
pub const MAX_TREE_FILES: usize = 50_000;
pub const MAX_TREE_BYTES: usize = 64 << 20;

/// A tree past [`MAX_TREE_FILES`] or [`MAX_TREE_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeLimit {
    #[error(
        "the spec tree has more than {MAX_TREE_FILES} spec files, the limit for a tree; not read"
    )]
    Files,
    #[error(
        "the spec tree's files hold more than {} MiB, the limit for a tree; not read",
        MAX_TREE_BYTES >> 20
    )]
    Bytes,
}

/// What a reader of a tree took so far, against the tree's limits.
#[derive(Debug, Default)]
pub(crate) struct TreeBudget {
    files: usize,
    bytes: usize,
}

impl TreeBudget {
    /// Counts one more spec file of `len` bytes: an error once the tree is past a limit,
    /// so the reader stops there.
    pub fn take(&mut self, len: usize) -> Result<(), TreeLimit> {
        self.files += 1;
        self.bytes = self.bytes.saturating_add(len);
        if self.files > MAX_TREE_FILES {
            Err(TreeLimit::Files)
        } else if self.bytes > MAX_TREE_BYTES {
            Err(TreeLimit::Bytes)
        } else {
            Ok(())
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("spec root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("spec root {path}: {limit}")]
    TooLarge { path: PathBuf, limit: TreeLimit },
    #[error("{0}")]
    Invalid(#[from] SpecErrors),
}

/// Every spec file (`*.toml`, `*.yaml`, `*.yml`) under `root`, recursively, sorted by
/// path, but those `.driftlessignore` excludes. Hidden files and directories are skipped
/// (a ConfigMap mount's `..2024_…` data dirs and `..data` link among them); symlinks are
/// followed, each directory at most once.
pub fn read_dir(root: &Path) -> Result<Vec<SourceFile>, LoadError> {
    read_dir_all(root).map(|(files, _)| files)
}

/// Every file under `root` a source reads ([`is_source_file`]), as [`read_dir`] takes
/// them, and the paths of the other files (what the tree holds that nothing reads).
pub fn read_dir_all(root: &Path) -> Result<(Vec<SourceFile>, Vec<String>), LoadError> {
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
        return Ok((
            vec![SourceFile {
                path: name,
                contents,
            }],
            Vec::new(),
        ));
    }
    let mut files = Vec::new();
    let mut unread = Vec::new();
    let mut seen = HashSet::new();
    let mut problems = Vec::new();
    let ignore = match std::fs::read(root.join(IGNORE_FILE)) {
        Ok(bytes) => {
            IgnoreRules::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| SpecErrors(vec![e]))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => IgnoreRules::default(),
        Err(e) => {
            return Err(LoadError::Root {
                path: root.join(IGNORE_FILE),
                source: e,
            });
        }
    };
    let mut walker = Walker {
        ignore: &ignore,
        seen: &mut seen,
        files: &mut files,
        unread: &mut unread,
        problems: &mut problems,
        budget: TreeBudget::default(),
        over: None,
    };
    walker.walk(root, "");
    walker.settings(root);
    if let Some(limit) = walker.over {
        return Err(LoadError::TooLarge {
            path: root.to_path_buf(),
            limit,
        });
    }
    if !problems.is_empty() {
        problems.sort();
        return Err(SpecErrors(problems).into());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    unread.sort();
    Ok((files, unread))
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// The state of one walk of a spec directory.
struct Walker<'a> {
    ignore: &'a IgnoreRules,
    seen: &'a mut HashSet<PathBuf>,
    files: &'a mut Vec<SourceFile>,
    unread: &'a mut Vec<String>,
    problems: &'a mut Vec<SpecError>,
    budget: TreeBudget,
    /// The limit the tree went past: the walk stops.
    over: Option<TreeLimit>,
}

impl Walker<'_> {
    /// The tree-level settings file at the root, hidden but read as a spec file.
    fn settings(&mut self, root: &Path) {
        let path = root.join(super::super::settings::SETTINGS_FILE);
        let ignored = self
            .ignore
            .ignores(super::super::settings::SETTINGS_FILE, false);
        if self.over.is_some() || ignored || !path.is_file() {
            return;
        }
        let file = super::super::settings::SETTINGS_FILE.to_string();
        match read_capped(&path) {
            Ok(contents) => match self.budget.take(contents.len()) {
                Ok(()) => self.files.push(SourceFile {
                    path: file,
                    contents,
                }),
                Err(limit) => self.over = Some(limit),
            },
            Err(e) => self.problems.push(SpecError {
                at: Location {
                    file,
                    line: 1,
                    column: 1,
                },
                message: format!("cannot read file: {e}"),
            }),
        }
    }

    fn walk(&mut self, dir: &Path, rel: &str) {
        if self.over.is_some() {
            return;
        }
        let at = |file: &str| Location {
            file: file.to_string(),
            line: 1,
            column: 1,
        };
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if !self.seen.insert(canonical) {
            return;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                self.problems.push(SpecError {
                    at: at(if rel.is_empty() { "." } else { rel }),
                    message: format!("cannot read directory: {e}"),
                });
                return;
            }
        };
        for entry in entries.flatten() {
            if self.over.is_some() {
                return;
            }
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
            if self.ignore.ignores(&child, meta.is_dir()) {
                continue;
            }
            if meta.is_dir() {
                self.walk(&path, &child);
            } else if meta.is_file() && !is_source_file(&name) {
                self.unread.push(child);
            } else if meta.is_file() {
                match read_capped(&path) {
                    Ok(contents) => {
                        if let Err(limit) = self.budget.take(contents.len()) {
                            self.over = Some(limit);
                            return;
                        }
                        self.files.push(SourceFile {
                            path: child,
                            contents,
                        });
                    }
                    Err(e) => self.problems.push(SpecError {
                        at: at(&child),
                        message: format!("cannot read file: {e}"),
                    }),
                }
            }
        }
    }
}
