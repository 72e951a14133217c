//! Telling people, as the receivers see it: a real `driftless run` following a real git
//! repository (served by `git daemon` on loopback) on the local cluster, posting to a
//! loopback HTTP recorder that stands in for the receiving end only (a webhook, a chat,
//! GitHub's commit status API), beside a receiver that is down and one that never answers.

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{ConfigRepo, Daemon, GitDaemon, Recorder, Request, http};

const WAIT: Duration = Duration::from_secs(90);
const TOKEN: &str = "ghp-t0ken-never-logged";
const SECRET: &str = "webhook-s3cret";

/// Accepts connections and never answers: a receiver that hangs.
async fn silent_receiver() -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted: Arc<Mutex<usize>> = Arc::default();
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            held.push(stream);
        }
    });
    (addr, accepted)
}

/// GitHub status states posted for `sha`, in order.
fn states(statuses: &[Request], sha: &str) -> Vec<String> {
    statuses
        .iter()
        .filter(|s| s.path.ends_with(&format!("/statuses/{sha}")))
        .map(|s| s.json()["state"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn events(hooks: &[Request]) -> Vec<(String, String)> {
    hooks
        .iter()
        .map(|s| {
            let b = s.json();
            (
                b["event"].as_str().unwrap_or("?").to_string(),
                b["revision"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

fn web(name: &str, total_qps: u32) -> String {
    format!(
        "[elasticweb.{name}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

async fn hook(daemon: &Daemon) {
    let (code, _) = http(daemon.metrics, "POST", "/hooks/git", &[], b"{}").await;
    assert_eq!(code, 202);
}

#[tokio::test]
async fn a_good_a_broken_and_a_fixed_commit_are_told_once_each() {
    let client = support::client().await;
    let ns = support::namespace(&client, "notify").await;
    let repo = ConfigRepo::new();
    let w = repo.work();
    let specs = |qps: u32| format!("namespace = \"{ns}\"\n{}", web("shop", qps));
    std::fs::write(w.join("web.toml"), specs(100)).unwrap();
    let good = repo.commit("good");

    let recorder = Recorder::start().await;
    let (silent, silent_accepts) = silent_receiver().await;
    let down = format!("http://127.0.0.1:{}/", support::free_port());
    let secrets = tempfile::tempdir().unwrap();
    let secret_file = secrets.path().join("notify-secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let server = GitDaemon::serve(repo.base());
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--git",
            &server.url("config.git"),
            "--interval",
            "1h",
            "--resync",
            "2s",
            "--notify",
            &recorder.url("/hook"),
            "--notify",
            &down,
            "--notify",
            &format!("http://{silent}/"),
            "--notify-secret-file",
            &secret_file.to_string_lossy(),
            "--notify-slack",
            &recorder.url("/slack/services/T0/B0/secret-path"),
            "--commit-status",
            "github",
            "--commit-status-url",
            &recorder.url("/gh"),
            "--commit-status-repo",
            "team/config",
        ])
        .env("DRIFTLESS_COMMIT_STATUS_TOKEN", TOKEN)
        .wait(WAIT)
        .start();

    // A good commit: pending when its sync starts, then success once every spec is
    // ready; the webhook and the chat hear it was applied and ready.
    recorder
        .wait_for("pending then success for the good commit", "/gh", |s| {
            states(s, &good) == ["pending", "success"]
        })
        .await;
    let statuses = recorder.under("/gh");
    let first = &statuses[0];
    assert_eq!(first.path, format!("/gh/repos/team/config/statuses/{good}"));
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(first.json()["context"], format!("driftless/{ns}"));
    assert!(
        first
            .header("user-agent")
            .is_some_and(|u| u.starts_with("driftless/"))
    );
    recorder
        .wait_for("revision_ready on the webhook", "/hook", |s| {
            events(s) == [("revision_ready".to_string(), good.clone())]
        })
        .await;
    recorder
        .wait_for("the chat told", "/slack", |s| s.len() == 1)
        .await;
    let slack = recorder.under("/slack")[0].json();
    assert!(
        slack["text"]
            .as_str()
            .is_some_and(|t| t.contains("applied and ready")),
        "{slack}"
    );
    assert!(
        slack["blocks"].as_array().is_some_and(|b| !b.is_empty()),
        "{slack}"
    );

    // A broken commit: failure for it, and a signed webhook naming the file and line.
    std::fs::write(w.join("bad.toml"), "[workspace.ide]\nimage = 42\n").unwrap();
    let broken = repo.commit("broken");
    hook(&daemon).await;
    recorder
        .wait_for("failure for the broken commit", "/gh", |s| {
            states(s, &broken) == ["failure"]
        })
        .await;
    recorder
        .wait_for("revision_invalid on the webhook", "/hook", |s| {
            events(s).last() == Some(&("revision_invalid".to_string(), broken.clone()))
        })
        .await;
    let invalid = recorder.under("/hook").last().cloned().unwrap();
    let body = invalid.json();
    assert_eq!(body["instance"], ns.as_str());
    assert!(
        body["source"]
            .as_str()
            .is_some_and(|s| s.contains("config.git")),
        "{body}"
    );
    let err = &body["errors"][0];
    assert_eq!(
        (
            err["file"].as_str(),
            err["line"].as_u64(),
            err["column"].as_u64()
        ),
        (Some("bad.toml"), Some(2), Some(9)),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid")),
        "{body}"
    );
    assert_eq!(
        invalid.header("x-driftless-signature"),
        Some(
            format!(
                "sha256={}",
                support::hmac_sha256_hex(SECRET.as_bytes(), &invalid.body)
            )
            .as_str()
        ),
        "the signature is the HMAC-SHA256 of the body with the secret file's (trimmed) content"
    );

    // The fix: pending, then success, and the webhook says it recovered.
    std::fs::remove_file(w.join("bad.toml")).unwrap();
    std::fs::write(w.join("web.toml"), specs(200)).unwrap();
    let fixed = repo.commit("fixed");
    hook(&daemon).await;
    recorder
        .wait_for("pending then success for the fix", "/gh", |s| {
            states(s, &fixed) == ["pending", "success"]
        })
        .await;
    recorder
        .wait_for("recovered on the webhook", "/hook", |s| {
            events(s).last() == Some(&("recovered".to_string(), fixed.clone()))
        })
        .await;

    // Steady state: resyncs every 2 s, and nobody hears of them.
    let told = recorder.count();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        recorder.count(),
        told,
        "steady state sent more: {:#?}",
        recorder
            .under("/")
            .iter()
            .map(Request::json)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        events(&recorder.under("/hook"))
            .iter()
            .map(|(e, _)| e.as_str())
            .collect::<Vec<_>>(),
        ["revision_ready", "revision_invalid", "recovered"]
    );

    // The receiver that is down and the one that hangs held none of this up; they are
    // tried (the hanging one was connected to) and, once their retries run out, counted
    // as failed.
    assert!(*silent_accepts.lock().unwrap() >= 1);
    support::eventually("failed notifications counted", WAIT, || async {
        let (_, text) = http(daemon.metrics, "GET", "/metrics", &[], b"").await;
        let failed = text
            .lines()
            .find_map(|l| l.strip_prefix("driftless_notifications_total{result=\"failed\"} "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if failed >= 2.0 { Ok(()) } else { Err(text) }
    })
    .await;

    let log = daemon.log();
    assert!(!log.contains(TOKEN), "the token reached the log");
    assert!(!log.contains(SECRET), "the webhook secret reached the log");
    assert!(
        !log.contains("secret-path"),
        "the Slack webhook's path reached the log"
    );
    assert!(
        log.contains("notification failed"),
        "{}",
        support::tail(&log, 4000)
    );
    assert_eq!(daemon.stop(), Some(0));
    drop(server);
}

#[test]
fn commit_statuses_need_a_token_and_a_git_source() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_string_lossy();
    // Each refused at start (exit 2), saying what is missing.
    for (args, needle) in [
        (
            vec![
                "--git",
                "https://github.com/team/config.git",
                "--commit-status",
                "github",
            ],
            "DRIFTLESS_COMMIT_STATUS_TOKEN",
        ),
        (vec!["--dir", &dir, "--commit-status", "github"], "--git"),
        (
            vec!["--dir", &dir, "--notify", "ftp://example/"],
            "http:// or https://",
        ),
    ] {
        let out = support::driftless(&[&["run"], args.as_slice()].concat());
        assert_eq!(out.status.code(), Some(2), "{}", support::show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{}",
            support::show(&out)
        );
    }
}
