//! The daemon's listener (issue 76): TLS with the operator's certificate, read again when
//! it is renewed on disk, met by real `curl`, `openssl` and the CLI's own client; and
//! every control answered, allowed or refused, said in one audit line.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use support::{Daemon, self_signed_certificate, signed_by, test_ca};
use tempfile::TempDir;

fn configmap(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  mode: \"on\"\n"
    )
}

/// `curl -sS ARGS`: (it succeeded, stdout, stderr).
fn curl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30"])
        .args(args)
        .output()
        .expect("curl is installed");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The subject of the certificate the server at `addr` presents, as `openssl s_client`
/// reads it.
fn served_subject(addr: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} </dev/null 2>/dev/null | openssl x509 -noout -subject"
        ))
        .output()
        .expect("openssl is installed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `driftless run --dir DIR --metrics-addr ADDR --tls-cert-file CERT --tls-key-file KEY
/// EXTRA…`, for a start that is refused before it reaches a cluster.
fn run_with_tls(dir: &Path, addr: &str, cert: &Path, key: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    support::scrub_env(&mut cmd);
    cmd.env("RUST_LOG", "warn")
        .args(["run", "--dir"])
        .arg(dir)
        .args(["--metrics-addr", addr, "--tls-cert-file"])
        .arg(cert)
        .arg("--tls-key-file")
        .arg(key)
        .args(extra)
        .output()
        .unwrap()
}

fn show(out: &Output) -> String {
    support::show(out)
}

#[tokio::test]
async fn the_listener_serves_tls_and_takes_a_renewed_certificate() {
    let client = support::client().await;
    let ns = support::namespace(&client, "listen-tls").await;
    let instance = format!("listen-tls-{}", support::suffix(&ns));
    let specs = TempDir::new().unwrap();
    std::fs::write(specs.path().join("cm.yaml"), configmap(&ns)).unwrap();
    let certs = TempDir::new().unwrap();
    let dir = certs.path();
    // The first certificate as `openssl req -x509` makes one (CA:TRUE), self-signed.
    let first = self_signed_certificate(dir, "first");
    let (cert, key) = (dir.join("listener.crt"), dir.join("listener.key"));
    std::fs::copy(&first, &cert).unwrap();
    std::fs::copy(dir.join("first.key"), &key).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "listener-test-token\n").unwrap();
    let (cert_s, key_s, token_s) = (
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        token.to_str().unwrap(),
    );
    let mut daemon = Daemon::builder(&instance)
        .args(&[
            "--dir",
            specs.path().to_str().unwrap(),
            "--tls-cert-file",
            cert_s,
            "--tls-key-file",
            key_s,
            "--api-token-file",
            token_s,
        ])
        .start();
    daemon
        .wait_status("the first sync", |s| s["last_sync"]["result"] == "success")
        .await;
    let addr = daemon.metrics.to_string();
    let url = |path: &str| format!("https://{addr}{path}");
    let first_s = first.to_str().unwrap();

    // TLS with the given certificate, 1.3 and 1.2 alike; plain HTTP gets no answer.
    let (ok, body, err) = curl(&["--cacert", first_s, &url("/healthz")]);
    assert!(ok && body == "ok", "{body} {err}\n{}", daemon.log());
    let (ok, body, err) = curl(&[
        "--tlsv1.2",
        "--tls-max",
        "1.2",
        "--cacert",
        first_s,
        &url("/readyz"),
    ]);
    assert!(ok && body == "ready", "TLS 1.2: {body} {err}");
    let (ok, body, _) = curl(&[&format!("http://{addr}/healthz")]);
    assert!(!ok && body.is_empty(), "plain HTTP was answered: {body}");
    // Without trusting it, curl refuses the certificate.
    let (ok, _, err) = curl(&[&url("/healthz")]);
    assert!(!ok && err.contains("certificate"), "{err}");

    // The CLI's controls over TLS: trusting the self-signed certificate it is given, as
    // curl does; refused in one line without it.
    let server = url("");
    let reconcile = |ca: Option<&str>| {
        let mut args = vec![
            "reconcile",
            "--server",
            &server,
            "--token-file",
            token_s,
            "--timeout",
            "2m",
        ];
        if let Some(ca) = ca {
            args.extend(["--ca-file", ca]);
        }
        support::driftless(&args)
    };
    let out = reconcile(Some(first_s));
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("sync success"),
        "{}",
        show(&out)
    );
    // Each control in one audit line: who, from where, what, the answer; a refusal
    // with its reason.
    let audit = |what: &str| -> Vec<String> {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("driftless::audit") && l.contains(what))
            .map(str::to_string)
            .collect()
    };
    let lines = audit("POST /api/v1/sync");
    assert_eq!(lines.len(), 1, "{}", daemon.log());
    for field in ["who=\"api-token\"", "from=\"127.0.0.1:", "answer=200"] {
        assert!(lines[0].contains(field), "{field} in {}", lines[0]);
    }
    let (ok, body, err) = curl(&[
        "--cacert",
        first_s,
        "-X",
        "POST",
        "-H",
        "Authorization: Bearer not-the-token",
        "-d",
        "{\"reason\": \"x\"}",
        &url("/api/v1/specs/ConfigMap/x/y/suspend"),
    ]);
    assert!(ok && body.contains("wrong token"), "{body} {err}");
    let lines = audit("/suspend");
    assert_eq!(lines.len(), 1, "{}", daemon.log());
    for field in [
        "control denied",
        "who=\"anonymous (a wrong token)\"",
        "answer=401",
        "reason=\"wrong token\"",
    ] {
        assert!(lines[0].contains(field), "{field} in {}", lines[0]);
    }
    // Reads are not controls.
    assert!(audit("GET ").is_empty(), "{}", daemon.log());

    let out = reconcile(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        err.contains("cannot reach the daemon") && err.contains("certificate"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // Renewed in place as cert-manager renews a Secret: a CA's certificate for the
    // listener. The new certificate beside the old key is not taken (the old pair is
    // still served, and the log says why once); with its key, it is.
    let ca = test_ca(dir, "ca", "/CN=listener test CA");
    signed_by(dir, "ca", "second", "/CN=renewed listener", "IP:127.0.0.1");
    std::fs::copy(dir.join("second.pem"), &cert).unwrap();
    let (ok, body, err) = curl(&["--cacert", first_s, &url("/healthz")]);
    assert!(
        ok && body == "ok",
        "a half-renewed pair replaced the old one: {err}"
    );
    assert!(
        daemon
            .log()
            .contains("cannot be used, the one read before is kept"),
        "{}",
        daemon.log()
    );
    std::fs::copy(dir.join("second.key"), &key).unwrap();
    let ca_s = ca.to_str().unwrap();
    let (ok, body, err) = curl(&["--cacert", ca_s, &url("/healthz")]);
    assert!(
        ok && body == "ok",
        "the renewed certificate: {err}\n{}",
        daemon.log()
    );
    let subject = served_subject(&addr);
    assert!(subject.contains("renewed listener"), "{subject}");
    let (ok, _, _) = curl(&["--cacert", first_s, &url("/healthz")]);
    assert!(!ok, "the old certificate is still served");
    let out = reconcile(Some(ca_s));
    assert!(out.status.success(), "{}", show(&out));
    daemon.stop();
}

#[tokio::test]
async fn a_client_certificate_the_client_ca_signed_may_use_the_controls() {
    let client = support::client().await;
    let ns = support::namespace(&client, "listen-mtls").await;
    let instance = format!("listen-mtls-{}", support::suffix(&ns));
    let specs = TempDir::new().unwrap();
    std::fs::write(specs.path().join("cm.yaml"), configmap(&ns)).unwrap();
    let certs = TempDir::new().unwrap();
    let dir = certs.path();
    let ca = test_ca(dir, "ca", "/CN=listener test CA");
    let (cert, key) = signed_by(dir, "ca", "listener", "/CN=listener", "IP:127.0.0.1");
    // The machine callers' CA, and one the daemon does not know.
    let clients = test_ca(dir, "clients", "/CN=deploy clients");
    let (bot, bot_key) = signed_by(dir, "clients", "bot", "/O=ci/CN=deploy-bot", "DNS:bot");
    test_ca(dir, "other", "/CN=someone else");
    let (stranger, stranger_key) = signed_by(dir, "other", "stranger", "/CN=stranger", "DNS:x");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let mut daemon = Daemon::builder(&instance)
        .args(&[
            "--dir",
            &s(specs.path()),
            "--tls-cert-file",
            &s(&cert),
            "--tls-key-file",
            &s(&key),
            "--tls-client-ca-file",
            &s(&clients),
        ])
        .start();
    daemon
        .wait_status("the first sync", |s| s["last_sync"]["result"] == "success")
        .await;
    let url = format!("https://{}/api/v1/sync?wait=true", daemon.metrics);
    let post = |extra: &[&str]| {
        let mut args = vec!["--cacert".to_string(), s(&ca), "-X".into(), "POST".into()];
        args.extend(extra.iter().map(|a| a.to_string()));
        args.push(url.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&args)
    };

    // With the bot's certificate: the sync runs, and the audit line names the bot.
    let (ok, body, err) = post(&["--cert", &s(&bot), "--key", &s(&bot_key)]);
    assert!(
        ok && body.contains("\"result\":\"success\""),
        "{body} {err}\n{}",
        daemon.log()
    );
    let audit: Vec<String> = daemon
        .log()
        .lines()
        .filter(|l| l.contains("driftless::audit") && l.contains("POST /api/v1/sync"))
        .map(str::to_string)
        .collect();
    assert_eq!(audit.len(), 1, "{}", daemon.log());
    assert!(
        audit[0].contains("who=\"certificate deploy-bot\"") && audit[0].contains("answer=200"),
        "{}",
        audit[0]
    );
    // And kept in the history the API and the UI show: handed to the loop before the
    // answer went out, kept by it a moment later.
    let history = format!("https://{}/api/v1/controls", daemon.metrics);
    support::eventually(
        "the certificate's control in the history",
        Duration::from_secs(30),
        || async {
            let (ok, body, err) = curl(&["--cacert", &s(&ca), &history]);
            let kept: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let controls = kept["controls"].as_array().cloned().unwrap_or_default();
            if ok
                && controls.iter().any(|c| {
                    c["who"] == "certificate deploy-bot"
                        && c["what"] == "POST /api/v1/sync"
                        && c["answer"] == 200
                })
            {
                Ok(())
            } else {
                Err(format!("{body} {err}"))
            }
        },
    )
    .await;

    // The CLI presents it as curl does, and needs no token then.
    let server = format!("https://{}", daemon.metrics);
    let reconcile = |cert: &Path, key: &Path| {
        support::driftless(&[
            "reconcile",
            "--server",
            &server,
            "--ca-file",
            &s(&ca),
            "--client-cert-file",
            &s(cert),
            "--client-key-file",
            &s(key),
            "--timeout",
            "2m",
        ])
    };
    let out = reconcile(&bot, &bot_key);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("sync success"),
        "{}",
        show(&out)
    );
    // A key that is not the certificate's is said in one line.
    let out = reconcile(&bot, &stranger_key);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(err.contains("--client-cert-file"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // Without one, reads are served as before and the controls say what they need.
    let (ok, body, _) = curl(&[
        "--cacert",
        &s(&ca),
        &format!("https://{}/healthz", daemon.metrics),
    ]);
    assert!(ok && body == "ok", "{body}");
    let (ok, body, err) = post(&[]);
    assert!(
        ok && body.contains("present a client certificate that --tls-client-ca-file's CA signed"),
        "{body} {err}"
    );
    // A certificate another CA signed is refused at the handshake.
    let (ok, _, err) = post(&["--cert", &s(&stranger), "--key", &s(&stranger_key)]);
    assert!(!ok, "a stranger's certificate was taken: {err}");

    // A client CA file that holds no certificate refuses the start.
    std::fs::write(dir.join("empty.pem"), "no certificates here\n").unwrap();
    let out = run_with_tls(
        specs.path(),
        "127.0.0.1:0",
        &cert,
        &key,
        &["--tls-client-ca-file", &s(&dir.join("empty.pem"))],
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty.pem holds no certificate"),
        "{}",
        show(&out)
    );
    daemon.stop();
}

#[test]
fn an_unusable_certificate_is_refused_at_start() {
    let dir = TempDir::new().unwrap();
    let run = |cert: &Path, key: &Path| run_with_tls(dir.path(), "127.0.0.1:0", cert, key, &[]);
    let missing = dir.path().join("missing.crt");
    let out = run(&missing, &dir.path().join("missing.key"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        err.contains("reading certificate file") && err.contains("missing.crt"),
        "{err}"
    );
    // A certificate with another certificate's key.
    let one = self_signed_certificate(dir.path(), "one");
    self_signed_certificate(dir.path(), "two");
    let out = run(&one, &dir.path().join("two.key"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(err.contains("does not fit the certificate"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // One without the other is refused before anything runs.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
    support::scrub_env(&mut cmd);
    let out = cmd
        .args(["run", "--dir", ".", "--tls-cert-file"])
        .arg(&one)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-key-file"),
        "{}",
        show(&out)
    );
}

#[test]
fn an_open_address_without_a_token_is_refused_unless_the_operator_says_so() {
    let dir = TempDir::new().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "listener-test-token\n").unwrap();
    let missing = dir.path().join("missing.pem");
    // The certificate is read after the address is judged: a refusal naming it shows the
    // address passed, without a cluster.
    let run = |extra: &[&str]| run_with_tls(dir.path(), "0.0.0.0:0", &missing, &missing, extra);
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        err.contains("--metrics-addr 0.0.0.0:0 is not a loopback address")
            && err.contains("--insecure-open-listener"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for extra in [
        &["--insecure-open-listener"][..],
        &["--api-token-file", token.to_str().unwrap()][..],
    ] {
        let out = run(extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("reading certificate file") && !err.contains("loopback"),
            "{extra:?}: {err}"
        );
    }
}
