//! The pure stages' workload (`--stages N,N`): instruction counts, which the noise of a
//! shared machine does not move, of what driftless does without a cluster for a tree of N
//! specs (the harness's mix): load (parse and validate the files), render, diff planning
//! (the changes between two revisions, 1 % of specs edited: what `diff --base` and a
//! sync's plan compare), health (every spec's readiness from the live views, judged
//! afresh), refresh (the daemon's next readiness refresh, 1 % of the live views changed
//! since the last) and status (the status file built and serialised, as each refresh
//! does). No cluster.
//!
//! Each stage runs in a process of its own under callgrind, which counts only inside
//! [`driftless_bench_measured`]: the setup a stage needs (generating the files, the stages
//! before it) is not counted. The table says each count's change against the last
//! committed run (`git show HEAD:<--out>`), so a regression is a number, run to run.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use driftless::apply::diff::preview;
use driftless::health;
use driftless::object::{Observed, Packed, Seen};
use driftless::render::{Facts, NodeFacts, Object, render};
use driftless::report::snapshot::Snapshot;
use driftless::spec::{SourceFile, SpecTree, parse_files};
use driftless_bench::generate::{self, Edits, Tree};

use crate::{Args, baseline};

pub const STAGES: [&str; 6] = ["load", "render", "diff", "health", "refresh", "status"];

/// Nodes the trees render for (`localservice` objects are per node).
const NODES: usize = 3;

#[derive(Debug, Serialize, Deserialize)]
pub struct StageResults {
    pub date: String,
    pub commit: String,
    pub valgrind: String,
    pub points: Vec<Point>,
    /// The committed run the table compares with, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_commit: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    pub stage: String,
    pub specs: usize,
    pub objects: usize,
    /// Instructions executed inside the stage (callgrind's Ir).
    pub instructions: u64,
    /// What the stage made, as the child said: the check that it did the work.
    pub made: String,
    /// The same stage's wall time outside valgrind, for orientation only.
    pub native_ms: f64,
    /// Against the baseline's point of the same stage and N, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
}

/// Everything counted runs inside this function, and nothing else: callgrind is told to
/// collect only here (`--toggle-collect`), so its name must stay unmangled.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn driftless_bench_measured(stage: &mut dyn FnMut()) {
    stage();
}

pub async fn run(args: &Args, sizes: &[usize]) -> anyhow::Result<StageResults> {
    let valgrind = output(Command::new("valgrind").arg("--version")).context(
        "the --stages workload counts instructions with valgrind (apt install valgrind)",
    )?;
    let me = std::env::current_exe().context("locating this binary")?;
    let work = tempfile::Builder::new().prefix("stages.").tempdir()?;
    let mut points = Vec::new();
    for &n in sizes {
        anyhow::ensure!(
            n >= 100,
            "--stages sizes start at 100 specs (1 % of them is edited)"
        );
        for stage in STAGES {
            let out = work.path().join(format!("callgrind.{stage}.{n}"));
            let counted = output(
                Command::new("valgrind")
                    .arg("--tool=callgrind")
                    .arg("--toggle-collect=driftless_bench_measured")
                    .arg(format!("--callgrind-out-file={}", out.display()))
                    .arg(&me)
                    .args(["--stage-child", stage, "--n", &n.to_string()]),
            )
            .with_context(|| format!("{stage} at {n} specs under callgrind"))?;
            let instructions = totals(&out)?;
            let native =
                output(Command::new(&me).args(["--stage-child", stage, "--n", &n.to_string()]))?;
            let (made, _) = child_line(&counted)?;
            let (_, native_ms) = child_line(&native)?;
            check(stage, n, &made)?;
            eprintln!("{stage:>7} at {n:>6} specs: {instructions:>14} instructions  ({made})");
            points.push(Point {
                stage: stage.to_string(),
                specs: n,
                objects: generate::expected_objects(n, NODES),
                instructions,
                made,
                native_ms,
                change_pct: None,
            });
        }
    }
    let mut results = StageResults {
        date: Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string(),
        commit: baseline::this_commit(),
        valgrind: valgrind.trim().to_string(),
        points,
        baseline_commit: None,
    };
    if let Some(base) = baseline::committed(&args.out) {
        compare(&mut results, &base);
    }
    Ok(results)
}

fn compare(results: &mut StageResults, base: &StageResults) {
    results.baseline_commit = Some(base.commit.clone());
    for p in &mut results.points {
        let before = base
            .points
            .iter()
            .find(|b| b.stage == p.stage && b.specs == p.specs);
        p.change_pct = before
            .filter(|b| b.instructions > 0)
            .map(|b| (p.instructions as f64 / b.instructions as f64 - 1.0) * 100.0);
    }
}

