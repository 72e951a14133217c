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
//! shard              only with `run --shard`: { member, buckets (held, of 64), members
//!                    (live, sorted), problem (why it holds nothing, while it cannot renew) };
//!                    `specs` are then the whole tree's, each with its `member`: this
//!                    replica's own, the others' as they last published them, and any
//!                    no member has reported yet (InProgress, reason `Unreported`)
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
//!
//! This module is the model; `file` reads and writes it, `verdict` judges it (converged or
//! why not), `releases` groups its specs by chart release. The terminal table is the
//! CLI's (`driftless status`, src/cli/status.rs).

pub mod apps;
mod file;
pub mod part;
pub mod releases;
mod verdict;

use serde::{Deserialize, Serialize};

use crate::apply::suspensions::Suspension;
use crate::object::Packed;

pub(crate) use file::replace_indented;
pub use file::{FleetIndex, replace};
pub use verdict::ClusterSummary;

/// The schema version this build writes and reads.
pub const VERSION: u32 = 1;

/// Widest a free-text column gets in the table, so a row stays on one terminal line
/// (or close to it) whatever the cluster says; the verdict's lines are cut as wide.
pub const MESSAGE_WIDTH: usize = 60;

/// `S` is what holds the specs: a `Vec` as read, or (as the daemon writes it) specs made
/// one at a time while they are written, so a 10,000-spec status is never held whole
/// beside its text (`report::snapshot::Specs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusFile<S = Vec<SpecStatus>> {
    pub version: u32,
    /// The daemon's `--instance`.
    #[serde(default)]
    pub instance: String,
    /// The cluster's Kubernetes version (`v1.37.2`), as its apiserver says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    /// The cluster served, by its name in the operator's fleet (`--clusters`); absent
    /// without a fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub source: String,
    pub revision_seen: Option<String>,
    pub revision_applied: Option<String>,
    pub last_sync: Option<LastSync>,
    #[serde(default)]
    pub errors: Vec<SourceError>,
    #[serde(default)]
    pub specs: S,
    /// Chart releases, each with its specs (which are in `specs` too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<releases::ReleaseStatus>,
    /// Flux's and Argo CD's apps, each with its specs (which are in `specs` too), trouble
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<apps::AppStatus>,
    pub leader: Option<bool>,
    /// This replica's share when replicas share the tree (`run --shard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardStatus>,
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

/// What one of the replicas sharing a tree holds of it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShardStatus {
    pub member: String,
    /// The buckets it holds: its specs are those whose id hashes into one of them.
    pub buckets: Vec<u16>,
    /// The live members, itself included.
    pub members: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceError {
    /// The app this error holds (`flux/NS/NAME`, `argo/NAME`): that app is neither
    /// applied nor pruned, the rest of the revision is (DESIGN 1.12). None: an error of
    /// the tree, and nothing of the revision is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

/// What a group of specs (a chart release, an app) says as one: ready when all its specs
/// are, Failed when any is, else InProgress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub ready: bool,
    /// Ready, Failed or InProgress: the worst of its specs'.
    pub status: String,
    /// Its specs' ids, in the tree's order.
    pub specs: Vec<String>,
    pub ready_specs: usize,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            ready: true,
            status: "Ready".into(),
            specs: Vec::new(),
            ready_specs: 0,
        }
    }
}

impl Tally {
    pub fn add(&mut self, s: &SpecStatus) {
        self.specs.push(s.id.clone());
        if s.ready {
            self.ready_specs += 1;
        } else {
            self.ready = false;
            if s.status == "Failed" {
                self.status = "Failed".into();
            } else if self.status != "Failed" {
                self.status = "InProgress".into();
            }
        }
    }

    /// `4/5 specs ready, InProgress`.
    pub fn said(&self) -> String {
        let state = match self.status.as_str() {
            "Ready" => String::new(),
            other => format!(", {other}"),
        };
        format!(
            "{}/{} specs ready{state}",
            self.ready_specs,
            self.specs.len()
        )
    }
}

/// A spec's figures as the status holds them (`null` if they cannot be written as JSON).
pub fn figures_of(figures: &impl Serialize) -> Packed {
    serde_json::to_value(figures)
        .map(|v| Packed::new(&v))
        .unwrap_or_default()
}

/// Every field has a default, so a builder of one says only what it knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Tagged by "kind", as `health::Figures` serialises; its keys sorted, as a `Value`
    /// writes them (`figures_of`). Packed: as a `Value`, each spec's figures took a map
    /// of about 700 bytes, 6.6 MiB of each status a 10,000-spec daemon built (three
    /// times per sync, and every 10 s).
    pub figures: Packed,
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
    /// The Flux or Argo CD app it belongs to (`flux/NS/NAME`, `argo/NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The replica that holds it, while replicas share the tree (`run --shard`): this
    /// one, or the one whose published part it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

impl<S> StatusFile<S> {
    /// The same status with `specs` for its specs.
    pub fn with_specs<T>(self, specs: T) -> StatusFile<T> {
        StatusFile {
            version: self.version,
            instance: self.instance,
            kubernetes: self.kubernetes,
            cluster: self.cluster,
            source: self.source,
            revision_seen: self.revision_seen,
            revision_applied: self.revision_applied,
            last_sync: self.last_sync,
            errors: self.errors,
            specs,
            releases: self.releases,
            apps: self.apps,
            leader: self.leader,
            shard: self.shard,
            syncing: self.syncing,
            sync_progress: self.sync_progress,
            drift: self.drift,
            written: self.written,
        }
    }
}

impl StatusFile {
    /// What there is to say before the daemon has read its source.
    pub fn starting() -> StatusFile {
        StatusFile {
            releases: Vec::new(),
            apps: Vec::new(),
            written: None,
            instance: String::new(),
            kubernetes: None,
            cluster: None,
            version: VERSION,
            source: String::new(),
            revision_seen: None,
            revision_applied: None,
            last_sync: None,
            errors: Vec::new(),
            specs: Vec::new(),
            leader: None,
            shard: None,
            syncing: false,
            sync_progress: None,
            drift: correct(),
        }
    }
}

/// Newlines and tabs would break the table's rows; long texts its columns.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The sample status the tests of the model and of its printers read
    /// (src/cli/status.rs reads the same file).
    pub(super) fn sample() -> StatusFile {
        serde_json::from_str(include_str!("sample.json")).unwrap()
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
    fn figures_are_written_and_read_as_the_json_value_they_hold() -> serde_json::Result<()> {
        let figures = crate::health::Figures::ElasticWeb {
            desired_replicas: 3,
            available_replicas: 2,
            real_qps: 200,
        };
        let held = figures_of(&figures);
        // As a `Value` wrote it before: the same keys, sorted.
        assert_eq!(
            serde_json::to_string(&held)?,
            serde_json::to_string(&serde_json::to_value(&figures)?)?
        );
        assert_eq!(held.value()["kind"], "elasticweb");
        let back: Packed = serde_json::from_str(&serde_json::to_string(&held)?)?;
        assert_eq!(back, held);
        // A kind this version does not know is read as the same value (its keys sorted).
        let unknown: Packed = serde_json::from_str(r#"{"x": 1, "kind": "future"}"#)?;
        assert_eq!(
            serde_json::to_string(&unknown)?,
            r#"{"kind":"future","x":1}"#
        );
        assert_eq!(Packed::default().value(), Value::Null);
        Ok(())
    }
}
