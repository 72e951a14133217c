//! `--verify-commits`: commits and tags signed by the real `git` with SSH keys made by the
//! real `ssh-keygen` (gpg.format=ssh) and with OpenPGP keys made by the real `gpg`,
//! served by `git daemon` on loopback. Signed by an allowed key, a revision is applied;
//! unsigned, signed by another key, signed outside the key's allowed time or namespace,
//! by a revoked key, or a signature moved onto other content, it is not, with the reason
//! in one line (the source, then the daemon's status, metric and notification), and the
//! last verified revision stays in force.

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

/// A repository served by `git daemon`, and a work tree that pushes to it.
struct Served {
    _daemon: GitDaemon,
    url: String,
    work: TempDir,
}

impl Served {
    fn new() -> Served {
        let daemon = GitDaemon::start();
        let (url, _) = daemon.create("repo.git");
        let work = TempDir::new().unwrap();
        git(work.path(), &["init", "-q", "-b", "main"]);
        Served {
            _daemon: daemon,
            url,
            work,
        }
    }

    /// Pushes `refs`, forced.
    fn push(&self, refs: &[&str]) {
        let mut args = vec!["push", "-q", "-f", self.url.as_str()];
        args.extend(refs);
        git(self.work.path(), &args);
    }
}

/// Alice's key, and an allowed_signers file that allows her alone.
fn alice_allowed() -> (Keys, PathBuf, PathBuf) {
    let keys = Keys::new();
    let (alice, alice_pub) = keys.key("alice");
    let allowed = keys.allowed(
        "allowed_signers",
        &[format!("alice@example.com {alice_pub}")],
    );
    (keys, alice, allowed)
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
    source_trusting(url, reference, cache, &[allowed])
}

