//! One sync of the due keys, in two halves: `prepare` (in the loop: what the keys cover,
//! rendered from the state) and `execute` (a task of its own beside the loop: the engine
//! under the sync's deadline, told by the loop when to stop). The loop hands the end to
//! the state.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch as tokio_watch;
use tokio::time::Instant;

use super::queue::Key;
use super::state::{State, SyncEnd, Tally};
use crate::apply::{ApplyError, Cluster, Engine, Known, Scope, SyncReport};
use crate::gate::{Progress, Steered};
use crate::render::{self, Object};
use crate::spec::{SpecId, SpecTree, TreeFacts};

/// Past the sync's deadline, how long the engine has to reach a safe point (it checks
/// the deadline between objects and in every wait) before it is abandoned.
const DEADLINE_GRACE: Duration = Duration::from_secs(10);

/// What the keys that came due make.
pub enum Prepared {
    /// Settled without the cluster (keys of held specs only, or a render that failed):
    /// each key's success and what to count.
    Done(Vec<(Key, bool)>, Tally),
    /// A sync for the engine to run.
    Run(Job),
}

/// A sync ready to run on its own: everything it needs, owned.
pub struct Job {
    pub keys: Vec<Key>,
    /// Shared with the state's render of the tree when the sync is whole.
    objects: Arc<[Object]>,
    /// The objects of held specs not settled in the current revision: whether they hold
    /// anything back is read after the sync (`Engine::applied_as_is`).
    held_objects: Vec<Object>,
    facts: TreeFacts,
    scope: OwnedScope,
    /// For a whole sync: the objects the watches hold, taken for its lists of their kinds.
    known: Option<Known>,
}

/// `apply::Scope`, owning its specs (a task cannot borrow the state's).
enum OwnedScope {
    All,
    Only(BTreeSet<SpecId>),
    Except(BTreeSet<SpecId>),
}

impl OwnedScope {
    fn scope(&self) -> Scope<'_> {
        match self {
            OwnedScope::All => Scope::All,
            OwnedScope::Only(s) => Scope::Only(s),
            OwnedScope::Except(s) => Scope::Except(s),
        }
    }
}

/// Why a sync ended without a report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(
        "the sync made no progress for {}: the Kubernetes API is slow or unreachable; \
         stopped, and retried with backoff",
        humantime::format_duration(*.0)
    )]
    Overran(Duration),
    /// The task panicked or was cancelled: a failed sync, not a crash of the loop.
    #[error("the sync's task ended abnormally: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl SyncError {
    /// The reason the specs say when the cluster itself was not reached, if it was not.
    fn away(&self) -> Option<&'static str> {
        match self {
            SyncError::Apply(ApplyError::Unreachable(_)) => Some("ClusterUnreachable"),
            SyncError::Apply(ApplyError::Unauthorized(_)) => Some("ClusterUnauthorized"),
            _ => None,
        }
    }
}

/// How a sync's task ended.
pub(crate) struct Finished {
    pub keys: Vec<Key>,
    pub objects: Arc<[Object]>,
    /// Held specs that hold nothing back: applied as they are in this revision.
    pub held_applied: BTreeSet<SpecId>,
    pub result: Result<SyncReport, SyncError>,
    pub elapsed: Duration,
}

impl Finished {
    /// What the state takes of it: the report is moved out (it holds every object the
    /// sync wrote).
    pub(crate) fn take_end(&mut self) -> SyncEnd<'_> {
        match &mut self.result {
            Ok(report) => SyncEnd::Ran {
                report: std::mem::take(report),
                objects: &self.objects,
                elapsed: self.elapsed,
            },
            Err(e) => SyncEnd::Failed {
                message: e.to_string(),
                elapsed: self.elapsed,
                away: e.away(),
            },
        }
    }
}

/// The time limits of one sync.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole sync: renders, applies, waits (`--sync-timeout`).
    pub sync: Duration,
    /// One stage's wait for readiness (`--ready-timeout`).
    pub stage: Duration,
}

