//! API discovery, cached per kind: which resource serves `apiVersion`/`kind`, and
//! whether it is namespaced. A kind that is not served yet (its CRD was just applied)
//! is not cached, so a later call sees it once it is Established.
//!
//! Where the apiserver offers aggregated discovery (GA in 1.30), the first look-up reads
//! every group in two requests (`/api` and `/apis`) instead of one request per group
//! version; a kind missing from that snapshot (a CRD applied since) is asked for by its
//! group version, as on a server without it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Discovery, Scope, pinned_kind};

use crate::object::split_api_version;

#[derive(Debug, Clone)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
}

impl Resolved {
    /// The API for one object: namespaced ones in `namespace`, the rest cluster-wide.
    pub fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &self.resource),
            _ => Api::all_with(client.clone(), &self.resource),
        }
    }

    /// Across all namespaces (for listing what this instance owns).
    pub(crate) fn api_all(&self, client: &Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &self.resource)
    }
}

pub struct Resolver {
    client: Client,
    cache: Mutex<HashMap<(String, String), Arc<Resolved>>>,
    /// The aggregated discovery snapshot, read once; `None` inside when the server has
    /// none (or it failed): per group version from then on.
    aggregated: tokio::sync::OnceCell<Option<Discovery>>,
}

impl Resolver {
    pub fn new(client: Client) -> Self {
        Resolver {
            client,
            cache: Mutex::new(HashMap::new()),
            aggregated: tokio::sync::OnceCell::new(),
        }
    }

    async fn aggregated(&self) -> Option<&Discovery> {
        self.aggregated
            .get_or_init(|| async {
                match Discovery::new(self.client.clone()).run_aggregated().await {
                    Ok(d) => Some(d),
                    Err(e) => {
                        tracing::debug!(error = %e, "no aggregated discovery; asking per group version");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The resource (plural) that serves `kind` in `group`, at the group's preferred
    /// version; none when the cluster does not serve it (or has no aggregated discovery).
    pub async fn plural(&self, group: &str, kind: &str) -> Option<String> {
        let discovery = self.aggregated().await?;
        let (resource, _) = discovery.get(group)?.recommended_kind(kind)?;
        Some(resource.plural)
    }

    /// Shared, not copied: every planned object holds its kind's (20,000 copies of five
    /// strings at 10,000 specs).
    pub async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Arc<Resolved>, kube::Error> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(hit);
        }
        let (group, version) = split_api_version(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = self.aggregated().await.and_then(|d| d.resolve_gvk(&gvk));
        let (resource, caps) = match found {
            Some(hit) => hit,
            None => pinned_kind(&self.client, &gvk).await?,
        };
        let resolved = Arc::new(Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        });
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, resolved.clone());
        }
        Ok(resolved)
    }
}

/// Discovery's "this kind is not served (yet)", as opposed to a transport failure.
pub(crate) fn is_not_served(e: &kube::Error) -> bool {
    match e {
        kube::Error::Discovery(_) => true,
        kube::Error::Api(s) => s.code == 404,
        _ => false,
    }
}
