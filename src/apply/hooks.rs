//! Running hooks (`spec::order`): one at a time, in their stage's order. A hook is a run,
//! so an earlier run's object is deleted first (Helm's `before-hook-creation`, always
//! for a named hook: a Job cannot be run again in place; a hook with `generateName` is
//! a new object each run, `runs`), then it is created and waited for. One that failed
//! is deleted at once if its delete policy says `hook-failed`; those that succeeded with
//! `hook-succeeded` go once every hook of their phase has succeeded, as Helm does it (a
//! chart's hook ServiceAccount must outlive the hook Job using it).

use std::time::Duration;

use kube::api::{Api, DynamicObject};

use super::list::Existing;
use super::live::Live;
use super::plan::Planned;
use super::stages::{Gate, Readiness};
use super::{Action, Engine, Inventory, ObjectResult, record};
use crate::cluster::error_text;
use crate::object::claim;

/// How long an earlier run's object may take to go before the hook is reported failed.
const CLEAR_WAIT: Duration = Duration::from_secs(60);

impl Engine {
    /// Runs the hooks of one stage; a hook that fails ends the stage there. Those that
    /// succeeded and are to be deleted once their phase has are handed back, each with
    /// the name its run has.
    pub(super) async fn run_hooks<'a, G: Gate>(
        &self,
        batch: Vec<Planned<'a>>,
        existing: &mut Existing,
        inv: &mut Inventory,
        gate: &G,
    ) -> (Vec<ObjectResult>, Vec<(Planned<'a>, String)>) {
        let mut results = Vec::with_capacity(batch.len());
        let mut delete_later = Vec::new();
        for p in batch {
            let live = existing.take(&p.key);
            let (result, run) = self.run_hook(&p, live, inv, gate).await;
            let failed = result.action.is_error();
            results.push(result);
            if failed || gate.cancelled().is_some() {
                break;
            }
            if p.obj
                .policy
                .hook
                .as_ref()
                .is_some_and(|h| h.delete_succeeded)
            {
                delete_later.push((p, run));
            }
        }
        (results, delete_later)
    }

    /// Deletes the hooks of a phase that all succeeded, as their delete policy asks.
    pub(super) async fn delete_hooks(&self, hooks: Vec<(Planned<'_>, String)>) {
        for (p, run) in &hooks {
            self.delete_hook(p, run).await;
        }
    }

    /// Runs one hook to its end; the result, and the name of the object it ran as.
    async fn run_hook<G: Gate>(
        &self,
        p: &Planned<'_>,
        live: Option<Option<Live>>,
        inv: &mut Inventory,
        gate: &G,
    ) -> (ObjectResult, String) {
        let outcome = |action: Action| ObjectResult {
            key: p.key.clone(),
            spec: p.obj.spec.clone(),
            action,
            live: None,
            resource_version: None,
            fields: None,
            drift: None,
            warnings: Vec::new(),
        };
        let (result, run) = match super::runs::generated(p.obj) {
            Some(_) => match self.create_run(p, inv).await {
                (result, Some(run)) => (result, run),
                (result, None) => return (result, p.key.name.clone()),
            },
            None => {
                if let Err(action) = self.clear_hook(p, live).await {
                    return (outcome(action), p.key.name.clone());
                }
                let entry = inv
                    .entries
                    .get(&p.key)
                    .map(|e| super::inventory::Entry::clone(e));
                let (result, entry) = self.apply_one(p, Some(None), entry).await;
                record::settle(inv, &p.key, entry);
                if result.action.is_error() {
                    return (result, p.key.name.clone());
                }
                (result, p.obj.clone())
            }
        };
        tracing::info!(spec = %p.obj.spec, object = %p.key, run = %run.name, "hook started");
        gate.progress(super::stages::Step::Waiting {
            stage: format!("hook {} to succeed", run.display_ref()),
        });
        let since = result.resource_version.clone();
        let key = run.key();
        let readiness = tokio::select! {
            r = gate.ready(std::slice::from_ref(&run)) => r,
            never = self.follow_run(p, &key, since) => match never {},
        };
        self.unfollow([&key]);
        let action = match readiness {
            Readiness::Ready => result.action,
            // Cut short (a newer revision, shutdown): the run did not fail, and is left
            // for the next sync, which deletes it before its own run.
            _ if gate.cancelled().is_some() => result.action,
            Readiness::Failed(why) | Readiness::NotReady(why) => {
                if p.obj.policy.hook.as_ref().is_some_and(|h| h.delete_failed) {
                    self.delete_hook(p, &run.name).await;
                }
                Action::Failed(format!("the hook did not succeed: {why}"))
            }
        };
        (ObjectResult { action, ..result }, run.name)
    }

    /// Deletes an earlier run's object (ours only) and waits until it is gone.
    async fn clear_hook(&self, p: &Planned<'_>, live: Option<Option<Live>>) -> Result<(), Action> {
        let api = self.hook_api(p).map_err(|e| Action::Failed(e.clone()))?;
        let read = |e: kube::Error| Action::Failed(format!("reading it: {}", error_text(&e)));
        let live = match live {
            Some(known) => known.map(|l| l.value),
            None => api
                .get_opt(&p.key.name)
                .await
                .map_err(read)?
                .and_then(|o| serde_json::to_value(o).ok()),
        };
        let Some(live) = live else {
            return Ok(());
        };
        claim(&live, &self.opts.instance, p.adopt)
            .map_err(|refusal| Action::Conflict(refusal.to_string()))?;
        if let Err(e) = self.delete_object(&api, &p.key.name).await {
            return Err(Action::Failed(format!(
                "deleting its earlier run: {}",
                error_text(&e)
            )));
        }
        let deadline = tokio::time::Instant::now() + CLEAR_WAIT;
        loop {
            match api.get_opt(&p.key.name).await.map_err(read)? {
                None => return Ok(()),
                Some(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(Action::Failed(format!(
                        "its earlier run was still being deleted after {}",
                        humantime::format_duration(CLEAR_WAIT)
                    )));
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// Deletes a hook's run `name`, as its delete policy asks; a failure is said, not
    /// fatal (the next run deletes it first anyway).
    async fn delete_hook(&self, p: &Planned<'_>, name: &str) {
        let Ok(api) = self.hook_api(p) else {
            return;
        };
        match self.delete_object(&api, name).await {
            Ok(()) => {
                tracing::info!(spec = %p.obj.spec, object = %p.key, run = %name, "hook deleted, as its delete policy asks")
            }
            Err(e) => tracing::warn!(
                spec = %p.obj.spec,
                object = %p.key,
                run = %name,
                error = %error_text(&e),
                "deleting the hook after its run failed; its next run deletes it first"
            ),
        }
    }

    /// Where a hook's object lives; the reason its kind is not served, if it is not.
    pub(super) fn hook_api<'p>(
        &self,
        p: &'p Planned<'_>,
    ) -> Result<Api<DynamicObject>, &'p String> {
        let resolved = p.resolved.as_ref()?;
        Ok(resolved.api(
            &self.client,
            (!p.key.namespace.is_empty()).then_some(p.key.namespace.as_str()),
        ))
    }
}
