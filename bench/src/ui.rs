//! The web UI workload (`--ui 1000,10000`): the page's own script drawing N specs in a
//! real headless Chromium, driven over WebDriver by chromedriver on loopback, the way
//! tests/ui_find.rs drives it. The test proves what the drawing does (every row, the
//! failing spec first, a delta that moves one row and touches no other); this measures
//! how long it takes, which a test on a shared machine cannot judge.
//!
//! The page comes from a real `driftless run` on an empty tree. It serves the page, the
//! API and the event stream before it reaches for a cluster, so it is given none (its
//! kubeconfig names a loopback port nothing listens on): no apiserver shares the cores
//! with the browser. The status document of N specs is made in the page, as the test
//! makes it, and drawn by the page's code: `model = doc; render()` for the first screen,
//! `applyDelta(model, {specs: [one]}); render()` for one spec's delta, each timed with
//! `performance.now()` around the script alone and again after a forced reflow (the style
//! and layout the change costs), every run on a freshly opened page.

use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde::Serialize;
use serde_json::{Value, json};

use driftless_bench::stats::{Summary, percentile};

use crate::Args;
use crate::measure::{Machine, free_port, load_average, machine};

/// The window of tests/ui_find.rs: a desktop's.
const WINDOW: (u32, u32) = (1600, 1000);
/// Deltas timed per run (one spec each, a different one each time).
const DELTAS: usize = 7;
/// The first spec a delta changes; the deltas take it and the ones after it.
const FIRST_CHANGED: usize = 42;
/// Fewer specs than this and the failing spec, placed as the test places it, could be
/// one of the changed ones.
const MIN_SPECS: usize = 100;
/// How long the daemon, chromedriver and the page get to come up.
const START: Duration = Duration::from_secs(120);

#[derive(Debug, Serialize)]
pub struct UiResults {
    pub date: String,
    /// This harness's command line.
    pub command: String,
    pub machine: Machine,
    pub chromium_version: String,
    pub chromedriver_version: String,
    pub driftless_version: String,
    pub window: [u32; 2],
    /// Recorded runs per size, each on a freshly opened page.
    pub runs: usize,
    pub deltas_per_run: usize,
    pub points: Vec<UiPoint>,
    /// CPU seconds the daemon used while the runs went on (it serves the page and retries
    /// the cluster it does not have): what it took from the browser.
    pub daemon_cpu_s: Option<f64>,
    pub load_average_start: String,
    pub load_average_end: String,
    pub notes: Vec<String>,
}

/// One size's figures, in milliseconds.
#[derive(Debug, Serialize)]
pub struct UiPoint {
    pub specs: usize,
    /// `model = doc; render()` on a fresh page: the page's script drawing every row.
    pub first_screen_script_ms: Summary,
    /// The same, up to the end of the style and layout it causes.
    pub first_screen_layout_ms: Summary,
    /// One spec's delta (`applyDelta` and `render`): each run's median of its deltas.
    pub delta_script_ms: Summary,
    /// The same, up to the end of the style and layout it causes.
    pub delta_layout_ms: Summary,
    /// Every delta's script time, run after run.
    pub delta_script_samples_ms: Vec<f64>,
    pub delta_script_p95_ms: f64,
    pub delta_script_max_ms: f64,
}

/// What one run on a fresh page measured.
struct Run {
    first_script: f64,
    first_layout: f64,
    delta_script: Vec<f64>,
    delta_layout: Vec<f64>,
}

