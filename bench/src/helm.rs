//! The Helm workload (`--helm N`): N releases of one chart (podinfo, replicaCount 0, each
//! in a namespace of its own), taken to the cluster by the driftless daemon and, side by
//! side in the same run, by the loops people write without it: `helm upgrade --install`
//! one release after another, and `helm template | kubectl apply --server-side` one after
//! another and 4 at a time. Each is timed cold, as a no-op re-run, and with one release's
//! values changed; helm runs are counted, the daemon's memory read.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::Value;

use crate::Args;
use crate::measure::{
    CpuProbe, free_port, load_average, proc_status_kib, process_children_cpu_s, process_cpu_s,
};

#[derive(Debug, Serialize)]
pub struct HelmResults {
    pub date: String,
    pub releases: usize,
    pub helm_version: String,
    pub chart: String,
    pub load_average_start: String,
    pub load_average_end: String,
    pub ways: Vec<Way>,
    pub notes: Vec<String>,
}

/// One way of taking the releases to the cluster, and what it cost.
#[derive(Debug, Serialize)]
pub struct Way {
    pub name: String,
    pub cold_s: f64,
    pub noop_s: f64,
    pub one_changed_s: f64,
    /// `helm` processes started (template, upgrade) in each of the three.
    pub helm_runs: [usize; 3],
    /// The daemon's peak RSS; none for the loops (many short processes).
    pub peak_rss_mib: Option<f64>,
    /// Where the cold run's CPU went; the daemon's only (the loops' is helm and kubectl).
    pub cold_cpu: Option<ColdCpu>,
}

/// The cold run's CPU seconds: the daemon's own, the tools it ran and waited for (helm),
/// the local cluster's processes, and the whole machine's (all of it, others included).
#[derive(Debug, Serialize, Clone, Copy)]
pub struct ColdCpu {
    pub daemon_s: f64,
    pub tools_s: f64,
    pub cluster_s: Option<f64>,
    pub machine_s: f64,
}

pub async fn run(args: &Args, driftless: &Path, n: usize) -> anyhow::Result<HelmResults> {
    let helm = tool("DRIFTLESS_TEST_HELM4", "helm")?;
    let chart = chart_dir()?;
    let work = tempfile::Builder::new()
        .prefix("driftless-bench-helm.")
        .tempdir()?;
    let load_average_start = load_average();
    let helm_version = output(std::process::Command::new(&helm).args(["version", "--short"]))?;
    let counter = Counter::new(work.path(), &helm)?;
    let mut notes = vec![format!(
        "{n} releases of {} with replicaCount 0, each in its own namespace; the loops' namespaces are made beforehand (untimed), driftless and helm --create-namespace make theirs",
        chart.display()
    )];
    let mut ways = Vec::new();

    eprintln!("== helm: driftless daemon, {n} releases");
    ways.push(daemon(args, driftless, &counter, &chart, work.path(), n).await?);

    if args.skips("helm-loops") {
        notes.push("the helm loops were skipped (--skip helm-loops)".into());
    } else {
        ways.extend(loops(args, &counter, &chart, n)?);
    }
    eprintln!("== helm: deleting the namespaces");
    let used: &[&str] = match args.skips("helm-loops") {
        true => &["hbd"],
        false => &["hbd", "hbh", "hbt", "hbp"],
    };
    for prefix in used {
        let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
        for chunk in names.chunks(50) {
            let _ = output(
                std::process::Command::new(&args.kubectl)
                    .args(["delete", "namespace", "--wait=false", "--ignore-not-found"])
                    .args(chunk),
            );
        }
    }
    notes.push("namespaces are deleted after the run without waiting".into());
    Ok(HelmResults {
        date: k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M UTC")
            .to_string(),
        releases: n,
        helm_version,
        chart: chart.display().to_string(),
        load_average_start,
        load_average_end: load_average(),
        ways,
        notes,
    })
}

