//! Suspended specs as the state holds them: those a person paused (through the API, kept
//! in the cluster) and those the tree holds back, merged; a person's is shown over the
//! tree's.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use super::State;
use crate::apply::suspensions::{Suspension, Suspensions};
use crate::spec::{SpecId, SpecTree};

impl State {
    /// The suspensions the cluster holds now (its watch's list): merged with the tree's.
    pub(super) fn on_asked(&mut self, now: Suspensions) {
        self.asked = now;
        self.merge_suspensions();
    }

    /// The specs `tree` holds back, each suspended since the revision that first held it
    /// was read (`now`; a share that grew: when the tree was read).
    pub(super) fn declare(&mut self, tree: &SpecTree, now: Option<Timestamp>) {
        if let Some(now) = now {
            self.tree_read_at = now.to_string();
        }
        let before = std::mem::take(&mut self.declared);
        for spec in &tree.specs {
            let Some(reason) = &spec.policy.suspended else {
                continue;
            };
            let id = spec.id.to_string();
            let since = match before.get(&id) {
                Some(was) => was.since.clone(),
                None => self.tree_read_at.clone(),
            };
            let held = Suspension {
                reason: reason.clone(),
                since,
                declared: true,
            };
            self.declared.insert(id, held);
        }
        self.merge_suspensions();
    }

    /// A person's suspension is shown over the tree's: theirs is the one to resume.
    fn merge_suspensions(&mut self) {
        let mut all = self.declared.clone();
        all.extend(self.asked.iter().map(|(k, v)| (k.clone(), v.clone())));
        if all != self.suspensions {
            self.health_dirty = true;
        }
        self.suspensions = all;
    }

    /// The suspended specs, also those the tree no longer has: a spec removed from the
    /// source while suspended keeps its objects until it is resumed.
    pub fn held(&self) -> BTreeSet<SpecId> {
        self.suspensions
            .keys()
            .filter_map(|id| id.parse().ok())
            .collect()
    }
}
