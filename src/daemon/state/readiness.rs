//! Readiness in the state: what the tree renders to, and the specs' health as a refresh
//! computed it.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Now, State};
use crate::health::{self, SpecHealth, Status};
use crate::render::{self, Object};
use crate::spec::{Spec, SpecId};

/// What a readiness refresh changed, for the metrics.
#[derive(Debug, Default, PartialEq)]
pub struct HealthNews {
    /// Specs that left the tree: their series go.
    pub gone: Vec<SpecId>,
    /// From the current revision first seen to every spec ready, the first time it is.
    pub change_to_ready: Option<Duration>,
}

impl State {
    /// Brings `expected` up to the current tree and nodes (one spec rendered at a time,
    /// each spec's objects then handed to `keep`); an error when the tree does not
    /// render. Rendered again only when one of them changed: a render of every object
    /// each second was the daemon's largest allocation.
    pub fn rerender(
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
        render::render_each(&tree.specs, &facts, |spec, objects| {
            expected.extend(objects.iter().map(health::Expected::of));
            keep(spec, objects);
        })?;
        self.set_expected(expected);
        self.render_dirty = false;
        Ok(())
    }

    /// Takes the specs' readiness as just computed: a spec still in progress
    /// `ready_timeout` after its revision was applied counts as failed.
    pub fn take_health(
        &mut self,
        mut healths: Vec<SpecHealth>,
        ready_timeout: Duration,
        now: Now,
    ) -> HealthNews {
        let overdue = self
            .applied_at
            .is_some_and(|t| now.at.duration_since(t) > ready_timeout);
        for h in healths.iter_mut() {
            if overdue && h.status == Status::InProgress {
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
        }
    }
}
