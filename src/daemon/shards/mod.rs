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
//!
//! The files, by concern: `division` (pure: who is owed which bucket, who is live),
//! `table` (the holders' table as read and written), `member` (the task that renews the
//! Lease and divides each round), `parts` (the status each member shows of the others).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

mod division;
mod member;
mod parts;
mod table;

pub(crate) use member::{Channels, start};

/// The other members' specs, by id, as they published them.
pub(crate) type Peers = Arc<crate::report::snapshot::PeerSpecs>;

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
pub(crate) struct ShardView {
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

#[cfg(test)]
mod tests {
    use super::*;

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
