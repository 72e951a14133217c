//! The loop: one task owns the state and the queue, and waits on the source, the watches,
//! the queue's next due key, the resync and refresh timers, leadership and the running
//! sync. A sync runs as a task beside the loop (`sync::execute`), so the loop keeps
//! serving the status, the API and new revisions while it runs; it reports back when it
//! ends, and the loop tells it to stop when a newer revision supersedes it, leadership is
//! lost or the daemon stops. One sync runs at a time (objects within it in parallel,
//! bounded), so the inventory has a single writer: keys that come due meanwhile (drift
//! corrections, a resync) wait in the queue behind it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch as tokio_watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

mod running;
mod share;

use super::events::Events;
use super::queue::{Key, Queue};
use super::shards::ShardView;
use super::source::Rescan;
use super::state::{SourceUpdate, State};
use super::sync::Finished;
use super::{Config, labeller, readiness, record, watch};
use crate::apply::Cluster;
use crate::report::api::{Control, NoSync};
use crate::report::metrics::Metrics;
use crate::report::notify::Notifier;
use crate::report::snapshot::StatusWriter;
use crate::report::status::LastSync;
use running::{Running, ended};
pub(super) use share::ShardLink;
use share::{ShardNews, shard_news};

pub(super) struct Loop {
    pub(super) cfg: Config,
    /// Its one cluster and what the loop keeps of it.
    pub(super) on: OnCluster,
    /// Where what the loop knows is told: metrics, probes, the status, notifications.
    pub(super) out: Outputs,
    pub(super) state: State,
    pub(super) queue: Queue,
    /// Asks the source to read again (the directory; git fetches).
    pub(super) rescan: mpsc::Sender<Rescan>,
    /// The API's way in (and the loop's own, once a requested read is done).
    pub(super) control: mpsc::Sender<Control>,
    /// Who waits for the next whole sync to end (`POST /api/v1/sync?wait=true`).
    pub(super) waiting: Vec<oneshot::Sender<Result<LastSync, NoSync>>>,
    /// The sync running beside the loop, if one is.
    pub(super) running: Option<Running>,
    /// While replicas share the tree: what this one may write, and where the loop says
    /// what it no longer writes beyond (`shards`).
    pub(super) shard: Option<ShardLink>,
    /// A share that takes buckets away, waiting for the running sync to stop.
    pub(super) share_due: Option<ShardView>,
}

/// What the loop holds of one cluster: the handle, the watches of the kinds it owns
/// there, the labeller's selectors, the Events recorder, what it counted of the writes
/// and how long a restart waits for the first lists. A daemon of several clusters
/// holds one of these each.
pub(super) struct OnCluster {
    pub(super) cluster: Cluster,
    pub(super) owned: watch::OwnedWatches,
    pub(super) selectors: tokio_watch::Sender<labeller::Selectors>,
    pub(super) recorder: Option<Events>,
    /// The engine's write counters as last added to the metrics.
    pub(super) writes_seen: BTreeMap<&'static str, u64>,
    /// Until when a restart's first sync waits for its watches' lists (`restart`).
    pub(super) first_lists_until: Option<Instant>,
}

/// Where the loop tells what it knows, none of which it reads back.
pub(super) struct Outputs {
    pub(super) metrics: Arc<Metrics>,
    /// What `/readyz` answers.
    pub(super) ready: Arc<AtomicBool>,
    pub(super) status: StatusWriter,
    /// Where transitions are told (webhooks, chat, commit statuses), if anywhere.
    pub(super) notifier: Option<Notifier>,
    /// What the object view renders a spec from: the tree and nodes, as they change.
    pub(super) desired: tokio_watch::Sender<Option<super::inspect::Desired>>,
    /// Every drift a sync met (`GET /api/v1/drift`).
    pub(super) ledger: super::ledger::Ledger,
}

