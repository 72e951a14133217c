//! The namespaces specs need: created when missing, labelled as driftless's, never pruned
//! (unlike a Namespace the tree declares, which is a manifest like any other).

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

use super::plan::Planned;
use super::{ApplyError, Engine, Verb};
use crate::object::ownership;

impl Engine {
    /// Creates the namespaces specs need that do not exist, labelled as driftless's.
    /// They never enter the inventory: a namespace is never pruned.
    pub(super) async fn ensure_namespaces(
        &self,
        needed: &BTreeSet<String>,
    ) -> Result<(), ApplyError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let err = |name: &str, source| ApplyError::Namespace {
            name: name.to_string(),
            source,
        };
        if needed.is_empty() {
            return Ok(());
        }
        // Which exist: one metadata list when there are several (an identity that may
        // not list namespaces reads them one by one), read at once rather than in turn.
        let listed: Option<BTreeSet<String>> = if needed.len() >= 4 {
            api.list_metadata(&ListParams::default())
                .await
                .ok()
                .map(|l| {
                    l.items
                        .into_iter()
                        .filter_map(|n| n.metadata.name)
                        .collect()
                })
        } else {
            None
        };
        let mut missing = BTreeSet::new();
        if let Some(existing) = listed {
            missing.extend(
                needed
                    .iter()
                    .map(String::as_str)
                    .filter(|n| !existing.contains(*n)),
            );
        } else {
            // Made up front and boxed as `Send` (rust-lang/rust#102211; see `list`).
            let api = &api;
            let gets: Vec<futures::future::BoxFuture<'_, _>> = needed
                .iter()
                .map(String::as_str)
                .map(|name| -> futures::future::BoxFuture<'_, _> {
                    Box::pin(async move { (name, api.get_opt(name).await.map(|ns| ns.is_some())) })
                })
                .collect();
            let found: Vec<(&str, Result<bool, kube::Error>)> = futures::stream::iter(gets)
                .buffer_unordered(self.opts.concurrency.max(1))
                .collect()
                .await;
            for (name, exists) in found {
                if !exists.map_err(|e| err(name, e))? {
                    missing.insert(name);
                }
            }
        }
        for name in missing {
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    labels: Some(BTreeMap::from([(
                        ownership::INSTANCE.to_string(),
                        self.opts.instance.clone(),
                    )])),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            self.writes.count(Verb::Create);
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => tracing::info!(namespace = name, "created namespace"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(err(name, e)),
            }
        }
        Ok(())
    }
}

/// The namespaces the namespaced objects of `planned` live in.
pub(super) fn needed(planned: &[Planned<'_>]) -> BTreeSet<String> {
    planned
        .iter()
        .filter(|p| p.resolved.as_ref().is_ok_and(|r| r.namespaced))
        .map(|p| p.key.namespace.clone())
        .filter(|ns| !ns.is_empty())
        .collect()
}
