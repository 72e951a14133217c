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

    /// Writes the tree; returns its directory.
    fn write_tree(&self, tree: &Tree, name: &str, edits: &Edits) -> anyhow::Result<PathBuf> {
        let dir = self.work.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        tree.write(&dir, edits)
            .with_context(|| format!("writing {}", dir.display()))?;
        Ok(dir)
    }

    /// `driftless render` of a tree, with its namespaces first: what kubectl applies.
    async fn render_for_kubectl(
        &self,
        dir: &Path,
        tree: &Tree,
        instance: &str,
        file: &str,
    ) -> anyhow::Result<PathBuf> {
        let t = timed(
            self.driftless_cmd(instance)
                .arg("render")
                .arg(dir)
                .arg("--nodes")
                .arg(self.node_list()),
        )
        .await?;
        if t.code != 0 {
            bail!("driftless render failed: {}", t.stderr);
        }
        let mut yaml = String::new();
        for ns in tree.namespace_names() {
            yaml.push_str(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n"
            ));
        }
        yaml.push_str(&t.stdout);
        let path = self.work.join(file);
        std::fs::write(&path, yaml)?;
        Ok(path)
    }

    async fn driftless_apply(&self, dir: &Path, instance: &str) -> anyhow::Result<(f64, u64)> {
        let t = timed(
            self.driftless_cmd(instance)
                .arg("apply")
                .arg(dir)
                .arg("--concurrency")
                .arg(self.args.concurrency.to_string()),
        )
        .await?;
        if t.code != 0 {
            bail!(
                "driftless apply exited {}: {}\n{}",
                t.code,
                t.stderr,
                t.stdout
                    .lines()
                    .filter(|l| l.contains("failed") || l.contains("conflict"))
                    .take(10)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        let writes = api_writes(&t.stderr)
            .ok_or_else(|| anyhow!("no \"N API writes\" line in: {}", t.stderr))?;
        Ok((t.secs, writes))
    }

    async fn kubectl_apply(&self, file: &Path) -> anyhow::Result<f64> {
        let t = timed(
            self.kubectl_cmd()
                .args(["apply", "--server-side", "--field-manager", "kubectl", "-f"])
                .arg(file),
        )
        .await?;
        if t.code != 0 {
            bail!("kubectl apply exited {}: {}", t.code, t.stderr);
        }
        Ok(t.secs)
    }

    /// The apiserver's ceiling for these objects: SSA PATCHes with the same concurrency
    /// as driftless, no reads, no inventory. Namespaces first (applied too).
    async fn raw_ssa(&self, dir: &Path, tree: &Tree, instance: &str) -> anyhow::Result<f64> {
        let specs = driftless::spec::load_dir(dir).map_err(|e| anyhow!("{e}"))?;
        let objects = driftless::render::render(
            &specs,
            &driftless::render::Facts {
                instance: instance.to_string(),
                nodes: self.nodes.clone(),
            },
        )?;
        let resolver = driftless::apply::Resolver::new(self.client.clone());
        let mut apis = Vec::with_capacity(objects.len());
        for o in &objects {
            let r = resolver
                .resolve(&o.api_version, &o.kind)
                .await
                .with_context(|| format!("discovering {} {}", o.api_version, o.kind))?;
            apis.push(r.api(&self.client, o.namespace.as_deref()));
        }
        let pp = PatchParams::apply("bench-raw").force();
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let start = Instant::now();
        for ns in tree.namespace_names() {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            namespaces.patch(&ns, &pp, &Patch::Apply(&body)).await?;
        }
        let failures: Vec<String> = futures::stream::iter(objects.iter().zip(&apis))
            .map(|(o, api): (_, &Api<DynamicObject>)| {
                let pp = &pp;
                async move {
                    api.patch(&o.name, pp, &Patch::Apply(&o.body))
                        .await
                        .err()
                        .map(|e| format!("{}: {e}", o.display_ref()))
                }
            })
            .buffer_unordered(self.args.concurrency.max(1))
            .filter_map(|e| async move { e })
            .collect()
            .await;
        let secs = start.elapsed().as_secs_f64();
        if let Some(first) = failures.first() {
            bail!("raw SSA: {} failures, first: {first}", failures.len());
        }
        Ok(secs)
    }

    async fn driftless_diff(
        &self,
        dir: &Path,
        instance: &str,
    ) -> anyhow::Result<(f64, i32, usize)> {
        let t = timed(
            self.driftless_cmd(instance)
                .arg("diff")
                .arg(dir)
                .arg("--concurrency")
                .arg(self.args.concurrency.to_string()),
        )
        .await?;
        if t.code > 1 {
            bail!("driftless diff exited {}: {}", t.code, t.stderr);
        }
        let shown = t.stdout.lines().filter(|l| l.starts_with("+++ ")).count();
        Ok((t.secs, t.code, shown))
    }

    async fn kubectl_diff(&self, file: &Path) -> anyhow::Result<(f64, i32, usize)> {
        let t = timed(
            self.kubectl_cmd()
                .args(["diff", "--server-side", "--field-manager", "kubectl", "-f"])
                .arg(file),
        )
        .await?;
        if t.code > 1 {
            bail!("kubectl diff exited {}: {}", t.code, t.stderr);
        }
        let shown = t.stdout.lines().filter(|l| l.starts_with("+++ ")).count();
        Ok((t.secs, t.code, shown))
    }

    /// Cold sync, no-op resync and diff, one run: each tool on its own namespace set.
    async fn main_run(&mut self, r: usize) -> anyhow::Result<MainRun> {
        let n = self.args.n;
        let with_kubectl = !self.args.skips("kubectl");
        let (pd, pk, pr) = (
            format!("bench-d{r}"),
            format!("bench-k{r}"),
            format!("bench-r{r}"),
        );
        let (td, tk, tr) = (self.tree(n, &pd), self.tree(n, &pk), self.tree(n, &pr));
        let changed = generate::one_percent(n);
        let none = Edits::default();
        let dir_d = self.write_tree(&td, &format!("run{r}/driftless"), &none)?;
        let dir_d1 = self.write_tree(&td, &format!("run{r}/driftless-1pct"), &changed)?;
        let dir_k = self.write_tree(&tk, &format!("run{r}/kubectl"), &none)?;
        let dir_k1 = self.write_tree(&tk, &format!("run{r}/kubectl-1pct"), &changed)?;
        let dir_r = self.write_tree(&tr, &format!("run{r}/raw"), &none)?;
        let yaml_k = self
            .render_for_kubectl(&dir_k, &tk, &pk, &format!("run{r}/kubectl.yaml"))
            .await?;
        let yaml_k1 = self
            .render_for_kubectl(&dir_k1, &tk, &pk, &format!("run{r}/kubectl-1pct.yaml"))
            .await?;

        // Rotate the order so no tool always runs first (or on the busiest cluster).
        let mut order = vec![Tool::Driftless, Tool::Raw];
        if with_kubectl {
            order.insert(1, Tool::Kubectl);
        }
        let len = order.len();
        order.rotate_left(r % len);
        let (mut cold_d, mut cold_k, mut cold_r) = (None, None, None);
        let mut cpu = Vec::new();
        for tool in order {
            eprintln!("run {r}: cold sync, {tool:?}");
            let probe = CpuProbe::start();
            let label = match tool {
                Tool::Driftless => {
                    cold_d = Some(self.driftless_apply(&dir_d, &pd).await?);
                    "cold/driftless"
                }
                Tool::Kubectl => {
                    cold_k = Some(self.kubectl_apply(&yaml_k).await?);
                    "cold/kubectl"
                }
                Tool::Raw => {
                    // The probe covers discovery and rendering too; the time does not.
                    cold_r = Some(self.raw_ssa(&dir_r, &tr, &pr).await?);
                    "cold/raw"
                }
            };
            cpu.push((label.to_string(), probe.finish()));
        }
        let (cold_driftless, cold_driftless_writes) =
            cold_d.ok_or_else(|| anyhow!("driftless did not run"))?;
        let cold_raw = cold_r.ok_or_else(|| anyhow!("the raw loop did not run"))?;
        eprintln!(
            "run {r}: cold driftless {cold_driftless:.2}s ({cold_driftless_writes} writes), kubectl {}, raw {cold_raw:.2}s",
            cold_k.map_or("-".into(), |k| format!("{k:.2}s"))
        );

        let mut out = MainRun {
            cold_driftless,
            cold_driftless_writes,
            cold_kubectl: cold_k,
            cold_raw,
            noop_driftless: None,
            noop_kubectl: None,
            kubectl_warm_writes: None,
            diff_unchanged: None,
            diff_changed: None,
            cpu,
        };
        if !self.args.skips("noop") {
            eprintln!("run {r}: no-op resync");
            // Each tool's no-op on a quiet cluster: right after a cold sync the
            // controllers are still working through the new objects, which slowed
            // whichever tool came first (driftless) against the one after it.
            settle().await;
            let probe = CpuProbe::start();
            out.noop_driftless = Some(self.driftless_apply(&dir_d, &pd).await?);
            out.cpu.push(("noop/driftless".into(), probe.finish()));
            if with_kubectl {
                settle().await;
                let probe = CpuProbe::start();
                out.noop_kubectl = Some(self.kubectl_apply(&yaml_k).await?);
                out.cpu.push(("noop/kubectl".into(), probe.finish()));
                if r == 0 {
                    out.kubectl_warm_writes = self.kubectl_patches(&yaml_k).await.ok();
                }
            }
            eprintln!(
                "run {r}: no-op driftless {:?}, kubectl {:?}",
                out.noop_driftless, out.noop_kubectl
            );
        }
        if !self.args.skips("diff") {
            eprintln!("run {r}: diff");
            let mut cpu = Vec::new();
            let mut diff_pair =
                async |what: &str, dir: &Path, yaml: &Path| -> anyhow::Result<DiffRun> {
                    let probe = CpuProbe::start();
                    let (secs, code, shown) = self.driftless_diff(dir, &pd).await?;
                    cpu.push((format!("diff-{what}/driftless"), probe.finish()));
                    let kubectl = if with_kubectl {
                        let probe = CpuProbe::start();
                        let k = self.kubectl_diff(yaml).await?;
                        cpu.push((format!("diff-{what}/kubectl"), probe.finish()));
                        Some(k)
                    } else {
                        None
                    };
                    Ok(DiffRun {
                        driftless: secs,
                        driftless_exit: code,
                        driftless_shown: shown,
                        kubectl,
                    })
                };
            out.diff_unchanged = Some(diff_pair("unchanged", &dir_d, &yaml_k).await?);
            out.diff_changed = Some(diff_pair("1pct", &dir_d1, &yaml_k1).await?);
            out.cpu.extend(cpu);
        }
        self.cleanup(&[pd.clone(), pk, pr], &[pd]).await?;
        Ok(out)
    }

    /// PATCH requests one warm `kubectl apply --server-side` sends (from its `-v=6` log).
    async fn kubectl_patches(&self, file: &Path) -> anyhow::Result<u64> {
        let t = timed(
            self.kubectl_cmd()
                .args([
                    "apply",
                    "--server-side",
                    "--field-manager",
                    "kubectl",
                    "-v=6",
                    "-f",
                ])
                .arg(file),
        )
        .await?;
        Ok(t.stderr
            .lines()
            .filter(|l| l.contains("PATCH https://"))
            .count() as u64)
    }

    /// Deletes the namespaces named `<prefix>-*` and the inventories of `instances`, then
    /// waits (untimed) until the namespaces are gone.
    async fn cleanup(&self, prefixes: &[String], instances: &[String]) -> anyhow::Result<()> {
        let ns_api: Api<Namespace> = Api::all(self.client.clone());
        let matches = |name: &str| prefixes.iter().any(|p| name.starts_with(&format!("{p}-")));
        // Inventories of the given instances, or (no instances) of any bench instance.
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), "driftless-system");
        if let Ok(list) = cms
            .list(&ListParams::default().labels("driftless.dev/inventory-of"))
            .await
        {
            for cm in list.items {
                let of = cm
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("driftless.dev/inventory-of"))
                    .cloned()
                    .unwrap_or_default();
                let ours = if instances.is_empty() {
                    prefixes.iter().any(|p| of.starts_with(&format!("{p}-")))
                } else {
                    instances.contains(&of)
                };
                if ours && let Some(name) = &cm.metadata.name {
                    let _ = cms.delete(name, &DeleteParams::default()).await;
                }
            }
        }
        let start = Instant::now();
        let mut deleted = false;
        let mut last_delete = Instant::now();
        loop {
            let left: Vec<String> = ns_api
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter_map(|ns| ns.metadata.name)
                .filter(|name| matches(name))
                .collect();
            if left.is_empty() {
                break;
            }
            // Again every 30 s: a namespace recreated meanwhile (by a daemon that was
            // still stopping) would otherwise be waited for forever.
            if !deleted || last_delete.elapsed() > Duration::from_secs(30) {
                last_delete = Instant::now();
                for name in &left {
                    match ns_api.delete(name, &DeleteParams::background()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                if !deleted {
                    eprintln!("deleting {} namespaces", left.len());
                }
                deleted = true;
            }
            if start.elapsed() > Duration::from_secs(900) {
                bail!("namespaces still terminating after 15 min: {left:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if deleted {
            eprintln!("namespaces gone in {:.1}s", start.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// The daemon on an N-spec tree: first sync, then `edits` edits (one elasticweb
    /// scaled from 0 to 1 replica each), timed to applied and to ready; memory.
    async fn daemon(&mut self, n: usize, prefix: &str, edits: usize) -> anyhow::Result<Daemon> {
        let tree = self.tree(n, prefix);
        let mut state = Edits::default();
        let dir = self.write_tree(&tree, &format!("{prefix}/specs"), &state)?;
        let status_path = self.work.join(format!("{prefix}/status.json"));
        let log_path = self.work.join(format!("{prefix}/daemon.log"));
        // A status file of an earlier run would read as an early first sync.
        let _ = std::fs::remove_file(&status_path);
        let port = free_port()?;
        let log = std::fs::File::create(&log_path)?;
        eprintln!("daemon: N={n}, starting");
        let start = Instant::now();
        let mut child = self
            .driftless_cmd(prefix)
            .arg("run")
            .arg("--dir")
            .arg(&dir)
            .arg("--status-file")
            .arg(&status_path)
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--concurrency")
            .arg(self.args.concurrency.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting driftless run")?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("the daemon exited at once"))?;
        let result = self
            .daemon_inner(
                n,
                &tree,
                &dir,
                &status_path,
                port,
                pid,
                start,
                edits,
                &mut state,
            )
            .await;
        // SIGTERM, as systemd would; it writes its final status and exits.
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
        self.cleanup(&[prefix.to_string()], &[prefix.to_string()])
            .await?;
        let d = result.with_context(|| format!("daemon log: {}", log_path.display()))?;
        eprintln!(
            "daemon: N={n}: first sync {:.2}s, applied p50 {:.3}s p95 {:.3}s, ready p50 {:.3}s p95 {:.3}s, peak RSS {:.1} MiB",
            d.first_sync_s,
            d.applied.p50_s,
            d.applied.p95_s,
            d.ready.p50_s,
            d.ready.p95_s,
            d.peak_rss_mib
        );
        Ok(d)
    }

    #[allow(clippy::too_many_arguments)]
    async fn daemon_inner(
        &self,
        n: usize,
        tree: &Tree,
        dir: &Path,
        status_path: &Path,
        port: u16,
        pid: u32,
        start: Instant,
        edits: usize,
        state: &mut Edits,
    ) -> anyhow::Result<Daemon> {
        let mut status = StatusReader::new(status_path);
        let deadline = Duration::from_secs(1800);
        // First sync: the revision read was applied.
        loop {
            if let Some(s) = status.read_if_changed()
                && s["revision_applied"].is_string()
                && s["revision_applied"] == s["revision_seen"]
            {
                if s["last_sync"]["result"] != "success" {
                    bail!("first sync: {}", s["last_sync"]);
                }
                break;
            }
            if start.elapsed() > deadline {
                bail!("no first sync after {deadline:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first_sync_s = start.elapsed().as_secs_f64();
        let rss_after_first_sync_mib = proc_status_kib(pid, "VmRSS:").unwrap_or(f64::NAN) / 1024.0;
        let mut first_ready_s = None;
        loop {
            if let Some(s) = status.read_if_changed()
                && let Some(specs) = s["specs"].as_array()
                && specs.len() == n
                && specs.iter().all(|sp| sp["ready"] == true)
            {
                first_ready_s = Some(start.elapsed().as_secs_f64());
                break;
            }
            if start.elapsed() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "daemon: first sync {first_sync_s:.2}s, all ready {:?}",
            first_ready_s
        );
        let writes_before = metrics_writes(port).await?;
        let (mut applied, mut ready) = (Vec::new(), Vec::new());
        for i in generate::edit_targets(n, edits) {
            let ns = tree.namespace(i);
            let name = tree.name(i);
            let id = tree.spec_id(i);
            let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
            let current = deployments.get(&name).await?;
            let rv = current
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
            let wp = WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(120);
            let mut events = deployments.watch(&wp, &rv).await?.boxed();
            state.scaled_up.insert(i);
            let t0 = Instant::now();
            tree.write_one(dir, i, state)?;
            let seen = tokio::time::timeout(Duration::from_secs(120), async {
                while let Some(ev) = events.next().await {
                    // Read as JSON: whether `spec` is optional differs between the
                    // Kubernetes versions k8s-openapi's features choose.
                    if let Ok(WatchEvent::Modified(d)) = ev
                        && serde_json::to_value(&d).is_ok_and(|d| d["spec"]["replicas"] == 1)
                    {
                        return Some(t0.elapsed());
                    }
                }
                None
            })
            .await
            .ok()
            .flatten()
            .ok_or_else(|| anyhow!("{id}: the change never reached the cluster"))?;
            drop(events);
            let to_ready = loop {
                if let Some(s) = status.read_if_changed()
                    && let Some(spec) = s["specs"]
                        .as_array()
                        .and_then(|a| a.iter().find(|sp| sp["id"] == id.as_str()))
                    && spec["ready"] == true
                    && spec["figures"]["desired_replicas"] == 1
                    && spec["figures"]["available_replicas"] == 1
                {
                    break t0.elapsed();
                }
                if t0.elapsed() > Duration::from_secs(120) {
                    bail!("{id}: not ready 120 s after the edit");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            applied.push(seen.as_secs_f64());
            ready.push(to_ready.as_secs_f64());
        }
        let writes_after = metrics_writes(port).await?;
        let done = applied.len();
        Ok(Daemon {
            n,
            objects: generate::expected_objects(n, self.nodes.len()),
            first_sync_s,
            first_ready_s,
            edits: done,
            applied: Latency::of(applied),
            ready: Latency::of(ready),
            writes_per_edit: if done == 0 {
                0.0
            } else {
                (writes_after - writes_before) as f64 / done as f64
            },
            rss_after_first_sync_mib,
            peak_rss_mib: proc_status_kib(pid, "VmHWM:").unwrap_or(f64::NAN) / 1024.0,
        })
    }

    /// Cold sync and no-op time at each N, and the daemon's memory at each N.
    async fn scaling(
        &mut self,
        main_runs: &[MainRun],
        main_daemon: Option<&Daemon>,
    ) -> anyhow::Result<Scaling> {
        let mut points = Vec::new();
        let mut sizes = self.args.scaling.clone();
        sizes.sort_unstable();
        sizes.dedup();
        for n in sizes {
            let objects = generate::expected_objects(n, self.nodes.len());
            let (mut cold, mut noop) = (Vec::new(), Vec::new());
            if n == self.args.n && !main_runs.is_empty() {
                cold = main_runs.iter().map(|r| r.cold_driftless).collect();
                noop = main_runs
                    .iter()
                    .filter_map(|r| r.noop_driftless.map(|(s, _)| s))
                    .collect();
            } else {
                let runs = if n <= self.args.n { self.args.runs } else { 1 };
                for r in 0..runs {
                    let prefix = format!("bench-s{n}r{r}");
                    let tree = self.tree(n, &prefix);
                    let dir = self.write_tree(&tree, &prefix, &Edits::default())?;
                    eprintln!("scaling: N={n}, run {r}: cold sync");
                    let (secs, _) = self.driftless_apply(&dir, &prefix).await?;
                    settle().await;
                    let (noop_secs, writes) = self.driftless_apply(&dir, &prefix).await?;
                    if writes != 0 {
                        self.notes.push(format!(
                            "scaling N={n}: the no-op resync made {writes} writes"
                        ));
                    }
                    eprintln!("scaling: N={n}: cold {secs:.2}s, no-op {noop_secs:.2}s");
                    cold.push(secs);
                    noop.push(noop_secs);
                    let both = std::slice::from_ref(&prefix);
                    self.cleanup(both, both).await?;
                }
            }
            let daemon = match main_daemon {
                Some(d) if d.n == n => Some(d.clone()),
                _ if self.args.skips("daemon") => None,
                _ => {
                    let edits = self.args.edits.min(5);
                    match self.daemon(n, &format!("bench-sd{n}"), edits).await {
                        Ok(d) => Some(d),
                        Err(e) => {
                            // Reported, not fatal: the other points (and the twenty minutes
                            // of runs before this one) still make a result.
                            eprintln!("scaling: N={n}: the daemon run failed: {e:#}");
                            self.notes
                                .push(format!("scaling N={n}: the daemon run failed: {e:#}"));
                            None
                        }
                    }
                }
            };
            points.push(ScalePoint {
                n,
                objects,
                cold_s: summary(&cold)?,
                noop_s: summary(&noop)?,
                daemon_peak_rss_mib: daemon.as_ref().map(|d| d.peak_rss_mib),
                daemon_first_sync_s: daemon.as_ref().map(|d| d.first_sync_s),
            });
        }
        let exp = |f: &dyn Fn(&ScalePoint) -> Option<f64>| {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| f(p).map(|y| (p.objects as f64, y)))
                .collect();
            scaling_exponent(&pts)
        };
        let mem: Vec<(usize, f64)> = points
            .iter()
            .filter_map(|p| p.daemon_peak_rss_mib.map(|m| (p.objects, m)))
            .collect();
        let kib_per_object = match (mem.first(), mem.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) * 1024.0 / (b.0 - a.0) as f64),
            _ => None,
        };
        Ok(Scaling {
            cold_time_exponent: exp(&|p| Some(p.cold_s.median)),
            noop_time_exponent: exp(&|p| Some(p.noop_s.median)),
            daemon_first_sync_exponent: exp(&|p| p.daemon_first_sync_s),
            daemon_memory_exponent: exp(&|p| p.daemon_peak_rss_mib),
            daemon_kib_per_object: kib_per_object,
            points,
        })
    }
}

fn cold_of(runs: &[MainRun], objects: usize) -> anyhow::Result<Option<Cold>> {
    if runs.is_empty() {
        return Ok(None);
    }
    let objs = objects as f64;
    let d: Vec<f64> = runs.iter().map(|r| r.cold_driftless).collect();
    let raw: Vec<f64> = runs.iter().map(|r| r.cold_raw).collect();
    let k: Vec<f64> = runs.iter().filter_map(|r| r.cold_kubectl).collect();
    let rate = |xs: &[f64]| xs.iter().map(|s| objs / s).collect::<Vec<_>>();
    Ok(Some(Cold {
        driftless_s: summary(&d)?,
        kubectl_s: opt_summary(&k),
        raw_s: summary(&raw)?,
        driftless_objs_per_s: summary(&rate(&d))?,
        kubectl_objs_per_s: opt_summary(&rate(&k)),
        raw_objs_per_s: summary(&rate(&raw))?,
        driftless_vs_raw: summary(
            &runs
                .iter()
                .map(|r| r.cold_raw / r.cold_driftless)
                .collect::<Vec<_>>(),
        )?,
        speedup_vs_kubectl: opt_summary(
            &runs
                .iter()
                .filter_map(|r| r.cold_kubectl.map(|k| k / r.cold_driftless))
                .collect::<Vec<_>>(),
        ),
        driftless_writes: runs.iter().map(|r| r.cold_driftless_writes).collect(),
    }))
}

fn noop_of(runs: &[MainRun]) -> anyhow::Result<Noop> {
    let d: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.noop_driftless.map(|x| x.0))
        .collect();
    let k: Vec<f64> = runs.iter().filter_map(|r| r.noop_kubectl).collect();
    Ok(Noop {
        driftless_s: summary(&d)?,
        driftless_writes: runs
            .iter()
            .filter_map(|r| r.noop_driftless.map(|x| x.1))
            .collect(),
        kubectl_s: opt_summary(&k),
        kubectl_writes: runs.iter().find_map(|r| r.kubectl_warm_writes),
        ratio: opt_summary(
            &runs
                .iter()
                .filter_map(|r| Some(r.noop_driftless?.0 / r.noop_kubectl?))
                .collect::<Vec<_>>(),
        ),
    })
}

fn diff_of(runs: &[MainRun], n: usize) -> anyhow::Result<Diffs> {
    let pair = |get: &dyn Fn(&MainRun) -> Option<&DiffRun>| -> anyhow::Result<DiffPair> {
        let ds: Vec<&DiffRun> = runs.iter().filter_map(get).collect();
        let d: Vec<f64> = ds.iter().map(|x| x.driftless).collect();
        let k: Vec<f64> = ds.iter().filter_map(|x| x.kubectl.map(|k| k.0)).collect();
        Ok(DiffPair {
            driftless_s: summary(&d)?,
            driftless_exit: ds.iter().map(|x| x.driftless_exit).collect(),
            kubectl_s: opt_summary(&k),
            kubectl_exit: ds.iter().filter_map(|x| x.kubectl.map(|k| k.1)).collect(),
            kubectl_objects_shown: ds.iter().filter_map(|x| x.kubectl.map(|k| k.2)).collect(),
            driftless_objects_shown: ds.iter().map(|x| x.driftless_shown).collect(),
            speedup: opt_summary(
                &ds.iter()
                    .filter_map(|x| x.kubectl.map(|k| k.0 / x.driftless))
                    .collect::<Vec<_>>(),
            ),
        })
    };
    Ok(Diffs {
        unchanged: pair(&|r| r.diff_unchanged.as_ref())?,
        changed: pair(&|r| r.diff_changed.as_ref())?,
        changed_specs: generate::one_percent(n).image.len(),
    })
}

/// Re-reads the status file only when it was replaced (it is written atomically, by
/// rename), so polling it often costs little.
struct StatusReader {
    path: PathBuf,
    last: Option<(std::time::SystemTime, u64, u64)>,
}

impl StatusReader {
    fn new(path: &Path) -> StatusReader {
        StatusReader {
            path: path.to_path_buf(),
            last: None,
        }
    }

    fn read_if_changed(&mut self) -> Option<Value> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(&self.path).ok()?;
        let stamp = (meta.modified().ok()?, meta.ino(), meta.len());
        if self.last.as_ref() == Some(&stamp) {
            return None;
        }
        let text = std::fs::read_to_string(&self.path).ok()?;
        let v = serde_json::from_str(&text).ok()?;
        self.last = Some(stamp);
        Some(v)
    }
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

/// CPU time spent during a timed region, in seconds: by the client (driftless, kubectl
/// or the harness's own loop), by the local cluster's processes (etcd, apiserver,
/// controller-manager, scheduler, stand-ins), and by everything else on the machine
/// (other work sharing the cores).
#[derive(Debug, Serialize, Clone, Copy, Default)]
pub struct CpuUse {
    pub wall_s: f64,
    pub client_s: f64,
    pub cluster_s: Option<f64>,
    pub machine_s: f64,
    pub other_s: Option<f64>,
}

pub struct CpuProbe {
    start: Instant,
    client: f64,
    cluster: Option<f64>,
    machine: f64,
}

fn ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

fn rusage_s(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Our own CPU time plus that of every child waited for (the tools we run).
fn client_cpu_s() -> f64 {
    rusage_s(libc::RUSAGE_SELF) + rusage_s(libc::RUSAGE_CHILDREN)
}

/// The testbed's processes, from the pid files of `testbed/cluster.sh`.
fn cluster_pids() -> Vec<u32> {
    let Ok(dir) = std::env::var("DRIFTLESS_TESTBED_DIR") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(Path::new(&dir).join("pids")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .collect()
}

/// Waits (up to 60 s) until the local cluster uses under a fifth of a core over half a
/// second, so a measurement does not pay for the work the one before it left behind.
async fn settle() {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let Some(before) = cluster_cpu_s() else {
            return;
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        match cluster_cpu_s() {
            Some(after) if (after - before) / 0.5 < 0.2 => {
                eprintln!("cluster quiet after {:.1}s", start.elapsed().as_secs_f64());
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
    eprintln!("cluster still busy after 60 s; measuring anyway");
}

fn cluster_cpu_s() -> Option<f64> {
    let pids = cluster_pids();
    if pids.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After "pid (comm) ": state is field 3; utime, stime are fields 14, 15.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        total += (utime + stime) / ticks();
    }
    Some(total)
}

/// Busy CPU time of the whole machine (all cores), from /proc/stat.
fn machine_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let busy: f64 = v
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    busy / ticks()
}

impl CpuProbe {
    pub fn start() -> CpuProbe {
        CpuProbe {
            start: Instant::now(),
            client: client_cpu_s(),
            cluster: cluster_cpu_s(),
            machine: machine_cpu_s(),
        }
    }

    pub fn finish(&self) -> CpuUse {
        let client_s = client_cpu_s() - self.client;
        let cluster_s = match (cluster_cpu_s(), self.cluster) {
            (Some(now), Some(then)) => Some(now - then),
            _ => None,
        };
        let machine_s = machine_cpu_s() - self.machine;
        CpuUse {
            wall_s: self.start.elapsed().as_secs_f64(),
            client_s,
            cluster_s,
            machine_s,
            other_s: cluster_s.map(|c| (machine_s - c - client_s).max(0.0)),
        }
    }
}