/// Callgrind's total of the collected events (the first is Ir, instructions).
fn totals(file: &Path) -> anyhow::Result<u64> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("{} has no totals line", file.display()))
}

/// The child's report: `made: ...` and `ms: ...`.
fn child_line(stdout: &str) -> anyhow::Result<(String, f64)> {
    let made = stdout
        .lines()
        .find_map(|l| l.strip_prefix("made: "))
        .context("the stage said nothing of what it made")?;
    let ms = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ms: "))
        .and_then(|v| v.parse().ok())
        .context("the stage did not say its time")?;
    Ok((made.to_string(), ms))
}

/// What each stage must have made at `n` specs: a count that is off means the stage did
/// not do the work its instructions are counted for.
fn check(stage: &str, n: usize, made: &str) -> anyhow::Result<()> {
    let objects = generate::expected_objects(n, NODES);
    let edited = generate::one_percent(n).image.len();
    let want = match stage {
        "load" => format!("{n} specs"),
        "render" => format!("{objects} objects"),
        // Each edited spec (an elasticweb) changes its Deployment's image.
        "diff" => format!("{edited} changes"),
        "health" => format!("{n} specs judged, {n} ready"),
        "refresh" => format!("{n} specs, {n} ready, {edited} judged again"),
        "status" => format!("{n} specs in the status"),
        other => bail!("no stage {other}"),
    };
    anyhow::ensure!(
        made.starts_with(&want),
        "{stage} at {n} specs made \"{made}\", not \"{want}\""
    );
    Ok(())
}

fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

// ---- the child: one stage, its setup uncounted ----

/// Runs `stage` on a tree of `n` specs and prints what it made and its time.
pub fn child(stage: &str, n: usize) -> anyhow::Result<()> {
    let (made, elapsed) = run_stage(stage, n)?;
    println!("made: {made}");
    println!("ms: {:.3}", elapsed.as_secs_f64() * 1000.0);
    Ok(())
}

/// Runs `stage` on a tree of `n` specs: what it made, and its time.
fn run_stage(stage: &str, n: usize) -> anyhow::Result<(String, Duration)> {
    let tree = Tree::new(n, 10, "bench-s");
    let facts = Facts {
        instance: "bench".into(),
        nodes: (1..=NODES)
            .map(|i| NodeFacts {
                name: format!("node-{i}"),
                labels: Default::default(),
            })
            .collect(),
    };
    let files = files_of(&tree, &Edits::default());
    let now = Timestamp::from_second(1_800_000_000)?;
    let ready_count = |judged: &[health::SpecHealth]| judged.iter().filter(|h| h.ready).count();
    Ok(match stage {
        "load" => {
            let (specs, elapsed) = measured(|| parse_files(&files))?;
            let specs = specs.map_err(|e| anyhow::anyhow!("{e}"))?;
            (format!("{} specs", specs.specs.len()), elapsed)
        }
        "render" => {
            let specs = load(&files)?;
            let (objects, elapsed) = measured(|| render(&specs, &facts))?;
            (format!("{} objects", objects?.len()), elapsed)
        }
        "diff" => {
            let base = render(&load(&files)?, &facts)?;
            let edited = files_of(&tree, &generate::one_percent(n));
            let head = render(&load(&edited)?, &facts)?;
            let (changes, elapsed) = measured(|| preview::between(&base, &head, true))?;
            (format!("{} changes", changes.len()), elapsed)
        }
        "health" => {
            let c = Converged::of(&files, &facts)?;
            let (judged, elapsed) =
                measured(|| health::tree_health(&c.specs.specs, &c.expected, &c.observed, now))?;
            let made = format!(
                "{} specs judged, {} ready",
                judged.len(),
                ready_count(&judged)
            );
            (made, elapsed)
        }
        "refresh" => {
            let mut c = Converged::of(&files, &facts)?;
            let mut memo = health::Judged::default();
            memo.tree_health(&c.specs.specs, &c.expected, &c.observed, now);
            // The edited specs' Deployments rolled out again since: their views
            // changed, still ready.
            for i in generate::one_percent(n).image {
                let name = tree.name(i);
                let Some(o) = c
                    .objects
                    .iter()
                    .find(|o| o.kind == "Deployment" && o.name == name)
                else {
                    bail!("no Deployment {name}");
                };
                c.observed.objects_mut().insert(o.key(), seen(o, 2));
            }
            let (judged, elapsed) =
                measured(|| memo.tree_health(&c.specs.specs, &c.expected, &c.observed, now))?;
            let made = format!(
                "{} specs, {} ready, {} judged again",
                judged.len(),
                judged.iter().filter(|h| h.ready).count(),
                memo.last_judged
            );
            (made, elapsed)
        }
        "status" => {
            let c = Converged::of(&files, &facts)?;
            let judged: Vec<_> = health::tree_health(&c.specs.specs, &c.expected, &c.observed, now)
                .into_iter()
                .map(std::sync::Arc::new)
                .collect();
            let (written, elapsed) = measured(|| status(&c.specs, &judged, &c.expected))?;
            let (specs, bytes) = written?;
            (
                format!("{specs} specs in the status, {bytes} bytes"),
                elapsed,
            )
        }
        other => bail!("no stage {other}: one of {}", STAGES.join(", ")),
    })
}