/// Builds the document in the page and times the drawing; `arguments`: the number of
/// specs, the index of the failing one, the deltas to time, the first spec they change.
/// Also returns what was drawn, so a broken page is not measured as a fast one.
const WORKLOAD: &str = "\
const [n, failedAt, deltas, firstChanged] = arguments;
const specs = [];
for (let i = 0; i < n; i++) {
  const failed = i === failedAt;
  specs.push({id: `manifest/ns-${i % 50}/Deployment.apps/app-${i}`, kind: 'manifest',
    namespace: `ns-${i % 50}`, name: `Deployment.apps/app-${i}`, file: `bundle-${i % 300}.yaml`, line: 1,
    ready: !failed, status: failed ? 'Failed' : 'Current', reason: failed ? 'CrashLoopBackOff' : null,
    message: failed ? `CrashLoopBackOff: Pod app-${i}-x` : 'ready', figures: {kind: 'manifest'},
    objects: [{object: `Deployment.apps ns-${i % 50}/app-${i}`, status: failed ? 'InProgress' : 'Current',
      reason: null, message: '', action: 'unchanged'}], suspended: null, drifted: [], revision: 'r1'});
}
const doc = Object.assign({}, model, {specs});
const reflow = () => document.body.offsetHeight;
let t = performance.now();
model = doc; render();
const firstScript = performance.now() - t;
reflow();
const firstLayout = performance.now() - t;
const drawn = [...document.querySelectorAll('#spec-rows tr[data-id]')];
const rows = drawn.length, firstRow = rows ? drawn[0].dataset.id : null;
const deltaScript = [], deltaLayout = [];
for (let k = 0; k < deltas; k++) {
  const changed = Object.assign({}, specs[firstChanged + k], {ready: false, status: 'InProgress'});
  t = performance.now();
  applyDelta(model, {specs: [changed]}); render();
  deltaScript.push(performance.now() - t);
  reflow();
  deltaLayout.push(performance.now() - t);
}
const top = [...document.querySelectorAll('#spec-rows tr[data-id]')].slice(0, deltas + 1).map(r => r.dataset.id);
return {firstScript, firstLayout, deltaScript, deltaLayout, rows, firstRow, top};
";

fn spec_id(i: usize) -> String {
    format!("manifest/ns-{}/Deployment.apps/app-{i}", i % 50)
}

/// The failing spec's index: where tests/ui_find.rs puts it among 10,000, and never one
/// of the specs the deltas change.
fn failed_at(n: usize) -> usize {
    match 7345 % n {
        i if (FIRST_CHANGED..FIRST_CHANGED + DELTAS).contains(&i) => n - 1,
        i => i,
    }
}

