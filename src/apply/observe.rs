//! What readiness is computed from: live objects, Endpoints, and the Pods of Deployments.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kube::api::{Api, ListParams};
use serde_json::Value;

use super::{ApplyError, Engine, ObjKey, Observed, Packed, Resolved};
use crate::object::Seen;
use crate::render::Object;

impl Engine {
    /// The API kinds of `objects`, plus Endpoints when there are Services (their
    /// readiness figures): what the daemon watches.
    pub(crate) async fn resolved_kinds<'a>(
        &self,
        kinds: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<Resolved> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let kinds: Vec<(&str, &str)> = kinds.collect();
        let endpoints = kinds
            .iter()
            .any(|(api_version, kind)| *api_version == "v1" && *kind == "Service")
            .then_some(("v1", "Endpoints"));
        let kinds = kinds.into_iter().chain(endpoints);
        for (api_version, kind) in kinds {
            if !seen.insert((api_version, kind)) {
                continue;
            }
            if let Ok(r) = self.resolver.resolve(api_version, kind).await {
                out.push(Resolved::clone(&r));
            }
        }
        out
    }

    /// The kinds the inventory records (in any bucket), resolved: what a restarted daemon
    /// watches before its first sync.
    pub(crate) async fn recorded_kinds(&self) -> Result<Vec<Resolved>, ApplyError> {
        let kinds = self.store().kinds(&self.client).await?;
        let kinds = kinds.iter().map(|(a, k)| (a.as_str(), k.as_str()));
        Ok(self.resolved_kinds(kinds).await)
    }

    /// The Pods a Deployment's selector matches.
    pub(crate) async fn pods_of(
        &self,
        deployment: &ObjKey,
        observed: &Observed,
    ) -> Result<Vec<Value>, kube::Error> {
        match observed.objects.get(deployment) {
            Some(live) => {
                self.pods_matching(&deployment.namespace, &live.view.value())
                    .await
            }
            None => Ok(Vec::new()),
        }
    }

    /// The Pods in `namespace` that a live Deployment's matchLabels select.
    async fn pods_matching(
        &self,
        namespace: &str,
        deployment: &Value,
    ) -> Result<Vec<Value>, kube::Error> {
        let Some(labels) = deployment["spec"]["selector"]["matchLabels"].as_object() else {
            return Ok(Vec::new());
        };
        let selector: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default().labels(&selector.join(",")))
            .await?;
        Ok(list
            .items
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
            .collect())
    }

    /// The live state of `objects` (by key; absent = not found) and, for Services, their
    /// Endpoints: what readiness is computed from.
    pub async fn observe(&self, objects: &[Object]) -> Result<Observed, ApplyError> {
        let planned = self.plan(objects, &BTreeSet::new()).await;
        let wanted: BTreeSet<&ObjKey> = planned.iter().map(|p| &p.key).collect();
        let (listed, forbidden) = self.list_owned(&planned, true, 1, &BTreeSet::new()).await?;
        for what in forbidden.keys() {
            tracing::warn!(kind = %what, "may not list this kind; its objects are skipped");
        }
        let live: HashMap<ObjKey, Seen> = listed
            .into_iter()
            .filter(|(k, _)| wanted.contains(k))
            .map(|(k, l)| (k, l.into_seen()))
            .collect();
        let (live, deleted) = self.with_followed(live, &wanted);
        let mut pods = HashMap::new();
        for p in planned
            .iter()
            .filter(|p| p.key.group == "apps" && p.key.kind == "Deployment")
        {
            let Some(deployment) = live.get(&p.key) else {
                continue;
            };
            if let Ok(items) = self
                .pods_matching(&p.key.namespace, &deployment.view.value())
                .await
            {
                pods.insert(p.key.clone(), items);
            }
        }
        let mut endpoints = HashMap::new();
        for p in planned
            .iter()
            .filter(|p| p.key.group.is_empty() && p.key.kind == "Service")
        {
            if !live.contains_key(&p.key) {
                continue;
            }
            let api: Api<k8s_openapi::api::core::v1::Endpoints> =
                Api::namespaced(self.client.clone(), &p.key.namespace);
            if let Ok(Some(ep)) = api.get_opt(&p.key.name).await {
                endpoints.insert(
                    (p.key.namespace.clone(), p.key.name.clone()),
                    Packed::new(&serde_json::to_value(ep).unwrap_or(Value::Null)),
                );
            }
        }
        Ok(Observed {
            objects: Arc::new(live),
            endpoints,
            pods,
            deleted,
        })
    }
}
