//! Kubernetes Events on the objects driftless changes (`--events`): applies, replacements,
//! prunes, conflicts and failures, so `kubectl describe` tells what happened. The
//! recorder folds repeats into one event series, so a retrying failure does not flood.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::apply::prune;
use crate::apply::{Action, SyncReport};
use crate::object::ObjKey;

#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

fn reference(key: &ObjKey, api_version: Option<&str>, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: api_version.map(str::to_string),
        kind: Some(key.kind.clone()),
        name: Some(key.name.clone()),
        namespace: (!key.namespace.is_empty()).then(|| key.namespace.clone()),
        uid: uid.map(str::to_string),
        ..ObjectReference::default()
    }
}

impl Events {
    pub fn new(client: Client, instance: &str) -> Self {
        let reporter = Reporter {
            controller: "driftless".to_string(),
            instance: Some(std::env::var("POD_NAME").unwrap_or_else(|_| instance.to_string())),
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// What a sync changed or failed to change, as events (nothing for unchanged objects).
    /// Runs in the background: events are a courtesy, never a reason to slow a sync.
    pub fn publish(&self, report: &SyncReport, revision: Option<&str>) {
        let revision = revision.unwrap_or("?").to_string();
        let mut out: Vec<(ObjectReference, Event)> = Vec::new();
        for o in &report.objects {
            let (type_, reason, note) = match &o.action {
                // Drift left alone is in the status and metrics; an Event on every resync
                // that finds it again would be noise.
                Action::Unchanged | Action::Drifted => continue,
                Action::Created | Action::Configured => (
                    EventType::Normal,
                    "Applied",
                    format!(
                        "{} by spec {} (revision {revision})",
                        o.action.label(),
                        o.spec
                    ),
                ),
                Action::Replaced => (
                    EventType::Normal,
                    "Replaced",
                    format!(
                        "recreated: the change could not be made in place (spec {}, revision {revision})",
                        o.spec
                    ),
                ),
                Action::Conflict(m) => (
                    EventType::Warning,
                    "ApplyConflict",
                    format!("spec {}: {m}", o.spec),
                ),
                Action::Failed(m) => (
                    EventType::Warning,
                    "ApplyFailed",
                    format!("spec {}: {m}", o.spec),
                ),
            };
            let live = o.live.as_ref().map(crate::object::Packed::value);
            let live = live.as_ref();
            let api_version = live.and_then(|l| l["apiVersion"].as_str());
            let uid = live.and_then(|l| l["metadata"]["uid"].as_str());
            out.push((
                reference(&o.key, api_version, uid),
                event(type_, reason, note),
            ));
        }
        for p in &report.prune.objects {
            let (type_, reason, note) = match &p.action {
                prune::PruneAction::Pruned => (
                    EventType::Normal,
                    "Pruned",
                    format!("deleted: it left the specs (was spec {})", p.spec),
                ),
                prune::PruneAction::Failed(e) => (EventType::Warning, "PruneFailed", e.clone()),
                _ => continue,
            };
            out.push((reference(&p.key, None, None), event(type_, reason, note)));
        }
        if out.is_empty() {
            return;
        }
        let recorder = self.recorder.clone();
        tokio::spawn(async move {
            futures::stream::iter(out)
                .for_each_concurrent(4, |(r, e)| {
                    let recorder = recorder.clone();
                    async move {
                        // Visible: a failure here is nearly always a missing RBAC grant.
                        if let Err(err) = recorder.publish(&e, &r).await {
                            tracing::warn!(error = %crate::cluster::error_text(&err), "could not record an event");
                        }
                    }
                })
                .await;
        });
    }
}

fn event(type_: EventType, reason: &str, note: String) -> Event {
    // The API caps a note at 1 kB.
    let note: String = note.chars().take(1000).collect();
    Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Sync".to_string(),
        secondary: None,
    }
}