pub async fn run(args: &Args, driftless: &Path, sizes: &[usize]) -> anyhow::Result<UiResults> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    anyhow::ensure!(!sizes.is_empty(), "--ui needs at least one size");
    if let Some(small) = sizes.iter().find(|&&n| n < MIN_SPECS) {
        bail!("--ui {small}: the workload needs at least {MIN_SPECS} specs");
    }
    let chromedriver = which("chromedriver")
        .ok_or_else(|| anyhow!("no chromedriver on PATH (Debian's chromium-driver)"))?;
    anyhow::ensure!(
        args.chromium.is_file(),
        "no Chromium at {} (Debian's chromium; --chromium PATH)",
        args.chromium.display()
    );
    let work = tempfile::Builder::new()
        .prefix("driftless-bench-ui.")
        .tempdir()?;
    let load_average_start = load_average();
    let chromium_version = version(Command::new(&args.chromium).arg("--version"));
    let chromedriver_version = version(Command::new(&chromedriver).arg("--version"));
    let driftless_version = version(Command::new(driftless).arg("--version"));

    let daemon = UiDaemon::start(driftless, work.path())?;
    let driver = Chromedriver::start(&chromedriver, work.path())?;
    let client = driver.session(&args.chromium).await?;
    let page = format!("http://{}/", daemon.addr);
    let measured = async {
        client
            .set_window_size(WINDOW.0, WINDOW.1)
            .await
            .context("sizing the window")?;
        // Unrecorded: the browser's first pages pay for starting its renderer and
        // compiling the page's script, which a person's open browser has done.
        for &n in &sizes {
            eprintln!("ui: warm-up, {n} specs");
            one_run(&client, &page, n).await?;
        }
        let cpu_before = daemon.cpu_s();
        let mut runs: Vec<Vec<Run>> = sizes.iter().map(|_| Vec::new()).collect();
        // Sizes take turns within each run, so a slow spell on the machine falls on all.
        for r in 0..args.runs {
            for (i, &n) in sizes.iter().enumerate() {
                let run = one_run(&client, &page, n).await?;
                eprintln!(
                    "ui: run {r}, {n} specs: first screen {:.1} ms ({:.1} ms with layout), deltas {:?} ms",
                    run.first_script,
                    run.first_layout,
                    run.delta_script
                        .iter()
                        .map(|d| (d * 10.0).round() / 10.0)
                        .collect::<Vec<_>>()
                );
                runs[i].push(run);
            }
        }
        let daemon_cpu_s = match (cpu_before, daemon.cpu_s()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        anyhow::Ok((runs, daemon_cpu_s))
    }
    .await;
    let _ = client.close().await;
    drop(driver);
    let (runs, daemon_cpu_s) = measured.map_err(|e| {
        anyhow!(
            "{e:#}\nthe daemon's log ends:\n{}",
            tail(&daemon.log(), 3000)
        )
    })?;
    drop(daemon);

    let mut points = Vec::new();
    for (n, runs) in sizes.iter().zip(&runs) {
        points.push(point(*n, runs)?);
    }
    Ok(UiResults {
        date: k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M UTC")
            .to_string(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: machine(),
        chromium_version,
        chromedriver_version,
        driftless_version,
        window: [WINDOW.0, WINDOW.1],
        runs: args.runs,
        deltas_per_run: DELTAS,
        points,
        daemon_cpu_s,
        load_average_start,
        load_average_end: load_average(),
        notes: vec![
            format!(
                "each run opens the page afresh (after one unrecorded warm-up per size); the \
                 document is made in the page as tests/ui_find.rs makes it: N specs of one \
                 Deployment each, spec 7345 mod N failed; each delta puts one more spec (#{FIRST_CHANGED} \
                 on) in progress, which moves its row up to just after the failed one"
            ),
            "\"with layout\" is up to the end of a forced reflow (document.body.offsetHeight) \
             after the script: style and layout, not painting"
                .to_string(),
            "the daemon runs without a cluster (its kubeconfig names a closed loopback port): \
             it serves the page and its event stream; the figures are the page's own work"
                .to_string(),
        ],
    })
}

fn point(n: usize, runs: &[Run]) -> anyhow::Result<UiPoint> {
    let summary = |xs: Vec<f64>| Summary::of(&xs).ok_or_else(|| anyhow!("{n} specs: no runs"));
    let median = |xs: &[f64]| Summary::of(xs).map_or(f64::NAN, |s| s.median);
    let samples: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.delta_script.iter().copied())
        .collect();
    Ok(UiPoint {
        specs: n,
        first_screen_script_ms: summary(runs.iter().map(|r| r.first_script).collect())?,
        first_screen_layout_ms: summary(runs.iter().map(|r| r.first_layout).collect())?,
        delta_script_ms: summary(runs.iter().map(|r| median(&r.delta_script)).collect())?,
        delta_layout_ms: summary(runs.iter().map(|r| median(&r.delta_layout)).collect())?,
        delta_script_p95_ms: percentile(&samples, 95.0),
        delta_script_max_ms: samples.iter().copied().fold(f64::NAN, f64::max),
        delta_script_samples_ms: samples,
    })
}

