//! The rendering stage's one directory walk. The tools it stands in for read a tree by
//! different rules (Argo CD's finders leave hidden entries out, a chart is read whole,
//! a repository's copy leaves `.git` out; a link may be followed anywhere, only inside
//! the repository, or not at all when it names a directory), so those rules are its
//! options, and what stays the same for every caller is here once: entries in name
//! order, depth first; a link to a directory the walk is already in (an ancestor) never
//! entered, so it ends; and every failure an item the caller decides on (fail, pass
//! over, collect).
//!
//! `spec`'s own walk (`spec/load/read.rs`) cannot use it: `spec` lies below `hydrate`.

use std::collections::HashSet;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

/// Which entries whose names start with `.` a walk takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// None, `.git` among them: what Argo CD's and Flux's finders are given here (a
    /// ConfigMap mount's `..data` and CI directories never read as manifests).
    Skip,
    /// All but `.git`: a repository's files as a copy or an artifact holds them.
    ExceptGit,
    /// All: a chart's or a dependency's files, as helm reads the directory.
    Keep,
}

/// What a walk does with a symbolic link. `bound` is canonical; a link that leads to
/// nothing is always an item, [`WalkError::Missing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links<'a> {
    /// Followed wherever it leads.
    Follow,
    /// Followed while what it leads to lies inside `bound`; one leading out is an item,
    /// [`WalkError::LeadsOut`].
    Inside(&'a Path),
    /// Followed while what it leads to lies inside `bound`; one leading out is passed
    /// over, as if it were not there.
    SkipOutside(&'a Path),
    /// A link to a directory passed over (as Flux's walk does, so a link to an ancestor
    /// ends); a link to a file as with [`Links::Inside`].
    FilesInside(&'a Path),
}

/// How often a directory that several paths reach (through links) is entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revisit {
    /// Once, by the first path in the walk's order: what is read is read once, and
    /// links cannot make a small tree a walk without end.
    Never,
    /// By every path that reaches it but a link to an ancestor: a copy holds what each
    /// path holds.
    ByEveryPath,
}

/// One walk's rules.
#[derive(Debug, Clone, Copy)]
pub struct Walk<'a> {
    pub hidden: Hidden,
    pub links: Links<'a>,
    pub revisit: Revisit,
    /// How deep entries are taken: `Some(1)` the root's own entries only; `None` all.
    pub depth: Option<usize>,
}

/// One entry of a walk.
#[derive(Debug)]
pub struct Entry {
    /// As reached from the root (the root joined with `rel`), links not resolved.
    pub path: PathBuf,
    /// Relative to the root.
    pub rel: PathBuf,
    /// What it is on disk, canonical.
    pub real: PathBuf,
    /// Of what `real` names.
    pub meta: Metadata,
}

impl Entry {
    pub fn is_dir(&self) -> bool {
        self.meta.is_dir()
    }

    pub fn is_file(&self) -> bool {
        self.meta.is_file()
    }

    /// The entry's name.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// What a walk met that is not an entry; each caller says it in its own words.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A directory (the root included) that could not be listed.
    #[error("{}: {source}", dir.display())]
    Read {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// A link whose target lies outside the walk's bound.
    #[error("{} leads out", path.display())]
    LeadsOut { path: PathBuf },
    /// A link to nothing (or an entry gone while it was walked).
    #[error("{}: {source}", path.display())]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl<'a> Walk<'a> {
    /// The entries below `root` (not `root` itself), in name order, depth first: a
    /// directory's entry comes before its own entries.
    pub fn iter(&self, root: &Path) -> Iter<'a> {
        Iter {
            walk: *self,
            frames: Vec::new(),
            seen: HashSet::new(),
            enter: Some(Enter {
                path: root.to_path_buf(),
                rel: PathBuf::new(),
                real: None,
                depth: 0,
            }),
        }
    }

    /// Every entry below `root`, or the first thing met that is not one.
    pub fn entries(&self, root: &Path) -> Result<Vec<Entry>, WalkError> {
        self.iter(root).collect()
    }
}

/// A directory to enter at the next step, unless the caller skips it.
struct Enter {
    path: PathBuf,
    rel: PathBuf,
    /// `None` for the root, resolved when it is entered.
    real: Option<PathBuf>,
    depth: usize,
}

/// One directory being listed.
struct Frame {
    entries: std::vec::IntoIter<std::fs::DirEntry>,
    path: PathBuf,
    rel: PathBuf,
    real: PathBuf,
    depth: usize,
}

/// A walk under way: an iterator of entries and of what is not one.
pub struct Iter<'a> {
    walk: Walk<'a>,
    /// The directories the walk is in, the root first.
    frames: Vec<Frame>,
    /// Every directory entered, for [`Revisit::Never`].
    seen: HashSet<PathBuf>,
    enter: Option<Enter>,
}

