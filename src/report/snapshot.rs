//! The status file as the daemon writes it: built from plain values (what the daemon
//! knows at a moment), and written again each second while a write fails.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::watch;

use super::api::Published;
use super::metrics::Metrics;
use super::status::{
    LastSync, ObjectState, SourceError, SpecStatus, StatusFile, VERSION, figures_of,
};
use crate::apply::suspensions::Suspensions;
use crate::health::{Expected, SpecHealth};
use crate::object::ObjKey;
use crate::spec::{Spec, SpecId};

/// What the status file shows, borrowed from whoever knows it.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub source: &'a str,
    pub revision_seen: Option<&'a str>,
    pub revision_applied: Option<&'a str>,
    pub last_sync: Option<&'a LastSync>,
    /// Why `revision_seen` was not applied.
    pub errors: &'a [SourceError],
    /// Why the cluster cannot be reached, while it cannot.
    pub cluster_error: Option<&'a str>,
    /// Why the last sync found no cluster (a reason, `ClusterUnreachable`, and a
    /// message), until a sync reaches it: every spec's state is then `Unknown`.
    pub cluster_away: Option<(&'a str, &'a str)>,
    /// The cluster's Kubernetes version, once read.
    pub kubernetes: Option<&'a str>,
    /// The cluster served, by its fleet name (none without a fleet).
    pub cluster: Option<&'a str>,
    pub specs: &'a [Spec],
    /// What rendered each rendered file of the tree.
    pub rendered: &'a BTreeMap<String, crate::spec::RenderedBy>,
    /// The apps that made each rendered file of the tree.
    pub rendered_apps: &'a crate::spec::RenderedApps,
    pub health: &'a [std::sync::Arc<SpecHealth>],
    /// What the specs render to: the objects' display names, for their last actions.
    pub expected: &'a [Expected],
    /// The last apply action per object.
    pub actions: &'a HashMap<ObjKey, String>,
    /// Why the last apply of an object failed (or conflicted), while it stands.
    pub failures: &'a HashMap<ObjKey, String>,
    /// What the apiserver warned of at an object's last write.
    pub warnings: &'a HashMap<ObjKey, Vec<String>>,
    /// The revision each spec's state reflects.
    pub settled_in: &'a HashMap<SpecId, String>,
    /// `--instance`.
    pub instance: &'a str,
    pub leader: bool,
    /// Why this replica cannot lead, while it cannot: one of `errors` in the file.
    pub leader_problem: Option<&'a str>,
    /// Its share of a tree replicas share; its problem is one of `errors` too.
    pub shard: Option<&'a super::status::ShardStatus>,
    /// While replicas share the tree: the whole of it, and the others' parts.
    pub shared: Option<Shared<'a>>,
    /// Suspended specs, by id.
    pub suspensions: &'a Suspensions,
    /// Owned objects someone else changed that were left so, with their specs.
    pub drifted: &'a BTreeMap<ObjKey, SpecId>,
    pub syncing: bool,
    /// What the running sync is doing, while one runs.
    pub sync_progress: Option<&'a super::status::SyncProgress>,
    /// `--drift correct` (or `report`).
    pub correct_drift: bool,
}

/// What a member shows of the specs other members hold (`run --shard`).
#[derive(Debug, Clone, Copy)]
pub struct Shared<'a> {
    /// The whole tree of the current revision, in its order.
    pub whole: &'a [Spec],
    /// The others' specs as they last published them, by id: only those in the buckets
    /// the holders' table gives the member that published them.
    pub peers: &'a PeerSpecs,
}

/// The other members' specs by id, each held once however many status documents and
/// views show it.
pub(crate) type PeerSpecs = HashMap<String, std::sync::Arc<SpecStatus>>;

/// Reason of a spec no member has reported yet.
pub(crate) const UNREPORTED: &str = "Unreported";

impl<'a> Snapshot<'a> {
    /// The status, with only this replica's own specs: `with_peers` adds the others'.
    pub fn status_file(&self) -> StatusFile {
        let doc = self.streamed();
        let specs = self.specs.iter().map(|s| doc.specs.of(s)).collect();
        doc.with_specs(specs)
    }

