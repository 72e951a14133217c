//! The drift ledger: every drift a sync met, field by field (`apply::drift`), with who
//! wrote it, when it began and when it was corrected. Kept outside etcd, in a JSON file
//! beside the status file (the state directory), bounded to the newest `MAX` drifts,
//! read back at start so it survives restarts; served at `/api/v1/drift`.
//!
//! Beside the drifts, the same file keeps the history of syncs (revision, start, end,
//! result, counts and the objects each changed), with the same bound, served at
//! `/api/v1/syncs`.
//!
//! The file is replaced by a rename, as the status file is: a reader (or a crash) sees
//! the old or the new ledger, never half of one.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::apply::drift::{DriftSeen, FieldDrift};
use crate::object::ObjKey;
use crate::report::notify::{DriftNotice, Event, Notice};
use crate::spec::SpecId;

/// Drifts (and syncs) kept: the oldest go first.
pub const MAX: usize = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftRecord {
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
pub struct SyncRecord {
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
pub const CHANGED_SHOWN: usize = 50;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    drifts: VecDeque<DriftRecord>,
    #[serde(default)]
    syncs: VecDeque<SyncRecord>,
}

pub struct Ledger {
    path: Option<PathBuf>,
    file: File,
    published: watch::Sender<Arc<String>>,
}

/// The ledger's file for a status file: `status.json` → `status.drift.json`.
pub fn path_beside(status_file: &Path) -> PathBuf {
    let stem = status_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "status".into());
    status_file.with_file_name(format!("{stem}.drift.json"))
}

/// The history's record of the sync that ended as `last`.
pub fn history_of(
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

/// The notification of a drift the ledger newly recorded.
pub fn notice_of(record: &DriftRecord, revision: Option<String>) -> Notice {
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
        let file = match &path {
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
        let ledger = Ledger {
            path,
            file,
            published,
        };
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
            .iter_mut()
            .rev()
            .find(|d| d.object == object && d.corrected.is_none());
        let new = match standing {
            Some(d) => {
                if seen.fields.is_empty() && seen.managers.is_empty() && !corrected {
                    return None;
                }
                d.fields.clone_from(&seen.fields);
                d.managers.clone_from(&seen.managers);
                if corrected {
                    d.corrected = Some(now);
                    d.mode = "corrected".into();
                }
                None
            }
            None => {
                self.file.drifts.push_back(DriftRecord {
                    object,
                    spec: spec.to_string(),
                    fields: seen.fields.clone(),
                    managers: seen.managers.clone(),
                    began: seen.written.clone().unwrap_or_else(|| now.clone()),
                    seen: now.clone(),
                    corrected: corrected.then_some(now),
                    mode: if corrected { "corrected" } else { "reported" }.into(),
                });
                let record = self.file.drifts.back().cloned();
                while self.file.drifts.len() > MAX {
                    self.file.drifts.pop_front();
                }
                record
            }
        };
        self.save();
        new
    }

    /// Adds a sync to the history.
    pub fn record_sync(&mut self, sync: SyncRecord) {
        self.file.syncs.push_back(sync);
        while self.file.syncs.len() > MAX {
            self.file.syncs.pop_front();
        }
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
        for d in self.file.drifts.iter_mut() {
            if d.corrected.is_none() && !still_drifted(&d.object) {
                d.corrected = Some(now.to_string());
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
}
