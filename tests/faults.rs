//! Fault injection (issue 8): the daemon keeps running through an apiserver killed
//! mid-sync, etcd down for 30 s, the git server down, a force-push, its own SIGKILL in the
//! middle of a large apply, a read-only status directory and a full git-cache disk. After
//! each it converges, leaves no orphans, its inventory lists exactly what it owns, the
//! status file parses at every instant (read in a loop throughout), and metrics/status
//! say what happened.
//!
//! These tests stop parts of the shared local cluster, so `scripts/test` runs them on
//! their own, one at a time, after every other test (`DRIFTLESS_FAULTS=1`). Two of them
//! mount a tmpfs and so need root, as the CI runs.

use crate::support;

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use driftless::apply::Store;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use support::{Daemon, GitDaemon, git};

/// A bound on waiting for convergence, not a timing assertion: generous on purpose (a
/// failed sync backs off exponentially, and these machines are shared).
const CONVERGE: Duration = Duration::from_secs(240);

/// hang guard: the first sync of the 5,001-spec load test. Kubernetes 1.37 creates a
/// Service in about half a second here (its IP address allocator; Deployments take a
/// twentieth of that), so 5,001 of them take some five minutes on 2 cores, where 1.20
/// took under two.
const LOAD_CONVERGE: Duration = Duration::from_secs(1200);

/// The faults stop the shared cluster's apiserver and etcd; running next to other tests
/// would fail those. `scripts/test` sets this for the separate, serial phase.
fn guard() {
    assert!(
        std::env::var_os("DRIFTLESS_FAULTS").is_some(),
        "the fault-injection tests stop parts of the shared local cluster, so they run \
         alone: `scripts/test` runs them after the rest (or run \
         `DRIFTLESS_FAULTS=1 cargo nextest run -E 'test(/^faults::/)' --test-threads 1` against \
         a cluster nothing else is using)"
    );
}

fn testbed_dir() -> PathBuf {
    match std::env::var_os("DRIFTLESS_TESTBED_DIR") {
        Some(d) => d.into(),
        None => panic!(
            "DRIFTLESS_TESTBED_DIR is not set: these tests stop and restart parts of the \
             local cluster through testbed/cluster.sh. Start it with `testbed/cluster.sh up` \
             and `source .testbed/env`."
        ),
    }
}

