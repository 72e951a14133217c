//! The status file: what the daemon last saw, applied and observed, as JSON, for people
//! (`driftless status`) and for tools (`--output json`, or reading the file directly).
//!
//! Schema (version 1; every key is always present, absent values are `null`):
//!
//! ```text
//! version            1
//! source             "dir:/path", the git URL without credentials, or "oci://HOST/REPO"
//! revision_seen      newest revision read from the source, valid or not
//! revision_applied   last revision that was valid and synced
//! last_sync          null | { time (RFC 3339), result ("success"|"failed"|"refused"|
//!                    "superseded"|"stopped"), duration_seconds, message, applied,
//!                    unchanged, pruned, failed }
//! errors             [{ file, line, column, message }]: why revision_seen was not applied
//! specs              [{ id, kind, namespace, name, file, line, ready, status, reason,
//!                    message, figures, objects: [{ object, status, reason, message, action }] }]
//! leader             null without leader election, else whether this replica writes
//! syncing            whether a sync is running
//! sync_progress      null | { revision, started, phase ("starting"|"applying"|"waiting"|
//!                    "pruning"|"stopping"), applied, total, waiting_for, waiting_on,
//!                    waiting_seconds, pruning, message }: what the running sync does now
//! drift              "correct" (drift is taken back) or "report" (only reported)
//! ```
//!
//! Each spec also has `suspended` (null | { reason, since }) and `drifted` (the objects
//! someone else changed that were left so: in `report` mode, or while suspended).
//!
//! The file is only ever replaced by a rename, so a reader sees the old or the new content,
//! never a mix.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::apply::suspensions::Suspension;

/// The schema version this build writes and reads.
pub const VERSION: u32 = 1;

/// Widest a free-text column gets in the table, so a row stays on one terminal line
/// (or close to it) whatever the cluster says.
const MESSAGE_WIDTH: usize = 60;
const FIGURES_WIDTH: usize = 64;
/// Header values (the last sync's message) may use more of the line.
const HEADER_WIDTH: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("reading status file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid driftless status file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path}: status file version {found} is not supported (this driftless reads version {VERSION})"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("writing status file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serialising the status: {0}")]
    Serialize(serde_json::Error),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusFile {
    pub version: u32,
    /// The daemon's `--instance`.
    #[serde(default)]
    pub instance: String,
    /// The cluster's Kubernetes version (`v1.37.2`), as its apiserver says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    pub source: String,
    pub revision_seen: Option<String>,
    pub revision_applied: Option<String>,
    pub last_sync: Option<LastSync>,
    #[serde(default)]
    pub errors: Vec<SourceError>,
    #[serde(default)]
    pub specs: Vec<SpecStatus>,
    /// Chart releases, each with its specs (which are in `specs` too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<super::releases::ReleaseStatus>,
    pub leader: Option<bool>,
    #[serde(default)]
    pub syncing: bool,
    /// What the running sync is doing, while one runs.
    #[serde(default)]
    pub sync_progress: Option<SyncProgress>,
    #[serde(default = "correct")]
    pub drift: String,
    /// When the daemon wrote the file (RFC 3339): at least every 10 s while it runs, so
    /// an older file is one nobody keeps up any more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

/// A status file older than this is stale: its daemon has stopped or hangs.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// What a running sync is doing: its task keeps it up to date, and the daemon writes it
/// into the status (at least every 10 s while the sync runs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncProgress {
    /// The revision being synced.
    pub revision: Option<String>,
    /// When the sync started (RFC 3339).
    pub started: String,
    /// starting, applying, waiting, pruning or stopping.
    pub phase: String,
    /// Objects applied (or found unchanged) so far, of `total`.
    pub applied: u64,
    pub total: u64,
    /// What the sync waits on to be ready: a stage ("wave 1 to be ready") or a hook's run.
    pub waiting_for: Option<String>,
    /// The object not ready yet, with kstatus's reason and message.
    pub waiting_on: Option<String>,
    /// How long the current wait has lasted.
    #[serde(default)]
    pub waiting_seconds: u64,
    /// Objects being pruned.
    #[serde(default)]
    pub pruning: u64,
    /// Why the sync is stopping (a newer revision, shutdown, its deadline), while it is.
    #[serde(default)]
    pub stopping: Option<String>,
    /// All of the above in one line, for people.
    #[serde(default)]
    pub message: String,
}

