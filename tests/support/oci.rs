//! OCI artifacts for the tests: the driftless binary with a Docker config of the test's
//! own, `driftless push` of a one-file tree, artifacts pushed with the OCI client directly
//! (any layer, Flux's layout), hostile tar+gzip layers, and cosign signatures made with
//! `openssl`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::Value;

use super::{assert_exit, show};

pub const FLUX_CONFIG: &str = "application/vnd.cncf.flux.config.v1+json";
pub const FLUX_CONTENT: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";

pub fn web(ns: &str, total_qps: u32) -> String {
    format!(
        "namespace = \"{ns}\"\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
         single-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

/// The driftless binary with no Docker config of the machine's (`DOCKER_CONFIG` is an empty
/// directory) and the cluster's kubeconfig.
pub fn oci_cli(home: &Path, args: &[&str]) -> Output {
    oci_cli_with(home, args, &[])
}

/// `oci_cli` with more variables (a proxy's).
pub fn oci_cli_with(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let kubeconfig = super::admin_kubeconfig();
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("SOURCE_DATE_EPOCH")
        .env("DOCKER_CONFIG", home)
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .output()
        .expect("run driftless")
}

/// `driftless push` of a tree of one file; the digest it printed.
pub fn push_tree(home: &Path, tree: &Path, text: &str, reference: &str, extra: &[&str]) -> String {
    std::fs::create_dir_all(tree).unwrap();
    std::fs::write(tree.join("app.toml"), text).unwrap();
    let mut args = vec!["push", tree.to_str().unwrap(), reference];
    args.extend(extra);
    let out = oci_cli(home, &args);
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

pub async fn replicas(client: &kube::Client, ns: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt("shop")
        .await
        .unwrap()
        .and_then(|d| d.spec.replicas)
}

pub fn errors(status: &Value) -> String {
    status["errors"].to_string()
}

/// Pushes an artifact of Flux's layout (`flux push artifact`: an empty JSON config of
/// Flux's config media type, one layer, the source/revision/created annotations) with the
/// OCI client directly, so that its layer can be anything.
pub async fn push_raw(host: &str, repo: &str, tag: &str, layer: Vec<u8>, media_type: &str) {
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
pub fn tar_gz(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
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
pub fn stored_tar_gz(name: &str, data: &[u8]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    let mut b = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, name, data).unwrap();
    b.into_inner().unwrap().finish().unwrap()
}

/// Signs `digest` as `cosign sign --key` stores it: a simple signing payload under the tag
/// `sha256-<hex>.sig`, its ECDSA P-256 signature (DER, base64, here made by `openssl`) in
/// the `dev.cosignproject.cosign/signature` annotation.
pub async fn cosign_sign(dir: &Path, key: &Path, host: &str, repo: &str, digest: &str) {
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
    let signature = super::base64(&out.stdout);
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

pub fn ec_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
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
