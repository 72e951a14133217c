//! The git source against real repositories: built with the `git` CLI in temp dirs and
//! served through `file://`, `git daemon` on loopback, and smart HTTP (`git http-backend`
//! behind a tiny HTTP server that checks Basic auth).

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use driftless::source::Revision;
use driftless::source::git::{GitAuth, GitConfig, GitError, GitRef, GitSource};
use driftless::spec::MAX_FILE_BYTES;
use support::{GitDaemon, GitHttp, basic, git};
use tempfile::TempDir;

/// A working repository to commit specs in.
struct Work {
    dir: TempDir,
}

impl Work {
    fn new() -> Work {
        let dir = TempDir::new().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        Work { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn url(&self) -> String {
        format!("file://{}", self.path().display())
    }

    fn write(&self, rel: &str, contents: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
    }

    fn remove(&self, rel: &str) {
        std::fs::remove_file(self.path().join(rel)).unwrap();
    }

    fn commit(&self, message: &str) -> String {
        git(self.path(), &["add", "-A"]);
        git(
            self.path(),
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        git(self.path(), &["rev-parse", "HEAD"])
    }

    fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }
}

fn open(url: &str, reference: GitRef, path: Option<&str>, cache: &Path) -> GitSource {
    open_with(url, reference, path, cache, GitAuth::None)
}

fn open_with(
    url: &str,
    reference: GitRef,
    path: Option<&str>,
    cache: &Path,
    auth: GitAuth,
) -> GitSource {
    GitSource::open(GitConfig {
        url: url.to_string(),
        reference,
        path: path.map(str::to_string),
        cache_dir: cache.to_path_buf(),
        needs_checkout: driftless::hydrate::needs_checkout,
        verify: Vec::new(),
        auth,
    })
    .unwrap()
}

fn branch(b: &str) -> GitRef {
    GitRef::Branch(b.to_string())
}

fn paths(rev: &Revision) -> Vec<&str> {
    rev.files.iter().map(|f| f.path.as_str()).collect()
}

fn content<'a>(rev: &'a Revision, path: &str) -> &'a str {
    let f = rev
        .files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} not in {:?}", paths(rev)));
    std::str::from_utf8(&f.contents).unwrap()
}

/// Runs a fetch on its own thread so a hang fails the test instead of stalling it.
fn fetch_bounded(source: GitSource, limit: Duration) -> Result<Revision, GitError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(source.fetch());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("fetch did not finish within {limit:?}"))
}

/// Objects in a repository: (loose objects, packs, objects in packs).
fn object_counts(repo: &Path) -> (u64, u64, u64) {
    let out = git(repo, &["count-objects", "-v"]);
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {out}"))
    };
    (field("count:"), field("packs:"), field("in-pack:"))
}

// ---------------------------------------------------------------------------------------
// file:// URLs

fn shop(image: &str) -> String {
    format!("[elasticweb.shop]\nimage = \"{image}\"\nsingle-pod-qps = 100\ntotal-qps = 200\n")
}

#[tokio::test]
async fn file_url_follows_commits_changes_and_deletions() {
    let work = Work::new();
    let cache = TempDir::new().unwrap();
    work.write("app.toml", &shop("nginx:1"));
    work.write("other.toml", "# other\n");
    let first = work.commit("first");

    let source = Arc::new(open(&work.url(), branch("main"), None, cache.path()));
    // Through the async wrapper, as the daemon calls it.
    let rev = driftless::source::git::fetch(source.clone()).await.unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), first);
    assert_eq!(rev.id.as_deref().unwrap().len(), 40);
    assert_eq!(paths(&rev), ["app.toml", "other.toml"]);
    assert_eq!(content(&rev, "app.toml"), shop("nginx:1"));

    work.write("app.toml", &shop("nginx:2"));
    let second = work.commit("second");
    let rev = driftless::source::git::fetch(source.clone()).await.unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), second);
    assert_eq!(content(&rev, "app.toml"), shop("nginx:2"));

    work.remove("other.toml");
    let third = work.commit("third");
    let rev = source.fetch().unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), third);
    assert_eq!(paths(&rev), ["app.toml"]);

    // The files read from git are what the spec loader takes.
    let tree = driftless::spec::parse_files(&rev.files).unwrap();
    assert_eq!(tree.specs.len(), 1);
    assert_eq!(tree.specs[0].at.file, "app.toml");
    assert!(source.display_url().starts_with("file://"));
}