/// The loops people write without driftless, each cold, again, and with one release
/// changed.
fn loops(args: &Args, counter: &Counter, chart: &Path, n: usize) -> anyhow::Result<Vec<Way>> {
    let mut ways = Vec::new();
    for ns in (0..n)
        .map(|i| format!("hbt-{i}"))
        .chain((0..n).map(|i| format!("hbp-{i}")))
    {
        let _ =
            output(std::process::Command::new(&args.kubectl).args(["create", "namespace", &ns]));
    }
    let values = |i: usize, changed: bool| -> Vec<String> {
        let mut v = vec!["--set".into(), "replicaCount=0".into()];
        if changed && i == 0 {
            v.extend(["--set".into(), "ui.message=changed".into()]);
        }
        v
    };
    eprintln!("== helm: helm upgrade --install, one after another");
    let mut times = [0.0; 3];
    let mut runs = [0; 3];
    for (k, changed) in [false, false, true].into_iter().enumerate() {
        counter.reset();
        let t = Instant::now();
        for i in 0..n {
            let mut c = counter.command();
            c.args(["upgrade", "--install", "podinfo"])
                .arg(chart)
                .args(["--namespace", &format!("hbh-{i}"), "--create-namespace"])
                .args(values(i, changed));
            output(&mut c).with_context(|| format!("helm upgrade --install (release {i})"))?;
        }
        times[k] = t.elapsed().as_secs_f64();
        runs[k] = counter.runs();
        eprintln!("  {:.1}s", times[k]);
    }
    ways.push(Way {
        name: "helm upgrade --install, sequential".into(),
        cold_s: times[0],
        noop_s: times[1],
        one_changed_s: times[2],
        helm_runs: runs,
        peak_rss_mib: None,
        cold_cpu: None,
    });
    for (name, prefix, parallel) in [
        (
            "helm template | kubectl apply --server-side, sequential",
            "hbt",
            1,
        ),
        (
            "helm template | kubectl apply --server-side, 4 in parallel",
            "hbp",
            4,
        ),
    ] {
        eprintln!("== helm: {name}");
        let mut times = [0.0; 3];
        let mut runs = [0; 3];
        for (k, changed) in [false, false, true].into_iter().enumerate() {
            counter.reset();
            let t = Instant::now();
            template_apply(counter, &args.kubectl, chart, prefix, n, parallel, &|i| {
                values(i, changed)
            })?;
            times[k] = t.elapsed().as_secs_f64();
            runs[k] = counter.runs();
            eprintln!("  {:.1}s", times[k]);
        }
        ways.push(Way {
            name: name.into(),
            cold_s: times[0],
            noop_s: times[1],
            one_changed_s: times[2],
            helm_runs: runs,
            peak_rss_mib: None,
            cold_cpu: None,
        });
    }
    Ok(ways)
}

