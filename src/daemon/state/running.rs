//! The running sync as the state sees it: which revision and keys it covers, and whether
//! the loop told it to stop. A sync runs beside the loop; while it does, the state keeps
//! taking revisions and events, so what the sync reports at its end is weighed against
//! what the state knows by then (`on_sync_done`).

use super::State;

/// Why the loop stops a running sync before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// A newer revision (named) is to be synced: the running one is of no use any more.
    Superseded(String),
    /// The daemon is stopping (SIGTERM).
    Shutdown,
    /// This replica lost leadership: a standby writes nothing.
    LostLeadership,
    /// Buckets this replica held went to another (`--shard`).
    ShareChanged,
}

impl Cancel {
    /// Why, for the sync's report and the status.
    pub fn reason(&self) -> String {
        match self {
            Cancel::Superseded(by) => format!("superseded by revision {by}"),
            Cancel::Shutdown => "the daemon is stopping".to_string(),
            Cancel::LostLeadership => "this replica lost leadership".to_string(),
            Cancel::ShareChanged => "this replica's share of the tree changed".to_string(),
        }
    }

    /// `last_sync.result` of a sync that stopped for this.
    pub(super) fn result(&self) -> &'static str {
        match self {
            Cancel::Superseded(_) => "superseded",
            Cancel::Shutdown | Cancel::LostLeadership | Cancel::ShareChanged => "stopped",
        }
    }
}

pub(super) struct Running {
    /// The revision it syncs (the current one when it started).
    pub revision: Option<String>,
    pub render_epoch: u64,
    pub cancel: Option<Cancel>,
}

impl State {
    /// A sync starts now, of the current revision.
    pub(crate) fn on_sync_begin(&mut self) {
        self.syncing = true;
        self.running = Some(Running {
            revision: self.revision_current.clone(),
            render_epoch: self.render_epoch,
            cancel: None,
        });
    }

    /// The revision the running sync syncs, while one runs.
    pub(crate) fn sync_revision(&self) -> Option<&str> {
        self.running.as_ref()?.revision.as_deref()
    }

    /// Whether what just changed stops the running sync: a newer valid revision (Flux's
    /// `CancelHealthCheckOnNewRevision`, by default) or lost leadership. Returns why,
    /// once; the loop tells the sync.
    pub(crate) fn cancel_due(&mut self) -> Option<Cancel> {
        let active = self.active;
        let current = self.revision_current.clone();
        let running = self.running.as_mut()?;
        if running.cancel.is_some() {
            return None;
        }
        let why = if !active {
            Cancel::LostLeadership
        } else {
            match current {
                Some(current) if running.revision.as_ref() != Some(&current) => {
                    Cancel::Superseded(current)
                }
                _ => return None,
            }
        };
        running.cancel = Some(why.clone());
        Some(why)
    }

    /// The daemon stops: the running sync, if any, is told so; returns why, once.
    pub(crate) fn on_shutdown(&mut self) -> Option<Cancel> {
        self.stop_running(Cancel::Shutdown)
    }

    /// The running sync, if any, is to stop for `why`; returns it, unless told already.
    pub(crate) fn stop_running(&mut self, why: Cancel) -> Option<Cancel> {
        let running = self.running.as_mut()?;
        if running.cancel.is_some() {
            return None;
        }
        running.cancel = Some(why);
        running.cancel.clone()
    }
}