#[test]
fn file_url_tree_rules_and_path() {
    let work = Work::new();
    let cache = TempDir::new().unwrap();
    work.write("top.toml", "a = 1\n");
    work.write("README.md", "not a spec\n");
    work.write("notes.toml.bak", "not a spec\n");
    work.write(".hidden.toml", "hidden\n");
    work.write(".github/ci.toml", "hidden dir\n");
    work.write("specs/b.toml", "b = 1\n");
    work.write("specs/a.toml", "a = 1\n");
    work.write("specs/prod/deep/x.toml", "x = 1\n");
    work.write("specs/prod/.secret/y.toml", "hidden\n");
    work.write("specs/prod/z.yaml", "kind: yes\n");
    work.write("specs/prod/z.yaml.orig", "no\n");
    std::os::unix::fs::symlink("a.toml", work.path().join("specs/link.toml")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", work.path().join("specs/passwd.toml")).unwrap();
    let commit = work.commit("tree");
    // The symlinks are in the commit, as links.
    let ls = work.git(&["ls-tree", "HEAD", "specs/"]);
    assert!(
        ls.contains("120000 blob") && ls.contains("specs/link.toml"),
        "{ls}"
    );

    let rev = open(&work.url(), branch("main"), None, cache.path())
        .fetch()
        .unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), commit);
    assert_eq!(
        paths(&rev),
        [
            "specs/a.toml",
            "specs/b.toml",
            "specs/prod/deep/x.toml",
            "specs/prod/z.yaml",
            "top.toml"
        ]
    );

    for path in ["specs", "/specs/", "./specs"] {
        let rev = open(&work.url(), branch("main"), Some(path), cache.path())
            .fetch()
            .unwrap();
        assert_eq!(
            paths(&rev),
            ["a.toml", "b.toml", "prod/deep/x.toml", "prod/z.yaml"],
            "{path}"
        );
        assert_eq!(content(&rev, "prod/deep/x.toml"), "x = 1\n");
    }
    let rev = open(
        &work.url(),
        branch("main"),
        Some("specs/prod"),
        cache.path(),
    )
    .fetch()
    .unwrap();
    assert_eq!(paths(&rev), ["deep/x.toml", "z.yaml"]);

    // A path to one file is a tree of that file, as for a local path.
    let rev = open(
        &work.url(),
        branch("main"),
        Some("specs/a.toml"),
        cache.path(),
    )
    .fetch()
    .unwrap();
    assert_eq!(paths(&rev), ["a.toml"]);

    match open(
        &work.url(),
        branch("main"),
        Some("nope/specs"),
        cache.path(),
    )
    .fetch()
    {
        Err(e @ GitError::PathNotFound { .. }) => {
            assert!(e.to_string().contains("nope/specs"), "{e}");
            assert_eq!(e.metric_label(), "path_not_found");
        }
        other => panic!("expected PathNotFound, got {other:?}"),
    }
    // A path that is a symlink is not followed.
    assert!(matches!(
        open(
            &work.url(),
            branch("main"),
            Some("specs/link.toml"),
            cache.path()
        )
        .fetch(),
        Err(GitError::Tree { .. })
    ));
    // Leaving the repository is refused before anything is fetched.
    assert!(matches!(
        GitSource::open(GitConfig {
            url: work.url(),
            reference: branch("main"),
            path: Some("../x".into()),
            cache_dir: cache.path().into(),
            needs_checkout: driftless::hydrate::needs_checkout,
            verify: Vec::new(),
            auth: GitAuth::None,
        }),
        Err(GitError::Config(_))
    ));
}

