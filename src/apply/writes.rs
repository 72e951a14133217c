//! The writes a sync sends, counted by verb: the metric, and what "0 writes" is judged by.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Patch,
    Create,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Patch => "patch",
            Verb::Create => "create",
            Verb::Delete => "delete",
        }
    }
}

/// Every write sent to the apiserver, by verb: the metric, and what tests assert "0 writes" on.
#[derive(Debug, Default)]
pub struct Writes {
    patch: AtomicU64,
    create: AtomicU64,
    delete: AtomicU64,
}

impl Writes {
    pub fn count(&self, verb: Verb) {
        self.counter(verb).fetch_add(1, Ordering::Relaxed);
    }

    fn counter(&self, verb: Verb) -> &AtomicU64 {
        match verb {
            Verb::Patch => &self.patch,
            Verb::Create => &self.create,
            Verb::Delete => &self.delete,
        }
    }

    pub fn get(&self, verb: Verb) -> u64 {
        self.counter(verb).load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        [Verb::Patch, Verb::Create, Verb::Delete]
            .into_iter()
            .map(|v| self.get(v))
            .sum()
    }
}
