//! Replicas that share one tree (`run --shard`): membership by Leases, and who holds
//! which bucket of specs (`apply::buckets`).
//!
//! Each member renews a Lease of its own in the inventory namespace. The buckets are
//! divided over the live members by rendezvous hashing, so a member that joins or leaves
//! moves only its share. Who holds a bucket is written in one table, a ConfigMap changed
//! only with the version it was read at: two members can never both take a bucket.
//! A bucket changes hands in order: its holder stops writing (its running sync ended),
//! then gives it up in the table, then the next one takes it. A member that dies
//! gives up nothing: the others take its buckets once its Lease has not moved for a whole
//! lease duration by their clocks, and a member that cannot renew stops writing a third
//! of a duration before that, counted from when it sent its last renewal that succeeded.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use sha2::Digest;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::apply::buckets::BUCKETS;
use crate::cluster::error_text;
use crate::object::ownership;
use crate::report::status::SpecStatus;

/// Label on members' Leases: the instance whose tree they share.
const MEMBER_OF: &str = "driftless.dev/member-of";
const HOLDERS_KEY: &str = "holders.json";
const FIELD_MANAGER: &str = "driftless-shards";
/// A member whose Lease has not moved for this many lease durations is gone for good:
/// its Lease and part are deleted (by the first live member), so replicas named after
/// their Pods leave nothing behind.
const FORGOTTEN_AFTER: u32 = 10;
/// How often a member publishes its part of the status (when it changed) and reads the
/// others' (those that changed).
const EXCHANGE_EVERY: Duration = Duration::from_secs(2);

mod parts;

/// The other members' specs, by id, as they published them.
pub type Peers = Arc<crate::report::snapshot::PeerSpecs>;

#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The inventory namespace: the Leases and the table live beside the inventory.
    pub namespace: String,
    pub instance: String,
    /// This member's name, unique among the replicas and stable across restarts (a
    /// restart within a lease duration keeps its buckets).
    pub identity: String,
    /// A member whose Lease has not moved this long is dead.
    pub lease: Duration,
}

impl ShardConfig {
    fn renew_every(&self) -> Duration {
        self.lease / 5
    }

    /// How long after sending its last renewal that succeeded a member may write.
    fn writes_for(&self) -> Duration {
        self.lease - self.lease / 3
    }

    fn table(&self) -> String {
        format!("driftless-shards-{}", self.instance)
    }

    /// The identity as a name's part may spell it.
    fn name_part(&self) -> String {
        let id: String = self
            .identity
            .chars()
            .map(|c| match c {
                'a'..='z' | '0'..='9' | '-' | '.' => c,
                'A'..='Z' => c.to_ascii_lowercase(),
                _ => '-',
            })
            .collect();
        id.trim_matches('-').to_string()
    }

    fn lease_name(&self) -> String {
        format!("driftless-member-{}-{}", self.instance, self.name_part())
    }

    /// The ConfigMap this member publishes its specs' status in.
    fn part_name(&self) -> String {
        format!("driftless-status-{}-{}", self.instance, self.name_part())
    }
}

/// What this member may write, as the loop is told it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardView {
    pub member: String,
    /// The buckets it holds.
    pub held: BTreeSet<u16>,
    /// The live members, itself included.
    pub members: Vec<String>,
    /// Why it holds nothing, while it cannot renew its Lease.
    pub problem: Option<String>,
    /// Buckets were taken away that it must stop writing at once (its Lease lapsed),
    /// not at the running sync's next safe point.
    pub urgent: bool,
}