/// YAML manifests are read from git as from a directory, and the spec root's
/// `.driftlessignore` keeps what it matches unread (a file, a directory, a glob).
#[test]
fn file_url_reads_yaml_and_honours_driftlessignore() {
    let work = Work::new();
    let cache = TempDir::new().unwrap();
    work.write("specs/app.toml", "a = 1\n");
    work.write("specs/bundle/crd.yaml", "apiVersion: v1\n");
    work.write("specs/bundle/kustomization.yaml", "resources: []\n");
    work.write("specs/docs/example.yml", "not read\n");
    work.write("specs/chart/Chart.yaml", "name: x\n");
    work.write("specs/x.yml", "apiVersion: v1\n");
    work.write(
        "specs/.driftlessignore",
        "# kustomize and Helm files, and the docs\nkustomization.yaml\n/docs/\nChart.*\n",
    );
    // A .driftlessignore elsewhere than the spec root is not read.
    work.write(".driftlessignore", "*.toml\n");
    work.commit("yaml");
    let rev = open(&work.url(), branch("main"), Some("specs"), cache.path())
        .fetch()
        .unwrap();
    assert_eq!(paths(&rev), ["app.toml", "bundle/crd.yaml", "x.yml"]);

    // An ignore file that is not valid gitignore syntax refuses the revision.
    work.write("specs/.driftlessignore", "ok.txt\n[z-a]\n");
    work.commit("bad ignore");
    match open(&work.url(), branch("main"), Some("specs"), cache.path()).fetch() {
        Err(e @ GitError::Tree { .. }) => {
            assert!(e.to_string().contains(".driftlessignore:2:1"), "{e}")
        }
        other => panic!("expected a tree error, got {other:?}"),
    }
}

/// The tree-level settings file is read at the spec root (hidden, unlike other files),
/// and only there: one in a subdirectory, or above the spec path, is not.
#[test]
fn file_url_reads_the_settings_file_at_the_spec_root_only() {
    let work = Work::new();
    let cache = TempDir::new().unwrap();
    work.write("specs/app.yaml", "apiVersion: v1\n");
    work.write("specs/.driftless.toml", "[vars]\ncluster = \"staging\"\n");
    work.write("specs/sub/.driftless.toml", "[vars]\nx = \"y\"\n");
    work.write("specs/.hidden.yaml", "not read\n");
    work.write(".driftless.toml", "[vars]\nabove = \"y\"\n");
    work.commit("settings");
    let rev = open(&work.url(), branch("main"), Some("specs"), cache.path())
        .fetch()
        .unwrap();
    assert_eq!(paths(&rev), [".driftless.toml", "app.yaml"]);
    assert!(content(&rev, ".driftless.toml").contains("staging"));
}

#[test]
fn file_url_oversized_file_is_returned_capped() {
    let work = Work::new();
    let cache = TempDir::new().unwrap();
    let big = "#".repeat(MAX_FILE_BYTES + 1000);
    work.write("big.toml", &big);
    work.write("small.toml", &shop("nginx:1"));
    work.commit("big");

    let rev = open(&work.url(), branch("main"), None, cache.path())
        .fetch()
        .unwrap();
    assert_eq!(paths(&rev), ["big.toml", "small.toml"]);
    let big_file = &rev.files[0];
    assert_eq!(big_file.contents.len(), MAX_FILE_BYTES + 1);
    assert!(big_file.contents.iter().all(|&b| b == b'#'));
    let errors = driftless::spec::parse_files(&rev.files).unwrap_err();
    assert_eq!(errors.0.len(), 1);
    assert_eq!(errors.0[0].at.file, "big.toml");
    assert!(errors.0[0].message.contains("larger than"), "{errors}");
}

