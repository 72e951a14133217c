//! The report surface without a cluster: the HTTP server over a real loopback socket, the
//! status file's atomic replace under a concurrent reader, and `driftless status`.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use driftless::report::http::{self, HttpState};
use driftless::report::metrics::Metrics;
use driftless::report::metrics::SpecGauges;
use driftless::report::status::{
    LastSync, ObjectState, SourceError, SpecStatus, StatusFile, figures_of, replace,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

type TestResult = Result<(), Box<dyn std::error::Error>>;

// ---------------------------------------------------------------------------------------
// HTTP

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on its own connection; plain enough to not need a client crate.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Reply, Box<dyn std::error::Error>> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let framed = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !framed("content-length") && !framed("transfer-encoding") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), exchange).await??;
    parse_reply(&raw)
}

/// A request whose body stops after `sent`, the connection left open: the reply of a
/// server that answers while reading. Reading the reply with nothing of ours left unread
/// on the server's side, its close cannot turn into a reset that loses the reply.
async fn unfinished_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    sent: &[u8],
) -> Result<Reply, Box<dyn std::error::Error>> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(sent).await?;
        // Until the whole reply (its head and Content-Length bytes) or the server's close.
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            if let Ok(reply) = parse_reply(&raw)
                && reply
                    .header("content-length")
                    .and_then(|l| l.parse::<usize>().ok())
                    .is_some_and(|l| reply.body.len() >= l)
            {
                break;
            }
        }
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| format!("no reply to {method} {path} within 10 s of an unfinished body"))??;
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> Result<Reply, Box<dyn std::error::Error>> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no end of headers")?;
    let mut lines = head.lines();
    let status_line = lines.next().ok_or("empty reply")?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .ok_or("no status code")?
        .parse()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: body.to_string(),
    })
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
}

impl Server {
    async fn start(
        hook: Option<mpsc::Sender<()>>,
        hook_secret: Option<Vec<u8>>,
    ) -> Result<Server, Box<dyn std::error::Error>> {
        let listener = http::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let metrics = Arc::new(Metrics::new());
        let ready = Arc::new(AtomicBool::new(false));
        let state = HttpState {
            metrics: metrics.clone(),
            ready: ready.clone(),
            unready: None,
            hook: hook.map(|h| ("git", h)),
            hook_secret,
            api: None,
            gate: None,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(http::serve_on(listener, state, async {
            let _ = stopped.await;
        }));
        Ok(Server {
            addr,
            stop: Some(stop),
            task,
            metrics,
            ready,
        })
    }

    async fn get(&self, path: &str) -> Result<Reply, Box<dyn std::error::Error>> {
        request(self.addr, "GET", path, &[], b"").await
    }

    async fn hook(
        &self,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Reply, Box<dyn std::error::Error>> {
        request(self.addr, "POST", "/hooks/git", headers, body).await
    }

    async fn stop(mut self) -> TestResult {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.task).await???;
        Ok(())
    }
}

#[tokio::test]
async fn probes_and_metrics() -> TestResult {
    let server = Server::start(None, None).await?;

    let health = server.get("/healthz").await?;
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));

    assert_eq!(server.get("/readyz").await?.status, 503);
    server.ready.store(true, Ordering::Release);
    assert_eq!(server.get("/readyz").await?.status, 200);

    server.metrics.set_revision("abc123");
    server.metrics.set_spec(
        "elasticweb",
        "shop",
        "web",
        SpecGauges {
            ready: true,
            ..SpecGauges::default()
        },
    );
    let page = server.get("/metrics").await?;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(page.body.ends_with("# EOF\n"), "{}", page.body);
    // Every sample line is `name{labels} value` with a number for value.
    for line in page.body.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap_or_default();
        assert!(
            value.parse::<f64>().is_ok() || value == "+Inf",
            "bad sample line: {line}"
        );
        let name_end = line.find(['{', ' ']).unwrap_or(0);
        assert!(line[..name_end].starts_with("driftless_"), "{line}");
    }
    assert!(
        page.body
            .contains("driftless_source_revision_info{revision=\"abc123\"} 1\n")
    );
    assert!(page.body.contains("# TYPE driftless_sync counter\n"));

    assert_eq!(server.get("/nope").await?.status, 404);
    server.stop().await
}

#[tokio::test]
async fn hook_without_secret_schedules_a_fetch() -> TestResult {
    let (tx, mut rx) = mpsc::channel(1);
    let server = Server::start(Some(tx), None).await?;

    let reply = server.hook(&[], b"{}").await?;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(rx.try_recv(), Ok(()));

    // A full channel means a fetch is already pending: still accepted, one fetch queued.
    for _ in 0..3 {
        assert_eq!(server.hook(&[], b"{}").await?.status, 202);
    }
    assert_eq!(rx.try_recv(), Ok(()));
    assert!(rx.try_recv().is_err());

    assert_eq!(server.get("/hooks/git").await?.status, 405);

    // The fetcher is gone: say so rather than pretend.
    drop(rx);
    assert_eq!(server.hook(&[], b"{}").await?.status, 503);
    server.stop().await
}