fn score(member: &str, bucket: u16) -> u64 {
    let d = sha2::Sha256::digest(format!("{member}/{bucket}").as_bytes());
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Which live member each bucket goes to: rendezvous hashing (each bucket to the member
/// that scores highest for it, so the choice depends on the members alone and a member
/// joining or leaving moves little), bounded so that nobody holds more than its even
/// share rounded up. Unbounded, three members held 30, 23 and 11 of 64.
pub fn assign(members: &BTreeSet<String>) -> BTreeMap<u16, &String> {
    let mut out = BTreeMap::new();
    if members.is_empty() {
        return out;
    }
    let cap = usize::from(BUCKETS).div_ceil(members.len());
    let mut count: HashMap<&String, usize> = HashMap::new();
    for b in 0..BUCKETS {
        let mut ranked: Vec<&String> = members.iter().collect();
        ranked.sort_by_key(|m| std::cmp::Reverse(score(m, b)));
        if let Some(m) = ranked
            .into_iter()
            .find(|m| count.get(m).copied().unwrap_or(0) < cap)
        {
            *count.entry(m).or_default() += 1;
            out.insert(b, m);
        }
    }
    out
}

/// What `me` does to the table next.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moves {
    /// Held, but another live member is owed them.
    pub release: BTreeSet<u16>,
    /// Owed, and nobody live holds them.
    pub claim: BTreeSet<u16>,
}

pub fn moves(me: &str, live: &BTreeSet<String>, holders: &BTreeMap<u16, String>) -> Moves {
    let mut out = Moves::default();
    let owed_to = assign(live);
    for b in 0..BUCKETS {
        let owed = owed_to.get(&b).is_some_and(|m| *m == me);
        match holders.get(&b) {
            Some(h) if h == me && !owed => {
                out.release.insert(b);
            }
            Some(h) if h != me && live.contains(h) => {}
            Some(h) if h == me => {}
            _ if owed => {
                out.claim.insert(b);
            }
            _ => {}
        }
    }
    out
}

/// When each member's Lease was last seen to move, by this member's clock: the other
/// members' clocks are never read.
#[derive(Debug, Default)]
pub struct Members {
    seen: HashMap<String, (String, Instant)>,
}

impl Members {
    /// The Leases as listed now (identity, resourceVersion).
    pub fn observe(&mut self, leases: Vec<(String, String)>, now: Instant) {
        let listed: BTreeSet<&String> = leases.iter().map(|(id, _)| id).collect();
        self.seen.retain(|id, _| listed.contains(id));
        for (id, version) in leases {
            match self.seen.get_mut(&id) {
                Some((v, _)) if *v == version => {}
                Some(seen) => *seen = (version, now),
                None => {
                    self.seen.insert(id, (version, now));
                }
            }
        }
    }

    /// Members whose Lease has not moved for `long`.
    pub fn silent(&self, now: Instant, long: Duration) -> BTreeSet<&String> {
        self.seen
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) >= long)
            .map(|(id, _)| id)
            .collect()
    }

    /// Members whose Lease moved within `lease`, and `me`.
    pub fn live(&self, me: &str, now: Instant, lease: Duration) -> BTreeSet<String> {
        self.seen
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) < lease)
            .map(|(id, _)| id.clone())
            .chain(std::iter::once(me.to_string()))
            .collect()
    }
}

/// The holders' table as read, with the version a write must name.
struct Table {
    holders: BTreeMap<u16, String>,
    version: Option<String>,
}

/// What the member hears from the loop.
pub struct Channels {
    /// What the loop no longer writes beyond.
    pub confirmed: watch::Receiver<BTreeSet<u16>>,
    /// This replica's own specs, as its status says them.
    pub part: watch::Receiver<Arc<Vec<SpecStatus>>>,
    /// Shutdown.
    pub stop: watch::Receiver<bool>,
}

/// The loop's side of a started member.
pub struct Started {
    /// What this replica may write.
    pub view: watch::Receiver<ShardView>,
    /// The other members' specs, as the table gives them.
    pub peers: watch::Receiver<Peers>,
    /// Ends once the member has left (on `stop`): its buckets given up, its Lease and
    /// part deleted.
    pub handle: JoinHandle<()>,
}

pub fn start(cfg: ShardConfig, client: Client, channels: Channels) -> Started {
    let (tx, rx) = watch::channel(ShardView {
        member: cfg.identity.clone(),
        ..ShardView::default()
    });
    let (peers_tx, peers_rx) = watch::channel(Peers::default());
    let member = Member {
        leases: Api::namespaced(client.clone(), &cfg.namespace),
        maps: Api::namespaced(client, &cfg.namespace),
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
        part: channels.part,
        published: None,
        parts: HashMap::new(),
        peers: peers_tx,
        peers_from: None,
        exchange_trouble: None,
        someone_left: false,
    };
    Started {
        view: rx,
        peers: peers_rx,
        handle: tokio::spawn(member.run(channels.stop)),
    }
}

struct Member {
    cfg: ShardConfig,
    leases: Api<Lease>,
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
    /// This replica's own specs, from the loop.
    part: watch::Receiver<Arc<Vec<SpecStatus>>>,
    /// The part as last written.
    published: Option<Arc<Vec<SpecStatus>>>,
    /// The others' parts as last read: member → (resourceVersion, specs).
    parts: HashMap<String, (String, Vec<Arc<SpecStatus>>)>,
    /// The others' specs the table gives them, for the loop to show.
    peers: watch::Sender<Peers>,
    /// The table and the parts' versions `peers` was built from.
    peers_from: Option<(BTreeMap<u16, String>, BTreeMap<String, String>)>,
    /// Why the last exchange of parts failed (said once), until one succeeds.
    exchange_trouble: Option<String>,
    /// An exchange found a member's part gone: it left (or was forgotten), and a round
    /// now takes its buckets over, rather than up to a round later.
    someone_left: bool,
}