#[test]
fn file_url_unknown_branch_is_ref_not_found() {
    let work = Work::new();
    let cache = TempDir::new().unwrap();
    work.write("a.toml", "a = 1\n");
    work.commit("a");
    match open(&work.url(), branch("nope"), None, cache.path()).fetch() {
        Err(e @ GitError::RefNotFound { .. }) => {
            assert!(e.to_string().contains("branch nope"), "{e}");
            assert_eq!(e.metric_label(), "ref_not_found");
        }
        other => panic!("expected RefNotFound, got {other:?}"),
    }
}

#[test]
fn unreachable_remote_is_a_fetch_error() {
    let cache = TempDir::new().unwrap();
    let missing = TempDir::new().unwrap();
    let url = format!("file://{}/not-a-repo", missing.path().display());
    match open(&url, branch("main"), None, cache.path()).fetch() {
        Err(e @ GitError::Fetch { .. }) => assert_eq!(e.metric_label(), "fetch"),
        other => panic!("expected a fetch error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// git daemon on loopback

#[test]
fn daemon_force_push_and_deleted_branch() {
    let daemon = GitDaemon::start();
    let (url, _) = daemon.create("repo.git");
    let work = Work::new();
    work.write("specs/app.toml", "v = 1\n");
    let first = work.commit("one");
    work.git(&["push", "-q", &url, "main:prod"]);

    let cache = TempDir::new().unwrap();
    let source = open(&url, branch("prod"), Some("specs"), cache.path());
    let rev = source.fetch().unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), first);
    assert_eq!(content(&rev, "app.toml"), "v = 1\n");

    // Rewrite history: the new commit does not descend from the one fetched.
    work.write("specs/app.toml", "v = 2\n");
    work.git(&["add", "-A"]);
    work.git(&["commit", "-q", "--amend", "-m", "one, rewritten"]);
    let rewritten = work.git(&["rev-parse", "HEAD"]);
    assert_ne!(rewritten, first);
    work.git(&["push", "-q", "--force", &url, "main:prod"]);
    let rev = source.fetch().unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), rewritten);
    assert_eq!(content(&rev, "app.toml"), "v = 2\n");

    // Deleted on the remote: not found, although the cache still has its last state.
    work.git(&["push", "-q", &url, "--delete", "prod"]);
    match source.fetch() {
        Err(GitError::RefNotFound { reference, url: u }) => {
            assert_eq!(reference, "branch prod");
            assert_eq!(u, url);
        }
        other => panic!("expected RefNotFound, got {other:?}"),
    }
    // And when it comes back, it is followed again.
    work.git(&["push", "-q", &url, "main:prod"]);
    assert_eq!(source.fetch().unwrap().id.unwrap(), rewritten);
}

#[test]
fn daemon_tags_and_commits() {
    let daemon = GitDaemon::start();
    let (url, _) = daemon.create("repo.git");
    let work = Work::new();
    work.write("a.toml", "v = 1\n");
    let c1 = work.commit("one");
    work.git(&["tag", "v1"]);
    work.write("a.toml", "v = 2\n");
    let c2 = work.commit("two");
    work.git(&["tag", "-a", "-m", "release 2", "v2"]);
    work.write("a.toml", "v = 3\n");
    let c3 = work.commit("three");
    work.git(&["push", "-q", &url, "main", "v1", "v2"]);

    let cache = TempDir::new().unwrap();
    let fetch = |reference: GitRef| open(&url, reference, None, cache.path()).fetch();

    let rev = fetch(GitRef::Tag("v1".into())).unwrap();
    assert_eq!(
        (rev.id.as_deref().unwrap(), content(&rev, "a.toml")),
        (c1.as_str(), "v = 1\n")
    );
    // An annotated tag resolves to its commit, not to the tag object.
    let rev = fetch(GitRef::Tag("refs/tags/v2".into())).unwrap();
    assert_eq!(
        (rev.id.as_deref().unwrap(), content(&rev, "a.toml")),
        (c2.as_str(), "v = 2\n")
    );
    assert_eq!(fetch(branch("main")).unwrap().id.unwrap(), c3);

    // A commit that no ref points at directly, in full and abbreviated.
    let fresh = TempDir::new().unwrap();
    let rev = open(&url, GitRef::Commit(c2.clone()), None, fresh.path())
        .fetch()
        .unwrap();
    assert_eq!(
        (rev.id.as_deref().unwrap(), content(&rev, "a.toml")),
        (c2.as_str(), "v = 2\n")
    );
    let fresh = TempDir::new().unwrap();
    let rev = open(
        &url,
        GitRef::Commit(c1[..12].to_uppercase()),
        None,
        fresh.path(),
    )
    .fetch()
    .unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), c1);

    let missing = "0123456789abcdef0123456789abcdef01234567";
    assert!(matches!(
        fetch(GitRef::Commit(missing.into())),
        Err(GitError::RefNotFound { .. })
    ));
    assert!(matches!(
        fetch(GitRef::Tag("v9".into())),
        Err(GitError::RefNotFound { .. })
    ));
    // A tag deleted on the remote is gone, whatever the cache holds.
    work.git(&["push", "-q", &url, "--delete", "v1"]);
    assert!(matches!(
        fetch(GitRef::Tag("v1".into())),
        Err(GitError::RefNotFound { .. })
    ));
}

