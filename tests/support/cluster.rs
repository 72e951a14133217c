//! The local cluster: one per test run (see `scripts/test`), one namespace per test.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;

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
        // No client-side limit: the load some tests make (a storm of Pod patches) is as
        // much as the apiserver takes, as it was before driftless had one.
        rate: driftless::cluster::retry::RateLimit { qps: 0.0, burst: 1 },
        ..Default::default()
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
            // Said again last: what was seen (a status, a daemon's log) can be long, and
            // a report that shows only the end of the output still names the wait.
            panic!(
                "timed out after {limit:?} waiting for {what}; last seen: {last}\n\
                 (timed out waiting for {what})"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A spec tree from `(path, text)` pairs; panics on invalid specs (a test bug).
pub fn tree(files: &[(&str, &str)]) -> driftless::spec::SpecTree {
    let files: Vec<driftless::spec::SourceFile> = files
        .iter()
        .map(|(p, t)| driftless::spec::SourceFile {
            path: p.to_string(),
            contents: t.as_bytes().to_vec(),
        })
        .collect();
    driftless::spec::parse_files(&files).unwrap_or_else(|e| panic!("test specs invalid:\n{e}"))
}

/// An engine for one test: its own instance (so its own inventory), default options.
pub fn engine(client: &Client, instance: &str) -> driftless::apply::Engine {
    let opts = driftless::apply::Options {
        instance: instance.to_string(),
        ..Default::default()
    };
    driftless::apply::Engine::new(client.clone(), opts)
}

/// Renders `tree` against the cluster's nodes.
pub async fn render(
    client: &Client,
    instance: &str,
    tree: &driftless::spec::SpecTree,
) -> Vec<driftless::render::Object> {
    let nodes = driftless::cluster::node_facts(client)
        .await
        .expect("list nodes");
    let facts = driftless::render::Facts {
        instance: instance.to_string(),
        nodes,
    };
    driftless::render::render(tree, &facts).expect("render")
}

/// Renders and syncs `tree` with `engine`.
pub async fn sync(
    engine: &driftless::apply::Engine,
    tree: &driftless::spec::SpecTree,
) -> (Vec<driftless::render::Object>, driftless::apply::SyncReport) {
    let objects = render(&engine.client, &engine.opts.instance, tree).await;
    let report = engine
        .sync(&objects, &Default::default(), &driftless::apply::NoWait)
        .await
        .expect("sync");
    (objects, report)
}

/// Polls readiness until `done` says so (bounded), returning the last health.
pub async fn health_until(
    engine: &driftless::apply::Engine,
    tree: &driftless::spec::SpecTree,
    objects: &[driftless::render::Object],
    what: &str,
    done: impl Fn(&[driftless::health::SpecHealth]) -> bool,
) -> Vec<driftless::health::SpecHealth> {
    eventually(what, Duration::from_secs(90), || async {
        let observed = engine.observe(objects).await.map_err(|e| e.to_string())?;
        let h = driftless::health::tree_health(
            &tree.specs,
            &driftless::health::expected(objects),
            &observed,
            k8s_openapi::jiff::Timestamp::now(),
        );
        if done(&h) {
            Ok(h)
        } else {
            Err(format!("{h:#?}"))
        }
    })
    .await
}

/// The admin kubeconfig of the local cluster (`client` says how to start one).
pub fn admin_kubeconfig() -> PathBuf {
    std::env::var_os(CLUSTER_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{CLUSTER_ENV} is not set"))
}

/// Applies one manifest with server-side apply (field manager `driftless-test`), finding
/// its API through discovery as kubectl does.
pub async fn apply_manifest(client: &Client, doc: &Value) -> Value {
    apply_manifest_as(client, doc, "driftless-test").await
}

/// `apply_manifest` as field manager `manager`.
pub async fn apply_manifest_as(client: &Client, doc: &Value, manager: &str) -> Value {
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
            &PatchParams::apply(manager).force(),
            &Patch::Apply(doc),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    serde_json::to_value(applied).unwrap()
}

/// Write requests the apiserver itself counted (its `apiserver_request_total`: verbs
/// POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION) to the main resource of any of
/// `resources` (plural names; status and other subresources and dry runs are not
/// counted). What "zero writes" claims rest on: our own counter only says what we meant
/// to send. Only meaningful while no other test writes to those resources: tests that
/// use it are named `serial_*`, which `scripts/test` runs alone.
pub async fn apiserver_writes(client: &Client, resources: &[&str]) -> u64 {
    apiserver_requests(client, WRITES, resources).await
}

const WRITES: &[&str] = &[
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// [`apiserver_writes`] by the apiserver's answer (its status code): a write it carried
/// out answers 2xx; one it shed (429), or whose client went away before it was done, does
/// not.
pub async fn apiserver_writes_by_code(
    client: &Client,
    resources: &[&str],
) -> std::collections::BTreeMap<String, u64> {
    apiserver_requests_by_code(client, WRITES, resources).await
}

/// The writes of [`apiserver_writes_by_code`] the apiserver carried out (answered 2xx).
pub fn carried_out(by_code: &std::collections::BTreeMap<String, u64>) -> u64 {
    by_code
        .iter()
        .filter(|(code, _)| code.starts_with('2'))
        .map(|(_, n)| n)
        .sum()
}

/// LIST requests the apiserver counted for any of `resources`, as [`apiserver_writes`]
/// counts writes (and as meaningful only in a `serial_*` test).
pub async fn apiserver_lists(client: &Client, resources: &[&str]) -> u64 {
    apiserver_requests(client, &["LIST"], resources).await
}

/// GET requests (one object read by name) the apiserver counted for any of `resources`,
/// as [`apiserver_writes`] counts writes (and as meaningful only in a `serial_*` test).
pub async fn apiserver_gets(client: &Client, resources: &[&str]) -> u64 {
    apiserver_requests(client, &["GET"], resources).await
}

/// Dry-run requests (of any verb) the apiserver counted for any of `resources`: what
/// `diff` costs it (as meaningful only in a `serial_*` test).
pub async fn apiserver_dry_runs(client: &Client, resources: &[&str]) -> u64 {
    let text = apiserver_metrics(client).await;
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            let resource = metric_label(l, "resource").unwrap_or_default();
            resources.contains(&resource.as_str())
                && !metric_label(l, "dry_run").unwrap_or_default().is_empty()
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

async fn apiserver_metrics(client: &Client) -> String {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    client
        .request_text(req)
        .await
        .expect("the apiserver's /metrics")
}

fn metric_label(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let end = line[start..].find('"')? + start;
    Some(line[start..end].to_string())
}

/// Requests with one of `verbs` the apiserver counted for the main resource of any of
/// `resources`, dry runs left out.
async fn apiserver_requests(client: &Client, verbs: &[&str], resources: &[&str]) -> u64 {
    apiserver_requests_by_code(client, verbs, resources)
        .await
        .values()
        .sum()
}

/// [`apiserver_requests`] by the answer's status code.
async fn apiserver_requests_by_code(
    client: &Client,
    verbs: &[&str],
    resources: &[&str],
) -> std::collections::BTreeMap<String, u64> {
    let text = apiserver_metrics(client).await;
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            let verb = metric_label(l, "verb").unwrap_or_default();
            let resource = metric_label(l, "resource").unwrap_or_default();
            verbs.contains(&verb.as_str())
                && resources.contains(&resource.as_str())
                && metric_label(l, "subresource")
                    .unwrap_or_default()
                    .is_empty()
                && metric_label(l, "dry_run").unwrap_or_default().is_empty()
        })
        .filter_map(|l| {
            let n = l.rsplit(' ').next()?.parse::<f64>().ok()?;
            Some((metric_label(l, "code").unwrap_or_default(), n as u64))
        })
        .fold(std::collections::BTreeMap::new(), |mut by, (code, n)| {
            *by.entry(code).or_insert(0) += n;
            by
        })
}

/// Until no namespace is terminating: an earlier test's namespace, whose objects the
/// namespace controller lists and deletes for a while, kind by kind. The apiserver's
/// request counts of a serial test are its own only after that.
pub async fn no_namespace_terminating(client: &Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually("no namespace terminating", Duration::from_secs(180), || {
        let namespaces = namespaces.clone();
        async move {
            let list = namespaces
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let terminating: Vec<String> = list
                .items
                .iter()
                .filter(|n| {
                    n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
                })
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            if terminating.is_empty() {
                Ok(())
            } else {
                Err(format!("terminating: {}", terminating.join(", ")))
            }
        }
    })
    .await;
}

/// [`apiserver_writes`] once the cluster has stopped writing them on its own: no
/// namespace is terminating ([`no_namespace_terminating`]) and the count has held for
/// 3 s (controllers catching up). A count that starts earlier blames driftless for the
/// cluster's own writes.
pub async fn apiserver_writes_when_quiet(client: &Client, resources: &[&str]) -> u64 {
    apiserver_writes_by_code_when_quiet(client, resources)
        .await
        .values()
        .sum()
}

/// [`apiserver_writes_by_code`] once the cluster is quiet, as
/// [`apiserver_writes_when_quiet`] waits for it.
pub async fn apiserver_writes_by_code_when_quiet(
    client: &Client,
    resources: &[&str],
) -> std::collections::BTreeMap<String, u64> {
    no_namespace_terminating(client).await;
    let mut before = apiserver_writes_by_code(client, resources).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = apiserver_writes_by_code(client, resources).await;
        if now == before {
            return now;
        }
        before = now;
    }
    panic!("the cluster kept writing {resources:?} for a minute");
}

/// Runs `run` (a command) between two counts of the apiserver's writes to `resources`,
/// the first once the cluster is quiet: fails, naming `what`, if it wrote any.
pub async fn no_writes(
    client: &Client,
    resources: &[&str],
    what: &str,
    run: impl FnOnce() -> std::process::Output,
) -> std::process::Output {
    let before = apiserver_writes_when_quiet(client, resources).await;
    let out = run();
    let after = apiserver_writes(client, resources).await;
    assert_eq!(
        after - before,
        0,
        "{what} wrote to the cluster\n{}",
        super::show(&out)
    );
    out
}

/// Runs `cleanup` with an admin client of its own, on a thread of its own, and waits for
/// it: for `Drop` guards that must work also when the test failed (its runtime, and the
/// clients bound to it, may be gone).
pub fn cleanup_on_own_thread<F, Fut>(cleanup: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let done = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move { cleanup(client().await).await });
    });
    let _ = done.join();
}

