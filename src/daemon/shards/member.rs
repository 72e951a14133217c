//! The member: one task per replica that renews its Lease, sees who else is live, gives
//! up and takes buckets in the holders' table, and tells the loop what it may write.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::division::{Members, assign, moves};
use super::parts::Parts;
use super::table::{Table, TableError};
use super::{Peers, ShardConfig, ShardView};
use crate::apply::buckets::BUCKETS;
use crate::cluster::error_text;
use crate::object::ownership;
use crate::report::status::SpecStatus;

/// Label on members' Leases: the instance whose tree they share.
const MEMBER_OF: &str = "driftless.dev/member-of";
/// A member whose Lease has not moved for this many lease durations is gone for good:
/// its Lease and part are deleted (by the first live member), so replicas named after
/// their Pods leave nothing behind.
const FORGOTTEN_AFTER: u32 = 10;
/// How often a member publishes its part of the status (when it changed) and reads the
/// others' (those that changed).
const EXCHANGE_EVERY: Duration = Duration::from_secs(2);

/// Why this member cannot renew its Lease: it writes nothing until it can.
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error(
        "cannot renew this replica's Lease {namespace}/{name}: {}",
        error_text(source)
    )]
    Renew {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    /// The renewal still waits on the apiserver when the member must stop writing.
    #[error("cannot renew this replica's Lease {namespace}/{name}: no answer")]
    NoAnswer { namespace: String, name: String },
}

