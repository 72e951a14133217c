//! Quiet, honest output of one-shot commands (issue #20, item 7): the real binary says a
//! warning once and an error once, in its own words, without library log lines; and ends
//! quietly when its reader goes away, as git does.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use support::{admin_kubeconfig, read, show};

const INSECURE_WARNING: &str = "the kubeconfig sets insecure-skip-tls-verify";

/// The binary as a user runs it: with `RUST_LOG` as given, or unset (the defaults).
fn driftless_with(rust_log: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    support::scrub_env(&mut cmd);
    cmd.args(args).env_remove("RUST_LOG");
    if let Some(level) = rust_log {
        cmd.env("RUST_LOG", level);
    }
    cmd.output().expect("run driftless")
}

fn driftless(args: &[&str]) -> Output {
    driftless_with(None, args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A spec tree of one elasticweb in `ns`.
fn specs(dir: &Path, ns: &str) -> String {
    let specs = dir.join("specs");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(
        specs.join("web.toml"),
        format!("namespace = \"{ns}\"\n[elasticweb.web]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = 200\n"),
    )
    .unwrap();
    specs.to_string_lossy().into_owned()
}

/// kube's client warns on every TLS handshake that skips verification ("Server cert
/// bypassed", once per connection); driftless says it once, in its words.
#[tokio::test]
async fn insecure_skip_tls_verify_is_warned_about_once() {
    let admin = support::client().await;
    let ns = support::namespace(&admin, "quiet-tls").await;
    let dir = tempfile::tempdir().unwrap();
    let mut config: Value = serde_saphyr::from_str(&read(&admin_kubeconfig())).unwrap();
    let cluster = &mut config["clusters"][0]["cluster"];
    let map = cluster.as_object_mut().unwrap();
    map.remove("certificate-authority-data");
    map.remove("certificate-authority");
    map.insert("insecure-skip-tls-verify".into(), Value::Bool(true));
    let kubeconfig = dir.path().join("insecure.kubeconfig");
    std::fs::write(&kubeconfig, serde_json::to_string(&config).unwrap()).unwrap();
    let specs = specs(dir.path(), &ns);
    let kubeconfig = kubeconfig.to_string_lossy();
    for (rust_log, command) in [
        (None, "diff"),
        // A level names no library: they stay out. (apply opens more connections.)
        (Some("warn"), "apply"),
    ] {
        let out = driftless_with(
            rust_log,
            &[
                "--kubeconfig",
                &kubeconfig,
                "--instance",
                &ns,
                command,
                &specs,
            ],
        );
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", show(&out));
        let err = stderr(&out);
        assert_eq!(err.matches(INSECURE_WARNING).count(), 1, "{}", show(&out));
        assert!(
            !err.contains("kube_client") && !err.contains("bypassed"),
            "{}",
            show(&out)
        );
    }
    // Asked for by name, kube's own lines come back.
    let out = driftless_with(
        Some("warn,kube_client=warn"),
        &[
            "--kubeconfig",
            &kubeconfig,
            "--instance",
            &ns,
            "diff",
            &specs,
        ],
    );
    assert!(
        stderr(&out).contains("Server cert bypassed"),
        "{}",
        show(&out)
    );
}

/// An "apiserver" on loopback that answers 500 to every request.
fn failing_apiserver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                // The request head; these requests (GET, and a body-less start) need no more.
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line == "\r\n" {
                        let body = "internal error";
                        let _ = write!(
                            stream,
                            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    format!("http://{addr}")
}

/// A 500 is reported once, by driftless; kube's client logged its own ERROR line first.
#[test]
fn an_apiserver_error_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = failing_apiserver();
    let kubeconfig = dir.path().join("failing.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let specs = specs(dir.path(), "quiet-500");
    let out = driftless(&[
        "--kubeconfig",
        &kubeconfig.to_string_lossy(),
        "diff",
        &specs,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{}", show(&out));
    assert!(
        lines[0].starts_with("driftless: ") && lines[0].contains("500"),
        "{}",
        show(&out)
    );
    assert!(
        !err.contains("kube_client") && !err.contains("ERROR"),
        "{}",
        show(&out)
    );
}

/// `driftless render | head -1`: the reader goes after one line; driftless stops without
/// a word and exits 141, as a process killed by SIGPIPE shows in a shell.
#[test]
fn a_closed_pipe_ends_render_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Far more than a pipe holds (64 KiB), so writing has to wait for the reader.
    let text: String = (0..500)
        .map(|i| format!("[elasticweb.web{i}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = 100\n"))
        .collect();
    std::fs::write(dir.path().join("many.toml"), text).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    support::scrub_env(&mut cmd);
    let mut child = cmd
        .args(["render", &dir.path().to_string_lossy()])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
    } // closed here
    assert_eq!(first, "apiVersion: apps/v1\n");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(err, "");
    assert_eq!(status.code(), Some(141));
}