/// `testbed/cluster.sh kill|restart <component>`.
fn cluster(action: &str, component: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/cluster.sh");
    let out = Command::new(script)
        .args([action, component])
        .env("DRIFTLESS_TESTBED_DIR", testbed_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cluster.sh {action} {component}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A component of the cluster killed until `end`; restarted on drop too, so a failing
/// test does not leave the cluster broken for the next.
struct Outage {
    component: &'static str,
    over: bool,
}

impl Outage {
    fn begin(component: &'static str) -> Outage {
        cluster("kill", component);
        Outage {
            component,
            over: false,
        }
    }

    fn end(mut self) {
        self.over = true;
        cluster("restart", self.component);
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        if !self.over {
            cluster("restart", self.component);
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe extern "C" {
        fn geteuid() -> u32;
    }
    unsafe { geteuid() == 0 }
}

/// A small tmpfs at `dir`; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        assert!(
            is_root(),
            "this fault needs a tmpfs mount (root), as the CI runs it"
        );
        std::fs::create_dir_all(dir).unwrap();
        sh(
            &[
                "mount",
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
            ],
            dir,
        );
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, opts: &str) {
        sh(&["mount", "-o", &format!("remount,{opts}")], &self.0);
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn sh(args: &[&str], path: &Path) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What every fault and load test starts from: the cluster, a namespace of its own, an
/// instance named after it, and a temporary directory for specs, status, cache and log.
struct Scene {
    client: Client,
    ns: String,
    instance: String,
    tmp: tempfile::TempDir,
}

impl Scene {
    async fn new(prefix: &str) -> Scene {
        guard();
        let client = support::client().await;
        let ns = support::namespace(&client, prefix).await;
        let instance = format!("{prefix}-{}", &ns[ns.len() - 6..]);
        Scene {
            client,
            ns,
            instance,
            tmp: tempfile::tempdir().unwrap(),
        }
    }
}

fn specs_dir(tmp: &tempfile::TempDir) -> PathBuf {
    let specs = tmp.path().join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    specs
}

// ---------------------------------------------------------------------------------------
// The daemon under test

/// `driftless run` with its status file and cache where a fault can reach them.
fn start(instance: &str, status: &Path, cache: &Path, args: &[&str]) -> Daemon {
    start_waiting(instance, status, cache, args, CONVERGE)
}

/// `start`, its status waited for up to `wait`.
fn start_waiting(
    instance: &str,
    status: &Path,
    cache: &Path,
    args: &[&str],
    wait: Duration,
) -> Daemon {
    Daemon::builder(instance)
        .status_file(status)
        .cache_dir(cache)
        .args(args)
        .wait(wait)
        .start()
}

/// The value of one sample of the daemon's `/metrics` (0 when absent).
fn metric(d: &Daemon, sample: &str) -> f64 {
    let text = http_get(d.metrics, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A counter's samples summed over its labels.
fn metric_sum(d: &Daemon, name: &str) -> f64 {
    let text = http_get(d.metrics, "/metrics");
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with([' ', '{']))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
        .sum()
}

fn http_get(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Reads the status file in a loop until stopped: every read that finds the file must
/// parse as a whole status (the file is replaced atomically), and once it has existed it
/// must never be missing.
struct StatusReader {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(u64, Vec<String>)>,
}

impl StatusReader {
    fn start(path: &Path) -> StatusReader {
        Self::every(path, Duration::from_millis(2))
    }

    /// A status of 5,000 specs is megabytes: parsing it every 2 ms would take a core.
    fn every(path: &Path, pause: Duration) -> StatusReader {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let path = path.to_path_buf();
        let handle = std::thread::spawn(move || {
            let (mut reads, mut bad, mut seen) = (0u64, Vec::new(), false);
            while !flag.load(Ordering::Relaxed) {
                match std::fs::read(&path) {
                    Ok(bytes) => {
                        seen = true;
                        reads += 1;
                        match serde_json::from_slice::<Value>(&bytes) {
                            Ok(v) if v["version"].is_u64() && v["specs"].is_array() => {}
                            Ok(v) => bad.push(format!("not a status: {v}")),
                            Err(e) => bad.push(format!(
                                "{e}: {}",
                                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                            )),
                        }
                    }
                    Err(e) if seen => bad.push(format!("status file gone: {e}")),
                    Err(_) => {}
                }
                // Tight, yet leaving the two cores to the cluster and the daemon.
                std::thread::sleep(pause);
            }
            (reads, bad)
        });
        StatusReader { stop, handle }
    }

    /// Stops reading; panics on any torn, invalid or missing read.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let (reads, bad) = self.handle.join().unwrap();
        assert!(
            bad.is_empty(),
            "{} of {reads} status reads were not a whole status file: {:?}",
            bad.len(),
            &bad[..bad.len().min(5)]
        );
        assert!(reads > 0, "the status file was never read");
        reads
    }
}

// ---------------------------------------------------------------------------------------
// Specs and what they should leave in the cluster

/// `n` idle elasticwebs (`web-<i>`): a Deployment with no replicas and a Service each.
fn webs(ns: &str, range: std::ops::Range<usize>, qps: u32) -> String {
    let mut out = format!("namespace = \"{ns}\"\n");
    for i in range {
        out.push_str(&format!(
            "[elasticweb.web-{i}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = {qps}\n"
        ));
    }
    out
}

fn names(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|i| format!("web-{i}")).collect()
}

async fn deployments(client: &Client, ns: &str) -> usize {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .list_metadata(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(0)
}

/// The cluster holds exactly `want` (Deployment + Service each) for `instance` in `ns`, no
/// orphans, and the inventory lists exactly those objects with their live UIDs.
async fn assert_converged(client: &Client, ns: &str, instance: &str, want: &BTreeSet<String>) {
    let selector = format!("driftless.dev/instance={instance}");
    let lp = ListParams::default().labels(&selector);
    let (deploys, services) =
        support::eventually("the owned objects to match the specs", CONVERGE, || async {
            let d = Api::<Deployment>::namespaced(client.clone(), ns)
                .list(&lp)
                .await
                .map_err(|e| e.to_string())?;
            let s = Api::<Service>::namespaced(client.clone(), ns)
                .list(&lp)
                .await
                .map_err(|e| e.to_string())?;
            let dn: BTreeSet<String> = d.items.iter().map(|o| o.name_any()).collect();
            let sn: BTreeSet<String> = s.items.iter().map(|o| o.name_any()).collect();
            if &dn == want && &sn == want {
                Ok((d.items, s.items))
            } else {
                Err(format!(
                    "deployments extra {:?} missing {:?}; services extra {:?} missing {:?}",
                    dn.difference(want).collect::<Vec<_>>(),
                    want.difference(&dn).collect::<Vec<_>>(),
                    sn.difference(want).collect::<Vec<_>>(),
                    want.difference(&sn).collect::<Vec<_>>()
                ))
            }
        })
        .await;
    let store = Store {
        buckets: None,
        namespace: "driftless-system".into(),
        instance: instance.into(),
        field_manager: "driftless".into(),
    };
    let inv = store.load(client).await.expect("load the inventory");
    let mut uids = std::collections::BTreeMap::new();
    for d in &deploys {
        uids.insert(("Deployment", d.name_any()), d.uid());
    }
    for s in &services {
        uids.insert(("Service", s.name_any()), s.uid());
    }
    let listed: BTreeSet<(String, String)> = inv
        .entries
        .keys()
        .map(|k| (k.kind.clone(), k.name.clone()))
        .collect();
    let expected: BTreeSet<(String, String)> = uids
        .keys()
        .map(|(k, n)| (k.to_string(), n.clone()))
        .collect();
    assert_eq!(
        listed, expected,
        "the inventory lists exactly what is owned"
    );
    for (key, entry) in &inv.entries {
        assert_eq!(key.namespace, ns);
        let live = uids
            .get(&(key.kind.as_str(), key.name.clone()))
            .cloned()
            .flatten();
        assert_eq!(
            entry.uid, live,
            "the inventory's UID of {key:?} is the live object's"
        );
    }
}

fn all_ready(status: &Value, n: usize) -> bool {
    status["specs"]
        .as_array()
        .is_some_and(|s| s.len() == n && s.iter().all(|s| s["ready"] == true))
}

/// The revision seen was applied, by a successful sync, and every one of `n` specs is
/// ready.
fn settled(status: &Value, n: usize) -> bool {
    status["revision_applied"].is_string()
        && status["revision_applied"] == status["revision_seen"]
        && status["last_sync"]["result"] == "success"
        && status["errors"].as_array().is_some_and(|e| e.is_empty())
        && all_ready(status, n)
}

fn write(path: &Path, text: &str) {
    // Written next to it and renamed, so the watcher never reads half a file.
    let tmp = path.with_extension("tmp-write");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

// ---------------------------------------------------------------------------------------
// git on loopback

/// A bare repository under `base` and a work tree pushing to it.
fn repo(base: &Path, name: &str) -> (PathBuf, PathBuf) {
    let bare = base.join(name);
    git(base, &["init", "-q", "--bare", "-b", "main", name]);
    let work = base.join(format!("{name}-work"));
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    (bare, work)
}

fn commit(work: &Path, msg: &str) -> String {
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "--allow-empty", "-m", msg]);
    git(work, &["rev-parse", "HEAD"])
}

// ---------------------------------------------------------------------------------------
// The faults

#[tokio::test(flavor = "multi_thread")]
async fn apiserver_killed_mid_sync_and_restarted() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-api").await;
    let specs = specs_dir(&tmp);
    write(&specs.join("web.toml"), &webs(&ns, 0..150, 0));
    let status = tmp.path().join("status.json");
    let dir = specs.display().to_string();
    let mut d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &["--dir", &dir],
    );
    let reader = StatusReader::start(&status);

    // In the middle of the first sync: some objects are there, not all.
    support::eventually("the first sync to be under way", CONVERGE, || async {
        let n = deployments(&client, &ns).await;
        if n >= 10 {
            Ok(n)
        } else {
            Err(format!("{n} deployments"))
        }
    })
    .await;
    let outage = Outage::begin("kube-apiserver");
    // Down until the daemon has said so: a failed sync in the status file.
    d.wait_status("the failed sync to be reported", |s| {
        s["last_sync"]["result"] == "failed" && s["last_sync"]["message"].is_string()
    })
    .await;
    d.wait_status("the unreachable API to be reported", |s| {
        s["errors"].as_array().into_iter().flatten().any(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("cannot reach the Kubernetes API"))
        })
    })
    .await;
    d.assert_alive("while the apiserver was down");
    outage.end();

    d.wait_status("every spec ready after the restart", |s| settled(s, 150))
        .await;
    d.assert_alive("after the apiserver came back");
    assert!(metric(&d, "driftless_sync_total{result=\"failed\"}") >= 1.0);
    assert_converged(&client, &ns, &instance, &names(0..150)).await;
    reader.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_down_for_30_seconds_during_a_change() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-etcd").await;
    let specs = specs_dir(&tmp);
    write(&specs.join("web.toml"), &webs(&ns, 0..40, 0));
    let status = tmp.path().join("status.json");
    let dir = specs.display().to_string();
    let mut d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &["--dir", &dir, "--sync-timeout", "20s"],
    );
    let reader = StatusReader::start(&status);
    d.wait_status("the first revision settled", |s| settled(s, 40))
        .await;
    let first = d.status().unwrap()["revision_applied"].clone();

    let outage = Outage::begin("etcd");
    let down = Instant::now();
    // A change while etcd is away: 40 new specs, 10 removed.
    write(&specs.join("web.toml"), &webs(&ns, 10..80, 0));
    d.wait_status("the failed sync to be reported", |s| {
        s["last_sync"]["result"] == "failed" && s["revision_applied"] == first
    })
    .await;
    // Down for 30 s (at least; as long as the failure took to show).
    if let Some(rest) = Duration::from_secs(30).checked_sub(down.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    d.assert_alive("while etcd was down");
    outage.end();

    let s = d
        .wait_status("the change applied after etcd came back", |s| {
            settled(s, 70) && s["revision_applied"] != first
        })
        .await;
    d.assert_alive("after etcd came back");
    assert_eq!(s["last_sync"]["result"], "success");
    assert!(metric(&d, "driftless_sync_total{result=\"failed\"}") >= 1.0);
    assert_converged(&client, &ns, &instance, &names(10..80)).await;
    reader.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_sigkilled_mid_apply_restarts_and_converges() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-kill").await;
    let specs = specs_dir(&tmp);
    write(&specs.join("web.toml"), &webs(&ns, 0..200, 0));
    let status = tmp.path().join("status.json");
    let dir = specs.display().to_string();
    let mut d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &["--dir", &dir],
    );
    let reader = StatusReader::start(&status);
    let at = support::eventually("the large apply to be under way", CONVERGE, || async {
        let n = deployments(&client, &ns).await;
        if n >= 20 {
            Ok(n)
        } else {
            Err(format!("{n} deployments"))
        }
    })
    .await;
    d.sigkill();
    let after = deployments(&client, &ns).await;
    assert!(
        after < 200,
        "the kill was meant to land mid-apply ({at} then {after} of 200 applied); the apply \
         finished first"
    );

    d.restart();
    d.wait_status("all 200 ready after the restart", |s| settled(s, 200))
        .await;
    assert_converged(&client, &ns, &instance, &names(0..200)).await;

    // What the killed run recorded is pruned as well as anything: 40 leave the specs.
    write(&specs.join("web.toml"), &webs(&ns, 40..200, 0));
    d.wait_status("the 160 left settled", |s| settled(s, 160))
        .await;
    assert_converged(&client, &ns, &instance, &names(40..200)).await;
    assert!(metric(&d, "driftless_pruned_objects_total") >= 80.0);
    d.assert_alive("at the end");
    reader.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn git_server_down_then_back() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-git").await;
    let (_bare, work) = repo(tmp.path(), "specs.git");
    std::fs::write(work.join("web.toml"), webs(&ns, 0..3, 0)).unwrap();
    let c1 = commit(&work, "three");
    git(&work, &["push", "-q", "origin", "main"]);
    let mut server = GitDaemon::serve(tmp.path());
    let url = server.url("specs.git");
    let status = tmp.path().join("status.json");
    let mut d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &["--git", &url, "--interval", "1s"],
    );
    let reader = StatusReader::start(&status);
    d.wait_status("commit 1 settled", |s| {
        settled(s, 3) && s["revision_applied"] == c1.as_str()
    })
    .await;

    server.down();
    std::fs::write(work.join("web.toml"), webs(&ns, 1..5, 0)).unwrap();
    let c2 = commit(&work, "four");
    git(&work, &["push", "-q", "origin", "main"]);
    let s = d
        .wait_status("the fetch error reported", |s| {
            s["errors"]
                .as_array()
                .is_some_and(|e| !e.is_empty() && e[0]["message"].is_string())
        })
        .await;
    assert_eq!(
        s["revision_applied"],
        c1.as_str(),
        "the last good revision stays"
    );
    assert!(
        metric(
            &d,
            "driftless_source_errors_total{source=\"git\",reason=\"fetch\"}"
        ) >= 1.0,
        "{}",
        http_get(d.metrics, "/metrics")
    );
    // While it fails, the source is asked less often: the interval (1 s), then doubling.
    support::eventually(
        "a second failed fetch, two seconds after the first",
        CONVERGE,
        || async {
            match d.log().contains("retry_in=2s") {
                true => Ok(()),
                false => Err(d.log()),
            }
        },
    )
    .await;
    // Nothing was pruned or changed while the source was away.
    assert_converged(&client, &ns, &instance, &names(0..3)).await;
    d.assert_alive("while the git server was down");

    server.up();
    d.wait_status("commit 2 settled", |s| {
        settled(s, 4) && s["revision_applied"] == c2.as_str()
    })
    .await;
    assert_converged(&client, &ns, &instance, &names(1..5)).await;
    d.assert_alive("after the git server came back");
    reader.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn force_push_rewriting_history_converges_to_the_new_head() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-force").await;
    let (_bare, work) = repo(tmp.path(), "specs.git");
    std::fs::write(work.join("web.toml"), webs(&ns, 0..2, 0)).unwrap();
    let a = commit(&work, "a");
    std::fs::write(work.join("web.toml"), webs(&ns, 0..3, 0)).unwrap();
    let b = commit(&work, "b");
    git(&work, &["push", "-q", "origin", "main"]);
    let server = GitDaemon::serve(tmp.path());
    let url = server.url("specs.git");
    let status = tmp.path().join("status.json");
    let mut d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        // a' prunes 4 of b's 6 objects: more than the default half, and a refusal holds
        // on every retry (this test is about history, not the prune guard).
        &[
            "--git",
            &url,
            "--interval",
            "1s",
            "--max-prune-ratio",
            "0.7",
        ],
    );
    let reader = StatusReader::start(&status);
    d.wait_status("b settled", |s| {
        settled(s, 3) && s["revision_applied"] == b.as_str()
    })
    .await;

    // History rewritten: b is gone from the branch, a' replaces it.
    git(&work, &["reset", "-q", "--hard", &a]);
    let mut text = webs(&ns, 0..1, 0);
    text.push_str(&webs(&ns, 7..8, 0).replace(&format!("namespace = \"{ns}\"\n"), ""));
    std::fs::write(work.join("web.toml"), text).unwrap();
    let a2 = commit(&work, "a prime");
    git(&work, &["push", "-q", "--force", "origin", "main"]);
    d.wait_status("a' settled", |s| {
        settled(s, 2) && s["revision_applied"] == a2.as_str()
    })
    .await;
    let want: BTreeSet<String> = ["web-0", "web-7"].map(String::from).into();
    assert_converged(&client, &ns, &instance, &want).await;

    // And back to an older commit the cache already holds.
    git(
        &work,
        &["push", "-q", "--force", "origin", &format!("{b}:main")],
    );
    d.wait_status("b again", |s| {
        settled(s, 3) && s["revision_applied"] == b.as_str()
    })
    .await;
    assert_converged(&client, &ns, &instance, &names(0..3)).await;
    d.assert_alive("after the force-pushes");
    reader.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_status_directory_is_survived_and_caught_up() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-ro").await;
    let specs = specs_dir(&tmp);
    write(&specs.join("web.toml"), &webs(&ns, 0..3, 0));
    let state = Tmpfs::mount(&tmp.path().join("state"), "4m");
    let status = state.0.join("status.json");
    let dir = specs.display().to_string();
    let mut d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &["--dir", &dir],
    );
    let reader = StatusReader::start(&status);
    let before = d
        .wait_status("the first revision settled", |s| settled(s, 3))
        .await;

    state.remount("ro");
    // A change while the status cannot be written: it is still applied.
    write(&specs.join("web.toml"), &webs(&ns, 0..4, 0));
    support::eventually(
        "web-3 applied with the status directory read-only",
        CONVERGE,
        || async {
            let n = deployments(&client, &ns).await;
            if n == 4 {
                Ok(())
            } else {
                Err(format!("{n} deployments"))
            }
        },
    )
    .await;
    support::eventually("the failed status writes counted", CONVERGE, || async {
        let n = metric(&d, "driftless_status_write_errors_total");
        if n >= 1.0 {
            Ok(())
        } else {
            Err(format!("{n}"))
        }
    })
    .await;
    assert!(
        d.log().contains("could not write the status file"),
        "the log says why:\n{}",
        d.log()
    );
    assert_eq!(
        d.status().unwrap()["revision_applied"],
        before["revision_applied"],
        "the old status file is still there, whole"
    );
    assert!(http_get(d.metrics, "/healthz").starts_with("HTTP/1.1 200"));
    d.assert_alive("with the status directory read-only");

    state.remount("rw");
    d.wait_status("the status caught up", |s| settled(s, 4))
        .await;
    assert_converged(&client, &ns, &instance, &names(0..4)).await;
    reader.finish();
    drop(d);
}