/// Runs `f` as the counted stage: what it gave, and its time. Its result is dropped by
/// the caller, outside the count.
fn measured<T>(f: impl FnOnce() -> T) -> anyhow::Result<(T, Duration)> {
    let mut f = Some(f);
    let mut out = None;
    let started = Instant::now();
    driftless_bench_measured(&mut || out = f.take().map(|f| f()));
    let elapsed = started.elapsed();
    Ok((out.context("the stage did not run")?, elapsed))
}

/// A tree applied and every object done: what health and status read.
struct Converged {
    specs: SpecTree,
    objects: Vec<Object>,
    expected: Vec<health::Expected>,
    observed: Observed,
}

impl Converged {
    fn of(files: &[SourceFile], facts: &Facts) -> anyhow::Result<Converged> {
        let specs = load(files)?;
        let objects = render(&specs, facts)?;
        let expected = health::expected(&objects);
        let observed = ready(&objects);
        Ok(Converged {
            specs,
            objects,
            expected,
            observed,
        })
    }
}

fn files_of(tree: &Tree, edits: &Edits) -> Vec<SourceFile> {
    (0..tree.n)
        .map(|i| SourceFile {
            path: tree.file(i).to_string_lossy().into_owned(),
            contents: tree.text(i, edits).into_bytes(),
        })
        .collect()
}

fn load(files: &[SourceFile]) -> anyhow::Result<SpecTree> {
    parse_files(files).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The live views of a converged tree, as the watches hold them: each object as sent,
/// with the status its controller reports once it is done.
fn ready(objects: &[Object]) -> Observed {
    let mut observed = Observed::default();
    for o in objects {
        observed.objects_mut().insert(o.key(), seen(o, 1));
    }
    observed
}

/// `o`'s live view at `generation`, done, as a watch holds it (readiness reads no
/// field hash).
fn seen(o: &Object, generation: i64) -> Seen {
    Seen {
        view: Packed::new(&health::readiness_view(live(o, generation))),
        fields: String::new(),
    }
}

/// `o` live at its `generation`, done.
fn live(o: &Object, generation: i64) -> Value {
    let mut live = o.body.value();
    live["metadata"]["generation"] = json!(generation);
    live["metadata"]["uid"] = json!(format!("uid-{}", o.name));
    if let Some(status) = status_of(o, generation) {
        live["status"] = status;
    }
    live
}

fn status_of(o: &Object, generation: i64) -> Option<Value> {
    let replicas = o
        .body
        .value()
        .pointer("/spec/replicas")
        .and_then(Value::as_i64);
    match o.kind.as_str() {
        "Deployment" | "StatefulSet" => {
            let r = replicas.unwrap_or(1);
            Some(json!({
                "observedGeneration": generation,
                "replicas": r, "updatedReplicas": r, "readyReplicas": r,
                "availableReplicas": r, "currentReplicas": r,
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                ],
            }))
        }
        "PersistentVolumeClaim" => Some(json!({"phase": "Bound"})),
        "Pod" => Some(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        })),
        _ => None,
    }
}

/// The status as a refresh makes it for the API: its spec count and size.
fn status(
    specs: &SpecTree,
    judged: &[std::sync::Arc<health::SpecHealth>],
    expected: &[health::Expected],
) -> anyhow::Result<(usize, usize)> {
    let empty = Default::default();
    let (actions, failures, warnings, settled) = (
        Default::default(),
        Default::default(),
        Default::default(),
        Default::default(),
    );
    let suspensions = Default::default();
    let drifted = Default::default();
    let snapshot = Snapshot {
        source: "dir:/bench",
        revision_seen: Some("r1"),
        revision_applied: Some("r1"),
        last_sync: None,
        errors: &[],
        cluster_error: None,
        cluster_away: None,
        kubernetes: Some("v1.37.2"),
        cluster: None,
        specs: &specs.specs,
        rendered: &empty,
        rendered_apps: &specs.rendered_apps,
        health: judged,
        expected,
        actions: &actions,
        failures: &failures,
        warnings: &warnings,
        settled_in: &settled,
        instance: "bench",
        leader: true,
        leader_problem: None,
        shard: None,
        shared: None,
        suspensions: &suspensions,
        drifted: &drifted,
        syncing: false,
        sync_progress: None,
        correct_drift: false,
    };
    // As the daemon makes it: each spec's entry made as it is written.
    let bytes = serde_json::to_vec(&snapshot.streamed())?;
    Ok((snapshot.specs.len(), bytes.len()))
}