fn source_trusting(url: &str, reference: GitRef, cache: &Path, files: &[&Path]) -> GitSource {
    GitSource::open(GitConfig {
        url: url.to_string(),
        reference,
        path: None,
        cache_dir: cache.to_path_buf(),
        needs_checkout: driftless::hydrate::needs_checkout,
        verify: files.iter().map(|f| f.to_path_buf()).collect(),
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
    let served = Served::new();
    let (url, w) = (served.url.clone(), served.work.path());
    let push = |refs: &[&str]| served.push(refs);
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
    let forged = moved_signature(w, &signed);
    git(w, &["update-ref", "refs/heads/main", &forged]);
    push(&["main"]);
    let (commit, why) = refused(fetch());
    assert_eq!(commit, forged);
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
        matches!(err, GitError::Signers(_))
            && err
                .to_string()
                .starts_with(&format!("--verify-commits {}:", gone.display())),
        "{err}"
    );
}

/// A GnuPG home of its own (its agent stopped when dropped), for keys made by `gpg`.
struct Gpg {
    home: TempDir,
}

impl Gpg {
    fn new() -> Gpg {
        let home = tempfile::Builder::new().prefix("gpg").tempdir().unwrap();
        std::fs::set_permissions(
            home.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        Gpg { home }
    }

    fn run(&self, args: &[&str]) -> Vec<u8> {
        let out = Command::new("gpg")
            .env("GNUPGHOME", self.home.path())
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "gpg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// A new key for `uid` of `algo` with `usage` (`sign`, `cert`), and its fingerprint.
    fn key(&self, uid: &str, algo: &str, usage: &str) -> String {
        self.run(&["--quick-gen-key", uid, algo, usage, "0"]);
        self.fingerprints(uid)[0].clone()
    }

    /// The fingerprints of `uid`'s primary key and subkeys, in that order.
    fn fingerprints(&self, uid: &str) -> Vec<String> {
        let listed = String::from_utf8(self.run(&["--with-colons", "--list-keys", uid])).unwrap();
        listed
            .lines()
            .filter_map(|l| l.strip_prefix("fpr:"))
            .map(|l| l.trim_matches(':').to_string())
            .collect()
    }

    /// `uid`'s public keys exported to `path` (armored or binary).
    fn export(&self, uids: &[&str], armor: bool, path: &Path) -> PathBuf {
        let mut args = vec!["--export"];
        if armor {
            args.push("--armor");
        }
        args.extend(uids);
        std::fs::write(path, self.run(&args)).unwrap();
        path.to_path_buf()
    }

    /// git signing with OpenPGP key `key` (gpg.format's default).
    fn signing(&self, dir: &Path, key: &str, args: &[&str]) -> String {
        let out = git_cmd(dir)
            .env("GNUPGHOME", self.home.path())
            .args(["-c", "gpg.program=gpg", "-c"])
            .arg(format!("user.signingkey={key}!"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Gpg {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .env("GNUPGHOME", self.home.path())
            .args(["--kill", "gpg-agent"])
            .status();
    }
}

/// A commit object's content with its message changed and its signature header kept.
fn moved_signature(w: &Path, signed: &str) -> String {
    let body = git(w, &["cat-file", "commit", signed]);
    let (head, message) = body.rsplit_once("\n\n").unwrap();
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
        .write_all(format!("{head}\n\n{message}, and more\n").as_bytes())
        .unwrap();
    String::from_utf8(hash.wait_with_output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn openpgp_signatures_pass_only_by_a_key_of_the_keyring_that_could_sign() {
    let gpg = Gpg::new();
    // Alice signs with a subkey (her primary key only certifies), Bob with an RSA primary
    // key, Carol's key is revoked after she signed; Mallory is in nobody's keyring.
    let alice = gpg.key("Alice <alice@example.com>", "ed25519", "cert");
    gpg.run(&["--quick-add-key", &alice, "ed25519", "sign", "0"]);
    let alice_signing = gpg.fingerprints("alice@example.com")[1].clone();
    let bob = gpg.key("Bob <bob@example.com>", "rsa3072", "sign");
    let carol = gpg.key("Carol <carol@example.com>", "ed25519", "sign");
    let mallory = gpg.key("Mallory <mallory@example.com>", "ed25519", "sign");
    let keys = TempDir::new().unwrap();
    let armored = gpg.export(&["alice@example.com"], true, &keys.path().join("team.asc"));
    let binary = gpg.export(&["bob@example.com"], false, &keys.path().join("bob.gpg"));

    let served = Served::new();
    let (url, w) = (served.url.clone(), served.work.path());
    let push = |refs: &[&str]| served.push(refs);
    let cache = TempDir::new().unwrap();
    let trusting = |files: &[&Path]| {
        source_trusting(&url, GitRef::Branch("main".into()), cache.path(), files).fetch()
    };
    let head = || git(w, &["rev-parse", "HEAD"]);

    // Alice's subkey signed it: applied, and said to be hers.
    std::fs::write(w.join("a.yaml"), "v: 1\n").unwrap();
    git(w, &["add", "-A"]);
    gpg.signing(w, &alice_signing, &["commit", "-q", "-S", "-m", "one"]);
    let signed = head();
    push(&["main"]);
    let rev = trusting(&[&armored]).unwrap();
    assert_eq!(rev.id.as_deref(), Some(signed.as_str()));
    assert_eq!(
        rev.signatures,
        driftless::source::Signatures::Verified {
            commit: Some(format!("Alice <alice@example.com> ({alice_signing})")),
            tag: None,
        }
    );

    // Bob's RSA key, from a binary keyring given beside the armored one.
    gpg.signing(
        w,
        &bob,
        &["commit", "-q", "--allow-empty", "-S", "-m", "two"],
    );
    push(&["main"]);
    assert!(
        matches!(refused(trusting(&[&armored])).1, Unverified::UnknownKey { ref key, .. } if *key == bob)
    );
    assert_eq!(
        trusting(&[&armored, &binary]).unwrap().id.as_deref(),
        Some(head().as_str())
    );

    // Unsigned, and signed by Mallory: not applied, Mallory's key named.
    git(w, &["commit", "-q", "--allow-empty", "-m", "three"]);
    push(&["main"]);
    assert_eq!(
        refused(trusting(&[&armored])).1,
        Unverified::Unsigned {
            what: format!("commit {}", &head()[..12])
        }
    );
    gpg.signing(
        w,
        &mallory,
        &["commit", "-q", "--allow-empty", "-S", "-m", "four"],
    );
    push(&["main"]);
    let (_, why) = refused(trusting(&[&armored, &binary]));
    assert_eq!(
        why.to_string(),
        format!(
            "commit {} is signed by key {mallory}, which no --verify-commits file trusts",
            &head()[..12]
        )
    );

    // Alice's signature moved onto other content.
    let forged = moved_signature(w, &signed);
    git(w, &["update-ref", "refs/heads/main", &forged]);
    push(&["main"]);
    let (commit, why) = refused(trusting(&[&armored]));
    assert_eq!(commit, forged);
    assert!(
        matches!(why, Unverified::BadSignature { ref key, .. } if *key == alice_signing),
        "{why}"
    );

    // Carol signed, then revoked her key: the keyring that carries the revocation
    // refuses her signatures.
    git(w, &["reset", "-q", "--hard", &signed]);
    gpg.signing(
        w,
        &carol,
        &["commit", "-q", "--allow-empty", "-S", "-m", "five"],
    );
    push(&["main"]);
    let carol_keys = gpg.export(&["carol@example.com"], true, &keys.path().join("carol.asc"));
    assert!(trusting(&[&carol_keys]).is_ok());
    let revocation = gpg
        .home
        .path()
        .join(format!("openpgp-revocs.d/{carol}.rev"));
    let text = std::fs::read_to_string(&revocation).unwrap();
    // gpg guards the certificate against an accidental import with a colon.
    std::fs::write(&revocation, text.replace(":-----BEGIN", "-----BEGIN")).unwrap();
    gpg.run(&["--import", &revocation.to_string_lossy()]);
    let carol_keys = gpg.export(&["carol@example.com"], true, &keys.path().join("carol.asc"));
    let (_, why) = refused(trusting(&[&carol_keys]));
    assert_eq!(
        why.to_string(),
        format!(
            "commit {} is signed by key {carol} (Carol <carol@example.com>), which is revoked",
            &head()[..12]
        )
    );

    // Dave's key, made in 2020 without an expiry, signed today: passes. Then he set it
    // to expire a day after it was made (a self-signature of 2020, the newest): the
    // keyring that carries it refuses the signature made since.
    git(w, &["reset", "-q", "--hard", &signed]);
    gpg.run(&[
        "--faked-system-time",
        "20200101T000000!",
        "--quick-gen-key",
        "Dave <dave@example.com>",
        "ed25519",
        "sign",
        "0",
    ]);
    let dave = gpg.fingerprints("dave@example.com")[0].clone();
    gpg.signing(
        w,
        &dave,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-S",
            "-m",
            "five and a half",
        ],
    );
    push(&["main"]);
    let dave_keys = gpg.export(&["dave@example.com"], true, &keys.path().join("dave.asc"));
    assert!(trusting(&[&dave_keys]).is_ok());
    gpg.run(&[
        "--faked-system-time",
        "20200101T010000!",
        "--quick-set-expire",
        &dave,
        "1d",
    ]);
    let dave_keys = gpg.export(&["dave@example.com"], true, &keys.path().join("dave.asc"));
    let (_, why) = refused(trusting(&[&dave_keys]));
    assert_eq!(
        why.to_string(),
        format!(
            "commit {} is signed by key {dave} (Dave <dave@example.com>), which had expired when the signature was made",
            &head()[..12]
        )
    );

    // A tag signed by Alice, on an unsigned commit: passes in tag mode, its commit's
    // signature said not to.
    git(w, &["commit", "-q", "--allow-empty", "-m", "six, unsigned"]);
    gpg.signing(w, &alice_signing, &["tag", "-s", "-m", "release 1", "v1"]);
    push(&["main", "v1"]);
    let rev = source_trusting(&url, GitRef::Tag("v1".into()), cache.path(), &[&armored])
        .fetch()
        .unwrap();
    assert_eq!(
        rev.signatures,
        driftless::source::Signatures::Verified {
            commit: None,
            tag: Some(format!("Alice <alice@example.com> ({alice_signing})")),
        }
    );

    // An SSH signature with only a keyring given, and keyrings that cannot be trusted:
    // a secret key, and garbage that claims to be armored.
    let ssh_keys = Keys::new();
    let (sam, _) = ssh_keys.key("sam");
    signing(
        w,
        &sam,
        None,
        &["commit", "-q", "--allow-empty", "-S", "-m", "seven"],
    );
    push(&["main"]);
    assert_eq!(
        refused(trusting(&[&armored])).1.to_string(),
        format!(
            "commit {} is signed with SSH, and --verify-commits was given no allowed_signers file",
            &head()[..12]
        )
    );
    let secret = keys.path().join("secret.asc");
    std::fs::write(
        &secret,
        gpg.run(&["--armor", "--export-secret-keys", "alice@example.com"]),
    )
    .unwrap();
    let err = trusting(&[&secret]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "OpenPGP keyring {}: it holds the secret key {alice}",
            secret.display()
        )),
        "{err}"
    );
    let broken = keys.path().join("broken.asc");
    std::fs::write(
        &broken,
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot base64 at all\n-----END PGP PUBLIC KEY BLOCK-----\n",
    )
    .unwrap();
    let err = trusting(&[&broken]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("OpenPGP keyring {}:", broken.display())),
        "{err}"
    );
}

#[tokio::test]
async fn a_daemon_applies_only_verified_commits_and_says_why_it_holds_one() {
    let client = support::client().await;
    let ns = support::namespace(&client, "signed").await;
    let (_keys, alice, allowed) = alice_allowed();
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

#[tokio::test]
async fn a_flux_verify_request_holds_the_revision_until_the_daemon_checks_signatures() {
    let client = support::client().await;
    let ns = support::namespace(&client, "signed-flux").await;
    let (_keys, alice, allowed) = alice_allowed();
    let repo = ConfigRepo::new();
    let w = repo.work();
    let server = GitDaemon::serve(repo.base());
    let url = server.url("config.git");
    // Bootstrap's GitRepository asks for verified commits; the cluster's Kustomization
    // applies apps/.
    std::fs::create_dir_all(w.join("clusters/dev/flux-system")).unwrap();
    std::fs::create_dir_all(w.join("apps")).unwrap();
    std::fs::write(
        w.join("clusters/dev/flux-system/gotk-sync.yaml"),
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  url: {url}\n  ref:\n    branch: main\n  verify:\n    mode: HEAD\n    secretRef:\n      name: signers\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n  prune: true\n  targetNamespace: {ns}\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
        ),
    )
    .unwrap();
    std::fs::write(
        w.join("apps/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: asked\ndata:\n  k: v\n",
    )
    .unwrap();
    git(w, &["add", "-A"]);
    signing(
        w,
        &alice,
        None,
        &["commit", "-q", "-S", "-m", "signed, asks"],
    );
    git(w, &["push", "-q", "origin", "HEAD:main"]);
    let commit = git(w, &["rev-parse", "HEAD"]);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // A daemon that checks no signatures cannot meet the request: nothing is applied.
    let mut unchecked = Daemon::builder(&ns)
        .args(&["--git", &url, "--path", "clusters/dev", "--interval", "1s"])
        .start();
    let status = unchecked
        .wait_status("the request refused", |s| {
            s["errors"].as_array().is_some_and(|e| {
                e.iter().any(|e| {
                    e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("asks for signed commits (spec.verify)"))
                })
            })
        })
        .await;
    let said = status["errors"].to_string();
    assert!(
        said.contains("gotk-sync.yaml\",\"line\":10,")
            && said.contains("this daemon checks no signatures; start it with --verify-commits"),
        "{said}"
    );
    assert!(status["revision_applied"].is_null(), "{status}");
    assert!(config_maps.get_opt("asked").await.unwrap().is_none());
    unchecked.stop();

    // Started with the keys, the signed commit meets it.
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--git",
            &url,
            "--path",
            "clusters/dev",
            "--interval",
            "1s",
            "--verify-commits",
            &allowed.to_string_lossy(),
        ])
        .start();
    daemon
        .wait_status("the signed commit applied", |s| {
            s["revision_applied"].as_str() == Some(commit.as_str())
        })
        .await;
    assert!(config_maps.get_opt("asked").await.unwrap().is_some());
}