#[tokio::test]
async fn hook_with_secret_needs_a_valid_signature() -> TestResult {
    let secret = b"correct horse battery staple".to_vec();
    let (tx, mut rx) = mpsc::channel(4);
    let server = Server::start(Some(tx), Some(secret.clone())).await?;
    let body = br#"{"ref":"refs/heads/main","after":"0123abcd"}"#;

    assert_eq!(server.hook(&[], body).await?.status, 401);
    let wrong = format!(
        "sha256={}",
        support::hmac_sha256_hex(b"not the secret", body)
    );
    let reply = server
        .hook(&[("X-Hub-Signature-256", &wrong)], body)
        .await?;
    assert_eq!(reply.status, 401);
    assert!(!reply.body.contains("correct horse"), "{}", reply.body);
    let tampered = format!(
        "sha256={}",
        support::hmac_sha256_hex(&secret, b"another body")
    );
    assert_eq!(
        server
            .hook(&[("X-Hub-Signature-256", &tampered)], body)
            .await?
            .status,
        401
    );
    assert_eq!(
        server
            .hook(&[("X-Hub-Signature-256", "sha256=zz")], body)
            .await?
            .status,
        401
    );
    assert!(
        rx.try_recv().is_err(),
        "a rejected hook must not trigger a fetch"
    );

    let good = format!("sha256={}", support::hmac_sha256_hex(&secret, body));
    let reply = server.hook(&[("X-Hub-Signature-256", &good)], body).await?;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(rx.try_recv(), Ok(()));
    server.stop().await
}

#[tokio::test]
async fn hook_disabled_is_not_found() -> TestResult {
    let server = Server::start(None, None).await?;
    assert_eq!(server.hook(&[], b"{}").await?.status, 404);
    server.stop().await
}

#[tokio::test]
async fn oversized_hook_bodies_are_refused() -> TestResult {
    let (tx, mut rx) = mpsc::channel(1);
    let server = Server::start(Some(tx), None).await?;
    let too_big = (http::HOOK_BODY_LIMIT + 1).to_string();

    // Refused on the declared length: a client waiting for 100 Continue sends nothing.
    let reply = server
        .hook(
            &[("Content-Length", &too_big), ("Expect", "100-continue")],
            b"",
        )
        .await?;
    assert_eq!(reply.status, 413, "{}", reply.body);

    // Without a declared length the limit applies while reading: one chunk a byte too
    // large, and the body never finished, so only a server that counts as it reads
    // answers at all.
    let body = vec![b'x'; http::HOOK_BODY_LIMIT + 1];
    let chunk = [
        format!("{:x}\r\n", body.len()).into_bytes(),
        body,
        b"\r\n".to_vec(),
    ]
    .concat();
    let reply = unfinished_request(
        server.addr,
        "POST",
        "/hooks/git",
        &[("Transfer-Encoding", "chunked")],
        &chunk,
    )
    .await?;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert!(rx.try_recv().is_err());

    // Right at the limit is fine.
    let body = vec![b'x'; http::HOOK_BODY_LIMIT];
    assert_eq!(server.hook(&[], &body).await?.status, 202);
    server.stop().await
}

#[tokio::test]
async fn shutdown_stops_the_server_and_frees_the_port() -> TestResult {
    let server = Server::start(None, None).await?;
    let addr = server.addr;
    assert!(http::bind(addr).await.is_err(), "the port is taken");
    server.stop().await?;
    assert!(TcpStream::connect(addr).await.is_err());
    // Rebinding works once it is gone.
    drop(http::bind(addr).await?);
    Ok(())
}

#[tokio::test]
async fn an_empty_secret_is_refused() -> TestResult {
    let listener = http::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let state = HttpState {
        metrics: Arc::new(Metrics::new()),
        ready: Arc::default(),
        unready: None,
        hook: Some(("git", mpsc::channel(1).0)),
        hook_secret: Some(Vec::new()),
        api: None,
        gate: None,
    };
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        http::serve_on(listener, state, std::future::pending()),
    )
    .await?;
    assert!(result.is_err());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Status file

