//! Where revisions come from: a watched directory, a git repository, or an OCI artifact.
//!
//! Every kind yields the same [`Revision`]: its files, the paths nothing reads, and where
//! its tree lies on disk when a render tool must read it there. Every kind is followed
//! the same way ([`Followed`]), and [`Config`] is the one place where they are chosen.
//! What follows a source never asks which kind it is. This module knows nothing of the
//! stages above it: which trees need a checkout is a predicate the caller hands to git
//! ([`git::GitConfig`]).

pub mod dir;
mod followed;
pub mod git;
pub mod oci;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use followed::Follow;
pub(crate) use followed::{Failure, Followed};

use crate::spec::{LoadError, SourceFile};

/// The source a daemon follows, as its flags chose it. A new kind of source is a variant
/// here and its arm in [`Config::open`] and [`Config::kind`].
#[derive(Debug)]
pub enum Config {
    Dir(PathBuf),
    Git {
        config: git::GitConfig,
        interval: Duration,
    },
    Oci {
        config: oci::OciConfig,
        interval: Duration,
    },
}

/// Why a source could not be opened (before its first read).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("watching the spec directory: {0}")]
    Dir(#[from] dir::DirError),
    #[error("opening the git source: {0}")]
    Git(#[from] git::GitError),
    #[error("opening the OCI source: {0}")]
    Oci(#[from] oci::OciError),
}

impl Config {
    /// Opens the source and hands it to `follow`.
    pub fn open<F: Follow>(self, follow: F) -> Result<F::Output, OpenError> {
        Ok(match self {
            Config::Dir(root) => {
                let (source, changes) = dir::Dir::open(root)?;
                follow.follow(source, None, Some(changes))
            }
            Config::Git { config, interval } => {
                follow.follow(git::Git::open(config)?, Some(interval), None)
            }
            Config::Oci { config, interval } => {
                follow.follow(oci::Oci::open(config)?, Some(interval), None)
            }
        })
    }

    /// Its kind ([`Followed::KIND`]), and whether it is polled (and so has a hook).
    pub fn kind(&self) -> (&'static str, bool) {
        match self {
            Config::Dir(_) => (dir::Dir::KIND, false),
            Config::Git { .. } => (git::Git::KIND, true),
            Config::Oci { .. } => (oci::Oci::KIND, true),
        }
    }
}

/// Where a revision's tree lies on disk, for the render tools that read files themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// The spec root (canonical).
    pub root: PathBuf,
    /// The repository holding it (canonical): what a kustomization may reach.
    pub repo: PathBuf,
    /// The URLs the repository is fetched from (a git source's, a work tree's remotes'):
    /// an Argo CD Application or a Flux source naming one of them names this repository.
    pub urls: Vec<String>,
    /// The names the revision being read goes by (the branch or tag followed, the
    /// commit), when known: an Application naming another revision of this repository is
    /// said to be read at this one all the same.
    pub revisions: Vec<String>,
}

impl Checkout {
    /// For a directory or a CLI path: the repository is the git work tree that holds it,
    /// else the directory itself.
    pub(crate) fn for_dir(root: &Path) -> std::io::Result<Checkout> {
        let root = root.canonicalize()?;
        let root = if root.is_file() {
            root.parent().map(Path::to_path_buf).unwrap_or(root)
        } else {
            root
        };
        let repo = root
            .ancestors()
            .find(|d| d.join(".git").exists())
            .unwrap_or(&root)
            .to_path_buf();
        // One open of the work tree for both.
        let (urls, revisions) = match git2::Repository::open(&repo) {
            Ok(r) => (urls_of(&r), head_names(&r)),
            Err(_) => (Vec::new(), Vec::new()),
        };
        Ok(Checkout {
            root,
            repo,
            urls,
            revisions,
        })
    }
}

/// The branch a work tree has checked out and its commit.
pub(crate) fn head_names(r: &git2::Repository) -> Vec<String> {
    let Ok(head) = r.head() else {
        return Vec::new();
    };
    let branch = head
        .is_branch()
        .then(|| head.shorthand().ok().map(str::to_string))
        .flatten();
    let commit = head.target().map(|c| c.to_string());
    branch.into_iter().chain(commit).collect()
}

/// The URLs of a work tree's remotes (none when it is not a git repository).
pub(crate) fn remote_urls(repo: &Path) -> Vec<String> {
    git2::Repository::open(repo)
        .map(|r| urls_of(&r))
        .unwrap_or_default()
}

fn urls_of(r: &git2::Repository) -> Vec<String> {
    let Ok(names) = r.remotes() else {
        return Vec::new();
    };
    (0..names.len())
        .filter_map(|i| names.get(i).ok().flatten())
        .filter_map(|n| r.find_remote(n).ok()?.url().ok().map(str::to_string))
        .collect()
}

/// One revision of a source, whichever its kind: what the rendering stage reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revision {
    /// The source's name for it: a commit, or `TAG@sha256:…`. `None` for a directory,
    /// which is named by what it renders to.
    pub id: Option<String>,
    pub files: Vec<SourceFile>,
    /// Paths under the spec root that no reader takes.
    pub unread: Vec<String>,
    /// The tree on disk: always for a directory or an artifact, for a commit when a tool
    /// needs it.
    pub checkout: Option<Checkout>,
    /// The commit it was built from, when it says (an OCI artifact's annotation): what
    /// commit statuses are reported on.
    pub origin: Option<String>,
    /// What its signatures were found to be, for what the tree asks of them (Flux's
    /// `GitRepository.spec.verify`).
    pub signatures: Signatures,
}

/// What a revision's signatures were found to be (`run --git --verify-commits`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Signatures {
    /// No commit of a followed repository (a directory, an artifact): nothing to check.
    #[default]
    NoCommit,
    /// A followed commit whose signatures nothing checks (no `--verify-commits`).
    Unchecked,
    /// Checked, with who signed the commit and the followed tag (each when it passed: a
    /// tag's revision passes on the tag's signature alone).
    Verified {
        commit: Option<String>,
        tag: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error(transparent)]
    Read(#[from] LoadError),
    #[error("spec root {}: {source}", root.display())]
    Root {
        root: PathBuf,
        source: std::io::Error,
    },
}

/// A full SHA-1 or SHA-256 commit id (a directory's revisions are not commits).
pub(crate) fn is_commit(revision: &str) -> bool {
    matches!(revision.len(), 40 | 64) && revision.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A tree on disk read as a revision: what a directory, an unpacked artifact and the CLI's
/// path all are. `repo` is what a kustomization may reach when the caller knows it (an
/// artifact's whole tree); else the git work tree holding `root`, or `root` itself.
pub fn read_tree(root: &Path, repo: Option<PathBuf>) -> Result<Revision, TreeError> {
    let (files, unread) = crate::spec::read_dir_all(root)?;
    let at = |source| TreeError::Root {
        root: root.to_path_buf(),
        source,
    };
    let checkout = match repo {
        Some(repo) => Checkout {
            root: root.canonicalize().map_err(at)?,
            urls: remote_urls(&repo),
            repo,
            revisions: Vec::new(),
        },
        None => Checkout::for_dir(root).map_err(at)?,
    };
    Ok(Revision {
        id: None,
        files,
        unread,
        checkout: Some(checkout),
        origin: None,
        signatures: Signatures::NoCommit,
    })
}
