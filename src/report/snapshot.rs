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
    /// The cluster's Kubernetes version, once read.
    pub kubernetes: Option<&'a str>,
    pub specs: &'a [Spec],
    /// What rendered each rendered file of the tree.
    pub rendered: &'a BTreeMap<String, crate::spec::RenderedBy>,
    pub health: &'a [SpecHealth],
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
pub type PeerSpecs = HashMap<String, std::sync::Arc<SpecStatus>>;

/// Reason of a spec no member has reported yet.
pub const UNREPORTED: &str = "Unreported";

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
        let of_app = |s: &&Spec| crate::spec::app_of(&s.at.file).is_some();
        StatusFile {
            releases: super::status::releases::of(
                self.specs.iter().filter(of_release).map(|s| specs.of(s)),
            ),
            apps: super::status::apps::of(self.specs.iter().filter(of_app).map(|s| specs.of(s))),
            version: VERSION,
            instance: self.instance.to_string(),
            kubernetes: self.kubernetes.map(str::to_string),
            source: self.source.to_string(),
            revision_seen: self.revision_seen.map(str::to_string),
            revision_applied: self.revision_applied.map(str::to_string),
            last_sync: self.last_sync.cloned(),
            errors: self
                .errors
                .iter()
                .cloned()
                .chain(self.cluster_error.iter().map(|e| SourceError {
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
            app: crate::spec::app_of(&spec.at.file),
            ..SpecStatus::default()
        }
    }

    /// The whole tree in `doc`, while replicas share it: in the tree's order, this
    /// replica's specs as they are, the others' as published, and the rest (a bucket
    /// changing hands, a member not published since the revision) said unreported.
    pub fn with_peers(&self, doc: &mut StatusFile) {
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
        let health_by_id = snapshot.health.iter().map(|h| (h.id.as_str(), h)).collect();
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
pub struct StatusWriter {
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
    pub fn with_part(mut self, part: watch::Sender<Arc<Vec<SpecStatus>>>) -> StatusWriter {
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
    fn publish<S: Serialize>(&mut self, mut doc: StatusFile<S>, metrics: &Metrics) {
        // The length first: a borrow held through the serialisation would hold the lock.
        let last = self.published.borrow().json().len();
        let next = Published::sized(&doc, last);
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
        doc.written = k8s_openapi::jiff::Timestamp::from_second(now.as_second())
            .ok()
            .map(|t| t.to_string());
        // The file holds what the API does and the time: what differs from the last
        // file is known without reading it back.
        if changed || self.failing || doc.written != self.last_written {
            self.write_file(&path, &doc, metrics);
            self.last_written = doc.written.filter(|_| !self.failing);
        }
        self.written_at = Some(tokio::time::Instant::now());
    }

    fn write_file(&mut self, path: &std::path::Path, doc: &impl Serialize, metrics: &Metrics) {
        match super::status::replace(path, doc) {
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
mod tests {
    use super::*;
    use crate::health::{Figures, ObjectHealth, ObjectStatus, Status};
    use crate::spec::{SourceFile, parse_files};

    fn specs() -> Vec<Spec> {
        let text = "namespace = \"n\"\n\
                    [elasticweb.a]\nimage = \"nginx\"\nsingle-pod-qps = 100\ntotal-qps = 100\n\
                    [elasticweb.b]\nimage = \"nginx\"\nsingle-pod-qps = 100\ntotal-qps = 100\n";
        let files = [SourceFile {
            path: "web.toml".into(),
            contents: text.as_bytes().to_vec(),
        }];
        parse_files(&files).expect("valid specs").specs
    }

    static NO_SUSPENSIONS: Suspensions = Suspensions::new();
    static NO_DRIFT: BTreeMap<ObjKey, SpecId> = BTreeMap::new();
    static NO_RENDERS: BTreeMap<String, crate::spec::RenderedBy> = BTreeMap::new();
    static NO_FAILURES: std::sync::LazyLock<HashMap<ObjKey, String>> =
        std::sync::LazyLock::new(HashMap::new);
    static NO_WARNINGS: std::sync::LazyLock<HashMap<ObjKey, Vec<String>>> =
        std::sync::LazyLock::new(HashMap::new);
    static NO_REVISIONS: std::sync::LazyLock<HashMap<SpecId, String>> =
        std::sync::LazyLock::new(HashMap::new);

    fn snapshot<'a>(
        specs: &'a [Spec],
        health: &'a [SpecHealth],
        actions: &'a HashMap<ObjKey, String>,
    ) -> Snapshot<'a> {
        Snapshot {
            source: "dir:/specs",
            revision_seen: Some("r2"),
            revision_applied: Some("r1"),
            last_sync: None,
            errors: &[],
            cluster_error: None,
            kubernetes: Some("v1.37.2"),
            specs,
            rendered: &NO_RENDERS,
            health,
            expected: &[],
            actions,
            failures: &NO_FAILURES,
            warnings: &NO_WARNINGS,
            settled_in: &NO_REVISIONS,
            instance: "default",
            leader: true,
            leader_problem: None,
            shard: None,
            suspensions: &NO_SUSPENSIONS,
            drifted: &NO_DRIFT,
            syncing: false,
            sync_progress: None,
            correct_drift: true,
            shared: None,
        }
    }

    #[test]
    fn a_member_shows_the_whole_tree_its_own_the_others_and_the_unreported() {
        let specs = specs();
        let actions = HashMap::new();
        let shard = super::super::status::ShardStatus {
            member: "m0".into(),
            buckets: vec![1],
            members: vec!["m0".into(), "m1".into()],
            problem: None,
        };
        // m0 holds b; m1 published a; a spec of m1's at a revision m0 has not read yet
        // is not shown.
        let peers = HashMap::from([
            (
                "elasticweb/n/a".to_string(),
                Arc::new(SpecStatus {
                    id: "elasticweb/n/a".into(),
                    ready: true,
                    status: "Current".into(),
                    member: Some("m1".into()),
                    ..SpecStatus::default()
                }),
            ),
            (
                "elasticweb/n/gone".to_string(),
                Arc::new(SpecStatus {
                    id: "elasticweb/n/gone".into(),
                    member: Some("m1".into()),
                    ..SpecStatus::default()
                }),
            ),
        ]);
        let mine = [specs[1].clone()];
        let snap = Snapshot {
            specs: &mine,
            shard: Some(&shard),
            shared: Some(Shared {
                whole: &specs,
                peers: &peers,
            }),
            ..snapshot(&specs, &[], &actions)
        };
        let mut doc = snap.status_file();
        let own: Vec<(&str, Option<&str>)> = doc
            .specs
            .iter()
            .map(|s| (s.id.as_str(), s.member.as_deref()))
            .collect();
        assert_eq!(own, [("elasticweb/n/b", Some("m0"))]);
        snap.with_peers(&mut doc);
        let all: Vec<(&str, Option<&str>, bool)> = doc
            .specs
            .iter()
            .map(|s| (s.id.as_str(), s.member.as_deref(), s.ready))
            .collect();
        assert_eq!(
            all,
            [
                ("elasticweb/n/a", Some("m1"), true),
                ("elasticweb/n/b", Some("m0"), false)
            ]
        );

        // Nobody published a: said so, not left out.
        let nobody = HashMap::new();
        let snap = Snapshot {
            shared: Some(Shared {
                whole: &specs,
                peers: &nobody,
            }),
            ..snap
        };
        let mut doc = snap.status_file();
        snap.with_peers(&mut doc);
        let a = &doc.specs[0];
        assert_eq!(a.id, "elasticweb/n/a");
        assert_eq!((a.ready, a.member.as_deref()), (false, None));
        assert_eq!(a.reason.as_deref(), Some(UNREPORTED));
        assert_eq!((a.file.as_str(), a.line), ("web.toml", 2));
    }

    #[test]
    fn a_spec_without_readiness_is_unknown_and_not_synced_yet() {
        let specs = specs();
        let actions = HashMap::new();
        let status = snapshot(&specs, &[], &actions).status_file();
        assert_eq!(status.version, VERSION);
        assert_eq!(status.source, "dir:/specs");
        assert_eq!(status.revision_seen.as_deref(), Some("r2"));
        assert_eq!(status.revision_applied.as_deref(), Some("r1"));
        assert_eq!(status.leader, Some(true));
        let ids: Vec<&str> = status.specs.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["elasticweb/n/a", "elasticweb/n/b"]);
        let a = &status.specs[0];
        assert_eq!((a.kind.as_str(), a.namespace.as_str()), ("elasticweb", "n"));
        assert_eq!((a.file.as_str(), a.line), ("web.toml", 2));
        assert!(!a.ready);
        assert_eq!(a.status, "Unknown");
        assert_eq!(a.message, "not synced yet");
        assert_eq!(a.figures.value(), serde_json::Value::Null);
    }

    #[test]
    fn statuses_use_the_kstatus_spelling() -> Result<(), Box<dyn std::error::Error>> {
        let specs = specs();
        let mut actions = HashMap::new();
        let key = ObjKey {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "n".into(),
            name: "a".into(),
        };
        actions.insert(key.clone(), "updated".to_string());
        let expected = [Expected {
            spec: specs[0].id.clone(),
            api_version: "apps/v1".into(),
            key,
            display: "Deployment n/a".into(),
            node: None,
            replicas: None,
            rule: None,
        }];
        let health = [SpecHealth {
            id: "elasticweb/n/a".into(),
            ready: false,
            status: Status::InProgress,
            reason: Some("Rollout".into()),
            message: "rolling out".into(),
            figures: Figures::Manifest {},
            objects: vec![ObjectHealth {
                object: "Deployment n/a".into(),
                status: ObjectStatus {
                    status: Status::NotFound,
                    reason: None,
                    message: "not found".into(),
                },
            }],
        }];
        let snap = Snapshot {
            expected: &expected,
            ..snapshot(&specs, &health, &actions)
        };
        let status = snap.status_file();
        let a = &status.specs[0];
        assert_eq!(a.status, "InProgress");
        assert_eq!(a.reason.as_deref(), Some("Rollout"));
        assert_eq!(a.objects[0].status, "NotFound");
        assert_eq!(a.objects[0].action.as_deref(), Some("updated"));
        // In the JSON text too, which tools read.
        let json = serde_json::to_string(&status)?;
        assert!(json.contains(r#""status":"InProgress""#), "{json}");
        assert!(json.contains(r#""status":"NotFound""#), "{json}");
        Ok(())
    }

    #[test]
    fn the_status_made_spec_by_spec_is_the_one_made_as_a_list()
    -> Result<(), Box<dyn std::error::Error>> {
        let specs = specs();
        let key = |name: &str| ObjKey {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "n".into(),
            name: name.into(),
        };
        let expected: Vec<Expected> = ["a", "b"]
            .iter()
            .zip(&specs)
            .map(|(name, spec)| Expected {
                spec: spec.id.clone(),
                api_version: "apps/v1".into(),
                key: key(name),
                display: format!("Deployment n/{name}"),
                node: None,
                replicas: None,
                rule: None,
            })
            .collect();
        let actions = HashMap::from([(key("a"), "updated".to_string())]);
        let failures = HashMap::from([(key("b"), "denied by a webhook".to_string())]);
        let warnings = HashMap::from([(key("a"), vec!["deprecated field".to_string()])]);
        let drifted = BTreeMap::from([(key("a"), specs[0].id.clone())]);
        let release = crate::spec::Release {
            name: "web".into(),
            release_name: "web".into(),
            namespace: "n".into(),
            chart: "charts/web".into(),
            version: "1.0.0".into(),
            app_version: None,
            file: "web.toml".into(),
            line: 1,
        };
        let rendered = BTreeMap::from([(
            "web.toml".to_string(),
            crate::spec::RenderedBy {
                tool: "helm".into(),
                version: "v4.1.4".into(),
                command: "helm template".into(),
                release: Some(release),
            },
        )]);
        let health = [SpecHealth {
            id: "elasticweb/n/a".into(),
            ready: true,
            status: Status::Current,
            reason: None,
            message: "ready".into(),
            figures: Figures::ElasticWeb {
                desired_replicas: 1,
                available_replicas: 1,
                real_qps: 100,
            },
            objects: vec![ObjectHealth {
                object: "Deployment n/a".into(),
                status: ObjectStatus {
                    status: Status::Current,
                    reason: None,
                    message: "ready".into(),
                },
            }],
        }];
        let snap = Snapshot {
            expected: &expected,
            failures: &failures,
            warnings: &warnings,
            drifted: &drifted,
            rendered: &rendered,
            ..snapshot(&specs, &health, &actions)
        };
        let listed = snap.status_file();
        assert_eq!(listed.specs[1].reason.as_deref(), Some("ApplyFailed"));
        assert_eq!(listed.specs[0].drifted, ["Deployment.apps n/a"]);
        assert_eq!(listed.specs[0].warnings.len(), 1);
        assert_eq!(listed.releases[0].tally.specs.len(), 2);
        // Each pass over the streamed specs makes them again, the same each time.
        let streamed = snap.streamed();
        let once = serde_json::to_string_pretty(&streamed)?;
        assert_eq!(once, serde_json::to_string_pretty(&listed)?);
        assert_eq!(
            serde_json::to_string(&streamed)?,
            serde_json::to_string(&listed)?
        );
        assert!(Published::new(&listed) == Published::sized(&streamed, 0));
        Ok(())
    }

    #[test]
    fn an_unreachable_cluster_and_a_refused_lease_are_listed_after_the_source_errors() {
        let actions = HashMap::new();
        let errors = [SourceError {
            file: Some("web.toml".into()),
            line: Some(3),
            column: Some(1),
            message: "bad".into(),
        }];
        let status = Snapshot {
            errors: &errors,
            cluster_error: Some("connection refused"),
            kubernetes: None,
            leader: false,
            shard: None,
            leader_problem: Some("leader election: cannot use Lease ns/l: forbidden"),
            ..snapshot(&[], &[], &actions)
        }
        .status_file();
        let messages: Vec<&str> = status.errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "bad",
                "cannot reach the Kubernetes API: connection refused",
                "leader election: cannot use Lease ns/l: forbidden"
            ]
        );
        assert_eq!(status.errors[1].file, None);
        assert!(status.specs.is_empty());
    }

    #[test]
    fn a_failed_write_is_retried_and_counted() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let actions = HashMap::new();
        let snap = snapshot(&[], &[], &actions);
        let metrics = Metrics::new();
        let (published, mut readers) =
            watch::channel(Arc::new(Published::new(&StatusFile::starting())));
        let mut writer = StatusWriter::new(
            Some(dir.path().join("missing").join("s.json")),
            published.clone(),
        );
        writer.write(&snap, &metrics);
        // Readers of the API see the status although the file could not be written.
        assert!(readers.has_changed()?);
        assert_eq!(
            readers.borrow_and_update().json(),
            serde_json::to_string(&snap.status_file())?
        );
        assert!(writer.failing());
        assert!(
            metrics
                .encode()
                .contains("driftless_status_write_errors_total 1\n")
        );
        let mut writer = StatusWriter::new(Some(dir.path().join("s.json")), published.clone());
        writer.write(&snap, &metrics);
        assert!(!writer.failing());
        // The file also says when it was written; the API's document does not.
        let mut written = StatusFile::read(&dir.path().join("s.json"))?;
        assert!(written.written.take().is_some());
        assert_eq!(written, snap.status_file());
        let mut none = StatusWriter::new(None, published.clone());
        none.write(&snap, &metrics);
        assert!(!none.failing());
        // The same status again wakes no reader; a changed one wakes them.
        assert!(!readers.has_changed()?);
        let mut writer = StatusWriter::new(None, published);
        writer.write(
            &Snapshot {
                syncing: true,
                ..snap
            },
            &metrics,
        );
        assert!(readers.has_changed()?);
        assert!(
            readers
                .borrow_and_update()
                .json()
                .contains(r#""syncing":true"#)
        );
        Ok(())
    }
}
