//! What a finished sync does to the state: what it recorded of each object, whether the
//! revision now counts as applied, and which keys are retried.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Cancel, Now, State, SyncCount, Tally};
use crate::apply::{Action, ObjectResult, SyncReport};
use crate::daemon::queue::Key;
use crate::health;
use crate::render::Object;
use crate::report::status::LastSync;
use crate::spec::SpecId;

/// How a sync ended, as the loop hands it over.
pub(crate) enum SyncEnd<'a> {
    /// Nothing was applied: the tree did not render, the engine failed, or the sync timed
    /// out. `away`: the cluster itself could not be reached or refused driftless's
    /// credentials (the reason the specs then say, `ClusterUnreachable`...).
    Failed {
        message: String,
        elapsed: Duration,
        away: Option<&'static str>,
    },
    /// The engine ran on `objects`.
    Ran {
        report: SyncReport,
        objects: &'a [Object],
        elapsed: Duration,
    },
}

impl State {
    /// Keys of suspended specs only, left alone: they count as done, as a whole sync
    /// counts the revision applied with its suspended specs left as they are (a resume
    /// syncs them).
    pub(crate) fn on_held(&mut self, keys: &[Key], now: Now) -> (Vec<(Key, bool)>, Tally) {
        let specs: BTreeSet<&SpecId> = keys.iter().filter_map(Key::spec).collect();
        let tally = Tally {
            applied: self.specs_done(&specs, now),
            ..Tally::default()
        };
        (keys.iter().map(|k| (k.clone(), true)).collect(), tally)
    }

    /// `specs` of a revision applied spec by spec are done; the revision, once none is
    /// left (if that is news).
    fn specs_done(&mut self, specs: &BTreeSet<&SpecId>, now: Now) -> Option<String> {
        let pending = self.pending.as_mut()?;
        pending.retain(|id| !specs.contains(id));
        if !pending.is_empty() {
            return None;
        }
        self.pending = None;
        self.mark_applied(now)
    }

    /// Takes a finished sync of `keys`; returns each key's success (a failed one is
    /// retried with backoff), with a whole sync added when a prune was refused.
    pub(crate) fn on_sync_done(
        &mut self,
        keys: &[Key],
        end: SyncEnd<'_>,
        now: Now,
    ) -> (Vec<(Key, bool)>, Tally) {
        let ended = self.sync_ended(keys);
        let (mut report, objects, elapsed) = match end {
            SyncEnd::Failed {
                message,
                elapsed,
                away,
            } => {
                if let Some(reason) = away {
                    self.cluster_away = Some((reason, message.clone()));
                    self.health_dirty = true;
                }
                return self.sync_failed(keys, ended.cancel.as_ref(), message, elapsed, now);
            }
            SyncEnd::Ran {
                report,
                objects,
                elapsed,
            } => (report, objects, elapsed),
        };
        // The engine ran: the cluster was reached.
        if self.cluster_away.take().is_some() {
            self.health_dirty = true;
        }
        let mut tally = Tally::default();
        let full = keys.contains(&Key::Full);
        let specs: BTreeSet<&SpecId> = keys.iter().filter_map(Key::spec).collect();
        let counts = self.record_objects(&mut report);
        if !full {
            // Writes for specs a new revision changed are not corrections of drift.
            tally.drift_corrections = report
                .objects
                .iter()
                .filter(|o| o.action.is_write())
                .filter(|o| !self.pending.as_ref().is_some_and(|p| p.contains(&o.spec)))
                .count() as u64;
        }
        let pruned = self.forget_pruned(&report);
        tally.pruned = pruned;
        let refused = report.prune.refused.is_some();
        // Stopped because it was told to: superseded (or stopped), not failed.
        let cancelled = ended.cancel.as_ref().filter(|_| report.stopped.is_some());
        let result = if let Some(c) = cancelled {
            c.result()
        } else if refused {
            "refused"
        } else if report.ok() {
            "success"
        } else {
            "failed"
        };
        tally.sync = Some(SyncCount {
            result,
            elapsed,
            at: now.wall,
        });
        self.last_sync = Some(LastSync {
            time: now.wall.to_string(),
            result: result.into(),
            duration_seconds: elapsed.as_secs_f64(),
            // What failed, what stopped the sync (a wave not ready, a hook failed), or
            // why its prune was refused.
            message: sync_message(&report),
            applied: counts.applied,
            unchanged: counts.unchanged,
            pruned,
            failed: counts.failed,
        });
        tally.applied = self.count_applied(&report, objects, &ended, full, &specs, now);
        // What this sync applied, without an error, reflects the current revision once
        // a readiness refresh has seen it (`settled`).
        if report.stopped.is_none() && ended.current {
            let held = self.held();
            let waiting = self.waiting();
            let covered: Vec<SpecId> = match full {
                true => self.specs().iter().map(|s| s.id.clone()).collect(),
                false => specs.iter().map(|s| (*s).clone()).collect(),
            };
            self.settling.on_synced(covered.iter().filter(|s| {
                !counts.failed_specs.contains(*s) && !held.contains(*s) && !waiting.contains_key(*s)
            }));
        }
        if full && self.correct_drift {
            self.recheck_scaled(&report);
        }
        self.judge_seen_in_sync();
        self.health_dirty = true;
        self.sync_failed_specs = counts.failed_specs.clone();
        // What a stopped sync left is taken up again by retrying its keys, with backoff.
        // One told to stop is not: its keys are synced again at once (`sync_ended`).
        let stopped = report.stopped.is_some() && cancelled.is_none();
        (outcome(keys, &report, &counts.failed_specs, stopped), tally)
    }

