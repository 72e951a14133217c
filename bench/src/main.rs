//! driftless's benchmark harness: against a running cluster (KUBECONFIG; `scripts/bench`
//! boots one), it measures cold sync, no-op resync, diff, daemon latency and memory,
//! and how they scale, each against kubectl and a raw server-side-apply loop; prints a
//! table and writes JSON. `--helm N` runs the Helm workload instead, `--ui N,N` the web
//! UI's (headless Chromium, no cluster), `--preview N` a pull request's preview (no cluster), `--stages N,N` the pure stages'
//! instruction counts (valgrind, no cluster), `--scale N,N` the daemon on N specs (first
//! sync, no-op resync, restart), `--fleet K,N` K clusters of N specs, a daemon each. Run on demand, never as part of the test suite.

mod baseline;
mod fleet;
mod helm;
mod measure;
mod preview;
mod report;
mod scale;
mod stages;
mod ui;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "driftless-bench",
    about = "Benchmark driftless against kubectl and the apiserver's SSA ceiling (needs KUBECONFIG)"
)]
pub struct Args {
    /// Specs in the main benchmark (about 2.45 objects each).
    #[arg(long, default_value_t = 1000)]
    pub n: usize,
    /// Times each main measurement is taken (median and spread are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Spec edits in the daemon latency benchmark.
    #[arg(long, default_value_t = 30)]
    pub edits: usize,
    /// Sizes for the scaling exponents (cold sync time, no-op time, daemon memory).
    /// Points above --n are measured once, the others --runs times.
    #[arg(long, value_delimiter = ',', default_values_t = [100, 1000, 5000])]
    pub scaling: Vec<usize>,
    /// Namespaces each tree is spread over.
    #[arg(long, default_value_t = 10)]
    pub namespaces: usize,
    /// Concurrency of driftless and of the raw SSA loop.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench/results/latest.json")]
    pub out: PathBuf,
    /// Also write the Markdown table here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// The driftless binary (default: next to this one, i.e. the same release build).
    #[arg(long)]
    pub driftless: Option<PathBuf>,
    #[arg(long, default_value = "kubectl")]
    pub kubectl: String,
    /// A quick smoke run: --n 100 --runs 1 --edits 5 --scaling 50,100,200.
    #[arg(long)]
    pub quick: bool,
    /// Skip parts: any of cold,noop,diff,daemon,scaling,kubectl (noop and diff need cold);
    /// with --helm, helm-loops (driftless alone).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Run the Helm workload instead: this many releases of podinfo's chart, driftless's
    /// daemon against `helm upgrade --install` and `helm template | kubectl apply` loops.
    /// Results go to bench/results/helm-latest.json unless --out says otherwise.
    #[arg(long, value_name = "N")]
    pub helm: Option<usize>,
    /// Keep the generated spec trees and daemon logs here (default: a temporary dir).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Run the web UI workload instead: the page's own script drawing this many specs
    /// (sizes, comma-separated) in headless Chromium, its first screen and one spec's
    /// delta, --runs times each. Needs chromium and chromedriver, no cluster. Results go to
    /// bench/results/ui-latest.json unless --out says otherwise.
    #[arg(long, value_name = "N,N", value_delimiter = ',')]
    pub ui: Option<Vec<usize>>,
    /// Run the preview workload instead: `diff --base` on a git repository of this many
    /// apps (charts and kustomizations) with one changed, against rendering every app of
    /// both revisions; no cluster. Results go to bench/results/preview-latest.json unless
    /// --out says otherwise.
    #[arg(long, value_name = "N")]
    pub preview: Option<usize>,
    /// Run the pure stages' workload instead: instruction counts (callgrind) of load,
    /// render, diff planning, health and status at each of these tree sizes, with their
    /// change against the last committed run. Needs valgrind, no cluster. Results go to
    /// bench/results/stages-latest.json unless --out says otherwise.
    #[arg(long, value_name = "N,N", value_delimiter = ',')]
    pub stages: Option<Vec<usize>>,
    /// Run the scale workload instead: the daemon on a tree of N elasticweb specs (one
    /// file each) at each of these sizes: its first sync until every spec is ready, a
    /// no-op resync, a restart after SIGKILL; time, CPU, memory and the apiserver's
    /// requests, per spec against the smallest N and against the last committed run.
    /// Results go to bench/results/scale-latest.json unless --out says otherwise.
    #[arg(long, value_name = "N,N", value_delimiter = ',')]
    pub scale: Option<Vec<usize>>,
    /// Run the fleet workload instead: K clusters (the local one and K-1 apiservers on
    /// its etcd) of N specs each from one tree, a daemon per cluster: the first sync, a
    /// no-op resync, a change with every cluster up and with one stopped, its return.
    /// Results go to bench/results/fleet-latest.json unless --out says otherwise.
    #[arg(long, value_name = "K,N", value_delimiter = ',')]
    pub fleet: Option<Vec<usize>>,
    /// With --fleet: one daemon serves every cluster (`run --clusters` without
    /// `--cluster`) instead of a daemon per cluster.
    #[arg(long, requires = "fleet")]
    pub one_daemon: bool,
    /// One stage in this process (what --stages runs under callgrind).
    #[arg(long, hide = true, value_name = "STAGE")]
    pub stage_child: Option<String>,
    /// The Chromium binary of the --ui workload.
    #[arg(long, default_value = "/usr/bin/chromium")]
    pub chromium: PathBuf,
}

