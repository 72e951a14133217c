//! Shared by the cluster-backed integration tests: one local cluster per test run (see
//! `scripts/test`), one namespace per test.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// Set by `testbed/cluster.sh up` (in `.testbed/env`) and by `scripts/test`.
pub const CLUSTER_ENV: &str = "DRIFTLESS_TEST_KUBECONFIG";

/// The local test cluster. Panics, naming the command to start it, when there is none:
/// a cluster test never passes by skipping.
pub async fn client() -> Client {
    let Some(path) = std::env::var_os(CLUSTER_ENV) else {
        panic!(
            "{CLUSTER_ENV} is not set, and this test needs the local Kubernetes cluster. \
             Run the whole suite with `scripts/test`, or start the cluster with \
             `testbed/cluster.sh up` and `source .testbed/env` before `cargo test`."
        );
    };
    let selection = driftless::cluster::Selection {
        kubeconfig: Some(path.clone().into()),
        context: None,
    };
    match selection.client().await {
        Ok(c) => c,
        Err(e) => panic!(
            "cannot reach the local cluster through {}: {e}. Is it up? `testbed/cluster.sh status`",
            path.to_string_lossy()
        ),
    }
}

/// A fresh namespace for one test, so tests share the cluster without seeing each other.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let name = format!("{prefix}-{:x}{:x}", std::process::id() % 0xfff, nanos);
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([("driftless-test".to_string(), prefix.to_string())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create test namespace");
    name
}

/// Polls `check` until it returns `Some`, or panics after `limit` with `what` and the last
/// observation. A bound on waiting, not a timing assertion: the limit is generous.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let last = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
