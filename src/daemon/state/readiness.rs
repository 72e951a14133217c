//! Readiness in the state: what the tree renders to, and the specs' health as a refresh
//! computed it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::{Now, State};
use crate::health::{self, SpecHealth, Status};
use crate::render::{self, Object};
use crate::spec::{Spec, SpecId, SpecTree};

/// What a readiness refresh changed, for the metrics.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct HealthNews {
    /// Specs that left the tree: their series go.
    pub gone: Vec<SpecId>,
    /// From the current revision first seen to every spec ready, the first time it is.
    pub change_to_ready: Option<Duration>,
    /// Specs that waited for their `depends-on` and need not any more: to sync now.
    pub released: Vec<SpecId>,
}

/// The specs of `tree` whose `depends-on` are not all ready by `health` (or, held by
/// other replicas of a shared tree, in `elsewhere`), with those they wait for (a spec not
/// assessed yet is not ready).
pub fn waiting_on(
    tree: &SpecTree,
    health: &[Arc<SpecHealth>],
    elsewhere: &BTreeSet<&str>,
) -> BTreeMap<SpecId, Vec<SpecId>> {
    let mut ready: BTreeSet<&str> = health
        .iter()
        .filter(|h| h.ready)
        .map(|h| h.id.as_str())
        .collect();
    ready.extend(elsewhere);
    tree.specs
        .iter()
        .filter_map(|s| {
            let not_ready: Vec<SpecId> = s
                .depends_on
                .iter()
                .filter(|d| !ready.contains(d.to_string().as_str()))
                .cloned()
                .collect();
            (!not_ready.is_empty()).then(|| (s.id.clone(), not_ready))
        })
        .collect()
}

/// Says in `h` that its state is not the current revision's yet: the change is not
/// applied (or held back by a suspension), or not observed since it was.
fn show_unsettled(h: &mut SpecHealth, revision: Option<&str>, suspended: bool) {
    let revision = revision.map(super::notices::short).unwrap_or("?");
    h.ready = false;
    if h.status == Status::Current {
        h.status = Status::InProgress;
    }
    if suspended {
        h.reason = Some("Suspended".into());
        h.message = format!("suspended: its change in revision {revision} is held back");
    } else if h.status != Status::Failed {
        h.reason = Some("RevisionPending".into());
        h.message = format!(
            "its change in revision {revision} is not applied and observed yet; {}",
            h.message
        );
    }
}

/// Says in `h` what it waits for: not applied yet (or, once it was, its changes held)
/// until they are. A spec never applied is not ready, whatever its (absent) objects say.
fn show_waiting(h: &mut SpecHealth, on: &[SpecId], applied: bool) {
    let on: Vec<String> = on.iter().map(SpecId::to_string).collect();
    let on = on.join(", ");
    if h.ready && applied {
        h.message = format!("{}; changes wait for {on} to be ready", h.message);
        return;
    }
    h.status = Status::InProgress;
    h.ready = false;
    h.reason = Some("WaitingForDependencies".into());
    h.message = format!("waiting for {on} to be ready before it is applied");
}

impl State {
    /// Brings `expected` up to the current tree and nodes (one spec rendered at a time,
    /// each spec's objects then handed to `keep`); an error when the tree does not
    /// render. Rendered again only when one of them changed: a render of every object
    /// each second was the daemon's largest allocation.
    pub(crate) fn rerender(
        &mut self,
        instance: &str,
        mut keep: impl FnMut(&Spec, Vec<Object>),
    ) -> Result<(), render::RenderError> {
        if !self.render_dirty {
            return Ok(());
        }
        let facts = render::Facts {
            instance: instance.to_string(),
            nodes: self.nodes.clone(),
        };
        let Some(tree) = &self.tree else {
            return Ok(());
        };
        let mut expected = Vec::with_capacity(self.expected.len());
        render::render_each(&tree.specs, &tree.settings, &facts, |spec, objects| {
            expected.extend(
                objects
                    .iter()
                    .filter(|o| health::judged(o))
                    .map(health::Expected::of),
            );
            keep(spec, objects);
        })?;
        self.set_expected(expected);
        self.render_dirty = false;
        Ok(())
    }

    /// What the other members of a shared tree last published of their specs. Returns
    /// the specs that waited for one of theirs and need not any more: to sync now.
    pub(crate) fn on_peers(
        &mut self,
        peers: Arc<crate::report::snapshot::PeerSpecs>,
    ) -> Vec<SpecId> {
        let depends = self
            .tree
            .as_ref()
            .is_some_and(|t| t.specs.iter().any(|s| !s.depends_on.is_empty()));
        if !depends {
            self.peers = peers;
            return Vec::new();
        }
        let before = self.waiting();
        self.peers = peers;
        let after = self.waiting();
        // What they show waiting changes too.
        self.health_dirty = true;
        before
            .into_keys()
            .filter(|id| !after.contains_key(id))
            .collect()
    }