#[test]
fn daemon_commit_no_ref_reaches_needs_a_server_that_serves_it() {
    let daemon = GitDaemon::start();
    let (url, bare) = daemon.create("repo.git");
    let work = Work::new();
    work.write("a.toml", "v = 1\n");
    let orphaned = work.commit("one");
    work.git(&["push", "-q", &url, "main"]);
    work.git(&["commit", "-q", "--amend", "-m", "one, again"]);
    work.git(&["push", "-q", "--force", &url, "main"]);
    // Still in the server's objects, but no ref leads to it any more.
    git(&bare, &["cat-file", "-e", &orphaned]);

    let cache = TempDir::new().unwrap();
    let pinned = open(&url, GitRef::Commit(orphaned.clone()), None, cache.path());
    assert!(matches!(pinned.fetch(), Err(GitError::RefNotFound { .. })));

    git(&bare, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    let rev = pinned.fetch().unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), orphaned);
    assert_eq!(content(&rev, "a.toml"), "v = 1\n");
}

#[test]
fn daemon_cache_is_reused_across_opens() {
    let daemon = GitDaemon::start();
    let (url, _) = daemon.create("repo.git");
    let work = Work::new();
    for i in 0..20 {
        work.write(&format!("d{i}/s.toml"), &format!("v = {i}\n"));
    }
    let first = work.commit("one");
    work.git(&["push", "-q", &url, "main"]);

    let cache = TempDir::new().unwrap();
    let source = open(&url, branch("main"), None, cache.path());
    let cache_path = source.cache_path().to_path_buf();
    assert!(cache_path.starts_with(cache.path()));
    assert_eq!(source.fetch().unwrap().id.unwrap(), first);
    drop(source);
    let after_first = object_counts(&cache_path);
    assert!(after_first.1 + after_first.0 > 0, "{after_first:?}");

    // As a restarted daemon: same cache, commit already there, nothing downloaded.
    let source = open(&url, branch("main"), None, cache.path());
    assert_eq!(source.cache_path(), cache_path);
    git(
        &cache_path,
        &["cat-file", "-e", &format!("{first}^{{commit}}")],
    );
    let rev = source.fetch().unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), first);
    assert_eq!(rev.files.len(), 20);
    assert_eq!(object_counts(&cache_path), after_first);

    // The measure does see a download: a new commit adds objects.
    work.write("d0/s.toml", "v = 100\n");
    let second = work.commit("two");
    work.git(&["push", "-q", &url, "main"]);
    assert_eq!(source.fetch().unwrap().id.unwrap(), second);
    assert_ne!(object_counts(&cache_path), after_first);

    // Another URL gets another cache.
    let (other_url, _) = daemon.create("other.git");
    let other = open(&other_url, branch("main"), None, cache.path());
    assert_ne!(other.cache_path(), cache_path);
}