fn status(n_specs: usize, revision: &str, ready: bool) -> StatusFile {
    let specs = (0..n_specs)
        .map(|i| SpecStatus {
            id: format!("elasticweb/team-{i}/web"),
            kind: "elasticweb".into(),
            namespace: format!("team-{i}"),
            name: "web".into(),
            file: format!("teams/team-{i}.toml"),
            line: 1,
            rendered_by: None,
            ready,
            status: if ready { "Current" } else { "InProgress" }.into(),
            reason: None,
            message: format!("Deployment team-{i}/web: Available: 1/3 at {revision}"),
            figures: figures_of(&serde_json::json!({
                "kind": "elasticweb", "desired_replicas": 3,
                "available_replicas": if ready { 3 } else { 1 }, "real_qps": 300 * i
            })),
            objects: vec![ObjectState {
                object: format!("Deployment team-{i}/web"),
                status: "Current".into(),
                reason: None,
                message: "Deployment is available. Replicas: 3".into(),
                action: Some("updated".into()),
                error: None,
            }],
            suspended: None,
            drifted: vec![],
            warnings: vec![],
            revision: None,
            app: None,
            member: None,
        })
        .collect();
    StatusFile {
        releases: Vec::new(),
        apps: Vec::new(),
        written: Some(k8s_openapi::jiff::Timestamp::now().to_string()),
        instance: "default".into(),
        kubernetes: None,
        cluster: None,
        version: 1,
        source: "dir:/specs".into(),
        revision_seen: Some(revision.into()),
        revision_applied: Some(revision.into()),
        last_sync: Some(LastSync {
            time: "2025-03-01T12:00:00Z".into(),
            result: "success".into(),
            duration_seconds: 0.5,
            message: None,
            applied: 1,
            unchanged: n_specs as u64,
            pruned: 0,
            failed: 0,
        }),
        errors: vec![],
        specs,
        leader: None,
        shard: None,
        syncing: false,
        sync_progress: None,
        drift: "correct".into(),
    }
}

#[test]
fn a_reader_never_sees_a_torn_status_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("status.json");
    // Big enough (hundreds of KiB) that a non-atomic write would be seen half done.
    let versions = [status(1500, "aaaa", true), status(1500, "bbbb", false)];
    replace(&path, &versions[0])?;
    assert!(std::fs::metadata(&path)?.len() > 256 * 1024);

    let done = AtomicBool::new(false);
    let (writes, reads) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| -> Result<usize, String> {
            // A count, not a time budget: a loaded machine makes fewer writes per second,
            // and the test must not depend on how many.
            let mut writes = 0;
            while writes < 40 {
                let v = &versions[(writes + 1) % 2];
                replace(&path, v).map_err(|e| e.to_string())?;
                writes += 1;
            }
            done.store(true, Ordering::Release);
            Ok(writes)
        });
        let reader = scope.spawn(|| -> Result<usize, String> {
            let mut reads = 0;
            // At least a few reads even on a machine where the writer finishes first.
            while !done.load(Ordering::Acquire) || reads < 10 {
                let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
                let parsed: StatusFile = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("read {reads}: torn file ({} bytes): {e}", bytes.len()))?;
                if parsed != versions[0] && parsed != versions[1] {
                    return Err(format!("read {reads}: a third version"));
                }
                reads += 1;
            }
            Ok(reads)
        });
        (writer.join(), reader.join())
    });
    let writes = writes.map_err(|_| "writer panicked")??;
    let reads = reads.map_err(|_| "reader panicked")??;
    assert!(
        writes == 40 && reads >= 10,
        "writes {writes}, reads {reads}"
    );

    let leftovers: Vec<_> = std::fs::read_dir(dir.path())?
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n != "status.json")
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    Ok(())
}

fn driftless_status(args: &[&str]) -> Result<(i32, String, String), Box<dyn std::error::Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .arg("status")
        .args(args)
        .output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

fn path_str(p: &Path) -> Result<&str, Box<dyn std::error::Error>> {
    Ok(p.to_str().ok_or("non-UTF-8 temp path")?)
}