/// Keeps in `last` why `outcome` failed, warning (with what follows) only when the reason
/// is new: a failure retried each round is said once, until it succeeds.
fn say_once(last: &mut Option<String>, outcome: Result<(), String>, meanwhile: &str) {
    match outcome {
        Ok(()) => *last = None,
        Err(e) => {
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
                match std::mem::take(&mut self.someone_left) {
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
                Some(Err(problem)) => self.trouble(problem),
                None => self.lapse(),
            }
        }
        self.leave().await;
    }

    fn lapse(&mut self) {
        let why = self.last_error.clone().unwrap_or_else(|| {
            format!(
                "cannot renew this replica's Lease {}/{}: no answer",
                self.cfg.namespace,
                self.cfg.lease_name()
            )
        });
        self.trouble(why);
    }

    /// One round: renew, then divide. An error is a renewal that failed for too long.
    async fn round(&mut self) -> Result<(), String> {
        let sent = Instant::now();
        match self.renew().await {
            Ok(()) => {
                self.renewed = Some(sent);
                self.last_error = None;
            }
            Err(e) => {
                // Within what it may still write, a failed renewal is retried next round.
                self.last_error = Some(e.clone());
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

    /// Sees who is live, gives up and takes buckets.
    async fn divide(&mut self) -> Result<(), String> {
        let listed = self
            .leases
            .list(&ListParams::default().labels(&format!("{MEMBER_OF}={}", self.cfg.instance)))
            .await
            .map_err(|e| format!("listing the members' Leases: {}", error_text(&e)))?;
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
        let mut table = self.table().await?;
        let me = self.cfg.identity.clone();
        // Buckets someone took while this member could not renew: not written again.
        let mine: BTreeSet<u16> = mine_of(&table.holders, &me);
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
            match self.write_table(&table, next).await? {
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
            if let Some(t) = self.write_table(&table, next).await? {
                table = t;
                tracing::info!(buckets = moves.claim.len(), "took buckets");
            }
        }
        // What the table gives this member and rendezvous owes it: after a restart
        // within a lease duration, its buckets as before.
        let owed_to = assign(&live);
        let owed: BTreeSet<u16> = mine_of(&table.holders, &me)
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
    async fn renew(&self) -> Result<(), String> {
        let name = self.cfg.lease_name();
        let spec = LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease.as_secs().max(1) as i32),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        };
        let said = |e: kube::Error| {
            format!(
                "cannot renew this replica's Lease {}/{name}: {}",
                self.cfg.namespace,
                error_text(&e)
            )
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

    async fn table(&self) -> Result<Table, String> {
        let name = self.cfg.table();
        let found = self
            .maps
            .get_opt(&name)
            .await
            .map_err(|e| format!("reading {name}: {}", error_text(&e)))?;
        let Some(cm) = found else {
            return Ok(Table {
                holders: BTreeMap::new(),
                version: None,
            });
        };
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(HOLDERS_KEY))
            .map_or("{}", String::as_str);
        let holders: BTreeMap<u16, String> = serde_json::from_str(text)
            .map_err(|e| format!("{}/{name} is corrupt: {e}", self.cfg.namespace))?;
        Ok(Table {
            holders,
            version: cm.resource_version(),
        })
    }

    /// Writes `holders` over `table` as it was read: `None` when someone wrote it since
    /// (the next round reads it again).
    async fn write_table(
        &self,
        table: &Table,
        holders: BTreeMap<u16, String>,
    ) -> Result<Option<Table>, String> {
        let name = self.cfg.table();
        let data = serde_json::to_string(&holders).unwrap_or_else(|_| "{}".to_string());
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                resource_version: table.version.clone(),
                labels: Some(BTreeMap::from([(
                    ownership::INSTANCE.to_string(),
                    self.cfg.instance.clone(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(HOLDERS_KEY.to_string(), data)])),
            ..ConfigMap::default()
        };
        let pp = PostParams::default();
        let written = match &table.version {
            Some(_) => self.maps.replace(&name, &pp, &cm).await,
            None => self.maps.create(&pp, &cm).await,
        };
        match written {
            Ok(cm) => Ok(Some(Table {
                holders,
                version: cm.resource_version(),
            })),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
            Err(e) => Err(format!("writing {name}: {}", error_text(&e))),
        }
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
            let Ok(table) = self.table().await else {
                break;
            };
            let mut next = table.holders.clone();
            next.retain(|_, h| *h != me);
            if next == table.holders {
                break;
            }
            if let Ok(Some(_)) = self.write_table(&table, next).await {
                break;
            }
        }
        let _ = self
            .leases
            .delete(&self.cfg.lease_name(), &DeleteParams::default())
            .await;
        let _ = self
            .maps
            .delete(&self.cfg.part_name(), &DeleteParams::default())
            .await;
        tracing::info!("left the replicas sharing the tree");
    }
}

fn mine_of(holders: &BTreeMap<u16, String>, me: &str) -> BTreeSet<u16> {
    holders
        .iter()
        .filter(|(_, h)| *h == me)
        .map(|(b, _)| *b)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn buckets_are_divided_evenly_and_a_leaver_moves_little_but_its_own() {
        let three = set(&["a", "b", "c"]);
        let before = assign(&three);
        let mut count: BTreeMap<&String, usize> = BTreeMap::new();
        for m in before.values() {
            *count.entry(*m).or_default() += 1;
        }
        assert_eq!(before.len(), usize::from(BUCKETS));
        assert!(count.values().all(|n| (21..=22).contains(n)), "{count:?}");
        let two = set(&["a", "b"]);
        let after = assign(&two);
        let moved = (0..BUCKETS)
            .filter(|b| *before[b] != "c" && before[b] != after[b])
            .count();
        assert!(moved <= 6, "{moved} of the survivors' buckets moved");
        // Rendezvous alone decides, and the same members decide the same.
        assert_eq!(assign(&three), before);
    }

    #[test]
    fn a_member_claims_free_buckets_and_those_of_the_dead_and_waits_for_the_live() {
        let live = set(&["a", "b"]);
        let mut holders = BTreeMap::new();
        for b in 0..BUCKETS {
            holders.insert(b, "b".to_string());
        }
        // Everything held by live b: a waits for b to give its share up.
        let m = moves("a", &live, &holders);
        assert!(m.claim.is_empty() && m.release.is_empty(), "{m:?}");
        // b gives up what a is owed.
        let m = moves("b", &live, &holders);
        let owed_a: BTreeSet<u16> = assign(&live)
            .into_iter()
            .filter(|(_, m)| *m == "a")
            .map(|(b, _)| b)
            .collect();
        assert_eq!(m.release, owed_a);
        // Held by a dead member (not live): claimed by whoever is owed it now.
        let alone = set(&["a"]);
        let m = moves("a", &alone, &holders);
        assert_eq!(m.claim.len(), BUCKETS as usize);
    }

    #[test]
    fn a_lease_that_stops_moving_is_dead_after_a_lease_duration() {
        let mut members = Members::default();
        let t0 = Instant::now();
        let lease = Duration::from_secs(15);
        members.observe(vec![("b".into(), "1".into())], t0);
        assert_eq!(
            members.live("a", t0 + Duration::from_secs(14), lease),
            set(&["a", "b"])
        );
        // Listed again unchanged: still counted from when it last moved.
        members.observe(vec![("b".into(), "1".into())], t0 + Duration::from_secs(10));
        assert_eq!(
            members.live("a", t0 + Duration::from_secs(15), lease),
            set(&["a"])
        );
        members.observe(vec![("b".into(), "2".into())], t0 + Duration::from_secs(16));
        assert_eq!(
            members.live("a", t0 + Duration::from_secs(20), lease),
            set(&["a", "b"])
        );
        // A deleted Lease: gone at once.
        members.observe(vec![], t0 + Duration::from_secs(21));
        assert_eq!(
            members.live("a", t0 + Duration::from_secs(21), lease),
            set(&["a"])
        );
    }

    #[test]
    fn a_member_stops_writing_well_before_the_others_count_it_dead() {
        let cfg = ShardConfig {
            namespace: "ns".into(),
            instance: "i".into(),
            identity: "Pod_1".into(),
            lease: Duration::from_secs(15),
        };
        assert_eq!(cfg.writes_for(), Duration::from_secs(10));
        assert!(cfg.renew_every() * 3 < cfg.writes_for());
        assert_eq!(cfg.lease_name(), "driftless-member-i-pod-1");
    }
}
