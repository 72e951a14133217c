//! Stages of a sync: pre hooks, then sync waves, then post hooks (docs/src/policies.md,
//! "Waves and hooks"; Argo CD's phases and waves, Helm's hooks).
//!
//! A stage is applied (each in the usual kind order: Namespaces, CRDs, the rest) and must
//! be ready before the next starts. Readiness is health's, not apply's: the driver hands
//! in a [`Gate`] that waits for it. When a stage fails or is not ready in time, what
//! follows is not applied and nothing is pruned: the next sync takes it up again.
//!
//! Hooks run only when the revision changes something: a new or changed object of the
//! sync (by the hash of what we send, so drift correction is not a change) or a changed
//! hook. A resync, a no-op re-apply and a drift correction run none.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;

use super::hash::body_hashes;
use super::list::Existing;
use super::plan::Planned;
use super::{ApplyError, Engine, Entry, Inventory, ObjectResult};
use crate::render::Object;
use crate::spec::order::Phase;

/// What a [`Gate`] found of a stage's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Some object failed (a hook Job that failed, a Deployment past its deadline): why.
    Failed(String),
    /// Not ready within the gate's time: which object, and what it waits for.
    NotReady(String),
}

/// What a sync is doing, as it tells its [`Gate`] (the daemon shows it in its status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The sync has read the cluster and will apply (or find unchanged) this many objects.
    Planned { objects: usize },
    /// One more object was applied (or found unchanged).
    Applied,
    /// What the sync now waits on to be ready: a stage, or a hook's run.
    Waiting { stage: String },
    /// The sync prunes this many objects.
    Pruning { objects: usize },
}

/// Waits until a stage's objects are ready, failed, or its time runs out; and is the
/// driver's say in a sync: what it is told of the sync's progress, and whether the sync
/// is to stop.
pub trait Gate: Sync {
    fn ready(&self, objects: &[Object]) -> impl Future<Output = Readiness> + Send;

    /// Why the sync is to stop at its next safe point (a newer revision, shutdown, its
    /// deadline), if it is: no further object is started, no further stage waited for,
    /// nothing pruned; what was applied is recorded in the inventory as usual.
    fn cancelled(&self) -> Option<String> {
        None
    }

    /// Told as the sync goes; the default keeps nothing.
    fn progress(&self, _step: Step) {}
}

/// For callers with no stages to wait for (and tests): everything is ready at once.
pub struct NoWait;

impl Gate for NoWait {
    async fn ready(&self, _: &[Object]) -> Readiness {
        Readiness::Ready
    }
}

/// Where an object goes: hooks by weight, ordinary objects (and Argo CD's `Sync` hooks)
/// by wave. A stage waits for the objects of the waves before it to be ready, but for
/// Helm's post hooks ([`Stage::Applied`]), which follow them once they are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Pre(i32),
    Wave(i32),
    Applied(i32),
    Post(i32),
}

impl Stage {
    /// The stages `obj` is applied in: one for an ordinary object, one per phase for a
    /// hook (each a run of its own). `SyncFail` hooks run apart, only when the sync
    /// failed ([`fail_hook`]); a hook that is never run has none.
    fn of(obj: &Object) -> Vec<Stage> {
        let Some(h) = &obj.policy.hook else {
            return vec![Stage::Wave(obj.policy.wave)];
        };
        h.phases
            .iter()
            .filter_map(|phase| match phase {
                Phase::Pre => Some(Stage::Pre(h.weight)),
                Phase::Sync => Some(Stage::Wave(obj.policy.wave)),
                Phase::Applied => Some(Stage::Applied(h.weight)),
                Phase::Post => Some(Stage::Post(h.weight)),
                Phase::Fail | Phase::Skipped => None,
            })
            .collect()
    }

    /// Whether every object of the stage is a hook (a wave's `Sync` hooks are run with it).
    fn is_hook(self) -> bool {
        !matches!(self, Stage::Wave(_))
    }

    /// Whether the stage starts only once what came before is ready (all but Helm's
    /// post hooks, as `helm install` runs them without `--wait`).
    fn waits(self) -> bool {
        !matches!(self, Stage::Applied(_))
    }
}

