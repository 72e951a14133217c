//! When to tell people: the daemon's condition (failing in some way, or the current
//! revision applied and every spec ready) read off the state, and a notice only when it
//! changes. A failure is told once per kind and revision (a retried sync that keeps
//! failing is not news), readiness once per revision, and the first good condition after
//! a failure is a recovery. A standby tells nothing: the leader does.

use super::{Now, State};
use crate::report::notify::{Event, Notice};

/// What has been told so far.
#[derive(Debug, Default)]
pub(crate) struct Herald {
    /// The failure last told, by kind and revision, until a recovery.
    failing: Option<(Event, Option<String>)>,
    /// The revision last told applied and ready.
    ready: Option<String>,
    /// The revision whose sync start was last told.
    started: Option<String>,
}

/// The daemon's condition, where it is news-worthy.
enum Condition {
    Failing(Notice),
    Ready(String),
}

impl State {
    /// A sync is starting: the current revision's first one is told (a commit status goes
    /// `pending`).
    pub(crate) fn on_sync_start(&mut self, now: Now) -> Option<Notice> {
        let revision = self.revision_current.clone()?;
        if !self.active || self.herald.started.as_ref() == Some(&revision) {
            return None;
        }
        self.herald.started = Some(revision.clone());
        Some(notice(
            Event::SyncStarted,
            Some(revision),
            "sync started".into(),
            now,
        ))
    }

    /// What changed since the last call that is worth telling.
    pub(crate) fn take_notices(&mut self, now: Now) -> Vec<Notice> {
        if !self.active {
            return Vec::new();
        }
        match self.condition(now) {
            None => Vec::new(),
            Some(Condition::Failing(n)) => {
                let key = (n.event, n.revision.clone());
                if self.herald.failing.as_ref() == Some(&key) {
                    return Vec::new();
                }
                self.herald.failing = Some(key);
                vec![n]
            }
            Some(Condition::Ready(revision)) => {
                let event = if self.herald.failing.take().is_some() {
                    Event::Recovered
                } else if self.herald.ready.as_ref() == Some(&revision) {
                    return Vec::new();
                } else {
                    Event::RevisionReady
                };
                self.herald.ready = Some(revision.clone());
                let message = format!(
                    "revision {} applied; {} ready",
                    short(&revision),
                    plural(self.specs().len(), "spec")
                );
                vec![notice(event, Some(revision), message, now)]
            }
        }
    }

    /// The failure in force (the newest revision invalid, the last sync failed or refused
    /// its prune, specs not ready in time), else readiness of the applied revision; `None`
    /// while anything is still under way.
    fn condition(&self, now: Now) -> Option<Condition> {
        // A revision the source refused (unverified) is told as that revision's
        // failure; the last good one stays in force.
        if let Some((revision, message)) = &self.refused {
            let n = notice(
                Event::RevisionUnverified,
                Some(revision.clone()),
                message.clone(),
                now,
            );
            return Some(Condition::Failing(n));
        }
        // A source that cannot be read is a fetch problem, retried on every interval,
        // with the last good revision in force: not one of a revision's outcomes.
        if self
            .errors
            .iter()
            .any(|e| e.file.is_some() && e.app.is_none())
        {
            let mut n = notice(
                Event::RevisionInvalid,
                self.revision_seen.clone(),
                format!(
                    "revision {} is invalid ({}); nothing of it was applied or pruned",
                    self.revision_seen.as_deref().map_or("?", short),
                    plural(self.errors.len(), "error")
                ),
                now,
            );
            n.errors = self.errors.clone();
            return Some(Condition::Failing(n));
        }
        let revision = self.revision_current.clone();
        if let Some(sync) = &self.last_sync {
            let failure = match sync.result.as_str() {
                "failed" => Some((
                    Event::SyncFailed,
                    sync.message.clone().unwrap_or_else(|| {
                        format!("{} failed to apply", plural(sync.failed as usize, "object"))
                    }),
                )),
                "refused" => Some((
                    Event::PruneRefused,
                    sync.message
                        .clone()
                        .unwrap_or_else(|| "prune refused".to_string()),
                )),
                _ => None,
            };
            if let Some((event, message)) = failure {
                let mut n = notice(event, revision, message, now);
                n.specs = self
                    .sync_failed_specs
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                return Some(Condition::Failing(n));
            }
        }
        // A revision applied but for the apps it holds is no success either.
        let held: std::collections::BTreeSet<&str> = self
            .errors
            .iter()
            .filter_map(|e| e.app.as_deref())
            .collect();
        if !held.is_empty() {
            let mut n = notice(
                Event::AppsHeld,
                self.revision_seen.clone(),
                format!(
                    "revision {}: {} held, neither applied nor pruned ({}); the rest of it is applied",
                    self.revision_seen.as_deref().map_or("?", short),
                    plural(held.len(), "app"),
                    held.into_iter().collect::<Vec<_>>().join(", ")
                ),
                now,
            );
            n.errors = self.errors.clone();
            return Some(Condition::Failing(n));
        }
        // Readiness as a refresh computed it for the applied revision, not a stale one.
        let applied = self.revision_applied.clone()?;
        if revision.as_ref() != Some(&applied) || self.health_dirty {
            return None;
        }
        // Failed: given up on (a Job that failed, a crash-looping Pod) or still in progress
        // past --ready-timeout.
        let overdue: Vec<&crate::health::SpecHealth> = self
            .health
            .iter()
            .filter(|h| h.status == crate::health::Status::Failed)
            .map(|h| &**h)
            .collect();
        if let Some(first) = overdue.first() {
            let mut n = notice(
                Event::NotReady,
                Some(applied),
                format!(
                    "{} not ready in time: {}: {}",
                    plural(overdue.len(), "spec"),
                    first.id,
                    first.message
                ),
                now,
            );
            n.specs = overdue.iter().map(|h| h.id.clone()).collect();
            return Some(Condition::Failing(n));
        }
        let all_ready =
            self.health.len() == self.specs().len() && self.health.iter().all(|h| h.ready);
        all_ready.then_some(Condition::Ready(applied))
    }
}

fn notice(event: Event, revision: Option<String>, message: String, now: Now) -> Notice {
    Notice {
        event,
        revision,
        message,
        specs: Vec::new(),
        errors: Vec::new(),
        time: now.wall.to_string(),
        drift: None,
    }
}

/// A commit's usual short form (also what readiness messages name a revision by).
pub(super) fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