impl Loop {
    pub async fn run(
        mut self,
        mut src_rx: mpsc::Receiver<SourceUpdate>,
        mut ev_rx: mpsc::Receiver<watch::Event>,
        (mut control_rx, mut audit_rx): (
            mpsc::Receiver<Control>,
            mpsc::Receiver<crate::report::audit::AuditRecord>,
        ),
        (mut active_rx, mut lease_rx): (
            tokio_watch::Receiver<bool>,
            tokio_watch::Receiver<Option<String>>,
        ),
        stop_rx: tokio_watch::Receiver<bool>,
    ) {
        let resync_every = self.cfg.resync;
        let mut resync = tokio::time::interval_at(Instant::now() + resync_every, resync_every);
        let mut refresh = tokio::time::interval(Duration::from_secs(1));
        // A refresh that overran must not be followed at once by another (Burst, the
        // default, does that): the loop would spend its time refreshing, not draining
        // events.
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = stop_rx;
        let mut task: Option<JoinHandle<Finished>> = None;
        self.watch_recorded().await;
        loop {
            let next = self
                .queue
                .next_due()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                // The guard wait_for returns is dropped at once: the loop is Send.
                () = super::stopped(stop.clone()) => break,
                Some(update) = src_rx.recv() => self.on_source(update),
                Some(control) = control_rx.recv() => self.on_control(control, &mut src_rx),
                Some(record) = audit_rx.recv() => self.out.ledger.record_control(record),
                Some(ev) = ev_rx.recv() => {
                    let listed = matches!(ev, watch::Event::Listed(_));
                    if let Some(key) = self.state.on_event(ev) {
                        // A short delay batches a burst of events into one sync.
                        self.queue.push(key, Instant::now() + Duration::from_millis(100));
                    }
                    // Readiness now, not a second later: after a restart, the last
                    // kind's list is what the status waits for. Lists that end
                    // together share one refresh.
                    if listed {
                        refresh.reset_immediately();
                        // A restart's first sync waited for this list: it goes now.
                        if self.on.first_lists_until.is_some() && self.state.live.watches_listed() {
                            self.queue.push(Key::Full, Instant::now());
                        }
                    }
                }
                // Keys that come due while a sync runs wait for it to end.
                _ = tokio::time::sleep_until(next), if task.is_none() => {
                    task = self.sync_due().await;
                }
                done = ended(&mut task) => {
                    task = None;
                    // The resync period counts from the end of the last whole sync, as
                    // Flux's interval does: a first sync longer than the period was
                    // followed at once by a whole resync, which listed every kind beside
                    // the watches' first lists (at 10,000 specs, 48 MiB on top of the
                    // first sync's peak).
                    if self.running_whole() {
                        resync.reset();
                    }
                    self.on_finished(done).await;
                    // Before any other sync can start.
                    if let Some(view) = self.share_due.take() {
                        self.take_share(view);
                    }
                }
                _ = resync.tick() => {
                    // The directory is re-read too: a safety net for missed watch events.
                    // A render that read the cluster is made again, with what it reads now.
                    let _ = self.rescan.try_send(Rescan {
                        done: None,
                        render_again: self.state.render_again(),
                    });
                    // A whole sync under way is this period's; its end starts the next.
                    if !self.running_whole() {
                        self.queue.push(Key::Full, Instant::now());
                    }
                }
                _ = refresh.tick() => {
                    if self.state.health_dirty && !self.state.judging_held() {
                        self.refresh_health().await;
                        self.write_status();
                    } else if self.out.status.failing() || self.out.status.due() || self.progressed() {
                        self.write_status();
                    }
                }
                Ok(()) = active_rx.changed() => {
                    let active = *active_rx.borrow_and_update();
                    if let Some(key) = self.state.on_leadership(active) {
                        self.queue.push(key, Instant::now());
                    }
                    self.cancel_if_due();
                    self.write_status();
                }
                news = shard_news(&mut self.shard) => match news {
                    ShardNews::Share(view) => self.on_share(view, &task),
                    ShardNews::Peers(peers) => self.on_peers(peers),
                },
                Ok(()) = lease_rx.changed() => {
                    self.state.leader_problem = lease_rx.borrow_and_update().clone();
                    self.write_status();
                }
            }
        }
        tracing::info!("shutting down");
        self.stop_sync(&mut task).await;
        // Writes nothing more: a member gives its buckets up now.
        if let Some(link) = &self.shard {
            let _ = link.confirmed.send(BTreeSet::new());
        }
        for w in self.waiting.drain(..) {
            let _ = w.send(Err(NoSync::Stopping));
        }
        // The final status reflects every change already reported, not a stale copy.
        while let Ok(ev) = ev_rx.try_recv() {
            self.state.on_event(ev);
        }
        self.state.health_dirty = true;
        self.refresh_health().await;
        self.write_status();
    }

    /// A request from the API. "Sync now" first has the source read again; once that read
    /// reached the loop, a whole sync is queued and the caller waits for it. "Read now"
    /// (a `?wait=ready`) answers, once its read reached the loop, with the revision seen.
    fn on_control(&mut self, control: Control, src_rx: &mut mpsc::Receiver<SourceUpdate>) {
        match control {
            // A sync asked for is a resync now: a render that read the cluster is made again.
            Control::Sync { done } => {
                let again = self.state.render_again();
                self.read_then(Control::SourceRead { done }, again)
            }
            Control::Read { done } => self.read_then(Control::ReadDone { done }, false),
            Control::ReadDone { done } => {
                while let Ok(update) = src_rx.try_recv() {
                    self.on_source(update);
                }
                let _ = done.send(self.state.revision_seen().map(str::to_string));
            }
            Control::SourceRead { done } => {
                // What the read found was sent before it said it was done: take it first,
                // so the sync below covers it.
                while let Ok(update) = src_rx.try_recv() {
                    self.on_source(update);
                }
                tracing::info!("sync requested through the API");
                self.queue.push(Key::Full, Instant::now());
                self.waiting.extend(done);
            }
        }
    }

    /// Has the source read again (and render again: `render_again`), then hands `then`
    /// back to the loop.
    fn read_then(&self, then: Control, render_again: bool) {
        let (tx, rx) = oneshot::channel();
        let rescan = Rescan {
            done: Some(tx),
            render_again,
        };
        if self.rescan.try_send(rescan).is_err() {
            // Reads are already queued; what follows comes after them closely enough.
            tracing::debug!("source read already queued");
        }
        let control = self.control.clone();
        tokio::spawn(async move {
            // A read that never answers (git hanging) still ends in `then`.
            let _ = tokio::time::timeout(Duration::from_secs(120), rx).await;
            let _ = control.send(then).await;
        });
    }

    fn on_source(&mut self, update: SourceUpdate) {
        let (keys, tally) = self.state.on_source(update, &self.cfg.policy, super::now());
        record(&self.out.metrics, tally);
        // A revision with something to sync supersedes the running sync of an older one.
        let news = !keys.is_empty();
        for key in keys {
            self.queue.push(key, Instant::now());
        }
        if news {
            self.cancel_if_due();
        }
        if self.state.warm_standby() {
            self.out.ready.store(true, Ordering::Relaxed);
        }
        self.write_status();
    }

    async fn refresh_health(&mut self) {
        let mut timeline = crate::timeline::Timeline::start("daemon step");
        let released = readiness::refresh(
            &self.on.cluster,
            &mut self.state,
            &self.out.metrics,
            self.cfg.ready_timeout,
        )
        .await;
        timeline.mark("readiness refreshed");
        for spec in released {
            tracing::info!(spec = %spec, "its dependencies are ready");
            self.queue.push(Key::Spec(spec), Instant::now());
        }
    }

    /// Writes the status file, and tells the receivers what changed: every transition
    /// of the state passes through here.
    fn write_status(&mut self) {
        let mut timeline = crate::timeline::Timeline::start("daemon step");
        let progress = self.progress_to_write();
        self.out.desired.send_if_modified(|d| {
            let same = match (d.as_ref(), &self.state.tree) {
                (Some(d), Some(t)) => Arc::ptr_eq(&d.tree, t) && d.nodes == self.state.nodes,
                (None, None) => true,
                _ => false,
            };
            if !same {
                *d = self.state.tree.clone().map(|tree| super::inspect::Desired {
                    tree,
                    nodes: self.state.nodes.clone(),
                });
            }
            !same
        });
        // Before the first sync the state knows of no drift yet: what stands in the
        // ledger from before a restart is judged by that sync, not taken as corrected.
        if self.out.ledger.standing() && self.state.last_sync().is_some() {
            let drifted = self.state.drifted_objects();
            self.out
                .ledger
                .settle(|o| drifted.contains(o), k8s_openapi::jiff::Timestamp::now());
        }
        let mut snapshot = self.state.snapshot();
        snapshot.sync_progress = progress.as_ref();
        self.out.status.write(&snapshot, &self.out.metrics);
        timeline.mark("status written");
        if let Some(notifier) = &self.out.notifier {
            for notice in self.state.take_notices(super::now()) {
                notifier.send(notice);
            }
        }
    }
}