#[tokio::test(flavor = "multi_thread")]
async fn full_git_cache_disk_keeps_the_last_good_revision() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("fault-disk").await;
    let (_bare, work) = repo(tmp.path(), "specs.git");
    std::fs::write(work.join("web.toml"), webs(&ns, 0..3, 0)).unwrap();
    let c1 = commit(&work, "three");
    git(&work, &["push", "-q", "origin", "main"]);
    let server = GitDaemon::serve(tmp.path());
    let url = server.url("specs.git");
    let cache = Tmpfs::mount(&tmp.path().join("cache"), "2m");
    let status = tmp.path().join("status.json");
    let mut d = start(
        &instance,
        &status,
        &cache.0,
        &["--git", &url, "--interval", "1s"],
    );
    let reader = StatusReader::start(&status);
    d.wait_status("commit 1 settled", |s| {
        settled(s, 3) && s["revision_applied"] == c1.as_str()
    })
    .await;

    // The next commit brings 4 MiB that cannot be compressed: it does not fit.
    let mut noise = vec![0u8; 4 << 20];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .unwrap()
            .read_exact(&mut noise)
            .unwrap();
    }
    std::fs::create_dir_all(work.join("assets")).unwrap();
    std::fs::write(work.join("assets/blob.bin"), noise).unwrap();
    std::fs::write(work.join("web.toml"), webs(&ns, 1..4, 0)).unwrap();
    let c2 = commit(&work, "big");
    git(&work, &["push", "-q", "origin", "main"]);
    let s = d
        .wait_status("the full disk reported", |s| {
            s["errors"].as_array().is_some_and(|e| {
                e.iter().any(|e| {
                    let m = e["message"].as_str().unwrap_or_default().to_lowercase();
                    m.contains("space") || m.contains("disk") || m.contains("write")
                })
            })
        })
        .await;
    assert_eq!(
        s["revision_applied"],
        c1.as_str(),
        "the last good revision stays"
    );
    assert!(metric_sum(&d, "driftless_source_errors_total") >= 1.0);
    assert_converged(&client, &ns, &instance, &names(0..3)).await;
    d.assert_alive("with the cache disk full");

    cache.remount("size=64m");
    d.wait_status("commit 2 settled once there is room", |s| {
        settled(s, 3) && s["revision_applied"] == c2.as_str()
    })
    .await;
    assert_converged(&client, &ns, &instance, &names(1..4)).await;
    reader.finish();
    drop(d);
}

