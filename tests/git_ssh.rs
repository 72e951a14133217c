//! `driftless run --git ssh://…` against a real OpenSSH server (`sshd` on loopback with a
//! temporary host key, `support::Sshd`) and the local cluster: a commit is applied, a host
//! key that is not the known one is refused before anything is fetched, and a client key
//! the server does not take is given up after a bounded number of tries.

use crate::support;

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::Value;
use support::{Daemon, Sshd, git, http, ssh_keygen};
use tempfile::TempDir;

/// The credential callback's cap (`MAX_AUTH_ATTEMPTS` in src/source/git/callbacks.rs).
const AUTH_ATTEMPTS: usize = 3;

fn web(ns: &str, total_qps: u32) -> String {
    format!(
        "namespace = \"{ns}\"\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
         single-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

/// Commits `text` as `app.toml` in `work` and pushes it to the bare repository `bare`
/// (through the file system: what is tested is the daemon's side of SSH).
fn push(work: &Path, bare: &Path, text: &str) -> String {
    std::fs::write(work.join("app.toml"), text).unwrap();
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", "specs"]);
    git(work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    git(work, &["rev-parse", "HEAD"])
}

/// A repository served by `sshd`, and a working copy that pushes to it.
struct Repo {
    url: String,
    bare: PathBuf,
    work: TempDir,
    /// The first commit: an elasticweb in the test's namespace.
    first: String,
}

fn served_repo(sshd: &Sshd, ns: &str) -> Repo {
    let (url, bare) = sshd.create("config.git");
    let work = TempDir::new().unwrap();
    git(work.path(), &["init", "-q", "-b", "main"]);
    let first = push(work.path(), &bare, &web(ns, 200));
    Repo {
        url,
        bare,
        work,
        first,
    }
}

/// `driftless run --git <url>` with the SSH key and known_hosts files from the
/// environment, as docs/src/daemon.md documents; fetches only at start and on the hook.
fn start(ns: &str, url: &str, key: &Path, known_hosts: &Path) -> Daemon {
    Daemon::builder(ns)
        .args(&["--git", url, "--interval", "1h"])
        .env("DRIFTLESS_GIT_SSH_KEY_FILE", key.to_str().unwrap())
        .env(
            "DRIFTLESS_GIT_KNOWN_HOSTS_FILE",
            known_hosts.to_str().unwrap(),
        )
        .start()
}

/// What each test starts from: its namespace, an sshd serving a repository with one
/// commit for that namespace, and a directory for key files.
struct Case {
    client: kube::Client,
    ns: String,
    sshd: Sshd,
    repo: Repo,
    files: TempDir,
}

async fn case(prefix: &str) -> Case {
    let client = support::client().await;
    let ns = support::namespace(&client, prefix).await;
    let sshd = Sshd::start();
    let repo = served_repo(&sshd, &ns);
    Case {
        client,
        ns,
        sshd,
        repo,
        files: TempDir::new().unwrap(),
    }
}

impl Case {
    /// A known_hosts file of one line.
    fn known_hosts(&self, line: &str) -> PathBuf {
        let path = self.files.path().join("known_hosts");
        std::fs::write(&path, format!("{line}\n")).unwrap();
        path
    }
}

async fn deployment(client: &kube::Client, ns: &str) -> Option<Deployment> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt("shop")
        .await
        .unwrap()
}

/// An error reported, or a revision read: either way, what the fetch came to.
fn settled(status: &Value) -> bool {
    !status["errors"].as_array().is_none_or(Vec::is_empty) || !status["revision_seen"].is_null()
}

fn errors(status: &Value) -> String {
    status["errors"].to_string()
}

#[tokio::test]
async fn ssh_commit_is_applied_and_a_pushed_one_follows() {
    let case = case("git-ssh").await;
    let known = case.known_hosts(&case.sshd.known_hosts_line());
    let Case {
        client,
        ns,
        sshd,
        repo:
            Repo {
                url,
                bare,
                work,
                first,
            },
        files: _files,
    } = case;

    let daemon = start(&ns, &url, &sshd.client_key(), &known);
    let status = daemon
        .wait_status("the first commit applied over SSH", |s| {
            s["revision_applied"] == first.as_str() && support::all_ready(s)
        })
        .await;
    // The status names the URL without its userinfo.
    assert_eq!(
        status["source"],
        url.replace(&format!("{}@", sshd.user), ""),
        "{status:#}"
    );
    let d = deployment(&client, &ns).await.expect("Deployment shop");
    assert_eq!(d.spec.replicas, Some(2));
    assert!(
        sshd.log()
            .contains(&format!("Accepted publickey for {}", sshd.user)),
        "{}",
        sshd.log()
    );

    // A push, then the hook: fetched again over SSH (from the cache) and applied.
    let second = push(work.path(), &bare, &web(&ns, 400));
    let (code, body) = http(daemon.metrics, "POST", "/hooks/git", &[], b"{}").await;
    assert_eq!(code, 202, "{body}");
    daemon
        .wait_status("the pushed commit applied over SSH", |s| {
            s["revision_applied"] == second.as_str() && support::all_ready(s)
        })
        .await;
    let d = deployment(&client, &ns).await.expect("Deployment shop");
    assert_eq!(d.spec.replicas, Some(4));
}

#[tokio::test]
async fn ssh_unknown_host_key_is_refused_before_anything_is_fetched() {
    let case = case("git-ssh-hostkey").await;
    // The right name and port, another server's key: what an interception looks like.
    let other = ssh_keygen(&case.files.path().join("other_host"));
    let known = case.known_hosts(&format!("[127.0.0.1]:{} {other}", case.sshd.port));
    let Case {
        client,
        ns,
        sshd,
        repo,
        ..
    } = case;

    let daemon = start(&ns, &repo.url, &sshd.client_key(), &known);
    let status = daemon
        .wait_status("the host key refusal in the status file", settled)
        .await;
    let text = errors(&status);
    assert!(
        text.contains("SSH host key check")
            && text.contains(&format!(
                "the ssh-ed25519 key presented by [127.0.0.1]:{} does not match the known_hosts file",
                sshd.port
            )),
        "{status:#}"
    );
    assert!(status["revision_seen"].is_null(), "{status:#}");
    assert!(status["revision_applied"].is_null(), "{status:#}");
    // Refused before authenticating: the client key was never offered.
    let log = sshd.log();
    assert!(!log.contains("publickey"), "{log}");
    assert!(deployment(&client, &ns).await.is_none());
    let (_, metrics) = http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert!(
        metrics.contains("driftless_source_errors_total{source=\"git\",reason=\"host_key\"} ")
            && !metrics
                .contains("driftless_source_errors_total{source=\"git\",reason=\"host_key\"} 0\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn ssh_refused_client_key_is_given_up_after_three_tries() {
    let case = case("git-ssh-key").await;
    let known = case.known_hosts(&case.sshd.known_hosts_line());
    let Case {
        client,
        ns,
        sshd,
        repo,
        files,
    } = case;
    // A well-formed key that is not in sshd's authorized_keys.
    let stranger = files.path().join("stranger");
    ssh_keygen(&stranger);

    let daemon = start(&ns, &repo.url, &stranger, &known);
    let status = daemon
        .wait_status("the refused key in the status file", settled)
        .await;
    // sshd saw the key exactly that often (it would allow 50 tries): the cap, not the
    // server, ended it.
    let log = sshd.log();
    let tries = log.matches("Failed publickey for").count();
    assert_eq!(tries, AUTH_ATTEMPTS, "{log}");
    let text = errors(&status);
    assert!(
        text.contains("authenticating to")
            && text.contains(&format!(
                "the server rejected the credentials {AUTH_ATTEMPTS} times"
            )),
        "{status:#}"
    );
    assert!(status["revision_seen"].is_null(), "{status:#}");
    assert!(!log.contains("Accepted publickey"), "{log}");
    assert!(deployment(&client, &ns).await.is_none());
}
