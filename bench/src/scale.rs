//! The scale workload (`--scale N,N`, issue 47): `driftless run --dir` on a tree of N
//! files of one elasticweb spec each (`total-qps = 0`: a Deployment and a Service), in a
//! namespace and instance of its own per N. At each N:
//!
//! - the first sync, until every spec is ready and the last sync succeeded: its time,
//!   the daemon's CPU and peak memory, the control plane's CPU, and the apiserver's own
//!   request counts (leases and events left out);
//! - five no-op resyncs asked through the API (`POST /api/v1/sync?wait=true`), 2 s
//!   apart: their median time and the apiserver's writes during them (0 is the rule);
//! - the daemon SIGKILLed and started again, until converged: time, writes, memory.
//!
//! Each figure per spec, its growth against the smallest N (1.00x is linear), and its
//! change against the last committed run (`git show HEAD:<--out>`). The apiserver's own
//! quadratic costs (its ClusterIP allocator counts every IPAddress per Service created:
//! bench/results/2026-11-29-scale-n10000-k8s-1.37.md) are in the first sync's time; the
//! daemon's own CPU and memory are what to read for driftless's growth.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::measure::{CpuProbe, free_port, machine, proc_status_kib, process_cpu_s, spawn_daemon};
use crate::{Args, baseline};

pub(crate) const TOKEN: &str = "driftless-bench-scale";
/// No first sync or restart takes this long even at 20,000 specs (about 25 minutes on
/// the 2-core machine); past it the run is reported as failed, not waited for.
const HANG: Duration = Duration::from_secs(3600);

#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct ScaleResults {
    pub date: String,
    pub commit: String,
    pub machine: Value,
    pub apiserver_version: String,
    pub points: Vec<ScalePoint>,
    /// The committed run the changes are against.
    pub baseline_commit: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, Clone, Default)]
pub struct ScalePoint {
    pub specs: usize,
    pub objects: usize,
    pub first_sync_s: f64,
    pub first_daemon_cpu_s: f64,
    pub first_cluster_cpu_s: Option<f64>,
    /// VmHWM once the first sync converged.
    pub first_peak_rss_mib: f64,
    /// The apiserver's requests during the first sync, by `VERB resource`.
    pub first_requests: BTreeMap<String, u64>,
    /// The median of `noop_runs_s`.
    pub noop_s: f64,
    /// Each no-op resync's time. The first follows the convergence at once, while the
    /// control plane still works through the first sync (its controllers, its
    /// EndpointSlices): one alone measured that more than the daemon.
    #[serde(default)]
    pub noop_runs_s: Vec<f64>,
    /// The apiserver's writes during all of them.
    pub noop_writes: u64,
    /// VmRSS after the no-op resyncs.
    pub steady_rss_mib: f64,
    pub restart_s: f64,
    pub restart_writes: u64,
    /// What they were, by `VERB resource` (the control plane's own, such as
    /// `clustertrustbundles`, are among them).
    #[serde(default)]
    pub restart_writes_by: BTreeMap<String, u64>,
    #[serde(default)]
    pub noop_writes_by: BTreeMap<String, u64>,
    /// VmHWM of the restarted daemon once converged.
    pub restart_peak_rss_mib: f64,
    /// Against the baseline's point of the same N, in %, by figure.
    #[serde(default)]
    pub change_pct: BTreeMap<String, f64>,
}

impl ScalePoint {
    /// The figures compared run to run and across N, by name.
    fn figures(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("first sync s", self.first_sync_s),
            ("daemon CPU s", self.first_daemon_cpu_s),
            ("peak RSS MiB", self.first_peak_rss_mib),
            ("no-op s", self.noop_s),
            ("steady RSS MiB", self.steady_rss_mib),
            ("restart s", self.restart_s),
            ("restart RSS MiB", self.restart_peak_rss_mib),
        ]
    }

    /// The apiserver's requests during the first sync per object: writes, and reads
    /// other than watches.
    fn per_object(&self) -> (f64, f64) {
        let (mut writes, mut reads) = (0u64, 0u64);
        for (what, n) in &self.first_requests {
            if is_write(what) {
                writes += n;
            } else {
                reads += n;
            }
        }
        let objects = self.objects.max(1) as f64;
        (writes as f64 / objects, reads as f64 / objects)
    }
}

