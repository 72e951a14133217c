//! The drift ledger: every drift a sync met, field by field (`apply::drift`), with who
//! wrote it, when it began and when it was corrected. Kept outside etcd, in a JSON file
//! beside the status file (the state directory), bounded to the newest `MAX` drifts and
//! `BUDGET` bytes (a drifted value is kept up to `VALUE_SHOWN`), read back at start so it
//! survives restarts; served at `/api/v1/drift`.
//!
//! Beside the drifts, the same file keeps the history of syncs (revision, start, end,
//! result, counts and the objects each changed), with the same bound, served at
//! `/api/v1/syncs`, and of the controls the listener audited (who, from where, what, the
//! answer), served at `/api/v1/controls`.
//!
//! The file is replaced by a rename, as the status file is: a reader (or a crash) sees
//! the old or the new ledger, never half of one.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::apply::drift::{DriftSeen, FieldDrift};
use crate::object::ObjKey;
use crate::report::audit::AuditRecord;
use crate::report::notify::{DriftNotice, Event, Notice};
use crate::spec::SpecId;

/// Drifts (and syncs) kept: the oldest go first.
pub const MAX: usize = 1000;

/// Bytes of drifts (and of syncs) kept, as JSON: past it the oldest go first too, so the
/// ledger's memory and file do not grow with what it has seen however big the objects
/// (the newest record is always kept).
pub(crate) const BUDGET: usize = 4 * 1024 * 1024;

/// A drifted value longer than this as JSON is kept as its beginning and its length:
/// one key of a large ConfigMap, changed by hand, was otherwise kept whole twice (as
/// applied and as found) in each of its records.
pub(crate) const VALUE_SHOWN: usize = 1024;

/// A sync's message is kept up to this many bytes.
pub(crate) const MESSAGE_SHOWN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriftRecord {
    /// `Kind[.group] namespace/name`, as the status names objects.
    pub object: String,
    pub spec: String,
    pub fields: Vec<FieldDrift>,
    /// The field managers that wrote the drifted fields (`kubectl-set`, `kubectl-edit`…).
    pub managers: Vec<String>,
    /// When it began: when its writer wrote it (managedFields' time), else when seen.
    pub began: String,
    /// When driftless saw it.
    pub seen: String,
    /// When it was taken back (by driftless, or, reporting only, by anyone); null while
    /// it stands.
    pub corrected: Option<String>,
    /// "corrected" (taken back) or "reported" (left, `--drift report` mode).
    pub mode: String,
}

/// One sync, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SyncRecord {
    pub revision: Option<String>,
    /// RFC 3339.
    pub started: String,
    pub ended: String,
    /// As the status's `last_sync.result`: success, failed, refused, superseded, stopped.
    pub result: String,
    pub message: Option<String>,
    pub applied: u64,
    pub unchanged: u64,
    pub pruned: u64,
    pub failed: u64,
    /// What it changed: `Kind[.group] namespace/name: created|updated|replaced`, the
    /// first `CHANGED_SHOWN` of them.
    pub changed: Vec<String>,
}

/// Changed objects listed per sync; the counts say how many there were.
pub(crate) const CHANGED_SHOWN: usize = 50;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    drifts: VecDeque<DriftRecord>,
    #[serde(default)]
    syncs: VecDeque<SyncRecord>,
    #[serde(default)]
    controls: VecDeque<AuditRecord>,
}

pub(crate) struct Ledger {
    path: Option<PathBuf>,
    file: File,
    /// Each record's size as JSON, beside `file.drifts` and `file.syncs`.
    drift_sizes: VecDeque<usize>,
    sync_sizes: VecDeque<usize>,
    control_sizes: VecDeque<usize>,
    published: watch::Sender<Arc<String>>,
}

/// `v` as kept: a string or a JSON text longer than `VALUE_SHOWN` becomes its beginning
/// and how long it was.
fn clipped(v: &Value) -> Value {
    let text = match v {
        Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
        other => std::borrow::Cow::Owned(other.to_string()),
    };
    if text.len() <= VALUE_SHOWN {
        return v.clone();
    }
    let cut = char_floor(&text, VALUE_SHOWN / 2);
    Value::String(format!("{}… ({} bytes)", &text[..cut], text.len()))
}

