//! Which revision each spec's readiness reflects (docs/src/daemon.md, "Status file": `revision`).
//!
//! A spec a revision changes is unsettled from the moment the revision is read until a
//! sync has applied its objects *and* a readiness refresh after that sync has observed
//! them: until then its readiness is the previous revision's (the old Pod's), and it is
//! not ready. A spec a revision leaves as it was reflects the new revision at once. This
//! is what `?wait=ready` waits on: ready, in the revision asked about.

use std::collections::{BTreeSet, HashMap};

use crate::spec::SpecId;

#[derive(Debug, Default)]
pub(crate) struct Settling {
    /// Specs whose newest content is not yet applied and observed.
    unsettled: BTreeSet<SpecId>,
    /// Unsettled specs a sync applied since the last readiness refresh: the next refresh
    /// settles them.
    synced: BTreeSet<SpecId>,
    /// The revision each spec's state reflects.
    settled_in: HashMap<SpecId, String>,
}

impl Settling {
    /// A new revision `id` of `specs`; `changed` are the specs it changed (`None`: all,
    /// as for the first revision).
    pub(crate) fn on_revision<'a>(
        &mut self,
        id: &str,
        specs: impl Iterator<Item = &'a SpecId>,
        changed: Option<&BTreeSet<SpecId>>,
    ) {
        let mut present = BTreeSet::new();
        for spec in specs {
            present.insert(spec.clone());
            if changed.is_none_or(|c| c.contains(spec)) {
                self.unsettled.insert(spec.clone());
                self.synced.remove(spec);
            } else if !self.unsettled.contains(spec) {
                self.settled_in.insert(spec.clone(), id.to_string());
            }
        }
        self.unsettled.retain(|s| present.contains(s));
        self.synced.retain(|s| present.contains(s));
        self.settled_in.retain(|s, _| present.contains(s));
    }

    /// A sync applied `specs` without an error.
    pub(crate) fn on_synced<'a>(&mut self, specs: impl Iterator<Item = &'a SpecId>) {
        for spec in specs {
            if self.unsettled.contains(spec) {
                self.synced.insert(spec.clone());
            }
        }
    }

    /// A readiness refresh observed the cluster after those syncs: what they applied now
    /// reflects `current`.
    pub(crate) fn on_observed(&mut self, current: Option<&str>) {
        let Some(current) = current else {
            return;
        };
        for spec in std::mem::take(&mut self.synced) {
            self.unsettled.remove(&spec);
            self.settled_in.insert(spec, current.to_string());
        }
    }

    pub(crate) fn is_settled(&self, spec: &SpecId) -> bool {
        !self.unsettled.contains(spec)
    }

    /// The revision `spec`'s state reflects; `None` before it was ever applied.
    #[cfg(test)]
    pub(crate) fn revision_of(&self, spec: &SpecId) -> Option<&str> {
        self.settled_in.get(spec).map(String::as_str)
    }

    pub fn settled_in(&self) -> &HashMap<SpecId, String> {
        &self.settled_in
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> SpecId {
        format!("workspace/dev/{name}").parse().unwrap()
    }

    #[test]
    fn a_changed_spec_settles_only_once_applied_and_then_observed() {
        let (a, b) = (id("a"), id("b"));
        let mut s = Settling::default();
        s.on_revision("r1", [&a, &b].into_iter(), None);
        assert!(!s.is_settled(&a) && s.revision_of(&a).is_none());
        s.on_synced([&a, &b].into_iter());
        assert!(!s.is_settled(&a), "applied, not yet observed");
        s.on_observed(Some("r1"));
        assert!(s.is_settled(&a) && s.is_settled(&b));
        assert_eq!(s.revision_of(&a), Some("r1"));

        // r2 changes a only: b reflects r2 at once, a still r1 until applied and observed.
        let changed = BTreeSet::from([a.clone()]);
        s.on_revision("r2", [&a, &b].into_iter(), Some(&changed));
        assert_eq!(s.revision_of(&b), Some("r2"));
        assert_eq!(s.revision_of(&a), Some("r1"));
        assert!(!s.is_settled(&a));
        // A refresh before the sync settles nothing.
        s.on_observed(Some("r2"));
        assert!(!s.is_settled(&a));
        s.on_synced([&a].into_iter());
        // r3 changes a again before the refresh: the sync of r2 does not settle r3.
        s.on_revision("r3", [&a, &b].into_iter(), Some(&changed));
        s.on_observed(Some("r3"));
        assert!(!s.is_settled(&a));
        s.on_synced([&a].into_iter());
        s.on_observed(Some("r3"));
        assert_eq!(s.revision_of(&a), Some("r3"));

        // A spec that leaves the tree is forgotten.
        s.on_revision("r4", [&b].into_iter(), Some(&BTreeSet::new()));
        assert_eq!(s.revision_of(&a), None);
        assert!(s.is_settled(&a));
    }
}
