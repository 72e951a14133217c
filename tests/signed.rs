//! `--verify-commits`: commits and tags signed by the real `git` with SSH keys made by the
//! real `ssh-keygen` (gpg.format=ssh), served by `git daemon` on loopback. Signed by an
//! allowed key, a revision is applied; unsigned, signed by another key, signed outside
//! the key's allowed time or namespace, or a signature moved onto other content, it is
//! not, with the reason in one line (the source, then the daemon's status, metric and
//! notification), and the last verified revision stays in force.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use driftless::source::git::verify::Unverified;
use driftless::source::git::{GitAuth, GitConfig, GitError, GitRef, GitSource};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use support::{ConfigRepo, Daemon, GitDaemon, Recorder, git, git_cmd, ssh_keygen};
use tempfile::TempDir;

/// Keys and allowed_signers files in a directory of their own.
struct Keys {
    dir: TempDir,
}

impl Keys {
    fn new() -> Keys {
        Keys {
            dir: TempDir::new().unwrap(),
        }
    }

    /// A new ed25519 key `name`; its private key's path and public `type base64`.
    fn key(&self, name: &str) -> (PathBuf, String) {
        let path = self.dir.path().join(name);
        let public = ssh_keygen(&path);
        (path, public)
    }

    /// An allowed_signers file of `lines`.
    fn allowed(&self, name: &str, lines: &[String]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    }