// ---------------------------------------------------------------------------------------
// Load

/// Peak and current resident memory of a process, in MiB (VmHWM, VmRSS).
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// 5,000 specs (10,000 objects) synced by one daemon; then 500 saves in a minute. The
/// daemon converges to the last save, its queue collapses the burst (one full sync at a
/// time), and its memory after the burst is what it was before, give or take.
#[tokio::test(flavor = "multi_thread")]
async fn load_5000_specs_then_500_saves_in_a_minute() {
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("load-specs").await;
    let specs = specs_dir(&tmp);
    // 50 files of 100 specs, as a team's repository would split them.
    for f in 0..50 {
        write(
            &specs.join(format!("web-{f:02}.toml")),
            &webs(&ns, f * 100..(f + 1) * 100, 0),
        );
    }
    let burst = |qps: u32| {
        format!(
            "namespace = \"{ns}\"\n[elasticweb.burst]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = {qps}\n"
        )
    };
    write(&specs.join("burst.toml"), &burst(0));
    let status = tmp.path().join("status.json");
    let dir = specs.display().to_string();
    let token = tmp.path().join("api-token");
    write(&token, "load-token\n");
    let mut d = start_waiting(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &[
            "--dir",
            &dir,
            "--resync",
            "1h",
            "--api-token-file",
            &token.display().to_string(),
        ],
        LOAD_CONVERGE,
    );
    let reader = StatusReader::every(&status, Duration::from_millis(100));
    let started = Instant::now();
    d.wait_status("5,001 specs settled", |s| settled(s, 5001))
        .await;
    let first_sync = started.elapsed();
    let (peak_synced, rss_synced) = memory_mib(d.pid());
    let mut want = names(0..5000);
    want.insert("burst".into());
    assert_converged(&client, &ns, &instance, &want).await;
    // A sync a newer save cancels (superseded) may have written before it stopped.
    let ran = |d: &Daemon| {
        metric(d, "driftless_sync_total{result=\"success\"}")
            + metric(d, "driftless_sync_total{result=\"superseded\"}")
    };
    let syncs_before = ran(&d);
    let writes_before = metric(&d, "driftless_api_writes_total{verb=\"patch\"}");

    // 500 saves in a minute: replicas 0, 1, 2, 0, ... and last 3.
    let burst_started = Instant::now();
    for i in 0..500u32 {
        let qps = if i == 499 { 300 } else { (i % 3) * 100 };
        write(&specs.join("burst.toml"), &burst(qps));
        let due = Duration::from_millis(120) * (i + 1);
        if let Some(rest) = due.checked_sub(burst_started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    let burst_took = burst_started.elapsed();
    support::eventually("the last save applied (3 replicas)", CONVERGE, || async {
        let d = Api::<Deployment>::namespaced(client.clone(), &ns)
            .get("burst")
            .await
            .map_err(|e| e.to_string())?;
        match d.spec.replicas {
            Some(3) => Ok(()),
            r => Err(format!("replicas {r:?}")),
        }
    })
    .await;
    d.wait_status("the last save settled", |s| settled(s, 5001))
        .await;
    d.assert_alive("after the burst");
    let (peak_after, rss_after) = memory_mib(d.pid());
    let syncs = ran(&d) - syncs_before;
    let writes = metric(&d, "driftless_api_writes_total{verb=\"patch\"}") - writes_before;
    eprintln!(
        "load: 5,001 specs (10,002 objects) settled in {:.1} s, peak RSS {peak_synced:.0} MiB \
         (RSS {rss_synced:.0} MiB); 500 saves in {:.1} s → {syncs} syncs, {writes} PATCHes; \
         after: peak {peak_after:.0} MiB, RSS {rss_after:.0} MiB",
        first_sync.as_secs_f64(),
        burst_took.as_secs_f64()
    );
    // The burst collapsed: the queue holds one full sync at most, so there were fewer
    // syncs than saves, and only the burst spec was written.
    assert!(syncs < 500.0, "{syncs} syncs for 500 saves");
    assert!(
        writes <= 2.0 * syncs,
        "{writes} PATCHes in {syncs} syncs: more than the burst spec's two objects each"
    );
    // Bounded: the burst did not grow the daemon beyond its size after the first sync.
    assert!(
        rss_after < rss_synced * 1.5 + 64.0,
        "RSS grew from {rss_synced:.0} MiB to {rss_after:.0} MiB over the burst"
    );
    assert_converged(&client, &ns, &instance, &want).await;

    // A quiet minute as an open page sees it (the web UI's stream: compressed, the whole
    // document once, then deltas), with a resync of all 5,001 specs inside it, as
    // `--resync` would make: what changes is the sync's own news, not the specs.
    let mut page = support::EventStream::open_gzip(d.metrics, "/api/v1/events?deltas=1").await;
    let (name, whole) = page.next().await;
    assert_eq!(name, "status");
    assert_eq!(whole["specs"].as_array().map_or(0, Vec::len), 5001);
    let first = page.bytes;
    let minute = Duration::from_secs(60);
    let resync = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        support::http(
            d.metrics,
            "POST",
            "/api/v1/sync?wait=true",
            &[("Authorization", "Bearer load-token")],
            b"",
        )
        .await
    };
    let (quiet, (code, answer)) = tokio::join!(page.bytes_during(minute), resync);
    assert_eq!(code, 200, "{answer}");
    eprintln!(
        "load: an open page's stream at 5,001 specs: the document {first} B gzip, then \
         {quiet} B in a quiet minute with one whole resync"
    );
    assert!(
        quiet < 10_000,
        "{quiet} B in a quiet minute with a resync at 5,001 specs"
    );
    reader.finish();
}

/// A storm of Pod events in a localservice's namespace (every patch of a Pod is an event
/// to the daemon's Pod watch): the daemon keeps up — a Pod created during the storm is
/// labelled with its node — and its memory stays bounded (the watch stream is pulled, so
/// a slow consumer holds back the apiserver instead of queueing).
#[tokio::test(flavor = "multi_thread")]
async fn load_a_storm_of_pod_events_for_localservice() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams, PostParams};
    let Scene {
        client,
        ns,
        instance,
        tmp,
    } = Scene::new("load-pods").await;
    let specs = specs_dir(&tmp);
    write(
        &specs.join("local.toml"),
        &format!(
            "namespace = \"{ns}\"\n[localservice.storm]\nselector = {{ app = \"storm\" }}\n\
             ports = [{{ name = \"http\", port = 80, target-port = 8080 }}]\n"
        ),
    );
    let status = tmp.path().join("status.json");
    let dir = specs.display().to_string();
    let d = start(
        &instance,
        &status,
        &tmp.path().join("cache"),
        &["--dir", &dir],
    );
    let reader = StatusReader::start(&status);
    d.wait_status("the localservice applied", |s| {
        s["revision_applied"].is_string() && s["last_sync"]["result"] == "success"
    })
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = |name: String| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"app": "storm"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.17.1"}]}
        }))
        .unwrap()
    };
    const PODS: usize = 100;
    for i in 0..PODS {
        pods.create(&PostParams::default(), &pod(format!("p-{i}")))
            .await
            .unwrap();
    }
    let labelled = |want: usize| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("localservice.driftless.dev/node"))
                .await
                .map_err(|e| e.to_string())?;
            if list.items.len() >= want {
                Ok(())
            } else {
                Err(format!("{} of {want} labelled", list.items.len()))
            }
        }
    };
    support::eventually("every Pod labelled with its node", CONVERGE, || {
        labelled(PODS)
    })
    .await;
    let (_, rss_before) = memory_mib(d.pid());

    // The storm: annotation patches from 48 tasks for 30 s.
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..48usize {
        let pods = pods.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("p-{}", (t + n as usize * 48) % PODS);
                let patch =
                    serde_json::json!({"metadata": {"annotations": {"storm": n.to_string()}}});
                if pods
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                {
                    n += 1;
                }
            }
            n
        }));
    }
    // Mid-storm, a new Pod: the daemon must label it while the storm goes on.
    tokio::time::sleep(Duration::from_secs(10)).await;
    pods.create(&PostParams::default(), &pod("late".into()))
        .await
        .unwrap();
    support::eventually("the Pod created mid-storm labelled", CONVERGE, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("late").await.map_err(|e| e.to_string())?;
            if p.labels().contains_key("localservice.driftless.dev/node") {
                Ok(())
            } else {
                Err("not labelled".into())
            }
        }
    })
    .await;
    let labelled_at = started.elapsed();
    if let Some(rest) = Duration::from_secs(30).checked_sub(started.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut events = 0u64;
    for t in tasks {
        events += t.await.unwrap();
    }
    let took = started.elapsed().as_secs_f64();
    let (peak, rss_after) = memory_mib(d.pid());
    eprintln!(
        "load: {events} Pod events in {took:.1} s ({:.0}/s); the Pod created at 10 s was \
         labelled at {:.1} s; daemon RSS {rss_before:.0} → {rss_after:.0} MiB (peak {peak:.0})",
        events as f64 / took,
        labelled_at.as_secs_f64()
    );
    assert!(events > 0);
    support::eventually("every Pod still labelled", CONVERGE, || labelled(PODS + 1)).await;
    assert!(
        rss_after < rss_before * 1.5 + 64.0,
        "RSS grew from {rss_before:.0} MiB to {rss_after:.0} MiB during the storm"
    );
    let mut d = d;
    d.assert_alive("after the storm");
    reader.finish();
}
