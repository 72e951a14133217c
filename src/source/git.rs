//! The git source: a cached bare clone of the repository, fetched on demand, and the spec
//! files of one commit read straight from its tree (there is no working checkout to keep
//! clean, and a half-written checkout can never be mistaken for a revision).
//!
//! Secrets (tokens, passwords, passphrases, a password in the URL) never reach an error
//! message or a log line: libgit2's messages are rewritten before they are kept, and the
//! URL is only ever shown without its userinfo.

mod known_hosts;

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once, PoisonError};

use git2::{
    AutotagOption, CertificateCheckStatus, Cred, CredentialType, ErrorClass, ErrorCode,
    FetchOptions, FetchPrune, ObjectType, Oid, ProxyOptions, RemoteCallbacks, Repository,
};
use sha2::Digest;

use crate::spec::{IGNORE_FILE, IgnoreRules, MAX_FILE_BYTES, SourceFile, is_spec_file};

pub use known_hosts::{KnownHosts, PresentedKey, Rejection};

/// libgit2 asks again, forever, while the server keeps refusing what it is given.
const MAX_AUTH_ATTEMPTS: u32 = 3;

/// libgit2 waits forever by default; a stalled server would then hold the source's lock
/// and starve every later sync.
const CONNECT_TIMEOUT_MS: i32 = 30_000;
const SERVER_TIMEOUT_MS: i32 = 120_000;

/// Where fetched refs land; kept apart from `refs/heads` so nothing in the cache looks
/// like a branch someone could have meant to commit to.
const REF_NS: &str = "refs/driftless";

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

/// How to authenticate to the remote.
#[derive(Clone, PartialEq, Eq)]
pub enum GitAuth {
    None,
    /// SSH private key file (+ optional passphrase) and known_hosts file; host keys are verified against it.
    SshKey {
        private_key: PathBuf,
        passphrase: Option<String>,
        known_hosts: Option<PathBuf>,
    },
    /// HTTPS token (sent as the password, user "git" unless a username is given).
    Token {
        username: Option<String>,
        token: String,
    },
    UserPassword {
        username: String,
        password: String,
    },
}

struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitAuth::None => f.write_str("None"),
            GitAuth::SshKey {
                private_key,
                passphrase,
                known_hosts,
            } => f
                .debug_struct("SshKey")
                .field("private_key", private_key)
                .field("passphrase", &passphrase.as_ref().map(|_| Redacted))
                .field("known_hosts", known_hosts)
                .finish(),
            GitAuth::Token { username, .. } => f
                .debug_struct("Token")
                .field("username", username)
                .field("token", &Redacted)
                .finish(),
            GitAuth::UserPassword { username, .. } => f
                .debug_struct("UserPassword")
                .field("username", username)
                .field("password", &Redacted)
                .finish(),
        }
    }
}

const ENV_TOKEN: &str = "DRIFTLESS_GIT_TOKEN";
const ENV_TOKEN_FILE: &str = "DRIFTLESS_GIT_TOKEN_FILE";
const ENV_USERNAME: &str = "DRIFTLESS_GIT_USERNAME";
const ENV_PASSWORD: &str = "DRIFTLESS_GIT_PASSWORD";
const ENV_PASSWORD_FILE: &str = "DRIFTLESS_GIT_PASSWORD_FILE";
const ENV_SSH_KEY_FILE: &str = "DRIFTLESS_GIT_SSH_KEY_FILE";
const ENV_SSH_KEY_PASSPHRASE: &str = "DRIFTLESS_GIT_SSH_KEY_PASSPHRASE";
const ENV_KNOWN_HOSTS_FILE: &str = "DRIFTLESS_GIT_KNOWN_HOSTS_FILE";

impl GitAuth {
    /// From the environment, never argv: DRIFTLESS_GIT_TOKEN or DRIFTLESS_GIT_TOKEN_FILE,
    /// DRIFTLESS_GIT_USERNAME + DRIFTLESS_GIT_PASSWORD or DRIFTLESS_GIT_PASSWORD_FILE,
    /// DRIFTLESS_GIT_SSH_KEY_FILE (+ DRIFTLESS_GIT_SSH_KEY_PASSPHRASE, DRIFTLESS_GIT_KNOWN_HOSTS_FILE).
    /// Takes a lookup fn so tests don't touch the process env.
    ///
    /// An empty variable counts as unset (an optional secret in a Deployment often comes
    /// through as ""). Settings that would be ignored are errors rather than surprises.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<GitAuth, GitError> {
        let var = |name: &str| get(name).filter(|v| !v.is_empty());
        let token = secret(&var, ENV_TOKEN, ENV_TOKEN_FILE)?;
        let password = secret(&var, ENV_PASSWORD, ENV_PASSWORD_FILE)?;
        let username = var(ENV_USERNAME);
        let key = var(ENV_SSH_KEY_FILE).map(PathBuf::from);
        let passphrase = var(ENV_SSH_KEY_PASSPHRASE);
        let known_hosts = var(ENV_KNOWN_HOSTS_FILE).map(PathBuf::from);

