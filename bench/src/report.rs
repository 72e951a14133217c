//! The results as Markdown (stdout, docs/src/contributing/benchmarks.md) and the targets of issue 7.

use std::fmt::Write as _;

use driftless_bench::stats::Summary;

use crate::measure::{CpuUse, DiffPair, Results, Target};

/// Allowed slack on "no worse than linear": a log-log fit over three points of noisy
/// wall times moves by a few hundredths between runs.
const LINEAR_SLACK: f64 = 1.05;

fn secs(s: &Summary) -> String {
    let prec = if s.median < 1.0 { 3 } else { 2 };
    format!("{:.prec$} s ±{:.0}%", s.median, s.spread_pct / 2.0)
}

fn rate(rate: &Summary, time: &Summary) -> String {
    format!("{:.0} obj/s ({})", rate.median, secs(time))
}

fn met(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "not measured",
    }
}

pub fn targets(r: &Results) -> Vec<Target> {
    let mut out = Vec::new();
    let mut push = |name: &str, target: &str, measured: String, ok: Option<bool>| {
        out.push(Target {
            name: name.into(),
            target: target.into(),
            measured,
            met: ok,
        })
    };
    match &r.cold {
        Some(c) => {
            push(
                "cold sync vs the raw SSA ceiling",
                "≥ 80 % of its objects/s",
                format!("{:.0} %", c.driftless_vs_raw.median * 100.0),
                Some(c.driftless_vs_raw.median >= 0.8),
            );
            let k = c.speedup_vs_kubectl.as_ref();
            push(
                "cold sync vs kubectl apply --server-side",
                "≥ 3× faster",
                k.map_or("-".into(), |k| format!("{:.1}×", k.median)),
                k.map(|k| k.median >= 3.0),
            );
        }
        None => {
            push(
                "cold sync vs the raw SSA ceiling",
                "≥ 80 %",
                "-".into(),
                None,
            );
            push("cold sync vs kubectl", "≥ 3×", "-".into(), None);
        }
    }
    match &r.noop {
        Some(n) => {
            let writes = n.driftless_writes.iter().max().copied().unwrap_or(0);
            push(
                "no-op resync writes",
                "0",
                format!("{writes} (every run)"),
                Some(n.driftless_writes.iter().all(|w| *w == 0)),
            );
            let ratio = n.ratio.as_ref();
            push(
                "no-op resync vs kubectl's warm re-apply",
                "≤ 5 % of its time",
                ratio.map_or("-".into(), |x| format!("{:.1} %", x.median * 100.0)),
                ratio.map(|x| x.median <= 0.05),
            );
        }
        None => {
            push("no-op resync writes", "0", "-".into(), None);
            push("no-op resync vs kubectl", "≤ 5 %", "-".into(), None);
        }
    }
    let diff = |d: Option<&DiffPair>| {
        let s = d.and_then(|d| d.speedup.as_ref());
        (
            s.map_or("-".into(), |s| format!("{:.1}×", s.median)),
            s.map(|s| s.median >= 2.0),
        )
    };
    let (m, ok) = diff(r.diff.as_ref().map(|d| &d.unchanged));
    push(
        "diff (unchanged) vs kubectl diff --server-side",
        "≥ 2× faster",
        m,
        ok,
    );
    let (m, ok) = diff(r.diff.as_ref().map(|d| &d.changed));
    push(
        "diff (1 % changed) vs kubectl diff --server-side",
        "≥ 2× faster",
        m,
        ok,
    );
    let rss_1000 = r
        .daemon
        .as_ref()
        .filter(|d| d.n == 1000)
        .map(|d| d.peak_rss_mib)
        .or_else(|| {
            r.scaling.as_ref().and_then(|s| {
                s.points
                    .iter()
                    .find(|p| p.n == 1000)
                    .and_then(|p| p.daemon_peak_rss_mib)
            })
        });
    push(
        "daemon peak RSS at N = 1,000",
        "≤ 64 MiB",
        rss_1000.map_or("-".into(), |m| format!("{m:.1} MiB")),
        rss_1000.map(|m| m <= 64.0),
    );
    let s = r.scaling.as_ref();
    for (name, k) in [
        (
            "cold sync time growth",
            s.and_then(|s| s.cold_time_exponent),
        ),
        (
            "no-op resync time growth",
            s.and_then(|s| s.noop_time_exponent),
        ),
        (
            "daemon first sync time growth",
            s.and_then(|s| s.daemon_first_sync_exponent),
        ),
        (
            "daemon memory growth",
            s.and_then(|s| s.daemon_memory_exponent),
        ),
    ] {
        push(
            name,
            "no worse than linear (k ≤ 1.05)",
            k.map_or("-".into(), |k| format!("k = {k:.2}")),
            k.map(|k| k <= LINEAR_SLACK),
        );
    }
    out
}

