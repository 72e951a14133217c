//! The git source: a cached bare clone of the repository, fetched on demand, and the spec
//! files of one commit read straight from its tree (there is no working checkout to keep
//! clean, and a half-written checkout can never be mistaken for a revision).
//!
//! Secrets (tokens, passwords, passphrases, a password in the URL) never reach an error
//! message or a log line: libgit2's messages are rewritten before they are kept, and the
//! URL is only ever shown without its userinfo.

mod auth;
mod cache;
mod callbacks;
mod checkout;
mod fetch;
mod follow;
mod known_hosts;
pub mod local;
pub mod openpgp;
mod signature;
mod tree;
mod url;
pub mod verify;

pub use follow::Git;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::Repository;

use crate::spec::SourceFile;

pub use auth::GitAuth;
pub(crate) use known_hosts::{KnownHosts, PresentedKey};
pub use url::{strip_userinfo, url_has_credentials};

use url::{Redactor, ssh_port};

/// What to follow in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitRef {
    Branch(String),
    Tag(String),
    Commit(String),
}

impl fmt::Display for GitRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitRef::Branch(b) => write!(f, "branch {b}"),
            GitRef::Tag(t) => write!(f, "tag {t}"),
            GitRef::Commit(c) => write!(f, "commit {c}"),
        }
    }
}

/// Everything a git source needs.
#[derive(Clone)]
pub struct GitConfig {
    pub url: String,
    pub reference: GitRef,
    pub path: Option<String>,
    pub cache_dir: PathBuf,
    pub auth: GitAuth,
    /// Whether a commit's files need its tree on disk (the rendering stage's judgement,
    /// handed down: then the commit is checked out).
    pub needs_checkout: fn(&[SourceFile]) -> bool,
    /// `--verify-commits`: the allowed_signers files and OpenPGP keyrings a revision's
    /// signature is checked against (the tag's, for a tag; else the commit's); none:
    /// nothing is checked.
    pub verify: Vec<PathBuf>,
}

impl fmt::Debug for GitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitConfig")
            .field("url", &strip_userinfo(&self.url))
            .field("reference", &self.reference)
            .field("path", &self.path)
            .field("cache_dir", &self.cache_dir)
            .field("auth", &self.auth)
            .field("verify", &self.verify)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("invalid git source: {0}")]
    Config(String),
    #[error("git cache {}: {message}", path.display())]
    Open { path: PathBuf, message: String },
    #[error("fetching from {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("authenticating to {url}: {message}")]
    Auth { url: String, message: String },
    #[error("SSH host key check for {url}: {message}")]
    HostKey { url: String, message: String },
    #[error("{reference} not found in {url}")]
    RefNotFound { url: String, reference: String },
    #[error("path {path:?} not found in commit {commit}")]
    PathNotFound { path: String, commit: String },
    #[error("reading commit {commit}: {message}")]
    Tree { commit: String, message: String },
    #[error("git fetch task failed: {0}")]
    Task(String),
    /// The revision (`commit`) is not applied: its signature does not pass
    /// `--verify-commits`.
    #[error("not applied: {source}")]
    Unverified {
        commit: String,
        source: verify::Unverified,
    },
    #[error(transparent)]
    Signers(#[from] verify::SignersError),
}

impl GitError {
    /// Every label [`GitError::metric_label`] gives.
    pub(crate) const METRIC_LABELS: &'static [&'static str] = &[
        "config",
        "open",
        "fetch",
        "auth",
        "host_key",
        "ref_not_found",
        "path_not_found",
        "tree",
        "task",
        "unverified",
    ];

    /// The commit the error is about, where it is one the source found but refused.
    pub fn revision(&self) -> Option<&str> {
        match self {
            GitError::Unverified { commit, .. } => Some(commit),
            _ => None,
        }
    }

    /// A stable, low-cardinality label for the error metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            GitError::Config(_) => "config",
            GitError::Open { .. } => "open",
            GitError::Fetch { .. } => "fetch",
            GitError::Auth { .. } => "auth",
            GitError::HostKey { .. } => "host_key",
            GitError::RefNotFound { .. } => "ref_not_found",
            GitError::PathNotFound { .. } => "path_not_found",
            GitError::Tree { .. } => "tree",
            GitError::Task(_) => "task",
            GitError::Unverified { .. } => "unverified",
            GitError::Signers(_) => "config",
        }
    }
}