/// Opens the page afresh, waits for its event stream, and runs the workload once.
async fn one_run(client: &Client, page: &str, n: usize) -> anyhow::Result<Run> {
    client
        .goto(page)
        .await
        .with_context(|| format!("opening {page}"))?;
    // Live: the daemon's first document is drawn, so `model` and the page's functions
    // are there, and nothing the stream sends later can land inside the timed script.
    wait_for(
        client,
        "the page's event stream (Live)",
        "const c = document.getElementById('connection'); \
         return !!c && c.innerText.includes('Live') && typeof model === 'object' && model !== null",
    )
    .await?;
    let failed = failed_at(n);
    let got = client
        .execute(
            WORKLOAD,
            vec![json!(n), json!(failed), json!(DELTAS), json!(FIRST_CHANGED)],
        )
        .await
        .with_context(|| format!("the workload at {n} specs"))?;
    // What was drawn: every row, the failing spec first, each changed spec moved up to
    // just after it; anything else is a broken page, not a measurement.
    let rows = got["rows"].as_u64().unwrap_or(0);
    anyhow::ensure!(
        rows == n as u64,
        "{n} specs drew {rows} rows (the page's list is not the one this measures): {got}"
    );
    let mut top = vec![spec_id(failed)];
    top.extend((FIRST_CHANGED..FIRST_CHANGED + DELTAS).map(spec_id));
    anyhow::ensure!(
        got["firstRow"] == top[0].as_str() && got["top"] == json!(top),
        "{n} specs: the rows are not in the order the test expects (the failing spec, then \
         the ones each delta moved): {}",
        got["top"]
    );
    let numbers = |key: &str| -> anyhow::Result<Vec<f64>> {
        got[key]
            .as_array()
            .ok_or_else(|| anyhow!("no {key} in {got}"))?
            .iter()
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| anyhow!("{key}: {v} is not a number"))
            })
            .collect()
    };
    let number = |key: &str| {
        got[key]
            .as_f64()
            .ok_or_else(|| anyhow!("no {key} in {got}"))
    };
    Ok(Run {
        first_script: number("firstScript")?,
        first_layout: number("firstLayout")?,
        delta_script: numbers("deltaScript")?,
        delta_layout: numbers("deltaLayout")?,
    })
}