        let config = |m: String| Err(GitError::Config(m));
        let kinds = [
            token.is_some().then_some("a token"),
            password.is_some().then_some("a password"),
            key.is_some().then_some("an SSH key"),
        ];
        let kinds: Vec<&str> = kinds.into_iter().flatten().collect();
        if kinds.len() > 1 {
            return config(format!(
                "git credentials: set only one of {ENV_TOKEN}(_FILE), {ENV_PASSWORD}(_FILE) \
                 and {ENV_SSH_KEY_FILE} (found {})",
                kinds.join(" and ")
            ));
        }
        if key.is_none() {
            for (name, set) in [
                (ENV_SSH_KEY_PASSPHRASE, passphrase.is_some()),
                (ENV_KNOWN_HOSTS_FILE, known_hosts.is_some()),
            ] {
                if set {
                    return config(format!("git credentials: {name} needs {ENV_SSH_KEY_FILE}"));
                }
            }
        }
        if let Some(private_key) = key {
            if username.is_some() {
                return config(format!(
                    "git credentials: {ENV_USERNAME} is not used with an SSH key; put the user \
                     in the URL (ssh://user@host/repo.git)"
                ));
            }
            for path in std::iter::once(&private_key).chain(known_hosts.as_ref()) {
                if let Err(e) = std::fs::metadata(path) {
                    return config(format!("git credentials: {}: {e}", path.display()));
                }
            }
            return Ok(GitAuth::SshKey {
                private_key,
                passphrase,
                known_hosts,
            });
        }
        if let Some(token) = token {
            return Ok(GitAuth::Token { username, token });
        }
        if let Some(password) = password {
            let Some(username) = username else {
                return config(format!(
                    "git credentials: {ENV_PASSWORD}(_FILE) needs {ENV_USERNAME}"
                ));
            };
            return Ok(GitAuth::UserPassword { username, password });
        }
        if username.is_some() {
            return config(format!(
                "git credentials: {ENV_USERNAME} needs {ENV_PASSWORD}(_FILE) or {ENV_TOKEN}(_FILE)"
            ));
        }
        Ok(GitAuth::None)
    }

    fn secrets(&self) -> Vec<String> {
        match self {
            GitAuth::None => vec![],
            GitAuth::SshKey { passphrase, .. } => passphrase.iter().cloned().collect(),
            GitAuth::Token { token, .. } => vec![token.clone()],
            GitAuth::UserPassword { password, .. } => vec![password.clone()],
        }
    }
}

/// A secret given either inline or as a file (a mounted Kubernetes Secret, whose trailing
/// newline is not part of the secret).
fn secret(
    var: &impl Fn(&str) -> Option<String>,
    name: &str,
    file_name: &str,
) -> Result<Option<String>, GitError> {
    match (var(name), var(file_name)) {
        (Some(_), Some(_)) => Err(GitError::Config(format!(
            "git credentials: set {name} or {file_name}, not both"
        ))),
        (Some(v), None) => Ok(Some(v)),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                GitError::Config(format!("git credentials: {file_name}={path}: {e}"))
            })?;
            let value = text.trim();
            if value.is_empty() {
                return Err(GitError::Config(format!(
                    "git credentials: {file_name}={path}: the file is empty"
                )));
            }
            Ok(Some(value.to_string()))
        }
        (None, None) => Ok(None),
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
}

impl fmt::Debug for GitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitConfig")
            .field("url", &strip_userinfo(&self.url))
            .field("reference", &self.reference)
            .field("path", &self.path)
            .field("cache_dir", &self.cache_dir)
            .field("auth", &self.auth)
            .finish()
    }
}

/// One commit's spec files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// The full hex id of the commit.
    pub commit: String,
    pub files: Vec<SourceFile>,
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
}

impl GitError {
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
    /// git2 repositories are not Sync; the lock also keeps two fetches from racing on
    /// the same refs.
    repo: Mutex<Repository>,
    secrets: Vec<String>,
}

impl fmt::Debug for GitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitSource")
            .field("url", &self.display_url)
            .field("reference", &self.reference)
            .field("path", &self.path)
            .field("cache_path", &self.cache_path)
            .field("auth", &self.auth)
            .finish()
    }
}