/// A git repository to take spec files from, cached on disk.
pub struct GitSource {
    url: String,
    display_url: String,
    reference: GitRef,
    /// Normalised: no leading/trailing '/', "" for the root.
    path: String,
    auth: GitAuth,
    /// For known_hosts lookups, which spell a non-default port as `[host]:port`.
    ssh_port: u16,
    cache_path: PathBuf,
    needs_checkout: fn(&[SourceFile]) -> bool,
    verify: Vec<PathBuf>,
    /// git2 repositories are not Sync; the lock also keeps two fetches from racing on
    /// the same refs.
    repo: Mutex<Repository>,
    redactor: Redactor,
}

impl fmt::Debug for GitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitSource")
            .field("url", &self.display_url)
            .field("reference", &self.reference)
            .field("path", &self.path)
            .field("cache_path", &self.cache_path)
            .field("auth", &self.auth)
            .field("verify", &self.verify)
            .finish()
    }
}

impl GitSource {
    /// Opens (or creates) a bare repository under cache_dir (a subdir derived from a hash of the URL), blocking.
    ///
    /// The hash is of the URL without userinfo, so rotating a password kept in the URL
    /// does not throw the cache away. A cache that cannot be opened is recreated.
    pub fn open(cfg: GitConfig) -> Result<GitSource, GitError> {
        fetch::set_network_timeouts();
        let display_url = strip_userinfo(&cfg.url);
        let reference = normalize_ref(cfg.reference)?;
        let path = normalize_path(cfg.path.as_deref().unwrap_or(""))?;
        let cache_path = cfg.cache_dir.join(cache::cache_name(&display_url));
        let repo = cache::open_or_init(&cache_path)?;
        let redactor = Redactor::new(&cfg.url, &display_url, &cfg.auth);
        Ok(GitSource {
            ssh_port: ssh_port(&cfg.url),
            url: cfg.url,
            display_url,
            reference,
            path,
            auth: cfg.auth,
            cache_path,
            needs_checkout: cfg.needs_checkout,
            verify: cfg.verify,
            repo: Mutex::new(repo),
            redactor,
        })
    }

    /// The URL with any userinfo (user:password@) removed, for logs/status.
    pub fn display_url(&self) -> String {
        self.display_url.clone()
    }

    /// The bare repository the fetches go to.
    pub fn cache_path(&self) -> &Path {
        &self.cache_path
    }

    pub fn reference(&self) -> &GitRef {
        &self.reference
    }

    /// The spec subdirectory, normalised ("" for the repository's root).
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// spawn_blocking wrapper (git2 blocks).
pub async fn fetch(source: Arc<GitSource>) -> Result<super::Revision, GitError> {
    tokio::task::spawn_blocking(move || source.fetch())
        .await
        .map_err(|e| GitError::Task(e.to_string()))?
}

/// Accepts `main` as well as `refs/heads/main` (and likewise for tags), and checks the
/// name before it ends up in a refspec.
fn normalize_ref(reference: GitRef) -> Result<GitRef, GitError> {
    let checked = |kind: &str, prefix: &str, name: String| {
        let name = name
            .strip_prefix(prefix)
            .map(str::to_string)
            .unwrap_or(name);
        let full = format!("{prefix}{name}");
        if name.is_empty() || name.contains('*') || !git2::Reference::is_valid_name(&full) {
            return Err(GitError::Config(format!(
                "{kind} name {name:?} is not valid"
            )));
        }
        Ok(name)
    };
    Ok(match reference {
        GitRef::Branch(b) => GitRef::Branch(checked("branch", "refs/heads/", b)?),
        GitRef::Tag(t) => GitRef::Tag(checked("tag", "refs/tags/", t)?),
        GitRef::Commit(c) => {
            let c = c.to_ascii_lowercase();
            if !(7..=40).contains(&c.len()) || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(GitError::Config(format!(
                    "commit {c:?} is not a commit id (7 to 40 hex digits)"
                )));
            }
            GitRef::Commit(c)
        }
    })
}

