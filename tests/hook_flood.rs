//! A flood of `POST /hooks/git` at a running daemon with a git source: 300 requests at
//! once, signed, forged, with binary bodies and with oversized declared lengths (Argo CD
//! was crashed by large and malformed webhook payloads; Flux users saw one webhook start
//! some 200 reconciles). Every request gets its answer, the accepted ones collapse into a
//! few fetches (`support::GitHttp` counts them), and the daemon stays up and synced.

use crate::support;

use std::net::SocketAddr;

use support::{Daemon, GitHttp, all_ready, basic, git, hmac_sha256_hex, http, status_and_body};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REQUESTS: usize = 300;
/// Fetches the flood may cause at most. Each fetch sees every push made before it starts;
/// hook fetches are at least 2 s apart (`HOOK_FETCH_SPACING` in src/daemon/source.rs) and
/// the hooks that arrive meanwhile are answered by the next one, so a burst of a few
/// seconds is two or three fetches, however many requests it holds (queued one by one,
/// each of the 210 accepted here made a fetch of its own).
const MAX_FETCHES: usize = 5;

fn web(ns: &str, total_qps: u32) -> String {
    format!(
        "namespace = \"{ns}\"\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
         single-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

/// One raw request; its status code (0 when the connection broke first). Writing may fail
/// once the daemon has answered and closed (an oversized body is refused from its
/// declared length, before it is read), so only the reply counts.
async fn send(addr: SocketAddr, request: Vec<u8>) -> u16 {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return 0;
    };
    let _ = stream.write_all(&request).await;
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply).await;
    status_and_body(&reply).0
}

fn request(headers: &[(&str, &[u8])], body: &[u8], declared: usize) -> Vec<u8> {
    let mut r = format!(
        "POST /hooks/git HTTP/1.1\r\nHost: driftless\r\nConnection: close\r\n\
         Content-Length: {declared}\r\n"
    )
    .into_bytes();
    for (name, value) in headers {
        r.extend_from_slice(name.as_bytes());
        r.extend_from_slice(b": ");
        r.extend_from_slice(value);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"\r\n");
    r.extend_from_slice(body);
    r
}

/// The flood, and the status code each kind of request must get.
fn flood(secret: &[u8]) -> Vec<(&'static str, Vec<u8>, u16)> {
    let push = br#"{"ref":"refs/heads/main","after":"0000"}"#;
    (0..REQUESTS)
        .map(|i| {
            // Bytes of every value, different for each request.
            let binary: Vec<u8> = (0..2048).map(|j| ((i * 31 + j * 7) % 256) as u8).collect();
            match i % 10 {
                // A forged signature, and one that is not text.
                7 => {
                    let r = request(&[("X-Hub-Signature-256", b"sha256=00")], push, push.len());
                    ("forged", r, 401)
                }
                8 => {
                    let r = request(
                        &[("X-Hub-Signature-256", &[b's', 0xff, 0xfe, b'='])],
                        push,
                        push.len(),
                    );
                    ("non-text signature", r, 401)
                }
                // Declares 8 MiB and sends 2 KiB of it: refused from the header.
                9 => ("oversized", request(&[], &binary, 8 << 20), 413),
                // Signed binary: the daemon never parses a hook body.
                3 => {
                    let sig = format!("sha256={}", hmac_sha256_hex(secret, &binary));
                    let r = request(
                        &[("X-Hub-Signature-256", sig.as_bytes())],
                        &binary,
                        binary.len(),
                    );
                    ("signed binary", r, 202)
                }
                _ => {
                    let sig = format!("sha256={}", hmac_sha256_hex(secret, push));
                    let r = request(
                        &[
                            ("X-Hub-Signature-256", sig.as_bytes()),
                            ("Content-Type", b"application/json"),
                        ],
                        push,
                        push.len(),
                    );
                    ("signed push", r, 202)
                }
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_flood_collapses_into_a_few_fetches() {
    let client = support::client().await;
    let ns = support::namespace(&client, "hook-flood").await;
    let root = TempDir::new().unwrap();
    git(
        root.path(),
        &["init", "-q", "--bare", "-b", "main", "config.git"],
    );
    let bare = root.path().join("config.git");
    let work = TempDir::new().unwrap();
    let commit = |total_qps: u32| {
        std::fs::write(work.path().join("app.toml"), web(&ns, total_qps)).unwrap();
        git(work.path(), &["add", "-A"]);
        git(work.path(), &["commit", "-q", "-m", "specs"]);
        git(work.path(), &["push", "-q", bare.to_str().unwrap(), "main"]);
        git(work.path(), &["rev-parse", "HEAD"])
    };
    git(work.path(), &["init", "-q", "-b", "main"]);
    let first = commit(100);

    let token = "flood-token";
    let authorization = basic("git", token);
    let server = GitHttp::serving(root.path(), authorization.clone());
    let secret = b"flood-hook-secret";
    let state = TempDir::new().unwrap();
    let secret_file = state.path().join("hook-secret");
    std::fs::write(&secret_file, secret).unwrap();
    let url = server.url("", "config.git");
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--git",
            &url,
            "--interval",
            "1h",
            "--hook-secret-file",
            secret_file.to_str().unwrap(),
        ])
        .env("DRIFTLESS_GIT_TOKEN", token)
        .start();
    daemon
        .wait_status("the first commit applied", |s| {
            s["revision_applied"] == first.as_str() && all_ready(s)
        })
        .await;
    let before = server.fetches(&authorization);

    // A push, announced 300 times at once.
    let second = commit(200);
    let tasks: Vec<_> = flood(secret)
        .into_iter()
        .map(|(what, request, want)| {
            let addr = daemon.metrics;
            tokio::spawn(async move { (what, send(addr, request).await, want) })
        })
        .collect();
    let mut wrong = Vec::new();
    for task in tasks {
        let (what, got, want) = task.await.unwrap();
        if got != want {
            wrong.push(format!("{what}: {got}, not {want}"));
        }
    }
    assert!(wrong.is_empty(), "{} wrong answers: {wrong:?}", wrong.len());

    daemon
        .wait_status("the pushed commit applied", |s| {
            s["revision_applied"] == second.as_str() && all_ready(s)
        })
        .await;
    daemon.assert_alive("after the flood");
    let (code, _) = http(daemon.metrics, "GET", "/healthz", &[], b"").await;
    assert_eq!(code, 200);
    // A hook taken during the last fetch may still start one more: counted once the count
    // holds still (a fetch from loopback takes well under the pause).
    let mut fetches = server.fetches(&authorization) - before;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let now = server.fetches(&authorization) - before;
        if now == fetches {
            break;
        }
        fetches = now;
    }
    println!("{REQUESTS} hook requests: {fetches} fetches");
    assert!(
        (1..=MAX_FETCHES).contains(&fetches),
        "{fetches} fetches for one burst of hooks:\n{:?}",
        server.seen()
    );
}
