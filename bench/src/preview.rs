//! The preview workload (`--preview N`): a pull request previewed with no cluster, on a
//! git repository of N apps (every other one a release of podinfo's chart with its own
//! values file, the rest a kustomization of its own) where the change touches one app's
//! values. driftless's `diff --base HEAD` (cold, and with the cache a run on the base left)
//! against what flux-local and argocd-diff-preview publish as their approach: check out
//! both revisions and render every app of each, then compare the outputs. Tool runs are
//! counted, wall time is the median of --runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::Serialize;

use driftless_bench::stats::median;

use crate::Args;
use crate::helm::{Counter, chart_dir, copy_dir, output, tool};
use crate::measure::load_average;

#[derive(Debug, Serialize)]
pub struct PreviewResults {
    pub date: String,
    pub apps: usize,
    pub changed_apps: usize,
    pub helm_version: String,
    pub kustomize: String,
    pub runs: usize,
    pub load_average_start: String,
    pub load_average_end: String,
    pub ways: Vec<Way>,
    pub notes: Vec<String>,
}

/// One way of previewing the change.
#[derive(Debug, Serialize)]
pub struct Way {
    pub name: String,
    /// The median wall time, and every run's.
    pub median_s: f64,
    pub samples_s: Vec<f64>,
    /// `helm template` and kustomize builds one preview runs.
    pub renders: usize,
    /// The apps the preview names as changed.
    pub changed_apps_found: usize,
}

pub async fn run(args: &Args, driftless: &Path, n: usize) -> anyhow::Result<PreviewResults> {
    anyhow::ensure!(n >= 2, "--preview needs at least 2 apps");
    let helm = tool("DRIFTLESS_TEST_HELM4", "helm")?;
    let kubectl = tool("DRIFTLESS_KUSTOMIZE", "kustomize")?;
    let work = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            tempfile::Builder::new()
                .prefix("preview.")
                .tempdir_in(dir)?
        }
        None => tempfile::Builder::new()
            .prefix("driftless-bench-preview.")
            .tempdir()?,
    };
    let load_average_start = load_average();
    let helm_runs = Counter::named(work.path(), "helm", &helm)?;
    let kustomize_runs = Counter::named(work.path(), "kubectl", &kubectl)?;
    let renders = || helm_runs.runs() + kustomize_runs.runs();
    let reset = || {
        helm_runs.reset();
        kustomize_runs.reset();
    };
    let repo = work.path().join("repo");
    write_repo(&repo, n)?;

    let preview = |cache: &Path, base: &str, head: Option<&str>| -> anyhow::Result<usize> {
        let mut cmd = Command::new(driftless);
        cmd.args(["diff", "--base", base]);
        if let Some(head) = head {
            cmd.args(["--head", head]);
        }
        cmd.arg(&repo)
            .args(["--output", "json", "--helm"])
            .arg(helm_runs.wrapper())
            .arg("--kustomize")
            .arg(kustomize_runs.wrapper())
            .env("DRIFTLESS_CACHE_DIR", cache)
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "warn");
        let out = cmd.output()?;
        if !matches!(out.status.code(), Some(0 | 1)) {
            bail!(
                "driftless diff --base: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok(doc["apps"].as_array().map_or(0, Vec::len))
    };

    let mut ways = Vec::new();
    let mut measure = |name: &str,
                       prepare: &dyn Fn(usize) -> anyhow::Result<PathBuf>,
                       go: &dyn Fn(&Path) -> anyhow::Result<usize>|
     -> anyhow::Result<()> {
        eprintln!("== preview: {name}");
        let (mut samples, mut counted, mut found) = (Vec::new(), 0, 0);
        for run in 0..args.runs {
            let state = prepare(run)?;
            reset();
            let start = Instant::now();
            found = go(&state)?;
            samples.push(start.elapsed().as_secs_f64());
            counted = renders();
        }
        ways.push(Way {
            name: name.to_string(),
            median_s: median(&samples),
            samples_s: samples,
            renders: counted,
            changed_apps_found: found,
        });
        Ok(())
    };

    // The approach flux-local and argocd-diff-preview publish: both revisions checked out,
    // every app rendered in each, then compared. As many at once as driftless renders.
    let both = work.path().join("both");
    measure(
        "render every app of both revisions, 4 at a time (flux-local's, argocd-diff-preview's approach)",
        &|_| {
            if both.exists() {
                std::fs::remove_dir_all(&both)?;
            }
            Ok(both.clone())
        },
        &|dir| render_both(&repo, dir, n, &helm_runs, &kustomize_runs, &kubectl),
    )?;
    let caches = work.path().join("caches");
    measure(
        "driftless diff --base HEAD, no cache",
        &|run| {
            let cache = caches.join(format!("cold-{run}"));
            Ok(cache)
        },
        &|cache| preview(cache, "HEAD", None),
    )?;
    measure(
        "driftless diff --base HEAD, the cache of a run on the base (as CI restores it)",
        &|run| {
            let cache = caches.join(format!("base-{run}"));
            // What the base branch's own preview left: every app of HEAD rendered.
            preview(&cache, "HEAD", Some("HEAD"))?;
            Ok(cache)
        },
        &|cache| preview(cache, "HEAD", None),
    )?;

    let helm_version = output(Command::new(&helm).args(["version", "--short"]))?;
    let kustomize = output(Command::new(&kubectl).args(["version", "--client"]))?
        .lines()
        .find(|l| l.contains("Kustomize"))
        .unwrap_or("kustomize")
        .trim()
        .to_string();
    Ok(PreviewResults {
        date: k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M UTC")
            .to_string(),
        apps: n,
        changed_apps: 1,
        helm_version: helm_version.trim().to_string(),
        kustomize,
        runs: args.runs,
        load_average_start,
        load_average_end: load_average(),
        ways,
        notes: vec![
            format!(
                "{} chart releases of {} (each its own values file) and {} kustomizations (a Deployment and a Service each); the change edits one release's values file",
                n.div_ceil(2),
                chart_dir()?.display(),
                n / 2
            ),
            "no cluster and no kubeconfig in any of them; driftless renders at most 4 at once (--render-concurrency)".into(),
            "renders: helm template and kubectl kustomize runs, counted by wrappers".into(),
        ],
    })
}