/// The daemon on a tree of N `[helm.*]` releases: cold (start to the revision applied),
/// a no-op resync (its duration, from the status), one release's values changed (the
/// edit to the revision applied); helm runs of each; peak RSS.
async fn daemon(
    args: &Args,
    driftless: &Path,
    counter: &Counter,
    chart: &Path,
    work: &Path,
    n: usize,
) -> anyhow::Result<Way> {
    let tree = work.join("tree");
    copy_dir(chart, &tree.join("charts/podinfo"))?;
    let write = |message: &str| -> anyhow::Result<()> {
        let mut text = String::new();
        for i in 0..n {
            let extra = if i == 0 {
                format!(", ui = {{ message = \"{message}\" }}")
            } else {
                String::new()
            };
            text.push_str(&format!(
                "[helm.r{i}]\nnamespace = \"hbd-{i}\"\nchart = \"charts/podinfo\"\nrelease-name = \"podinfo\"\nvalues = {{ replicaCount = 0{extra} }}\n\n"
            ));
        }
        std::fs::write(tree.join("releases.toml"), text)?;
        Ok(())
    };
    write("first")?;
    let status_path = work.join("status.json");
    let port = free_port()?;
    counter.reset();
    let start = Instant::now();
    let cpu = CpuProbe::start();
    let mut child = tokio::process::Command::new(driftless)
        .args(["--instance", "bench-helm", "run", "--dir"])
        .arg(&tree)
        .arg("--helm")
        .arg(counter.wrapper())
        .args(["--resync", "20s", "--status-file"])
        .arg(&status_path)
        .arg("--cache-dir")
        .arg(work.join("cache"))
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(["--concurrency", &args.concurrency.to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join("daemon.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("starting the daemon")?;
    let pid = child.id().unwrap_or_default();
    let applied = |s: &Value| {
        s["revision_applied"].is_string()
            && s["revision_applied"] == s["revision_seen"]
            && s["last_sync"]["result"] == "success"
    };
    let first = wait_status(&status_path, Duration::from_secs(1800), &applied).await?;
    let cold_s = start.elapsed().as_secs_f64();
    let used = cpu.finish();
    let cold_cpu = ColdCpu {
        daemon_s: process_cpu_s(pid).unwrap_or(f64::NAN),
        tools_s: process_children_cpu_s(pid).unwrap_or(f64::NAN),
        cluster_s: used.cluster_s,
        machine_s: used.machine_s,
    };
    let cold_runs = counter.runs();
    eprintln!("  cold {cold_s:.1}s, {cold_runs} helm runs, CPU {cold_cpu:?}");

    // The next resync (every 20 s): no helm, and how long it took.
    counter.reset();
    let first_time = first["last_sync"]["time"].clone();
    let resynced = wait_status(&status_path, Duration::from_secs(120), &|s| {
        s["last_sync"]["time"] != first_time && s["last_sync"]["result"] == "success"
    })
    .await?;
    let noop_s = resynced["last_sync"]["duration_seconds"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let noop_runs = counter.runs();
    eprintln!("  no-op resync {noop_s:.2}s, {noop_runs} helm runs");

    counter.reset();
    let before = resynced["revision_seen"].clone();
    let t = Instant::now();
    write("changed")?;
    wait_status(&status_path, Duration::from_secs(600), &|s| {
        s["revision_seen"] != before && applied(s)
    })
    .await?;
    let one_changed_s = t.elapsed().as_secs_f64();
    let changed_runs = counter.runs();
    eprintln!("  one release changed {one_changed_s:.2}s, {changed_runs} helm runs");
    let peak_rss_mib = proc_status_kib(pid, "VmHWM:").map(|k| k / 1024.0);
    let _ = child.kill().await;
    // Its inventory goes with the namespaces' objects; a later run starts cold.
    let _ = output(std::process::Command::new(&args.kubectl).args([
        "delete",
        "configmap",
        "-n",
        "driftless-system",
        "-l",
        "driftless.dev/inventory-of=bench-helm",
        "--ignore-not-found",
    ]));
    Ok(Way {
        name: "driftless run (daemon)".into(),
        cold_s,
        noop_s,
        one_changed_s,
        helm_runs: [cold_runs, noop_runs, changed_runs],
        peak_rss_mib,
        cold_cpu: Some(cold_cpu),
    })
}

/// `helm template … | kubectl apply --server-side -f -` for each release, `parallel` at once.
fn template_apply(
    counter: &Counter,
    kubectl: &str,
    chart: &Path,
    prefix: &str,
    n: usize,
    parallel: usize,
    values: &(dyn Fn(usize) -> Vec<String> + Sync),
) -> anyhow::Result<()> {
    let next = AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..parallel {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        return;
                    }
                    let ns = format!("{prefix}-{i}");
                    let one = || -> anyhow::Result<()> {
                        let mut t = counter.command();
                        t.args(["template", "podinfo"])
                            .arg(chart)
                            .args(["--namespace", &ns])
                            .args(values(i));
                        let rendered = output(&mut t)?;
                        let mut k = std::process::Command::new(kubectl);
                        k.args(["apply", "--server-side", "--namespace", &ns, "-f", "-"])
                            .stdin(Stdio::piped())
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped());
                        let mut child = k.spawn()?;
                        if let Some(mut stdin) = child.stdin.take() {
                            use std::io::Write;
                            stdin.write_all(rendered.as_bytes())?;
                        }
                        let out = child.wait_with_output()?;
                        if !out.status.success() {
                            bail!("kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
                        }
                        Ok(())
                    };
                    if let Err(e) = one() {
                        *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        return;
                    }
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Counts a tool's renders (helm's template and upgrade, kubectl's and kustomize's builds):
/// a wrapper that appends its verb to a log, then runs the real program.
pub(crate) struct Counter {
    wrapper: PathBuf,
    log: PathBuf,
    base: Arc<AtomicUsize>,
}

impl Counter {
    pub(crate) fn new(dir: &Path, program: &Path) -> anyhow::Result<Counter> {
        Counter::named(dir, "helm", program)
    }

    /// A wrapper `dir/name` of `program`.
    pub(crate) fn named(dir: &Path, name: &str, program: &Path) -> anyhow::Result<Counter> {
        let log = dir.join(format!("{name}-runs.log"));
        let wrapper = dir.join(name);
        let helm = program;
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                helm.display()
            ),
        )?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))?;
        Ok(Counter {
            wrapper,
            log,
            base: Arc::new(AtomicUsize::new(0)),
        })
    }

    pub(crate) fn wrapper(&self) -> &Path {
        &self.wrapper
    }

    pub(crate) fn command(&self) -> std::process::Command {
        std::process::Command::new(&self.wrapper)
    }

    fn lines(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|t| {
                t.lines()
                    .filter(|l| matches!(*l, "template" | "upgrade" | "kustomize" | "build"))
                    .count()
            })
            .unwrap_or(0)
    }

    pub(crate) fn reset(&self) {
        self.base.store(self.lines(), Ordering::SeqCst);
    }

    pub(crate) fn runs(&self) -> usize {
        self.lines()
            .saturating_sub(self.base.load(Ordering::SeqCst))
    }
}