/// The kubectl the tests use as a real client: the pinned 1.35 one of testbed/tools.env
/// (cluster.sh's env file names it), else whichever is on PATH.
pub fn kubectl_program() -> std::ffi::OsString {
    std::env::var_os("DRIFTLESS_TEST_KUBECTL_V35").unwrap_or_else(|| "kubectl".into())
}

/// `kubectl ARGS` with the local cluster's admin kubeconfig; fails the test with its
/// output unless it succeeds.
pub fn kubectl(args: &[&str]) {
    let out = std::process::Command::new(kubectl_program())
        .arg("--kubeconfig")
        .arg(admin_kubeconfig())
        .args(args)
        .output()
        .expect("kubectl (testbed/install.sh installs it; source .testbed/env names it)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        super::show(&out)
    );
}

/// Someone other than driftless sets a Deployment's replicas (a server-side apply as
/// field manager `someone`, forced): drift, as `kubectl scale` makes it.
pub async fn scale_as_someone_else(client: &Client, ns: &str, name: &str, replicas: i32) {
    let deployments =
        kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns);
    let theirs = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name}, "spec": {"replicas": replicas}});
    deployments
        .patch(
            name,
            &kube::api::PatchParams::apply("someone").force(),
            &kube::api::Patch::Apply(&theirs),
        )
        .await
        .unwrap();
}

/// Rewrites the entries of `instance`'s inventory (its one part in `driftless-system`,
/// as [`engine`] records it) with `edit`: the states a crash or an older driftless
/// leaves, which a test cannot reach through driftless itself.
pub async fn rewrite_inventory(
    client: &Client,
    instance: &str,
    edit: impl FnOnce(&mut Vec<Value>),
) {
    let inventory = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        client.clone(),
        "driftless-system",
    );
    let part = format!("driftless-inventory-{instance}-0");
    let map = inventory.get(&part).await.unwrap();
    let mut entries: Vec<Value> = serde_json::from_str(&map.data.unwrap()["entries.json"]).unwrap();
    edit(&mut entries);
    let text = serde_json::to_string(&entries).unwrap();
    inventory
        .patch(
            &part,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"entries.json": text}})),
        )
        .await
        .unwrap();
}