/// The repository: `charts/podinfo`, and per app `apps/app-I.toml` with
/// `apps/app-I/values.yaml` (even I) or `apps/app-I/kustomization.yaml` (odd I). Committed
/// once; then app 0's values change in the work tree.
fn write_repo(repo: &Path, n: usize) -> anyhow::Result<()> {
    copy_dir(&chart_dir()?, &repo.join("charts/podinfo"))?;
    for i in 0..n {
        let dir = repo.join(format!("apps/app-{i}"));
        std::fs::create_dir_all(&dir)?;
        if i % 2 == 0 {
            std::fs::write(dir.join("values.yaml"), values(i, "before"))?;
            std::fs::write(
                repo.join(format!("apps/app-{i}.toml")),
                format!(
                    "namespace = \"app-{i}\"\n[helm.app-{i}]\nchart = \"charts/podinfo\"\nvalues-files = [\"apps/app-{i}/values.yaml\"]\n"
                ),
            )?;
        } else {
            std::fs::write(
                dir.join("kustomization.yaml"),
                format!(
                    "namespace: app-{i}\nresources: [deployment.yaml, service.yaml]\nlabels:\n  - pairs: {{app: app-{i}}}\n"
                ),
            )?;
            std::fs::write(
                dir.join("deployment.yaml"),
                format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app-{i}}}\nspec:\n  replicas: 0\n  selector: {{matchLabels: {{run: app-{i}}}}}\n  template:\n    metadata: {{labels: {{run: app-{i}}}}}\n    spec:\n      containers:\n        - {{name: web, image: nginx:1.27}}\n"
                ),
            )?;
            std::fs::write(
                dir.join("service.yaml"),
                format!(
                    "apiVersion: v1\nkind: Service\nmetadata: {{name: app-{i}}}\nspec:\n  selector: {{run: app-{i}}}\n  ports: [{{port: 80}}]\n"
                ),
            )?;
        }
    }
    let git = |args: &[&str]| -> anyhow::Result<()> {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.invalid",
            ])
            .args(args)
            .current_dir(repo)
            .output()?;
        if !out.status.success() {
            bail!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    };
    git(&["init", "-q", "-b", "main"])?;
    git(&["add", "."])?;
    git(&["commit", "-q", "-m", "base"])?;
    std::fs::write(repo.join("apps/app-0/values.yaml"), values(0, "after"))?;
    Ok(())
}

