//! This replica's share of a tree replicas share (`--shard`): the specs of the buckets it
//! holds, and what a change of share does to the state.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{State, changed_specs};
use crate::daemon::queue::Key;
use crate::spec::{Spec, SpecId, SpecTree};

impl State {
    /// The specs of `tree` in the buckets this replica holds, the whole tree kept for
    /// when they change; `tree` itself when replicas do not share it.
    pub(super) fn share_of(&mut self, tree: SpecTree) -> SpecTree {
        if self.shard.is_none() {
            return tree;
        }
        let whole = Arc::new(tree);
        self.whole = Some(whole.clone());
        self.share_of_whole(&whole)
    }

    /// The specs of `whole` this replica holds (copied; the rest shared).
    fn share_of_whole(&self, whole: &SpecTree) -> SpecTree {
        let held = self.shard.as_ref().map(|v| &v.held);
        let specs: Vec<Spec> = whole
            .specs
            .iter()
            .filter(|s| {
                held.is_some_and(|h| {
                    h.contains(&crate::apply::buckets::bucket_of(&s.id.to_string()))
                })
            })
            .cloned()
            .collect();
        // A dependency another member holds is waited for by what that member publishes
        // (`ready_elsewhere`).
        SpecTree {
            specs,
            settings: whole.settings.clone(),
            rendered: whole.rendered.clone(),
            rendered_apps: whole.rendered_apps.clone(),
            held: whole.held.clone(),
            all_or_nothing: whole.all_or_nothing,
        }
    }

    /// The buckets this replica holds, while replicas share the tree.
    pub(crate) fn shard_held(&self) -> Option<&BTreeSet<u16>> {
        self.shard.as_ref().map(|v| &v.held)
    }

    /// This replica's share of the tree changed: a whole sync of what it holds now (the
    /// engine reads and writes only those buckets' inventory, so nothing of the buckets
    /// it gave up is pruned).
    pub(crate) fn on_shard(&mut self, view: crate::daemon::shards::ShardView) -> Option<Key> {
        let moved = self.shard.as_ref().is_none_or(|v| v.held != view.held);
        self.shard_status = Some(crate::report::status::ShardStatus {
            member: view.member.clone(),
            buckets: view.held.iter().copied().collect(),
            members: view.members.clone(),
            problem: view.problem.clone(),
        });
        self.shard = Some(view);
        if !moved {
            return None;
        }
        let whole = self.whole.clone()?;
        let mine = self.share_of_whole(&whole);
        let changed = match &self.tree {
            Some(old) => changed_specs(old, &mine),
            None => mine.specs.iter().map(|s| s.id.clone()).collect(),
        };
        if let Some(id) = &self.revision_current {
            self.settling
                .on_revision(id, mine.specs.iter().map(|s| &s.id), Some(&changed));
        }
        let ids: BTreeSet<&SpecId> = mine.specs.iter().map(|s| &s.id).collect();
        if let Some(pending) = &mut self.pending {
            pending.retain(|s| ids.contains(s));
        }
        // Another member writes those now: its writes are no drift of ours.
        self.recorded.retain(|_, (spec, _)| ids.contains(spec));
        self.drifted.retain(|_, spec| ids.contains(spec));
        self.declare(&mine, None);
        self.judged.forget(&changed);
        self.tree = Some(Arc::new(mine));
        self.render_dirty = true;
        self.render_epoch += 1;
        self.health_dirty = true;
        Some(Key::Full)
    }
}
