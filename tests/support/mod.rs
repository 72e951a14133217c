//! Shared by `tests/examples.rs` and `tests/rbac.rs`: the example files as the tests use
//! them (copied, with names made unique per test), the real binary, YAML manifests applied
//! with server-side apply, and a `driftless run` child process.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;

pub const WAIT: Duration = Duration::from_secs(120);

/// `examples/<rel>` in this repository.
pub fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel)
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The part of a `common::namespace` name that makes it unique.
pub fn suffix(ns: &str) -> String {
    ns.rsplit('-').next().unwrap_or(ns).to_string()
}

/// Copies the tree `src` into `dst`, applying `replace` (in order) to every file's text.
/// Panics when a replacement finds nothing in the whole tree: a test that silently stops
/// rewriting (and so starts sharing names with other tests) is a broken test.
pub fn copy_tree(src: &Path, dst: &Path, replace: &[(&str, &str)]) {
    let mut used = vec![false; replace.len()];
    copy_rec(src, dst, replace, &mut used);
    for ((from, _), hit) in replace.iter().zip(used) {
        assert!(hit, "{from:?} occurs nowhere in {}", src.display());
    }
}

fn copy_rec(src: &Path, dst: &Path, replace: &[(&str, &str)], used: &mut [bool]) {
    std::fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let target = dst.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_rec(&path, &target, replace, used);
            continue;
        }
        let mut text = read(&path);
        for (i, (from, to)) in replace.iter().enumerate() {
            if text.contains(from) {
                used[i] = true;
                text = text.replace(from, to);
            }
        }
        std::fs::write(&target, text).unwrap();
    }
}

/// Replaces `from` by `to` in the file, which must contain it exactly once.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = read(path);
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} in {}:\n{text}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Runs the driftless binary; RUST_LOG=warn so stderr carries only what matters.
pub fn driftless(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("DRIFTLESS_INSTANCE")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run driftless")
}

pub fn show(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The admin kubeconfig of the local cluster (tests/common panics without it).
pub fn admin_kubeconfig() -> PathBuf {
    std::env::var_os(crate::common::CLUSTER_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{} is not set", crate::common::CLUSTER_ENV))
}

/// Every document of a multi-document YAML text.
pub fn yaml_docs(text: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Applies one manifest with server-side apply (field manager `driftless-test`), finding
/// its API through discovery as kubectl does.
pub async fn apply_manifest(client: &Client, doc: &Value) -> Value {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let kind = doc["kind"].as_str().expect("kind");
    let name = doc["metadata"]["name"].as_str().expect("metadata.name");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (resource, caps) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .unwrap_or_else(|e| panic!("discovery of {api_version} {kind}: {e}"));
    let api: Api<DynamicObject> = match (caps.scope, doc["metadata"]["namespace"].as_str()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Namespaced, None) => panic!("{kind} {name} has no namespace"),
        (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
    };
    let applied = api
        .patch(
            name,
            &PatchParams::apply("driftless-test").force(),
            &Patch::Apply(doc),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    serde_json::to_value(applied).unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `driftless run`; killed on drop if the test did not stop it.
pub struct Daemon {
    child: Option<Child>,
    state: tempfile::TempDir,
    pub metrics: SocketAddr,
}

impl Daemon {
    /// `driftless --kubeconfig <kubeconfig> --instance <instance> run <args>` with its own
    /// status file, metrics port and log.
    pub fn start(kubeconfig: &Path, instance: &str, args: &[&str]) -> Daemon {
        let state = tempfile::tempdir().unwrap();
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = std::fs::File::create(state.path().join("daemon.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_driftless"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--instance", instance, "run"])
            .args(args)
            .args(["--metrics-addr", &metrics.to_string()])
            .arg("--status-file")
            .arg(state.path().join("status.json"))
            .arg("--cache-dir")
            .arg(state.path().join("cache"))
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "info,kube=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Daemon {
            child: Some(child),
            state,
            metrics,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("daemon.log")).unwrap_or_default()
    }

    pub fn status(&self) -> Option<Value> {
        let text = std::fs::read_to_string(self.state.path().join("status.json")).ok()?;
        // Written atomically: whenever it exists, it parses.
        Some(
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("torn or invalid status file: {e}\n{text}")),
        )
    }

    pub async fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(s) = self.status()
                && pred(&s)
            {
                return s;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; status: {:#?}\nlog:\n{}",
                    self.status(),
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "driftless did not exit within 15 s of SIGTERM\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Every spec in the status file is ready (and there is at least one).
pub fn all_ready(status: &Value) -> bool {
    status["specs"]
        .as_array()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|s| s["ready"] == true))
}

pub fn spec<'a>(status: &'a Value, id: &str) -> &'a Value {
    status["specs"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id))
        .unwrap_or_else(|| panic!("no spec {id} in {status:#}"))
}
