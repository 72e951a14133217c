//! The work queue: keys (the whole tree, or one spec) with the time they are due.
//! Pushing a key already queued keeps the earlier time, so bursts collapse into one
//! sync; a failing key backs off exponentially, with jitter, up to a cap, and never
//! blocks other keys.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::time::Duration;

use tokio::time::Instant;

use crate::spec::SpecId;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// The whole tree, prune included: a revision while none is applied yet, a node
    /// change under localservices, leadership, the periodic resync, and the retry of a
    /// refused prune.
    Full,
    /// One spec's objects, and a prune of what the spec no longer renders: a spec a new
    /// revision adds, changes or removes, or drift on one of its objects.
    Spec(SpecId),
}

/// As logs and the status name it: `whole tree`, or the spec's id.
impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Full => f.write_str("whole tree"),
            Key::Spec(id) => write!(f, "{id}"),
        }
    }
}

impl Key {
    /// The spec this key syncs alone, if it is one.
    pub fn spec(&self) -> Option<&SpecId> {
        match self {
            Key::Spec(s) => Some(s),
            Key::Full => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before retry `attempt` (1-based): base·2^(attempt-1), capped, ±20 % jitter
    /// so many failing keys do not retry in lockstep.
    pub fn delay(&self, attempt: u32, jitter_seed: u64) -> Duration {
        let exp = self.base.saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1).min(20))
                .unwrap_or(u32::MAX),
        );
        let capped = exp.min(self.cap);
        // jitter in [0.8, 1.2)
        let unit = (jitter_seed % 10_000) as f64 / 10_000.0;
        capped.mul_f64(0.8 + 0.4 * unit)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Queue {
    due: BTreeMap<Key, Instant>,
    failures: HashMap<Key, u32>,
    backoff: Backoff,
    hasher: std::collections::hash_map::RandomState,
}

impl Queue {
    pub fn push(&mut self, key: Key, at: Instant) {
        let slot = self.due.entry(key).or_insert(at);
        if at < *slot {
            *slot = at;
        }
    }

    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    /// Removes and returns every key due at `now`.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<Key> {
        let ready: Vec<Key> = self
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &ready {
            self.due.remove(k);
        }
        ready
    }

    /// Schedules a retry of a failed key; returns its delay.
    pub fn failed(&mut self, key: Key, now: Instant) -> Duration {
        let attempt = self.failures.entry(key.clone()).or_insert(0);
        *attempt = attempt.saturating_add(1);
        let seed = self.hasher.hash_one((&key, *attempt));
        let delay = self.backoff.delay(*attempt, seed);
        self.push(key, now + delay);
        delay
    }

    pub fn succeeded(&mut self, key: &Key) {
        self.failures.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Kind;

    fn spec(name: &str) -> Key {
        Key::Spec(SpecId {
            kind: Kind::ElasticWeb,
            namespace: "ns".into(),
            name: name.into(),
        })
    }

    #[test]
    fn pushes_deduplicate_and_keep_the_earliest_time() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.push(spec("a"), now + Duration::from_secs(5));
        q.push(spec("a"), now + Duration::from_secs(1));
        q.push(spec("a"), now + Duration::from_secs(9));
        q.push(Key::Full, now + Duration::from_secs(3));
        assert_eq!(q.due.len(), 2);
        assert_eq!(q.next_due(), Some(now + Duration::from_secs(1)));
        assert_eq!(q.take_due(now + Duration::from_secs(2)), vec![spec("a")]);
        assert_eq!(q.take_due(now + Duration::from_secs(3)), vec![Key::Full]);
        assert!(q.due.is_empty());
    }

    #[test]
    fn failures_back_off_exponentially_to_the_cap_and_reset_on_success() {
        let b = Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        };
        let mid = 5_000; // jitter factor exactly 1.0
        assert_eq!(b.delay(1, mid), Duration::from_secs(1));
        assert_eq!(b.delay(2, mid), Duration::from_secs(2));
        assert_eq!(b.delay(5, mid), Duration::from_secs(16));
        assert_eq!(b.delay(30, mid), Duration::from_secs(60));
        for seed in [0, 1234, 9999, u64::MAX] {
            let d = b.delay(3, seed).as_secs_f64();
            assert!((3.2..4.8).contains(&d), "{d}");
        }

        let now = Instant::now();
        let mut q = Queue {
            backoff: b,
            ..Queue::default()
        };
        let attempts = |q: &Queue, key: &Key| q.failures.get(key).copied().unwrap_or(0);
        let first = q.failed(spec("bad"), now);
        let second = q.failed(spec("bad"), now);
        assert!(second > first, "{first:?} then {second:?}");
        assert_eq!(attempts(&q, &spec("bad")), 2);
        // A failing key does not hold up others.
        q.push(spec("good"), now);
        assert_eq!(q.take_due(now), vec![spec("good")]);
        q.succeeded(&spec("bad"));
        assert_eq!(attempts(&q, &spec("bad")), 0);
    }
}