pub fn markdown(r: &StageResults) -> String {
    let mut out = format!(
        "## Pure stages: instructions (callgrind), {} at {}\n\n",
        r.date, r.commit
    );
    match &r.baseline_commit {
        Some(c) => out.push_str(&format!("Change against the last committed run ({c}).\n\n")),
        None => out.push_str("No committed run to compare with.\n\n"),
    }
    out.push_str("| stage | specs | objects | instructions | per spec | change | made | native |\n|---|---|---|---|---|---|---|---|\n");
    for p in &r.points {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} ms |\n",
            p.stage,
            p.specs,
            p.objects,
            p.instructions,
            p.instructions / p.specs.max(1) as u64,
            p.change_pct
                .map(|c| format!("{c:+.2} %"))
                .unwrap_or_else(|| "new".into()),
            p.made,
            p.native_ms
        ));
    }
    // Linear cost: each stage's instructions per spec at its largest N against its smallest.
    let mut growth = Vec::new();
    for stage in STAGES {
        let mine: Vec<&Point> = r.points.iter().filter(|p| p.stage == stage).collect();
        if let (Some(a), Some(b)) = (
            mine.iter().min_by_key(|p| p.specs),
            mine.iter().max_by_key(|p| p.specs),
        ) && a.specs < b.specs
        {
            let per = |p: &Point| p.instructions as f64 / p.specs as f64;
            growth.push(format!(
                "- {stage}: per spec at {} specs is {:.2}x that at {}",
                b.specs,
                per(b) / per(a),
                a.specs
            ));
        }
    }
    if !growth.is_empty() {
        out.push_str("\nGrowth (1.00x is linear):\n\n");
        out.push_str(&growth.join("\n"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_makes_what_its_check_wants() {
        for stage in STAGES {
            let (made, _) = run_stage(stage, 100).unwrap();
            check(stage, 100, &made).unwrap();
        }
        assert!(run_stage("nothing", 100).is_err());
    }

    #[test]
    fn a_stage_that_made_too_little_fails_its_check() {
        assert!(check("load", 100, "99 specs").is_err());
        assert!(check("refresh", 1000, "1000 specs, 1000 ready, 1000 judged again").is_err());
        assert!(check("refresh", 1000, "1000 specs, 1000 ready, 10 judged again").is_ok());
    }

    #[test]
    fn callgrind_totals_are_read_and_their_absence_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out");
        std::fs::write(&file, "events: Ir\nfn=x\n1 5\ntotals: 12345\n").unwrap();
        assert_eq!(totals(&file).unwrap(), 12345);
        std::fs::write(&file, "events: Ir\nsummary: 678\n").unwrap();
        assert_eq!(totals(&file).unwrap(), 678);
        std::fs::write(&file, "events: Ir\n").unwrap();
        assert!(totals(&file).is_err());
    }

    #[test]
    fn the_change_is_against_the_same_stage_and_size() {
        let point = |stage: &str, specs, instructions| Point {
            stage: stage.into(),
            specs,
            objects: 0,
            instructions,
            made: String::new(),
            native_ms: 0.0,
            change_pct: None,
        };
        let base = StageResults {
            date: String::new(),
            commit: "abc".into(),
            valgrind: String::new(),
            points: vec![point("load", 100, 1000), point("load", 200, 4000)],
            baseline_commit: None,
        };
        let mut now = StageResults {
            points: vec![
                point("load", 100, 900),
                point("load", 200, 4000),
                point("render", 100, 5),
            ],
            commit: "def".into(),
            date: String::new(),
            valgrind: String::new(),
            baseline_commit: None,
        };
        compare(&mut now, &base);
        let changes: Vec<Option<String>> = now
            .points
            .iter()
            .map(|p| p.change_pct.map(|c| format!("{c:.2}")))
            .collect();
        assert_eq!(changes, [Some("-10.00".into()), Some("0.00".into()), None]);
        let table = markdown(&now);
        assert!(
            table.contains("against the last committed run (abc)"),
            "{table}"
        );
        assert!(table.contains("| -10.00 % |"), "{table}");
        assert!(table.contains("| new |"), "{table}");
        // 900 a spec at 100, 2,000 at 200: not linear, and said so.
        assert!(
            table.contains("- load: per spec at 200 specs is 2.22x that at 100"),
            "{table}"
        );
    }
}