impl Iter<'_> {
    /// The directory just given is not entered.
    pub(crate) fn skip_dir(&mut self) {
        self.enter = None;
    }

    /// Lists the directory due to be entered; `Some` when it cannot be.
    fn enter(&mut self, d: Enter) -> Option<WalkError> {
        let real = match d.real {
            Some(r) => r,
            None => match d.path.canonicalize() {
                Ok(r) => r,
                Err(source) => {
                    return Some(WalkError::Read {
                        dir: d.path,
                        source,
                    });
                }
            },
        };
        // A link to an ancestor: entered, it would never end.
        let again = match self.walk.revisit {
            Revisit::Never => !self.seen.insert(real.clone()),
            Revisit::ByEveryPath => self.frames.iter().any(|f| f.real == real),
        };
        if again {
            return None;
        }
        let listed = match std::fs::read_dir(&d.path) {
            Ok(l) => l,
            Err(source) => {
                return Some(WalkError::Read {
                    dir: d.path,
                    source,
                });
            }
        };
        let hidden = self.walk.hidden;
        let mut entries: Vec<std::fs::DirEntry> = listed
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                match hidden {
                    Hidden::Skip => !name.to_string_lossy().starts_with('.'),
                    Hidden::ExceptGit => name != ".git",
                    Hidden::Keep => true,
                }
            })
            .collect();
        // The file system's order is no order: a later file may overwrite an earlier one.
        entries.sort_by_key(|e| e.file_name());
        self.frames.push(Frame {
            entries: entries.into_iter(),
            path: d.path,
            rel: d.rel,
            real,
            depth: d.depth,
        });
        None
    }

    /// `e` (of `frame`) resolved by the walk's link rule: `Ok(None)` passes it over.
    fn resolve(
        &self,
        e: &std::fs::DirEntry,
        frame_real: &Path,
        path: &Path,
    ) -> Result<Option<(PathBuf, Metadata)>, WalkError> {
        let missing = |source| WalkError::Missing {
            path: path.to_path_buf(),
            source,
        };
        let link = e.file_type().is_ok_and(|t| t.is_symlink());
        if !link {
            let meta = std::fs::metadata(path).map_err(missing)?;
            return Ok(Some((frame_real.join(e.file_name()), meta)));
        }
        let real = path.canonicalize().map_err(missing)?;
        let meta = std::fs::metadata(&real).map_err(missing)?;
        let bound = match self.walk.links {
            Links::Follow => return Ok(Some((real, meta))),
            Links::FilesInside(_) if meta.is_dir() => return Ok(None),
            Links::Inside(b) | Links::SkipOutside(b) | Links::FilesInside(b) => b,
        };
        if real.starts_with(bound) {
            return Ok(Some((real, meta)));
        }
        match self.walk.links {
            Links::SkipOutside(_) => Ok(None),
            _ => Err(WalkError::LeadsOut {
                path: path.to_path_buf(),
            }),
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = Result<Entry, WalkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(d) = self.enter.take()
            && let Some(err) = self.enter(d)
        {
            return Some(Err(err));
        }
        loop {
            let frame = self.frames.last_mut()?;
            let Some(e) = frame.entries.next() else {
                self.frames.pop();
                continue;
            };
            let (path, rel) = (
                frame.path.join(e.file_name()),
                frame.rel.join(e.file_name()),
            );
            let (frame_real, depth) = (frame.real.clone(), frame.depth + 1);
            let (real, meta) = match self.resolve(&e, &frame_real, &path) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(err) => return Some(Err(err)),
            };
            if meta.is_dir() && self.walk.depth.is_none_or(|max| depth < max) {
                self.enter = Some(Enter {
                    path: path.clone(),
                    rel: rel.clone(),
                    real: Some(real.clone()),
                    depth,
                });
            }
            return Some(Ok(Entry {
                path,
                rel,
                real,
                meta,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// a.yaml, .hidden.yaml, .git/config, sub/b.yaml, sub/.c.yaml, in a canonical tempdir.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap().join("repo");
        for f in [
            "a.yaml",
            ".hidden.yaml",
            ".git/config",
            "sub/b.yaml",
            "sub/.c.yaml",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        (tmp, root)
    }

    fn rels(walk: Walk<'_>, root: &Path) -> Vec<String> {
        walk.entries(root)
            .unwrap()
            .iter()
            .map(|e| e.rel.display().to_string())
            .collect()
    }

    fn walk(hidden: Hidden, links: Links<'_>) -> Walk<'_> {
        Walk {
            hidden,
            links,
            revisit: Revisit::Never,
            depth: None,
        }
    }

    #[test]
    fn hidden_entries_are_taken_by_the_rule() {
        let (_tmp, root) = tree();
        assert_eq!(
            rels(walk(Hidden::Skip, Links::Follow), &root),
            ["a.yaml", "sub", "sub/b.yaml"]
        );
        assert_eq!(
            rels(walk(Hidden::ExceptGit, Links::Follow), &root),
            [".hidden.yaml", "a.yaml", "sub", "sub/.c.yaml", "sub/b.yaml"]
        );
        assert_eq!(
            rels(walk(Hidden::Keep, Links::Follow), &root),
            [
                ".git",
                ".git/config",
                ".hidden.yaml",
                "a.yaml",
                "sub",
                "sub/.c.yaml",
                "sub/b.yaml"
            ]
        );
    }

    #[test]
    fn entries_come_in_name_order_depth_first_and_to_the_depth_asked() {
        let (_tmp, root) = tree();
        for f in ["z.yaml", "sub/a/deep.yaml", "sub-2.yaml"] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let all = rels(walk(Hidden::Skip, Links::Follow), &root);
        assert_eq!(
            all,
            [
                "a.yaml",
                "sub",
                "sub/a",
                "sub/a/deep.yaml",
                "sub/b.yaml",
                "sub-2.yaml",
                "z.yaml"
            ]
        );
        let shallow = Walk {
            depth: Some(1),
            ..walk(Hidden::Skip, Links::Follow)
        };
        assert_eq!(
            rels(shallow, &root),
            ["a.yaml", "sub", "sub-2.yaml", "z.yaml"]
        );
        let mut it = walk(Hidden::Skip, Links::Follow).iter(&root);
        let mut taken = Vec::new();
        while let Some(e) = it.next() {
            let e = e.unwrap();
            if e.is_dir() {
                it.skip_dir();
            }
            taken.push(e.rel.display().to_string());
        }
        assert_eq!(taken, ["a.yaml", "sub", "sub-2.yaml", "z.yaml"]);
    }

    #[test]
    fn a_link_inside_is_followed_and_one_to_an_ancestor_not_entered() {
        let (_tmp, root) = tree();
        std::os::unix::fs::symlink("sub", root.join("to-sub")).unwrap();
        std::os::unix::fs::symlink("a.yaml", root.join("to-a.yaml")).unwrap();
        std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
        // Entered once, `sub` is read through `sub` only; the root not again.
        assert_eq!(
            rels(walk(Hidden::Skip, Links::Inside(&root)), &root),
            [
                "a.yaml",
                "sub",
                "sub/b.yaml",
                "sub/up",
                "to-a.yaml",
                "to-sub"
            ]
        );
        let every = Walk {
            revisit: Revisit::ByEveryPath,
            ..walk(Hidden::Skip, Links::Inside(&root))
        };
        let e = every.entries(&root).unwrap();
        let rel: Vec<String> = e.iter().map(|e| e.rel.display().to_string()).collect();
        // `sub` is entered through both paths; `up` is the root, which the walk is in.
        assert_eq!(
            rel,
            [
                "a.yaml",
                "sub",
                "sub/b.yaml",
                "sub/up",
                "to-a.yaml",
                "to-sub",
                "to-sub/b.yaml",
                "to-sub/up"
            ]
        );
        let to_a = e.iter().find(|e| e.rel == Path::new("to-a.yaml")).unwrap();
        assert_eq!(to_a.real, root.join("a.yaml"));
        assert_eq!(to_a.path, root.join("to-a.yaml"));
        // Flux's rule: a link to a directory is passed over, one to a file taken.
        assert_eq!(
            rels(walk(Hidden::Skip, Links::FilesInside(&root)), &root),
            ["a.yaml", "sub", "sub/b.yaml", "to-a.yaml"]
        );
    }

    #[test]
    fn a_link_leading_out_is_refused_passed_over_or_followed() {
        let (tmp, root) = tree();
        let outside = tmp.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.yaml"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sub/out")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.yaml"), root.join("out.yaml")).unwrap();
        let err = walk(Hidden::Skip, Links::Inside(&root))
            .entries(&root)
            .unwrap_err();
        assert!(
            matches!(&err, WalkError::LeadsOut { path } if path == &root.join("out.yaml")),
            "{err}"
        );
        // Refused whether it names a file or a directory.
        std::fs::remove_file(root.join("out.yaml")).unwrap();
        let err = walk(Hidden::Skip, Links::Inside(&root))
            .entries(&root)
            .unwrap_err();
        assert!(
            matches!(&err, WalkError::LeadsOut { path } if path == &root.join("sub/out")),
            "{err}"
        );
        assert_eq!(
            rels(walk(Hidden::Skip, Links::SkipOutside(&root)), &root),
            ["a.yaml", "sub", "sub/b.yaml"]
        );
        assert_eq!(
            rels(walk(Hidden::Skip, Links::Follow), &root),
            [
                "a.yaml",
                "sub",
                "sub/b.yaml",
                "sub/out",
                "sub/out/secret.yaml"
            ]
        );
    }

    #[test]
    fn a_link_to_nothing_and_an_unreadable_root_are_items() {
        let (_tmp, root) = tree();
        std::os::unix::fs::symlink("gone.yaml", root.join("dangling.yaml")).unwrap();
        let mut it = walk(Hidden::Skip, Links::Follow).iter(&root);
        let items: Vec<_> = it.by_ref().collect();
        assert!(items.iter().any(|i| matches!(
            i,
            Err(WalkError::Missing { path, .. }) if path == &root.join("dangling.yaml")
        )));
        // The walk goes on past it.
        assert!(
            items
                .iter()
                .any(|i| i.as_ref().is_ok_and(|e| e.rel == Path::new("sub/b.yaml")))
        );
        let err = walk(Hidden::Skip, Links::Follow)
            .entries(&root.join("none"))
            .unwrap_err();
        assert!(matches!(err, WalkError::Read { .. }), "{err}");
    }
}