impl GitSource {
    /// Opens (or creates) a bare repository under cache_dir (a subdir derived from a hash of the URL), blocking.
    ///
    /// The hash is of the URL without userinfo, so rotating a password kept in the URL
    /// does not throw the cache away. A cache that cannot be opened is recreated.
    pub fn open(cfg: GitConfig) -> Result<GitSource, GitError> {
        set_network_timeouts();
        let display_url = strip_userinfo(&cfg.url);
        let reference = normalize_ref(cfg.reference)?;
        let path = normalize_path(cfg.path.as_deref().unwrap_or(""))?;
        let cache_path = cfg.cache_dir.join(cache_name(&display_url));
        let repo = open_or_init(&cache_path)?;
        let mut secrets = cfg.auth.secrets();
        if let Some(password) = url_password(&cfg.url) {
            // libgit2 may quote it either way.
            secrets.push(percent_decode(&password));
            secrets.push(password);
        }
        // Replacing "" would put a marker between every character.
        secrets.retain(|s| !s.is_empty());
        // Longest first, so a secret that contains another is not left half-replaced.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Ok(GitSource {
            ssh_port: ssh_port(&cfg.url),
            url: cfg.url,
            display_url,
            reference,
            path,
            auth: cfg.auth,
            cache_path,
            repo: Mutex::new(repo),
            secrets,
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

    /// Fetches the configured ref from the remote (force refspec: a force-push is simply the new state), resolves it to a commit, reads the spec files of that commit under `path`. Blocking.
    pub fn fetch(&self) -> Result<Revision, GitError> {
        let repo = self.repo.lock().unwrap_or_else(PoisonError::into_inner);
        let known_hosts = self.load_known_hosts()?;
        let commit = match &self.reference {
            GitRef::Branch(b) => self.fetch_ref(&repo, &format!("refs/heads/{b}"), &known_hosts)?,
            GitRef::Tag(t) => self.fetch_ref(&repo, &format!("refs/tags/{t}"), &known_hosts)?,
            GitRef::Commit(c) => self.fetch_commit(&repo, c, &known_hosts)?,
        };
        let files = read_files(&repo, commit, &self.path)?;
        tracing::debug!(
            url = %self.display_url,
            reference = %self.reference,
            commit = %commit,
            files = files.len(),
            "read git revision"
        );
        Ok(Revision {
            commit: commit.to_string(),
            files,
        })
    }

    fn load_known_hosts(&self) -> Result<Option<KnownHosts>, GitError> {
        let GitAuth::SshKey {
            known_hosts: Some(path),
            ..
        } = &self.auth
        else {
            return Ok(None);
        };
        // Read on every fetch: a mounted Secret can be updated while the daemon runs.
        let text = std::fs::read_to_string(path)
            .map_err(|e| GitError::Config(format!("known_hosts file {}: {e}", path.display())))?;
        let (known, bad) = KnownHosts::parse(&text);
        if known.is_empty() {
            tracing::warn!(file = %path.display(), "known_hosts file has no usable entries; every SSH host will be rejected");
        }
        if !bad.is_empty() {
            tracing::warn!(file = %path.display(), lines = ?bad, "skipping unreadable known_hosts lines");
        }
        Ok(Some(known))
    }

    /// Fetches one ref and returns the commit it points to.
    fn fetch_ref(
        &self,
        repo: &Repository,
        src: &str,
        known_hosts: &Option<KnownHosts>,
    ) -> Result<Oid, GitError> {
        let short = src.trim_start_matches("refs/");
        let landing = format!("{REF_NS}/incoming/{short}");
        let keep = format!("{REF_NS}/{short}");
        // libgit2 fetches a refspec whose source the remote no longer has as "nothing to
        // do"; a landing ref left from an earlier fetch would then pass for the current
        // state of a deleted branch. `keep` stays, so the objects still count as "have"
        // in the negotiation and nothing is downloaded twice.
        self.delete_ref(repo, &landing)?;
        self.download(repo, &[format!("+{src}:{landing}")], known_hosts, false)?;
        let reference = match repo.find_reference(&landing) {
            Ok(r) => r,
            Err(e) if e.code() == ErrorCode::NotFound => {
                return Err(GitError::RefNotFound {
                    url: self.display_url.clone(),
                    reference: self.reference.to_string(),
                });
            }
            Err(e) => return Err(self.open_error(&e)),
        };
        let commit = reference.peel_to_commit().map_err(|e| GitError::Fetch {
            url: self.display_url.clone(),
            message: format!(
                "{} does not point to a commit: {}",
                self.reference,
                self.redact(e.message())
            ),
        })?;
        let id = commit.id();
        repo.reference(&keep, id, true, "driftless: fetched")
            .map_err(|e| self.open_error(&e))?;
        Ok(id)
    }

    /// A commit is immutable, so once it is in the cache the remote is not asked again.
    /// Otherwise every branch and tag is fetched (any server can serve those), and when
    /// the commit is in none of them, the commit itself (servers that allow it, such as
    /// GitHub's, serve commits that no ref advertises).
    fn fetch_commit(
        &self,
        repo: &Repository,
        id: &str,
        known_hosts: &Option<KnownHosts>,
    ) -> Result<Oid, GitError> {
        let keep = |oid: Oid| {
            repo.reference(
                &format!("{REF_NS}/commits/{oid}"),
                oid,
                true,
                "driftless: pinned commit",
            )
            .map(|_| oid)
            .map_err(|e| self.open_error(&e))
        };
        if let Some(oid) = self.find_commit(repo, id)? {
            return keep(oid);
        }
        self.download(
            repo,
            &[
                format!("+refs/heads/*:{REF_NS}/all/heads/*"),
                format!("+refs/tags/*:{REF_NS}/all/tags/*"),
            ],
            known_hosts,
            true,
        )?;
        if let Some(oid) = self.find_commit(repo, id)? {
            return keep(oid);
        }
        if id.len() == 40 {
            let landing = format!("{REF_NS}/commits/{id}");
            match self.download(repo, &[format!("+{id}:{landing}")], known_hosts, false) {
                Ok(()) => {}
                Err(e @ (GitError::Auth { .. } | GitError::HostKey { .. })) => return Err(e),
                Err(e) => {
                    tracing::debug!(url = %self.display_url, error = %e, "server did not serve the commit by id");
                }
            }
            if let Some(oid) = self.find_commit(repo, id)? {
                return keep(oid);
            }
        }
        Err(GitError::RefNotFound {
            url: self.display_url.clone(),
            reference: self.reference.to_string(),
        })
    }

    fn find_commit(&self, repo: &Repository, id: &str) -> Result<Option<Oid>, GitError> {
        match repo.find_commit_by_prefix(id) {
            Ok(c) => Ok(Some(c.id())),
            Err(e) if e.code() == ErrorCode::Ambiguous => Err(GitError::Config(format!(
                "commit {id} is ambiguous; give more of its id"
            ))),
            // Not found, or an object that is not a commit: neither is the commit asked for.
            Err(_) => Ok(None),
        }
    }

    fn delete_ref(&self, repo: &Repository, name: &str) -> Result<(), GitError> {
        match repo.find_reference(name) {
            Ok(mut r) => r.delete().map_err(|e| self.open_error(&e)),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(()),
            Err(e) => Err(self.open_error(&e)),
        }
    }

    fn download(
        &self,
        repo: &Repository,
        refspecs: &[String],
        known_hosts: &Option<KnownHosts>,
        prune: bool,
    ) -> Result<(), GitError> {
        let attempts = Cell::new(0u32);
        let auth_failure: RefCell<Option<String>> = RefCell::new(None);
        let host_key_failure: RefCell<Option<String>> = RefCell::new(None);

        let mut callbacks = RemoteCallbacks::new();
        callbacks.credentials(|_url, username_from_url, allowed| {
            let choice = choose_credential(&self.auth, username_from_url, allowed);
            // Naming the user is not an attempt that can fail; only offers of secrets are.
            if !matches!(choice, Ok(CredChoice::Username(_))) {
                attempts.set(attempts.get() + 1);
                if attempts.get() > MAX_AUTH_ATTEMPTS {
                    let message =
                        format!("the server rejected the credentials {MAX_AUTH_ATTEMPTS} times");
                    *auth_failure.borrow_mut() = Some(message.clone());
                    return Err(git2::Error::from_str(&message));
                }
            }
            let made = match choice {
                Ok(choice) => choice.into_cred(),
                Err(why) => {
                    *auth_failure.borrow_mut() = Some(why.to_string());
                    return Err(git2::Error::from_str(why));
                }
            };
            made.map_err(|e| {
                // Such as an unreadable or undecryptable key; the message names a path at most.
                let message = format!("cannot use the credentials: {}", self.redact(e.message()));
                *auth_failure.borrow_mut() = Some(message.clone());
                git2::Error::from_str(&message)
            })
        });
        let port = self.ssh_port;
        callbacks.certificate_check(|cert, host| {
            // TLS certificates: libgit2's own verification decides (it stays on).
            let Some(hostkey) = cert.as_hostkey() else {
                return Ok(CertificateCheckStatus::CertificatePassthrough);
            };
            // No known_hosts file given: libgit2 checks ~/.ssh/known_hosts itself.
            let Some(known) = known_hosts else {
                return Ok(CertificateCheckStatus::CertificatePassthrough);
            };
            let key_type = hostkey
                .hostkey_type()
                .map(|t| t.name())
                .unwrap_or("unknown");
            let presented = PresentedKey {
                key_type,
                raw: hostkey.hostkey(),
                sha256: hostkey.hash_sha256().copied(),
            };
            match known.verify(host, port, presented) {
                Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
                Err(rejection) => {
                    let message = rejection.to_string();
                    *host_key_failure.borrow_mut() = Some(message.clone());
                    Err(git2::Error::from_str(&message))
                }
            }
        });

        let mut proxy = ProxyOptions::new();
        proxy.auto();
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(callbacks)
            .proxy_options(proxy)
            // Only what the refspecs name; other tags are no business of this source.
            .download_tags(AutotagOption::None)
            .update_fetchhead(false)
            .prune(if prune {
                FetchPrune::On
            } else {
                FetchPrune::Off
            });

        // Anonymous: the URL (which may carry a password) is never written to the
        // cache's config.
        let mut remote = repo.remote_anonymous(&self.url).map_err(|e| {
            GitError::Config(format!(
                "URL {}: {}",
                self.display_url,
                self.redact(e.message())
            ))
        })?;
        let result = remote.fetch(refspecs, Some(&mut options), Some("driftless: fetch"));
        drop(options);
        if let Some(message) = host_key_failure.into_inner() {
            return Err(GitError::HostKey {
                url: self.display_url.clone(),
                message,
            });
        }
        if let Some(message) = auth_failure.into_inner() {
            return Err(GitError::Auth {
                url: self.display_url.clone(),
                message,
            });
        }
        match result {
            Ok(()) => {
                let stats = remote.stats();
                tracing::debug!(
                    url = %self.display_url,
                    received_objects = stats.received_objects(),
                    received_bytes = stats.received_bytes(),
                    "fetched"
                );
                Ok(())
            }
            Err(e) => {
                let message = self.redact(e.message());
                let url = self.display_url.clone();
                let ssh = e.class() == ErrorClass::Ssh;
                if e.code() == ErrorCode::Auth
                    || (ssh && message.to_ascii_lowercase().contains("authenticat"))
                {
                    Err(GitError::Auth { url, message })
                } else if ssh && e.code() == ErrorCode::Certificate {
                    // libgit2's own check against ~/.ssh/known_hosts said no.
                    Err(GitError::HostKey {
                        url,
                        message: format!(
                            "{message} (checked against ~/.ssh/known_hosts; \
                             set DRIFTLESS_GIT_KNOWN_HOSTS_FILE to use another file)"
                        ),
                    })
                } else {
                    Err(GitError::Fetch { url, message })
                }
            }
        }
    }

    fn open_error(&self, e: &git2::Error) -> GitError {
        GitError::Open {
            path: self.cache_path.clone(),
            message: self.redact(e.message()),
        }
    }

    fn redact(&self, message: &str) -> String {
        let mut out = message.to_string();
        if !self.url.is_empty() {
            out = out.replace(&self.url, &self.display_url);
        }
        for s in &self.secrets {
            out = out.replace(s.as_str(), "<redacted>");
        }
        out
    }
}

/// spawn_blocking wrapper (git2 blocks).
pub async fn fetch(source: Arc<GitSource>) -> Result<Revision, GitError> {
    tokio::task::spawn_blocking(move || source.fetch())
        .await
        .map_err(|e| GitError::Task(e.to_string()))?
}

/// What the credential callback hands libgit2, decided without touching libgit2 so the
/// choice can be tested.
#[derive(Debug, PartialEq, Eq)]
enum CredChoice<'a> {
    Username(&'a str),
    UserPass {
        username: &'a str,
        password: &'a str,
    },
    SshKey {
        username: &'a str,
        private_key: &'a Path,
        passphrase: Option<&'a str>,
    },
}

impl CredChoice<'_> {
    fn into_cred(self) -> Result<Cred, git2::Error> {
        match self {
            CredChoice::Username(u) => Cred::username(u),
            CredChoice::UserPass { username, password } => {
                Cred::userpass_plaintext(username, password)
            }
            CredChoice::SshKey {
                username,
                private_key,
                passphrase,
            } => {
                // Some libssh2 builds cannot derive the public key from every private key
                // format; a `.pub` beside it (as `ssh-keygen` leaves) settles that.
                let public = private_key.with_extension("pub");
                let public = public.is_file().then_some(public);
                Cred::ssh_key(username, public.as_deref(), private_key, passphrase)
            }
        }
    }
}

