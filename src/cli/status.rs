//! `driftless status`: the daemon's status file for a person (a header block, one row per
//! spec, the warnings whole below) or as JSON, and the verdict as the exit status.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use driftless::report::status::{ClusterSummary, MESSAGE_WIDTH, SourceError, StatusFile, one_line};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::exit;

/// Figures and header values (the last sync's message) may use more of the line.
const FIGURES_WIDTH: usize = 64;
const HEADER_WIDTH: usize = 100;

#[derive(Args, Debug)]
#[command(
    after_help = "Exit status: 0 when the daemon has converged (the newest revision is valid \
and synced, every spec ready), 1 when the status file says otherwise, 2 when it cannot be read. \
With several status files (a fleet's daemons), the worst of them."
)]
pub struct StatusArgs {
    /// The daemon's status file [default: as `run` writes it, see `run --status-file`].
    /// Repeated (a fleet's daemons, one per cluster): one row per cluster.
    #[arg(long, value_name = "FILE", env = "DRIFTLESS_STATUS_FILE")]
    pub status_file: Vec<PathBuf>,
    /// How to print it.
    #[arg(long, short = 'o', value_enum, default_value_t = StatusOutput::Table)]
    pub output: StatusOutput,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutput {
    Table,
    /// The table with nothing cut.
    Wide,
    Json,
}

pub(super) fn status(args: &StatusArgs, instance: &str) -> anyhow::Result<u8> {
    let path = match args.status_file.as_slice() {
        [] => super::run::default_status_file(instance)?,
        [path] => path.clone(),
        several => return fleet(several, args.output),
    };
    let file = match StatusFile::read(&path) {
        Ok(file) => file,
        Err(e) => {
            // A fleet's daemon writes there where its clusters' statuses are: a small
            // file, read again only when it is not a daemon's status.
            if let Some(index) = driftless::report::status::FleetIndex::read(&path) {
                return fleet(&index.fleet, args.output);
            }
            eprintln!("driftless status: {e}");
            return Ok(exit::ERROR);
        }
    };
    let now = Timestamp::now();
    let not_converged = file.not_converged(now);
    let mut text = match args.output {
        StatusOutput::Table => table(&file, Some(now), false),
        StatusOutput::Wide => table(&file, Some(now), true),
        StatusOutput::Json => serde_json::to_string_pretty(&file)? + "\n",
    };
    // The verdict, for a person; JSON stays the file as it is (the exit status says it).
    if args.output != StatusOutput::Json {
        match not_converged.is_empty() {
            true => text.push_str("\nconverged\n"),
            false => {
                text.push_str("\nnot converged:\n");
                for why in &not_converged {
                    text.push_str(&format!("  - {why}\n"));
                }
            }
        }
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(match not_converged.is_empty() {
        true => exit::OK,
        false => exit::DIFFERENCES,
    })
}

/// Several daemons' status files (a fleet's, one per cluster): one row per cluster
/// (reachable, version, specs ready and not, the last sync and its age), then why each
/// that has not converged has not; `-o wide` adds each cluster's whole table; JSON is
/// `{"clusters": [...]}`, each file as it is with the path it was read from. A file that
/// cannot be read is said and the others are shown; the exit status is the worst.
fn fleet(paths: &[PathBuf], output: StatusOutput) -> anyhow::Result<u8> {
    let now = Timestamp::now();
    let mut code = exit::OK;
    let mut read = Vec::new();
    for path in paths {
        match StatusFile::read(path) {
            Ok(file) => read.push((path, file)),
            Err(e) => {
                eprintln!("driftless status: {e}");
                code = exit::ERROR;
            }
        }
    }
    let verdicts: Vec<Vec<String>> = read.iter().map(|(_, f)| f.not_converged(now)).collect();
    if verdicts.iter().any(|v| !v.is_empty()) {
        code = code.max(exit::DIFFERENCES);
    }
    let name = |path: &PathBuf, file: &StatusFile| {
        file.cluster
            .clone()
            .unwrap_or_else(|| path.display().to_string())
    };
    let text = match output {
        StatusOutput::Json => {
            let docs = read
                .iter()
                .map(|(path, file)| {
                    let mut doc = serde_json::to_value(file)?;
                    if let Some(map) = doc.as_object_mut() {
                        map.insert("status_file".into(), path.display().to_string().into());
                    }
                    Ok(doc)
                })
                .collect::<serde_json::Result<Vec<_>>>()?;
            serde_json::to_string_pretty(&serde_json::json!({ "clusters": docs }))? + "\n"
        }
        StatusOutput::Table | StatusOutput::Wide => {
            let wide = output == StatusOutput::Wide;
            let rows: Vec<[String; 7]> = read
                .iter()
                .map(|(path, file)| fleet_row(&name(path, file), file, now, wide))
                .collect();
            let mut out = columns(
                &[
                    "CLUSTER",
                    "REACHABLE",
                    "KUBERNETES",
                    "READY",
                    "NOT READY",
                    "LAST SYNC",
                    "MESSAGE",
                ],
                &rows,
            );
            for ((path, file), why) in read.iter().zip(&verdicts) {
                match why.is_empty() {
                    true => {
                        let _ = writeln!(out, "\n{}: converged", name(path, file));
                    }
                    false => {
                        let _ = writeln!(out, "\n{}: not converged:", name(path, file));
                        for w in why {
                            let _ = writeln!(out, "  - {w}");
                        }
                    }
                }
            }
            if wide {
                for (path, file) in &read {
                    let _ = write!(
                        out,
                        "\ncluster {}:\n{}",
                        name(path, file),
                        table(file, Some(now), true)
                    );
                }
            }
            out
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(code)
}

/// A cluster's row of the fleet table: its summary, as the fleet's API says it.
fn fleet_row(name: &str, file: &StatusFile, now: Timestamp, wide: bool) -> [String; 7] {
    let row = ClusterSummary::of(name, file, now);
    let last = row.last_sync.as_ref();
    let last_sync = match last {
        Some(l) => match age(&l.time, now) {
            Some(age) => format!("{} {age}", l.result),
            None => l.result.clone(),
        },
        None => "none yet".to_string(),
    };
    [
        row.cluster.clone(),
        if row.reachable { "yes" } else { "no" }.to_string(),
        row.kubernetes.clone().unwrap_or_else(|| "-".to_string()),
        row.ready.to_string(),
        row.not_ready.to_string(),
        last_sync,
        cut(
            last.and_then(|l| l.message.as_deref()).unwrap_or(""),
            MESSAGE_WIDTH,
            wide,
        ),
    ]
}

/// `rows` under `heads`, each column as wide as its widest cell (the last one not
/// padded).
fn columns<const N: usize>(heads: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths: [usize; N] = heads.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            match i + 1 == N {
                true => text.push_str(cell),
                false => {
                    let _ = write!(text, "{cell:<w$}  ");
                }
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(heads.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// `now` only adds the age of the last sync; tests leave it out for stable output.
fn table(status: &StatusFile, now: Option<Timestamp>, wide: bool) -> String {
    let mut out = String::new();
    headers(&mut out, status, now, wide);
    if !status.errors.is_empty() {
        header(&mut out, "errors", &status.errors.len().to_string());
        for e in &status.errors {
            // Multi-line messages (a parser's snippet) stay readable under their location.
            let message = e.message.trim_end().replace('\n', "\n    ");
            let _ = writeln!(out, "  {}{message}", location(e));
        }
    }
    units(
        &mut out,
        "releases",
        status
            .releases
            .iter()
            .map(|r| (r.tally.ready, r.describe())),
    );
    units(
        &mut out,
        "apps",
        status.apps.iter().map(|a| (a.tally.ready, a.describe())),
    );
    let ready = status.specs.iter().filter(|s| s.ready).count();
    header(
        &mut out,
        "specs",
        &format!("{ready}/{} ready", status.specs.len()),
    );
    if status.specs.is_empty() {
        return out;
    }
    out.push('\n');
    spec_rows(&mut out, status, wide);
    // Below the table, whole: a warning names what to change, and cut it would not.
    let warned: Vec<(&str, &String)> = status
        .specs
        .iter()
        .flat_map(|s| s.warnings.iter().map(|w| (s.id.as_str(), w)))
        .collect();
    if !warned.is_empty() {
        out.push('\n');
        header(&mut out, "warnings", &warned.len().to_string());
        for (id, w) in warned {
            let _ = writeln!(out, "  {id}: {w}");
        }
    }
    out
}

/// `text` on one line, cut to `width` unless the table is wide.
fn cut(text: &str, width: usize, wide: bool) -> String {
    match wide {
        true => one_line(text, usize::MAX),
        false => one_line(text, width),
    }
}

/// The header block: where the daemon is, what it applied and saw, its last sync, and
/// what it is doing.
fn headers(out: &mut String, status: &StatusFile, now: Option<Timestamp>, wide: bool) {
    let dash = || "-".to_string();
    if !status.instance.is_empty() {
        header(out, "instance", &status.instance);
    }
    if let Some(c) = &status.cluster {
        header(out, "cluster", c);
    }
    if let Some(v) = &status.kubernetes {
        header(out, "kubernetes", v);
    }
    header(out, "source", &status.source);
    header(
        out,
        "revision applied",
        &status.revision_applied.clone().unwrap_or_else(dash),
    );
    header(
        out,
        "revision seen",
        &status.revision_seen.clone().unwrap_or_else(dash),
    );
    match &status.last_sync {
        None => header(out, "last sync", "never"),
        Some(sync) => {
            let age = now
                .and_then(|now| age(&sync.time, now))
                .map(|a| format!(" ({a})"))
                .unwrap_or_default();
            header(
                out,
                "last sync",
                &format!(
                    "{}{age}: {} in {} ({} applied, {} unchanged, {} pruned, {} failed)",
                    sync.time,
                    sync.result,
                    duration(sync.duration_seconds),
                    sync.applied,
                    sync.unchanged,
                    sync.pruned,
                    sync.failed
                ),
            );
            if let Some(message) = sync.message.as_deref().filter(|m| !m.is_empty()) {
                header(out, "", &cut(message, HEADER_WIDTH, wide));
            }
        }
    }
    if let Some(leader) = status.leader {
        let text = if leader {
            "yes (this replica syncs)"
        } else {
            "no (standby)"
        };
        header(out, "leader", text);
    }
    if let Some(shard) = &status.shard {
        let text = match &shard.problem {
            Some(problem) => format!(
                "{} holds nothing: {}",
                shard.member,
                cut(problem, HEADER_WIDTH, wide)
            ),
            None => format!(
                "{} holds {} of {} buckets; members {}",
                shard.member,
                shard.buckets.len(),
                driftless::apply::buckets::BUCKETS,
                shard.members.join(", ")
            ),
        };
        header(out, "shard", &text);
    }
    if status.syncing {
        let doing = status
            .sync_progress
            .as_ref()
            .map_or_else(|| "in progress".to_string(), |p| p.message.clone());
        header(out, "syncing", &cut(&doing, HEADER_WIDTH, wide));
    }
    if status.drift != "correct" {
        header(out, "drift", &format!("{} (not corrected)", status.drift));
    }
}

/// The table of specs: a row each, its columns as wide as their widest cell.
fn spec_rows(out: &mut String, status: &StatusFile, wide: bool) {
    let rows: Vec<[String; 5]> = status
        .specs
        .iter()
        .map(|s| {
            let mut message = match s.reason.as_deref() {
                Some(r) if !r.is_empty() && !s.message.starts_with(r) => {
                    format!("{r}: {}", s.message)
                }
                _ => s.message.clone(),
            };
            // What a person changed comes first: it explains the rest.
            if !s.drifted.is_empty() {
                message = format!("drifted: {}; {message}", s.drifted.join(", "));
            }
            if let Some(held) = &s.suspended {
                message = format!("suspended: {}; {message}", held.reason);
            }
            [
                s.id.clone(),
                if s.ready { "yes" } else { "no" }.to_string(),
                s.status.clone(),
                cut(&figures(&s.figures.value()), FIGURES_WIDTH, wide),
                cut(&message, MESSAGE_WIDTH, wide),
            ]
        })
        .collect();
    let titles = ["ID", "READY", "STATUS", "FIGURES", "MESSAGE"];
    let mut widths = titles.map(|t| t.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let titles = titles.map(str::to_string);
    for row in std::iter::once(&titles).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// A section of units (chart releases, apps): how many are ready, then a line each; none
/// when there are none.
fn units(out: &mut String, label: &str, lines: impl Iterator<Item = (bool, String)>) {
    let lines: Vec<(bool, String)> = lines.collect();
    if lines.is_empty() {
        return;
    }
    let ready = lines.iter().filter(|(r, _)| *r).count();
    header(out, label, &format!("{ready}/{} ready", lines.len()));
    for (_, line) in lines {
        let _ = writeln!(out, "  {line}");
    }
}

fn header(out: &mut String, label: &str, value: &str) {
    let label = if label.is_empty() {
        String::new()
    } else {
        format!("{label}:")
    };
    let _ = writeln!(out, "{label:<18}{value}");
}

fn location(e: &SourceError) -> String {
    match (&e.file, e.line, e.column) {
        (Some(f), Some(l), Some(c)) => format!("{f}:{l}:{c}: "),
        (Some(f), Some(l), None) => format!("{f}:{l}: "),
        (Some(f), None, _) => format!("{f}: "),
        (None, _, _) => String::new(),
    }
}

fn duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "?".into();
    }
    if seconds < 1.0 {
        format!("{:.0}ms", seconds * 1000.0)
    } else if seconds < 60.0 {
        format!("{seconds:.1}s")
    } else {
        let whole = seconds.round() as u64;
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

fn age(time: &str, now: Timestamp) -> Option<String> {
    let then: Timestamp = time.parse().ok()?;
    let secs = now.as_second() - then.as_second();
    Some(match secs {
        s if s < 0 => "in the future: check the clocks".to_string(),
        s if s < 60 => format!("{s}s ago"),
        s if s < 3600 => format!("{}m ago", s / 60),
        s if s < 86_400 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    })
}

/// A kind's figures in a few words: `replicas 2/3 qps 1200`, `node-1 10.0.0.7 http://...`,
/// `nodes 2 endpoints node-1:1,node-2:0`.
fn figures(f: &Value) -> String {
    let text = |key: &str| f.get(key).and_then(Value::as_str);
    let num = |key: &str| {
        f.get(key)
            .filter(|v| v.is_number())
            .map_or_else(|| "?".to_string(), Value::to_string)
    };
    match text("kind") {
        Some("manifest") => String::new(),
        Some("elasticweb") => format!(
            "replicas {}/{} qps {}",
            num("available_replicas"),
            num("desired_replicas"),
            num("real_qps")
        ),
        Some("workspace") => {
            let mut parts = Vec::new();
            // Running is the normal case; only say so when the workspace is meant to be off.
            if let Some(state) = text("state").filter(|s| *s != "running") {
                parts.push(state.to_string());
            }
            parts.extend(
                ["node", "pod_ip", "url"]
                    .into_iter()
                    .filter_map(|k| text(k).map(str::to_string)),
            );
            parts.join(" ")
        }
        Some("localservice") => {
            let nodes = f.get("nodes").and_then(Value::as_array);
            let endpoints = f
                .get("ready_endpoints")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(node, n)| format!("{node}:{n}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let n = nodes.map_or(0, Vec::len);
            if endpoints.is_empty() {
                format!("nodes {n}")
            } else {
                format!("nodes {n} endpoints {endpoints}")
            }
        }
        _ if f.is_null() => String::new(),
        // A kind this build does not know (a newer daemon): show it raw rather than hide it.
        _ => f.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's own sample (src/report/status/sample.json).
    fn sample() -> StatusFile {
        serde_json::from_str(include_str!("../report/status/sample.json")).unwrap()
    }

    #[test]
    fn a_fleet_row_says_whether_the_cluster_was_reached() -> Result<(), Box<dyn std::error::Error>>
    {
        let now: Timestamp = "2025-03-01T12:10:00Z".parse()?;
        let reached = sample();
        let mut away = sample();
        for spec in &mut away.specs {
            spec.ready = false;
            spec.status = "Unknown".into();
            spec.reason = Some("ClusterUnreachable".into());
        }
        let rows = [
            fleet_row("eu", &reached, now, false),
            fleet_row("us-west", &away, now, false),
        ];
        assert_eq!(rows[0][..5], ["eu", "yes", "v1.37.2", "3", "1"]);
        assert_eq!(rows[1][..5], ["us-west", "no", "v1.37.2", "0", "4"]);
        assert_eq!(rows[0][5], "success 10m ago");
        let text = columns(&["A", "BB", "C", "D", "E", "F", "G"], &rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("A        BB   C  "), "{text}");
        assert!(
            lines[2].starts_with("us-west  no   v1.37.2  0  4  "),
            "{text}"
        );
        Ok(())
    }

    #[test]
    fn figures_are_compact() {
        let s = sample();
        let f: Vec<String> = s
            .specs
            .iter()
            .map(|s| figures(&s.figures.value()))
            .collect();
        assert_eq!(f[0], "replicas 3/3 qps 2400");
        assert_eq!(
            f[1],
            "node-1 10.1.2.3 http://alice.dev.svc.cluster.local:8080"
        );
        assert_eq!(f[2], "nodes 2 endpoints node-1:2,node-2:1");
        assert_eq!(f[3], "");
        let stopped = serde_json::json!({"kind": "workspace", "state": "stopped", "port": 1, "url": "http://x"});
        assert_eq!(figures(&stopped), "stopped http://x");
        let unknown = serde_json::json!({"kind": "future", "x": 1});
        assert_eq!(figures(&unknown), r#"{"kind":"future","x":1}"#);
        assert_eq!(
            figures(&serde_json::json!({"kind": "elasticweb"})),
            "replicas ?/? qps ?"
        );
    }

    #[test]
    fn a_shared_trees_member_says_its_share_or_why_it_holds_nothing() {
        let mut status = sample();
        assert!(!table(&status, None, false).contains("shard:"));
        status.shard = Some(driftless::report::status::ShardStatus {
            member: "m0".into(),
            buckets: (0..21).collect(),
            members: vec!["m0".into(), "m1".into(), "m2".into()],
            problem: None,
        });
        let t = table(&status, None, false);
        assert!(
            t.contains("shard:            m0 holds 21 of 64 buckets; members m0, m1, m2\n"),
            "{t}"
        );
        if let Some(shard) = status.shard.as_mut() {
            shard.buckets.clear();
            shard.problem = Some("cannot renew this replica's Lease ns/l: forbidden".into());
        }
        let t = table(&status, None, false);
        assert!(
            t.contains(
                "shard:            m0 holds nothing: cannot renew this replica's Lease ns/l: forbidden\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn table_has_header_and_one_row_per_spec() {
        let t = table(&sample(), None, false);
        assert!(
            t.contains("source:           https://example.com/org/specs.git\n"),
            "{t}"
        );
        assert!(t.contains("revision applied: aaaaaaa\n"), "{t}");
        assert!(t.contains("kubernetes:       v1.37.2\n"), "{t}");
        assert!(t.contains("revision seen:    bbbbbbb\n"), "{t}");
        assert!(t.contains("last sync:        2025-03-01T12:00:00Z: success in 1.2s (3 applied, 10 unchanged, 1 pruned, 0 failed)\n"), "{t}");
        assert!(t.contains("leader:           yes"), "{t}");
        assert!(
            t.contains("  web/shop.toml:4:12: unknown field `replica`"),
            "{t}"
        );
        assert!(t.contains("specs:            3/4 ready\n"), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.starts_with("ID "))
            .unwrap_or(usize::MAX);
        assert!(head < lines.len(), "{t}");
        assert_eq!(lines.len() - head - 1, 4, "{t}");
        let columns = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            columns(lines[head])[..],
            ["ID", "READY", "STATUS", "FIGURES", "MESSAGE"]
        );
        let web = lines[head + 1];
        assert!(web.starts_with("elasticweb/shop/web "), "{web}");
        assert!(
            web.contains(" yes ") && web.contains("replicas 3/3 qps 2400"),
            "{web}"
        );
        let alice = lines[head + 2];
        assert!(
            alice.contains(" no ") && alice.contains(" Failed "),
            "{alice}"
        );
        assert!(
            alice.contains("CrashLoopBackOff: Pod dev/alice: back-off"),
            "{alice}"
        );
        // The long, multi-line message is cut to one terminal-friendly line.
        assert!(alice.ends_with('…'), "{alice}");
        let message_start = alice.find("CrashLoopBackOff").unwrap_or(0);
        assert_eq!(alice[message_start..].chars().count(), MESSAGE_WIDTH);
        // Columns line up.
        let status_col = lines[head].find("STATUS");
        assert!(
            lines[head + 1..]
                .iter()
                .all(|l| l.find("Current").or(l.find("Failed")) == status_col),
            "{t}"
        );
    }

    #[test]
    fn table_of_a_fresh_daemon() {
        let s = StatusFile {
            source: "dir:/specs".into(),
            errors: vec![SourceError {
                app: None,
                file: None,
                line: None,
                column: None,
                message: "cannot read /specs".into(),
            }],
            ..StatusFile::starting()
        };
        let t = table(&s, None, false);
        assert!(t.contains("revision applied: -\n"), "{t}");
        assert!(t.contains("last sync:        never\n"), "{t}");
        assert!(!t.contains("leader"), "{t}");
        assert!(t.contains("\n  cannot read /specs\n"), "{t}");
        assert!(t.ends_with("specs:            0/0 ready\n"), "{t}");
        assert!(!s.converged());
    }

    #[test]
    fn age_and_duration() -> Result<(), Box<dyn std::error::Error>> {
        let now: Timestamp = "2025-03-01T12:10:00Z".parse()?;
        assert_eq!(age("2025-03-01T12:09:30Z", now).as_deref(), Some("30s ago"));
        assert_eq!(age("2025-03-01T10:00:00Z", now).as_deref(), Some("2h ago"));
        assert_eq!(age("not a time", now), None);
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(125.0), "2m05s");
        assert!(table(&sample(), Some(now), false).contains("12:00:00Z (10m ago): success"));
        Ok(())
    }

    #[test]
    fn a_running_sync_is_said_in_the_header() {
        let mut s = sample();
        s.syncing = true;
        s.sync_progress = Some(driftless::report::status::SyncProgress {
            message: "revision 0123456789ab: applying 3 of 10 objects".into(),
            ..Default::default()
        });
        let t = table(&s, None, false);
        assert!(
            t.contains("syncing:          revision 0123456789ab: applying 3 of 10 objects\n"),
            "{t}"
        );
    }
}
