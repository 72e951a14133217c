//! The sync running beside the loop, as the loop holds it: its start (the keys that came
//! due), the loop telling it to stop, and its end (taken into the state, its keys settled,
//! the drift it met put in the ledger, whoever waited for it answered).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::Instrument as _;

use tokio::sync::{oneshot, watch as tokio_watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Loop;
use crate::apply::{SyncReport, Verb};
use crate::daemon::queue::Key;
use crate::daemon::state::{Cancel, Due, SyncEnd};
use crate::daemon::sync::{self, Finished, Prepared, SyncError};
use crate::daemon::{labeller, ledger, now, record};
use crate::gate::Progress;
use crate::report::api::NoSync;
use crate::report::status::{LastSync, SyncProgress};

/// How long a stopping daemon waits for its running sync to reach a safe point (it is
/// told at once; waits end at once, writes under way finish).
const STOP_WAIT: Duration = Duration::from_secs(4);

/// While a sync runs, its progress is written this often at most when it changes (and
/// at least every 10 s, as any status): a status of thousands of specs is not cheap to
/// write, and a wait's progress changes every poll.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The sync running beside the loop, as the loop holds it.
pub(in crate::daemon) struct Running {
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

/// The running sync's end (a task that panicked is a failed sync); never, without one.
pub(super) async fn ended(task: &mut Option<JoinHandle<Finished>>) -> Result<Finished, SyncError> {
    match task.as_mut() {
        Some(handle) => handle.await.map_err(SyncError::from),
        None => std::future::pending().await,
    }
}

impl Loop {
    /// The daemon is stopping: the running sync, if one is, is told to stop and waited
    /// for a little.
    pub(super) async fn stop_sync(&mut self, task: &mut Option<JoinHandle<Finished>>) {
        let Some(why) = self.state.on_shutdown() else {
            return;
        };
        self.tell_sync(&why);
        self.write_status();
        // Told at once, the sync ends its waits and finishes only the writes under
        // way; one that cannot is left (as safe as a crash: record-before-apply).
        match tokio::time::timeout(STOP_WAIT, ended(task)).await {
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

    /// Starts a sync of the keys that are due, as a task; returns it. Keys settled
    /// without the cluster (held specs, a render that failed) are followed up at once.
    pub(super) async fn sync_due(&mut self) -> Option<JoinHandle<Finished>> {
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
        let prepared = sync::prepare(&self.on.cluster, &mut self.state, keys);
        timeline.mark("rendered");
        let job = match prepared {
            Some(Prepared::Run(job)) => job,
            Some(Prepared::Done(outcome, tally)) => {
                record(&self.out.metrics, tally);
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
        self.on.first_lists_until = None;
        if let Some(notifier) = &self.out.notifier
            && let Some(notice) = self.state.on_sync_start(now())
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
        let task = tokio::spawn(
            sync::execute(
                self.on.cluster.clone(),
                // The buckets the job's objects were chosen by, not those held once the task
                // first runs.
                self.on.cluster.store(),
                job,
                limits,
                cancelled,
                progress,
            )
            // A fleet's daemon names the cluster on each line of the sync.
            .in_current_span(),
        );
        Some(task)
    }

    /// The running sync ended: its end goes to the state, its keys are settled (retried
    /// with backoff when they failed), and whoever waited for it hears how it went.
    pub(super) async fn on_finished(&mut self, done: Result<Finished, SyncError>) {
        let Some(running) = self.running.take() else {
            return;
        };
        let mut timeline = crate::timeline::Timeline::start("daemon step");
        let mut history = None;
        let (outcome, tally) = match done {
            Ok(mut finished) => {
                if running.keys.contains(&Key::Full) && finished.result.is_ok() {
                    self.on.cluster.set_cut_short(false);
                }
                if let (Some(recorder), Ok(report)) = (&self.on.recorder, &finished.result) {
                    recorder.publish(report, self.state.sync_revision());
                }
                let revision = self.state.sync_revision().map(str::to_string);
                let changed: Vec<String> = match &finished.result {
                    Ok(report) => report
                        .objects
                        .iter()
                        .filter(|o| o.action.is_write())
                        .take(ledger::CHANGED_SHOWN)
                        .map(|o| format!("{}: {}", o.key, o.action.label()))
                        .collect(),
                    Err(_) => Vec::new(),
                };
                if let Ok(report) = &finished.result {
                    self.record_drift(report, &revision);
                }
                history = Some((revision, changed));
                let keys = std::mem::take(&mut finished.keys);
                self.state.on_held_applied(&finished.held_applied);
                let end = finished.take_end();
                self.state.on_sync_done(&keys, end, now())
            }
            Err(e) => {
                // Stopped wherever it was: what it wrote last may be unrecorded.
                self.on.cluster.set_cut_short(true);
                tracing::error!(error = %e, "sync failed");
                let end = SyncEnd::Failed {
                    message: e.to_string(),
                    elapsed: Duration::ZERO,
                    away: None,
                };
                self.state.on_sync_done(&running.keys, end, now())
            }
        };
        if let (Some((revision, changed)), Some(last)) = (history, self.state.last_sync()) {
            self.out
                .ledger
                .record_sync(ledger::history_of(last, revision, changed));
        }
        timeline.mark("sync's end taken");
        record(&self.out.metrics, tally);
        self.settle(outcome);
        self.answer(running.answered);
        self.after_sync().await;
        timeline.mark("after the sync");
    }

    /// Every drift the sync met goes into the ledger; a new one is counted and told.
    fn record_drift(&mut self, report: &SyncReport, revision: &Option<String>) {
        let now = k8s_openapi::jiff::Timestamp::now();
        for o in &report.objects {
            let Some(seen) = &o.drift else { continue };
            let corrected = o.action.is_write();
            if let Some(new) = self
                .out
                .ledger
                .record(&o.key, &o.spec, seen, corrected, now)
            {
                self.out.metrics.drift_recorded();
                if let Some(notifier) = &self.out.notifier {
                    notifier.send(ledger::notice_of(&new, revision.clone()));
                }
            }
        }
    }

    /// Whether the running sync is of the whole tree.
    pub(super) fn running_whole(&self) -> bool {
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
            let total = self.on.cluster.writes.get(verb);
            let seen = self.on.writes_seen.entry(verb.as_str()).or_insert(0);
            self.out
                .metrics
                .add_api_writes(verb.as_str(), total - *seen);
            *seen = total;
        }
        // Not before the sync: the live objects their lists bring in would come on top
        // of the sync's peak (206-217 MiB against 155-178 at 10,000 specs).
        let kinds = self
            .state
            .expected()
            .iter()
            .map(|e| (e.api_version.as_str(), e.key.kind.as_str()));
        let watched = self.on.cluster.resolved_kinds(kinds).await;
        self.on.owned.set(&watched);
        self.state.live.watching(
            watched
                .iter()
                .map(|r| (r.resource.group.clone(), r.resource.kind.clone())),
        );
        let _ = self
            .on
            .selectors
            .send(labeller::selectors_of(self.state.specs()));
        self.out.ready.store(true, Ordering::Relaxed);
        self.write_status();
    }

    /// Stops the running sync when what just changed calls for it (a newer revision,
    /// lost leadership).
    pub(super) fn cancel_if_due(&mut self) {
        if let Some(why) = self.state.cancel_due() {
            self.tell_sync(&why);
        }
    }

    /// Tells the running sync to stop, and why.
    pub(super) fn tell_sync(&mut self, why: &Cancel) {
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

    /// The running sync's progress, as the status is to show it now.
    pub(super) fn progress_to_write(&mut self) -> Option<SyncProgress> {
        self.running.as_mut().and_then(|r| {
            let p = r.progress.lock().ok()?.clone();
            r.written = Some(p.clone());
            r.written_at = Instant::now();
            Some(p)
        })
    }

    /// Whether the running sync's progress changed since it was last written, and is
    /// due to be written again.
    pub(super) fn progressed(&self) -> bool {
        let Some(running) = &self.running else {
            return false;
        };
        running.written_at.elapsed() >= PROGRESS_EVERY
            && running
                .progress
                .lock()
                .is_ok_and(|p| running.written.as_ref() != Some(&*p))
    }
}
