//! OCI artifacts as a source of the daemon, against Debian's real `docker-registry` on
//! loopback (plain HTTP, TLS with a test CA and htpasswd basic auth, TLS with one
//! self-signed certificate) and the local cluster: `driftless push` then `run --oci` applies and follows the tag (by poll and by
//! hook) with one manifest request per unchanged poll; `--semver` follows the newest tag,
//! `--digest` never moves; a registry that goes away keeps the last revision in force;
//! wrong credentials and an untrusted CA give one line and apply nothing.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{
    Daemon, REGISTRY_PASSWORD, REGISTRY_USER, TestProxy, TestRegistry, assert_exit, errors, http,
    oci_cli as cli, oci_cli_with, push_tree as push, replicas, show, web,
};
use tempfile::TempDir;

#[tokio::test]
async fn oci_push_run_follow_the_tag_and_outlive_a_registry_that_goes_away() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-follow").await;
    let tmp = TempDir::new().unwrap();
    let mut registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let tree = tmp.path().join("tree");
    let tagged = format!("{}:latest", registry.url("team/app"));
    let plain = ["--plain-http"];

    // Reproducible: the same tree pushed twice is the same digest.
    let first = push(&home, &tree, &web(&ns, 200), &tagged, &plain);
    assert_eq!(push(&home, &tree, &web(&ns, 200), &tagged, &plain), first);

    let daemon = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &registry.url("team/app"),
            "--plain-http",
            "--interval",
            "1s",
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    let status = daemon
        .wait_status("the pushed artifact applied", |s| {
            s["revision_applied"] == format!("latest@{first}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(status["source"], registry.url("team/app"), "{status:#}");
    assert_eq!(replicas(&client, &ns).await, Some(2));
    // The API and the metrics name the artifact as the status file does.
    let (code, body) = http(daemon.metrics, "GET", "/api/v1/status", &[], b"").await;
    assert_eq!(code, 200, "{body}");
    let api: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(api["source"], registry.url("team/app"), "{api:#}");
    assert_eq!(
        api["revision_applied"],
        format!("latest@{first}").as_str(),
        "{api:#}"
    );
    let (_, metrics) = http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert!(
        metrics.contains(&format!("revision=\"latest@{first}\"")),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("revision"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Unchanged: every poll is one manifest request (HEAD), nothing is downloaded and
    // nothing is synced; three polls watched, however long they take to come.
    let manifest_head = "HEAD /v2/team/app/manifests/latest";
    let syncs = |s: &Value| s["last_sync"]["time"].clone();
    let (seen, synced) = (registry.requests().len(), syncs(&status));
    let watched = Instant::now();
    // hang guard: a poll a second; WAIT is over a hundred of them.
    let window = support::eventually("three polls of the unchanged tag", support::WAIT, || {
        let window: Vec<String> = registry.requests()[seen..].to_vec();
        let polls = window
            .iter()
            .filter(|r| r.starts_with(manifest_head))
            .count();
        let got = if polls >= 3 {
            Ok(window)
        } else {
            Err(format!("{polls} polls: {window:#?}"))
        };
        std::future::ready(got)
    })
    .await;
    let watched = watched.elapsed();
    let polls = window
        .iter()
        .filter(|r| r.starts_with(manifest_head))
        .count();
    // lower bound: no oftener than the 1 s interval (a loaded machine can only space the
    // polls out; a late timer catching up adds none).
    assert!(
        polls as f64 <= watched.as_secs_f64() + 2.0,
        "{polls} manifest requests in {watched:?} of 1 s polls"
    );
    // Besides the manifest's HEAD, only the client's version probe (`GET /v2/`, which it
    // sends before each request to a registry that asks for no credentials): nothing
    // downloaded.
    let others: Vec<&String> = window
        .iter()
        .filter(|r| !r.starts_with(manifest_head) && r.as_str() != "GET /v2/")
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    assert_eq!(
        syncs(&daemon.status().unwrap()),
        synced,
        "an unchanged tag synced"
    );
    eprintln!(
        "unchanged tag: {polls} manifest HEADs and {} GET /v2/ in 5 s, nothing else, 0 syncs",
        window.len() - polls
    );

    // A change pushed to the same tag is applied within a poll (and a sync).
    let second = push(&home, &tree, &web(&ns, 400), &tagged, &plain);
    assert_ne!(second, first);
    let pushed = Instant::now();
    daemon
        .wait_status("the changed artifact applied", |s| {
            s["revision_applied"] == format!("latest@{second}").as_str() && support::all_ready(s)
        })
        .await;
    eprintln!(
        "a push to the tag applied and ready after {:?}",
        pushed.elapsed()
    );
    assert_eq!(replicas(&client, &ns).await, Some(4));

    // The registry away: the last revision stays in force and the status says why.
    registry.down();
    let status = daemon
        .wait_status("the registry's absence reported", |s| {
            !errors(s).contains("[]") && s["errors"].as_array().is_some_and(|e| !e.is_empty())
        })
        .await;
    assert!(errors(&status).contains("connection refused"), "{status:#}");
    eprintln!("registry away, status errors: {}", errors(&status));
    assert_eq!(
        status["revision_applied"],
        format!("latest@{second}").as_str(),
        "{status:#}"
    );
    assert_eq!(replicas(&client, &ns).await, Some(4));
    assert!(
        daemon
            .log()
            .contains("the last good revision stays in force"),
        "{}",
        daemon.log()
    );

    // Back: the error clears, and what is pushed next is applied.
    registry.up();
    daemon
        .wait_status("the error cleared once the registry is back", |s| {
            s["errors"].as_array().is_some_and(Vec::is_empty)
        })
        .await;
    let third = push(&home, &tree, &web(&ns, 300), &tagged, &plain);
    daemon
        .wait_status("the artifact pushed after the outage applied", |s| {
            s["revision_applied"] == format!("latest@{third}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(3));
}

#[tokio::test]
async fn oci_tls_basic_auth_and_the_hook() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-tls").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::tls(tmp.path());
    let ca = registry.ca.clone().unwrap();
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let user = tmp.path().join("user");
    let password = tmp.path().join("password");
    std::fs::write(&user, format!("{REGISTRY_USER}\n")).unwrap();
    std::fs::write(&password, format!("{REGISTRY_PASSWORD}\n")).unwrap();
    let creds = [
        "--ca-file",
        ca.to_str().unwrap(),
        "--username-file",
        user.to_str().unwrap(),
        "--password-file",
        password.to_str().unwrap(),
    ];
    let tree = tmp.path().join("tree");
    let tagged = format!("{}:prod", registry.url("team/app"));
    let first = push(&home, &tree, &web(&ns, 200), &tagged, &creds);

    // The daemon takes its credentials from a Docker config.json, as `docker login` writes.
    let auth = support::base64(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}").as_bytes());
    let config = tmp.path().join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}, "credsStore": "none"}}"#,
            registry.host
        ),
    )
    .unwrap();
    let secret = tmp.path().join("hook-secret");
    std::fs::write(&secret, "hook-s3cret").unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &registry.url("team/app"),
            "--tag",
            "prod",
            "--interval",
            "1h",
            "--registry-config",
            config.to_str().unwrap(),
            "--ca-file",
            ca.to_str().unwrap(),
            "--hook-secret-file",
            secret.to_str().unwrap(),
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    daemon
        .wait_status("the artifact applied over TLS with basic auth", |s| {
            s["revision_applied"] == format!("prod@{first}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(2));

    // A push, then the hook (signed as /hooks/git is): pulled and applied at once, an hour
    // before the next poll.
    let second = push(&home, &tree, &web(&ns, 500), &tagged, &creds);
    let body = br#"{"event":"push"}"#;
    let signature = format!("sha256={}", support::hmac_sha256_hex(b"hook-s3cret", body));
    let (code, text) = http(daemon.metrics, "POST", "/hooks/oci", &[], body).await;
    assert_eq!(code, 401, "unsigned: {text}");
    let (code, text) = http(
        daemon.metrics,
        "POST",
        "/hooks/git",
        &[("X-Hub-Signature-256", &signature)],
        body,
    )
    .await;
    assert_eq!(code, 404, "the git hook of an OCI source: {text}");
    let hooked = Instant::now();
    let (code, text) = http(
        daemon.metrics,
        "POST",
        "/hooks/oci",
        &[("X-Hub-Signature-256", &signature)],
        body,
    )
    .await;
    assert_eq!(code, 202, "{text}");
    daemon
        .wait_status("the artifact applied on the hook", |s| {
            s["revision_applied"] == format!("prod@{second}").as_str() && support::all_ready(s)
        })
        .await;
    eprintln!("hook to applied and ready: {:?}", hooked.elapsed());
    assert_eq!(replicas(&client, &ns).await, Some(5));

    // A wrong password and an untrusted CA: one line each, nothing applied.
    let wrong = tmp.path().join("wrong");
    std::fs::write(&wrong, "not-the-password").unwrap();
    let ns2 = support::namespace(&client, "oci-tls-refused").await;
    let tree2 = tmp.path().join("tree2");
    std::fs::create_dir_all(&tree2).unwrap();
    let other = push(
        &home,
        &tree2,
        &web(&ns2, 200),
        &format!("{}:other", registry.url("team/app")),
        &creds,
    );
    assert!(other.starts_with("sha256:"));
    let reference = format!("{}:other", registry.url("team/app"));
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--ca-file",
                ca.to_str().unwrap(),
                "--username-file",
                user.to_str().unwrap(),
                "--password-file",
                wrong.to_str().unwrap(),
            ],
            "refused the credentials",
        ),
        (
            &[
                "--username-file",
                user.to_str().unwrap(),
                "--password-file",
                password.to_str().unwrap(),
            ],
            "not trusted",
        ),
        (
            &["--ca-file", ca.to_str().unwrap()],
            "refused the credentials",
        ),
    ];
    for (flags, expect) in cases {
        let mut args = vec!["--instance", &ns2, "apply", &reference];
        args.extend(flags);
        let out = cli(&home, &args);
        assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("refused: {}", stderr.trim());
        assert_eq!(stderr.lines().count(), 1, "{}", show(&out));
        assert!(
            stderr.contains(expect) && !stderr.contains(REGISTRY_PASSWORD),
            "{}",
            show(&out)
        );
        assert_eq!(replicas(&client, &ns2).await, None, "{}", show(&out));
    }
    // With the right flags the same command applies it.
    let mut args = vec!["--instance", &ns2, "apply", &reference];
    args.extend(creds);
    assert_exit(&cli(&home, &args), 0);
    assert_eq!(replicas(&client, &ns2).await, Some(2));
}

/// A registry whose certificate is self-signed (CA:TRUE, as `openssl req -x509` and
/// Docker's registry docs make one) is trusted when that certificate is the `--ca-file`,
/// as curl, helm, docker and Flux trust it; another self-signed certificate is not.
#[tokio::test]
async fn oci_a_self_signed_registry_is_trusted_by_its_own_certificate() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-selfsigned").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::self_signed(tmp.path());
    let ca = registry.ca.clone().unwrap();
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let tree = tmp.path().join("tree");
    let tagged = format!("{}:prod", registry.url("team/app"));
    let trusted = ["--ca-file", ca.to_str().unwrap()];
    let digest = push(&home, &tree, &web(&ns, 200), &tagged, &trusted);

    let out = cli(
        &home,
        &["validate", &tagged, "--ca-file", ca.to_str().unwrap()],
    );
    assert_exit(&out, 0);

    // Another certificate of the same name, self-signed too: not the registry's.
    let other_dir = tmp.path().join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = support::self_signed_certificate(&other_dir, "other");
    for args in [
        vec!["validate", &tagged, "--ca-file", other.to_str().unwrap()],
        vec!["validate", &tagged],
    ] {
        let out = cli(&home, &args);
        assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("TLS: the registry's certificate is not trusted")
                && stderr.trim().lines().count() == 1,
            "{args:?}: {}",
            show(&out)
        );
    }

    let daemon = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &registry.url("team/app"),
            "--tag",
            "prod",
            "--interval",
            "1h",
            "--ca-file",
            ca.to_str().unwrap(),
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    daemon
        .wait_status("the artifact applied from the self-signed registry", |s| {
            s["revision_applied"] == format!("prod@{digest}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(2));
}

#[tokio::test]
async fn oci_a_registry_is_reached_through_the_proxy_the_environment_names() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-proxy").await;
    let tmp = TempDir::new().unwrap();
    let proxy = TestProxy::start(&tmp.path().join("proxy"));
    let (tls, plain) = (tmp.path().join("tls"), tmp.path().join("plain"));
    std::fs::create_dir_all(&tls).unwrap();
    std::fs::create_dir_all(&plain).unwrap();
    let (tls, plain) = (TestRegistry::self_signed(&tls), TestRegistry::plain(&plain));
    let ca = tls.ca.clone().unwrap();
    let ca = ca.to_str().unwrap();
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("app.toml"), web(&ns, 200)).unwrap();
    let url = proxy.url();
    // Every tunnel so far went to `to`; how many there were.
    let only_to = |what: &str, out: &std::process::Output, to: &str| {
        assert_exit(out, 0);
        let seen = proxy.tunnels();
        assert!(seen.iter().all(|t| t == to), "{what}: {seen:?}");
        seen.len()
    };

    // A TLS registry, through HTTPS_PROXY: the proxy carries the tunnel, the handshake
    // is the registry's own (its self-signed certificate is still what is checked).
    let tagged = format!("{}:prod", tls.url("team/app"));
    let tree_arg = tree.to_str().unwrap();
    let env = [("HTTPS_PROXY", url.as_str())];
    let out = oci_cli_with(&home, &["push", tree_arg, &tagged, "--ca-file", ca], &env);
    let pushed = only_to("push", &out, &tls.host);
    assert!(pushed > 0, "push went around the proxy\n{}", show(&out));
    let out = oci_cli_with(&home, &["validate", &tagged, "--ca-file", ca], &env);
    let before = only_to("validate", &out, &tls.host);
    assert!(before > pushed, "validate went around the proxy");

    // NO_PROXY names the registry: straight there.
    let env_no = [("HTTPS_PROXY", url.as_str()), ("NO_PROXY", "127.0.0.1")];
    let out = oci_cli_with(&home, &["validate", &tagged, "--ca-file", ca], &env_no);
    assert_eq!(only_to("NO_PROXY", &out, &tls.host), before);

    // A proxy that is not there: one line that names it, not the registry.
    let gone = format!("http://127.0.0.1:{}", support::free_port());
    let out = oci_cli_with(
        &home,
        &["validate", &tagged, "--ca-file", ca],
        &[("https_proxy", gone.as_str())],
    );
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "through the proxy {gone}: cannot connect: connection refused (is the proxy up?)"
        )) && stderr.trim().lines().count() == 1,
        "{}",
        show(&out)
    );

    // A plain registry through HTTP_PROXY: tunnelled to its own port.
    let plain_tagged = format!("{}:prod", plain.url("team/app"));
    let out = oci_cli_with(
        &home,
        &["push", tree_arg, &plain_tagged, "--plain-http"],
        &[("HTTP_PROXY", url.as_str())],
    );
    assert_exit(&out, 0);
    let to_plain: Vec<String> = proxy
        .tunnels()
        .into_iter()
        .filter(|t| *t == plain.host)
        .collect();
    assert!(!to_plain.is_empty(), "{:?}", proxy.tunnels());

    // The daemon follows the tag through the proxy too.
    let before = proxy.tunnels().len();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &tls.url("team/app"),
            "--tag",
            "prod",
            "--interval",
            "1h",
            "--ca-file",
            ca,
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .env("HTTPS_PROXY", &url)
        .start();
    daemon
        .wait_status("the artifact applied through the proxy", |s| {
            s["revision_applied"]
                .as_str()
                .is_some_and(|r| r.starts_with("prod@sha256:"))
                && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(2));
    let seen = proxy.tunnels();
    assert!(seen[before..].contains(&tls.host), "{seen:?}");
    // The apiserver, on loopback, is reached directly, as kubectl reaches it.
    assert!(
        seen.iter().all(|t| *t == tls.host || *t == plain.host),
        "{seen:?}"
    );
}