    /// The running sync is over: what it covered, weighed against what the state knows
    /// now. One of a revision no longer current, or told to stop, has its keys synced
    /// again at once.
    fn sync_ended(&mut self, keys: &[Key]) -> Ended {
        // The sync ran beside the loop: the state may have moved on meanwhile. What it
        // applied is recorded whatever happened; whether its revision (and render) count
        // as current is weighed against what the state knows now.
        let running = self.running.take();
        self.syncing = false;
        self.live.lists_not_awaited();
        let current = running
            .as_ref()
            .is_none_or(|r| r.revision == self.revision_current);
        let same_render = current
            && running
                .as_ref()
                .is_none_or(|r| r.render_epoch == self.render_epoch);
        let cancel = running.and_then(|r| r.cancel);
        if !current || cancel.is_some() {
            // Synced again at once, of the revision now current: a spec it left pending
            // must be synced to count as applied, and an unchanged one writes nothing.
            self.requeue.extend(keys.iter().cloned());
        }
        Ended {
            current,
            same_render,
            cancel,
        }
    }

    /// A sync that applied nothing (it did not render, the engine failed, it timed out,
    /// or it was stopped before it wrote).
    fn sync_failed(
        &mut self,
        keys: &[Key],
        cancel: Option<&Cancel>,
        message: String,
        elapsed: Duration,
        now: Now,
    ) -> (Vec<(Key, bool)>, Tally) {
        let (result, message) = match cancel {
            Some(c) => (c.result(), format!("{}: {message}", c.reason())),
            None => ("failed", message),
        };
        let tally = Tally {
            sync: Some(SyncCount {
                result,
                elapsed,
                at: now.wall,
            }),
            ..Tally::default()
        };
        self.last_sync = Some(LastSync {
            time: now.wall.to_string(),
            result: result.into(),
            duration_seconds: elapsed.as_secs_f64(),
            message: Some(message),
            applied: 0,
            unchanged: 0,
            pruned: 0,
            failed: 0,
        });
        self.sync_failed_specs.clear();
        self.judge_seen_in_sync();
        // A stopped sync is no failure: retried at once (`sync_ended`), not backed off.
        let ok = cancel.is_some();
        (keys.iter().map(|k| (k.clone(), ok)).collect(), tally)
    }

