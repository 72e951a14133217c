//! Security (issue 8), through the real binary against the local cluster and real git on
//! loopback:
//!
//! - secrets planted as the git password, in a Secret's `stringData` and `data`, as the
//!   webhook secret, in the URL's userinfo, and the kubeconfig's bearer token never
//!   appear (raw or base64) in anything driftless prints, writes or records, even at
//!   `RUST_LOG=trace`;
//! - `/metrics` listens on loopback unless told otherwise;
//! - the git hook refuses every request that is not signed with the secret, and such a
//!   request fetches nothing;
//! - TLS is verified by default, to the apiserver and to git servers.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use serde_json::Value;
use support::{
    Daemon, GitHttp, base64, basic, git, hmac_sha256_hex, scrub_env, signed_by, tail, test_ca,
};
use tempfile::TempDir;

const WAIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------
// Planted secrets and the search for them

/// 32 hex digits from the kernel's random source: found nowhere unless planted.
fn token() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn base64_helper_encodes_like_rfc_4648() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}

/// What to search for: the secret itself, and the part of its base64 that is the same
/// wherever it sits in a base64 stream (three alignments: a Secret's `data`, an
/// `Authorization: Basic` header of `user:secret`, ...).
#[derive(Default)]
struct Needles(Vec<(String, String)>);

impl Needles {
    fn plant(&mut self, label: &str, secret: &str) {
        self.0.push((label.to_string(), secret.to_string()));
        let bytes = secret.as_bytes();
        for offset in 0..3 {
            let mut padded = vec![0u8; offset];
            padded.extend_from_slice(bytes);
            let encoded = base64(&padded);
            let start = if offset == 0 { 0 } else { 4 };
            let end = (padded.len() / 3) * 4;
            self.0.push((
                format!("{label} (base64, alignment {offset})"),
                encoded[start..end].to_string(),
            ));
        }
    }

    /// Panics naming every planted secret found in any output.
    fn assert_absent(&self, outputs: &[(String, String)]) {
        assert!(!outputs.is_empty());
        let mut leaks = Vec::new();
        for (what, text) in outputs {
            for (label, needle) in &self.0 {
                if let Some(at) = text.find(needle.as_str()) {
                    let from = text[..at]
                        .char_indices()
                        .rev()
                        .nth(200)
                        .map_or(0, |(i, _)| i);
                    let to = (at + needle.len() + 200).min(text.len());
                    let to = (to..=text.len())
                        .find(|&i| text.is_char_boundary(i))
                        .unwrap_or(text.len());
                    leaks.push(format!("{label} in {what}:\n…{}…", &text[from..to]));
                }
            }
        }
        assert!(
            leaks.is_empty(),
            "{} leak(s):\n{}",
            leaks.len(),
            leaks.join("\n\n")
        );
    }
}

#[test]
fn needles_find_a_secret_inside_any_base64() {
    let secret = token();
    let mut needles = Needles::default();
    needles.plant("s", &secret);
    for prefix in ["", "a", "ab", "alice:", "user:"] {
        let encoded = base64(format!("{prefix}{secret}-tail").as_bytes());
        assert!(
            needles.0.iter().any(|(_, n)| encoded.contains(n.as_str())),
            "{prefix:?}: {encoded}"
        );
    }
    let clean = base64(token().as_bytes());
    assert!(needles.0.iter().all(|(_, n)| !clean.contains(n.as_str())));
}

