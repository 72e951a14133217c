//! One sync of the due keys: render what they cover, run the engine under a time limit,
//! and hand the end to the state.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::watch as tokio_watch;
use tokio::time::Instant;

use super::events::Events;
use super::queue::Key;
use super::state::{State, SyncEnd, Tally};
use crate::apply::{Engine, Scope};
use crate::render::{self, Object};
use crate::spec::{Spec, SpecId};

/// Runs `keys` as one sync; returns each key's success and what to count, or `None` when
/// the sync was abandoned at shutdown.
pub async fn run(
    engine: &Engine,
    state: &mut State,
    keys: &[Key],
    recorder: Option<&Events>,
    mut stop: tokio_watch::Receiver<bool>,
    sync_timeout: Duration,
    stage_timeout: Duration,
) -> Option<(Vec<(Key, bool)>, Tally)> {
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
        return Some(state.on_held(keys, super::now()));
    }
    let objects = match render_keys(engine, state, full, &specs) {
        Ok(o) => o,
        Err(e) => {
            // Nothing applies and nothing is pruned; the status says why (a node joining
            // can make two localservices' per-node Service names collide).
            tracing::error!(error = %e, "render failed");
            let end = SyncEnd::Failed {
                message: format!("rendering the specs: {e}"),
                elapsed: Duration::ZERO,
            };
            return Some(state.on_sync_done(keys, end, super::now()));
        }
    };
    let objects: Vec<Object> = if held.is_empty() {
        objects
    } else {
        objects
            .into_iter()
            .filter(|o| !held.contains(&o.spec))
            .collect()
    };
    let adopt = tree.adopt_specs();
    let started = Instant::now();
    let scope = if !full {
        Scope::Only(&specs)
    } else if held.is_empty() {
        Scope::All
    } else {
        Scope::Except(&held)
    };
    // Waves and hooks wait for readiness within the sync, each stage up to the time a
    // spec has to be ready.
    let gate = super::gate::Poll {
        engine,
        timeout: stage_timeout,
    };
    let run = engine.sync_scope(&objects, &adopt, scope, &gate);
    // On shutdown an in-flight sync gets a few seconds to finish, then is abandoned
    // (the inventory's record-before-apply keeps that safe).
    let abandon = async {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(Duration::from_secs(7)).await;
    };
    // Stopping a sync midway is as safe as a crash (record-before-apply); a hung one
    // would leave the status saying all is well.
    let result = tokio::select! {
        r = run => Some(r.map_err(|e| e.to_string())),
        _ = abandon => None,
        _ = tokio::time::sleep(sync_timeout) => Some(Err(format!(
            "the sync did not finish within {}: the Kubernetes API is slow or unreachable; \
             stopped, and retried with backoff",
            humantime::format_duration(sync_timeout)
        ))),
    };
    let elapsed = started.elapsed();
    let now = super::now();
    let Some(result) = result else {
        tracing::warn!("in-flight sync abandoned at shutdown");
        return None;
    };
    let end = match result {
        Ok(report) => {
            if let Some(recorder) = recorder {
                recorder.publish(&report, state.revision_current.as_deref());
            }
            SyncEnd::Ran {
                report,
                objects: &objects,
                elapsed,
            }
        }
        Err(message) => {
            tracing::warn!(error = %message, "sync failed");
            SyncEnd::Failed { message, elapsed }
        }
    };
    Some(state.on_sync_done(keys, end, now))
}

/// A whole sync renders every object; a sync of some specs keeps only theirs. When the
/// tree or the nodes changed, the whole tree is rendered (one spec at a time) to check it
/// still renders, and the specs' objects are taken from that pass.
fn render_keys(
    engine: &Engine,
    state: &mut State,
    full: bool,
    specs: &BTreeSet<SpecId>,
) -> Result<Vec<Object>, render::RenderError> {
    let Some(tree) = state.tree.clone() else {
        return Ok(Vec::new());
    };
    let facts = render::Facts {
        instance: engine.opts.instance.clone(),
        nodes: state.nodes.clone(),
    };
    if full {
        return render::render(&tree, &facts);
    }
    let mut subset = Vec::new();
    let mut keep = |spec: &Spec, objects: Vec<Object>| {
        if specs.contains(&spec.id) {
            subset.extend(objects);
        }
    };
    if state.render_dirty {
        state.rerender(&engine.opts.instance, &mut keep)?;
    } else {
        render::render_each(
            tree.specs.iter().filter(|s| specs.contains(&s.id)),
            &tree.settings,
            &facts,
            &mut keep,
        )?;
    }
    subset.sort_by_key(Object::apply_phase);
    Ok(subset)
}

/// Hands memory freed by a sync back to the OS. A sync allocates and frees whole object
/// trees; glibc keeps freed memory in per-thread arenas, and over a burst of saves at
/// 5,000 specs the daemon's RSS grew from 380 to 650 MiB without it (the load test in
/// tests/faults.rs). mimalloc instead raised the peak at 1,000 specs by a fifth.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only returns free pages of glibc's heaps to the kernel; it
        // takes the allocator's own locks and touches no memory of ours.
        unsafe {
            malloc_trim(0);
        }
    }
}