    /// The status, its specs made one at a time as they are written (each of them again
    /// at each pass over it). Made as a list first, a 10,000-spec status held about
    /// 15 MiB beside its text at every write.
    pub fn streamed<'s>(&'s self) -> StatusFile<Specs<'s, 'a>> {
        let specs = Specs::new(self);
        let of_release = |s: &&Spec| {
            self.rendered
                .get(&s.at.file)
                .is_some_and(|r| r.release.is_some())
        };
        let of_app = |s: &&Spec| self.rendered_apps.app_of(&s.at.file).is_some();
        StatusFile {
            releases: super::status::releases::of(
                self.specs.iter().filter(of_release).map(|s| specs.of(s)),
            ),
            apps: super::status::apps::of(self.specs.iter().filter(of_app).map(|s| specs.of(s))),
            version: VERSION,
            instance: self.instance.to_string(),
            kubernetes: self.kubernetes.map(str::to_string),
            cluster: self.cluster.map(str::to_string),
            source: self.source.to_string(),
            revision_seen: self.revision_seen.map(str::to_string),
            revision_applied: self.revision_applied.map(str::to_string),
            last_sync: self.last_sync.cloned(),
            errors: self
                .errors
                .iter()
                .cloned()
                .chain(self.cluster_error.iter().map(|e| SourceError {
                    app: None,
                    file: None,
                    line: None,
                    column: None,
                    // Said once: the cause may already say it could not connect.
                    message: format!(
                        "cannot reach the Kubernetes API: {}",
                        e.strip_prefix("cannot connect to the Kubernetes API: ")
                            .unwrap_or(e)
                    ),
                }))
                .chain(
                    self.leader_problem
                        .or(self.shard.as_ref().and_then(|s| s.problem.as_deref()))
                        .map(|e| SourceError {
                            app: None,
                            file: None,
                            line: None,
                            column: None,
                            message: e.to_string(),
                        }),
                )
                .collect(),
            specs,
            leader: Some(self.leader),
            shard: self.shard.cloned(),
            syncing: self.syncing,
            sync_progress: self.sync_progress.filter(|_| self.syncing).map(|p| {
                let mut p = p.clone();
                p.message = p.describe();
                p
            }),
            drift: if self.correct_drift {
                "correct"
            } else {
                "report"
            }
            .to_string(),
            written: None,
        }
    }

    /// What names `spec` (with `id`, its id as text), where it is and what rendered it;
    /// the rest as nothing is known.
    fn named(&self, spec: &Spec, id: String) -> SpecStatus {
        SpecStatus {
            id,
            kind: spec.id.kind.as_str().to_string(),
            namespace: spec.id.namespace.clone(),
            name: spec.id.name.clone(),
            file: spec.at.file.clone(),
            line: spec.at.line,
            rendered_by: self.rendered.get(&spec.at.file).cloned(),
            app: self
                .rendered_apps
                .app_of(&spec.at.file)
                .map(ToString::to_string),
            ..SpecStatus::default()
        }
    }

    /// The whole tree in `doc`, while replicas share it: in the tree's order, this
    /// replica's specs as they are, the others' as published, and the rest (a bucket
    /// changing hands, a member not published since the revision) said unreported.
    pub(crate) fn with_peers(&self, doc: &mut StatusFile) {
        let Some(shared) = self.shared else {
            return;
        };
        let mut own: HashMap<String, SpecStatus> =
            doc.specs.drain(..).map(|s| (s.id.clone(), s)).collect();
        doc.specs = shared
            .whole
            .iter()
            .map(|spec| {
                let id = spec.id.to_string();
                own.remove(&id)
                    .or_else(|| shared.peers.get(&id).map(|s| SpecStatus::clone(s)))
                    .unwrap_or_else(|| SpecStatus {
                        ready: false,
                        status: "InProgress".into(),
                        reason: Some(UNREPORTED.into()),
                        message: "no replica has reported it yet: its bucket is changing \
                                  hands, or its holder has not read this revision"
                            .into(),
                        ..self.named(spec, id)
                    })
            })
            .collect();
        // A spec of this replica's that the whole tree has not (yet): still shown.
        let mut rest: Vec<SpecStatus> = own.into_values().collect();
        rest.sort_by(|a, b| a.id.cmp(&b.id));
        doc.specs.extend(rest);
        doc.releases = super::status::releases::of(&doc.specs);
        doc.apps = super::status::apps::of(&doc.specs);
    }
}

/// A status's specs, each made from the snapshot when it is written and dropped after.
/// Lookups by id and by object reference are built once: searching the lists for every
/// spec and object was quadratic (seconds per status write at a few thousand specs).
pub struct Specs<'s, 'a> {
    snapshot: &'s Snapshot<'a>,
    health_by_id: HashMap<&'a str, &'a SpecHealth>,
    drifted_by_spec: HashMap<&'a SpecId, Vec<String>>,
    action_by_ref: HashMap<&'a str, &'a String>,
    failure_by_ref: HashMap<&'a str, &'a String>,
    /// Each spec's first object that failed (known before readiness is).
    failures_by_spec: HashMap<&'a SpecId, (&'a str, &'a String)>,
    warnings_by_spec: HashMap<&'a SpecId, Vec<String>>,
}