#[test]
fn corrupt_cache_is_recreated() {
    let daemon = GitDaemon::start();
    let (url, _) = daemon.create("repo.git");
    let work = Work::new();
    work.write("a.toml", "v = 1\n");
    let first = work.commit("one");
    work.git(&["push", "-q", &url, "main"]);

    let cache = TempDir::new().unwrap();
    let source = open(&url, branch("main"), None, cache.path());
    let cache_path = source.cache_path().to_path_buf();
    source.fetch().unwrap();
    drop(source);

    // Objects lost (a disk that filled up mid-write, a bad restore), refs still there.
    std::fs::remove_dir_all(cache_path.join("objects")).unwrap();
    std::fs::create_dir_all(cache_path.join("objects/pack")).unwrap();
    let source = open(&url, branch("main"), None, cache.path());
    let rev = source.fetch().unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), first);
    assert_eq!(content(&rev, "a.toml"), "v = 1\n");
    drop(source);

    // Not a repository at all.
    std::fs::remove_dir_all(&cache_path).unwrap();
    std::fs::write(&cache_path, "junk").unwrap();
    let source = open(&url, branch("main"), None, cache.path());
    assert_eq!(source.fetch().unwrap().id.unwrap(), first);
    assert!(cache_path.is_dir());
    drop(source);

    // A garbled config.
    std::fs::write(cache_path.join("config"), "[[[ not git config").unwrap();
    let source = open(&url, branch("main"), None, cache.path());
    assert_eq!(source.fetch().unwrap().id.unwrap(), first);
}

// ---------------------------------------------------------------------------------------
// Smart HTTP with Basic auth

#[test]
fn basic_helper_encodes_like_rfc_7617() {
    assert_eq!(
        basic("Aladdin", "open sesame"),
        "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    );
}

/// hang guard for `fetch_bounded`: a refused or failing fetch from loopback ends within
/// seconds; one that never ends would stall the test run instead of failing it.
const LIMIT: Duration = Duration::from_secs(90);

#[test]
fn http_rejected_credentials_give_up_after_three_attempts() {
    let server = GitHttp::refusing();
    let cache = TempDir::new().unwrap();
    let password = "hunter2-very-secret";
    let source = open_with(
        &server.url("", "repo.git"),
        branch("main"),
        None,
        cache.path(),
        GitAuth::UserPassword {
            username: "alice".into(),
            password: password.into(),
        },
    );
    // Given up, not retried for good: an answer within LIMIT, after three attempts
    // (counted below).
    let err = fetch_bounded(source, LIMIT).unwrap_err();
    assert!(
        matches!(err, GitError::Auth { .. }),
        "expected an auth error, got {err:?}"
    );
    assert_eq!(err.metric_label(), "auth");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(password), "{text}");

    let seen = server.seen();
    let offered: Vec<_> = seen
        .iter()
        .filter_map(|s| s.authorization.as_deref())
        .collect();
    assert_eq!(offered.len(), 3, "{seen:?}");
    assert!(
        offered.iter().all(|a| *a == basic("alice", password)),
        "{offered:?}"
    );
    assert!(
        seen.iter().all(|s| s.path.contains("/repo.git/info/refs")),
        "{seen:?}"
    );
}

#[test]
fn http_auth_required_without_credentials_fails_at_once() {
    let server = GitHttp::refusing();
    let cache = TempDir::new().unwrap();
    let source = open(
        &server.url("", "repo.git"),
        branch("main"),
        None,
        cache.path(),
    );
    let err = fetch_bounded(source, LIMIT).unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
    assert!(err.to_string().contains("none are configured"), "{err}");
    assert!(server.seen().iter().all(|s| s.authorization.is_none()));
}

