//! What the daemon knows, as a plain value: what a new revision, a watch event, a finished
//! sync or a change of leadership does to it, and which keys each one queues. No I/O, no
//! async, no clock: the loop passes the time in, and counts what a transition reports
//! (`Tally`) in the metrics.

mod events;
mod notices;
mod readiness;
mod rendered;
mod revision;
mod running;
mod settled;
mod shard;
mod suspended;
mod synced;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::queue::Key;

use crate::apply::LiveStore;
use crate::apply::suspensions::Suspensions;
use crate::health::{self, SpecHealth};
use crate::object::ObjKey;
use crate::render::NodeFacts;
use crate::report::snapshot::Snapshot;
use crate::report::status::{LastSync, SourceError};
use crate::spec::{Spec, SpecId, SpecTree};

pub(crate) use revision::{HydrateReport, SourceUpdate};
pub(crate) use running::Cancel;
pub(crate) use synced::SyncEnd;

/// A tree that renders nothing has no renders to name.
static NO_RENDERS: BTreeMap<String, crate::spec::RenderedBy> = BTreeMap::new();
static NO_APPS: crate::spec::RenderedApps = crate::spec::RenderedApps::new();

/// The time, read once by the loop for a transition.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub at: Instant,
    pub wall: Timestamp,
}

/// What a transition asks the metrics to count (the state holds no metrics).
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    /// A read of the source failed: its kind and the reason (the metric's labels).
    pub source_failed: Option<(&'static str, &'static str)>,
    pub sync: Option<SyncCount>,
    /// The revision that counts as applied from now on.
    pub applied: Option<String>,
    pub drift_corrections: u64,
    pub pruned: u64,
    /// A valid revision was read: how many apps it holds.
    pub apps_held: Option<usize>,
}

/// One finished sync (or an invalid revision, counted as a sync that applied nothing).
#[derive(Debug, PartialEq)]
pub(crate) struct SyncCount {
    /// success, failed, refused or invalid.
    pub result: &'static str,
    pub elapsed: Duration,
    pub at: Timestamp,
}

/// What the loop does with keys that came due.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// Sync them now.
    Sync,
    /// Not before the node set is known (a render would see no nodes, and prune would
    /// delete every localservice's Services), nor the suspensions (a restarted daemon
    /// would apply what a suspended spec holds back). Queued again, not lost.
    Later,
    /// Dropped: a standby writes nothing, and without a valid tree there is nothing to
    /// write (leadership and the first valid revision each queue a whole sync).
    Drop,
}