impl<'s, 'a> Specs<'s, 'a> {
    fn new(snapshot: &'s Snapshot<'a>) -> Specs<'s, 'a> {
        let health_by_id = snapshot
            .health
            .iter()
            .map(|h| (h.id.as_str(), &**h))
            .collect();
        let mut drifted_by_spec: HashMap<&SpecId, Vec<String>> = HashMap::new();
        for (key, spec) in snapshot.drifted {
            drifted_by_spec
                .entry(spec)
                .or_default()
                .push(key.to_string());
        }
        let action_by_ref = snapshot
            .expected
            .iter()
            .filter_map(|e| Some((e.display.as_str(), snapshot.actions.get(&e.key)?)))
            .collect();
        let mut failure_by_ref = HashMap::new();
        let mut failures_by_spec = HashMap::new();
        let mut warnings_by_spec: HashMap<&SpecId, Vec<String>> = HashMap::new();
        for e in snapshot.expected {
            if let Some(said) = snapshot.warnings.get(&e.key) {
                let of_spec = warnings_by_spec.entry(&e.spec).or_default();
                of_spec.extend(said.iter().map(|w| format!("{}: {w}", e.display)));
            }
            if let Some(error) = snapshot.failures.get(&e.key) {
                failure_by_ref.insert(e.display.as_str(), error);
                failures_by_spec
                    .entry(&e.spec)
                    .or_insert((e.display.as_str(), error));
            }
        }
        Specs {
            snapshot,
            health_by_id,
            drifted_by_spec,
            action_by_ref,
            failure_by_ref,
            failures_by_spec,
            warnings_by_spec,
        }
    }

    /// What the status says of `spec`.
    fn of(&self, spec: &Spec) -> SpecStatus {
        let snap = self.snapshot;
        let id = spec.id.to_string();
        let h = self.health_by_id.get(id.as_str()).copied();
        // An object that failed to apply says why, in the spec's words too: not the
        // "Resource not found" of an object that was never created.
        let failed = self.failures_by_spec.get(&spec.id).map(|(object, error)| {
            let conflict = self
                .action_by_ref
                .get(object)
                .is_some_and(|a| a.as_str() == "conflict");
            (*object, *error, conflict)
        });
        if let Some((reason, why)) = snap.cluster_away {
            // What the specs were is no longer known: said so, not shown as it was.
            return SpecStatus {
                ready: false,
                status: "Unknown".to_string(),
                reason: Some(reason.to_string()),
                message: why.to_string(),
                ..self.of_reached(spec, h, failed)
            };
        }
        self.of_reached(spec, h, failed)
    }