#[test]
fn ssh_key_settings_fail_cleanly_against_an_https_server() {
    let server = GitHttp::refusing();
    let cache = TempDir::new().unwrap();
    let keys = TempDir::new().unwrap();
    let key = keys.path().join("identity");
    std::fs::write(&key, "not really a key").unwrap();
    let with_known_hosts = |known_hosts: Option<PathBuf>| {
        open_with(
            &server.url("", "repo.git"),
            branch("main"),
            None,
            cache.path(),
            GitAuth::SshKey {
                private_key: key.clone(),
                passphrase: Some("phrase-secret".into()),
                known_hosts,
            },
        )
    };

    // A known_hosts file that has gone away is reported before anything is sent.
    let missing = keys.path().join("known_hosts");
    match fetch_bounded(with_known_hosts(Some(missing)), LIMIT) {
        Err(GitError::Config(m)) => assert!(m.contains("known_hosts"), "{m}"),
        other => panic!("expected a config error, got {other:?}"),
    }
    assert!(server.seen().is_empty(), "{:?}", server.seen());

    // An SSH key cannot answer an HTTP Basic challenge: an auth error, not a loop.
    let err = fetch_bounded(with_known_hosts(None), LIMIT).unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
    assert!(err.to_string().contains("SSH key"), "{err}");
    assert!(!format!("{err:?}").contains("phrase-secret"));
    assert!(server.seen().iter().all(|s| s.authorization.is_none()));
}

#[test]
fn http_password_in_url_is_never_shown() {
    let server = GitHttp::refusing();
    let cache = TempDir::new().unwrap();
    let url = server.url("bob:url-secret-pw@", "repo.git");
    let source = open_with(
        &url,
        branch("main"),
        None,
        cache.path(),
        GitAuth::Token {
            username: None,
            token: "tok-secret-value".into(),
        },
    );
    assert_eq!(source.display_url(), server.url("", "repo.git"));
    assert!(!format!("{source:?}").contains("secret"));
    let err = fetch_bounded(source, LIMIT).unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(!text.contains("secret") && !text.contains("bob:"), "{text}");
    // The cache's config never records the URL.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let config = std::fs::read_to_string(entry.unwrap().path().join("config")).unwrap();
        assert!(!config.contains("secret"), "{config}");
    }
}

#[test]
fn http_token_is_sent_as_password_for_user_git() {
    let root = TempDir::new().unwrap();
    git(
        root.path(),
        &["init", "-q", "--bare", "-b", "main", "repo.git"],
    );
    let bare = root.path().join("repo.git");
    let work = Work::new();
    work.write("specs/a.toml", "v = 1\n");
    let first = work.commit("one");
    work.git(&["push", "-q", bare.to_str().unwrap(), "main"]);

    let token = "ghp_test-token-123";
    let server = GitHttp::serving(root.path(), basic("git", token));
    let cache = TempDir::new().unwrap();
    let with = |auth: GitAuth| {
        open_with(
            &server.url("", "repo.git"),
            branch("main"),
            Some("specs"),
            cache.path(),
            auth,
        )
    };
    let rev = fetch_bounded(
        with(GitAuth::Token {
            username: None,
            token: token.into(),
        }),
        LIMIT,
    )
    .unwrap();
    assert_eq!(rev.id.as_deref().unwrap(), first);
    assert_eq!(content(&rev, "a.toml"), "v = 1\n");
    assert!(
        server
            .seen()
            .iter()
            .any(|s| s.path.ends_with("/repo.git/git-upload-pack")),
        "{:?}",
        server.seen()
    );

    // The same token for another user is refused, and so is handled as an auth error.
    work.write("specs/a.toml", "v = 2\n");
    work.commit("two");
    work.git(&["push", "-q", bare.to_str().unwrap(), "main"]);
    let err = fetch_bounded(
        with(GitAuth::Token {
            username: Some("someone".into()),
            token: token.into(),
        }),
        LIMIT,
    )
    .unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
    assert!(!format!("{err:?}").contains(token));
}
