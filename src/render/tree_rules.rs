//! What `.driftless.toml` says of rendered objects (`spec::settings`): the `[[ignore]]`
//! rules that select an object join its own `ignore-fields` (one mechanism for both),
//! and the `[[health]]` rule for its kind travels with it to readiness.

use super::Object;
use crate::spec::settings::Settings;

/// Adds the rules `settings` has for `obj`, of a spec at `file`, to its policy.
pub(super) fn apply(settings: &Settings, obj: &mut Object, file: &str) {
    if settings.ignore.is_empty() && settings.health.is_empty() {
        return;
    }
    let body = obj.body.value();
    let labels = body["metadata"]["labels"].as_object();
    let namespace = obj.namespace.as_deref().unwrap_or_default();
    let selecting: Vec<_> = settings
        .ignore
        .iter()
        .filter(|r| {
            r.select
                .picks(&obj.api_version, &obj.kind, namespace, &obj.name, labels)
        })
        .collect();
    let health = settings.health_for(&obj.api_version, &obj.kind, file);
    if selecting.is_empty() && health.is_none() {
        return;
    }
    // Its own copy only now: objects no rule selects keep sharing their spec's.
    let policy = std::sync::Arc::make_mut(&mut obj.policy);
    for rule in selecting {
        for p in &rule.paths {
            if !policy.ignore_fields.contains(p) {
                policy.ignore_fields.push(p.clone());
            }
        }
        for m in &rule.managers {
            if !policy.ignore_managers.contains(m) {
                policy.ignore_managers.push(m.clone());
            }
        }
    }
    if let Some(rule) = health {
        policy.health = Some(rule.clone());
    }
}
