//! The measurements. Every timed region is wall-clock time around one process
//! (driftless, kubectl) or, for the raw SSA ceiling, around the in-process PATCH loop.
//! Each run gets namespaces and a driftless instance of its own, so a cold sync is cold;
//! namespaces are deleted between runs and the harness waits for that outside any timed
//! region.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, WatchParams};
use kube::core::WatchEvent;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use driftless_bench::generate::{self, Edits, Tree};
use driftless_bench::stats::{Summary, percentile, scaling_exponent};

use crate::Args;

mod cpu;
mod daemon;
mod runs;

pub use cpu::{CpuProbe, CpuUse};
pub(crate) use cpu::{process_children_cpu_s, process_cpu_s};
use runs::{cold_of, diff_of, noop_of};

const MIB: f64 = 1024.0 * 1024.0;

#[derive(Debug, Serialize)]
pub struct Results {
    pub date: String,
    pub machine: Machine,
    pub apiserver_version: String,
    pub kubectl_version: String,
    pub driftless_version: String,
    pub n: usize,
    pub objects: usize,
    pub runs: usize,
    pub namespaces: usize,
    pub concurrency: usize,
    pub cold: Option<Cold>,
    pub noop: Option<Noop>,
    pub diff: Option<Diffs>,
    pub daemon: Option<Daemon>,
    pub scaling: Option<Scaling>,
    /// CPU seconds per timed region ("cold/driftless", "noop/kubectl", ...), one per run.
    pub cpu: BTreeMap<String, Vec<CpuUse>>,
    pub targets: Vec<Target>,
    pub notes: Vec<String>,
    /// /proc/loadavg (1, 5, 15 min) when the run started and ended: other work on the
    /// machine shows here, and skews absolute times more than same-run ratios.
    pub load_average_start: String,
    pub load_average_end: String,
}

#[derive(Debug, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub memory_gib: f64,
    pub kernel: String,
}

/// Seconds, and objects per second, per tool; ratios per run (same run, same cluster state).
#[derive(Debug, Serialize)]
pub struct Cold {
    pub driftless_s: Summary,
    pub kubectl_s: Option<Summary>,
    pub raw_s: Summary,
    pub driftless_objs_per_s: Summary,
    pub kubectl_objs_per_s: Option<Summary>,
    pub raw_objs_per_s: Summary,
    /// driftless's rate / the raw loop's rate.
    pub driftless_vs_raw: Summary,
    /// kubectl's time / driftless's time.
    pub speedup_vs_kubectl: Option<Summary>,
    pub driftless_writes: Vec<u64>,
}

#[derive(Debug, Serialize)]
pub struct Noop {
    pub driftless_s: Summary,
    pub driftless_writes: Vec<u64>,
    pub kubectl_s: Option<Summary>,
    /// PATCHes kubectl sent on one warm re-apply (counted from `-v=6`, untimed).
    pub kubectl_writes: Option<u64>,
    /// driftless's time / kubectl's time.
    pub ratio: Option<Summary>,
}

#[derive(Debug, Serialize)]
pub struct Diffs {
    pub unchanged: DiffPair,
    pub changed: DiffPair,
    /// Specs changed in the "1 %" set (their Deployment's image).
    pub changed_specs: usize,
}

#[derive(Debug, Serialize)]
pub struct DiffPair {
    pub driftless_s: Summary,
    pub driftless_exit: Vec<i32>,
    pub kubectl_s: Option<Summary>,
    pub kubectl_exit: Vec<i32>,
    /// Objects kubectl's output shows as different (a header per object).
    pub kubectl_objects_shown: Vec<usize>,
    pub driftless_objects_shown: Vec<usize>,
    /// kubectl's time / driftless's time.
    pub speedup: Option<Summary>,
}

#[derive(Debug, Serialize, Clone)]
pub struct Latency {
    pub p50_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
    pub samples: Vec<f64>,
}

impl Latency {
    fn of(samples: Vec<f64>) -> Latency {
        Latency {
            p50_s: percentile(&samples, 50.0),
            p95_s: percentile(&samples, 95.0),
            max_s: samples.iter().copied().fold(f64::NAN, f64::max),
            samples,
        }
    }
}

