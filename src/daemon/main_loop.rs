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
use tokio::time::Instant;

use tokio::task::JoinHandle;

use super::events::Events;
use super::queue::{Key, Queue};
use super::shards::ShardView;
use super::source::Rescan;
use super::state::{Cancel, Due, SourceUpdate, State};
use super::sync::{Finished, Prepared, SyncError};
use super::{Config, labeller, readiness, record, sync, watch};
use crate::apply::{Engine, Verb};
use crate::gate::Progress;
use crate::report::api::{Control, NoSync};
use crate::report::metrics::Metrics;
use crate::report::notify::Notifier;
use crate::report::snapshot::StatusWriter;
use crate::report::status::{LastSync, SyncProgress};

/// How long a stopping daemon waits for its running sync to reach a safe point (it is
/// told at once; waits end at once, writes under way finish).
const STOP_WAIT: Duration = Duration::from_secs(4);

/// While a sync runs, its progress is written this often at most when it changes (and
/// at least every 10 s, as any status): a status of thousands of specs is not cheap to
/// write, and a wait's progress changes every poll.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The sync running beside the loop, as the loop holds it.
pub(super) struct Running {
    keys: Vec<Key>,
    /// Tells the sync why it is to stop.
    cancel: tokio_watch::Sender<Option<String>>,
    progress: Progress,
    /// Who waits for this sync to end (`POST /api/v1/sync?wait=true`).
    answered: Vec<oneshot::Sender<Result<LastSync, NoSync>>>,
    /// The progress as last written into the status.
    written: Option<SyncProgress>,
    written_at: Instant,
}

pub(super) struct Loop {
    pub cfg: Config,
    pub engine: Arc<Engine>,
    pub recorder: Option<Events>,
    pub metrics: Arc<Metrics>,
    /// What `/readyz` answers.
    pub ready: Arc<AtomicBool>,
    pub state: State,
    pub queue: Queue,
    pub owned: watch::OwnedWatches,
    pub selectors: tokio_watch::Sender<labeller::Selectors>,
    /// Asks the source to read again (the directory; git fetches).
    pub rescan: mpsc::Sender<Rescan>,
    pub status: StatusWriter,
    /// Where transitions are told (webhooks, chat, commit statuses), if anywhere.
    pub notifier: Option<Notifier>,
    /// What the object view renders a spec from: the tree and nodes, as they change.
    pub desired: tokio_watch::Sender<Option<super::inspect::Desired>>,
    /// Every drift a sync met (`GET /api/v1/drift`).
    pub ledger: super::ledger::Ledger,
    /// The API's way in (and the loop's own, once a requested read is done).
    pub control: mpsc::Sender<Control>,
    /// Who waits for the next whole sync to end (`POST /api/v1/sync?wait=true`).
    pub waiting: Vec<oneshot::Sender<Result<LastSync, NoSync>>>,
    /// The engine's write counters as last added to the metrics.
    pub writes_seen: BTreeMap<&'static str, u64>,
    /// The sync running beside the loop, if one is.
    pub running: Option<Running>,
    /// While replicas share the tree: what this one may write, and where the loop says
    /// what it no longer writes beyond (`shards`).
    pub shard: Option<ShardLink>,
    /// A share that takes buckets away, waiting for the running sync to stop.
    pub share_due: Option<ShardView>,
    /// Until when a restart's first sync waits for its watches' lists (`restart`).
    pub first_lists_until: Option<Instant>,
}

/// The loop's side of the member's coordinator (`shards`).
pub(super) struct ShardLink {
    /// What this replica may write.
    pub view: tokio_watch::Receiver<ShardView>,
    /// What the loop no longer writes beyond.
    pub confirmed: tokio_watch::Sender<BTreeSet<u16>>,
    /// The other members' specs, as they published them.
    pub peers: tokio_watch::Receiver<crate::daemon::shards::Peers>,
}

/// What the member's coordinator tells the loop.
enum ShardNews {
    /// This replica's share changed.
    Share(ShardView),
    /// The other members' specs changed.
    Peers(crate::daemon::shards::Peers),
}

/// The coordinator's next news, if the tree is shared (never, if not).
async fn shard_news(shard: &mut Option<ShardLink>) -> ShardNews {
    if let Some(link) = shard {
        tokio::select! {
            Ok(()) = link.view.changed() => {
                return ShardNews::Share(link.view.borrow_and_update().clone());
            }
            Ok(()) = link.peers.changed() => {
                return ShardNews::Peers(link.peers.borrow_and_update().clone());
            }
            // The member has ended (the loop is stopping).
            else => {}
        }
    }
    std::future::pending().await
}