/// The largest char boundary of `s` at or before `at`.
fn char_floor(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

fn clipped_fields(fields: &[FieldDrift]) -> Vec<FieldDrift> {
    fields
        .iter()
        .map(|f| FieldDrift {
            pointer: f.pointer.clone(),
            applied: clipped(&f.applied),
            found: clipped(&f.found),
        })
        .collect()
}

fn size_of(v: &impl Serialize) -> usize {
    serde_json::to_vec(v).map_or(0, |t| t.len())
}

/// Drops the oldest records past `MAX` or past `BUDGET` bytes, keeping the newest.
fn trim<T>(records: &mut VecDeque<T>, sizes: &mut VecDeque<usize>) {
    let mut total: usize = sizes.iter().sum();
    while records.len() > MAX || (total > BUDGET && records.len() > 1) {
        records.pop_front();
        total -= sizes.pop_front().unwrap_or(0);
    }
}

/// The ledger's file for a status file: `status.json` → `status.drift.json`.
pub(crate) fn path_beside(status_file: &Path) -> PathBuf {
    let stem = status_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "status".into());
    status_file.with_file_name(format!("{stem}.drift.json"))
}

/// The history's record of the sync that ended as `last`.
pub(crate) fn history_of(
    last: &crate::report::status::LastSync,
    revision: Option<String>,
    changed: Vec<String>,
) -> SyncRecord {
    let ended: Option<Timestamp> = last.time.parse().ok();
    let took = k8s_openapi::jiff::SignedDuration::from_secs_f64(last.duration_seconds.max(0.0));
    let started = ended
        .and_then(|e| e.checked_sub(took).ok())
        .map_or_else(|| last.time.clone(), |t| t.to_string());
    SyncRecord {
        revision,
        started,
        ended: last.time.clone(),
        result: last.result.clone(),
        message: last.message.clone(),
        applied: last.applied,
        unchanged: last.unchanged,
        pruned: last.pruned,
        failed: last.failed,
        changed,
    }
}

/// A sync's message as kept: its first `MESSAGE_SHOWN` bytes.
fn clip_message(sync: &mut SyncRecord) {
    if let Some(m) = sync.message.as_mut() {
        clip_text(m);
    }
}

/// A text as kept (a sync's message, a control's reason): its first `MESSAGE_SHOWN`
/// bytes and how long it was.
fn clip_text(m: &mut String) {
    if m.len() > MESSAGE_SHOWN {
        let total = m.len();
        m.truncate(char_floor(m, MESSAGE_SHOWN));
        m.push_str(&format!("… ({total} bytes)"));
    }
}

/// The notification of a drift the ledger newly recorded.
pub(crate) fn notice_of(record: &DriftRecord, revision: Option<String>) -> Notice {
    let by = match record.managers.as_slice() {
        [] => String::new(),
        managers => format!(" by {}", managers.join(", ")),
    };
    let what = match record.fields.as_slice() {
        [one] => one.pointer.clone(),
        fields => format!("{} fields", fields.len()),
    };
    let outcome = if record.mode == "corrected" {
        "taken back"
    } else {
        "left as found (drift report)"
    };
    Notice {
        event: Event::Drift,
        revision,
        message: format!("{}: {what} changed{by}; {outcome}", record.object),
        specs: vec![record.spec.clone()],
        errors: Vec::new(),
        time: record.seen.clone(),
        drift: Some(Box::new(DriftNotice {
            object: record.object.clone(),
            fields: record.fields.clone(),
            managers: record.managers.clone(),
            mode: record.mode.clone(),
            began: record.began.clone(),
        })),
    }
}