    /// Records what the sync did to each object, and counts it.
    fn record_objects(&mut self, report: &mut SyncReport) -> Counts {
        let mut counts = Counts::default();
        for o in report.objects.iter_mut() {
            match &o.action {
                Action::Unchanged => {
                    counts.unchanged += 1;
                    // The sync found it as we want it: a drift reported before (which a
                    // watch event cannot clear while nothing is recorded) is over.
                    self.drifted.remove(&o.key);
                }
                // Left as someone else set it: what we recorded stays our intent.
                Action::Drifted => {
                    counts.unchanged += 1;
                    self.drifted.insert(o.key.clone(), o.spec.clone());
                }
                a if a.is_write() => {
                    counts.applied += 1;
                    self.drifted.remove(&o.key);
                }
                _ => {
                    counts.failed += 1;
                    counts.failed_specs.insert(o.spec.clone());
                }
            }
            self.record_object(o);
        }
        counts
    }

    /// What the status shows of one object after the sync, what we recorded of it, and
    /// its live state until its watch reports it.
    fn record_object(&mut self, o: &mut ObjectResult) {
        // A sync that leaves an object as it was keeps on show the last change made
        // to it (created, updated, replaced): otherwise the first resync after a
        // start rewrites every spec's entry, and each open page is sent the whole
        // tree again, with nothing changed.
        let kept = o.action == Action::Unchanged
            && self
                .actions
                .get(&o.key)
                .is_some_and(|last| Action::is_write_label(last));
        if !kept {
            self.actions
                .insert(o.key.clone(), o.action.label().to_string());
        }
        // Said of a write, they stand until the next write (an unchanged object is
        // still as it was warned of).
        if o.action.is_write() {
            match o.warnings.is_empty() {
                true => self.warnings.remove(&o.key),
                false => self
                    .warnings
                    .insert(o.key.clone(), std::mem::take(&mut o.warnings)),
            };
        }
        match &o.action {
            Action::Failed(e) | Action::Conflict(e) => {
                self.failures.insert(o.key.clone(), e.clone());
            }
            _ => {
                self.failures.remove(&o.key);
            }
        }
        if !o.action.is_error()
            && o.action != Action::Drifted
            && let Some(fields) = o.fields.clone()
        {
            self.recorded
                .insert(o.key.clone(), (o.spec.clone(), fields.clone()));
            if o.action.is_write() {
                self.live.written(&o.key, &fields);
            }
            // The watches are the source of live state; what a write returned stands
            // in until the watch reports it (`LiveStore::offer`).
            // Moved, not copied: a sync's results hold every object it wrote.
            if let Some(view) = o.live.take() {
                self.live.offer(&o.key, view, fields);
            }
        }
    }

    /// Forgets what the sync pruned; returns how many it pruned.
    fn forget_pruned(&mut self, report: &SyncReport) -> u64 {
        for p in &report.prune.objects {
            self.recorded.remove(&p.key);
            self.warnings.remove(&p.key);
            self.live.forget(&p.key);
        }
        report.prune.pruned() as u64
    }

    /// What the sync did to the revision: what it renders to, once a whole sync of it
    /// ran, and whether it now counts as applied; returns it if that is news.
    fn count_applied(
        &mut self,
        report: &SyncReport,
        objects: &[Object],
        ended: &Ended,
        full: bool,
        specs: &BTreeSet<&SpecId>,
        now: Now,
    ) -> Option<String> {
        // A refused prune or a stopped sync leaves its revision not applied: retried.
        // So does one of a revision that is no longer current.
        let held_back =
            report.prune.refused.is_some() || report.stopped.is_some() || !ended.current;
        if full && ended.current {
            // What the watches follow (set from this right after the sync) and readiness
            // judge; rendered again before readiness reads it if the nodes changed since.
            if !health::expected_is(&self.expected, objects) {
                self.set_expected(health::expected(objects));
            }
            if ended.same_render {
                self.render_dirty = false;
            }
        }
        if full {
            // The specs pending now are a newer revision's, unless this one is current.
            if ended.current {
                self.pending = None;
            }
            if !held_back {
                return self.mark_applied(now);
            }
        } else if !held_back {
            // Like a whole sync, a spec counts as applied when its sync ran, failures and
            // all (they are in the status and retried with backoff).
            return self.specs_done(specs, now);
        }
        None
    }