    /// What the status says of `spec` from its health `h` and its failure, if any.
    fn of_reached(
        &self,
        spec: &Spec,
        h: Option<&SpecHealth>,
        failed: Option<(&str, &String, bool)>,
    ) -> SpecStatus {
        let snap = self.snapshot;
        let id = spec.id.to_string();
        let ready = h.is_some_and(|h| h.ready);
        SpecStatus {
            ready,
            status: match (failed, ready) {
                (Some(_), false) => "Failed".to_string(),
                _ => h.map_or("Unknown", |h| h.status.as_str()).to_string(),
            },
            reason: match failed {
                Some((_, _, true)) => Some("ApplyConflict".to_string()),
                Some((_, _, false)) => Some("ApplyFailed".to_string()),
                None => h.and_then(|h| h.reason.clone()),
            },
            message: match failed {
                Some((object, error, _)) => format!("{object}: {error}"),
                None => h
                    .map(|h| h.message.clone())
                    .unwrap_or_else(|| "not synced yet".into()),
            },
            figures: h.map(|h| figures_of(&h.figures)).unwrap_or_default(),
            objects: h
                .map(|h| {
                    h.objects
                        .iter()
                        .map(|o| ObjectState {
                            object: o.object.clone(),
                            status: o.status.status.as_str().to_string(),
                            reason: o.status.reason.clone(),
                            message: o.status.message.clone(),
                            action: self
                                .action_by_ref
                                .get(o.object.as_str())
                                .map(|a| (*a).clone()),
                            error: self
                                .failure_by_ref
                                .get(o.object.as_str())
                                .map(|e| (*e).clone()),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            suspended: snap.suspensions.get(&id).cloned(),
            drifted: self
                .drifted_by_spec
                .get(&spec.id)
                .cloned()
                .unwrap_or_default(),
            warnings: self
                .warnings_by_spec
                .get(&spec.id)
                .cloned()
                .unwrap_or_default(),
            revision: snap.settled_in.get(&spec.id).cloned(),
            member: snap.shard.map(|s| s.member.clone()),
            ..snap.named(spec, id)
        }
    }
}

impl Serialize for Specs<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq as _;
        let mut seq = serializer.serialize_seq(Some(self.snapshot.specs.len()))?;
        for spec in self.snapshot.specs {
            seq.serialize_element(&self.of(spec))?;
        }
        seq.end()
    }
}

/// Writes the status file (`--status-file`), if there is one, and remembers whether the
/// last write failed; publishes each new status to the API's readers.
#[derive(Debug)]
pub(crate) struct StatusWriter {
    path: Option<PathBuf>,
    failing: bool,
    /// When the file was last written (or tried).
    written_at: Option<tokio::time::Instant>,
    /// The `written` of the file as last written.
    last_written: Option<String>,
    published: watch::Sender<Arc<Published>>,
    /// Where a member of a shared tree publishes its own specs (`with_part`).
    part: Option<watch::Sender<Arc<Vec<SpecStatus>>>>,
}

impl StatusWriter {
    /// Tells `part` this replica's own specs at each write that changes them, for the
    /// other members of a shared tree to show.
    pub(crate) fn with_part(mut self, part: watch::Sender<Arc<Vec<SpecStatus>>>) -> StatusWriter {
        self.part = Some(part);
        self
    }

    pub fn new(path: Option<PathBuf>, published: watch::Sender<Arc<Published>>) -> StatusWriter {
        StatusWriter {
            path,
            failing: false,
            written_at: None,
            last_written: None,
            published,
            part: None,
        }
    }

    /// The last write failed (a read-only or full directory): the caller retries each
    /// second, even when nothing changed, so the file catches up once it can be written.
    pub fn failing(&self) -> bool {
        self.failing
    }

    /// Whether the file is due its periodic rewrite: `driftless status` calls a file
    /// older than 30 s stale, so a running daemon rewrites it at least every 10 s.
    pub fn due(&self) -> bool {
        self.path.is_some()
            && self
                .written_at
                .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10))
    }

    pub fn write(&mut self, snapshot: &Snapshot<'_>, metrics: &Metrics) {
        if self.part.is_none() && snapshot.shared.is_none() {
            self.publish(snapshot.streamed(), metrics);
            return;
        }
        // A member of a shared tree sends its own specs to the others, and shows theirs:
        // its status is made as a list.
        let mut doc = snapshot.status_file();
        if let Some(part) = &self.part {
            part.send_if_modified(|p| {
                if p.as_slice() == doc.specs.as_slice() {
                    return false;
                }
                *p = Arc::new(doc.specs.clone());
                true
            });
        }
        snapshot.with_peers(&mut doc);
        self.publish(doc, metrics);
    }

    /// Tells the API's readers, then the file: whoever has read the file (a test, a
    /// script polling it) finds the API saying at least as much. Readers wake only for a
    /// change.
    fn publish<S: Serialize>(&mut self, doc: StatusFile<S>, metrics: &Metrics) {
        // The length first: a borrow held through the serialisation would hold the lock.
        let last = self.published.borrow().json().len();
        let next = Published::sized(&doc, last);
        drop(doc);
        let changed = self.published.send_if_modified(|current| {
            if **current == next {
                return false;
            }
            *current = Arc::new(next);
            true
        });
        let Some(path) = self.path.clone() else {
            return;
        };
        // To the second: writes within one second that change nothing else are skipped.
        // Only the file says it; the API's readers wake for changes, not for the clock.
        let now = k8s_openapi::jiff::Timestamp::now();
        let written = k8s_openapi::jiff::Timestamp::from_second(now.as_second())
            .ok()
            .map(|t| t.to_string());
        // The file holds what the API does and the time: what differs from the last
        // file is known without reading it back.
        if changed || self.failing || written != self.last_written {
            let text = Arc::clone(&self.published.borrow());
            self.write_file(&path, text.json(), written.as_deref(), metrics);
            self.last_written = written.filter(|_| !self.failing);
        }
        self.written_at = Some(tokio::time::Instant::now());
    }

    fn write_file(
        &mut self,
        path: &std::path::Path,
        text: &str,
        written: Option<&str>,
        metrics: &Metrics,
    ) {
        match super::status::replace_indented(path, text, written) {
            Ok(()) => {
                if self.failing {
                    tracing::info!(path = %path.display(), "status file written again");
                }
                self.failing = false;
            }
            Err(e) => {
                metrics.status_write_failed();
                // Once per outage, not every second.
                if !self.failing {
                    tracing::warn!(path = %path.display(), error = %e, "could not write the status file; retrying every second");
                }
                self.failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests;