/// Polls `script` until it returns true, within `START`.
async fn wait_for(client: &Client, what: &str, script: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let last = client.execute(script, vec![]).await;
        if matches!(last, Ok(Value::Bool(true))) {
            return Ok(());
        }
        if start.elapsed() > START {
            let text = client
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap_or_default();
            bail!("no {what} within {START:?} ({last:?}); the page shows: {text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `driftless run` on an empty tree, serving the page on a loopback port, without a
/// cluster; killed on drop.
struct UiDaemon {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl UiDaemon {
    fn start(driftless: &Path, work: &Path) -> anyhow::Result<UiDaemon> {
        let tree = work.join("tree");
        std::fs::create_dir_all(&tree)?;
        // A port free a moment ago and not listened on: the daemon's requests to its
        // "cluster" are refused at once, and it retries with backoff.
        let nowhere = free_port()?;
        let kubeconfig = work.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster:\n    server: http://127.0.0.1:{nowhere}\n\
                 users:\n- name: none\n  user: {{}}\ncontexts:\n- name: none\n  context: {{cluster: none, user: none}}\n\
                 current-context: none\n"
            ),
        )?;
        let addr = format!("127.0.0.1:{}", free_port()?);
        let log = work.join("daemon.log");
        let child = Command::new(driftless)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--instance", "bench-ui", "run", "--dir"])
            .arg(&tree)
            .args(["--resync", "1h", "--metrics-addr", &addr, "--status-file"])
            .arg(work.join("status.json"))
            .arg("--cache-dir")
            .arg(work.join("cache"))
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log)?)
            .spawn()
            .context("starting driftless run")?;
        Ok(UiDaemon { child, addr, log })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its user and system CPU seconds so far.
    fn cpu_s(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // After "pid (comm) ": utime and stime are fields 14 and 15.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (ticks > 0).then(|| (utime + stime) / ticks as f64)
    }
}

impl Drop for UiDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver on a loopback port, in a process group of its own that the Chromium it
/// starts joins: dropping it kills them all, also when a run fails half way.
struct Chromedriver {
    child: Child,
    port: u16,
    profile: PathBuf,
    log: PathBuf,
}

impl Chromedriver {
    fn start(chromedriver: &Path, work: &Path) -> anyhow::Result<Chromedriver> {
        let port = free_port()?;
        let log = work.join("chromedriver.log");
        let out = File::create(&log)?;
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .context("starting chromedriver")?;
        Ok(Chromedriver {
            child,
            port,
            profile: work.join("profile"),
            log,
        })
    }

    /// A WebDriver session: a fresh Chromium profile, headless, no sandbox (the harness
    /// may run as root), nothing fetched in the background while it measures.
    async fn session(&self, chromium: &Path) -> anyhow::Result<Client> {
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("--user-data-dir={}", self.profile.display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium, "args": args}),
        );
        // The workload runs as one script; 10,000 specs and their layout take seconds
        // on a slow machine, more than WebDriver's default 30 s would allow for larger N.
        capabilities.insert("timeouts".into(), json!({"script": 600_000}));
        let url = format!("http://127.0.0.1:{}", self.port);
        let start = Instant::now();
        loop {
            let attempt = ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await;
            match attempt {
                Ok(client) => return Ok(client),
                Err(e) if start.elapsed() > START => bail!(
                    "no WebDriver session from chromedriver on {url}: {e}\n{}",
                    tail(
                        &std::fs::read_to_string(&self.log).unwrap_or_default(),
                        3000
                    )
                ),
                // chromedriver not listening yet.
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group of our own child, not yet reaped.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

fn version(cmd: &mut Command) -> String {
    cmd.stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn tail(text: &str, n: usize) -> &str {
    let mut at = text.len().saturating_sub(n);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

fn ms(s: &Summary) -> String {
    format!("{:.1} ms ±{:.0}%", s.median, s.spread_pct / 2.0)
}

/// The results as Markdown: one row per size.
pub fn markdown(r: &UiResults) -> String {
    let mut out = format!(
        "## Web UI: the page's script in headless Chromium ({})\n\n\
         {}; {}; {}. {} cores ({}), {} GiB. Window {}×{}; {} run(s) per size, each on a fresh \
         page; {} deltas per run. Median ± half the spread (max − min) over runs; a delta's \
         figure is each run's median.\n\n\
         | specs | first screen: script | first screen: with layout | one delta: script | one delta: with layout | delta script p95 / max (all runs) |\n\
         | --- | --- | --- | --- | --- | --- |\n",
        r.date,
        r.chromium_version,
        r.chromedriver_version,
        r.driftless_version,
        r.machine.cores,
        r.machine.cpu,
        r.machine.memory_gib,
        r.window[0],
        r.window[1],
        r.runs,
        r.deltas_per_run,
    );
    for p in &r.points {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1} / {:.1} ms |\n",
            p.specs,
            ms(&p.first_screen_script_ms),
            ms(&p.first_screen_layout_ms),
            ms(&p.delta_script_ms),
            ms(&p.delta_layout_ms),
            p.delta_script_p95_ms,
            p.delta_script_max_ms,
        ));
    }
    out.push('\n');
    for n in &r.notes {
        out.push_str(&format!("- {n}\n"));
    }
    if let Some(cpu) = r.daemon_cpu_s {
        out.push_str(&format!(
            "- the daemon used {cpu:.2} CPU-s while the recorded runs went on\n"
        ));
    }
    out.push_str(&format!(
        "- load average: {} at the start, {} at the end\n- command: `{}`\n",
        r.load_average_start, r.load_average_end, r.command
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_spec_is_the_tests_and_never_one_a_delta_changes() {
        assert_eq!(failed_at(10_000), 7345);
        assert_eq!(failed_at(1000), 345);
        for n in MIN_SPECS..20_000 {
            let f = failed_at(n);
            assert!(
                f < n && !(FIRST_CHANGED..FIRST_CHANGED + DELTAS).contains(&f),
                "{n}: {f}"
            );
        }
    }

    #[test]
    fn a_delta_figure_is_each_runs_median_summarised_over_runs() {
        let run = |first: f64, deltas: &[f64]| Run {
            first_script: first,
            first_layout: first * 2.0,
            delta_script: deltas.to_vec(),
            delta_layout: deltas.iter().map(|d| d * 3.0).collect(),
        };
        let runs = [run(100.0, &[1.0, 9.0, 2.0]), run(300.0, &[4.0, 5.0, 6.0])];
        let p = point(1000, &runs).unwrap();
        assert_eq!(p.first_screen_script_ms.median, 200.0);
        assert_eq!(p.first_screen_layout_ms.median, 400.0);
        assert_eq!(p.delta_script_ms.samples, vec![2.0, 5.0]);
        assert_eq!(p.delta_layout_ms.samples, vec![6.0, 15.0]);
        assert_eq!(
            p.delta_script_samples_ms,
            vec![1.0, 9.0, 2.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(p.delta_script_max_ms, 9.0);
    }
}