#[derive(Debug, Serialize, Clone)]
pub struct Daemon {
    pub n: usize,
    pub objects: usize,
    /// Process start → the first sync applied every object.
    pub first_sync_s: f64,
    /// Process start → every spec ready in the status file.
    pub first_ready_s: Option<f64>,
    pub edits: usize,
    /// File write → the Deployment changed in the cluster (seen by a watch).
    pub applied: Latency,
    /// File write → the status file says the spec is ready at its new size.
    pub ready: Latency,
    /// API writes the daemon made per edit (from /metrics).
    pub writes_per_edit: f64,
    pub rss_after_first_sync_mib: f64,
    /// Peak RSS (VmHWM) after all edits.
    pub peak_rss_mib: f64,
}

#[derive(Debug, Serialize)]
pub struct ScalePoint {
    pub n: usize,
    pub objects: usize,
    pub cold_s: Summary,
    pub noop_s: Summary,
    pub daemon_peak_rss_mib: Option<f64>,
    pub daemon_first_sync_s: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Scaling {
    pub points: Vec<ScalePoint>,
    /// k in time ≈ c·N^k (log-log least squares over the points).
    pub cold_time_exponent: Option<f64>,
    pub noop_time_exponent: Option<f64>,
    pub daemon_first_sync_exponent: Option<f64>,
    pub daemon_memory_exponent: Option<f64>,
    /// Daemon peak RSS growth per object between the smallest and largest point (KiB).
    pub daemon_kib_per_object: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Target {
    pub name: String,
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
}

/// The harness's view of the cluster and the tools.
struct Bench<'a> {
    args: &'a Args,
    driftless: PathBuf,
    client: Client,
    nodes: Vec<driftless::render::NodeFacts>,
    work: PathBuf,
    notes: Vec<String>,
}

struct Timed {
    secs: f64,
    code: i32,
    stdout: String,
    stderr: String,
}

async fn timed(cmd: &mut tokio::process::Command) -> anyhow::Result<Timed> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let out = cmd.output().await.context("running a command")?;
    let secs = start.elapsed().as_secs_f64();
    Ok(Timed {
        secs,
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// "N API writes" from `driftless apply`'s stderr.
fn api_writes(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_suffix(" API writes")?.parse().ok())
}

fn summary(samples: &[f64]) -> anyhow::Result<Summary> {
    Summary::of(samples).ok_or_else(|| anyhow!("no samples"))
}

fn opt_summary(samples: &[f64]) -> Option<Summary> {
    Summary::of(samples)
}

pub async fn run(args: &Args, driftless: &Path) -> anyhow::Result<Results> {
    let client = Client::try_default()
        .await
        .context("connecting to the cluster (KUBECONFIG); scripts/bench boots one")?;
    let version = client
        .apiserver_version()
        .await
        .context("reading the apiserver version")?;
    let nodes = driftless::cluster::node_facts(&client)
        .await
        .context("listing nodes")?;
    anyhow::ensure!(!nodes.is_empty(), "the cluster has no nodes");
    let (_tmp, work) = match &args.work_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            (None, d.clone())
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("driftless-bench.")
                .tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let mut b = Bench {
        args,
        driftless: driftless.to_path_buf(),
        client,
        nodes,
        work,
        notes: Vec::new(),
    };
    let load_average_start = load_average();
    let kubectl_version = b.kubectl_version().await;
    let driftless_version = timed(tokio::process::Command::new(&b.driftless).arg("--version"))
        .await
        .map(|t| t.stdout.trim().to_string())
        .unwrap_or_default();
    eprintln!(
        "apiserver {}, kubectl {kubectl_version}, {} nodes, work dir {}",
        version.git_version,
        b.nodes.len(),
        b.work.display()
    );
    // Anything an aborted earlier run left behind.
    b.cleanup(&["bench".to_string()], &[]).await?;

    let n = args.n;
    let objects = generate::expected_objects(n, b.nodes.len());
    let mut main_runs = Vec::new();
    if !args.skips("cold") {
        for r in 0..args.runs {
            main_runs.push(b.main_run(r).await?);
        }
    }
    let daemon = if args.skips("daemon") {
        None
    } else {
        Some(b.daemon(n, "bench-dm", args.edits).await?)
    };
    let scaling = if args.skips("scaling") {
        None
    } else {
        Some(b.scaling(&main_runs, daemon.as_ref()).await?)
    };

    let cold = cold_of(&main_runs, objects)?;
    let noop = if main_runs.is_empty() || args.skips("noop") {
        None
    } else {
        Some(noop_of(&main_runs)?)
    };
    let diff = if main_runs.is_empty() || args.skips("diff") {
        None
    } else {
        Some(diff_of(&main_runs, n)?)
    };
    let mut cpu: BTreeMap<String, Vec<CpuUse>> = BTreeMap::new();
    for r in &main_runs {
        for (label, c) in &r.cpu {
            cpu.entry(label.clone()).or_default().push(*c);
        }
    }
    Ok(Results {
        date: k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M UTC")
            .to_string(),
        machine: machine(),
        apiserver_version: version.git_version,
        kubectl_version,
        driftless_version,
        n,
        objects,
        runs: args.runs,
        namespaces: args.namespaces,
        concurrency: args.concurrency,
        cold,
        noop,
        diff,
        daemon,
        scaling,
        cpu,
        // Judged by the report (main.rs), which reads these results.
        targets: Vec::new(),
        notes: std::mem::take(&mut b.notes),
        load_average_start,
        load_average_end: load_average(),
    })
}

/// What one main run measured.
struct MainRun {
    cold_driftless: f64,
    cold_driftless_writes: u64,
    cold_kubectl: Option<f64>,
    cold_raw: f64,
    noop_driftless: Option<(f64, u64)>,
    noop_kubectl: Option<f64>,
    kubectl_warm_writes: Option<u64>,
    diff_unchanged: Option<DiffRun>,
    diff_changed: Option<DiffRun>,
    cpu: Vec<(String, CpuUse)>,
}

struct DiffRun {
    driftless: f64,
    driftless_exit: i32,
    driftless_shown: usize,
    kubectl: Option<(f64, i32, usize)>,
}

#[derive(Clone, Copy, Debug)]
enum Tool {
    Driftless,
    Kubectl,
    Raw,
}

impl Bench<'_> {
    fn tree(&self, n: usize, prefix: &str) -> Tree {
        Tree::new(n, self.args.namespaces, prefix)
    }

    fn node_list(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn driftless_cmd(&self, instance: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.driftless);
        c.arg("--instance").arg(instance);
        c
    }

    fn kubectl_cmd(&self) -> tokio::process::Command {
        tokio::process::Command::new(&self.args.kubectl)
    }

    async fn kubectl_version(&self) -> String {
        let Ok(t) = timed(
            self.kubectl_cmd()
                .args(["version", "--client", "-o", "json"]),
        )
        .await
        else {
            return "not found".into();
        };
        serde_json::from_str::<Value>(&t.stdout)
            .ok()
            .and_then(|v| {
                v["clientVersion"]["gitVersion"]
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "unknown".into())
    }
}

/// Starts a `driftless run` made in `cmd`, its output in the file `log`, killed if
/// dropped; with its pid.
pub(crate) fn spawn_daemon(
    cmd: &mut tokio::process::Command,
    log: std::fs::File,
) -> anyhow::Result<(tokio::process::Child, u32)> {
    use anyhow::Context as _;
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting driftless run")?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow::anyhow!("the daemon exited at once"))?;
    Ok((child, pid))
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// A `Vm*:` line of /proc/<pid>/status, in KiB.
pub(crate) fn proc_status_kib(pid: u32, key: &str) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The sum of `driftless_api_writes_total` from the daemon's /metrics.
async fn metrics_writes(port: u16) -> anyhow::Result<u64> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    let total: f64 = body
        .lines()
        .filter(|l| l.starts_with("driftless_api_writes_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Ok(total as u64)
}

pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub(crate) fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    Machine {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu,
        memory_gib: (mem_kib * 1024.0 / MIB / 1024.0 * 10.0).round() / 10.0,
        kernel,
    }
}
