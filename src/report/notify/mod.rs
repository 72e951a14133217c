//! Telling people: the daemon's transitions (a revision applied and ready, a revision
//! invalid, a sync failed, a prune refused, specs not ready in time, a recovery) posted to
//! webhooks, Slack-compatible chat and the git provider's commit statuses.
//!
//! The daemon's state decides *when* (on transitions only, `Notice`); `message` decides
//! *what* each receiver is sent (pure); `deliver` posts it, one task and one bounded queue
//! per receiver, so a dead or slow receiver never holds up syncing: a full queue drops the
//! notice and counts it.

mod deliver;
pub mod message;

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::mpsc;

use super::metrics::Metrics;
use super::status::SourceError;

pub use message::{Provider, Target, repo_of_git_url};

/// Notices waiting per receiver; past this they are dropped (and counted), so memory
/// stays bounded however long a receiver is away.
const QUEUE: usize = 64;

/// What happened. The names are the `event` field of a webhook's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A revision's sync started (commit statuses only: `pending`).
    SyncStarted,
    /// The revision is applied and every spec is ready.
    RevisionReady,
    /// The revision has invalid files: nothing of it was applied, nothing pruned.
    RevisionInvalid,
    /// The revision's signature did not pass `--verify-commits`: nothing of it was
    /// applied; the last verified revision stays in force.
    RevisionUnverified,
    /// The revision is applied but for apps it holds (their render or validation
    /// failed): those were neither applied nor pruned.
    AppsHeld,
    SyncFailed,
    PruneRefused,
    /// Specs were not ready within `--ready-timeout` of their revision being applied.
    NotReady,
    /// Applied and every spec ready again, after any of the failures above.
    Recovered,
    /// Another writer changed fields driftless applies: taken back, or (`--drift
    /// report`) left and reported. Once per drift, when the ledger first records it.
    Drift,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::SyncStarted => "sync_started",
            Event::RevisionReady => "revision_ready",
            Event::RevisionInvalid => "revision_invalid",
            Event::RevisionUnverified => "revision_unverified",
            Event::AppsHeld => "apps_held",
            Event::SyncFailed => "sync_failed",
            Event::PruneRefused => "prune_refused",
            Event::NotReady => "not_ready",
            Event::Recovered => "recovered",
            Event::Drift => "drift",
        }
    }

    /// Whether this is bad news (a commit status `failure`).
    pub(crate) fn is_failure(self) -> bool {
        matches!(
            self,
            Event::RevisionInvalid
                | Event::RevisionUnverified
                | Event::AppsHeld
                | Event::SyncFailed
                | Event::PruneRefused
                | Event::NotReady
        )
    }
}

/// One transition, as the state reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub event: Event,
    /// The revision it concerns (a commit for a git source).
    pub revision: Option<String>,
    pub message: String,
    /// The spec ids it concerns, if any.
    pub specs: Vec<String>,
    /// An invalid revision's errors, with their places.
    pub errors: Vec<SourceError>,
    /// RFC 3339.
    pub time: String,
    /// A drift notice's object, fields and writers.
    pub drift: Option<Box<DriftNotice>>,
}

/// A drift as a notification tells it: the ledger's record of it, the values as the
/// ledger keeps them (a Secret's as keyed hashes, never in clear).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftNotice {
    /// `Kind[.group] namespace/name`.
    pub object: String,
    pub fields: Vec<crate::apply::drift::FieldDrift>,
    /// The field managers that wrote them (`kubectl-set`, `kubectl-edit`…).
    pub managers: Vec<String>,
    /// "corrected" (taken back) or "reported" (left, `--drift report`).
    pub mode: String,
    /// When it began (RFC 3339): its writer's time, else when it was seen.
    pub began: String,
}

/// What every message names besides the notice.
#[derive(Debug, Clone)]
pub struct Context {
    pub instance: String,
    /// The cluster served, when the operator declares a fleet (`--clusters`): each
    /// cluster's daemon tells its own, and a commit has a status per cluster.
    pub cluster: Option<String>,
    pub source: String,
    /// The commits revisions that are not commits were built from (an OCI artifact's
    /// `org.opencontainers.image.revision`), for commit statuses.
    pub origins: Origins,
}

/// Revision → the git commit it was built from, as its source learnt it. Shared by the
/// source task, which records, and the notifier, which reads; bounded.
#[derive(Debug, Clone, Default)]
pub struct Origins(Arc<std::sync::Mutex<std::collections::VecDeque<(String, String)>>>);

/// Revisions remembered: far more than can be in flight between a read and its notices.
const ORIGINS_KEPT: usize = 64;

impl Origins {
    pub fn record(&self, revision: &str, commit: &str) {
        if let Ok(mut o) = self.0.lock() {
            o.retain(|(r, _)| r != revision);
            o.push_back((revision.to_string(), commit.to_string()));
            while o.len() > ORIGINS_KEPT {
                o.pop_front();
            }
        }
    }

    pub(crate) fn commit_of(&self, revision: &str) -> Option<String> {
        let o = self.0.lock().ok()?;
        o.iter()
            .rev()
            .find(|(r, _)| r == revision)
            .map(|(_, c)| c.clone())
    }
}

/// Hands notices to the receivers' delivery tasks; never waits.
pub(crate) struct Notifier {
    queues: Vec<(Arc<Target>, mpsc::Sender<Arc<Notice>>)>,
    metrics: Arc<Metrics>,
}

impl Notifier {
    /// Starts one delivery task per target (on the current Tokio runtime).
    pub fn start(targets: Vec<Target>, context: Context, metrics: Arc<Metrics>) -> Notifier {
        let context = Arc::new(context);
        let client = super::outbound::client();
        let queues = targets
            .into_iter()
            .map(|target| {
                let target = Arc::new(target);
                let (tx, rx) = mpsc::channel(QUEUE);
                tokio::spawn(deliver::run(
                    target.clone(),
                    context.clone(),
                    client.clone(),
                    rx,
                    metrics.clone(),
                ));
                (target, tx)
            })
            .collect();
        Notifier { queues, metrics }
    }

    /// Queues `notice` for every receiver that takes it; a receiver whose queue is full
    /// loses it (counted as `dropped`).
    pub fn send(&self, notice: Notice) {
        let notice = Arc::new(notice);
        for (target, queue) in &self.queues {
            if !target.takes(notice.event) {
                continue;
            }
            if queue.try_send(notice.clone()).is_err() {
                tracing::warn!(
                    receiver = %target,
                    event = notice.event.as_str(),
                    "notification dropped: the receiver's queue is full"
                );
                self.metrics.notification("dropped");
            }
        }
    }
}