const DEFAULT_USER: &str = "git";

fn choose_credential<'a>(
    auth: &'a GitAuth,
    username_from_url: Option<&'a str>,
    allowed: CredentialType,
) -> Result<CredChoice<'a>, &'static str> {
    let url_user = username_from_url.filter(|u| !u.is_empty());
    match auth {
        GitAuth::None => Err("the server asks for credentials and none are configured \
             (DRIFTLESS_GIT_TOKEN, DRIFTLESS_GIT_USERNAME/PASSWORD or DRIFTLESS_GIT_SSH_KEY_FILE)"),
        GitAuth::SshKey {
            private_key,
            passphrase,
            ..
        } => {
            let username = url_user.unwrap_or(DEFAULT_USER);
            if allowed.contains(CredentialType::SSH_KEY) {
                Ok(CredChoice::SshKey {
                    username,
                    private_key,
                    passphrase: passphrase.as_deref(),
                })
            } else if allowed.contains(CredentialType::USERNAME) {
                Ok(CredChoice::Username(username))
            } else {
                Err(
                    "an SSH key is configured but the server does not accept one (is the URL an ssh:// URL?)",
                )
            }
        }
        GitAuth::Token { username, token } => {
            let username = username.as_deref().or(url_user).unwrap_or(DEFAULT_USER);
            user_pass(allowed, username, token)
        }
        GitAuth::UserPassword { username, password } => user_pass(allowed, username, password),
    }
}