/// Everything the loop knows.
pub(crate) struct State {
    source_name: String,
    /// The driftless instance this daemon is (`--instance`), as the status names it.
    pub instance: String,
    /// The cluster's Kubernetes version, as its apiserver said it at start.
    pub kubernetes: Option<String>,
    /// The cluster served, by its name in the operator's fleet (`--clusters`); `None`
    /// when there is no fleet.
    pub cluster: Option<String>,
    /// Shared with the sync that applies it (no copy of the tree per sync).
    pub tree: Option<Arc<SpecTree>>,
    /// While a revision is applied spec by spec (only the specs it changed): those not
    /// synced yet. `revision_applied` moves to the revision once this is empty.
    pending: Option<BTreeSet<SpecId>>,
    /// What the tree renders to, as readiness needs it (not the objects' bodies).
    expected: Vec<health::Expected>,
    /// Ready specs' verdicts, judged again only when their live objects change.
    pub judged: health::Judged,
    /// The tree or the nodes changed since `expected` was rendered.
    pub render_dirty: bool,
    /// The revision `tree` came from, once synced.
    revision_applied: Option<String>,
    /// The revision `tree` came from (synced or not yet).
    pub revision_current: Option<String>,
    revision_seen: Option<String>,
    seen_at: Option<Instant>,
    /// When the current revision was first synced, for --ready-timeout and latency.
    applied_at: Option<Instant>,
    latency_observed: bool,
    errors: Vec<SourceError>,
    pub nodes: Vec<NodeFacts>,
    /// Whether the Node watch has delivered its first full list.
    pub nodes_known: bool,
    /// Whether the suspensions' watch has delivered its first list.
    suspensions_known: bool,
    /// Per owned object: its spec and the fields our manager owned after our last write.
    recorded: HashMap<ObjKey, (SpecId, String)>,
    actions: HashMap<ObjKey, String>,
    /// Why an object's last apply failed or conflicted, until one succeeds.
    failures: HashMap<ObjKey, String>,
    /// What the apiserver warned of at an object's last write, until the next write.
    warnings: HashMap<ObjKey, Vec<String>>,
    /// Live state of owned objects, from the watches (one cluster's store).
    pub live: LiveStore,
    last_sync: Option<LastSync>,
    /// A revision the source found and refused (its signature did not pass), with why:
    /// told as such, while the last good revision stays in force.
    refused: Option<(String, String)>,
    pub health: Vec<Arc<SpecHealth>>,
    pub health_dirty: bool,
    active: bool,
    /// Why this replica cannot lead (its Lease refused), while it cannot.
    pub leader_problem: Option<String>,
    /// Why the Node watch cannot reach the API, while it cannot.
    cluster_error: Option<String>,
    /// Why the last sync found no cluster (its reason and message), until a sync reaches
    /// it: the specs' state is not known meanwhile.
    cluster_away: Option<(&'static str, String)>,
    /// The specs with objects the last sync failed to apply.
    sync_failed_specs: BTreeSet<SpecId>,
    /// Take back what someone else changed (`--drift correct`), or only report it.
    pub correct_drift: bool,
    /// Owned objects someone else changed that were left so (reported drift, or a
    /// suspended spec's), with their specs.
    drifted: BTreeMap<ObjKey, SpecId>,
    /// The replicas each scalable object should run, from `expected`.
    replicas_wanted: HashMap<ObjKey, i64>,
    /// Specs to sync again at once: a whole sync found their objects unchanged where the
    /// watches show them scaled (see `on_sync_done`).
    recheck: BTreeSet<SpecId>,
    /// Suspended specs: not applied, pruned or corrected; readiness still shown. Those a
    /// person paused (`asked`) and those the tree holds back (`declared`), merged.
    pub suspensions: Suspensions,
    /// The suspensions the cluster holds (`driftless suspend`).
    asked: Suspensions,
    /// The specs the current tree holds back (`driftless.dev/suspend`), since when.
    declared: Suspensions,
    /// When the current tree was read (RFC 3339).
    tree_read_at: String,
    /// A sync is running.
    pub syncing: bool,
    /// The running sync: what it covers and whether it was told to stop (`running`).
    running: Option<running::Running>,
    /// Bumped whenever what the tree renders to may change (a revision, the nodes), so a
    /// sync that ran across such a change does not pass its render off as current.
    render_epoch: u64,
    /// The whole tree's objects as last rendered, with the `render_epoch` they were
    /// rendered at: a resync of an unchanged tree on unchanged nodes renders nothing.
    rendered: Option<(u64, Arc<[crate::render::Object]>)>,
    /// Keys to sync again at once (no backoff): what a cancelled sync left undone, and
    /// drift seen while a sync ran.
    requeue: Vec<Key>,
    /// Changes to owned objects the watches reported while a sync ran, with the fields
    /// seen last (none: deleted) and the spec: judged once it ends.
    seen_in_sync: HashMap<ObjKey, (Option<String>, Option<SpecId>)>,
    /// What has been told of the transitions (notifications).
    herald: notices::Herald,
    /// Which revision each spec's readiness reflects (`settled`).
    settling: settled::Settling,
    /// What this replica holds of a tree replicas share (`--shard`): `tree` has only
    /// the specs of its buckets.
    shard: Option<crate::daemon::shards::ShardView>,
    /// `shard` as the status shows it.
    shard_status: Option<crate::report::status::ShardStatus>,
    /// The whole tree of the current revision, while replicas share it.
    whole: Option<Arc<SpecTree>>,
    /// The specs the other members hold, as they last published them (by id).
    peers: Arc<crate::report::snapshot::PeerSpecs>,
    /// The newest revision's render read the live cluster (a chart's `lookup`).
    read_cluster: bool,
}

impl State {
    pub fn new(source_name: String, active: bool) -> State {
        State {
            source_name,
            instance: crate::object::ownership::DEFAULT_INSTANCE.to_string(),
            kubernetes: None,
            cluster: None,
            tree: None,
            pending: None,
            expected: Vec::new(),
            judged: health::Judged::default(),
            render_dirty: true,
            revision_applied: None,
            revision_current: None,
            revision_seen: None,
            seen_at: None,
            applied_at: None,
            latency_observed: false,
            errors: Vec::new(),
            nodes: Vec::new(),
            nodes_known: false,
            suspensions_known: false,
            recorded: HashMap::new(),
            actions: HashMap::new(),
            failures: HashMap::new(),
            warnings: HashMap::new(),
            live: LiveStore::default(),
            last_sync: None,
            refused: None,
            health: Vec::new(),
            health_dirty: true,
            active,
            leader_problem: None,
            cluster_error: None,
            cluster_away: None,
            sync_failed_specs: BTreeSet::new(),
            correct_drift: true,
            drifted: BTreeMap::new(),
            replicas_wanted: HashMap::new(),
            recheck: BTreeSet::new(),
            suspensions: Suspensions::new(),
            asked: Suspensions::new(),
            declared: Suspensions::new(),
            tree_read_at: String::new(),
            syncing: false,
            running: None,
            render_epoch: 0,
            rendered: None,
            requeue: Vec::new(),
            seen_in_sync: HashMap::new(),
            herald: notices::Herald::default(),
            settling: settled::Settling::default(),
            shard: None,
            shard_status: None,
            whole: None,
            peers: Arc::default(),
            read_cluster: false,
        }
    }