async fn wait_status(
    path: &Path,
    limit: Duration,
    pred: &(dyn Fn(&Value) -> bool + Sync),
) -> anyhow::Result<Value> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(v) = serde_json::from_str::<Value>(&text)
            && pred(&v)
        {
            return Ok(v);
        }
        if start.elapsed() > limit {
            bail!("the daemon's status did not get there within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// podinfo's chart from the shared sources, beside the repository.
pub(crate) fn chart_dir() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/sources/podinfo");
    let dir = std::env::var_os("DRIFTLESS_BENCH_CHART")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("6.2.3/charts/podinfo"));
    anyhow::ensure!(
        dir.join("Chart.yaml").is_file(),
        "no chart at {} (set DRIFTLESS_BENCH_CHART)",
        dir.display()
    );
    Ok(dir)
}

pub(crate) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

pub(crate) fn output(cmd: &mut std::process::Command) -> anyhow::Result<String> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if !out.status.success() {
        bail!(
            "{}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("failed")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The program `$VAR` names (the testbed's env names each), else `name` on PATH.
pub(crate) fn tool(var: &str, name: &str) -> anyhow::Result<PathBuf> {
    std::env::var(var)
        .map(PathBuf::from)
        .or_else(|_| which(name).ok_or(()))
        .map_err(|()| anyhow::anyhow!("no {name}: set {var} (the testbed's env does)"))
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The results as a Markdown table, driftless's ratios against each loop.
pub fn markdown(r: &HelmResults) -> String {
    let mut out = format!(
        "## Helm: {} releases ({}, {})\n\n| way | cold | no-op | one release changed | helm runs (cold/no-op/changed) | peak RSS |\n|---|---|---|---|---|---|\n",
        r.releases,
        r.helm_version.trim(),
        r.date
    );
    for w in &r.ways {
        out.push_str(&format!(
            "| {} | {:.1} s | {:.2} s | {:.2} s | {}/{}/{} | {} |\n",
            w.name.replace('|', "\\|"),
            w.cold_s,
            w.noop_s,
            w.one_changed_s,
            w.helm_runs[0],
            w.helm_runs[1],
            w.helm_runs[2],
            w.peak_rss_mib
                .map_or("-".to_string(), |m| format!("{m:.0} MiB"))
        ));
    }
    if let Some(d) = r.ways.first() {
        out.push('\n');
        for w in r.ways.iter().skip(1) {
            out.push_str(&format!(
                "- cold: driftless is {:.1}x faster than {}\n",
                w.cold_s / d.cold_s,
                w.name
            ));
        }
    }
    for w in &r.ways {
        let Some(c) = w.cold_cpu else { continue };
        out.push_str(&format!(
            "- {}, the cold run's CPU: the daemon's own {:.1} s, the helm runs it waited for {:.1} s, the local cluster {}, the whole machine {:.1} s of {:.1} s ({} cores x {:.1} s)\n",
            w.name,
            c.daemon_s,
            c.tools_s,
            c.cluster_s.map_or("-".to_string(), |s| format!("{s:.1} s")),
            c.machine_s,
            w.cold_s * cores() as f64,
            cores(),
            w.cold_s,
        ));
    }
    for n in &r.notes {
        out.push_str(&format!("- {n}\n"));
    }
    out.push_str(&format!(
        "- load average: {} at the start, {} at the end\n",
        r.load_average_start, r.load_average_end
    ));
    out
}