/// Works out what `keys` cover from the state: nothing to run (suspended or waiting
/// specs only; a render that failed, with its end handed to the state), or a `Job`.
pub fn prepare(engine: &Engine, state: &mut State, keys: Vec<Key>) -> Option<Prepared> {
    let tree = state.tree.clone()?;
    let full = keys.contains(&Key::Full);
    // Suspended specs are left as they are: not applied, not pruned, not corrected; so
    // are those waiting for their dependencies to be ready, until they are.
    let mut held = state.held();
    held.extend(state.waiting().into_keys());
    let specs: BTreeSet<SpecId> = keys
        .iter()
        .filter_map(Key::spec)
        .filter(|s| !held.contains(*s))
        .cloned()
        .collect();
    if !full && specs.is_empty() {
        let (outcome, tally) = state.on_held(&keys, super::now());
        return Some(Prepared::Done(outcome, tally));
    }
    let objects = match render_keys(&engine.opts.instance, state, full, &specs) {
        Ok(o) => o,
        Err(e) => {
            // Nothing applies and nothing is pruned; the status says why (a node joining
            // can make two localservices' per-node Service names collide).
            tracing::error!(error = %e, "render failed");
            let end = SyncEnd::Failed {
                message: format!("rendering the specs: {e}"),
                elapsed: Duration::ZERO,
                away: None,
            };
            let (outcome, tally) = state.on_sync_done(&keys, end, super::now());
            return Some(Prepared::Done(outcome, tally));
        }
    };
    let (objects, held_objects) = if held.is_empty() {
        (objects, Vec::new())
    } else {
        let (held_objects, objects): (Vec<Object>, Vec<Object>) = objects
            .iter()
            .cloned()
            .partition(|o| held.contains(&o.spec));
        let held_objects = held_objects
            .into_iter()
            .filter(|o| !state.settled(&o.spec))
            .collect();
        (objects.into(), held_objects)
    };
    let scope = if !full {
        OwnedScope::Only(specs)
    } else if held.is_empty() {
        OwnedScope::All
    } else {
        OwnedScope::Except(held)
    };
    // A sync of a few specs reads their objects directly: fresher than any watch.
    let known = full.then(|| state.live.known()).flatten();
    Some(Prepared::Run(Job {
        keys,
        objects,
        held_objects,
        facts: tree.facts(),
        scope,
        known,
    }))
}

/// Runs `job` on the engine, until it ends, `cancel` says why it stops (at the engine's
/// next safe point: between objects, in any wait), or `limits.sync` runs out (the same
/// way; past a grace period the sync is abandoned, as safe as a crash thanks to the
/// inventory's record-before-apply).
pub async fn execute(
    cluster: Cluster,
    store: crate::apply::Store,
    job: Job,
    limits: Limits,
    cancel: tokio_watch::Receiver<Option<String>>,
    progress: Progress,
) -> Finished {
    let started = Instant::now();
    let moved = crate::gate::Moved::now();
    // Waves and hooks wait for readiness within the sync, each stage up to the time a
    // spec has to be ready, and all of them within what is left of the sync's time.
    let engine: &Engine = &cluster;
    let gate = Steered {
        engine,
        stage_timeout: limits.stage,
        sync_timeout: limits.sync,
        moved: moved.clone(),
        cancel,
        progress,
    };
    let run = engine.sync_in(
        store,
        &job.objects,
        &job.facts,
        job.scope.scope(),
        job.known,
        &gate,
    );
    let result = match unless_still(run, &moved, limits.sync + DEADLINE_GRACE).await {
        Some(r) => r.map_err(SyncError::from),
        None => Err(SyncError::Overran(limits.sync)),
    };
    if let Err(e) = &result {
        tracing::warn!(error = %e, "sync failed");
    }
    let held_applied = match job.held_objects.is_empty() {
        true => BTreeSet::new(),
        false => {
            engine
                .applied_as_is(&job.held_objects, &job.facts.adopt)
                .await
        }
    };
    Finished {
        keys: job.keys,
        objects: job.objects,
        held_applied,
        result,
        elapsed: started.elapsed(),
    }
}

