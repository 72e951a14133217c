//! Leader election without the rights to its Lease (issue #20, item 6): the replica says
//! why it cannot lead, in the status file's `errors`, on `/readyz` (503: it is no standby)
//! and in its log, once; and it keeps trying, so the rights granted later make it lead.
//! Before, a replica that could read its Lease but not write it stood by as
//! `leader: false` for ever, ready, with nothing but a library's ERROR line every retry;
//! one that could not read it exited at start.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use support::{Daemon, http};

/// The inventory's and the suspensions' ConfigMaps, as in examples/kubernetes/rbac.yaml.
const CONFIGMAP_VERBS: [&str; 5] = ["list", "watch", "create", "patch", "delete"];

/// The lease error in the status file, if there is one.
fn lease_error(status: &Value) -> Option<String> {
    status["errors"].as_array()?.iter().find_map(|e| {
        let m = e["message"].as_str()?;
        m.starts_with("leader election: ").then(|| m.to_string())
    })
}

/// A ServiceAccount with all a replica needs (Nodes; the ConfigMaps beside the inventory)
/// and `lease_verbs` on Leases in `ns`; a kubeconfig for it in `dir`.
async fn replica_account(
    admin: &kube::Client,
    ns: &str,
    dir: &Path,
    lease_verbs: &[&str],
) -> (support::ClusterRbac, PathBuf) {
    let name = format!("driftless-lease-test-{}", support::suffix(ns));
    let kubeconfig = dir.join("replica.kubeconfig");
    let rules = json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]);
    let cleanup = support::replica_account_with(admin, ns, &name, rules, &[ns], &kubeconfig).await;
    grant(admin, ns, lease_verbs).await;
    (cleanup, kubeconfig)
}

/// The replica's Role: the ConfigMaps, and `lease_verbs` on Leases (none: no rule).
async fn grant(admin: &kube::Client, ns: &str, lease_verbs: &[&str]) {
    let mut rules =
        vec![json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": CONFIGMAP_VERBS})];
    if !lease_verbs.is_empty() {
        rules.push(json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": lease_verbs}));
    }
    support::apply_manifest(
        admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "replica", "namespace": ns}, "rules": rules}),
    )
    .await;
}

/// `driftless run --leader-elect` as the replica, on an empty spec directory.
fn start(kubeconfig: &Path, ns: &str, dir: &Path) -> Daemon {
    let specs = dir.join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    let specs = specs.to_string_lossy().into_owned();
    let args = [
        "--dir",
        &specs,
        "--leader-elect",
        "--lease-namespace",
        ns,
        "--lease-name",
        "replica",
        "--inventory-namespace",
        ns,
    ];
    Daemon::start(kubeconfig, ns, &args)
}

/// Waits for the lease error, and checks it is on /readyz (503) too.
async fn refused(daemon: &Daemon, ns: &str, verb: &str) -> String {
    let status = daemon
        .wait_status(&format!("a lease error naming `{verb}`"), |s| {
            s["leader"] == false && lease_error(s).is_some_and(|e| e.contains(verb))
        })
        .await;
    let error = lease_error(&status).unwrap();
    assert!(
        error.starts_with(&format!("leader election: cannot use Lease {ns}/replica: "))
            && error.contains("forbidden")
            && error.ends_with("(403 Forbidden)"),
        "{error}"
    );
    // Though the source was read (a standby that could lead would be ready).
    daemon
        .wait_status("the source read", |s| s["revision_seen"].is_string())
        .await;
    let (code, body) = http(daemon.metrics, "GET", "/readyz", &[], b"").await;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body, format!("not ready: {error}"));
    error
}

/// The log says each problem once, however often it is retried (after 1, 2, 4... s: a
/// few times in this wait, which bounds nothing), and has none of kube-lease-manager's
/// own lines.
async fn logged_once(daemon: &Daemon, error: &str) {
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    let log = daemon.log();
    assert_eq!(log.matches(error).count(), 1, "{log}");
    assert!(!log.contains("LeaseManager watcher error"), "{log}");
}

/// It may read (and create) its Lease, not take it: the case.
#[tokio::test]
async fn a_replica_that_may_not_take_its_lease_says_why_and_leads_once_allowed() {
    let admin = support::client().await;
    let ns = support::namespace(&admin, "lease").await;
    let dir = tempfile::tempdir().unwrap();
    let (_cleanup, kubeconfig) = replica_account(&admin, &ns, dir.path(), &["get", "create"]).await;
    let daemon = start(&kubeconfig, &ns, dir.path());
    let error = refused(&daemon, &ns, "patch").await;
    logged_once(&daemon, &error).await;

    // Granted the Lease, the replica takes it (nobody else holds it): the error goes.
    grant(&admin, &ns, &["get", "create", "patch"]).await;
    let status = daemon
        .wait_status("the leader, without the error", |s| {
            s["leader"] == true && lease_error(s).is_none()
        })
        .await;
    assert!(
        status["errors"].as_array().unwrap().is_empty(),
        "{status:#}"
    );
    let (code, body) = http(daemon.metrics, "GET", "/readyz", &[], b"").await;
    assert_eq!((code, body.as_str()), (200, "ready"));
}

/// It may not even read its Lease: it keeps running (it exited at start before), says
/// why, and retries.
#[tokio::test]
async fn a_replica_that_may_not_read_its_lease_keeps_running_and_says_why() {
    let admin = support::client().await;
    let ns = support::namespace(&admin, "lease-none").await;
    let dir = tempfile::tempdir().unwrap();
    let (_cleanup, kubeconfig) = replica_account(&admin, &ns, dir.path(), &[]).await;
    let mut daemon = start(&kubeconfig, &ns, dir.path());
    let error = refused(&daemon, &ns, "get").await;
    logged_once(&daemon, &error).await;
    daemon.assert_alive("without the rights to its Lease");
}
