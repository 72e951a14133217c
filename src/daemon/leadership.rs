//! Leader election (`--leader-elect`): whether this replica writes, and why it cannot
//! lead when it cannot.
//!
//! kube-lease-manager's own watch loop logs each failure (`ERROR LeaseManager watcher
//! error`, every retry) and never tells its caller, so a replica whose account may not
//! read or write its Lease stood by forever as `leader: false`, with nothing in its status
//! or probes to say why. Here the manager is driven directly: a failure becomes the
//! replica's leadership problem, shown in the status file's `errors`, answered by
//! `/readyz` (503: a replica that cannot lead is no standby) and logged once.

use std::time::Duration;
use tracing::Instrument as _;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::time::Instant;

use super::LeaseConfig;

/// A failed attempt is retried after this, doubling up to `MAX_RETRY` (the manager's own
/// watch loop waits as long).
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// An attempt running this long without failing reached the apiserver and was allowed:
/// the problem is over, though the manager only returns when leadership changes (it waits
/// out another replica's Lease).
const CLEARED_AFTER: Duration = Duration::from_secs(10);

/// How this replica's leadership is seen by the rest of the daemon.
pub(crate) struct Leadership {
    /// Whether this replica writes. Without --leader-elect it always does.
    pub active: watch::Receiver<bool>,
    /// Why it cannot lead, while it cannot (never without --leader-elect).
    pub problem: watch::Receiver<Option<String>>,
}

pub fn start(lease: Option<&LeaseConfig>, client: &Client) -> Leadership {
    let (active_tx, active) = watch::channel(lease.is_none());
    let (problem_tx, problem) = watch::channel(None);
    if let Some(lease) = lease {
        tokio::spawn(lead(lease.clone(), client.clone(), active_tx, problem_tx).in_current_span());
    }
    Leadership { active, problem }
}

/// Takes and keeps the Lease for as long as anyone listens to `active`.
async fn lead(
    lease: LeaseConfig,
    client: Client,
    active: watch::Sender<bool>,
    problem: watch::Sender<Option<String>>,
) {
    let report = Report {
        lease: &lease,
        problem: &problem,
    };
    let mut retry = FIRST_RETRY;
    // Building the manager reads the Lease (and creates it when missing): refused as
    // much as anything later.
    let manager = loop {
        let built = LeaseManagerBuilder::new(client.clone(), &lease.name)
            .with_namespace(&lease.namespace)
            .with_identity(&lease.identity)
            .with_duration(15)
            .with_grace(5)
            .build()
            .await;
        match built {
            Ok(m) => break m,
            Err(e) => report.failed(&e),
        }
        tokio::select! {
            _ = active.closed() => return,
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(MAX_RETRY);
    };
    // Built is not yet allowed: the Lease may be readable and not writable.
    follow(&manager, &active, &report).await;
    // Nobody listens: the daemon is stopping. A leader lets go at once, so a standby
    // need not wait for the Lease to expire.
    let _ = manager.release().await;
}

async fn follow(manager: &LeaseManager, active: &watch::Sender<bool>, report: &Report<'_>) {
    let mut retry = FIRST_RETRY;
    loop {
        let started = Instant::now();
        let change = manager.changed();
        tokio::pin!(change);
        let outcome = loop {
            let clear_at = started + CLEARED_AFTER;
            tokio::select! {
                _ = active.closed() => return,
                r = &mut change => break r,
                // Not a cancellation: the same attempt goes on.
                _ = tokio::time::sleep_until(clear_at), if report.is_set() => report.cleared(),
            }
        };
        match outcome {
            Ok(leader) => {
                report.cleared();
                retry = FIRST_RETRY;
                if active.send(leader).is_err() {
                    return;
                }
            }
            Err(e) => {
                report.failed(&e);
                tokio::select! {
                    _ = active.closed() => return,
                    _ = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

/// Tells the daemon (and the log, once per distinct problem) why the Lease cannot be used.
struct Report<'a> {
    lease: &'a LeaseConfig,
    problem: &'a watch::Sender<Option<String>>,
}

impl Report<'_> {
    fn failed(&self, e: &LeaseManagerError) {
        let text = describe(self.lease, e);
        self.problem.send_if_modified(|now| {
            if now.as_deref() == Some(text.as_str()) {
                return false;
            }
            tracing::error!(
                lease = %format_args!("{}/{}", self.lease.namespace, self.lease.name),
                "{text}; retrying, as a standby that cannot lead meanwhile"
            );
            *now = Some(text.clone());
            true
        });
    }

    fn cleared(&self) {
        self.problem.send_if_modified(|now| {
            if now.take().is_some() {
                tracing::info!("leader election works again");
                true
            } else {
                false
            }
        });
    }

    fn is_set(&self) -> bool {
        self.problem.borrow().is_some()
    }
}

/// The problem in a sentence: which Lease, and the apiserver's own words (kube's rendering
/// of its answer repeats them with a debug dump).
fn describe(lease: &LeaseConfig, e: &LeaseManagerError) -> String {
    let cause = match e {
        LeaseManagerError::KubeError(kube::Error::Api(status)) => {
            format!("{} ({} {})", status.message, status.code, status.reason)
        }
        other => crate::cluster::error_text(other),
    };
    format!(
        "leader election: cannot use Lease {}/{}: {cause}",
        lease.namespace, lease.name
    )
}