/// Runs `run` to its end, unless it stands still (`moved` not marked) for `limit`: then
/// `None`, and `run` is dropped.
async fn unless_still<T>(
    run: impl Future<Output = T>,
    moved: &crate::gate::Moved,
    limit: Duration,
) -> Option<T> {
    tokio::pin!(run);
    loop {
        tokio::select! {
            r = &mut run => return Some(r),
            _ = tokio::time::sleep_until(moved.deadline(limit)) => {
                // It may have moved while this slept: then sleep again.
                if moved.deadline(limit) <= Instant::now() {
                    return None;
                }
            }
        }
    }
}

/// A whole sync takes every object of the tree; a sync of some specs only theirs. The
/// tree is rendered whole once per revision and node set (which also checks it still
/// renders), and kept: later syncs, a periodic resync or a drift's correction, take
/// their objects from it. Only a sync of a few specs before any whole render renders
/// just those specs.
pub(super) fn render_keys(
    instance: &str,
    state: &mut State,
    full: bool,
    specs: &BTreeSet<SpecId>,
) -> Result<Arc<[Object]>, render::RenderError> {
    let Some(tree) = state.tree.clone() else {
        return Ok(Arc::from([]));
    };
    let whole = match state.rendered() {
        Some(objects) => Some(objects),
        None if full || state.render_dirty => Some(render_whole(instance, state, &tree)?),
        None => None,
    };
    if let Some(objects) = whole {
        return Ok(match full {
            true => objects,
            false => objects
                .iter()
                .filter(|o| specs.contains(&o.spec))
                .cloned()
                .collect(),
        });
    }
    let facts = render::Facts {
        instance: instance.to_string(),
        nodes: state.nodes.clone(),
    };
    let mut subset = Vec::new();
    render::render_each(
        tree.specs.iter().filter(|s| specs.contains(&s.id)),
        &tree.settings,
        &facts,
        |_, objects| subset.extend(objects),
    )?;
    subset.sort_by_key(Object::apply_phase);
    Ok(subset.into())
}

/// Every object of the tree, in apply order, kept in the state. When the tree or the
/// nodes changed, readiness's expectations are taken from the same pass.
fn render_whole(
    instance: &str,
    state: &mut State,
    tree: &SpecTree,
) -> Result<Arc<[Object]>, render::RenderError> {
    let mut all = Vec::new();
    if state.render_dirty {
        state.rerender(instance, |_, objects| all.extend(objects))?;
    } else {
        let facts = render::Facts {
            instance: instance.to_string(),
            nodes: state.nodes.clone(),
        };
        render::render_each(&tree.specs, &tree.settings, &facts, |_, objects| {
            all.extend(objects)
        })?;
    }
    all.sort_by_key(Object::apply_phase);
    let all: Arc<[Object]> = all.into();
    state.keep_rendered(all.clone());
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Moved;

    #[tokio::test(start_paused = true)]
    async fn a_sync_that_keeps_moving_runs_past_the_limit_and_one_that_stands_still_stops() {
        let limit = Duration::from_secs(10);
        // Moves every 4 s for a minute: six times the limit, never still for it.
        let moved = Moved::now();
        let started = Instant::now();
        let busy = async {
            for _ in 0..15 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                moved.mark();
            }
            "done"
        };
        assert_eq!(unless_still(busy, &moved, limit).await, Some("done"));
        assert_eq!(started.elapsed(), Duration::from_secs(60));

        // Moves twice, then stands still: stopped one limit after it last moved.
        let moved = Moved::now();
        let started = Instant::now();
        let stuck = async {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                moved.mark();
            }
            std::future::pending::<()>().await;
        };
        assert_eq!(unless_still(stuck, &moved, limit).await, None);
        assert_eq!(started.elapsed(), Duration::from_secs(18));
    }
}