fn user_pass<'a>(
    allowed: CredentialType,
    username: &'a str,
    password: &'a str,
) -> Result<CredChoice<'a>, &'static str> {
    if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
        Ok(CredChoice::UserPass { username, password })
    } else {
        Err(
            "a token or password is configured but the server does not accept one (SSH URLs need DRIFTLESS_GIT_SSH_KEY_FILE)",
        )
    }
}

fn set_network_timeouts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: libgit2 keeps these in plain globals that its transports read when
        // they connect. This runs before the first GitSource exists, hence before any
        // fetch of this process can read them, and nothing else here uses libgit2.
        let set = unsafe {
            git2::opts::set_server_connect_timeout_in_milliseconds(CONNECT_TIMEOUT_MS)
                .and_then(|()| git2::opts::set_server_timeout_in_milliseconds(SERVER_TIMEOUT_MS))
        };
        if let Err(e) = set {
            tracing::warn!(error = %e, "cannot set git network timeouts");
        }
    });
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

/// `repo-<hash>.git`: the hash keeps URLs apart, the name helps whoever looks at the dir.
fn cache_name(display_url: &str) -> String {
    let hash = sha2::Sha256::digest(display_url.as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    let base = display_url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("")
        .trim_end_matches(".git");
    let base: String = base
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let base = base.trim_start_matches('.');
    if base.is_empty() {
        format!("{hex}.git")
    } else {
        format!("{base}-{hex}.git")
    }
}

fn open_or_init(path: &Path) -> Result<Repository, GitError> {
    let open_error = |message: String| GitError::Open {
        path: path.to_path_buf(),
        message,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        match Repository::open_bare(path).and_then(|r| check_repo(&r).map(|()| r)) {
            Ok(repo) => {
                // A cache made before the clone was kept private (or by hand).
                if meta.permissions().mode() & 0o077 != 0
                    && let Err(e) =
                        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
                {
                    tracing::warn!(cache = %path.display(), error = %e, "cannot make the git cache private");
                }
                return Ok(repo);
            }
            Err(e) => {
                // The cache holds nothing that cannot be fetched again.
                tracing::warn!(cache = %path.display(), error = %e.message(), "git cache is unusable; recreating it");
                let removed = if meta.is_dir() {
                    std::fs::remove_dir_all(path)
                } else {
                    std::fs::remove_file(path)
                };
                removed
                    .map_err(|e| open_error(format!("cannot remove the unusable cache: {e}")))?;
            }
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| open_error(e.to_string()))?;
    }
    // The clone holds the specs, Secrets' values included: this user's alone.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(|e| open_error(e.to_string()))?;
    Repository::init_bare(path).map_err(|e| open_error(e.message().to_string()))
}

/// Opening only looks at a few files; reading every ref and resolving each to an object
/// catches the breakage an interrupted write or a full disk leaves behind.
fn check_repo(repo: &Repository) -> Result<(), git2::Error> {
    if !repo.is_bare() {
        return Err(git2::Error::from_str("not a bare repository"));
    }
    let odb = repo.odb()?;
    for reference in repo.references()? {
        let reference = reference?;
        if let Some(target) = reference.target() {
            odb.read_header(target)?;
        }
    }
    Ok(())
}

fn read_files(repo: &Repository, commit_id: Oid, path: &str) -> Result<Vec<SourceFile>, GitError> {
    let tree_error = |e: git2::Error| GitError::Tree {
        commit: commit_id.to_string(),
        message: e.message().to_string(),
    };
    let commit = repo.find_commit(commit_id).map_err(tree_error)?;
    let root = commit.tree().map_err(tree_error)?;
    let mut files = Vec::new();
    let start = if path.is_empty() {
        root.id()
    } else {
        let entry = root.get_path(Path::new(path)).map_err(|e| {
            if e.code() == ErrorCode::NotFound {
                GitError::PathNotFound {
                    path: path.to_string(),
                    commit: commit_id.to_string(),
                }
            } else {
                tree_error(e)
            }
        })?;
        match (entry.kind(), entry.filemode()) {
            (Some(ObjectType::Tree), _) => entry.id(),
            (Some(ObjectType::Blob), mode) if mode != MODE_LINK => {
                // As with a local path: a single file is a tree of one.
                let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
                let contents = read_blob_capped(repo, entry.id()).map_err(tree_error)?;
                return Ok(vec![SourceFile {
                    path: name,
                    contents,
                }]);
            }
            _ => {
                return Err(GitError::Tree {
                    commit: commit_id.to_string(),
                    message: format!("{path:?} is neither a directory nor a file"),
                });
            }
        }
    };
    let ignore = ignore_rules(repo, start).map_err(|message| GitError::Tree {
        commit: commit_id.to_string(),
        message,
    })?;
    // Iterative: a tree nested thousands deep must not overflow the stack.
    let mut pending = vec![(start, String::new())];
    while let Some((tree_id, prefix)) = pending.pop() {
        let tree = repo.find_tree(tree_id).map_err(tree_error)?;
        for entry in tree.iter() {
            let name = String::from_utf8_lossy(entry.name_bytes());
            if name.starts_with('.') {
                continue;
            }
            let child = if prefix.is_empty() {
                name.into_owned()
            } else {
                format!("{prefix}/{name}")
            };
            let is_tree = entry.kind() == Some(ObjectType::Tree);
            if ignore.ignores(&child, is_tree) {
                continue;
            }
            match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Tree), _) => pending.push((entry.id(), child)),
                // Symlinks could point anywhere (even outside the spec dir); submodules
                // are other repositories.
                (Some(ObjectType::Blob), mode) if mode != MODE_LINK && is_spec_file(&child) => {
                    let contents = read_blob_capped(repo, entry.id()).map_err(tree_error)?;
                    files.push(SourceFile {
                        path: child,
                        contents,
                    });
                }
                _ => {}
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

const MODE_LINK: i32 = 0o120000;

/// The `.driftlessignore` at the spec root `tree`, if it has one (as for a directory).
fn ignore_rules(repo: &Repository, tree: Oid) -> Result<IgnoreRules, String> {
    let tree = repo.find_tree(tree).map_err(|e| e.message().to_string())?;
    let Some(entry) = tree.get_name(IGNORE_FILE) else {
        return Ok(IgnoreRules::default());
    };
    if entry.kind() != Some(ObjectType::Blob) || entry.filemode() == MODE_LINK {
        return Ok(IgnoreRules::default());
    }
    let bytes = read_blob_capped(repo, entry.id()).map_err(|e| e.message().to_string())?;
    IgnoreRules::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| e.to_string())
}

/// The blob, or its first `MAX_FILE_BYTES + 1` bytes when it is larger: enough for the
/// spec loader to report it as too large.
fn read_blob_capped(repo: &Repository, id: Oid) -> Result<Vec<u8>, git2::Error> {
    let odb = repo.odb()?;
    let (size, _) = odb.read_header(id)?;
    if size <= MAX_FILE_BYTES {
        return Ok(repo.find_blob(id)?.content().to_vec());
    }
    let limit = MAX_FILE_BYTES + 1;
    // Only loose objects can be streamed; a packed one is inflated whole by libgit2.
    if let Ok((reader, _, _)) = odb.reader(id) {
        let mut buf = Vec::with_capacity(limit);
        if reader.take(limit as u64).read_to_end(&mut buf).is_ok() && buf.len() == limit {
            return Ok(buf);
        }
    }
    let blob = repo.find_blob(id)?;
    Ok(blob.content()[..limit.min(blob.size())].to_vec())
}

/// `scheme://user:password@host/…` → `scheme://host/…`; scp-like `git@host:path` is left
/// alone (it cannot carry a password, and the user is part of the address).
fn strip_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{head}{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Whether a URL carries credentials: a password in its userinfo
/// (`scheme://user:password@host/…`), or any userinfo of an http(s) URL, where a lone
/// "user" is often a token (`https://TOKEN@host/…`).
pub fn url_has_credentials(url: &str) -> bool {
    let http = url.starts_with("https://") || url.starts_with("http://");
    url_password(url).is_some() || (http && strip_userinfo(url) != url)
}

fn url_password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then(|| password.to_string())
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The port of an `ssh://` URL (22 when absent, and for scp-like addresses).
fn ssh_port(url: &str) -> u16 {
    let Some(rest) = url
        .strip_prefix("ssh://")
        .or_else(|| url.strip_prefix("git+ssh://"))
    else {
        return 22;
    };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // `[::1]:2222`: the port follows the bracket.
    let after_host = match host_port.rfind(']') {
        Some(i) => &host_port[i + 1..],
        None => host_port,
    };
    after_host
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(22)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        move |k| map.get(k).map(|v| v.to_string())
    }

    fn config_error(r: Result<GitAuth, GitError>) -> String {
        match r {
            Err(GitError::Config(m)) => m,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn from_env_nothing_is_anonymous() {
        assert_eq!(GitAuth::from_env(env(&[])).unwrap(), GitAuth::None);
        // Empty counts as unset.
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN, ""), (ENV_USERNAME, "")])).unwrap(),
            GitAuth::None
        );
    }

    #[test]
    fn from_env_token_inline_and_from_file() {
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN, "tok-123")])).unwrap(),
            GitAuth::Token {
                username: None,
                token: "tok-123".into()
            }
        );
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN, "tok-123"), (ENV_USERNAME, "bot")])).unwrap(),
            GitAuth::Token {
                username: Some("bot".into()),
                token: "tok-123".into()
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "tok-from-file\n").unwrap();
        let file = file.to_str().unwrap();
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN_FILE, file)])).unwrap(),
            GitAuth::Token {
                username: None,
                token: "tok-from-file".into()
            }
        );
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_TOKEN, "x"),
            (ENV_TOKEN_FILE, file),
        ])));
        assert!(m.contains(ENV_TOKEN_FILE), "{m}");
        let missing = dir.path().join("nope");
        let m = config_error(GitAuth::from_env(env(&[(
            ENV_TOKEN_FILE,
            missing.to_str().unwrap(),
        )])));
        assert!(m.contains("nope"), "{m}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let m = config_error(GitAuth::from_env(env(&[(
            ENV_TOKEN_FILE,
            empty.to_str().unwrap(),
        )])));
        assert!(m.contains("empty"), "{m}");
    }

    #[test]
    fn from_env_user_password() {
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_USERNAME, "alice"), (ENV_PASSWORD, "pw")])).unwrap(),
            GitAuth::UserPassword {
                username: "alice".into(),
                password: "pw".into()
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "pw-file\r\n").unwrap();
        assert_eq!(
            GitAuth::from_env(env(&[
                (ENV_USERNAME, "alice"),
                (ENV_PASSWORD_FILE, file.to_str().unwrap())
            ]))
            .unwrap(),
            GitAuth::UserPassword {
                username: "alice".into(),
                password: "pw-file".into()
            }
        );
        let m = config_error(GitAuth::from_env(env(&[(ENV_PASSWORD, "pw")])));
        assert!(m.contains(ENV_USERNAME), "{m}");
        let m = config_error(GitAuth::from_env(env(&[(ENV_USERNAME, "alice")])));
        assert!(m.contains(ENV_PASSWORD), "{m}");
    }

    #[test]
    fn from_env_ssh_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("identity");
        let kh = dir.path().join("known_hosts");
        std::fs::write(&key, "key").unwrap();
        std::fs::write(&kh, "").unwrap();
        let (key_s, kh_s) = (key.to_str().unwrap(), kh.to_str().unwrap());
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_SSH_KEY_FILE, key_s)])).unwrap(),
            GitAuth::SshKey {
                private_key: key.clone(),
                passphrase: None,
                known_hosts: None
            }
        );
        assert_eq!(
            GitAuth::from_env(env(&[
                (ENV_SSH_KEY_FILE, key_s),
                (ENV_SSH_KEY_PASSPHRASE, "phrase"),
                (ENV_KNOWN_HOSTS_FILE, kh_s)
            ]))
            .unwrap(),
            GitAuth::SshKey {
                private_key: key.clone(),
                passphrase: Some("phrase".into()),
                known_hosts: Some(kh.clone())
            }
        );
        let missing = dir.path().join("missing_known_hosts");
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_SSH_KEY_FILE, key_s),
            (ENV_KNOWN_HOSTS_FILE, missing.to_str().unwrap()),
        ])));
        assert!(m.contains("missing_known_hosts"), "{m}");
        let m = config_error(GitAuth::from_env(env(&[(ENV_KNOWN_HOSTS_FILE, kh_s)])));
        assert!(m.contains(ENV_SSH_KEY_FILE), "{m}");
        let m = config_error(GitAuth::from_env(env(&[(ENV_SSH_KEY_PASSPHRASE, "p")])));
        assert!(m.contains(ENV_SSH_KEY_FILE), "{m}");
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_SSH_KEY_FILE, key_s),
            (ENV_USERNAME, "u"),
        ])));
        assert!(m.contains(ENV_USERNAME), "{m}");
    }

    #[test]
    fn from_env_rejects_two_kinds_without_echoing_secrets() {
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_TOKEN, "tok-secret"),
            (ENV_USERNAME, "u"),
            (ENV_PASSWORD, "pw-secret"),
        ])));
        assert!(m.contains("a token and a password"), "{m}");
        assert!(!m.contains("tok-secret") && !m.contains("pw-secret"), "{m}");
    }

    #[test]
    fn debug_redacts_secrets() {
        let all = [
            GitAuth::Token {
                username: Some("bot".into()),
                token: "tok-secret".into(),
            },
            GitAuth::UserPassword {
                username: "alice".into(),
                password: "pw-secret".into(),
            },
            GitAuth::SshKey {
                private_key: "/keys/id".into(),
                passphrase: Some("phrase-secret".into()),
                known_hosts: Some("/keys/kh".into()),
            },
        ];
        for auth in all {
            let text = format!("{auth:?} {auth:#?}");
            assert!(!text.contains("secret"), "{text}");
            assert!(text.contains("<redacted>"), "{text}");
        }
        let cfg = GitConfig {
            url: "https://bob:url-secret@example.com/r.git".into(),
            reference: GitRef::Branch("main".into()),
            path: None,
            cache_dir: "/cache".into(),
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
    fn credential_choice_follows_auth_and_allowed_types() {
        let token = GitAuth::Token {
            username: None,
            token: "t".into(),
        };
        let plain = CredentialType::USER_PASS_PLAINTEXT;
        assert_eq!(
            choose_credential(&token, None, plain),
            Ok(CredChoice::UserPass {
                username: "git",
                password: "t"
            })
        );
        // A user in the URL is kept when no username is configured.
        assert_eq!(
            choose_credential(&token, Some("x-access-token"), plain),
            Ok(CredChoice::UserPass {
                username: "x-access-token",
                password: "t"
            })
        );
        let named = GitAuth::Token {
            username: Some("bot".into()),
            token: "t".into(),
        };
        assert_eq!(
            choose_credential(&named, Some("other"), plain),
            Ok(CredChoice::UserPass {
                username: "bot",
                password: "t"
            })
        );
        assert!(choose_credential(&token, None, CredentialType::SSH_KEY).is_err());

        let key = GitAuth::SshKey {
            private_key: "/k/id".into(),
            passphrase: Some("p".into()),
            known_hosts: None,
        };
        assert_eq!(
            choose_credential(&key, None, CredentialType::USERNAME),
            Ok(CredChoice::Username("git"))
        );
        assert_eq!(
            choose_credential(
                &key,
                Some("deploy"),
                CredentialType::SSH_KEY | CredentialType::USER_PASS_PLAINTEXT
            ),
            Ok(CredChoice::SshKey {
                username: "deploy",
                private_key: Path::new("/k/id"),
                passphrase: Some("p")
            })
        );
        assert!(choose_credential(&key, None, plain).is_err());
        assert!(choose_credential(&GitAuth::None, None, plain).is_err());

        // And libgit2 accepts what is chosen.
        let cred = CredChoice::UserPass {
            username: "git",
            password: "t",
        }
        .into_cred()
        .unwrap();
        assert_eq!(cred.credtype(), CredentialType::USER_PASS_PLAINTEXT.bits());
        let cred = CredChoice::Username("git").into_cred().unwrap();
        assert_eq!(cred.credtype(), CredentialType::USERNAME.bits());
        let cred = CredChoice::SshKey {
            username: "git",
            private_key: Path::new("/k/id"),
            passphrase: None,
        }
        .into_cred()
        .unwrap();
        assert_eq!(cred.credtype(), CredentialType::SSH_KEY.bits());
    }

    #[test]
    fn urls_lose_their_userinfo() {
        assert_eq!(
            strip_userinfo("https://user:pw@example.com/org/r.git"),
            "https://example.com/org/r.git"
        );
        assert_eq!(
            strip_userinfo("https://tok@example.com:8443/r.git?x=a@b"),
            "https://example.com:8443/r.git?x=a@b"
        );
        assert_eq!(
            strip_userinfo("ssh://git@example.com/r.git"),
            "ssh://example.com/r.git"
        );
        assert_eq!(
            strip_userinfo("git@example.com:org/r.git"),
            "git@example.com:org/r.git"
        );
        assert_eq!(strip_userinfo("file:///srv/r.git"), "file:///srv/r.git");
        assert_eq!(
            url_password("https://user:p%40ss@example.com/r.git").as_deref(),
            Some("p%40ss")
        );
        assert_eq!(percent_decode("p%40ss%2"), "p@ss%2");
        assert_eq!(url_password("https://user@example.com/r.git"), None);
        assert!(url_has_credentials("https://user:pw@example.com/r.git"));
        assert!(url_has_credentials("https://ghp_token@example.com/r.git"));
        assert!(url_has_credentials("ssh://git:pw@example.com/r.git"));
        assert!(!url_has_credentials("ssh://git@example.com/r.git"));
        assert!(!url_has_credentials("git@example.com:r.git"));
        assert!(!url_has_credentials("https://example.com/r.git?x=a@b"));
        assert_eq!(url_password("git@example.com:r.git"), None);
    }

    #[test]
    fn redaction_covers_the_url_and_every_secret() {
        let cache = tempfile::tempdir().unwrap();
        let source = GitSource::open(GitConfig {
            url: "https://bob:p%40ss@example.com/r.git".into(),
            reference: GitRef::Branch("main".into()),
            path: None,
            cache_dir: cache.path().into(),
            auth: GitAuth::Token {
                username: None,
                token: "tok-123".into(),
            },
        })
        .unwrap();
        let text = source
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
            auth: GitAuth::None,
        })
        .unwrap();
        assert_eq!(source.cache_path(), path);
        assert_eq!(mode(&path), 0o700);
    }

    #[test]
    fn ssh_ports() {
        assert_eq!(ssh_port("ssh://git@example.com:2222/r.git"), 2222);
        assert_eq!(ssh_port("ssh://example.com/r.git"), 22);
        assert_eq!(ssh_port("ssh://git@[::1]:2200/r.git"), 2200);
        assert_eq!(ssh_port("ssh://[::1]/r.git"), 22);
        assert_eq!(ssh_port("git@example.com:org/r.git"), 22);
        assert_eq!(ssh_port("https://example.com:8443/r.git"), 22);
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
    fn cache_names_differ_per_url_and_ignore_credentials() {
        let a = cache_name(&strip_userinfo("https://u:p@example.com/org/shop.git"));
        let b = cache_name(&strip_userinfo("https://example.com/org/shop.git"));
        let c = cache_name("https://example.com/other/shop.git");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.starts_with("shop-") && a.ends_with(".git"), "{a}");
        assert!(cache_name("file:///").ends_with(".git"));
        assert!(!cache_name("https://example.com/../..").contains('/'));
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