/// Whether `obj` runs when the sync fails (Argo CD's `SyncFail`).
fn fail_hook(obj: &Object) -> bool {
    obj.policy
        .hook
        .as_ref()
        .is_some_and(|h| h.phases.contains(&Phase::Fail))
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Pre(w) => write!(f, "pre hooks (weight {w})"),
            Stage::Wave(w) => write!(f, "wave {w}"),
            Stage::Applied(w) => write!(f, "Helm post hooks (weight {w})"),
            Stage::Post(w) => write!(f, "post hooks (weight {w})"),
        }
    }
}

/// Whether `objects` need stages at all: a tree without waves or hooks is one stage.
pub(super) fn staged(planned: &[Planned<'_>]) -> bool {
    planned
        .iter()
        .any(|p| p.obj.policy.wave != 0 || p.obj.policy.hook.is_some())
}

impl Engine {
    /// Applies `planned` stage by stage (see the module); the results, and why the sync
    /// stopped before its last stage, if it did. When hooks ran and the sync failed, its
    /// `SyncFail` hooks run last.
    pub(super) async fn apply_staged<G: Gate>(
        &self,
        planned: Vec<Planned<'_>>,
        existing: &mut Existing,
        inv: &mut Inventory,
        gate: &G,
    ) -> Result<(Vec<ObjectResult>, Option<String>), ApplyError> {
        let hooks_due = self.hooks_due(&planned, inv).await;
        let (on_fail, planned): (Vec<Planned>, Vec<Planned>) = planned
            .into_iter()
            .partition(|p| fail_hook(p.obj) && !p.obj.policy.never_applied());
        let (mut results, stopped) = self
            .apply_stages(planned, hooks_due, existing, inv, gate)
            .await?;
        let failed = stopped.is_some() || results.iter().any(|r| r.action.is_error());
        // A sync told to stop did not fail: its successor runs the hooks it needs.
        if hooks_due && failed && !on_fail.is_empty() && gate.cancelled().is_none() {
            let mut on_fail = on_fail;
            on_fail.sort_by_key(|p| p.obj.policy.hook.as_ref().map_or(0, |h| h.weight));
            tracing::info!(
                hooks = on_fail.len(),
                "the sync failed: running its SyncFail hooks"
            );
            self.ensure_namespaces(&super::namespaces::needed(&on_fail))
                .await?;
            let (ran, done) = self.run_hooks(on_fail, existing, inv, gate).await;
            if !ran.iter().any(|r| r.action.is_error()) {
                self.delete_hooks(done).await;
            }
            results.extend(ran);
        }
        Ok((results, stopped))
    }

    /// The stages of [`Self::apply_staged`] but its `SyncFail` hooks.
    async fn apply_stages<G: Gate>(
        &self,
        planned: Vec<Planned<'_>>,
        hooks_due: bool,
        existing: &mut Existing,
        inv: &mut Inventory,
        gate: &G,
    ) -> Result<(Vec<ObjectResult>, Option<String>), ApplyError> {
        // Namespaces come first whatever their wave: everything else may live in them,
        // hooks that run before wave 0 included.
        let (namespaces, planned): (Vec<Planned>, Vec<Planned>) = planned
            .into_iter()
            .partition(|p| p.key.is("", "Namespace") && p.obj.policy.hook.is_none());
        let mut results = self
            .apply_in_phases(namespaces, existing, inv, gate)
            .await?;
        if let Some(failed) = results.iter().find(|r| r.action.is_error()) {
            let why = format!("Namespace {} failed", failed.key.name);
            return Ok((
                results,
                Some(format!(
                    "{why}; nothing else was applied, and nothing was pruned"
                )),
            ));
        }
        let mut stages: BTreeMap<Stage, Vec<Planned>> = BTreeMap::new();
        for p in planned {
            let of = Stage::of(p.obj);
            if of.is_empty() && !fail_hook(p.obj) {
                self.say_skipped(p.obj);
            }
            let is_hook = p.obj.policy.hook.is_some();
            for stage in of {
                if !is_hook || hooks_due {
                    stages.entry(stage).or_default().push(p.clone());
                }
            }
        }
        // Hooks that succeeded, deleted once their whole phase has.
        let mut succeeded = Vec::new();
        // The ordinary objects of the last wave applied, and its stage, until a stage
        // that waits for them to be ready.
        let mut unready: Option<(Stage, Vec<Object>)> = None;
        // Their Jobs that the TTL controller deletes once finished, followed while they
        // are waited for.
        let mut runs: Vec<super::follow::Run> = Vec::new();
        let mut stages = stages.into_iter().peekable();
        while let Some((stage, batch)) = stages.next() {
            if let Some(why) = gate.cancelled() {
                return Ok((results, Some(stopped_before(stage, &why))));
            }
            if stage.waits()
                && let Some((before, objects)) = unready.take()
            {
                gate.progress(Step::Waiting {
                    stage: format!("{before} to be ready"),
                });
                let readiness = tokio::select! {
                    r = gate.ready(&objects) => r,
                    never = self.follow_runs(&runs) => match never {},
                };
                self.unfollow(runs.iter().map(|(p, _)| &p.key));
                runs.clear();
                // A wait cut short is the cancellation's doing, not the objects'.
                if let Some(why) = gate.cancelled() {
                    return Ok((results, Some(stopped_before(stage, &why))));
                }
                match readiness {
                    Readiness::Ready => {}
                    Readiness::Failed(why) | Readiness::NotReady(why) => {
                        return Ok((results, Some(stopped(before, Some(stage), &why))));
                    }
                }
            }
            // A wave's own objects first, then its `Sync` hooks, each run to its end.
            let (hooks, batch): (Vec<Planned>, Vec<Planned>) =
                batch.into_iter().partition(|p| p.obj.policy.hook.is_some());
            let mut to_follow = Vec::new();
            if !stage.is_hook() {
                let objects: Vec<Object> = batch.iter().map(|p| p.obj.clone()).collect();
                let previous = unready.take().map(|(_, o)| o).unwrap_or_default();
                unready = Some((stage, previous.into_iter().chain(objects).collect()));
                to_follow = batch
                    .iter()
                    .filter(|p| deletes_itself(p))
                    .cloned()
                    .collect();
            }
            let mut ran = self.apply_in_phases(batch, existing, inv, gate).await?;
            // Followed from what their apply answered: a Job that finished and was
            // deleted before its wave is waited for is still seen to have finished.
            runs.extend(to_follow.into_iter().map(|p| {
                let since = ran
                    .iter()
                    .find(|r| r.key == p.key)
                    .and_then(|r| r.resource_version.clone());
                (p, since)
            }));
            if !hooks.is_empty()
                && !ran.iter().any(|r| r.action.is_error())
                && gate.cancelled().is_none()
            {
                // What `apply_in_phases` does for other objects.
                self.ensure_namespaces(&super::namespaces::needed(&hooks))
                    .await?;
                let (hook_runs, done) = self.run_hooks(hooks, existing, inv, gate).await;
                succeeded.extend(done);
                ran.extend(hook_runs);
            }
            let failed: Vec<String> = ran
                .iter()
                .filter(|r| r.action.is_error())
                .map(|r| r.key.to_string())
                .collect();
            results.extend(ran);
            let rest = stages.peek().map(|(next, _)| *next);
            if let Some(why) = gate.cancelled() {
                // Succeeded hooks stay: their phase did not end.
                return Ok((results, Some(stopped_after(stage, rest, &why))));
            }
            let phase_ends = rest.is_none_or(|next| !same_phase(stage, next));
            if failed.is_empty() && phase_ends {
                self.delete_hooks(std::mem::take(&mut succeeded)).await;
            }
            if !failed.is_empty() {
                return Ok((results, Some(stopped(stage, rest, &failed.join(", ")))));
            }
        }
        Ok((results, None))
    }

    /// Whether this sync runs its hooks: some object (hook or not) is new or changed
    /// since it was last applied, by the hash of what would be sent.
    pub(super) async fn hooks_due(&self, planned: &[Planned<'_>], inv: &Inventory) -> bool {
        if !planned.iter().any(|p| p.obj.policy.hook.is_some()) {
            return false;
        }
        // A `SyncFail` hook is not run by a sync that succeeds, so it is never recorded
        // as applied: it would make every sync look like a change.
        let counted = |p: &&Planned<'_>| {
            let only_on_fail = p
                .obj
                .policy
                .hook
                .as_ref()
                .is_some_and(|h| h.phases == [Phase::Fail]);
            !p.obj.policy.never_applied() && !only_on_fail
        };
        for p in planned.iter().filter(counted) {
            if self
                .changed(p, inv.entries.get(&p.key).map(Box::as_ref))
                .await
            {
                return true;
            }
        }
        false
    }

    /// Whether what `p` would send differs from what was last applied (as the apply's
    /// own no-write rule reads the inventory, keyed hashes included).
    pub(super) async fn changed(&self, p: &Planned<'_>, entry: Option<&Entry>) -> bool {
        let Some(recorded) = entry.and_then(|e| e.applied.as_deref()) else {
            return true;
        };
        let keyed = p.key.is("", "Secret") || p.obj.policy.sealed;
        let p = p.shaped();
        let plain = body_hashes(&p.body, None).applied;
        if recorded == plain {
            return false;
        }
        match keyed {
            true => match self.hash_key().await {
                Ok(k) => body_hashes(&p.body, Some(k)).applied != recorded,
                Err(_) => true,
            },
            false => true,
        }
    }

    /// Says once per object and process that a hook driftless does not run (a Helm
    /// `test`, Argo CD's `Skip`) is left out.
    fn say_skipped(&self, obj: &Object) {
        let key = obj.display_ref();
        let first = self
            .said_skipped
            .lock()
            .map(|mut said| said.insert(key.clone()))
            .unwrap_or(false);
        if first {
            let written = obj
                .policy
                .hook
                .as_ref()
                .map(|h| h.written.clone())
                .unwrap_or_default();
            tracing::warn!(
                object = %key,
                spec = %obj.spec,
                hook = %written,
                "not applied: a hook driftless does not run (Helm's pre- and post-install/upgrade hooks run, and Argo CD's PreSync, Sync, PostSync and SyncFail)"
            );
        }
    }
}

/// Whether `p` is a Job the TTL controller deletes once it finishes
/// (`ttlSecondsAfterFinished`, 0 in current charts): its wave follows it from its apply
/// (`follow`), as a hook's run is. Any other object stays to be read.
fn deletes_itself(p: &Planned<'_>) -> bool {
    p.key.is("batch", "Job") && !p.obj.body.value()["spec"]["ttlSecondsAfterFinished"].is_null()
}

/// Whether two stages are hooks of one phase.
fn same_phase(a: Stage, b: Stage) -> bool {
    matches!(
        (a, b),
        (Stage::Pre(_), Stage::Pre(_))
            | (Stage::Applied(_), Stage::Applied(_))
            | (Stage::Post(_), Stage::Post(_))
    )
}

/// Why a cancelled sync stopped before `stage`.
fn stopped_before(stage: Stage, why: &str) -> String {
    format!("{why}; {stage} and what follows were not applied, and nothing was pruned")
}

/// Why a cancelled sync stopped after `stage`, with `rest` still to come.
fn stopped_after(stage: Stage, rest: Option<Stage>, why: &str) -> String {
    match rest {
        Some(next) => stopped_before(next, why),
        None => format!("{why} after {stage}; nothing was pruned"),
    }
}

/// Why a sync stopped after `stage`, and what it left for the next.
fn stopped(stage: super::stages::Stage, rest: Option<Stage>, why: &str) -> String {
    let what = match rest {
        Some(next) => format!("{next} and what follows were not applied, and nothing was pruned"),
        None => "nothing was pruned".to_string(),
    };
    format!("{stage}: {why}; {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_go_pre_hooks_waves_post_hooks_each_by_number() {
        let mut stages = vec![
            Stage::Post(-1),
            Stage::Applied(3),
            Stage::Wave(2),
            Stage::Pre(5),
            Stage::Wave(-3),
            Stage::Pre(-1),
            Stage::Wave(0),
        ];
        stages.sort();
        assert_eq!(
            stages,
            [
                Stage::Pre(-1),
                Stage::Pre(5),
                Stage::Wave(-3),
                Stage::Wave(0),
                Stage::Wave(2),
                Stage::Applied(3),
                Stage::Post(-1)
            ]
        );
        assert_eq!(
            stopped(
                Stage::Wave(1),
                Some(Stage::Wave(2)),
                "Deployment.apps a/b: not ready"
            ),
            "wave 1: Deployment.apps a/b: not ready; wave 2 and what follows were not applied, and nothing was pruned"
        );
    }
}