impl Args {
    pub fn skips(&self, part: &str) -> bool {
        self.skip.iter().any(|s| s == part)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if let Some(stage) = &args.stage_child {
        return stages::child(stage, args.n);
    }
    if args.quick {
        args.n = 100;
        args.runs = 1;
        args.edits = 5;
        args.scaling = vec![50, 100, 200];
    }
    args.runs = args.runs.max(1);
    if let Some(sizes) = args.stages.clone() {
        // The baseline is read from where the results go.
        if args.out == Path::new("bench/results/latest.json") {
            args.out = PathBuf::from("bench/results/stages-latest.json");
        }
        let results = stages::run(&args, &sizes).await?;
        return write_results(
            &args,
            "stages-latest.json",
            &results,
            &stages::markdown(&results),
        );
    }
    let driftless = match &args.driftless {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locating this binary")?
            .with_file_name("driftless"),
    };
    anyhow::ensure!(
        driftless.is_file(),
        "{} not found: build it (cargo build --release) or pass --driftless",
        driftless.display()
    );
    if let Some(sizes) = args.scale.clone() {
        // The baseline is read from where the results go.
        if args.out == Path::new("bench/results/latest.json") {
            args.out = PathBuf::from("bench/results/scale-latest.json");
        }
        let results = scale::run(&args, &driftless, &sizes).await?;
        return write_results(
            &args,
            "scale-latest.json",
            &results,
            &scale::markdown(&results),
        );
    }
    if let Some(fleet) = args.fleet.clone() {
        if args.out == Path::new("bench/results/latest.json") {
            args.out = PathBuf::from("bench/results/fleet-latest.json");
        }
        let [k, n] = fleet[..] else {
            anyhow::bail!("--fleet K,N: the number of clusters and of specs per cluster");
        };
        let results = fleet::run(&args, &driftless, k, n).await?;
        return write_results(
            &args,
            "fleet-latest.json",
            &results,
            &fleet::markdown(&results),
        );
    }
    if let Some(sizes) = &args.ui {
        let results = ui::run(&args, &driftless, sizes).await?;
        return write_results(&args, "ui-latest.json", &results, &ui::markdown(&results));
    }
    if let Some(n) = args.preview {
        let results = preview::run(&args, &driftless, n).await?;
        return write_results(
            &args,
            "preview-latest.json",
            &results,
            &preview::markdown(&results),
        );
    }
    if let Some(n) = args.helm {
        let results = helm::run(&args, &driftless, n).await?;
        return write_results(
            &args,
            "helm-latest.json",
            &results,
            &helm::markdown(&results),
        );
    }
    let mut results = measure::run(&args, &driftless).await?;
    results.targets = report::targets(&results);
    let table = report::markdown(&results);
    println!("{table}");
    if let Some(dir) = args.out.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("results written to {}", args.out.display());
    if let Some(md) = &args.markdown {
        std::fs::write(md, &table).with_context(|| format!("writing {}", md.display()))?;
    }
    Ok(())
}

/// Prints `table`, writes the JSON to --out (`bench/results/<default>` when --out was not
/// given) and the table to --markdown.
fn write_results(
    args: &Args,
    default: &str,
    results: &impl serde::Serialize,
    table: &str,
) -> anyhow::Result<()> {
    println!("{table}");
    let out = if args.out == Path::new("bench/results/latest.json") {
        Path::new("bench/results").join(default)
    } else {
        args.out.clone()
    };
    if let Some(dir) = out.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(results)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!("results written to {}", out.display());
    if let Some(md) = &args.markdown {
        std::fs::write(md, table).with_context(|| format!("writing {}", md.display()))?;
    }
    Ok(())
}