/// Why a division failed: the shares stay as they are until one succeeds.
#[derive(Debug, thiserror::Error)]
enum DivideError {
    #[error("listing the members' Leases: {}", error_text(source))]
    ListLeases { source: kube::Error },
    #[error(transparent)]
    Table(#[from] TableError),
}

/// What the member hears from the loop.
pub(crate) struct Channels {
    /// What the loop no longer writes beyond.
    pub confirmed: watch::Receiver<BTreeSet<u16>>,
    /// This replica's own specs, as its status says them.
    pub part: watch::Receiver<Arc<Vec<SpecStatus>>>,
    /// Shutdown.
    pub stop: watch::Receiver<bool>,
}

/// The loop's side of a started member.
pub(crate) struct Started {
    /// What this replica may write.
    pub view: watch::Receiver<ShardView>,
    /// The other members' specs, as the table gives them.
    pub peers: watch::Receiver<Peers>,
    /// Ends once the member has left (on `stop`): its buckets given up, its Lease and
    /// part deleted.
    pub handle: JoinHandle<()>,
}

pub(crate) fn start(cfg: ShardConfig, client: Client, channels: Channels) -> Started {
    let (tx, rx) = watch::channel(ShardView {
        member: cfg.identity.clone(),
        ..ShardView::default()
    });
    let (peers_tx, peers_rx) = watch::channel(Peers::default());
    let maps = Api::namespaced(client.clone(), &cfg.namespace);
    let member = Member {
        leases: Api::namespaced(client, &cfg.namespace),
        parts: Parts::new(cfg.clone(), maps.clone(), channels.part, peers_tx),
        maps,
        cfg,
        view: tx,
        confirmed: channels.confirmed,
        members: Members::default(),
        renewed: None,
        last_error: None,
        hiccup: None,
        rounds: 0,
        holders: BTreeMap::new(),
        live: BTreeSet::new(),
        exchange_trouble: None,
    };
    Started {
        view: rx,
        peers: peers_rx,
        handle: tokio::spawn(member.run(channels.stop).in_current_span()),
    }
}

struct Member {
    cfg: ShardConfig,
    leases: Api<Lease>,
    /// The holders' table.
    maps: Api<ConfigMap>,
    view: watch::Sender<ShardView>,
    confirmed: watch::Receiver<BTreeSet<u16>>,
    members: Members,
    /// When the last renewal that succeeded was sent.
    renewed: Option<Instant>,
    /// Why the last renewal failed, until one succeeds.
    last_error: Option<String>,
    /// Why the last division failed (said once), until one succeeds.
    hiccup: Option<String>,
    /// Divisions done.
    rounds: u32,
    /// The holders' table and the live members, as the last division read them.
    holders: BTreeMap<u16, String>,
    live: BTreeSet<String>,
    /// The status exchanged with the other members.
    parts: Parts,
    /// Why the last exchange of parts failed (said once), until one succeeds.
    exchange_trouble: Option<String>,
}

/// Keeps in `last` why `outcome` failed, warning (with what follows) only when the reason
/// is new: a failure retried each round is said once, until it succeeds.
fn say_once<E: Display>(last: &mut Option<String>, outcome: Result<(), E>, meanwhile: &str) {
    match outcome {
        Ok(()) => *last = None,
        Err(e) => {
            let e = e.to_string();
            if last.as_ref() != Some(&e) {
                tracing::warn!("{e}; {meanwhile}");
            }
            *last = Some(e);
        }
    }
}

/// Once `at` is past (never, without one).
async fn lapsed(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl Member {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.cfg.renew_every());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The status is exchanged more often than a long lease is renewed: what a member
        // shows of the others lags them by this and their own status's writes.
        let mut swap = tokio::time::interval(EXCHANGE_EVERY.min(self.cfg.renew_every()));
        swap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Past this, the others may count this member dead: it writes nothing, even
            // when a round is still waiting on the apiserver.
            let lapse_at = self.renewed.map(|t| t + self.cfg.writes_for());
            let holds = !self.view.borrow().held.is_empty();
            let renewing = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                _ = lapsed(lapse_at), if holds => {
                    self.lapse();
                    continue;
                }
                _ = tick.tick() => true,
                // Once a division has read the table and the members.
                _ = swap.tick(), if self.rounds > 0 => false,
            };
            let work = async {
                if renewing {
                    return self.round().await;
                }
                self.swap().await;
                match self.parts.someone_left() {
                    true => self.round().await,
                    false => Ok(()),
                }
            };
            let outcome = tokio::select! {
                r = work => Some(r),
                _ = lapsed(lapse_at), if holds => None,
            };
            match outcome {
                Some(Ok(())) => {}
                Some(Err(problem)) => self.trouble(problem.to_string()),
                None => self.lapse(),
            }
        }
        self.leave().await;
    }

    fn lapse(&mut self) {
        let why = self.last_error.clone().unwrap_or_else(|| {
            LeaseError::NoAnswer {
                namespace: self.cfg.namespace.clone(),
                name: self.cfg.lease_name(),
            }
            .to_string()
        });
        self.trouble(why);
    }

    /// One round: renew, then divide. An error is a renewal that failed for too long.
    async fn round(&mut self) -> Result<(), LeaseError> {
        let sent = Instant::now();
        match self.renew().await {
            Ok(()) => {
                self.renewed = Some(sent);
                self.last_error = None;
            }
            Err(e) => {
                // Within what it may still write, a failed renewal is retried next round.
                self.last_error = Some(e.to_string());
                if self
                    .renewed
                    .is_none_or(|t| sent.duration_since(t) >= self.cfg.writes_for())
                {
                    return Err(e);
                }
                tracing::debug!(error = %e, "renewing this replica's Lease failed; retrying");
                return Ok(());
            }
        }
        // Alive to the others, this member may keep what it holds while it cannot read
        // the rest: nobody takes a live member's buckets.
        let divided = self.divide().await;
        say_once(
            &mut self.hiccup,
            divided,
            "the replicas' shares stay as they are meanwhile",
        );
        Ok(())
    }

    /// Exchanges the status with the others; a failure is said once, until one succeeds.
    async fn swap(&mut self) {
        let exchanged = self
            .parts
            .exchange(&self.live, &self.members, &self.holders)
            .await;
        say_once(
            &mut self.exchange_trouble,
            exchanged,
            "the other replicas' specs show as last read",
        );
    }

    /// Sees who is live, gives up and takes buckets.
    async fn divide(&mut self) -> Result<(), DivideError> {
        let listed = self
            .leases
            .list(&ListParams::default().labels(&format!("{MEMBER_OF}={}", self.cfg.instance)))
            .await
            .map_err(|source| DivideError::ListLeases { source })?;
        let leases = listed
            .items
            .iter()
            .filter_map(|l| {
                let id = l.spec.as_ref()?.holder_identity.clone()?;
                Some((id, l.resource_version()?))
            })
            .collect();
        let now = Instant::now();
        self.members.observe(leases, now);
        let live = self.members.live(&self.cfg.identity, now, self.cfg.lease);
        if live.first() == Some(&self.cfg.identity) {
            self.forget(&listed.items, now).await;
        }
        let mut table = Table::read(&self.maps, &self.cfg).await?;
        let me = self.cfg.identity.clone();
        // Buckets someone took while this member could not renew: not written again.
        let mine: BTreeSet<u16> = table.held_by(&me);
        let mut held: BTreeSet<u16> = self.view.borrow().held.clone();
        if !held.is_subset(&mine) {
            held.retain(|b| mine.contains(b));
            self.publish(&held, &live, true);
        }
        let mut moves = moves(&me, &live, &table.holders);
        // Replicas started together see each other from their second round on: a member
        // that claimed at once would take (and start syncing) every bucket, only to give
        // two thirds of them up a round later.
        self.rounds += 1;
        if self.rounds < 2 {
            moves.claim.clear();
        }
        if !moves.release.is_empty() {
            held.retain(|b| !moves.release.contains(b));
            self.publish(&held, &live, false);
            // Not longer than a round: a renewal must not wait behind it.
            let within = self.cfg.renew_every();
            if !self.stopped_writing(&moves.release, within).await {
                return Ok(());
            }
            let mut next = table.holders.clone();
            next.retain(|b, _| !moves.release.contains(b));
            match table.write(&self.maps, &self.cfg, next).await? {
                Some(t) => table = t,
                None => return Ok(()),
            }
            tracing::info!(
                buckets = moves.release.len(),
                "gave buckets up to another replica"
            );
        }
        if !moves.claim.is_empty() {
            let mut next = table.holders.clone();
            for b in &moves.claim {
                next.insert(*b, me.clone());
            }
            if let Some(t) = table.write(&self.maps, &self.cfg, next).await? {
                table = t;
                tracing::info!(buckets = moves.claim.len(), "took buckets");
            }
        }
        // What the table gives this member and rendezvous owes it: after a restart
        // within a lease duration, its buckets as before.
        let owed_to = assign(&live);
        let owed: BTreeSet<u16> = table
            .held_by(&me)
            .into_iter()
            .filter(|b| owed_to.get(b).is_some_and(|m| **m == me))
            .collect();
        self.publish(&owed, &live, false);
        self.holders = table.holders;
        self.live = live;
        Ok(())
    }

    /// Deletes the Leases of members silent for `FORGOTTEN_AFTER` lease durations, each
    /// only as it was listed (one renewed since stays); their parts go at the next
    /// exchange.
    async fn forget(&self, leases: &[Lease], now: Instant) {
        let silent = self.members.silent(now, self.cfg.lease * FORGOTTEN_AFTER);
        for lease in leases {
            let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.as_ref());
            let Some(holder) = holder.filter(|h| silent.contains(h)) else {
                continue;
            };
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: lease.resource_version(),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            if self.leases.delete(&lease.name_any(), &dp).await.is_ok() {
                tracing::info!(member = %holder, "forgot a replica gone for good");
            }
        }
    }

    /// Creates or renews this member's Lease.
    async fn renew(&self) -> Result<(), LeaseError> {
        let name = self.cfg.lease_name();
        let spec = LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease.as_secs().max(1) as i32),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        };
        let said = |source: kube::Error| LeaseError::Renew {
            namespace: self.cfg.namespace.clone(),
            name: name.clone(),
            source,
        };
        match self.leases.get_opt(&name).await.map_err(said)? {
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.leases
                    .replace(&name, &PostParams::default(), &lease)
                    .await
                    .map_err(said)?;
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        labels: Some(BTreeMap::from([
                            (MEMBER_OF.to_string(), self.cfg.instance.clone()),
                            (ownership::INSTANCE.to_string(), self.cfg.instance.clone()),
                        ])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.leases
                    .create(&PostParams::default(), &lease)
                    .await
                    .map_err(said)?;
            }
        }
        Ok(())
    }

    /// Waits until the loop no longer writes `buckets` (its sync covering them ended).
    async fn stopped_writing(&mut self, buckets: &BTreeSet<u16>, within: Duration) -> bool {
        let wait = self.confirmed.wait_for(|c| c.is_disjoint(buckets));
        matches!(tokio::time::timeout(within, wait).await, Ok(Ok(_)))
    }

    fn publish(&self, held: &BTreeSet<u16>, live: &BTreeSet<String>, urgent: bool) {
        self.view.send_if_modified(|v| {
            let next = ShardView {
                member: v.member.clone(),
                held: held.clone(),
                members: live.iter().cloned().collect(),
                problem: None,
                urgent,
            };
            let changed = v.held != next.held || v.members != next.members || v.problem.is_some();
            if changed {
                *v = next;
            }
            changed
        });
    }

    /// This member cannot go on: it holds nothing, at once.
    fn trouble(&self, problem: String) {
        self.view.send_if_modified(|v| {
            if v.problem.as_ref() == Some(&problem) && v.held.is_empty() {
                return false;
            }
            if v.problem.as_ref() != Some(&problem) {
                tracing::error!("{problem}; this replica writes nothing until it can");
            }
            v.urgent = !v.held.is_empty();
            v.held.clear();
            v.problem = Some(problem);
            true
        });
    }

    /// Stops writing, gives its buckets up and deletes its Lease, so the others take
    /// them over at once instead of a lease duration later.
    async fn leave(&mut self) {
        self.view.send_modify(|v| v.held.clear());
        let all: BTreeSet<u16> = (0..BUCKETS).collect();
        // The loop says so once its last sync has stopped (it waits up to 4 s for one).
        if !self.stopped_writing(&all, Duration::from_secs(6)).await {
            return;
        }
        let me = self.cfg.identity.clone();
        for _ in 0..4 {
            let Ok(table) = Table::read(&self.maps, &self.cfg).await else {
                break;
            };
            let mut next = table.holders.clone();
            next.retain(|_, h| *h != me);
            if next == table.holders {
                break;
            }
            if let Ok(Some(_)) = table.write(&self.maps, &self.cfg, next).await {
                break;
            }
        }
        let _ = self
            .leases
            .delete(&self.cfg.lease_name(), &DeleteParams::default())
            .await;
        self.parts.withdraw().await;
        tracing::info!("left the replicas sharing the tree");
    }
}