fn is_write(what: &str) -> bool {
    let verb = what.split(' ').next().unwrap_or_default();
    matches!(verb, "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE")
}

/// What a daemon workload starts from: a client of the local cluster, its version, a
/// work directory (`--work-dir`, else a temporary one named after `workload`) and the API
/// token file the daemons are started with.
pub(crate) struct Setup {
    pub client: Client,
    pub apiserver_version: String,
    pub work: PathBuf,
    pub token: PathBuf,
}

pub(crate) async fn setup(args: &Args, workload: &str) -> anyhow::Result<Setup> {
    let client = Client::try_default()
        .await
        .context("connecting to the cluster (KUBECONFIG)")?;
    let apiserver_version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|_| "unknown".into());
    let work = match &args.work_dir {
        Some(d) => d.clone(),
        None => {
            std::env::temp_dir().join(format!("driftless-bench-{workload}-{}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let token = work.join("token");
    std::fs::write(&token, format!("{TOKEN}\n"))?;
    Ok(Setup {
        client,
        apiserver_version,
        work,
        token,
    })
}

pub async fn run(args: &Args, driftless: &Path, sizes: &[usize]) -> anyhow::Result<ScaleResults> {
    let Setup {
        client,
        apiserver_version,
        work,
        token,
    } = setup(args, "scale").await?;
    let mut points = Vec::new();
    for &n in sizes {
        let run = Run {
            driftless,
            client: &client,
            work: work.join(format!("n{n}")),
            token: &token,
            n,
        };
        points.push(
            run.measure()
                .await
                .with_context(|| format!("at {n} specs"))?,
        );
    }
    let mut results = ScaleResults {
        date: Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string(),
        commit: baseline::this_commit(),
        machine: serde_json::to_value(machine())?,
        apiserver_version,
        points,
        baseline_commit: None,
    };
    if let Some(base) = baseline::committed(&args.out) {
        compare(&mut results, &base);
    }
    Ok(results)
}

struct Run<'a> {
    driftless: &'a Path,
    client: &'a Client,
    work: PathBuf,
    token: &'a Path,
    n: usize,
}

/// The daemon as the workload runs it: its process, its API's address.
struct Daemon {
    child: tokio::process::Child,
    pid: u32,
    port: u16,
}

impl Run<'_> {
    fn namespace(&self) -> String {
        format!("bench-scale-{}", self.n)
    }

    async fn measure(&self) -> anyhow::Result<ScalePoint> {
        let n = self.n;
        let ns = self.namespace();
        let specs = self.work.join("specs");
        write_tree(&specs, n, &ns)?;
        self.make_namespace(&ns).await?;
        let mut point = ScalePoint {
            specs: n,
            objects: 2 * n,
            ..ScalePoint::default()
        };

        eprintln!("scale: N={n}: first sync");
        let before = requests(self.client).await?;
        let cpu = CpuProbe::start();
        let start = Instant::now();
        let mut daemon = self.start(&specs, "first")?;
        let converged = self.converged(&daemon, start, false).await;
        point.first_sync_s = start.elapsed().as_secs_f64();
        point.first_cluster_cpu_s = cpu.finish().cluster_s;
        point.first_daemon_cpu_s = process_cpu_s(daemon.pid).unwrap_or(f64::NAN);
        point.first_peak_rss_mib = mib(proc_status_kib(daemon.pid, "VmHWM:"));
        point.first_requests = delta(&before, &requests(self.client).await?);
        if let Err(e) = converged {
            let _ = daemon.child.kill().await;
            return Err(e);
        }

        eprintln!("scale: N={n}: {NOOPS} no-op resyncs");
        let before = requests(self.client).await?;
        for i in 0..NOOPS {
            if i > 0 {
                tokio::time::sleep(NOOP_GAP).await;
            }
            let start = Instant::now();
            let answer = sync_now(daemon.port).await;
            point.noop_runs_s.push(start.elapsed().as_secs_f64());
            if let Err(e) = answer {
                let _ = daemon.child.kill().await;
                return Err(e.context("the no-op resync"));
            }
        }
        point.noop_s = median(&point.noop_runs_s);
        point.noop_writes_by = only_writes(delta(&before, &requests(self.client).await?));
        point.noop_writes = point.noop_writes_by.values().sum();
        point.steady_rss_mib = mib(proc_status_kib(daemon.pid, "VmRSS:"));

        eprintln!("scale: N={n}: SIGKILL and restart");
        daemon.child.kill().await?;
        let before = requests(self.client).await?;
        let start = Instant::now();
        let mut daemon = self.start(&specs, "restart")?;
        let converged = self.converged(&daemon, start, true).await;
        point.restart_s = start.elapsed().as_secs_f64();
        point.restart_peak_rss_mib = mib(proc_status_kib(daemon.pid, "VmHWM:"));
        point.restart_writes_by = only_writes(delta(&before, &requests(self.client).await?));
        point.restart_writes = point.restart_writes_by.values().sum();
        let _ = daemon.child.kill().await;
        converged?;
        // The next N's Services must not pay for these: the apiserver's ClusterIP
        // allocator's cost grows with every address it holds.
        self.delete_namespace(&ns).await?;
        eprintln!(
            "scale: N={n}: first sync {:.1}s (daemon {:.1} CPU-s, peak {:.0} MiB), no-op {:.2}s ({} writes), restart {:.1}s ({} writes, peak {:.0} MiB)",
            point.first_sync_s,
            point.first_daemon_cpu_s,
            point.first_peak_rss_mib,
            point.noop_s,
            point.noop_writes,
            point.restart_s,
            point.restart_writes,
            point.restart_peak_rss_mib
        );
        Ok(point)
    }

    async fn make_namespace(&self, ns: &str) -> anyhow::Result<()> {
        use k8s_openapi::api::core::v1::Namespace;
        use kube::api::{Api, PostParams};
        let api: Api<Namespace> = Api::all(self.client.clone());
        let body: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": ns}
        }))?;
        match api.create(&PostParams::default(), &body).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                bail!("namespace {ns} exists: delete it first (the first sync must be cold)")
            }
            Err(e) => Err(e).context("creating the namespace"),
        }
    }

    /// Deletes `ns` and waits until it is gone (the namespace controller deletes its
    /// objects first), outside any measured region.
    async fn delete_namespace(&self, ns: &str) -> anyhow::Result<()> {
        use k8s_openapi::api::core::v1::Namespace;
        use kube::api::{Api, DeleteParams};
        let api: Api<Namespace> = Api::all(self.client.clone());
        api.delete(ns, &DeleteParams::default())
            .await
            .context("deleting the namespace")?;
        let start = Instant::now();
        while api.get_opt(ns).await?.is_some() {
            if start.elapsed() > HANG {
                bail!("namespace {ns} still there after {HANG:?}");
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        eprintln!(
            "scale: {ns} deleted in {:.0}s",
            start.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn start(&self, specs: &Path, phase: &str) -> anyhow::Result<Daemon> {
        let port = free_port()?;
        let log_path = self.work.join(format!("daemon-{phase}.log"));
        let log = std::fs::File::create(&log_path)?;
        let (child, pid) = spawn_daemon(
            tokio::process::Command::new(self.driftless)
                .arg("--instance")
                .arg(format!("scale{}", self.n))
                .arg("run")
                .arg("--dir")
                .arg(specs)
                .arg("--status-file")
                .arg(self.status_path())
                .arg("--metrics-addr")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--api-token-file")
                .arg(self.token)
                .arg("--cache-dir")
                .arg(self.work.join("cache")),
            log,
        )?;
        Ok(Daemon { child, pid, port })
    }

    fn status_path(&self) -> PathBuf {
        self.work.join("status.json")
    }

    /// Until the status file says every spec ready, the revision applied and the last
    /// sync a success (`again`: a file written after `start`, not the last run's).
    async fn converged(&self, daemon: &Daemon, start: Instant, again: bool) -> anyhow::Result<()> {
        let path = self.status_path();
        if !again {
            let _ = std::fs::remove_file(&path);
        }
        let since = std::time::SystemTime::now() - start.elapsed();
        let mut seen = None;
        loop {
            if start.elapsed() > HANG {
                bail!("not converged after {HANG:?}");
            }
            if !is_alive(daemon.pid) {
                bail!("the daemon exited; its log: {}", self.work.display());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let modified = meta.modified().ok();
            if modified == seen || modified.is_none_or(|m| m < since) {
                continue;
            }
            seen = modified;
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(status) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            if is_converged(&status, self.n) {
                return Ok(());
            }
        }
    }
}

/// Every one of `n` specs ready, the revision seen applied, the last sync a success.
pub(crate) fn is_converged(status: &Value, n: usize) -> bool {
    let specs = status["specs"].as_array();
    status["revision_applied"].is_string()
        && status["revision_applied"] == status["revision_seen"]
        && status["last_sync"]["result"] == "success"
        && specs.is_some_and(|s| s.len() == n && s.iter().all(|s| s["ready"] == true))
}

pub(crate) fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

pub(crate) fn mib(kib: Option<f64>) -> f64 {
    kib.map_or(f64::NAN, |k| k / 1024.0)
}

/// The tree: one `[elasticweb.wNNNNN]` per file.
fn write_tree(dir: &Path, n: usize, ns: &str) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    for i in 0..n {
        let text = format!(
            "namespace = \"{ns}\"\n[elasticweb.w{i:05}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = 0\n"
        );
        std::fs::write(dir.join(format!("w{i:05}.toml")), text)?;
    }
    Ok(())
}

/// `POST /api/v1/sync?wait=true`: a source read and a whole sync, answered once done.
/// No-op resyncs at each N, `NOOP_GAP` apart.
const NOOPS: usize = 5;
const NOOP_GAP: Duration = Duration::from_secs(2);

pub(crate) fn median(of: &[f64]) -> f64 {
    let mut sorted = of.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

pub(crate) async fn sync_now(port: u16) -> anyhow::Result<()> {
    sync_now_at(port, "").await
}

/// `sync_now` of the API under `prefix` (a fleet's daemon: `/clusters/NAME`).
pub(crate) async fn sync_now_at(port: u16, prefix: &str) -> anyhow::Result<()> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "POST {prefix}/api/v1/sync?wait=true HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).await?;
    let status_line = answer.lines().next().unwrap_or_default();
    if !status_line.contains(" 200 ") {
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        bail!("the daemon answered {status_line}: {body}");
    }
    Ok(())
}

/// The apiserver's own request counts by `VERB resource`, leases and events left out
/// (the control plane's heartbeats), and watches (long-running, not work done).
async fn requests(client: &Client) -> anyhow::Result<BTreeMap<String, u64>> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = client
        .request_text(req)
        .await
        .context("reading the apiserver's /metrics")?;
    Ok(parse_requests(&text))
}

fn parse_requests(metrics: &str) -> BTreeMap<String, u64> {
    let label = |line: &str, name: &str| -> Option<String> {
        let start = line.find(&format!("{name}=\""))? + name.len() + 2;
        let end = line[start..].find('"')? + start;
        Some(line[start..end].to_string())
    };
    let mut out = BTreeMap::new();
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let (Some(verb), Some(count)) = (
            label(line, "verb"),
            line.rsplit(' ').next().and_then(|c| c.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let resource = label(line, "resource").unwrap_or_default();
        if verb == "WATCH" || resource == "leases" || resource == "events" {
            continue;
        }
        *out.entry(format!("{verb} {resource}")).or_insert(0) += count as u64;
    }
    out
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

fn only_writes(mut counts: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    counts.retain(|k, _| is_write(k));
    counts
}

fn compare(results: &mut ScaleResults, base: &ScaleResults) {
    results.baseline_commit = Some(base.commit.clone());
    for p in &mut results.points {
        let Some(before) = base.points.iter().find(|b| b.specs == p.specs) else {
            continue;
        };
        let was: BTreeMap<&str, f64> = before.figures().into_iter().collect();
        p.change_pct = p
            .figures()
            .into_iter()
            .filter_map(|(name, now)| {
                let then = *was.get(name)?;
                (then > 0.0 && now.is_finite())
                    .then(|| (name.to_string(), (now / then - 1.0) * 100.0))
            })
            .collect();
    }
}

/// Per spec at this point against the smallest N's: 1.00x is linear.
fn growth(points: &[ScalePoint], p: &ScalePoint, figure: &str) -> Option<f64> {
    let first = points.iter().min_by_key(|q| q.specs)?;
    let per = |q: &ScalePoint| {
        let v = q.figures().into_iter().find(|(n, _)| *n == figure)?.1;
        Some(v / q.specs.max(1) as f64)
    };
    let (a, b) = (per(first)?, per(p)?);
    (a > 0.0 && b.is_finite()).then(|| b / a)
}

pub fn markdown(r: &ScaleResults) -> String {
    let mut out = format!(
        "## Scale: the daemon on N elasticweb specs, {} at {} (Kubernetes {})\n\n",
        r.date, r.commit, r.apiserver_version
    );
    match &r.baseline_commit {
        Some(c) => out.push_str(&format!("Change against the last committed run ({c}).\n\n")),
        None => out.push_str("No committed run to compare with.\n\n"),
    }
    out.push_str("| specs | first sync | daemon CPU | control plane CPU | peak RSS | no-op resync (median) | steady RSS | restart | restart RSS | writes / object | reads / object |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for p in &r.points {
        let (w, rd) = p.per_object();
        out.push_str(&format!(
            "| {} | {:.1} s | {:.1} s | {} | {:.0} MiB | {:.2} s, {} writes | {:.0} MiB | {:.1} s, {} writes | {:.0} MiB | {w:.2} | {rd:.2} |\n",
            p.specs,
            p.first_sync_s,
            p.first_daemon_cpu_s,
            p.first_cluster_cpu_s
                .map_or("n/a".to_string(), |c| format!("{c:.0} s")),
            p.first_peak_rss_mib,
            p.noop_s,
            p.noop_writes,
            p.steady_rss_mib,
            p.restart_s,
            p.restart_writes,
            p.restart_peak_rss_mib,
        ));
    }
    for p in &r.points {
        for (what, by) in [
            ("no-op resync", &p.noop_writes_by),
            ("restart", &p.restart_writes_by),
        ] {
            if !by.is_empty() {
                let list: Vec<String> = by.iter().map(|(k, v)| format!("{k} {v}")).collect();
                out.push_str(&format!(
                    "\nWrites during the {what} at {}: {}.\n",
                    p.specs,
                    list.join(", ")
                ));
            }
        }
    }
    out.push_str("\nPer spec against the smallest N (1.00x is linear), and the change against the committed run:\n\n| specs | figure | value | growth | change |\n|---|---|---|---|---|\n");
    for p in &r.points {
        for (name, v) in p.figures() {
            out.push_str(&format!(
                "| {} | {name} | {v:.2} | {} | {} |\n",
                p.specs,
                growth(&r.points, p, name).map_or("".into(), |g| format!("{g:.2}x")),
                p.change_pct
                    .get(name)
                    .map_or("".into(), |c| format!("{c:+.1} %")),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