    /// The specs other members hold that they say are ready at the revision this member
    /// syncs: a dependency on one of them is met. (Ready at an older revision is not: its
    /// change may not be applied yet.)
    pub(super) fn ready_elsewhere(&self) -> BTreeSet<&str> {
        let Some(current) = self.revision_current.as_deref() else {
            return BTreeSet::new();
        };
        if self.peers.is_empty() {
            return BTreeSet::new();
        }
        // What this member holds itself it judges itself, whatever a part read before
        // the bucket moved says.
        let own: BTreeSet<String> = self.specs().iter().map(|s| s.id.to_string()).collect();
        self.peers
            .values()
            .filter(|s| s.ready && s.revision.as_deref() == Some(current))
            .map(|s| s.id.as_str())
            .filter(|id| !own.contains(*id))
            .collect()
    }

    /// Whether `spec`'s state is the current revision's (applied and observed).
    pub fn settled(&self, spec: &SpecId) -> bool {
        self.settling.is_settled(spec)
    }

    /// Held specs whose objects are applied as this revision has them (after a restart,
    /// a suspension that holds nothing back): settled as a sync's would be, at the next
    /// readiness refresh.
    pub(crate) fn on_held_applied(&mut self, specs: &std::collections::BTreeSet<SpecId>) {
        self.settling.on_synced(specs.iter());
        if !specs.is_empty() {
            self.health_dirty = true;
        }
    }

    /// Takes the specs' readiness as just computed: a spec still in progress
    /// `ready_timeout` after its revision was applied counts as failed. What it changes
    /// of a verdict it changes in a copy: the verdict stays as judged for the next refresh.
    pub(crate) fn take_health<H: Into<Arc<SpecHealth>>>(
        &mut self,
        healths: Vec<H>,
        ready_timeout: Duration,
        now: Now,
    ) -> HealthNews {
        let mut healths: Vec<Arc<SpecHealth>> = healths.into_iter().map(Into::into).collect();
        let waited = self.waiting();
        // What the syncs since the last refresh applied is observed now.
        self.settling.on_observed(self.revision_current.as_deref());
        for h in healths.iter_mut() {
            let Ok(id) = h.id.parse::<SpecId>() else {
                continue;
            };
            if !self.settling.is_settled(&id) {
                let suspended = self.suspensions.contains_key(&h.id);
                show_unsettled(
                    Arc::make_mut(h),
                    self.revision_current.as_deref(),
                    suspended,
                );
            }
        }
        let overdue = self
            .applied_at
            .is_some_and(|t| now.at.duration_since(t) > ready_timeout);
        for h in healths.iter_mut() {
            if overdue && h.status == Status::InProgress {
                let h = Arc::make_mut(h);
                h.status = Status::Failed;
                h.message = format!(
                    "not ready {}s after the revision was applied: {}",
                    ready_timeout.as_secs(),
                    h.message
                );
                if h.reason.is_none() {
                    h.reason = Some("ReadyTimeout".into());
                }
            }
        }
        // A spec shown waiting is not ready, so what depends on it waits too: until
        // nothing more waits (a chain of n specs takes n rounds).
        let applied: BTreeSet<&SpecId> = self.recorded.values().map(|(spec, _)| spec).collect();
        let elsewhere = self.ready_elsewhere();
        let mut waiting = BTreeMap::new();
        if let Some(tree) = &self.tree {
            loop {
                let now_waiting = waiting_on(tree, &healths, &elsewhere);
                if now_waiting == waiting {
                    break;
                }
                for h in healths.iter_mut() {
                    let Ok(id) = h.id.parse::<SpecId>() else {
                        continue;
                    };
                    if let Some(on) = now_waiting.get(&id).filter(|_| !waiting.contains_key(&id)) {
                        show_waiting(Arc::make_mut(h), on, applied.contains(&id));
                    }
                }
                waiting = now_waiting;
            }
        }
        let released = waited
            .into_keys()
            .filter(|id| !waiting.contains_key(id))
            .collect();
        let after: BTreeSet<&str> = healths.iter().map(|h| h.id.as_str()).collect();
        let gone = self
            .health
            .iter()
            .filter(|h| !after.contains(h.id.as_str()))
            .filter_map(|h| h.id.parse::<SpecId>().ok())
            .collect();
        let mut change_to_ready = None;
        if !self.latency_observed
            && self.revision_applied == self.revision_current
            && !healths.is_empty()
            && healths.iter().all(|h| h.ready)
            && let Some(seen) = self.seen_at
        {
            change_to_ready = Some(now.at.duration_since(seen));
            self.latency_observed = true;
        }
        self.health = healths;
        HealthNews {
            gone,
            change_to_ready,
            released,
        }
    }
}
