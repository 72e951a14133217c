//! Fetching the configured ref into the bare cache and resolving it to a commit.

use std::sync::{Once, PoisonError};

use git2::{
    AutotagOption, ErrorClass, ErrorCode, FetchOptions, FetchPrune, Oid, ProxyOptions, Repository,
};

use super::callbacks::{Refusals, remote_callbacks};
use super::{GitAuth, GitError, GitRef, GitSource, KnownHosts, tree};
use crate::source::{Revision, Signatures};

/// libgit2 waits forever by default; a stalled server would then hold the source's lock
/// and starve every later sync.
const CONNECT_TIMEOUT_MS: i32 = 30_000;
const SERVER_TIMEOUT_MS: i32 = 120_000;

/// Where fetched refs land; kept apart from `refs/heads` so nothing in the cache looks
/// like a branch someone could have meant to commit to.
const REF_NS: &str = "refs/driftless";

pub(super) fn set_network_timeouts() {
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

impl GitSource {
    /// Fetches the configured ref from the remote (force refspec: a force-push is simply the new state), resolves it to a commit, reads the spec files of that commit under `path`. Blocking.
    pub fn fetch(&self) -> Result<Revision, GitError> {
        let repo = self.repo.lock().unwrap_or_else(PoisonError::into_inner);
        let known_hosts = self.load_known_hosts()?;
        let commit = match &self.reference {
            GitRef::Branch(b) => self.fetch_ref(&repo, &format!("refs/heads/{b}"), &known_hosts)?,
            GitRef::Tag(t) => self.fetch_ref(&repo, &format!("refs/tags/{t}"), &known_hosts)?,
            GitRef::Commit(c) => self.fetch_commit(&repo, c, &known_hosts)?,
        };
        let signatures = self.verify_signature(&repo, commit)?;
        let (files, unread) = tree::read_files(&repo, commit, &self.path)?;
        // Tools read files themselves: the commit is checked out, once, where only
        // driftless looks (never in anyone's work tree).
        let checkout = if (self.needs_checkout)(&files) {
            Some(super::checkout::materialise(
                &repo,
                commit,
                &self.cache_path,
            )?)
        } else {
            None
        };
        tracing::debug!(
            url = %self.display_url,
            reference = %self.reference,
            commit = %commit,
            files = files.len(),
            "read git revision"
        );
        Ok(Revision {
            id: Some(commit.to_string()),
            files,
            unread,
            checkout: checkout.map(|repo_dir| crate::source::Checkout {
                root: if self.path.is_empty() {
                    repo_dir.clone()
                } else {
                    repo_dir.join(&self.path)
                },
                repo: repo_dir,
                urls: vec![super::strip_userinfo(&self.url)],
                revisions: {
                    let followed = match &self.reference {
                        super::GitRef::Branch(n) | super::GitRef::Tag(n) => n.clone(),
                        super::GitRef::Commit(c) => c.clone(),
                    };
                    vec![followed, commit.to_string()]
                },
            }),
            origin: None,
            signatures,
        })
    }

    /// `--verify-commits`: the followed tag's signature, or else the commit's, checked
    /// before anything of the revision is read. The trusted keys are read each time. A
    /// tag's commit is checked too, for what the tree may ask (Flux's `TagAndHEAD`),
    /// without holding the revision when it does not pass.
    fn verify_signature(&self, repo: &Repository, commit: Oid) -> Result<Signatures, GitError> {
        if self.verify.is_empty() {
            return Ok(Signatures::Unchecked);
        }
        let trusted = super::verify::Trusted::read(&self.verify)?;
        let unverified = |source| GitError::Unverified {
            commit: commit.to_string(),
            source,
        };
        let named = |s: super::verify::Signer| format!("{} ({})", s.principals, s.key);
        let signatures = match &self.reference {
            GitRef::Tag(t) => {
                let landing = format!("{REF_NS}/incoming/tags/{t}");
                let target = repo
                    .find_reference(&landing)
                    .ok()
                    .and_then(|r| r.target())
                    .unwrap_or(commit);
                let tag =
                    super::verify::verify_tag(repo, t, target, &trusted).map_err(unverified)?;
                Signatures::Verified {
                    commit: super::verify::verify_commit(repo, commit, &trusted)
                        .ok()
                        .map(named),
                    tag: Some(named(tag)),
                }
            }
            _ => Signatures::Verified {
                commit: Some(named(
                    super::verify::verify_commit(repo, commit, &trusted).map_err(unverified)?,
                )),
                tag: None,
            },
        };
        if let Signatures::Verified { commit: c, tag } = &signatures {
            let signer = tag.as_ref().or(c.as_ref()).map_or("", String::as_str);
            tracing::debug!(commit = %commit, signer, "signature verified");
        }
        Ok(signatures)
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
                self.redactor.redact(e.message())
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
        let refusals = Refusals::default();
        let mut proxy = ProxyOptions::new();
        proxy.auto();
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(remote_callbacks(self, known_hosts.as_ref(), &refusals))
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
                self.redactor.redact(e.message())
            ))
        })?;
        let result = remote.fetch(refspecs, Some(&mut options), Some("driftless: fetch"));
        drop(options);
        if let Some(message) = refusals.host_key.into_inner() {
            return Err(GitError::HostKey {
                url: self.display_url.clone(),
                message,
            });
        }
        if let Some(message) = refusals.auth.into_inner() {
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
                let message = self.redactor.redact(e.message());
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
            message: self.redactor.redact(e.message()),
        }
    }
}