fn output(what: &str, out: &Output) -> Vec<(String, String)> {
    vec![
        (
            format!("{what} stdout"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        (
            format!("{what} stderr"),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
    ]
}

/// The bearer token of the test cluster's kubeconfig: a credential as well.
fn kubeconfig_token(kubeconfig: &Path) -> String {
    support::read(kubeconfig)
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .map(|t| t.trim().to_string())
        .expect("a token in the test kubeconfig")
}

// ---------------------------------------------------------------------------------------
// The binary

fn driftless_cmd(kubeconfig: &Path, instance: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--instance", instance]);
    scrub_env(&mut cmd);
    cmd.env("RUST_LOG", "trace");
    cmd
}

/// `driftless run` at RUST_LOG=trace unless `env` says otherwise, everything it prints kept.
fn start_daemon(kubeconfig: &Path, instance: &str, args: &[&str], env: &[(&str, &str)]) -> Daemon {
    Daemon::builder(instance)
        .kubeconfig(kubeconfig)
        .args(args)
        .log_level("trace")
        .envs(env)
        .stop_within(Duration::from_secs(20))
        .start()
}

/// One HTTP/1.1 request on its own connection: (status, body).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server that refuses early may close before reading the body.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP reply from {addr}{path}: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    (status, body.to_string())
}

// ---------------------------------------------------------------------------------------
// git: repositories for `support::GitHttp`, which requires Basic auth

/// A working repository, pushed to `repo.git` under a root the HTTP server serves.
struct Repo {
    work: TempDir,
    root: TempDir,
}

impl Repo {
    fn new() -> Repo {
        let work = TempDir::new().unwrap();
        let root = TempDir::new().unwrap();
        git(work.path(), &["init", "-q", "-b", "main"]);
        git(
            root.path(),
            &["init", "-q", "--bare", "-b", "main", "repo.git"],
        );
        Repo { work, root }
    }

    fn dir(&self) -> &Path {
        self.work.path()
    }

    /// Writes `file`, commits, pushes; the commit id.
    fn commit(&self, file: &str, text: &str) -> String {
        std::fs::write(self.dir().join(file), text).unwrap();
        git(self.dir(), &["add", "-A"]);
        git(self.dir(), &["commit", "-q", "-m", "specs"]);
        let bare = self.root.path().join("repo.git");
        git(self.dir(), &["push", "-q", bare.to_str().unwrap(), "main"]);
        git(self.dir(), &["rev-parse", "HEAD"])
    }
}

// ---------------------------------------------------------------------------------------
// Specs

/// A Secret with one value in `stringData` and one in `data`.
fn secret_spec(ns: &str, password: &str, api_key: &str) -> String {
    format!(
        "[[manifest]]\napiVersion = \"v1\"\nkind = \"Secret\"\ntype = \"Opaque\"\n\
         metadata = {{ name = \"db\", namespace = \"{ns}\" }}\n\
         stringData = {{ password = \"{password}\" }}\n\
         data = {{ api-key = \"{}\" }}\n",
        base64(api_key.as_bytes())
    )
}

fn configmap_spec(ns: &str, value: &str) -> String {
    format!(
        "[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\n\
         metadata = {{ name = \"plain\", namespace = \"{ns}\" }}\n\
         data = {{ value = \"{value}\" }}\n"
    )
}

/// Waits until Secret `db` holds these values (proof that they were really planted).
async fn wait_secret(client: &kube::Client, ns: &str, password: &str, api_key: &str) {
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    support::eventually("Secret db to hold the planted values", WAIT, || async {
        let s = secrets
            .get_opt("db")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no Secret db yet")?;
        let data = s.data.unwrap_or_default();
        let value = |k: &str| {
            data.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        };
        if value("password").as_deref() == Some(password)
            && value("api-key").as_deref() == Some(api_key)
        {
            Ok(())
        } else {
            Err("other values".to_string())
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 1. Planted secrets

#[tokio::test]
async fn planted_secrets_never_reach_any_output() {
    let client = support::client().await;
    let kubeconfig = support::admin_kubeconfig();
    let ns = support::namespace(&client, "sec-plant").await;
    let instance = format!("sec-plant-{}", support::suffix(&ns));

    let git_password = token();
    let hook_secret = token();
    let (password1, key1) = (token(), token());
    let (password2, key2) = (token(), token());
    let (password3, key3) = (token(), token());
    let mut needles = Needles::default();
    needles.plant("git password", &git_password);
    needles.plant("hook secret", &hook_secret);
    for (label, value) in [
        ("Secret stringData v1", &password1),
        ("Secret data v1", &key1),
        ("Secret stringData v2", &password2),
        ("Secret data v2", &key2),
        ("Secret stringData v3", &password3),
        ("Secret data v3", &key3),
    ] {
        needles.plant(label, value);
    }
    needles.plant("kubeconfig token", &kubeconfig_token(&kubeconfig));
    let mut outputs: Vec<(String, String)> = Vec::new();

    // One-shot commands on a checkout: apply creates the Secret, diff and apply change it.
    let repo = Repo::new();
    std::fs::write(
        repo.dir().join("secret.toml"),
        secret_spec(&ns, &password1, &key1),
    )
    .unwrap();
    let run = |args: &[&str]| {
        driftless_cmd(&kubeconfig, &instance)
            .args(args)
            .output()
            .unwrap()
    };
    let dir = repo.dir().to_str().unwrap();
    let out = run(&["diff", dir]);
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(
        diff.contains("+  password: \"*** (after)\"")
            && diff.contains("+  api-key: \"*** (after)\""),
        "the diff shows the new Secret, masked:\n{diff}"
    );
    outputs.extend(output("diff (create)", &out));
    let out = run(&["apply", dir]);
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    outputs.extend(output("apply (create)", &out));
    wait_secret(&client, &ns, &password1, &key1).await;

    std::fs::write(
        repo.dir().join("secret.toml"),
        secret_spec(&ns, &password2, &key2),
    )
    .unwrap();
    let out = run(&["diff", dir]);
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(
        diff.contains("Secret") && diff.contains("*** (before)") && diff.contains("*** (after)"),
        "the diff shows the change, masked:\n{diff}"
    );
    outputs.extend(output("diff (update)", &out));
    let out = run(&["apply", dir]);
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    outputs.extend(output("apply (update)", &out));
    wait_secret(&client, &ns, &password2, &key2).await;
    let commit2 = repo.commit("secret.toml", &secret_spec(&ns, &password2, &key2));

    // The daemon, from git over HTTP with Basic auth, at trace level, with events.
    let authorization = basic("alice", &git_password);
    let server = GitHttp::serving(repo.root.path(), authorization.clone());
    let state = TempDir::new().unwrap();
    let hook_file = state.path().join("hook-secret");
    std::fs::write(&hook_file, format!("{hook_secret}\n")).unwrap();
    let url = server.url("", "repo.git");
    let mut daemon = start_daemon(
        &kubeconfig,
        &instance,
        &[
            "--git",
            &url,
            "--interval",
            "1h",
            "--events",
            "--hook-secret-file",
            hook_file.to_str().unwrap(),
        ],
        &[
            ("DRIFTLESS_GIT_USERNAME", "alice"),
            ("DRIFTLESS_GIT_PASSWORD", &git_password),
        ],
    );
    daemon
        .wait_status("the daemon to sync the first commit", |s| {
            s["revision_applied"] == commit2.as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(server.fetches(&authorization), 1, "{:?}", server.seen());

    // A new value, pushed; only a correctly signed hook makes the daemon fetch it.
    let commit3 = repo.commit("secret.toml", &secret_spec(&ns, &password3, &key3));
    let body = br#"{"ref":"refs/heads/main"}"#;
    let good = hmac_sha256_hex(hook_secret.as_bytes(), body);
    let hook = |headers: &[(&str, &str)], body: &[u8]| {
        http(daemon.metrics, "POST", "/hooks/git", headers, body)
    };
    let refused = [
        ("no signature", hook(&[], body)),
        (
            "signed with another key",
            hook(
                &[(
                    "X-Hub-Signature-256",
                    &format!("sha256={}", hmac_sha256_hex(token().as_bytes(), body)),
                )],
                body,
            ),
        ),
        (
            "another algorithm's prefix",
            hook(&[("X-Hub-Signature-256", &format!("sha1={good}"))], body),
        ),
        (
            "no algorithm prefix",
            hook(&[("X-Hub-Signature-256", &good)], body),
        ),
        (
            "the signature in another header",
            hook(&[("X-Hub-Signature", &format!("sha256={good}"))], body),
        ),
        (
            "a tampered body",
            hook(
                &[("X-Hub-Signature-256", &format!("sha256={good}"))],
                br#"{"ref":"refs/heads/evil"}"#,
            ),
        ),
        (
            "a truncated signature",
            hook(
                &[("X-Hub-Signature-256", &format!("sha256={}", &good[..32]))],
                body,
            ),
        ),
        (
            "the secret itself as the signature",
            hook(
                &[("X-Hub-Signature-256", &format!("sha256={hook_secret}"))],
                body,
            ),
        ),
    ];
    for (what, (status, reply)) in &refused {
        assert_eq!(*status, 401, "{what}: {reply}");
        outputs.push((format!("hook reply ({what})"), reply.clone()));
    }
    // Oversized, even when correctly signed: refused from its declared length.
    let big = vec![b' '; driftless::report::http::HOOK_BODY_LIMIT + 1];
    let (status, reply) = hook(
        &[(
            "X-Hub-Signature-256",
            &format!("sha256={}", hmac_sha256_hex(hook_secret.as_bytes(), &big)),
        )],
        &big,
    );
    assert_eq!(status, 413, "{reply}");
    // The refused requests fetched nothing, and the daemon still has the old commit.
    assert_eq!(server.fetches(&authorization), 1, "{:?}", server.seen());
    let (status, reply) = hook(&[("X-Hub-Signature-256", &format!("sha256={good}"))], body);
    assert_eq!(status, 202, "{reply}");
    outputs.push(("hook reply (accepted)".into(), reply));
    daemon
        .wait_status("the daemon to sync the pushed commit", |s| {
            s["revision_applied"] == commit3.as_str() && support::all_ready(s)
        })
        .await;
    wait_secret(&client, &ns, &password3, &key3).await;
    assert_eq!(server.fetches(&authorization), 2, "{:?}", server.seen());
    assert_eq!(
        daemon.log().matches("read requested by the hook").count(),
        1,
        "only the signed request asked for a fetch"
    );

    // The event recorded for the update of the Secret.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &ns);
    let list = support::eventually("an Applied event on Secret db", WAIT, || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let on_secret = list.items.iter().any(|e| {
            let r = e.regarding.as_ref();
            r.and_then(|r| r.kind.as_deref()) == Some("Secret")
                && r.and_then(|r| r.name.as_deref()) == Some("db")
                && e.reason.as_deref() == Some("Applied")
        });
        if on_secret {
            Ok(list)
        } else {
            Err(format!(
                "{:?}",
                list.items.iter().map(|e| &e.reason).collect::<Vec<_>>()
            ))
        }
    })
    .await;
    outputs.push((
        "Kubernetes events".into(),
        serde_json::to_string(&list.items).unwrap(),
    ));
    let core_events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), &ns);
    let core = core_events.list(&ListParams::default()).await.unwrap();
    outputs.push((
        "Kubernetes events (core/v1)".into(),
        serde_json::to_string(&core.items).unwrap(),
    ));

    for path in ["/metrics", "/healthz", "/readyz"] {
        let (status, body) = http(daemon.metrics, "GET", path, &[], b"");
        assert_eq!(status, 200, "{path}: {body}");
        outputs.push((format!("GET {path}"), body));
    }
    let status_file = daemon.status_file();
    for format in ["table", "json"] {
        let out = driftless_cmd(&kubeconfig, &instance)
            .args(["status", "--status-file"])
            .arg(status_file)
            .args(["--output", format])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
        outputs.extend(output(&format!("status --output {format}"), &out));
    }
    assert_eq!(daemon.stop(), Some(0));
    outputs.extend(daemon.outputs());
    let status: Value = serde_json::from_str(&daemon.status_text().unwrap()).unwrap();
    assert_eq!(status["source"], url.as_str());
    // Trace level was on: the HTTP clients' own logging was in play.
    let log = daemon.log();
    assert!(log.contains("TRACE"), "{}", tail(&log, 2000));

    needles.assert_absent(&outputs);

    // The clone holds the Secret's values too: it is the daemon's user's alone.
    let clones: Vec<_> = std::fs::read_dir(daemon.cache_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(clones.len(), 1, "{clones:?}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&clones[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
}

// 1b. A broken spec file is reported by position, without the values on its lines.

#[test]
fn spec_errors_do_not_echo_secret_values() {
    let (a, b, c, d) = (token(), token(), token(), token());
    let mut needles = Needles::default();
    for (label, value) in [("a", &a), ("b", &b), ("c", &c), ("d", &d)] {
        needles.plant(label, value);
    }
    let head = "[[manifest]]\napiVersion = \"v1\"\nkind = \"Secret\"\n";
    let dir = TempDir::new().unwrap();
    for (file, body) in [
        // An unclosed string, a duplicate key, an unquoted value, a value of the wrong type.
        (
            "a.toml",
            format!(
                "metadata = {{ name = \"a\", namespace = \"x\" }}\nstringData = {{ password = \"{a} }}\n"
            ),
        ),
        (
            "b.toml",
            format!(
                "metadata = {{ name = \"b\", namespace = \"x\" }}\nstringData = {{ password = \"{b}\", password = \"{b}\" }}\n"
            ),
        ),
        (
            "c.toml",
            format!(
                "metadata = {{ name = \"c\", namespace = \"x\" }}\nstringData = {{ password = {c} }}\n"
            ),
        ),
        (
            "d.toml",
            format!(
                "metadata = {{ name = \"d\", namespace = \"x\" }}\ndata = \"{d}\"\nstringData = [\"{d}\"]\n"
            ),
        ),
    ] {
        std::fs::write(dir.path().join(file), format!("{head}{body}")).unwrap();
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    scrub_env(&mut cmd);
    let out = cmd
        .env("RUST_LOG", "trace")
        .arg("validate")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", support::show(&out));
    for file in ["a.toml:", "b.toml:", "c.toml:"] {
        assert!(stderr.contains(file), "{file} reported: {stderr}");
    }
    needles.assert_absent(&output("validate", &out));
}

// 1c. Wrong credentials, one of them in the URL.

#[tokio::test]
async fn rejected_git_credentials_are_reported_without_them() {
    let client = support::client().await;
    let kubeconfig = support::admin_kubeconfig();
    let ns = support::namespace(&client, "sec-auth").await;
    let instance = format!("sec-auth-{}", support::suffix(&ns));
    let repo = Repo::new();
    repo.commit("cm.toml", &configmap_spec(&ns, "v"));
    let right = token();
    let (in_url, in_env) = (token(), token());
    let mut needles = Needles::default();
    needles.plant("password in the URL", &in_url);
    needles.plant("password in the environment", &in_env);
    needles.plant("kubeconfig token", &kubeconfig_token(&kubeconfig));

    let server = GitHttp::serving(repo.root.path(), basic("alice", &right));
    let url = server.url(&format!("alice:{in_url}@"), "repo.git");
    let mut daemon = start_daemon(
        &kubeconfig,
        &instance,
        &["--git", &url, "--interval", "1h"],
        &[
            ("DRIFTLESS_GIT_USERNAME", "alice"),
            ("DRIFTLESS_GIT_PASSWORD", &in_env),
        ],
    );
    let status = daemon.wait_errors("an authentication error").await;
    let message = status["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("authenticating to"), "{message}");
    assert!(
        message.contains(&server.url("", "repo.git")),
        "names the URL without its userinfo: {message}"
    );
    assert_eq!(status["source"], server.url("", "repo.git").as_str());
    assert!(status["revision_applied"].is_null(), "{status:#}");
    // The secrets did go on the wire: the test would see them if they were echoed.
    let offered: Vec<String> = server
        .seen()
        .iter()
        .filter_map(|s| s.authorization.clone())
        .collect();
    assert!(offered.contains(&basic("alice", &in_env)), "{offered:?}");
    let (code, metrics) = http(daemon.metrics, "GET", "/metrics", &[], b"");
    assert_eq!(code, 200);
    let out = driftless_cmd(&kubeconfig, &instance)
        .args(["status", "--status-file"])
        .arg(daemon.status_file())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("authenticating to"),
        "{}",
        support::show(&out)
    );
    assert_eq!(daemon.stop(), Some(0));
    // Told that argv is no place for a password.
    assert!(
        daemon.log().contains("the --git URL carries credentials"),
        "{}",
        tail(&daemon.log(), 3000)
    );
    let mut outputs = daemon.outputs();
    outputs.push(("GET /metrics".into(), metrics));
    outputs.extend(output("status", &out));
    // The userinfo is not shown anywhere, not even the user name with it.
    let userinfo = format!("alice:{in_url}@");
    assert!(
        outputs.iter().all(|(_, t)| !t.contains("alice:")),
        "userinfo shown"
    );
    needles.assert_absent(&outputs);
    // The cache never stored the URL.
    let cache = daemon.cache_dir();
    for entry in std::fs::read_dir(cache).unwrap() {
        let config = support::read(&entry.unwrap().path().join("config"));
        assert!(!config.contains(&userinfo), "{config}");
    }
}

// ---------------------------------------------------------------------------------------
// 3. The hook: an empty secret would make every signature guessable

#[test]
fn an_empty_hook_secret_is_refused_at_start() {
    let dir = TempDir::new().unwrap();
    let secret = dir.path().join("hook-secret");
    std::fs::write(&secret, " \n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    scrub_env(&mut cmd);
    let out = cmd
        .env("RUST_LOG", "warn")
        .args([
            "run",
            "--git",
            "http://127.0.0.1:9/repo.git",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .arg("--hook-secret-file")
        .arg(&secret)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", support::show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is empty"),
        "{}",
        support::show(&out)
    );
}

// ---------------------------------------------------------------------------------------
// 2. Metrics listen on loopback by default

#[test]
fn metrics_listen_on_loopback_by_default() {
    // `driftless run`'s default, as its help states it (the parsed default is checked
    // against the same loopback rule in the binary's own unit tests).
    // And so the help says.
    let out = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let default = help
        .split("--metrics-addr")
        .nth(1)
        .and_then(|rest| rest.split("[default: ").nth(1))
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no default for --metrics-addr in:\n{help}"));
    let default: SocketAddr = default.parse().unwrap();
    assert!(default.ip().is_loopback(), "{default}");
}

/// The running daemon, without `--metrics-addr`: its listening socket is on 127.0.0.1,
/// and not reachable through the machine's other addresses.
#[tokio::test]
async fn the_daemon_listens_on_loopback_by_default() {
    let client = support::client().await;
    let kubeconfig = support::admin_kubeconfig();
    let ns = support::namespace(&client, "sec-bind").await;
    let instance = format!("sec-bind-{}", support::suffix(&ns));
    let specs = TempDir::new().unwrap();
    std::fs::write(specs.path().join("cm.toml"), configmap_spec(&ns, "v")).unwrap();
    let state = TempDir::new().unwrap();
    let log = || std::fs::read_to_string(state.path().join("stderr.log")).unwrap_or_default();
    // The default port is one for the whole machine: another daemon (another run of this
    // test, say) may hold it for a while. Wait for it to be free rather than check nothing.
    let deadline = tokio::time::Instant::now() + WAIT;
    let (mut child, addr) = loop {
        let stderr = std::fs::File::create(state.path().join("stderr.log")).unwrap();
        let mut cmd = driftless_cmd(&kubeconfig, &instance);
        cmd.env("RUST_LOG", "info")
            .arg("run")
            .arg("--dir")
            .arg(specs.path())
            .arg("--status-file")
            .arg(state.path().join("status.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = KillOnDrop(cmd.spawn().unwrap());
        // Either it serves, saying where, or the default port is taken and the error names
        // the address it tried.
        let bound = support::eventually("the daemon to bind its HTTP port", WAIT, || async {
            let log = log();
            if let Some(line) = log.lines().find(|l| l.contains("serving /metrics")) {
                let addr = line
                    .split("addr=")
                    .nth(1)
                    .and_then(|a| a.split_whitespace().next())
                    .ok_or(line.to_string())?;
                return Ok(Some(addr.parse::<SocketAddr>().map_err(|e| e.to_string())?));
            }
            if log.contains("binding 127.0.0.1:9477") {
                return Ok(None);
            }
            Err(log)
        })
        .await;
        if let Some(addr) = bound {
            break (child, addr);
        }
        drop(child);
        assert!(
            tokio::time::Instant::now() < deadline,
            "127.0.0.1:9477, the default address, stayed taken for {WAIT:?}, so where the \
             daemon listens by default could not be checked; free it (`ss -ltnp 'sport = \
             :9477'` names its owner) and run this test again. The daemon's log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert_eq!(addr, "127.0.0.1:9477".parse::<SocketAddr>().unwrap());
    // The kernel's view: a listening socket on 127.0.0.1:9477 (0100007F:2505 in
    // /proc/net/tcp), none on 0.0.0.0 or any other address of that port.
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let listening: Vec<&str> = tcp
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(3) == Some(&"0A") && f[1].ends_with(":2505")).then_some(f[1])
        })
        .collect();
    assert_eq!(listening, ["0100007F:2505"], "{tcp}");
    let tcp6 = std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
    assert!(
        !tcp6.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(3) == Some(&"0A") && f.get(1).is_some_and(|a| a.ends_with(":2505"))
        }),
        "{tcp6}"
    );
    // Through another address of this machine, when it has one: refused.
    let other = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    if let Some(ip) = other {
        let reached =
            TcpStream::connect_timeout(&SocketAddr::new(ip, 9477), Duration::from_secs(5));
        assert!(reached.is_err(), "{ip}:9477 answered");
    }
    let (code, _) = http(addr, "GET", "/healthz", &[], b"");
    assert_eq!(code, 200);
    let _ = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let _ = child.0.wait();
}

/// A child process killed when the test ends, passing or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------
// 4. TLS is verified by default

/// The test cluster's kubeconfig with its CA replaced by `ca` (PEM), or with TLS
/// verification switched off when `ca` is None.
fn kubeconfig_with(dir: &Path, name: &str, ca: Option<&Path>) -> PathBuf {
    let text = support::read(&support::admin_kubeconfig());
    let replacement = match ca {
        Some(ca) => format!(
            "certificate-authority-data: {}",
            base64(support::read(ca).as_bytes())
        ),
        None => "insecure-skip-tls-verify: true".to_string(),
    };
    let mut replaced = 0;
    let text: Vec<String> = text
        .lines()
        .map(|l| match l.split_once("certificate-authority-data:") {
            Some((indent, _)) => {
                replaced += 1;
                format!("{indent}{replacement}")
            }
            None => l.to_string(),
        })
        .collect();
    assert_eq!(replaced, 1, "the test kubeconfig has one CA");
    let path = dir.join(name);
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path
}

#[tokio::test]
async fn the_apiserver_certificate_is_verified() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sec-tls-api").await;
    let instance = format!("sec-tls-api-{}", support::suffix(&ns));
    let dir = TempDir::new().unwrap();
    let other_ca = test_ca(dir.path(), "other-ca", "/CN=other-ca");
    let untrusted = kubeconfig_with(dir.path(), "untrusted.kubeconfig", Some(&other_ca));
    let specs = TempDir::new().unwrap();
    std::fs::write(specs.path().join("cm.toml"), configmap_spec(&ns, "v")).unwrap();
    let specs_dir = specs.path().to_str().unwrap();

    for args in [vec!["apply", specs_dir], vec!["diff", specs_dir]] {
        let out = driftless_cmd(&untrusted, &instance)
            .env("RUST_LOG", "warn")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", support::show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
        assert!(
            stderr.contains("certificate") || stderr.contains("unknownissuer"),
            "{}",
            support::show(&out)
        );
    }
    // Nothing was written: no object, no inventory.
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    assert!(configmaps.get_opt("plain").await.unwrap().is_none());
    let inventory = Api::<ConfigMap>::namespaced(client.clone(), "driftless-system");
    let mine = inventory
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .filter(|n| n.contains(&instance))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert!(mine.is_empty(), "{mine:?}");

    // Nor does the daemon get anywhere.
    let mut daemon = start_daemon(
        &untrusted,
        &instance,
        &["--dir", specs_dir],
        &[("RUST_LOG", "info")],
    );
    support::eventually(
        "the daemon to report the certificate error",
        WAIT,
        || async {
            let log = daemon.log();
            let lower = log.to_ascii_lowercase();
            if lower.contains("certificate") || lower.contains("unknownissuer") {
                Ok(())
            } else {
                Err(log)
            }
        },
    )
    .await;
    // And says so in its status file, not only in its log.
    support::eventually(
        "the status file to name the certificate error",
        WAIT,
        || async {
            let status = daemon.status().ok_or("no status file yet")?;
            let said = status["errors"].as_array().into_iter().flatten().any(|e| {
                let m = e["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                m.contains("cannot reach the kubernetes api") && m.contains("certificate")
            });
            if said {
                Ok(())
            } else {
                Err(status.to_string())
            }
        },
    )
    .await;
    daemon.stop();
    assert!(configmaps.get_opt("plain").await.unwrap().is_none());

    // The only way around it is the kubeconfig's own `insecure-skip-tls-verify`.
    let insecure = kubeconfig_with(dir.path(), "insecure.kubeconfig", None);
    let out = driftless_cmd(&insecure, &instance)
        .env("RUST_LOG", "warn")
        .args(["apply", specs_dir])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    assert!(configmaps.get_opt("plain").await.unwrap().is_some());
}

/// A TLS terminator in front of a local port: Python's `ssl` module, with the given
/// certificate. Killed when dropped.
struct TlsProxy {
    child: Child,
    port: u16,
}

const TLS_PROXY: &str = r#"
import select, socket, ssl, sys, threading
cert, key, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print(server.getsockname()[1], flush=True)

# One thread per connection, and only that thread touches its TLS socket: an OpenSSL
# connection read by one thread while another writes or closes it can hand the client
# bytes that are not the response.
def send_tls(tls, data):
    view = memoryview(data)
    while view:
        try:
            view = view[tls.send(view):]
        except ssl.SSLWantWriteError:
            select.select([], [tls], [])
        except ssl.SSLWantReadError:
            select.select([tls], [], [])

def relay(tls, up):
    tls.setblocking(False)
    while True:
        ready = [tls] if tls.pending() else select.select([tls, up], [], [])[0]
        if tls in ready:
            try:
                data = tls.recv(65536)
            except ssl.SSLWantReadError:
                data = None
            if data == b"":
                return
            if data:
                up.sendall(data)
        if up in ready:
            data = up.recv(65536)
            if not data:
                return
            send_tls(tls, data)

def handle(conn):
    try:
        tls = ctx.wrap_socket(conn, server_side=True)
    except (OSError, ssl.SSLError):
        conn.close()
        return
    # Upstream only once the client has sent something: a client that rejects the
    # certificate after the handshake (TLS 1.3) reaches nothing.
    try:
        first = tls.recv(65536)
    except (OSError, ssl.SSLError):
        first = b""
    if not first:
        tls.close()
        return
    up = socket.create_connection(("127.0.0.1", upstream))
    try:
        up.sendall(first)
        relay(tls, up)
    except (OSError, ssl.SSLError):
        pass
    finally:
        up.close()
        tls.close()

while True:
    conn, _ = server.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
"#;

impl TlsProxy {
    fn start(dir: &Path, cert: &Path, key: &Path, upstream: u16) -> TlsProxy {
        let script = dir.join("tls_proxy.py");
        std::fs::write(&script, TLS_PROXY).unwrap();
        let mut child = Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(cert)
            .arg(key)
            .arg(upstream.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the TLS proxy did not start: {line:?}"));
        TlsProxy { child, port }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/repo.git", self.port)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn git_server_certificates_are_verified() {
    let client = support::client().await;
    let kubeconfig = support::admin_kubeconfig();
    let ns = support::namespace(&client, "sec-tls-git").await;
    let instance = format!("sec-tls-git-{}", support::suffix(&ns));
    let repo = Repo::new();
    let commit = repo.commit("cm.toml", &configmap_spec(&ns, "over-https"));
    let password = token();
    let server = GitHttp::serving(repo.root.path(), basic("alice", &password));
    let certs = TempDir::new().unwrap();
    let ca = test_ca(certs.path(), "git-ca", "/CN=git-ca");
    let server_cn = "/CN=driftless test server";
    let (cert, key) = signed_by(certs.path(), "git-ca", "server", server_cn, "IP:127.0.0.1");
    let (wrong_cert, wrong_key) = signed_by(
        certs.path(),
        "git-ca",
        "elsewhere",
        server_cn,
        "DNS:git.example.com",
    );
    let proxy = TlsProxy::start(certs.path(), &cert, &key, server.port);
    let misnamed = TlsProxy::start(certs.path(), &wrong_cert, &wrong_key, server.port);
    let creds = [
        ("DRIFTLESS_GIT_USERNAME", "alice"),
        ("DRIFTLESS_GIT_PASSWORD", password.as_str()),
    ];
    let failed = |s: &Value| {
        s["errors"]
            .as_array()
            .and_then(|e| e.first())
            .and_then(|e| e["message"].as_str())
            .map(str::to_string)
    };

    // By default only the system's CAs are trusted: our self-made one is not.
    let url = proxy.url();
    let args = ["--git", url.as_str(), "--interval", "1h"];
    let mut daemon = start_daemon(&kubeconfig, &instance, &args, &creds);
    let status = daemon
        .wait_status("a certificate error", |s| failed(s).is_some())
        .await;
    let message = failed(&status).unwrap();
    assert!(
        message.to_ascii_lowercase().contains("certificate"),
        "{message}"
    );
    assert!(status["revision_seen"].is_null(), "{status:#}");
    daemon.stop();
    // Nothing reached the git server: the handshake failed before any request.
    assert!(server.seen().is_empty(), "{:?}", server.seen());

    // Trusting the CA (OpenSSL's SSL_CERT_FILE, which libgit2 reads) makes it work...
    let mut env = creds.to_vec();
    let ca_file = ca.to_str().unwrap();
    env.push(("SSL_CERT_FILE", ca_file));
    let mut daemon = start_daemon(&kubeconfig, &instance, &args, &env);
    daemon
        .wait_status("the commit synced over https", |s| {
            s["revision_applied"] == commit.as_str() && support::all_ready(s)
        })
        .await;
    daemon.stop();
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let cm = configmaps.get("plain").await.unwrap();
    assert_eq!(cm.data.unwrap()["value"], "over-https");

    // ...but not for a certificate issued to another name.
    let seen_before = server.seen().len();
    let url = misnamed.url();
    let args = ["--git", url.as_str(), "--interval", "1h"];
    let mut daemon = start_daemon(&kubeconfig, &instance, &args, &env);
    let status = daemon
        .wait_status("a certificate name error", |s| failed(s).is_some())
        .await;
    // libgit2 has OpenSSL check the name during the handshake, and reports the aborted
    // handshake as "SSL error: received early EOF".
    let message = failed(&status).unwrap();
    assert!(message.contains("SSL"), "{message}");
    assert!(status["revision_seen"].is_null(), "{status:#}");
    daemon.stop();
    assert_eq!(server.seen().len(), seen_before, "{:?}", server.seen());
}
