//! OCI artifacts as a source, against Debian's real `docker-registry` on loopback (plain
//! HTTP, and TLS with a test CA and htpasswd basic auth) and the local cluster:
//! `driftless push` then `run --oci` applies and follows the tag (by poll and by hook) with
//! one manifest request per unchanged poll; `--semver` follows the newest tag, `--digest`
//! never moves; a registry that goes away keeps the last revision; wrong credentials, an
//! untrusted CA and bad artifacts each give one line and apply nothing; an artifact built
//! by the layout `flux push artifact` documents is read.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::Value;
use support::{Daemon, REGISTRY_PASSWORD, REGISTRY_USER, TestRegistry, assert_exit, http, show};
use tempfile::TempDir;

const FLUX_CONFIG: &str = "application/vnd.cncf.flux.config.v1+json";
const FLUX_CONTENT: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";

fn web(ns: &str, total_qps: u32) -> String {
    format!(
        "namespace = \"{ns}\"\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
         single-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

/// The driftless binary with no Docker config of the machine's (`DOCKER_CONFIG` is an empty
/// directory) and the cluster's kubeconfig.
fn cli(home: &Path, args: &[&str]) -> Output {
    let kubeconfig = support::admin_kubeconfig();
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("SOURCE_DATE_EPOCH")
        .env("DOCKER_CONFIG", home)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run driftless")
}

/// `driftless push` of a tree of one file; the digest it printed.
fn push(home: &Path, tree: &Path, text: &str, reference: &str, extra: &[&str]) -> String {
    std::fs::create_dir_all(tree).unwrap();
    std::fs::write(tree.join("app.toml"), text).unwrap();
    let mut args = vec!["push", tree.to_str().unwrap(), reference];
    args.extend(extra);
    let out = cli(home, &args);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let digest = stdout
        .trim()
        .rsplit_once('@')
        .map(|(_, d)| d.to_string())
        .unwrap_or_default();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{}",
        show(&out)
    );
    digest
}

async fn replicas(client: &kube::Client, ns: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt("shop")
        .await
        .unwrap()
        .and_then(|d| d.spec?.replicas)
}

fn errors(status: &Value) -> String {
    status["errors"].to_string()
}

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

    // Unchanged: every poll is one manifest request (HEAD), nothing is downloaded and
    // nothing is synced.
    let manifest_head = "HEAD /v2/team/app/manifests/latest";
    let syncs = |s: &Value| s["last_sync"]["time"].clone();
    let (seen, synced) = (registry.requests().len(), syncs(&status));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let window: Vec<String> = registry.requests()[seen..].to_vec();
    let polls = window
        .iter()
        .filter(|r| r.starts_with(manifest_head))
        .count();
    assert!(
        (3..=7).contains(&polls),
        "{polls} manifest requests in 5 s of 1 s polls"
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
    let pinned = push(&home, &b, &web(&pinned_ns, 300), &at("pinned"), &plain);

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
    push(&home, &b, &web(&pinned_ns, 700), &at("pinned"), &plain);
    semver
        .wait_status("the new version in range applied", |s| {
            s["revision_applied"] == format!("1.3.0@{v13}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(3));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = digest.status().unwrap();
    assert_eq!(status["revision_applied"], pinned.as_str(), "{status:#}");
    assert_eq!(replicas(&client, &pinned_ns).await, Some(3));
}

/// Pushes an artifact of Flux's layout (`flux push artifact`: an empty JSON config of
/// Flux's config media type, one layer, the source/revision/created annotations) with the
/// OCI client directly, so that its layer can be anything.
async fn push_raw(host: &str, repo: &str, tag: &str, layer: Vec<u8>, media_type: &str) {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..Default::default()
    });
    let reference = oci_client::Reference::with_tag(host.into(), repo.into(), tag.into());
    let layer = ImageLayer::new(layer, media_type.into(), None);
    let config = Config::new(b"{}".to_vec(), FLUX_CONFIG.into(), None);
    let annotations = BTreeMap::from([
        (
            "org.opencontainers.image.created".to_string(),
            "2025-05-01T10:00:00Z".to_string(),
        ),
        (
            "org.opencontainers.image.revision".to_string(),
            "main@sha1:0123456789abcdef0123456789abcdef01234567".to_string(),
        ),
        (
            "org.opencontainers.image.source".to_string(),
            "https://git.example/team/config.git".to_string(),
        ),
    ]);
    let manifest = oci_client::manifest::OciImageManifest::build(
        std::slice::from_ref(&layer),
        &config,
        Some(annotations),
    );
    client
        .push(
            &reference,
            &[layer],
            config,
            &oci_client::secrets::RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await
        .unwrap();
}

/// A tar+gzip of entries written raw (a `../` path or a link survives, as a hostile
/// archive would carry them).
fn tar_gz(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (path, kind, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if kind.is_symlink() {
            h.set_link_name("../../etc/passwd").unwrap();
        }
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A tar+gzip of one file, its deflate "stored" (no compression): as large as its data.
fn stored_tar_gz(name: &str, data: &[u8]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    let mut b = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, name, data).unwrap();
    b.into_inner().unwrap().finish().unwrap()
}

#[tokio::test]
async fn oci_an_artifact_of_flux_s_layout_is_read_and_driftless_push_writes_that_layout() {
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let manifest = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-flux\n  namespace: team\ndata:\n  k: v\n";
    let layer = tar_gz(&[
        ("deploy/", tar::EntryType::Directory, b""),
        ("deploy/cm.yaml", tar::EntryType::Regular, manifest),
    ]);
    push_raw(&registry.host, "flux/app", "v1", layer, FLUX_CONTENT).await;
    let out = cli(
        &home,
        &[
            "render",
            &format!("{}:v1", registry.url("flux/app")),
            "--plain-http",
        ],
    );
    assert_exit(&out, 0);
    let docs = support::yaml_docs(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(docs.len(), 1, "{}", show(&out));
    assert_eq!(docs[0]["metadata"]["name"], "from-flux");

    // Another layer media type is read only when asked.
    let layer = tar_gz(&[("cm.yaml", tar::EntryType::Regular, manifest)]);
    push_raw(
        &registry.host,
        "flux/other",
        "v1",
        layer,
        "application/vnd.example.tree.v1.tar+gzip",
    )
    .await;
    let reference = format!("{}:v1", registry.url("flux/other"));
    let out = cli(&home, &["validate", &reference, "--plain-http"]);
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no layer of media type application/vnd.cncf.flux.content.v1.tar+gzip"),
        "{}",
        show(&out)
    );
    let out = cli(
        &home,
        &[
            "validate",
            &reference,
            "--plain-http",
            "--layer-media-type",
            "application/vnd.example.tree.v1.tar+gzip",
        ],
    );
    assert_exit(&out, 0);

    // What `driftless push` writes is that layout, read back from the registry.
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("cm.yaml"), manifest).unwrap();
    let out = cli(
        &home,
        &[
            "push",
            tree.to_str().unwrap(),
            &format!("{}:v2", registry.url("flux/app")),
            "--plain-http",
            "--source",
            "https://git.example/team/config.git",
            "--revision",
            "main@sha1:abc",
            "--created",
            "2025-05-01T10:00:00Z",
        ],
    );
    assert_exit(&out, 0);
    let body = reqwest_manifest(&registry.host, "flux/app", "v2").await;
    assert_eq!(
        body["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{body:#}"
    );
    assert_eq!(body["config"]["mediaType"], FLUX_CONFIG, "{body:#}");
    assert_eq!(body["layers"].as_array().map(Vec::len), Some(1), "{body:#}");
    assert_eq!(body["layers"][0]["mediaType"], FLUX_CONTENT, "{body:#}");
    let a = &body["annotations"];
    assert_eq!(
        a["org.opencontainers.image.source"], "https://git.example/team/config.git",
        "{body:#}"
    );
    assert_eq!(
        a["org.opencontainers.image.revision"], "main@sha1:abc",
        "{body:#}"
    );
    assert_eq!(
        a["org.opencontainers.image.created"], "2025-05-01T10:00:00Z",
        "{body:#}"
    );
}

/// The manifest of `repo:tag` as the registry serves it.
async fn reqwest_manifest(host: &str, repo: &str, tag: &str) -> Value {
    let addr: std::net::SocketAddr = host.parse().unwrap();
    let (code, body) = http(
        addr,
        "GET",
        &format!("/v2/{repo}/manifests/{tag}"),
        &[("Accept", "application/vnd.oci.image.manifest.v1+json")],
        b"",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test]
async fn serial_oci_hostile_or_oversized_artifacts_give_one_line_and_apply_nothing() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-hostile").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let good = web(&ns, 200);
    let zeros = vec![0u8; 80 << 20];
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "escape",
            tar_gz(&[
                ("app.toml", tar::EntryType::Regular, good.as_bytes()),
                ("../escape.toml", tar::EntryType::Regular, good.as_bytes()),
            ]),
            "\"../escape.toml\" leaves the tree",
        ),
        (
            "link",
            tar_gz(&[
                ("app.toml", tar::EntryType::Regular, good.as_bytes()),
                ("passwd.yaml", tar::EntryType::Symlink, b""),
            ]),
            "\"passwd.yaml\" is a link",
        ),
        (
            "bomb",
            tar_gz(&[
                ("app.toml", tar::EntryType::Regular, good.as_bytes()),
                ("big.bin", tar::EntryType::Regular, &zeros),
            ]),
            "unpacks to more than 64 MiB",
        ),
    ];
    // A layer past the limit as served (incompressible: stored, not deflated) is refused
    // from its manifest's size, before a byte of it is downloaded.
    let mut noise = vec![0u8; 65 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in noise.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let mut cases = cases;
    cases.push((
        "huge",
        stored_tar_gz("noise.bin", &noise),
        "more than the 64 MiB a tree may be; not pulled",
    ));
    drop(noise);
    for (tag, layer, expect) in cases {
        push_raw(&registry.host, "team/app", tag, layer, FLUX_CONTENT).await;
        let reference = format!("{}:{tag}", registry.url("team/app"));
        let out = support::no_writes(
            &client,
            &["deployments", "configmaps", "services"],
            tag,
            || {
                cli(
                    &home,
                    &["--instance", &ns, "apply", &reference, "--plain-http"],
                )
            },
        )
        .await;
        assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("refused: {}", stderr.trim());
        assert_eq!(stderr.lines().count(), 1, "{}", show(&out));
        assert!(stderr.contains(expect), "{}", show(&out));
        assert!(!tmp.path().join("escape.toml").exists());
        if tag == "huge" {
            let blobs = registry
                .requests()
                .iter()
                .filter(|r| r.starts_with("GET /v2/team/app/blobs/"))
                .count();
            assert_eq!(
                blobs,
                3,
                "only the first three layers were downloaded: {:#?}",
                registry.requests()
            );
        }
    }
    assert_eq!(replicas(&client, &ns).await, None);
}

/// Signs `digest` as `cosign sign --key` stores it: a simple signing payload under the tag
/// `sha256-<hex>.sig`, its ECDSA P-256 signature (DER, base64, here made by `openssl`) in
/// the `dev.cosignproject.cosign/signature` annotation.
async fn cosign_sign(dir: &Path, key: &Path, host: &str, repo: &str, digest: &str) {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    let payload = format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{host}/{repo}"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    );
    let file = dir.join("payload.json");
    std::fs::write(&file, &payload).unwrap();
    let out = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(key)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let signature = support::base64(&out.stdout);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..Default::default()
    });
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let reference = oci_client::Reference::with_tag(host.into(), repo.into(), tag);
    let layer = ImageLayer::new(
        payload.into_bytes(),
        "application/vnd.dev.cosign.simplesigning.v1+json".into(),
        Some(BTreeMap::from([(
            "dev.cosignproject.cosign/signature".to_string(),
            signature,
        )])),
    );
    let config = Config::new(
        b"{}".to_vec(),
        "application/vnd.oci.image.config.v1+json".into(),
        None,
    );
    let manifest =
        oci_client::manifest::OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    client
        .push(
            &reference,
            &[layer],
            config,
            &oci_client::secrets::RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await
        .unwrap();
}

fn ec_key(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        private.to_str().unwrap(),
    ]);
    run(&[
        "ec",
        "-in",
        private.to_str().unwrap(),
        "-pubout",
        "-out",
        public.to_str().unwrap(),
    ]);
    (private, public)
}