    /// What the status file shows of this state.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            source: &self.source_name,
            revision_seen: self.revision_seen.as_deref(),
            revision_applied: self.revision_applied.as_deref(),
            last_sync: self.last_sync.as_ref(),
            errors: &self.errors,
            cluster_error: self.cluster_error.as_deref(),
            cluster_away: self
                .cluster_away
                .as_ref()
                .map(|(reason, why)| (*reason, why.as_str())),
            kubernetes: self.kubernetes.as_deref(),
            cluster: self.cluster.as_deref(),
            specs: self.specs(),
            rendered: self
                .tree
                .as_deref()
                .map_or(&NO_RENDERS, |t| t.rendered.as_ref()),
            rendered_apps: self
                .tree
                .as_deref()
                .map_or(&NO_APPS, |t| t.rendered_apps.as_ref()),
            health: &self.health,
            expected: &self.expected,
            actions: &self.actions,
            failures: &self.failures,
            warnings: &self.warnings,
            instance: &self.instance,
            settled_in: self.settling.settled_in(),
            leader: self.active,
            leader_problem: self.leader_problem.as_deref(),
            shard: self.shard_status.as_ref(),
            shared: self
                .whole
                .as_deref()
                .filter(|_| self.shard.is_some())
                .map(|whole| crate::report::snapshot::Shared {
                    whole: &whole.specs,
                    peers: &self.peers,
                }),
            suspensions: &self.suspensions,
            drifted: &self.drifted,
            syncing: self.syncing,
            // The loop adds what the running sync is doing (its task keeps it).
            sync_progress: None,
            correct_drift: self.correct_drift,
        }
    }

    /// At a resync: whether the source is to render its revision again, with a new
    /// reading of the cluster. Only a revision whose render read the cluster (a chart's
    /// `lookup`) can render to something else while the revision stays: what it read may
    /// have changed since. Any other is never rendered again for it (its renders would
    /// all come from the cache), and a standby, which applies nothing, does not read the
    /// cluster for a render it would not use.
    pub(crate) fn render_again(&self) -> bool {
        self.active && self.read_cluster
    }

    /// The newest revision read from the source, valid or not.
    pub fn revision_seen(&self) -> Option<&str> {
        self.revision_seen.as_deref()
    }

    pub fn specs(&self) -> &[Spec] {
        self.tree.as_deref().map_or(&[], |t| t.specs.as_slice())
    }

    /// A standby is ready once warm: it has read its source, serves metrics and waits
    /// to lead.
    /// This replica writes (it leads, or no election is held).
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    pub(crate) fn warm_standby(&self) -> bool {
        !self.active && self.revision_seen.is_some()
    }

    pub fn due(&self) -> Due {
        if !self.nodes_known || !self.suspensions_known {
            Due::Later
        } else if !self.active || self.tree.is_none() {
            Due::Drop
        } else if self.live.awaiting_first_lists() {
            Due::Later
        } else {
            Due::Sync
        }
    }

    /// The current revision is applied from now on; returns it if that is news.
    fn mark_applied(&mut self, now: Now) -> Option<String> {
        if self.revision_applied == self.revision_current {
            return None;
        }
        self.revision_applied = self.revision_current.clone();
        self.applied_at = Some(now.at);
        self.revision_applied.clone()
    }

    pub fn last_sync(&self) -> Option<&LastSync> {
        self.last_sync.as_ref()
    }

    /// What the tree renders to, as readiness needs it.
    pub fn expected(&self) -> &[health::Expected] {
        &self.expected
    }

    /// What the tree renders to from now on.
    pub(crate) fn set_expected(&mut self, expected: Vec<health::Expected>) {
        self.replicas_wanted = expected
            .iter()
            .filter_map(|e| Some((e.key.clone(), e.replicas?)))
            .collect();
        // A resync renders the same objects again: the ready verdicts stand (those of
        // specs that changed went with the tree). At 10,000 specs judging them all
        // again was a sixth of a no-op resync's CPU.
        if self.expected != expected {
            self.judged.clear();
        }
        self.expected = expected;
    }

    /// The specs whose `depends-on` are not all ready, with what they wait for: not
    /// applied (nor pruned) until they are.
    pub fn waiting(&self) -> BTreeMap<SpecId, Vec<SpecId>> {
        match &self.tree {
            Some(tree) => readiness::waiting_on(tree, &self.health, &self.ready_elsewhere()),
            None => BTreeMap::new(),
        }
    }

    /// A change of leadership; a new leader syncs the whole tree.
    pub(crate) fn on_leadership(&mut self, active: bool) -> Option<Key> {
        let key = if active && !self.active {
            tracing::info!("became leader: syncing");
            Some(Key::Full)
        } else {
            if !active && self.active {
                tracing::info!("lost leadership: standing by");
            }
            None
        };
        self.active = active;
        key
    }
}

/// The specs `new` adds, removes or changes relative to `old`.
fn changed_specs(old: &SpecTree, new: &SpecTree) -> BTreeSet<SpecId> {
    let before: HashMap<&SpecId, &Spec> = old.specs.iter().map(|s| (&s.id, s)).collect();
    let after: HashMap<&SpecId, &Spec> = new.specs.iter().map(|s| (&s.id, s)).collect();
    let mut out: BTreeSet<SpecId> = BTreeSet::new();
    for (id, spec) in &after {
        if before.get(id) != Some(spec) {
            out.insert((*id).clone());
        }
    }
    out.extend(
        before
            .keys()
            .filter(|id| !after.contains_key(*id))
            .map(|id| (*id).clone()),
    );
    out
}

#[cfg(test)]
mod tests;
