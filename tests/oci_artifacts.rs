//! OCI artifacts as they come, against Debian's real `docker-registry` on loopback: an
//! artifact built by the layout `flux push artifact` documents is read and `driftless
//! push` writes that layout; hostile or oversized layers give one line and apply nothing;
//! `--verify-key` applies only what a cosign signature of the key vouches for; a bearer
//! token challenge is answered with the registry credentials.

use crate::support;

use serde_json::Value;
use support::{
    Daemon, FLUX_CONFIG, FLUX_CONTENT, REGISTRY_PASSWORD, REGISTRY_USER, TestRegistry, assert_exit,
    cosign_sign, ec_key, errors, http, oci_cli as cli, push_raw, push_tree as push, replicas, show,
    stored_tar_gz, tar_gz, web,
};
use tempfile::TempDir;

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

#[tokio::test]
async fn oci_a_kustomization_renders_from_an_artifact_and_push_render_needs_no_tool_after() {
    let tmp = TempDir::new().unwrap();
    let registry = TestRegistry::plain(tmp.path());
    let home = tmp.path().join("docker");
    std::fs::create_dir_all(&home).unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("app")).unwrap();
    std::fs::write(
        tree.join("app/kustomization.yaml"),
        "resources: [cm.yaml]\nnamePrefix: prod-\n",
    )
    .unwrap();
    std::fs::write(
        tree.join("app/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: team\ndata:\n  k: v\n",
    )
    .unwrap();
    let raw = format!("{}:raw", registry.url("team/app"));
    let rendered = format!("{}:rendered", registry.url("team/app"));
    for (reference, extra) in [(&raw, None), (&rendered, Some("--render"))] {
        let mut args = vec!["push", tree.to_str().unwrap(), reference, "--plain-http"];
        args.extend(extra);
        assert_exit(&cli(&home, &args), 0);
    }
    // With the tool (the testbed's kubectl kustomize), both render the same objects.
    for reference in [&raw, &rendered] {
        let out = cli(&home, &["render", reference, "--plain-http"]);
        assert_exit(&out, 0);
        let docs = support::yaml_docs(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(docs.len(), 1, "{}", show(&out));
        assert_eq!(
            docs[0]["metadata"]["name"],
            "prod-settings",
            "{}",
            show(&out)
        );
    }
    // Without it, only the artifact pushed rendered can be read.
    let missing = tmp.path().join("no-such-kustomize");
    let without = |reference: &str| {
        let mut args = vec!["render", reference, "--plain-http", "--kustomize"];
        args.push(missing.to_str().unwrap());
        cli(&home, &args)
    };
    assert_exit(&without(&raw), 2);
    let out = without(&rendered);
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("prod-settings"),
        "{}",
        show(&out)
    );
}