#[tokio::test]
async fn oci_verify_key_applies_only_what_the_key_signed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "oci-verify").await;
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let (key, public) = ec_key(tmp.path(), "cosign");
    let (other_key, _) = ec_key(tmp.path(), "other");
    let tree = tmp.path().join("tree");
    let url = registry.url("team/app");
    let unsigned = push(
        &home,
        &tree,
        &web(&ns, 200),
        &format!("{url}:unsigned"),
        &["--plain-http"],
    );
    let wrong = push(
        &home,
        &tree,
        &web(&ns, 300),
        &format!("{url}:wrong"),
        &["--plain-http"],
    );
    cosign_sign(tmp.path(), &other_key, &registry.host, "team/app", &wrong).await;
    let signed = push(
        &home,
        &tree,
        &web(&ns, 400),
        &format!("{url}:signed"),
        &["--plain-http"],
    );
    cosign_sign(tmp.path(), &key, &registry.host, "team/app", &signed).await;

    let verify = ["--plain-http", "--verify-key", public.to_str().unwrap()];
    for (tag, digest, expect) in [
        ("unsigned", &unsigned, "no cosign signature"),
        ("wrong", &wrong, "does not verify with --verify-key"),
    ] {
        let reference = format!("{url}:{tag}");
        let mut args = vec!["--instance", &ns, "apply", &reference];
        args.extend(verify);
        let out = cli(&home, &args);
        assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("refused: {}", stderr.trim());
        assert_eq!(stderr.lines().count(), 1, "{}", show(&out));
        assert!(
            stderr.contains(expect) && stderr.contains(digest.as_str()),
            "{}",
            show(&out)
        );
        assert_eq!(replicas(&client, &ns).await, None, "{}", show(&out));
    }

    // The daemon likewise: the unsigned tag is reported and nothing applied; once the tag
    // names the signed artifact, it is applied.
    let daemon = Daemon::builder(&ns)
        .args(&["--oci", &url, "--tag", "unsigned", "--interval", "1s"])
        .args(&verify)
        .env("DOCKER_CONFIG", home.to_str().unwrap())
        .start();
    let status = daemon
        .wait_status("the unsigned artifact refused", |s| {
            errors(s).contains("no cosign signature")
        })
        .await;
    assert!(status["revision_applied"].is_null(), "{status:#}");
    assert_eq!(replicas(&client, &ns).await, None);
    // The signed tree pushed to the daemon's tag is the signed digest (reproducible), which
    // the daemon then applies.
    let moved = push(
        &home,
        &tree,
        &web(&ns, 400),
        &format!("{url}:unsigned"),
        &["--plain-http"],
    );
    assert_eq!(moved, signed);
    daemon
        .wait_status("the signed artifact applied", |s| {
            s["revision_applied"] == format!("unsigned@{signed}").as_str() && support::all_ready(s)
        })
        .await;
    assert_eq!(replicas(&client, &ns).await, Some(4));
}