impl Ledger {
    /// The ledger at `path` (none: kept in memory only), as a previous run left it; a
    /// file that cannot be read is said once and started afresh, never fatal.
    pub fn open(path: Option<PathBuf>) -> (Ledger, watch::Receiver<Arc<String>>) {
        let mut file = match &path {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                    tracing::warn!(file = %p.display(), error = %e, "the drift ledger is not valid JSON; starting a new one");
                    File::default()
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "cannot read the drift ledger; starting a new one");
                    File::default()
                }
            },
            None => File::default(),
        };
        let (published, rx) = watch::channel(Arc::new(String::new()));
        // A ledger an older release wrote keeps whole values: clipped as it is read.
        for d in file.drifts.iter_mut() {
            d.fields = clipped_fields(&d.fields);
        }
        for s in file.syncs.iter_mut() {
            clip_message(s);
        }
        let mut ledger = Ledger {
            drift_sizes: file.drifts.iter().map(size_of).collect(),
            sync_sizes: file.syncs.iter().map(size_of).collect(),
            control_sizes: file.controls.iter().map(size_of).collect(),
            path,
            file,
            published,
        };
        trim(&mut ledger.file.drifts, &mut ledger.drift_sizes);
        trim(&mut ledger.file.syncs, &mut ledger.sync_sizes);
        trim(&mut ledger.file.controls, &mut ledger.control_sizes);
        ledger.publish();
        (ledger, rx)
    }

    /// Records the drift a sync met on `key` of `spec`: corrected at `now` when it was
    /// taken back, else standing (one record per standing drift: seen again, it is
    /// brought up to date, not repeated). The record when it is a new one.
    pub fn record(
        &mut self,
        key: &ObjKey,
        spec: &SpecId,
        seen: &DriftSeen,
        corrected: bool,
        now: Timestamp,
    ) -> Option<DriftRecord> {
        let object = key.to_string();
        let now = now.to_string();
        let standing = self
            .file
            .drifts
            .iter()
            .rposition(|d| d.object == object && d.corrected.is_none());
        let new = match standing {
            Some(at) => {
                if seen.fields.is_empty() && seen.managers.is_empty() && !corrected {
                    return None;
                }
                let d = &mut self.file.drifts[at];
                d.fields = clipped_fields(&seen.fields);
                d.managers.clone_from(&seen.managers);
                if corrected {
                    d.corrected = Some(now);
                    d.mode = "corrected".into();
                }
                let size = size_of(&*d);
                if let Some(s) = self.drift_sizes.get_mut(at) {
                    *s = size;
                }
                None
            }
            None => {
                let record = DriftRecord {
                    object,
                    spec: spec.to_string(),
                    fields: clipped_fields(&seen.fields),
                    managers: seen.managers.clone(),
                    began: seen.written.clone().unwrap_or_else(|| now.clone()),
                    seen: now.clone(),
                    corrected: corrected.then_some(now),
                    mode: if corrected { "corrected" } else { "reported" }.into(),
                };
                self.drift_sizes.push_back(size_of(&record));
                self.file.drifts.push_back(record.clone());
                trim(&mut self.file.drifts, &mut self.drift_sizes);
                Some(record)
            }
        };
        self.save();
        new
    }

    /// Adds a sync to the history.
    pub(crate) fn record_sync(&mut self, mut sync: SyncRecord) {
        clip_message(&mut sync);
        self.sync_sizes.push_back(size_of(&sync));
        self.file.syncs.push_back(sync);
        trim(&mut self.file.syncs, &mut self.sync_sizes);
        self.save();
    }

    /// Adds an audited control to the history (its reason clipped as a sync's message).
    pub(crate) fn record_control(&mut self, mut control: AuditRecord) {
        if let Some(r) = control.reason.as_mut() {
            clip_text(r);
        }
        self.control_sizes.push_back(size_of(&control));
        self.file.controls.push_back(control);
        trim(&mut self.file.controls, &mut self.control_sizes);
        self.save();
    }

    /// Whether some drift stands (is not corrected yet).
    pub fn standing(&self) -> bool {
        self.file.drifts.iter().any(|d| d.corrected.is_none())
    }

    /// Standing drifts whose object is no longer drifted (set back by someone, or by a
    /// sync after a resume) are corrected at `now`.
    pub fn settle(&mut self, still_drifted: impl Fn(&str) -> bool, now: Timestamp) {
        let mut changed = false;
        for (d, size) in self.file.drifts.iter_mut().zip(self.drift_sizes.iter_mut()) {
            if d.corrected.is_none() && !still_drifted(&d.object) {
                d.corrected = Some(now.to_string());
                *size = size_of(&*d);
                changed = true;
            }
        }
        if changed {
            self.save();
        }
    }

    fn publish(&self) {
        let text = serde_json::to_string(&self.file).unwrap_or_default();
        self.published.send_replace(Arc::new(text));
    }

    fn save(&self) {
        self.publish();
        let Some(path) = &self.path else {
            return;
        };
        let text = self.published.borrow().clone();
        let tmp = path.with_extension("json.tmp");
        let written =
            std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            tracing::warn!(file = %path.display(), error = %e, "cannot write the drift ledger");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> ObjKey {
        ObjKey {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "x".into(),
            name: "web".into(),
        }
    }

    fn seen(image: &str) -> DriftSeen {
        DriftSeen {
            fields: vec![FieldDrift {
                pointer: "/spec/template/spec/containers/0/image".into(),
                applied: json!("nginx:1"),
                found: json!(image),
            }],
            managers: vec!["kubectl-set".into()],
            written: Some("2026-01-01T00:00:00Z".into()),
        }
    }

    #[test]
    fn drifts_survive_a_restart_stand_until_settled_and_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_beside(&dir.path().join("status-a.json"));
        assert_eq!(path.file_name().unwrap(), "status-a.drift.json");
        let spec: SpecId = "manifest/x/Deployment.apps/web".parse().unwrap();
        let now: Timestamp = "2026-01-01T00:00:05Z".parse().unwrap();
        {
            let (mut l, _) = Ledger::open(Some(path.clone()));
            assert!(
                l.record(&key(), &spec, &seen("nginx:2"), false, now)
                    .is_some()
            );
            // Seen again while it stands: brought up to date, not repeated.
            assert!(
                l.record(&key(), &spec, &seen("nginx:3"), false, now)
                    .is_none()
            );
        }
        let (mut l, rx) = Ledger::open(Some(path.clone()));
        let doc: serde_json::Value = serde_json::from_str(&rx.borrow()).unwrap();
        assert_eq!(doc["drifts"].as_array().unwrap().len(), 1, "{doc}");
        assert_eq!(doc["drifts"][0]["fields"][0]["found"], "nginx:3");
        assert_eq!(doc["drifts"][0]["began"], "2026-01-01T00:00:00Z");
        assert_eq!(doc["drifts"][0]["corrected"], serde_json::Value::Null);
        l.settle(|_| false, now);
        let doc: serde_json::Value = serde_json::from_str(&rx.borrow()).unwrap();
        assert_eq!(doc["drifts"][0]["corrected"], "2026-01-01T00:00:05Z");
        // Each drift corrected as it is seen is a record of its own.
        for _ in 0..MAX + 5 {
            assert!(
                l.record(&key(), &spec, &seen("nginx:4"), true, now)
                    .is_some()
            );
        }
        let (_, rx) = Ledger::open(Some(path));
        let doc: serde_json::Value = serde_json::from_str(&rx.borrow()).unwrap();
        assert_eq!(doc["drifts"].as_array().unwrap().len(), MAX);
    }

    #[test]
    fn a_new_drift_is_told_with_its_field_writer_and_outcome() {
        let mut l = Ledger::open(None).0;
        let spec: SpecId = "manifest/x/Deployment.apps/web".parse().unwrap();
        let now: Timestamp = "2026-01-01T00:00:05Z".parse().unwrap();
        let new = l
            .record(&key(), &spec, &seen("nginx:2"), true, now)
            .unwrap();
        let told = notice_of(&new, Some("abc".into()));
        assert_eq!(told.event, Event::Drift);
        assert_eq!(
            told.message,
            "Deployment.apps x/web: /spec/template/spec/containers/0/image changed by kubectl-set; taken back"
        );
        assert_eq!(told.specs, vec![spec.to_string()]);
        let drift = told.drift.unwrap();
        assert_eq!(
            (drift.mode.as_str(), drift.began.as_str()),
            ("corrected", "2026-01-01T00:00:00Z")
        );
        assert_eq!(drift.fields, seen("nginx:2").fields);
    }

    /// However big the values that drifted and however many drifts and syncs there
    /// are, the ledger keeps a bounded number of bytes: values and messages as their
    /// beginning and length, and the oldest records dropped past `BUDGET`.
    #[test]
    fn the_ledger_is_bounded_in_bytes_not_only_in_records() {
        let (mut l, rx) = Ledger::open(None);
        let spec: SpecId = "manifest/x/ConfigMap/big".parse().unwrap();
        let now: Timestamp = "2026-01-01T00:00:05Z".parse().unwrap();
        let big = "x".repeat(200 * 1024);
        let long = "x".repeat(2 * VALUE_SHOWN);
        let fields = std::iter::once(FieldDrift {
            pointer: "/data/big".into(),
            applied: json!(big),
            found: json!({ "k": big }),
        })
        .chain((0..400).map(|i| FieldDrift {
            pointer: format!("/data/k{i}"),
            applied: json!(long),
            found: json!(long),
        }))
        .collect();
        let seen = DriftSeen {
            fields,
            managers: vec!["kubectl-edit".into()],
            written: None,
        };
        let named = |n: usize| ObjKey {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: "x".into(),
            name: format!("big-{n}"),
        };
        let first = l.record(&named(0), &spec, &seen, true, now).unwrap();
        let applied = first.fields[0].applied.as_str().unwrap();
        assert!(applied.starts_with("xxx"), "{applied}");
        assert!(applied.ends_with("… (204800 bytes)"), "{applied}");
        assert!(applied.len() <= VALUE_SHOWN, "{}", applied.len());
        let found = first.fields[0].found.as_str().unwrap();
        assert!(found.starts_with(r#"{"k":"xxx"#), "{found}");
        assert!(found.ends_with("… (204808 bytes)"), "{found}");
        // 400 more fields of about a KiB as kept: a dozen such records pass the
        // budget, long before `MAX` of them.
        let last = 12;
        for n in 1..=last {
            l.record(&named(n), &spec, &seen, true, now).unwrap();
        }
        let kept = |rx: &watch::Receiver<Arc<String>>| -> (usize, Value) {
            let text = rx.borrow().clone();
            (text.len(), serde_json::from_str(&text).unwrap())
        };
        let (size, doc) = kept(&rx);
        let drifts = doc["drifts"].as_array().unwrap();
        assert!(drifts.len() < last, "{} drifts kept", drifts.len());
        assert!(size <= BUDGET, "{size} bytes");
        assert!(
            size > BUDGET - 2 * size_of(&first),
            "{size} bytes: the budget is used"
        );
        assert_eq!(drifts.last().unwrap()["object"], named(last).to_string());
        // A sync's message is kept up to `MESSAGE_SHOWN` bytes.
        for _ in 0..3 {
            l.record_sync(SyncRecord {
                revision: Some("abc".into()),
                started: "2026-01-01T00:00:00Z".into(),
                ended: "2026-01-01T00:00:05Z".into(),
                result: "failed".into(),
                message: Some(format!("é{big}")),
                applied: 0,
                unchanged: 0,
                pruned: 0,
                failed: 1,
                changed: Vec::new(),
            });
        }
        let (size, doc) = kept(&rx);
        let message = doc["syncs"][0]["message"].as_str().unwrap();
        assert!(message.starts_with("éxxx"), "{message}");
        assert!(message.ends_with("… (204802 bytes)"), "{message}");
        assert!(message.len() <= MESSAGE_SHOWN + 32, "{}", message.len());
        assert!(size <= BUDGET + 3 * (MESSAGE_SHOWN + 512), "{size} bytes");
        // What an older release left whole is clipped as it is read back.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.drift.json");
        let mut old = seen.clone();
        old.fields.truncate(1);
        let whole = serde_json::json!({"drifts": [{
            "object": "ConfigMap x/big-0", "spec": spec.to_string(), "fields": old.fields,
            "managers": [], "began": "2026-01-01T00:00:00Z", "seen": "2026-01-01T00:00:00Z",
            "corrected": null, "mode": "reported"}], "syncs": []});
        std::fs::write(&path, whole.to_string()).unwrap();
        let (_, rx) = Ledger::open(Some(path));
        let (size, _) = kept(&rx);
        assert!(size < 4 * VALUE_SHOWN, "{size} bytes");
    }

    #[test]
    fn controls_are_kept_across_a_restart_newest_last_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.drift.json");
        let control = |i: usize, reason: Option<String>| AuditRecord {
            time: format!("2026-01-01T00:00:{:02}Z", i % 60),
            who: "anonymous".into(),
            from: "127.0.0.1:5000".into(),
            what: format!("POST /api/v1/specs/ConfigMap/x/c{i}/suspend"),
            answer: 403,
            reason,
        };
        let (mut l, _) = Ledger::open(Some(path.clone()));
        for i in 0..MAX + 5 {
            l.record_control(control(i, None));
        }
        l.record_control(control(MAX + 5, Some("x".repeat(3 * MESSAGE_SHOWN))));
        drop(l);
        let (_, rx) = Ledger::open(Some(path));
        let doc: Value = serde_json::from_str(&rx.borrow()).unwrap();
        let controls = doc["controls"].as_array().unwrap();
        assert_eq!(controls.len(), MAX);
        assert_eq!(
            controls[0]["what"],
            "POST /api/v1/specs/ConfigMap/x/c6/suspend"
        );
        let last = &controls[MAX - 1];
        assert_eq!(last["answer"], 403);
        let reason = last["reason"].as_str().unwrap();
        let told = format!("… ({} bytes)", 3 * MESSAGE_SHOWN);
        assert!(
            reason.len() == MESSAGE_SHOWN + told.len() && reason.ends_with(&told),
            "{}",
            reason.len()
        );
        assert!(controls[0].get("reason").is_none(), "{}", controls[0]);
    }
}
