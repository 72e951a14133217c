//! The readiness refresh: the specs' health from the watched live state (and the Pods of
//! Deployments that are not ready), into the state and the metrics.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::state::State;
use crate::apply::Engine;
use crate::health::{self, SpecHealth, Status};
use crate::object::ObjKey;
use crate::report::metrics::{Metrics, SpecGauges};
use crate::spec::{Kind, SpecId};

/// How many not-ready Deployments' Pods a readiness refresh lists at once.
const PODS_LISTS_AT_ONCE: usize = 8;

/// Refreshes readiness; gives the specs that waited for their dependencies and need not
/// any more (to sync now).
pub async fn refresh(
    engine: &Engine,
    state: &mut State,
    metrics: &Metrics,
    ready_timeout: Duration,
) -> Vec<SpecId> {
    // Without the node list, localservices would look like they have nothing to run.
    if !state.nodes_known {
        return Vec::new();
    }
    state.health_dirty = false;
    // Readiness is judged against what the current tree renders to, so an object not
    // applied yet reads as missing (never as "nothing to wait for").
    if let Err(e) = state.rerender(&engine.opts.instance, |_, _| {}) {
        tracing::warn!(error = %e, "render failed");
        return Vec::new();
    }
    let Some(tree) = state.tree.clone() else {
        return Vec::new();
    };
    // Pods are read only for Deployments that are not ready: their reasons are the news.
    // The cache is moved out for this and put back below, not cloned: a deep copy of
    // every live object each second was the daemon's largest allocation.
    let mut observed = std::mem::take(&mut state.live.observed);
    observed.pods.clear();
    // Owned keys: a stream of borrowed ones made the daemon's future not Send (its
    // closure's borrow could not be proven for every lifetime).
    let not_ready: Vec<ObjKey> = state
        .expected()
        .iter()
        .filter(|o| o.key.kind == "Deployment")
        .map(|o| &o.key)
        .filter(|key| {
            observed.objects.get(*key).is_some_and(|d| {
                health::kstatus::compute(Some(&d.view.value()), Timestamp::now()).status
                    != Status::Current
            })
        })
        .cloned()
        .collect();
    // A few lists at a time: while hundreds of Deployments roll out, one after another
    // they held up the loop for seconds.
    let failing: Vec<(ObjKey, Vec<Value>)> = futures::stream::iter(not_ready)
        .map(|key| {
            let observed = &observed;
            async move {
                let mut pods = engine.pods_of(&key, observed).await.unwrap_or_default();
                // Readiness reads only the failing ones. While hundreds of Deployments
                // roll out at once, keeping every starting Pod whole took 13 MiB at
                // 1,000 specs.
                pods.retain(|p| {
                    health::kstatus::compute(Some(p), Timestamp::now()).status == Status::Failed
                });
                (key, pods)
            }
        })
        .buffer_unordered(PODS_LISTS_AT_ONCE)
        .filter(|(_, pods)| futures::future::ready(!pods.is_empty()))
        .collect()
        .await;
    for (key, pods) in failing {
        observed
            .pods
            .insert(key, pods.into_iter().map(health::readiness_view).collect());
    }
    let mut judged = std::mem::take(&mut state.judged);
    let healths = judged.tree_health(&tree.specs, state.expected(), &observed, Timestamp::now());
    state.judged = judged;
    observed.pods.clear();
    state.live.observed = observed;
    let news = state.take_health(healths, ready_timeout, super::now());
    // Metrics follow the specs: removed specs lose their series.
    let by_id: HashMap<&str, &SpecHealth> =
        state.health.iter().map(|h| (h.id.as_str(), &**h)).collect();
    let drifted = state.drifted_by_spec();
    for spec in &tree.specs {
        let text = spec.id.to_string();
        if let Some(h) = by_id.get(text.as_str()) {
            let id = &spec.id;
            let gauges = SpecGauges {
                ready: h.ready,
                suspended: state.suspensions.contains_key(&text),
                drifted: drifted.get(id).copied().unwrap_or(0),
            };
            metrics.set_spec(id.kind.as_str(), &id.namespace, &id.name, gauges);
            if let health::Figures::ElasticWeb { real_qps, .. } = &h.figures {
                metrics.set_real_qps(&id.namespace, &id.name, *real_qps as f64);
            }
        }
    }
    for gone in news.gone {
        metrics.forget_spec(gone.kind.as_str(), &gone.namespace, &gone.name);
        if gone.kind == Kind::ElasticWeb {
            metrics.forget_real_qps(&gone.namespace, &gone.name);
        }
    }
    if let Some(latency) = news.change_to_ready {
        metrics.observe_change_to_ready(latency.as_secs_f64());
    }
    news.released
}
