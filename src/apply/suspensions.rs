//! Suspensions: specs a person paused (`driftless suspend`), kept in the cluster beside
//! the inventory, so they survive a restart and every replica of a leader-elected daemon
//! sees the same ones.
//!
//! One ConfigMap `driftless-suspended-<instance>` in the inventory namespace, one data
//! key per suspended spec (its id with `/` as `_`: ConfigMap keys allow `[-._a-zA-Z0-9]`,
//! and no part of an id has `_`) holding `{"reason", "since"}`. Each change is a merge
//! patch of its one key, so two replicas suspending two specs at once lose neither.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{ApplyError, Store, Verb, Writes};
use crate::object::ownership;

/// Why and since when a spec is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    pub reason: String,
    /// RFC 3339.
    pub since: String,
    /// Written in the tree (`driftless.dev/suspend`, Flux's `suspend: true`): resumed by
    /// changing the tree, not by `driftless resume`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declared: bool,
}

/// By spec id (its text).
pub(crate) type Suspensions = BTreeMap<String, Suspension>;

pub fn configmap_name(instance: &str) -> String {
    format!("driftless-suspended-{instance}")
}

fn data_key(id: &str) -> String {
    id.replace('/', "_")
}

/// The suspensions a ConfigMap records; an entry that does not parse (edited by hand) is
/// skipped with a warning rather than suspending or resuming anything by guess.
pub fn parse(cm: &ConfigMap) -> Suspensions {
    let mut out = Suspensions::new();
    for (key, value) in cm.data.iter().flatten() {
        match serde_json::from_str::<Suspension>(value) {
            Ok(s) => {
                out.insert(key.replace('_', "/"), s);
            }
            Err(e) => {
                tracing::warn!(configmap = %cm.name_any(), key, error = %e, "unreadable suspension entry ignored")
            }
        }
    }
    out
}

impl Store {
    /// Suspends spec `id` (`Some`) or resumes it (`None`).
    pub async fn set_suspension(
        &self,
        client: &Client,
        writes: &Writes,
        id: &str,
        suspension: Option<&Suspension>,
    ) -> Result<(), ApplyError> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        let name = configmap_name(&self.instance);
        let value = match suspension {
            Some(s) => serde_json::Value::String(
                serde_json::to_string(s).map_err(|e| ApplyError::Inventory(e.to_string()))?,
            ),
            None => serde_json::Value::Null,
        };
        let patch = json!({"data": {data_key(id): value}});
        let failed = |e: kube::Error| {
            ApplyError::Inventory(format!(
                "suspensions ({name}): {}",
                crate::cluster::error_text(&e)
            ))
        };
        // Two tries: the second after creating the ConfigMap, or after another replica
        // created it first.
        for _ in 0..2 {
            writes.count(Verb::Patch);
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    if suspension.is_none() {
                        // Nothing recorded, nothing to resume.
                        return Ok(());
                    }
                    self.ensure_namespace(client, writes).await?;
                    let cm = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            namespace: Some(self.namespace.clone()),
                            labels: Some(BTreeMap::from([(
                                ownership::INSTANCE.to_string(),
                                self.instance.clone(),
                            )])),
                            ..ObjectMeta::default()
                        },
                        ..ConfigMap::default()
                    };
                    writes.count(Verb::Create);
                    match api.create(&PostParams::default(), &cm).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => return Err(failed(e)),
                    }
                }
                Err(e) => return Err(failed(e)),
            }
        }
        Err(ApplyError::Inventory(format!(
            "suspensions ({name}): the ConfigMap disappeared while it was written"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_survive_the_round_trip_through_configmap_keys() {
        for id in [
            "elasticweb/dev/shop",
            "manifest/default/ConfigMap/x",
            "manifest//CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com",
        ] {
            let key = data_key(id);
            assert!(
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)),
                "{key}"
            );
            let cm = ConfigMap {
                data: Some(BTreeMap::from([(
                    key,
                    r#"{"reason":"incident 42","since":"2026-11-23T10:00:00Z"}"#.to_string(),
                )])),
                ..ConfigMap::default()
            };
            let parsed = parse(&cm);
            assert_eq!(parsed[id].reason, "incident 42", "{id}");
        }
    }

    #[test]
    fn an_unreadable_entry_is_ignored() {
        let cm = ConfigMap {
            data: Some(BTreeMap::from([(
                "elasticweb_dev_shop".to_string(),
                "not json".to_string(),
            )])),
            ..ConfigMap::default()
        };
        assert!(parse(&cm).is_empty());
    }
}