    /// An ssh-keygen that signs in namespace `file` whatever git asks for: a signature
    /// made for another purpose than git's.
    fn other_namespace_program(&self) -> PathBuf {
        let path = self.dir.path().join("sign-for-files");
        std::fs::write(
            &path,
            "#!/bin/sh\nargs=\"\"\nfor a in \"$@\"; do [ \"$a\" = git ] && a=file; args=\"$args '$a'\"; done\neval exec ssh-keygen $args\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    }
}

/// The key's SHA256 fingerprint as ssh-keygen prints it.
fn fingerprint(key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(key.with_extension("pub"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace().nth(1).unwrap().to_string()
}

/// git with SSH signing by `key` set up (and `program` as its ssh-keygen, if given).
fn signing(dir: &Path, key: &Path, program: Option<&Path>, args: &[&str]) -> String {
    let mut cmd = git_cmd(dir);
    cmd.args(["-c", "gpg.format=ssh", "-c"])
        .arg(format!("user.signingkey={}", key.display()));
    if let Some(p) = program {
        cmd.arg("-c")
            .arg(format!("gpg.ssh.program={}", p.display()));
    }
    let out = cmd.args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn source(url: &str, reference: GitRef, cache: &Path, allowed: &Path) -> GitSource {
    GitSource::open(GitConfig {
        url: url.to_string(),
        reference,
        path: None,
        cache_dir: cache.to_path_buf(),
        needs_checkout: driftless::hydrate::needs_checkout,
        verify: Some(allowed.to_path_buf()),
        auth: GitAuth::None,
    })
    .unwrap()
}

/// The reason a fetch was refused for, and the commit it names.
fn refused(result: Result<driftless::source::Revision, GitError>) -> (String, Unverified) {
    match result {
        Err(GitError::Unverified { commit, source }) => (commit, source),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(rev) => panic!("revision {:?} was accepted", rev.id),
    }
}

#[test]
fn commits_and_tags_pass_only_when_an_allowed_key_signed_them_for_git() {
    let keys = Keys::new();
    let (alice, alice_pub) = keys.key("alice");
    let (mallory, _) = keys.key("mallory");
    let allowed = keys.allowed(
        "allowed_signers",
        &[
            "# who may deploy".to_string(),
            format!("alice@example.com namespaces=\"git\" {alice_pub}"),
        ],
    );
    let daemon = GitDaemon::start();
    let (url, _) = daemon.create("repo.git");
    let work = TempDir::new().unwrap();
    let w = work.path();
    git(w, &["init", "-q", "-b", "main"]);
    let push = |refs: &[&str]| {
        let mut args = vec!["push", "-q", "-f", url.as_str()];
        args.extend(refs);
        git(w, &args);
    };
    let cache = TempDir::new().unwrap();
    let fetch = || source(&url, GitRef::Branch("main".into()), cache.path(), &allowed).fetch();

    // Signed by alice: read, as any revision is.
    std::fs::write(w.join("a.yaml"), "v: 1\n").unwrap();
    git(w, &["add", "-A"]);
    signing(w, &alice, None, &["commit", "-q", "-S", "-m", "one"]);
    let signed = git(w, &["rev-parse", "HEAD"]);
    push(&["main"]);
    assert_eq!(fetch().unwrap().id.as_deref(), Some(signed.as_str()));

    // Unsigned.
    std::fs::write(w.join("a.yaml"), "v: 2\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-q", "-m", "two"]);
    let unsigned = git(w, &["rev-parse", "HEAD"]);
    push(&["main"]);
    let (commit, why) = refused(fetch());
    assert_eq!(commit, unsigned);
    assert_eq!(
        GitError::Unverified {
            commit: commit.clone(),
            source: why.clone()
        }
        .to_string(),
        format!("not applied: commit {} is not signed", &unsigned[..12])
    );

    // Signed by a key the file does not allow: named by its fingerprint.
    signing(
        w,
        &mallory,
        None,
        &["commit", "-q", "--allow-empty", "-S", "-m", "three"],
    );
    push(&["main"]);
    let (_, why) = refused(fetch());
    assert_eq!(
        why,
        Unverified::UnknownKey {
            what: format!("commit {}", &git(w, &["rev-parse", "HEAD"])[..12]),
            key: fingerprint(&mallory),
        }
    );

    // Alice's signature moved onto other content (the message changed, the gpgsig
    // header kept): the signature does not match.
    git(w, &["reset", "-q", "--hard", &signed]);
    let body = git(w, &["cat-file", "commit", "HEAD"]);
    let body = format!("{}one, and more", body.strip_suffix("one").unwrap());
    let mut hash = git_cmd(w)
        .args(["hash-object", "-t", "commit", "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    hash.stdin
        .take()
        .unwrap()
        .write_all(format!("{body}\n").as_bytes())
        .unwrap();
    let forged = String::from_utf8(hash.wait_with_output().unwrap().stdout).unwrap();
    git(w, &["update-ref", "refs/heads/main", forged.trim()]);
    push(&["main"]);
    let (commit, why) = refused(fetch());
    assert_eq!(commit, forged.trim());
    assert!(
        matches!(why, Unverified::BadSignature { ref key, .. } if *key == fingerprint(&alice)),
        "{why}"
    );

    // Alice's key, but a signature made for files, not for git.
    git(w, &["reset", "-q", "--hard", &signed]);
    let program = keys.other_namespace_program();
    signing(
        w,
        &alice,
        Some(&program),
        &["commit", "-q", "--allow-empty", "-S", "-m", "four"],
    );
    push(&["main"]);
    let (_, why) = refused(fetch());
    assert!(
        matches!(&why, Unverified::Namespace { namespace, .. } if namespace == "file"),
        "{why}"
    );

    // Alice's key, allowed only before the commit was made.
    git(w, &["reset", "-q", "--hard", &signed]);
    push(&["main"]);
    let expired = keys.allowed(
        "expired",
        &[format!(
            "alice@example.com valid-before=\"20200101\" {alice_pub}"
        )],
    );
    let old = source(&url, GitRef::Branch("main".into()), cache.path(), &expired).fetch();
    let (_, why) = refused(old);
    assert!(matches!(why, Unverified::Expired { .. }), "{why}");

    // The file is read at each fetch: allowing mallory lets its commit through.
    signing(
        w,
        &mallory,
        None,
        &["commit", "-q", "--allow-empty", "-S", "-m", "five"],
    );
    push(&["main"]);
    assert!(matches!(refused(fetch()).1, Unverified::UnknownKey { .. }));
    let mallory_pub = std::fs::read_to_string(mallory.with_extension("pub")).unwrap();
    let mut text = std::fs::read_to_string(&allowed).unwrap();
    text.push_str(&format!("mallory@example.com {mallory_pub}"));
    std::fs::write(&allowed, text).unwrap();
    assert_eq!(
        fetch().unwrap().id.as_deref(),
        Some(git(w, &["rev-parse", "HEAD"]).as_str())
    );

    // A tag is verified as a tag: alice's signed tag on an unsigned commit passes; an
    // unsigned annotated tag and a lightweight tag on a signed commit do not.
    git(w, &["commit", "-q", "--allow-empty", "-m", "six, unsigned"]);
    signing(w, &alice, None, &["tag", "-s", "-m", "release 1", "v1"]);
    git(w, &["tag", "-a", "-m", "release 2", "v2"]);
    git(w, &["tag", "v3", &signed]);
    push(&["main", "v1", "v2", "v3"]);
    let tag = |t: &str| source(&url, GitRef::Tag(t.into()), cache.path(), &allowed).fetch();
    assert_eq!(
        tag("v1").unwrap().id.as_deref(),
        Some(git(w, &["rev-parse", "HEAD"]).as_str())
    );
    assert_eq!(
        refused(tag("v2")).1,
        Unverified::Unsigned {
            what: "tag v2".into()
        }
    );
    assert_eq!(
        refused(tag("v3")).1,
        Unverified::Unsigned {
            what: "tag v3".into()
        }
    );

    // An allowed_signers file that cannot be read refuses every revision, in its words.
    let gone = keys.dir.path().join("gone");
    let err = source(&url, GitRef::Branch("main".into()), cache.path(), &gone)
        .fetch()
        .unwrap_err();
    assert!(
        matches!(err, GitError::Signers(_)) && err.to_string().contains("allowed signers file"),
        "{err}"
    );
}

#[tokio::test]
async fn a_daemon_applies_only_verified_commits_and_says_why_it_holds_one() {
    let client = support::client().await;
    let ns = support::namespace(&client, "signed").await;
    let keys = Keys::new();
    let (alice, alice_pub) = keys.key("alice");
    let allowed = keys.allowed(
        "allowed_signers",
        &[format!("alice@example.com {alice_pub}")],
    );
    let repo = ConfigRepo::new();
    let w = repo.work();
    let config_map = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  k: v\n"
        )
    };
    let commit = |signed: bool, msg: &str| {
        git(w, &["add", "-A"]);
        match signed {
            true => signing(w, &alice, None, &["commit", "-q", "-S", "-m", msg]),
            false => git(w, &["commit", "-q", "-m", msg]),
        };
        git(w, &["push", "-q", "origin", "HEAD:main"]);
        git(w, &["rev-parse", "HEAD"])
    };
    std::fs::write(w.join("first.yaml"), config_map("first")).unwrap();
    let first = commit(true, "first, signed");

    let recorder = Recorder::start().await;
    let server = GitDaemon::serve(repo.base());
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--git",
            &server.url("config.git"),
            "--interval",
            "1s",
            "--verify-commits",
            &allowed.to_string_lossy(),
            "--notify",
            &recorder.url("/hook"),
        ])
        .start();
    daemon
        .wait_status("the signed commit applied", |s| {
            s["revision_applied"].as_str() == Some(first.as_str())
        })
        .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(config_maps.get_opt("first").await.unwrap().is_some());

    // An unsigned commit: not applied, the signed one stays, and why is said once in
    // the status, the metric and a notification naming the commit.
    std::fs::write(w.join("second.yaml"), config_map("second")).unwrap();
    let second = commit(false, "second, unsigned");
    let why = format!("not applied: commit {} is not signed", &second[..12]);
    let status = daemon
        .wait_status("the unsigned commit refused", |s| {
            s["errors"][0]["message"].as_str() == Some(why.as_str())
        })
        .await;
    assert_eq!(status["revision_applied"].as_str(), Some(first.as_str()));
    recorder
        .wait_for("the refusal told", "/hook", |seen| {
            seen.iter()
                .any(|r| r.json()["event"] == "revision_unverified")
        })
        .await;
    let told = recorder
        .under("/hook")
        .iter()
        .find(|r| r.json()["event"] == "revision_unverified")
        .unwrap()
        .json();
    assert_eq!(told["revision"].as_str(), Some(second.as_str()), "{told}");
    assert_eq!(told["message"].as_str(), Some(why.as_str()), "{told}");
    let (_, metrics) = support::http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert!(
        metrics.lines().any(|l| l
            .starts_with("driftless_source_errors_total{source=\"git\",reason=\"unverified\"}")
            && !l.ends_with(" 0")),
        "{metrics}"
    );
    // Several fetches later, still nothing of it.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(config_maps.get_opt("second").await.unwrap().is_none());

    // Signed again on top: applied, with what the unsigned one added.
    std::fs::write(w.join("third.yaml"), config_map("third")).unwrap();
    let third = commit(true, "third, signed");
    daemon
        .wait_status("the next signed commit applied", |s| {
            s["revision_applied"].as_str() == Some(third.as_str())
                && s["errors"].as_array().is_some_and(|e| e.is_empty())
        })
        .await;
    for name in ["first", "second", "third"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_some(), "{name}");
    }
}