fn normalize_path(path: &str) -> Result<String, GitError> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(GitError::Config(format!(
                    "path {path:?} leaves the repository"
                )));
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn config_debug_hides_url_credentials_and_secrets() {
        let cfg = GitConfig {
            url: "https://bob:url-secret@example.com/r.git".into(),
            reference: GitRef::Branch("main".into()),
            path: None,
            cache_dir: "/cache".into(),
            needs_checkout: |_| false,
            verify: Vec::new(),
            auth: GitAuth::Token {
                username: None,
                token: "tok-secret".into(),
            },
        };
        let text = format!("{cfg:?}");
        assert!(!text.contains("secret") && !text.contains("bob"), "{text}");
        assert!(text.contains("https://example.com/r.git"), "{text}");
    }

    #[test]
    fn redaction_covers_the_url_and_every_secret() {
        let cache = tempfile::tempdir().unwrap();
        let source = GitSource::open(GitConfig {
            url: "https://bob:p%40ss@example.com/r.git".into(),
            reference: GitRef::Branch("main".into()),
            path: None,
            cache_dir: cache.path().into(),
            needs_checkout: |_| false,
            verify: Vec::new(),
            auth: GitAuth::Token {
                username: None,
                token: "tok-123".into(),
            },
        })
        .unwrap();
        let text = source
            .redactor
            .redact("https://bob:p%40ss@example.com/r.git: sent tok-123, then p@ss, then p%40ss");
        assert_eq!(
            text,
            "https://example.com/r.git: sent <redacted>, then <redacted>, then <redacted>"
        );
        assert_eq!(source.display_url(), "https://example.com/r.git");
        assert!(source.cache_path().starts_with(cache.path()));
        assert!(source.cache_path().join("HEAD").is_file());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(source.cache_path()), 0o700);

        // A cache someone left readable to others is made private when opened.
        let path = source.cache_path().to_path_buf();
        drop(source);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let source = GitSource::open(GitConfig {
            url: "https://example.com/r.git".into(),
            reference: GitRef::Branch("main".into()),
            path: None,
            cache_dir: cache.path().into(),
            needs_checkout: |_| false,
            verify: Vec::new(),
            auth: GitAuth::None,
        })
        .unwrap();
        assert_eq!(source.cache_path(), path);
        assert_eq!(mode(&path), 0o700);
    }

    #[test]
    fn refs_and_paths_are_checked() {
        assert_eq!(
            normalize_ref(GitRef::Branch("refs/heads/feature/x".into())).unwrap(),
            GitRef::Branch("feature/x".into())
        );
        assert_eq!(
            normalize_ref(GitRef::Tag("refs/tags/v1.0".into())).unwrap(),
            GitRef::Tag("v1.0".into())
        );
        assert_eq!(
            normalize_ref(GitRef::Commit("ABCDEF0".into())).unwrap(),
            GitRef::Commit("abcdef0".into())
        );
        for bad in [
            GitRef::Branch("".into()),
            GitRef::Branch("a..b".into()),
            GitRef::Branch("x*".into()),
            GitRef::Branch("with space".into()),
            GitRef::Tag("v1:2".into()),
            GitRef::Commit("abc".into()),
            GitRef::Commit("zzzzzzzz".into()),
            GitRef::Commit("a".repeat(41)),
        ] {
            assert!(normalize_ref(bad.clone()).is_err(), "{bad:?}");
        }
        assert_eq!(normalize_path("").unwrap(), "");
        assert_eq!(normalize_path("/").unwrap(), "");
        assert_eq!(normalize_path("./specs//prod/").unwrap(), "specs/prod");
        assert!(normalize_path("specs/../..").is_err());
    }

    #[test]
    fn error_labels_are_distinct() {
        let errors = [
            GitError::Config(String::new()),
            GitError::Open {
                path: PathBuf::new(),
                message: String::new(),
            },
            GitError::Fetch {
                url: String::new(),
                message: String::new(),
            },
            GitError::Auth {
                url: String::new(),
                message: String::new(),
            },
            GitError::HostKey {
                url: String::new(),
                message: String::new(),
            },
            GitError::RefNotFound {
                url: String::new(),
                reference: String::new(),
            },
            GitError::PathNotFound {
                path: String::new(),
                commit: String::new(),
            },
            GitError::Tree {
                commit: String::new(),
                message: String::new(),
            },
            GitError::Task(String::new()),
        ];
        let labels: std::collections::BTreeSet<_> =
            errors.iter().map(GitError::metric_label).collect();
        assert_eq!(labels.len(), errors.len());
    }
}