impl SyncProgress {
    /// One line for people: "applying 3 of 10 objects", "waiting for hook Job a/b to
    /// succeed (12s): Job a/b [Reason]: message", "pruning 2 objects".
    pub fn describe(&self) -> String {
        let revision = self
            .revision
            .as_deref()
            .map(|r| format!("revision {}: ", short_revision(r)))
            .unwrap_or_default();
        let doing = match self.phase.as_str() {
            _ if self.stopping.is_some() => {
                format!(
                    "stopping ({})",
                    self.stopping.as_deref().unwrap_or_default()
                )
            }
            "applying" => format!("applying {} of {} objects", self.applied, self.total),
            "waiting" => {
                let what = self.waiting_for.as_deref().unwrap_or("objects to be ready");
                let mut line = format!("waiting for {what}");
                if self.waiting_seconds > 0 {
                    line.push_str(&format!(" ({}s)", self.waiting_seconds));
                }
                if let Some(on) = &self.waiting_on {
                    line.push_str(&format!(": {on}"));
                }
                line
            }
            "pruning" => format!(
                "pruning {} object{}",
                self.pruning,
                if self.pruning == 1 { "" } else { "s" }
            ),
            _ => "reading the inventory and the live objects".to_string(),
        };
        format!("{revision}{doing}")
    }
}

/// A git commit's first 12 characters, an OCI digest's (`TAG@sha256:` and 12); anything
/// else as it is.
fn short_revision(r: &str) -> &str {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    if r.len() == 40 && hex(r) {
        return &r[..12];
    }
    match r.find("sha256:") {
        Some(at) if r.len() == at + 7 + 64 && hex(&r[at + 7..]) => &r[..at + 7 + 12],
        _ => r,
    }
}

