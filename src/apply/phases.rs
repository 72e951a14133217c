//! Applying a sync's objects phase by phase (Namespaces, CRDs, the rest), at most
//! `concurrency` at once, each outcome recorded in the inventory as it comes in.

use std::collections::BTreeSet;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::plan::Planned;
use super::{
    ApplyError, Engine, Entry, Gate, Inventory, ObjectResult, Step, list, namespaces, record,
};

/// One applied object as its apply answers: its place in the batch (its result's slot),
/// its result and its inventory entry.
type Outcome = (usize, ObjectResult, Option<Entry>);

impl Engine {
    /// Applies `planned` phase by phase (`object::apply_phase`), creating the namespaces
    /// objects need before the phase that needs them, and records each outcome in `inv`.
    /// Once `gate` says the sync is cancelled no further object is started: those under
    /// way finish and are recorded, the rest are left (their inventory entries were
    /// recorded before apply) for the next sync.
    pub(super) async fn apply_in_phases(
        &self,
        planned: Vec<Planned<'_>>,
        existing: &mut list::Existing,
        inv: &mut Inventory,
        gate: &impl Gate,
    ) -> Result<Vec<ObjectResult>, ApplyError> {
        // Each result goes to its object's slot as it comes in, and its inventory entry
        // straight into the inventory: collected first and sorted after, 20,000 results
        // and their entries' copies stood twice over, with a sort's scratch beside them
        // (23 MiB of a 10,000-spec no-op's peak).
        let mut results: Vec<Option<ObjectResult>> = Vec::with_capacity(planned.len());
        let namespaces = namespaces::needed(&planned);
        let mut ensured: BTreeSet<String> = BTreeSet::new();
        // The phases are ranges of one vector, in apply order (a render's order already):
        // moved into a vector per phase, the objects stood twice while they were moved,
        // and the batch of most objects grew by doubling (4 MiB at 10,000 specs).
        let mut planned = planned;
        let phase_of = |p: &Planned<'_>| p.key.apply_phase().min(2);
        if !planned.is_sorted_by_key(phase_of) {
            planned.sort_by_key(phase_of);
        }
        let mut start = 0;
        for phase in 0..=2u8 {
            if gate.cancelled().is_some() {
                break;
            }
            if phase == 1 {
                // After Namespace manifests, so only namespaces nobody declared get created.
                self.ensure_namespaces(&namespaces).await?;
                ensured.extend(namespaces.iter().cloned());
            }
            let len = planned[start..]
                .iter()
                .take_while(|p| phase_of(p) == phase)
                .count();
            let batch = &mut planned[start..start + len];
            start += len;
            if phase == 2 {
                self.resolve_deferred(batch, &results).await;
                // Custom resources resolved only now may need a namespace as well.
                let more: BTreeSet<String> = namespaces::needed(batch)
                    .into_iter()
                    .filter(|ns| !ensured.contains(ns))
                    .collect();
                self.ensure_namespaces(&more).await?;
            }
            let batch = &*batch;
            let base = results.len();
            results.resize_with(base + batch.len(), || None);
            // At most `concurrency` applies exist at once, each made when a slot frees up:
            // made up front, 20,000 boxed futures (each several KiB of state) were the
            // largest allocation of a 10,000-spec sync, 170 MiB. They are boxed as `Send`
            // and pushed from a plain loop: a stream combinator holding a closure over
            // borrowed objects cannot be proven `Send` for every lifetime
            // (rust-lang/rust#102211), and the daemon runs each sync as a task.
            let limit = self.opts.concurrency.max(1);
            let mut queued = batch.iter().enumerate();
            let mut running: FuturesUnordered<futures::future::BoxFuture<'_, Option<Outcome>>> =
                FuturesUnordered::new();
            loop {
                while running.len() < limit {
                    let Some((i, p)) = queued.next() else { break };
                    // Known absent, known present, or (a kind served only now) unknown.
                    // Moved, not copied: each object is applied once.
                    let live = existing.take(&p.key);
                    let entry = inv.entries.get(&p.key).map(|e| Entry::clone(e));
                    running.push(Box::pin(async move {
                        // Asked when the object's turn comes, not when it was queued.
                        if gate.cancelled().is_some() {
                            return None;
                        }
                        let (r, e) = self.apply_one(p, live, entry).await;
                        gate.progress(Step::Applied);
                        Some((i, r, e))
                    }));
                }
                let (i, result, entry) = match running.next().await {
                    Some(Some(outcome)) => outcome,
                    Some(None) => continue,
                    None => break,
                };
                // The policy as it is now, also for an object left unchanged.
                let policy = &batch[i].obj.policy;
                let (keep, sealed, wave) = (policy.keep, policy.sealed, policy.wave);
                let hook = policy.hook.is_some();
                let entry = entry.map(|e| Entry {
                    keep,
                    sealed,
                    wave,
                    hook,
                    ..e
                });
                record::settle(inv, &result.key, entry);
                results[base + i] = Some(result);
            }
        }
        // Objects a cancelled sync never reached have no result.
        // In place: `flatten` would copy them into a new vector (8 MiB at 20,000).
        #[expect(
            clippy::filter_map_identity,
            reason = "flatten does not collect in place"
        )]
        let results = results.into_iter().filter_map(|r| r).collect();
        Ok(results)
    }
}
