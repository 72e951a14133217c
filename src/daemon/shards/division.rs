//! Who is owed which bucket and who is live, from the members' names and the times their
//! Leases were seen to move: no I/O and no clock of its own, so each rule is a plain test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use sha2::Digest;
use tokio::time::Instant;

use crate::apply::buckets::BUCKETS;

fn score(member: &str, bucket: u16) -> u64 {
    let d = sha2::Sha256::digest(format!("{member}/{bucket}").as_bytes());
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Which live member each bucket goes to: rendezvous hashing (each bucket to the member
/// that scores highest for it, so the choice depends on the members alone and a member
/// joining or leaving moves little), bounded so that nobody holds more than its even
/// share rounded up. Unbounded, three members held 30, 23 and 11 of 64.
pub(super) fn assign(members: &BTreeSet<String>) -> BTreeMap<u16, &String> {
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
pub(super) struct Moves {
    /// Held, but another live member is owed them.
    pub(super) release: BTreeSet<u16>,
    /// Owed, and nobody live holds them.
    pub(super) claim: BTreeSet<u16>,
}

pub(super) fn moves(me: &str, live: &BTreeSet<String>, holders: &BTreeMap<u16, String>) -> Moves {
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
pub(super) struct Members {
    seen: HashMap<String, (String, Instant)>,
}

impl Members {
    /// The Leases as listed now (identity, resourceVersion).
    pub(super) fn observe(&mut self, leases: Vec<(String, String)>, now: Instant) {
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

    /// Whether `id`'s Lease was there when they were last listed, live or not.
    pub(super) fn listed(&self, id: &str) -> bool {
        self.seen.contains_key(id)
    }

    /// Members whose Lease has not moved for `long`.
    pub(super) fn silent(&self, now: Instant, long: Duration) -> BTreeSet<&String> {
        self.seen
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) >= long)
            .map(|(id, _)| id)
            .collect()
    }

    /// Members whose Lease moved within `lease`, and `me`.
    pub(super) fn live(&self, me: &str, now: Instant, lease: Duration) -> BTreeSet<String> {
        self.seen
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) < lease)
            .map(|(id, _)| id.clone())
            .chain(std::iter::once(me.to_string()))
            .collect()
    }
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
        assert!(!members.listed("b"));
    }
}