#[test]
fn status_command_prints_a_table_or_json() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("status.json");
    let mut file = status(2, "0123abcd", true);
    replace(&path, &file)?;
    let p = path_str(&path)?;

    let (code, out, err) = driftless_status(&["--status-file", p])?;
    assert_eq!(code, 0, "converged → 0; stderr: {err}");
    assert!(out.contains("source:           dir:/specs\n"), "{out}");
    assert!(out.contains("revision applied: 0123abcd\n"), "{out}");
    assert!(out.contains("specs:            2/2 ready\n"), "{out}");
    assert!(
        out.contains("2025-03-01T12:00:00Z ("),
        "the age is shown: {out}"
    );
    let header = out
        .lines()
        .find(|l| l.starts_with("ID "))
        .unwrap_or_default();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["ID", "READY", "STATUS", "FIGURES", "MESSAGE"]
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("elasticweb/team-1/web ") && l.contains("replicas 3/3 qps 300")),
        "{out}"
    );

    assert!(out.ends_with("\nconverged\n"), "{out}");
    let (code, out, _) = driftless_status(&["--status-file", p, "--output", "json"])?;
    assert_eq!(code, 0);
    let back: StatusFile = serde_json::from_str(&out)?;
    assert_eq!(back, file);

    // Without --status-file: where `run` writes it by default, one file per instance.
    let state = tempfile::tempdir()?;
    std::fs::create_dir_all(state.path().join("driftless"))?;
    std::fs::copy(&path, state.path().join("driftless/status-blue.json"))?;
    let by_default = |instance: &str| {
        Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args(["--instance", instance, "status"])
            .env("XDG_STATE_HOME", state.path())
            .env_remove("STATE_DIRECTORY")
            .env_remove("DRIFTLESS_STATUS_FILE")
            .output()
    };
    let out = by_default("blue")?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = by_default("green")?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("driftless/status-green.json"));

    // Not converged: an invalid newest revision and a spec not ready → 1, still printed.
    file.revision_seen = Some("badc0ffe".into());
    file.errors = vec![SourceError {
        app: None,
        file: Some("teams/team-0.toml".into()),
        line: Some(3),
        column: Some(9),
        message: "unknown field `replica`".into(),
    }];
    file.specs[1].ready = false;
    replace(&path, &file)?;
    let (code, out, _) = driftless_status(&["--status-file", p])?;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("  teams/team-0.toml:3:9: unknown field `replica`\n"),
        "{out}"
    );
    assert!(out.contains("specs:            1/2 ready\n"), "{out}");
    assert!(
        out.contains("\nnot converged:\n  - 1 error: unknown field `replica`\n"),
        "{out}"
    );
    assert!(
        out.contains("\n  - revision badc0ffe is not applied (applied: 0123abcd)\n"),
        "{out}"
    );
    let (code, _, _) = driftless_status(&["--status-file", p, "-o", "json"])?;
    assert_eq!(code, 1);
    Ok(())
}

#[test]
fn status_command_without_a_readable_file_exits_2() -> TestResult {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("missing.json");
    let (code, out, err) = driftless_status(&["--status-file", path_str(&missing)?])?;
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("reading status file") && err.contains("missing.json"),
        "{err}"
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ not json")?;
    let (code, _, err) = driftless_status(&["--status-file", path_str(&bad)?])?;
    assert_eq!(code, 2);
    assert!(err.contains("not a valid driftless status file"), "{err}");
    Ok(())
}

/// The strictest OpenMetrics parser at hand is the Python client's (Debian:
/// python3-prometheus-client, installed by testbed/install.sh); `promtool check metrics`
/// (in tests/daemon.rs) checks the same page as Prometheus text.
#[tokio::test]
async fn metrics_parse_as_openmetrics() -> TestResult {
    let python = "/usr/bin/python3";
    let parser = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        for f in text_string_to_metric_families(sys.stdin.read()):\n    \
            print(f.name, f.type, len(f.samples))\n";
    let available = Command::new(python)
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        available,
        "{python} has no prometheus_client: run testbed/install.sh (installs python3-prometheus-client)"
    );
    let server = Server::start(None, None).await?;
    let m = &server.metrics;
    m.sync_finished("failed", Duration::from_millis(20), 1.7e9);
    m.set_spec(
        "workspace",
        "dev",
        "alice",
        SpecGauges {
            ready: false,
            ..SpecGauges::default()
        },
    );
    m.add_api_writes("apply", 2);
    m.add_api_writes("delete", 1);
    m.add_drift_corrections(1);
    m.add_pruned(1);
    m.set_revision("refs/heads/main@\"0123\"");
    m.set_real_qps("shop", "web", 1200.0);
    m.observe_change_to_ready(3.0);
    let page = server.get("/metrics").await?;
    server.stop().await?;

    let mut child = Command::new(python)
        .args(["-c", parser])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, page.body.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8(out.stdout)?;
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        page.body
    );
    for family in [
        "driftless_sync counter 4",
        "driftless_sync_duration_seconds histogram",
        "driftless_last_sync_timestamp_seconds gauge 1",
        "driftless_spec_ready gauge 1",
        "driftless_api_writes counter 2",
        "driftless_drift_corrections counter 1",
        "driftless_pruned_objects counter 1",
        "driftless_source_revision_info gauge 1",
        "driftless_elasticweb_real_qps gauge 1",
        "driftless_change_to_ready_seconds histogram",
    ] {
        assert!(stdout.contains(family), "{family}:\n{stdout}");
    }
    Ok(())
}