#[tokio::test]
async fn oci_a_bearer_token_challenge_is_answered_with_the_registry_credentials() {
    use std::sync::atomic::Ordering;
    let tmp = TempDir::new().unwrap();
    let (registry, tokens) = TestRegistry::bearer(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let user = tmp.path().join("user");
    let password = tmp.path().join("password");
    let wrong = tmp.path().join("wrong");
    std::fs::write(&user, REGISTRY_USER).unwrap();
    std::fs::write(&password, REGISTRY_PASSWORD).unwrap();
    std::fs::write(&wrong, "not-it").unwrap();
    let creds = [
        "--plain-http",
        "--username-file",
        user.to_str().unwrap(),
        "--password-file",
        password.to_str().unwrap(),
    ];
    let tree = tmp.path().join("tree");
    let manifest =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: behind-a-token\n  namespace: team\n";
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("cm.yaml"), manifest).unwrap();
    let reference = format!("{}:v1", registry.url("team/app"));
    let mut args = vec!["push", tree.to_str().unwrap(), &reference];
    args.extend(creds);
    assert_exit(&cli(&home, &args), 0);
    let after_push = tokens.issued.load(Ordering::Relaxed);
    assert!(after_push >= 1, "no token was asked for");

    let mut args = vec!["render", &reference];
    args.extend(creds);
    let out = cli(&home, &args);
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("behind-a-token"),
        "{}",
        show(&out)
    );
    assert!(tokens.issued.load(Ordering::Relaxed) > after_push);
    assert_eq!(tokens.refused.load(Ordering::Relaxed), 0);

    // A wrong password, and none: the token service refuses, in one line.
    for flags in [
        vec![
            "--plain-http",
            "--username-file",
            user.to_str().unwrap(),
            "--password-file",
            wrong.to_str().unwrap(),
        ],
        vec!["--plain-http"],
    ] {
        let mut args = vec!["render", &reference];
        args.extend(flags);
        let out = cli(&home, &args);
        assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("refused: {}", stderr.trim());
        assert_eq!(stderr.lines().count(), 1, "{}", show(&out));
        assert!(stderr.contains("refused the credentials"), "{}", show(&out));
    }
    assert!(tokens.refused.load(Ordering::Relaxed) >= 2);
}