fn correct() -> String {
    "correct".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastSync {
    /// RFC 3339.
    pub time: String,
    /// "success", "failed" or "refused"; "superseded" when a newer revision stopped it,
    /// "stopped" when shutdown or lost leadership did.
    pub result: String,
    pub duration_seconds: f64,
    pub message: Option<String>,
    pub applied: u64,
    pub unchanged: u64,
    pub pruned: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceError {
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecStatus {
    pub id: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub file: String,
    pub line: usize,
    pub ready: bool,
    pub status: String,
    pub reason: Option<String>,
    pub message: String,
    /// Tagged by "kind", as `health::Figures` serialises.
    pub figures: Value,
    #[serde(default)]
    pub objects: Vec<ObjectState>,
    #[serde(default)]
    pub suspended: Option<Suspension>,
    #[serde(default)]
    pub drifted: Vec<String>,
    /// What the apiserver warned of at the last write of its objects (`Warning` headers),
    /// each as `Kind[.group] namespace/name: text`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The revision its state reflects: its change there applied and observed. Not the
    /// newest revision while that change is pending (and then not ready).
    #[serde(default)]
    pub revision: Option<String>,
    /// The tool that rendered its file (a kustomization, a Jsonnet file), its version
    /// and the command; absent for a file read as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered_by: Option<crate::spec::RenderedBy>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectState {
    pub object: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: String,
    /// The last change a sync made (created, updated, replaced; kept while later syncs
    /// change nothing), unchanged when none was made since the start, or the standing
    /// conflict, failed or drifted.
    pub action: Option<String>,
    /// Why that action failed (or conflicted), in the words the CLI uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StatusFile {
    /// What there is to say before the daemon has read its source.
    pub fn starting() -> StatusFile {
        StatusFile {
            releases: Vec::new(),
            written: None,
            instance: String::new(),
            kubernetes: None,
            version: VERSION,
            source: String::new(),
            revision_seen: None,
            revision_applied: None,
            last_sync: None,
            errors: Vec::new(),
            specs: Vec::new(),
            leader: None,
            syncing: false,
            sync_progress: None,
            drift: correct(),
        }
    }

    pub fn read(path: &Path) -> Result<StatusFile, StatusError> {
        let text = std::fs::read_to_string(path).map_err(|source| StatusError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        // The version is checked before the full parse so a newer schema is reported as
        // such rather than as whichever field happens not to match.
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let parse_error = |source| StatusError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let Versioned { version } = serde_json::from_str(&text).map_err(parse_error)?;
        if version != VERSION {
            return Err(StatusError::Version {
                path: path.to_path_buf(),
                found: version,
            });
        }
        serde_json::from_str(&text).map_err(parse_error)
    }

    /// Everything is as it should be: the newest revision is valid and synced and every
    /// spec is ready.
    pub fn converged(&self) -> bool {
        self.errors.is_empty()
            && self
                .last_sync
                .as_ref()
                .is_some_and(|s| s.result == "success")
            && self.specs.iter().all(|s| s.ready)
    }

    /// Why the cluster is not (known to be) as the newest revision says, one line each;
    /// empty when it is: the file is fresh, the newest revision valid, applied and its
    /// last sync a success, every spec ready, and nothing held back.
    pub fn not_converged(&self, now: Timestamp) -> Vec<String> {
        let mut why = Vec::new();
        match self.written.as_deref().map(|w| w.parse::<Timestamp>()) {
            Some(Ok(written)) => {
                let age = now.duration_since(written);
                let age = std::time::Duration::try_from(age).unwrap_or_default();
                if age > STALE_AFTER {
                    why.push(format!(
                        "stale: the file was written {} ago (the daemon rewrites it every 10s): is the daemon running?",
                        humantime::format_duration(std::time::Duration::from_secs(age.as_secs()))
                    ));
                }
            }
            _ => why.push(
                "stale: the file does not say when it was written (an older driftless, or not a daemon's)"
                    .to_string(),
            ),
        }
        // While a sync runs, that is the news: what follows may be its unfinished work.
        if self.syncing {
            match &self.sync_progress {
                Some(p) => why.push(format!(
                    "sync in progress: {}",
                    one_line(&p.message, MESSAGE_WIDTH + 40)
                )),
                None => why.push("sync in progress".to_string()),
            }
        }
        if !self.errors.is_empty() {
            why.push(format!(
                "{} error{}: {}",
                self.errors.len(),
                if self.errors.len() == 1 { "" } else { "s" },
                one_line(&self.errors[0].message, MESSAGE_WIDTH)
            ));
        }
        if self.revision_seen.is_some() && self.revision_seen != self.revision_applied {
            why.push(format!(
                "revision {} is not applied (applied: {})",
                self.revision_seen.as_deref().unwrap_or("-"),
                self.revision_applied.as_deref().unwrap_or("none")
            ));
        }
        match &self.last_sync {
            None => why.push("no sync yet".to_string()),
            Some(s) if s.result == "refused" => why.push(format!(
                "prune refused: {}",
                one_line(s.message.as_deref().unwrap_or("-"), MESSAGE_WIDTH)
            )),
            Some(s) if s.result != "success" => why.push(format!(
                "last sync {}: {}",
                s.result,
                one_line(s.message.as_deref().unwrap_or("-"), MESSAGE_WIDTH)
            )),
            Some(_) => {}
        }
        let held: Vec<&str> = self
            .specs
            .iter()
            .filter(|s| s.suspended.is_some() && !s.ready)
            .map(|s| s.id.as_str())
            .collect();
        if !held.is_empty() {
            why.push(format!(
                "suspended with a change held back: {}",
                held.join(", ")
            ));
        }
        let not_ready: Vec<&str> = self
            .specs
            .iter()
            .filter(|s| !s.ready && s.suspended.is_none())
            .map(|s| s.id.as_str())
            .collect();
        if !not_ready.is_empty() {
            let shown: Vec<&str> = not_ready.iter().take(5).copied().collect();
            let more = match not_ready.len() {
                n if n > 5 => format!(", and {} more", n - 5),
                _ => String::new(),
            };
            why.push(format!(
                "{} of {} specs not ready: {}{more}",
                not_ready.len(),
                self.specs.len(),
                shown.join(", ")
            ));
        }
        why
    }

    /// The status for a person: a header block, then one row per spec.
    pub fn table(&self) -> String {
        self.render_table(Some(Timestamp::now()), false)
    }

    /// The table with nothing cut: whole figures and messages (`status -o wide`).
    pub fn wide_table(&self) -> String {
        self.render_table(Some(Timestamp::now()), true)
    }

    /// `now` only adds the age of the last sync; tests leave it out for stable output.
    fn render_table(&self, now: Option<Timestamp>, wide: bool) -> String {
        let cut = |text: &str, width: usize| match wide {
            true => one_line(text, usize::MAX),
            false => one_line(text, width),
        };
        let mut out = String::new();
        let dash = || "-".to_string();
        if !self.instance.is_empty() {
            header(&mut out, "instance", &self.instance);
        }
        if let Some(v) = &self.kubernetes {
            header(&mut out, "kubernetes", v);
        }
        header(&mut out, "source", &self.source);
        header(
            &mut out,
            "revision applied",
            &self.revision_applied.clone().unwrap_or_else(dash),
        );
        header(
            &mut out,
            "revision seen",
            &self.revision_seen.clone().unwrap_or_else(dash),
        );
        match &self.last_sync {
            None => header(&mut out, "last sync", "never"),
            Some(sync) => {
                let age = now
                    .and_then(|now| age(&sync.time, now))
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default();
                header(
                    &mut out,
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
                    header(&mut out, "", &cut(message, HEADER_WIDTH));
                }
            }
        }
        if let Some(leader) = self.leader {
            let text = if leader {
                "yes (this replica syncs)"
            } else {
                "no (standby)"
            };
            header(&mut out, "leader", text);
        }
        if self.syncing {
            let doing = self
                .sync_progress
                .as_ref()
                .map_or_else(|| "in progress".to_string(), |p| p.message.clone());
            header(&mut out, "syncing", &cut(&doing, HEADER_WIDTH));
        }
        if self.drift != "correct" {
            header(
                &mut out,
                "drift",
                &format!("{} (not corrected)", self.drift),
            );
        }
        if !self.errors.is_empty() {
            header(&mut out, "errors", &self.errors.len().to_string());
            for e in &self.errors {
                // Multi-line messages (a parser's snippet) stay readable under their location.
                let message = e.message.trim_end().replace('\n', "\n    ");
                let _ = writeln!(out, "  {}{message}", location(e));
            }
        }
        if !self.releases.is_empty() {
            let ready = self.releases.iter().filter(|r| r.ready).count();
            header(
                &mut out,
                "releases",
                &format!("{ready}/{} ready", self.releases.len()),
            );
            for r in &self.releases {
                let _ = writeln!(out, "  {}", r.describe());
            }
        }
        let ready = self.specs.iter().filter(|s| s.ready).count();
        header(
            &mut out,
            "specs",
            &format!("{ready}/{} ready", self.specs.len()),
        );
        if self.specs.is_empty() {
            return out;
        }
        out.push('\n');

        let rows: Vec<[String; 5]> = self
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
                    cut(&figures(&s.figures), FIGURES_WIDTH),
                    cut(&message, MESSAGE_WIDTH),
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
        // Below the table, whole: a warning names what to change, and cut it would not.
        let warned: Vec<(&str, &String)> = self
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

/// Newlines and tabs would break the table's rows; long texts its columns.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
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

/// Atomic replace: write a temp file in the same directory, fsync it, rename it over
/// `path`, fsync the directory. A reader never sees a partial file, and a crash leaves the
/// old or the new file. Returns `Ok(false)` without writing when the content on disk is
/// already this, so an unchanged status causes no churn for watchers.
pub fn write_atomic(path: &Path, status: &StatusFile) -> Result<bool, StatusError> {
    let mut content = serde_json::to_vec_pretty(status).map_err(StatusError::Serialize)?;
    content.push(b'\n');
    if std::fs::read(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    let write_error = |source| StatusError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "status".into(), |n| n.to_string_lossy().into_owned());
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // The status is meant for other readers (a sidecar, `driftless status` as another
    // user); it holds no secrets. tempfile's default would be 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    // Dropping the temp file on any error below removes it: no leftovers.
    let mut tmp = builder.tempfile_in(dir).map_err(write_error)?;
    tmp.write_all(&content).map_err(write_error)?;
    tmp.as_file().sync_all().map_err(write_error)?;
    tmp.persist(path).map_err(|e| write_error(e.error))?;
    // The rename is durable only once the directory entry is on disk.
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_error)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec that is ready and lists no objects; the sample's other specs start from one.
    fn ready_spec(
        [kind, namespace, name]: [&str; 3],
        file: &str,
        line: usize,
        figures: Value,
    ) -> SpecStatus {
        SpecStatus {
            id: format!("{kind}/{namespace}/{name}"),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            file: file.into(),
            line,
            ready: true,
            status: "Current".into(),
            reason: None,
            message: "ready".into(),
            figures,
            objects: vec![],
            suspended: None,
            drifted: vec![],
            warnings: vec![],
            revision: None,
            rendered_by: None,
        }
    }

    fn sample() -> StatusFile {
        StatusFile {
            releases: Vec::new(),
            written: Some("2025-03-01T12:00:05Z".into()),
            instance: "default".into(),
            kubernetes: Some("v1.37.2".into()),
            version: VERSION,
            source: "https://example.com/org/specs.git".into(),
            revision_seen: Some("bbbbbbb".into()),
            revision_applied: Some("aaaaaaa".into()),
            last_sync: Some(LastSync {
                time: "2025-03-01T12:00:00Z".into(),
                result: "success".into(),
                duration_seconds: 1.25,
                message: None,
                applied: 3,
                unchanged: 10,
                pruned: 1,
                failed: 0,
            }),
            errors: vec![SourceError {
                file: Some("web/shop.toml".into()),
                line: Some(4),
                column: Some(12),
                message: "unknown field `replica`, expected `replicas`".into(),
            }],
            specs: vec![
                SpecStatus {
                    objects: vec![ObjectState {
                        object: "Deployment shop/web".into(),
                        status: "Current".into(),
                        reason: None,
                        message: "Deployment is available. Replicas: 3".into(),
                        action: Some("unchanged".into()),
                        error: None,
                    }],
                    ..ready_spec(
                        ["elasticweb", "shop", "web"],
                        "web/shop.toml",
                        1,
                        serde_json::json!({
                            "kind": "elasticweb", "desired_replicas": 3,
                            "available_replicas": 3, "real_qps": 2400
                        }),
                    )
                },
                SpecStatus {
                    ready: false,
                    status: "Failed".into(),
                    reason: Some("CrashLoopBackOff".into()),
                    message: "Pod dev/alice: back-off 5m0s restarting failed container\nws in pod alice which keeps failing over and over again".into(),
                    ..ready_spec(
                        ["workspace", "dev", "alice"],
                        "dev.toml",
                        7,
                        serde_json::json!({
                            "kind": "workspace", "state": "running", "phase": "Running",
                            "node": "node-1", "pod_ip": "10.1.2.3", "port": 8080,
                            "url": "http://alice.dev.svc.cluster.local:8080"
                        }),
                    )
                },
                ready_spec(
                    ["localservice", "infra", "dns"],
                    "infra.toml",
                    1,
                    serde_json::json!({
                        "kind": "localservice", "nodes": ["node-1", "node-2"],
                        "ready_endpoints": {"node-1": 2, "node-2": 1}
                    }),
                ),
                ready_spec(
                    ["manifest", "infra", "extra"],
                    "infra.toml",
                    20,
                    serde_json::json!({"kind": "manifest"}),
                ),
            ],
            leader: Some(true),
            syncing: false,
            sync_progress: None,
            drift: "correct".into(),
        }
    }

    #[test]
    fn json_round_trip() -> Result<(), Box<dyn std::error::Error>> {
        let s = sample();
        let text = serde_json::to_string_pretty(&s)?;
        let back: StatusFile = serde_json::from_str(&text)?;
        assert_eq!(back, s);
        // snake_case keys, nulls kept so the schema is visible in every file.
        let v: Value = serde_json::from_str(&text)?;
        assert!(v["last_sync"]["duration_seconds"].is_number());
        assert!(v["specs"][0]["reason"].is_null());
        assert!(v["specs"][0]["objects"][0]["action"].is_string());
        Ok(())
    }

    #[test]
    fn figures_are_compact() {
        let s = sample();
        let f: Vec<String> = s.specs.iter().map(|s| figures(&s.figures)).collect();
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
    fn table_has_header_and_one_row_per_spec() {
        let t = sample().render_table(None, false);
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
                file: None,
                line: None,
                column: None,
                message: "cannot read /specs".into(),
            }],
            ..StatusFile::starting()
        };
        let t = s.render_table(None, false);
        assert!(t.contains("revision applied: -\n"), "{t}");
        assert!(t.contains("last sync:        never\n"), "{t}");
        assert!(!t.contains("leader"), "{t}");
        assert!(t.contains("\n  cannot read /specs\n"), "{t}");
        assert!(t.ends_with("specs:            0/0 ready\n"), "{t}");
        assert!(!s.converged());
    }

    #[test]
    fn converged_needs_success_no_errors_and_all_ready() {
        let mut s = sample();
        assert!(!s.converged());
        s.errors.clear();
        assert!(!s.converged());
        for spec in &mut s.specs {
            spec.ready = true;
        }
        assert!(s.converged());
        if let Some(sync) = &mut s.last_sync {
            sync.result = "failed".into();
        }
        assert!(!s.converged());
    }

    #[test]
    fn not_converged_says_why_each_way_it_is_not() {
        let now: Timestamp = "2025-03-01T12:00:20Z".parse().unwrap();
        let mut s = sample();
        s.errors.clear();
        s.revision_applied = s.revision_seen.clone();
        for spec in &mut s.specs {
            spec.ready = true;
        }
        assert_eq!(s.not_converged(now), Vec::<String>::new());
        let late: Timestamp = "2025-03-01T12:01:05Z".parse().unwrap();
        assert_eq!(
            s.not_converged(late),
            [
                "stale: the file was written 1m ago (the daemon rewrites it every 10s): is the daemon running?"
            ]
        );
        s.specs[0].ready = false;
        s.specs[0].suspended = Some(Suspension {
            reason: "incident".into(),
            since: "2025-03-01T11:00:00Z".into(),
        });
        s.specs[1].ready = false;
        if let Some(sync) = &mut s.last_sync {
            sync.result = "refused".into();
            sync.message = Some("the revision would prune 4 of 6".into());
        }
        s.revision_applied = Some("aaaaaaa".into());
        let why = s.not_converged(now);
        assert_eq!(why[0], "revision bbbbbbb is not applied (applied: aaaaaaa)");
        assert_eq!(why[1], "prune refused: the revision would prune 4 of 6");
        assert_eq!(
            why[2],
            format!("suspended with a change held back: {}", s.specs[0].id)
        );
        assert!(
            why[3].starts_with(&format!("1 of 4 specs not ready: {}", s.specs[1].id)),
            "{why:?}"
        );
        s.written = None;
        assert!(s.not_converged(now)[0].starts_with("stale: the file does not say"));
    }

    #[test]
    fn a_running_sync_is_said_first_with_what_it_does() {
        let now: Timestamp = "2025-03-01T12:00:20Z".parse().unwrap();
        let mut s = sample();
        s.errors.clear();
        s.revision_applied = s.revision_seen.clone();
        for spec in &mut s.specs {
            spec.ready = true;
        }
        s.syncing = true;
        assert_eq!(s.not_converged(now), ["sync in progress"]);
        let mut p = SyncProgress {
            revision: Some("0123456789abcdef0123456789abcdef01234567".into()),
            phase: "waiting".into(),
            waiting_for: Some("hook Deployment.apps n/pre to succeed".into()),
            waiting_on: Some("Deployment.apps n/pre [Progressing]: 0 of 1 ready".into()),
            waiting_seconds: 12,
            ..SyncProgress::default()
        };
        assert_eq!(
            p.describe(),
            "revision 0123456789ab: waiting for hook Deployment.apps n/pre to succeed (12s): \
             Deployment.apps n/pre [Progressing]: 0 of 1 ready"
        );
        p.message = p.describe();
        s.sync_progress = Some(p.clone());
        assert!(s.not_converged(now)[0].starts_with("sync in progress: revision 0123456789ab"));
        assert!(s.table().contains("syncing"), "{}", s.table());
        p.phase = "applying".into();
        p.applied = 3;
        p.total = 10;
        assert_eq!(
            p.describe(),
            "revision 0123456789ab: applying 3 of 10 objects"
        );
        p.stopping = Some("superseded by revision r2".into());
        assert_eq!(
            p.describe(),
            "revision 0123456789ab: stopping (superseded by revision r2)"
        );
    }

    #[test]
    fn age_and_duration() -> Result<(), Box<dyn std::error::Error>> {
        let now: Timestamp = "2025-03-01T12:10:00Z".parse()?;
        assert_eq!(age("2025-03-01T12:09:30Z", now).as_deref(), Some("30s ago"));
        assert_eq!(age("2025-03-01T10:00:00Z", now).as_deref(), Some("2h ago"));
        assert_eq!(age("not a time", now), None);
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(125.0), "2m05s");
        assert!(
            sample()
                .render_table(Some(now), false)
                .contains("12:00:00Z (10m ago): success")
        );
        Ok(())
    }

    #[test]
    fn write_replaces_skips_identical_and_leaves_no_temp_files()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("status.json");
        let mut s = sample();
        assert!(write_atomic(&path, &s)?);
        assert_eq!(StatusFile::read(&path)?, s);
        assert!(
            !write_atomic(&path, &s)?,
            "identical content is not rewritten"
        );
        s.revision_applied = s.revision_seen.clone();
        assert!(write_atomic(&path, &s)?);
        assert_eq!(StatusFile::read(&path)?, s);
        let names: Vec<_> = std::fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        assert_eq!(names, ["status.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path)?.permissions().mode();
            assert_eq!(mode & 0o044, 0o044, "readable by others: {mode:o}");
        }
        Ok(())
    }

    #[test]
    fn write_into_a_missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().ok();
        let path = dir
            .as_ref()
            .map(|d| d.path().join("nope/status.json"))
            .unwrap_or_default();
        let err = write_atomic(&path, &sample()).err();
        assert!(matches!(err, Some(StatusError::Write { .. })), "{err:?}");
    }

    #[test]
    fn read_errors_name_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing.json");
        let e = StatusFile::read(&missing).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("missing.json")),
            "{e:?}"
        );

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"version\": 1, \"source\": ")?;
        let e = StatusFile::read(&bad).err();
        assert!(matches!(e, Some(StatusError::Parse { .. })), "{e:?}");

        let newer = dir.path().join("newer.json");
        std::fs::write(&newer, r#"{"version": 2, "whatever": true}"#)?;
        let e = StatusFile::read(&newer).err();
        assert!(
            matches!(e, Some(StatusError::Version { found: 2, .. })),
            "{e:?}"
        );
        Ok(())
    }
}