pub fn markdown(r: &Results) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "driftless benchmark, {}: {} cores ({}), kube-apiserver {}, kubectl {}, {}. \
         N = {} specs = {} objects in {} namespaces, concurrency {}; {} run(s) each, \
         median ± half the spread (max − min). Load average {} at the start, {} at the end.\n",
        r.date,
        r.machine.cores,
        r.machine.cpu,
        r.apiserver_version,
        r.kubectl_version,
        r.driftless_version,
        r.n,
        r.objects,
        r.namespaces,
        r.concurrency,
        r.runs,
        r.load_average_start,
        r.load_average_end
    );
    let _ = writeln!(
        o,
        "| measurement | driftless | kubectl | raw SSA loop | ratio |\n| --- | --- | --- | --- | --- |"
    );
    if let Some(c) = &r.cold {
        let k = match (&c.kubectl_objs_per_s, &c.kubectl_s) {
            (Some(rt), Some(t)) => rate(rt, t),
            _ => "-".into(),
        };
        let _ = writeln!(
            o,
            "| cold sync | {} | {k} | {} | {:.0} % of raw, {} kubectl |",
            rate(&c.driftless_objs_per_s, &c.driftless_s),
            rate(&c.raw_objs_per_s, &c.raw_s),
            c.driftless_vs_raw.median * 100.0,
            c.speedup_vs_kubectl
                .as_ref()
                .map_or("-".into(), |s| format!("{:.1}×", s.median)),
        );
    }
    if let Some(n) = &r.noop {
        let writes = n.driftless_writes.iter().max().copied().unwrap_or(0);
        let _ = writeln!(
            o,
            "| no-op resync | {}, {writes} writes | {}{} | | {} of kubectl's time |",
            secs(&n.driftless_s),
            n.kubectl_s.as_ref().map_or("-".into(), secs),
            n.kubectl_writes
                .map_or(String::new(), |w| format!(", {w} PATCHes")),
            n.ratio
                .as_ref()
                .map_or("-".into(), |x| format!("{:.1} %", x.median * 100.0)),
        );
    }
    if let Some(d) = &r.diff {
        for (what, p) in [
            ("diff, unchanged".to_string(), &d.unchanged),
            (
                format!("diff, 1 % changed ({} specs)", d.changed_specs),
                &d.changed,
            ),
        ] {
            let shown = |v: &[usize]| v.iter().max().copied().unwrap_or(0);
            let exits = |v: &[i32]| {
                let mut v = v.to_vec();
                v.dedup();
                v.iter().map(i32::to_string).collect::<Vec<_>>().join("/")
            };
            let _ = writeln!(
                o,
                "| {what} | {} (exit {}, {} objects shown) | {} | | {} faster |",
                secs(&p.driftless_s),
                exits(&p.driftless_exit),
                shown(&p.driftless_objects_shown),
                p.kubectl_s.as_ref().map_or("-".into(), |k| format!(
                    "{} (exit {}, {} objects shown)",
                    secs(k),
                    exits(&p.kubectl_exit),
                    shown(&p.kubectl_objects_shown)
                )),
                p.speedup
                    .as_ref()
                    .map_or("-".into(), |s| format!("{:.1}×", s.median)),
            );
        }
    }
    if let Some(d) = &r.daemon {
        let _ = writeln!(
            o,
            "| daemon: file saved → applied ({} edits) | p50 {:.3} s, p95 {:.3} s, max {:.3} s | | | |",
            d.edits, d.applied.p50_s, d.applied.p95_s, d.applied.max_s
        );
        let _ = writeln!(
            o,
            "| daemon: file saved → ready in the status file | p50 {:.3} s, p95 {:.3} s, max {:.3} s | | | |",
            d.ready.p50_s, d.ready.p95_s, d.ready.max_s
        );
        let _ = writeln!(
            o,
            "| daemon: start → first sync / all ready | {:.2} s / {} | | | |",
            d.first_sync_s,
            d.first_ready_s
                .map_or("not within 30 min".into(), |s| format!("{s:.2} s"))
        );
        let _ = writeln!(
            o,
            "| daemon: API writes per edit | {:.1} | | | |",
            d.writes_per_edit
        );
        let _ = writeln!(
            o,
            "| daemon: peak RSS (VmHWM), N = {} | {:.1} MiB | | | |",
            d.n, d.peak_rss_mib
        );
    }
    if let Some(s) = &r.scaling {
        let _ = writeln!(
            o,
            "\n| N (objects) | cold sync | no-op resync | daemon first sync | daemon peak RSS |\n| --- | --- | --- | --- | --- |"
        );
        for p in &s.points {
            let _ = writeln!(
                o,
                "| {} ({}) | {} (×{}) | {} | {} | {} |",
                p.n,
                p.objects,
                secs(&p.cold_s),
                p.cold_s.samples.len(),
                secs(&p.noop_s),
                p.daemon_first_sync_s
                    .map_or("-".into(), |x| format!("{x:.2} s")),
                p.daemon_peak_rss_mib
                    .map_or("-".into(), |x| format!("{x:.1} MiB")),
            );
        }
        let k = |x: Option<f64>| x.map_or("-".into(), |k| format!("k = {k:.2}"));
        let _ = writeln!(
            o,
            "| growth: y ∝ objects^k | {} | {} | {} | {}{} |",
            k(s.cold_time_exponent),
            k(s.noop_time_exponent),
            k(s.daemon_first_sync_exponent),
            k(s.daemon_memory_exponent),
            s.daemon_kib_per_object
                .map_or(String::new(), |x| format!(" ({x:.1} KiB/object)")),
        );
    }
    if !r.cpu.is_empty() {
        let _ = writeln!(
            o,
            "\nCPU seconds per timed region (median over runs; the machine has {} cores; \
             \"other\" is work outside the benchmark sharing them):\n\n\
             | region | wall | client | local cluster | other |\n| --- | --- | --- | --- | --- |",
            r.machine.cores
        );
        for (label, uses) in &r.cpu {
            let med = |f: &dyn Fn(&CpuUse) -> Option<f64>| {
                let xs: Vec<f64> = uses.iter().filter_map(f).collect();
                Summary::of(&xs).map_or("-".into(), |s| format!("{:.1}", s.median))
            };
            let _ = writeln!(
                o,
                "| {label} | {} | {} | {} | {} |",
                med(&|c| Some(c.wall_s)),
                med(&|c| Some(c.client_s)),
                med(&|c| c.cluster_s),
                med(&|c| c.other_s),
            );
        }
    }
    let _ = writeln!(
        o,
        "\n| target | goal | measured | met |\n| --- | --- | --- | --- |"
    );
    for t in &r.targets {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            t.name,
            t.target,
            t.measured,
            met(t.met)
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "\nNote: {n}");
    }
    o
}