#[tokio::test]
async fn oci_semver_follows_the_newest_tag_and_a_digest_never_moves() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-semver").await;
    let pinned_ns = support::namespace(&client, "oci-digest").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let url = registry.url("team/app");
    let at = |tag: &str| format!("{url}:{tag}");
    let plain = ["--plain-http"];
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    push(&home, &a, &web(&ns, 100), &at("1.0.0"), &plain);
    let v12 = push(&home, &a, &web(&ns, 200), &at("v1.2.0"), &plain);
    push(&home, &a, &web(&ns, 900), &at("2.0.0"), &plain);
    // The pinned artifact's specs lie under `team/`, which `--path` names; what lies
    // beside it is not read (it would be invalid).
    std::fs::create_dir_all(b.join("team")).unwrap();
    std::fs::write(b.join("team/app.toml"), web(&pinned_ns, 300)).unwrap();
    std::fs::write(b.join("beside.toml"), "not [valid\n").unwrap();
    let out = cli(
        &home,
        &["push", b.to_str().unwrap(), &at("pinned"), "--plain-http"],
    );
    assert_exit(&out, 0);
    let pinned = String::from_utf8_lossy(&out.stdout)
        .trim()
        .rsplit_once('@')
        .map(|(_, d)| d.to_string())
        .unwrap();

    let semver = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &url,
            "--semver",
            ">=1.0.0, <2.0.0",
            "--plain-http",
            "--interval",
            "1s",
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    let digest = Daemon::builder(&pinned_ns)
        .args(&[
            "--oci",
            &url,
            "--digest",
            &pinned,
            "--path",
            "team",
            "--plain-http",
            "--interval",
            "1s",
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    semver
        .wait_status("the newest tag in range applied", |s| {
            s["revision_applied"] == format!("v1.2.0@{v12}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(2));
    digest
        .wait_status("the pinned digest applied", |s| {
            s["revision_applied"] == pinned.as_str() && support::all_ready(s)
        })
        .await;

    // A newer version in range is followed; the tag the digest came from moving changes
    // nothing for the pinned one.
    let v13 = push(&home, &a, &web(&ns, 300), &at("1.3.0"), &plain);
    push(
        &home,
        &b.join("team"),
        &web(&pinned_ns, 700),
        &at("pinned"),
        &plain,
    );
    semver
        .wait_status("the new version in range applied", |s| {
            s["revision_applied"] == format!("1.3.0@{v13}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(3));
    // The same tree under a newer version: the same digest, now named by that tag.
    let v14 = push(&home, &a, &web(&ns, 300), &at("1.4.0"), &plain);
    assert_eq!(v14, v13);
    semver
        .wait_status("the same artifact under the newer tag", |s| {
            s["revision_applied"] == format!("1.4.0@{v13}").as_str() && support::all_ready(s)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = digest.status().unwrap();
    assert_eq!(status["revision_applied"], pinned.as_str(), "{status:#}");
    assert_eq!(replicas(&client, &pinned_ns).await, Some(3));
}

/// A stand-in for GitHub's status API on loopback: records each request's method, path and
/// body, answers 201.
async fn status_recorder() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            // The head, then as much body as Content-Length says.
            loop {
                let n = stream.read(&mut buf).await.unwrap_or(0);
                raw.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&raw).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0usize);
                    if raw.len() >= end + 4 + len || n == 0 {
                        let line = text.lines().next().unwrap_or("").to_string();
                        let body = text[end + 4..].to_string();
                        record.lock().unwrap().push((line, body));
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let _ = stream
                .write_all(
                    b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                )
                .await;
        }
    });
    (url, seen)
}

#[tokio::test]
async fn oci_commit_statuses_go_to_the_commit_an_artifact_was_built_from() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-status").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let revision = format!("main@sha1:{sha}");
    let tree = tmp.path().join("tree");
    let url = registry.url("team/app");
    let digest = push(
        &home,
        &tree,
        &web(&ns, 200),
        &format!("{url}:latest"),
        &["--plain-http", "--revision", &revision],
    );
    let (api, seen) = status_recorder().await;
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &url,
            "--plain-http",
            "--interval",
            "1h",
            "--commit-status",
            "github",
            "--commit-status-url",
            &api,
            "--commit-status-repo",
            "team/config",
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .env("DRIFTLESS_COMMIT_STATUS_TOKEN", "t0ken")
        .start();
    daemon
        .wait_status("the artifact applied", |s| {
            s["revision_applied"] == format!("latest@{digest}").as_str() && support::all_ready(s)
        })
        .await;
    let path = format!("POST /repos/team/config/statuses/{sha} HTTP/1.1");
    support::eventually(
        "pending then success on the origin commit",
        Duration::from_secs(60),
        || {
            let seen = seen.lock().unwrap().clone();
            let path = path.clone();
            async move {
                let states: Vec<String> = seen
                    .iter()
                    .filter(|(line, _)| *line == path)
                    .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
                    .filter_map(|b| b["state"].as_str().map(str::to_string))
                    .collect();
                match states.last().map(String::as_str) {
                    Some("success") if states.first().map(String::as_str) == Some("pending") => {
                        Ok(())
                    }
                    _ => Err(format!("{seen:?}")),
                }
            }
        },
    )
    .await;
}

/// Flux's OCI layout (`flux push artifact`, no git at run time): the tree is an artifact
/// and its Kustomizations' source an `OCIRepository` naming that artifact, which `run
/// --oci` follows in place; a GitRepository of the repository the artifact was built from
/// (its source annotation) is this repository too.
#[tokio::test]
async fn oci_a_flux_tree_whose_source_is_the_artifact_itself_is_carried_out() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-flux").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let url = registry.url("fleet/staging");
    let tree = tmp.path().join("tree");
    let write = |path: &str, text: &str| {
        let p = tree.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let kustomization = |name: &str, kind: &str, source: &str, path: &str| {
        format!(
            "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  sourceRef: {{kind: {kind}, name: {source}}}\n  path: {path}\n  targetNamespace: {ns}\n  prune: true\n"
        )
    };
    write(
        "clusters/staging/flux-system/gotk-sync.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m\n  url: {url}\n  insecure: true\n  ref: {{tag: latest}}\n{}",
            kustomization(
                "flux-system",
                "OCIRepository",
                "flux-system",
                "./clusters/staging"
            )
        ),
    );
    write(
        "clusters/staging/apps.yaml",
        &format!(
            "{}---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: fleet\n  namespace: flux-system\nspec:\n  url: https://git.example.com/acme/fleet.git\n  ref: {{branch: main}}\n{}",
            kustomization("apps", "OCIRepository", "flux-system", "./apps"),
            kustomization("more", "GitRepository", "fleet", "./more")
        ),
    );
    let map = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n")
    };
    write("apps/settings.yaml", &map("settings"));
    write("more/extra.yaml", &map("extra"));
    let out = cli(
        &home,
        &[
            "push",
            tree.to_str().unwrap(),
            &format!("{url}:latest"),
            "--plain-http",
            "--source",
            "https://git.example.com/acme/fleet",
        ],
    );
    assert_exit(&out, 0);

    let daemon = Daemon::builder(&ns)
        .args(&[
            "--oci",
            &url,
            "--path",
            "clusters/staging",
            "--plain-http",
            "--interval",
            "1s",
        ])
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    let status = daemon
        .wait_status("both Kustomizations applied", |s| {
            support::all_ready(s) && s["specs"].as_array().is_some_and(|a| a.len() == 2)
        })
        .await;
    let apps: Vec<&str> = status["specs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["app"].as_str())
        .collect();
    assert_eq!(
        apps,
        ["flux/flux-system/apps", "flux/flux-system/more"],
        "{status:#}"
    );
    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), &ns);
    assert!(maps.get("settings").await.is_ok());
    assert!(maps.get("extra").await.is_ok());
}