    /// What a whole sync found unchanged but the watches show scaled: synced again by
    /// spec (`recheck`).
    fn recheck_scaled(&mut self, report: &SyncReport) {
        // A whole sync that lists reads objects as metadata only (one that takes the
        // watches' views sees replicas), so it cannot see replicas
        // changed through the scale subresource (no field ownership moves before
        // Kubernetes 1.22). A drift the watches reported while it was queued was
        // folded into it, and would be lost: what it found unchanged but the
        // watches show scaled is synced again by spec, which reads it whole.
        for o in report
            .objects
            .iter()
            .filter(|o| o.action == Action::Unchanged)
        {
            if self
                .live
                .get(&o.key)
                .is_some_and(|live| self.scaled(&o.key, &live.view))
            {
                self.recheck.insert(o.spec.clone());
            }
        }
    }
}

/// The sync that ended, as the state held it while it ran.
struct Ended {
    /// Its revision is still the current one.
    current: bool,
    /// So is what the tree renders to (no new revision, no change of nodes).
    same_render: bool,
    /// Why the loop told it to stop, if it did.
    cancel: Option<Cancel>,
}

/// What a sync did to its objects, counted.
#[derive(Default)]
struct Counts {
    applied: u64,
    unchanged: u64,
    failed: u64,
    /// The specs with objects it failed to apply.
    failed_specs: BTreeSet<SpecId>,
}

/// Each key's success, with a whole sync added when a prune was refused. `stopped`: the
/// sync stopped short of its end without being told to.
fn outcome(
    keys: &[Key],
    report: &SyncReport,
    failed_specs: &BTreeSet<SpecId>,
    stopped: bool,
) -> Vec<(Key, bool)> {
    let full = keys.contains(&Key::Full);
    let refused = report.prune.refused.is_some();
    // What a prune left being deleted (a finalizer) is not an error, but only a later
    // sync sees it gone and drops it from the inventory: the key is retried, with
    // backoff, until then.
    let waiting: BTreeSet<&str> = report.prune.waiting().map(|o| o.spec.as_str()).collect();
    let mut outcome: Vec<(Key, bool)> = keys
        .iter()
        .map(|k| {
            let ok = match k {
                Key::Full => !refused && !stopped && failed_specs.is_empty() && waiting.is_empty(),
                // A refused prune is retried by whole syncs (below), which also retry
                // these specs' failed objects: retried one by one with their own
                // backoff, the specs a revision removed would each prune a share
                // small enough to pass.
                Key::Spec(s) => {
                    (refused || !failed_specs.contains(s))
                        && !stopped
                        && !waiting.contains(s.to_string().as_str())
                }
            };
            (k.clone(), ok)
        })
        .collect();
    if refused && !full {
        outcome.push((Key::Full, false));
    }
    outcome
}

/// What `last_sync.message` says of a sync: the objects that failed (the first few, with
/// why), what stopped it, why its prune was refused; `None` when all went well.
fn sync_message(report: &crate::apply::SyncReport) -> Option<String> {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = report
        .held
        .iter()
        .map(|(app, why)| {
            format!("app {app} held, neither applied nor pruned: the apiserver refused {why}")
        })
        .collect();
    let failed: Vec<String> = report
        .objects
        .iter()
        .filter_map(|o| match &o.action {
            Action::Failed(e) | Action::Conflict(e) => Some(format!("{}: {e}", o.key)),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        let more = match failed.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!("; and {n} more"),
        };
        let noun = if failed.len() == 1 {
            "object"
        } else {
            "objects"
        };
        parts.push(format!(
            "{} {noun} not applied: {}{more}",
            failed.len(),
            failed[..failed.len().min(SHOWN)].join("; ")
        ));
    }
    for failed_prune in report
        .prune
        .objects
        .iter()
        .filter(|p| matches!(p.action, crate::apply::prune::PruneAction::Failed(_)))
    {
        parts.push(format!("{}: {}", failed_prune.key, failed_prune.action));
    }
    if let Some(why) = &report.stopped {
        parts.push(format!("stopped: {why}"));
    }
    if let Some(why) = &report.prune.refused {
        parts.push(why.clone());
    }
    (!parts.is_empty()).then(|| parts.join(" | "))
}