/// The running sync's end (a task that panicked is a failed sync); never, without one.
async fn ended(task: &mut Option<JoinHandle<Finished>>) -> Result<Finished, SyncError> {
    match task.as_mut() {
        Some(handle) => handle.await.map_err(SyncError::from),
        None => std::future::pending().await,
    }
}

impl Loop {
    pub async fn run(
        mut self,
        mut src_rx: mpsc::Receiver<SourceUpdate>,
        mut ev_rx: mpsc::Receiver<watch::Event>,
        mut control_rx: mpsc::Receiver<Control>,
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
        let mut stop = stop_rx;
        let mut task: Option<JoinHandle<Finished>> = None;
        self.watch_recorded().await;
        loop {
            let next = self
                .queue
                .next_due()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                Some(update) = src_rx.recv() => self.on_source(update),
                Some(control) = control_rx.recv() => self.on_control(control, &mut src_rx),
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
                        if self.first_lists_until.is_some() && self.state.watches_listed() {
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
                    } else if self.status.failing() || self.status.due() || self.progressed() {
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
                    ShardNews::Peers(peers) => {
                        for spec in self.state.on_peers(peers) {
                            tracing::info!(spec = %spec, "its dependencies are ready");
                            self.queue.push(Key::Spec(spec), Instant::now());
                        }
                        self.write_status();
                    }
                },
                Ok(()) = lease_rx.changed() => {
                    self.state.leader_problem = lease_rx.borrow_and_update().clone();
                    self.write_status();
                }
            }
        }
        tracing::info!("shutting down");
        if let Some(why) = self.state.on_shutdown() {
            self.tell_sync(&why);
            self.write_status();
            // Told at once, the sync ends its waits and finishes only the writes under
            // way; one that cannot is left (as safe as a crash: record-before-apply).
            match tokio::time::timeout(STOP_WAIT, ended(&mut task)).await {
                Ok(done) => self.on_finished(done).await,
                Err(_) => {
                    tracing::warn!("the running sync did not stop in time; abandoned");
                    if let Some(running) = self.running.take() {
                        for w in running.answered {
                            let _ = w.send(Err(NoSync::Stopping));
                        }
                    }
                }
            }
        }
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
        record(&self.metrics, tally);
        // A revision with something to sync supersedes the running sync of an older one.
        let news = !keys.is_empty();
        for key in keys {
            self.queue.push(key, Instant::now());
        }
        if news {
            self.cancel_if_due();
        }
        if self.state.warm_standby() {
            self.ready.store(true, Ordering::Relaxed);
        }
        self.write_status();
    }

    /// Starts a sync of the keys that are due, as a task; returns it. Keys settled
    /// without the cluster (held specs, a render that failed) are followed up at once.
    async fn sync_due(&mut self) -> Option<JoinHandle<Finished>> {
        let keys = self.queue.take_due(Instant::now());
        let mut due = self.state.due();
        if matches!(due, Due::Later) && self.lists_overdue() {
            due = self.state.due();
        }
        match due {
            Due::Sync => {}
            Due::Later => {
                for k in keys {
                    self.queue
                        .push(k, Instant::now() + Duration::from_millis(200));
                }
                return None;
            }
            Due::Drop => {
                let why = if self.state.tree.is_none() {
                    NoSync::NoRevision
                } else {
                    NoSync::Standby
                };
                for w in self.waiting.drain(..) {
                    let _ = w.send(Err(why));
                }
                return None;
            }
        }
        let whole = keys.contains(&Key::Full);
        // Those waiting now wait for this sync if it is whole, else for the next.
        let answered: Vec<_> = if whole {
            std::mem::take(&mut self.waiting)
        } else {
            Vec::new()
        };
        let mut timeline = crate::timeline::Timeline::start("daemon step");
        let prepared = sync::prepare(&self.engine, &mut self.state, keys);
        timeline.mark("rendered");
        let job = match prepared {
            Some(Prepared::Run(job)) => job,
            Some(Prepared::Done(outcome, tally)) => {
                record(&self.metrics, tally);
                self.settle(outcome);
                self.answer(answered);
                self.after_sync().await;
                return None;
            }
            None => {
                self.answer(answered);
                return None;
            }
        };
        self.state.on_sync_begin();
        self.first_lists_until = None;
        if let Some(notifier) = &self.notifier
            && let Some(notice) = self.state.on_sync_start(super::now())
        {
            notifier.send(notice);
        }
        let (cancel, cancelled) = tokio_watch::channel(None);
        let progress: Progress = Arc::new(std::sync::Mutex::new(SyncProgress {
            revision: self.state.sync_revision().map(str::to_string),
            started: k8s_openapi::jiff::Timestamp::now().to_string(),
            phase: "starting".into(),
            ..SyncProgress::default()
        }));
        let limits = sync::Limits {
            sync: self.cfg.sync_timeout,
            stage: self.cfg.ready_timeout,
        };
        self.running = Some(Running {
            keys: job.keys.clone(),
            cancel,
            progress: progress.clone(),
            answered,
            written: None,
            written_at: Instant::now(),
        });
        // Before the spawn, not beside the sync: the status built and serialised (about
        // 25 MiB at 10,000 specs) and the sync's inventory read and plan otherwise stood
        // at once, the peak of a no-op resync (202 MiB against 150 at rest). It costs the
        // sync the 0.1 s the status takes.
        self.write_status();
        let task = tokio::spawn(sync::execute(
            self.engine.clone(),
            // The buckets the job's objects were chosen by, not those held once the task
            // first runs.
            self.engine.store(),
            job,
            limits,
            cancelled,
            progress,
        ));
        Some(task)
    }

    /// The running sync ended: its end goes to the state, its keys are settled (retried
    /// with backoff when they failed), and whoever waited for it hears how it went.
    async fn on_finished(&mut self, done: Result<Finished, SyncError>) {
        let Some(running) = self.running.take() else {
            return;
        };
        let mut timeline = crate::timeline::Timeline::start("daemon step");
        let mut history = None;
        let (outcome, tally) = match done {
            Ok(mut finished) => {
                if let (Some(recorder), Ok(report)) = (&self.recorder, &finished.result) {
                    recorder.publish(report, self.state.sync_revision());
                }
                let revision = self.state.sync_revision().map(str::to_string);
                let changed: Vec<String> = match &finished.result {
                    Ok(report) => report
                        .objects
                        .iter()
                        .filter(|o| o.action.is_write())
                        .take(super::ledger::CHANGED_SHOWN)
                        .map(|o| format!("{}: {}", o.key, o.action.label()))
                        .collect(),
                    Err(_) => Vec::new(),
                };
                if let Ok(report) = &finished.result {
                    let now = k8s_openapi::jiff::Timestamp::now();
                    for o in &report.objects {
                        let Some(seen) = &o.drift else { continue };
                        let corrected = o.action.is_write();
                        if let Some(new) = self.ledger.record(&o.key, &o.spec, seen, corrected, now)
                        {
                            self.metrics.drift_recorded();
                            if let Some(notifier) = &self.notifier {
                                notifier.send(super::ledger::notice_of(&new, revision.clone()));
                            }
                        }
                    }
                }
                history = Some((revision, changed));
                let keys = std::mem::take(&mut finished.keys);
                self.state.on_held_applied(&finished.held_applied);
                let end = finished.take_end();
                self.state.on_sync_done(&keys, end, super::now())
            }
            Err(e) => {
                tracing::error!(error = %e, "sync failed");
                let end = super::state::SyncEnd::Failed {
                    message: e.to_string(),
                    elapsed: Duration::ZERO,
                };
                self.state.on_sync_done(&running.keys, end, super::now())
            }
        };
        if let (Some((revision, changed)), Some(last)) = (history, self.state.last_sync()) {
            self.ledger
                .record_sync(super::ledger::history_of(last, revision, changed));
        }
        timeline.mark("sync's end taken");
        record(&self.metrics, tally);
        self.settle(outcome);
        self.answer(running.answered);
        self.after_sync().await;
        timeline.mark("after the sync");
    }

    /// Whether the running sync is of the whole tree.
    fn running_whole(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| r.keys.contains(&Key::Full))
    }

    /// Each key's success: a failed one is retried with backoff.
    fn settle(&mut self, outcome: Vec<(Key, bool)>) {
        for (key, ok) in outcome {
            if ok {
                self.queue.succeeded(&key);
            } else {
                let delay = self.queue.failed(key.clone(), Instant::now());
                tracing::info!(
                    sync = %key,
                    retry_in = %humantime::format_duration(Duration::from_millis(delay.as_millis() as u64)),
                    "sync failed; retried with backoff"
                );
            }
        }
    }

    /// Tells those who waited for a whole sync how it ended.
    fn answer(&self, answered: Vec<oneshot::Sender<Result<LastSync, NoSync>>>) {
        for w in answered {
            let _ = w.send(self.state.last_sync().cloned().ok_or(NoSync::Abandoned));
        }
    }

    /// What follows any sync: the keys to sync again at once, write counts, which kinds
    /// are watched, the localservice selectors, readiness and the status.
    async fn after_sync(&mut self) {
        for key in self.state.take_rechecks() {
            self.queue.push(key, Instant::now());
        }
        for verb in [Verb::Patch, Verb::Create, Verb::Delete] {
            let total = self.engine.writes.get(verb);
            let seen = self.writes_seen.entry(verb.as_str()).or_insert(0);
            self.metrics.add_api_writes(verb.as_str(), total - *seen);
            *seen = total;
        }
        // Not before the sync: the live objects their lists bring in would come on top
        // of the sync's peak (206-217 MiB against 155-178 at 10,000 specs).
        let kinds = self
            .state
            .expected()
            .iter()
            .map(|e| (e.api_version.as_str(), e.key.kind.as_str()));
        let watched = self.engine.resolved_kinds(kinds).await;
        self.owned.set(&watched);
        self.state.watching(
            watched
                .iter()
                .map(|r| (r.resource.group.clone(), r.resource.kind.clone())),
        );
        let _ = self
            .selectors
            .send(labeller::selectors_of(self.state.specs()));
        self.ready.store(true, Ordering::Relaxed);
        self.write_status();
    }

    /// This replica's share of a shared tree changed. Buckets taken away are written no
    /// more before the member is told so: a running sync is told to stop at its next safe
    /// point (aborted at once when the member's Lease lapsed: others may hold them
    /// already), and the share is taken when it has ended; the loop never waits for it.
    fn on_share(&mut self, view: ShardView, task: &Option<JoinHandle<Finished>>) {
        let before = self.state.shard_held().cloned().unwrap_or_default();
        let Some(running) = task.as_ref().filter(|_| !before.is_subset(&view.held)) else {
            self.share_due = None;
            self.take_share(view);
            return;
        };
        if view.urgent {
            running.abort();
        } else if let Some(why) = self.state.stop_running(Cancel::ShareChanged) {
            self.tell_sync(&why);
        }
        self.share_due = Some(view);
    }

    /// From now on the engine, the state and the member go by `view`.
    fn take_share(&mut self, view: ShardView) {
        let held = view.held.clone();
        self.engine.hold(Some(Arc::new(held.clone())));
        if let Some(key) = self.state.on_shard(view) {
            self.queue.push(key, Instant::now());
        }
        if let Some(link) = &self.shard {
            let _ = link.confirmed.send(held);
        }
        self.write_status();
    }

    /// Stops the running sync when what just changed calls for it (a newer revision,
    /// lost leadership).
    fn cancel_if_due(&mut self) {
        if let Some(why) = self.state.cancel_due() {
            self.tell_sync(&why);
        }
    }

    /// Tells the running sync to stop, and why.
    fn tell_sync(&mut self, why: &Cancel) {
        let Some(running) = &self.running else {
            return;
        };
        let reason = why.reason();
        tracing::info!(reason = %reason, "stopping the running sync");
        if let Ok(mut p) = running.progress.lock() {
            p.stopping = Some(reason.clone());
        }
        let _ = running.cancel.send(Some(reason));
    }

    /// Whether the running sync's progress changed since it was last written, and is
    /// due to be written again.
    fn progressed(&self) -> bool {
        let Some(running) = &self.running else {
            return false;
        };
        running.written_at.elapsed() >= PROGRESS_EVERY
            && running
                .progress
                .lock()
                .is_ok_and(|p| running.written.as_ref() != Some(&*p))
    }

    async fn refresh_health(&mut self) {
        let mut timeline = crate::timeline::Timeline::start("daemon step");
        let released = readiness::refresh(
            &self.engine,
            &mut self.state,
            &self.metrics,
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
        let progress = self.running.as_mut().and_then(|r| {
            let p = r.progress.lock().ok()?.clone();
            r.written = Some(p.clone());
            r.written_at = Instant::now();
            Some(p)
        });
        self.desired.send_if_modified(|d| {
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
        if self.ledger.standing() && self.state.last_sync().is_some() {
            let drifted = self.state.drifted_objects();
            self.ledger
                .settle(|o| drifted.contains(o), k8s_openapi::jiff::Timestamp::now());
        }
        let mut snapshot = self.state.snapshot();
        snapshot.sync_progress = progress.as_ref();
        self.status.write(&snapshot, &self.metrics);
        timeline.mark("status written");
        if let Some(notifier) = &self.notifier {
            for notice in self.state.take_notices(super::now()) {
                notifier.send(notice);
            }
        }
    }
}