fn values(i: usize, message: &str) -> String {
    format!("replicaCount: 0\nui:\n  message: \"app-{i} {message}\"\nhpa:\n  enabled: false\n")
}

/// Checks out HEAD under `dir/base` beside the work tree, renders every app of each into
/// `dir/{base,head}-out`, and counts the apps whose output differs.
fn render_both(
    repo: &Path,
    dir: &Path,
    n: usize,
    helm: &Counter,
    kustomize: &Counter,
    kustomize_program: &Path,
) -> anyhow::Result<usize> {
    let base = dir.join("base");
    std::fs::create_dir_all(&base)?;
    let archive = Command::new("git")
        .args(["archive", "HEAD"])
        .current_dir(repo)
        .output()?;
    anyhow::ensure!(archive.status.success(), "git archive failed");
    let mut tar = Command::new("tar")
        .args(["-x", "-C"])
        .arg(&base)
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = tar.stdin.take() {
        use std::io::Write as _;
        stdin.write_all(&archive.stdout)?;
    }
    anyhow::ensure!(tar.wait()?.success(), "tar failed");
    let sides = [
        (base.as_path(), dir.join("base-out")),
        (repo, dir.join("head-out")),
    ];
    for (_, out) in &sides {
        std::fs::create_dir_all(out)?;
    }
    let jobs: Vec<(usize, &Path, &Path)> = sides
        .iter()
        .flat_map(|(tree, out)| (0..n).map(move |i| (i, *tree, out.as_path())))
        .collect();
    // `kubectl kustomize DIR`, or `kustomize build DIR`.
    let verb = match kustomize_program.file_name().and_then(|f| f.to_str()) {
        Some(f) if f.starts_with("kustomize") => "build",
        _ => "kustomize",
    };
    let next = AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&(i, tree, out)) = jobs.get(k) else {
                        return;
                    };
                    let mut cmd = if i % 2 == 0 {
                        let mut c = helm.command();
                        c.args(["template", &format!("app-{i}"), "charts/podinfo"])
                            .args(["--namespace", &format!("app-{i}")])
                            .args(["--values", &format!("apps/app-{i}/values.yaml")])
                            // Argo CD's flags, as driftless renders: test hooks have
                            // random names, and would differ on every render.
                            .args(["--include-crds", "--skip-tests"]);
                        c
                    } else {
                        let mut c = kustomize.command();
                        c.args([verb, &format!("apps/app-{i}")]);
                        c
                    };
                    cmd.current_dir(tree);
                    let result = output(&mut cmd).and_then(|yaml| {
                        std::fs::write(out.join(format!("app-{i}.yaml")), yaml)
                            .context("writing a render")
                    });
                    if let Err(e) = result {
                        *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let mut changed = 0;
    for i in 0..n {
        let name = format!("app-{i}.yaml");
        if std::fs::read(sides[0].1.join(&name))? != std::fs::read(sides[1].1.join(&name))? {
            changed += 1;
        }
    }
    Ok(changed)
}

/// The results as a Markdown table.
pub fn markdown(r: &PreviewResults) -> String {
    let mut out = format!(
        "## Pull-request preview: {} apps, {} changed ({}, {}, {})\n\n| way | median | runs | renders | changed apps found |\n|---|---|---|---|---|\n",
        r.apps, r.changed_apps, r.helm_version, r.kustomize, r.date
    );
    for w in &r.ways {
        let samples: Vec<String> = w.samples_s.iter().map(|s| format!("{s:.2}")).collect();
        out.push_str(&format!(
            "| {} | {:.2} s | {} | {} | {} |\n",
            w.name.replace('|', "\\|"),
            w.median_s,
            samples.join(", "),
            w.renders,
            w.changed_apps_found
        ));
    }
    if let Some(twice) = r.ways.first() {
        out.push('\n');
        for w in r.ways.iter().skip(1) {
            out.push_str(&format!(
                "- {}: {:.1}x faster than rendering everything twice, {} render{} instead of {}\n",
                w.name,
                twice.median_s / w.median_s.max(1e-9),
                w.renders,
                if w.renders == 1 { "" } else { "s" },
                twice.renders
            ));
        }
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
