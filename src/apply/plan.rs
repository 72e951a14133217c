//! Planning: each rendered object's key (in the namespace discovery says) and API,
//! before any write; custom resources whose CRD this revision brings are resolved again
//! later. Bodies are made at each object's turn (`Planned::shaped`).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use super::{Engine, ObjKey, ObjectResult, Packed, Resolved, normalize};
use crate::object::pointer;
use crate::render::Object;
use crate::spec::SpecId;

/// An object ready to apply (or diff): its API resolved (or the reason it is not). Its
/// body is not held: a sync plans every object before it applies any, and bodies as
/// `Value`s for all of them were half of a sync's memory. `shaped` makes it at the
/// object's turn.
#[derive(Clone)]
pub(super) struct Planned<'a> {
    pub(super) obj: &'a Object,
    pub(super) key: ObjKey,
    pub(super) resolved: Result<std::sync::Arc<Resolved>, String>,
    pub(super) adopt: bool,
    /// The app its spec was rendered by (`argo/web`), when a sync writes it: what its
    /// entry records, and what a refusal of it holds.
    pub(super) app: Option<String>,
    /// A custom resource whose CRD this sync wrote: the apiserver takes up a new schema a
    /// moment after the CRD's write is answered, and there is no condition to wait for, so
    /// a field refusal is asked again until then (`crd_wait`).
    pub(super) schema_settling: bool,
}

/// A planned object with its body made: what apply, diff and the checks before a write
/// read.
pub(super) struct Shaped<'p, 'a> {
    pub(super) p: &'p Planned<'a>,
    /// The body with the namespace discovery says it has (none when cluster-scoped),
    /// without the fields the policy ignores: what an existing object is sent.
    pub(super) body: Value,
    /// The whole body, for a create, when the policy ignores fields it has.
    pub(super) full: Option<Value>,
}

/// `body` pinned to `version` (the resourceVersion read, if any): a dry run that tells
/// what the write would make of that object, and of no later one.
pub(super) fn pinned(body: &Value, version: Option<&str>) -> Value {
    let mut pinned = body.clone();
    if let Some(rv) = version
        && let Some(meta) = pinned.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), rv.into());
    }
    pinned
}

impl<'a> std::ops::Deref for Shaped<'_, 'a> {
    type Target = Planned<'a>;

    fn deref(&self) -> &Planned<'a> {
        self.p
    }
}

impl<'a> Planned<'a> {
    /// The body as it is sent: in the namespace of `key` (none when cluster-scoped),
    /// normalised for the cluster, without the fields the policy ignores.
    pub(super) fn shaped(&self) -> Shaped<'_, 'a> {
        let mut body = self.obj.body.value();
        let namespace = (!self.key.namespace.is_empty()).then_some(self.key.namespace.as_str());
        if !body["metadata"].is_object() || body["metadata"]["namespace"].as_str() != namespace {
            crate::render::set_namespace(&mut body, namespace);
        }
        let body = normalize::compatible(self.obj.group(), &self.obj.kind, Cow::Owned(body));
        let (body, full) = without_ignored(body.into_owned(), &self.obj.policy.ignore_fields);
        Shaped {
            p: self,
            body,
            full,
        }
    }
}

impl Engine {
    /// The key (in the namespace discovery says) and API of each object. A kind not
    /// served yet (its CRD is in this revision) keeps its error for now.
    pub(super) async fn plan<'a>(
        &self,
        objects: &'a [Object],
        adopt_specs: &BTreeSet<SpecId>,
    ) -> Vec<Planned<'a>> {
        let mut out = Vec::with_capacity(objects.len());
        for obj in objects {
            let resolved = match self.resolver.resolve(&obj.api_version, &obj.kind).await {
                Ok(r) => Ok(r),
                // Which cluster says no: a version a newer Kubernetes serves (or an older
                // one did) is then plain.
                Err(e) => Err(format!(
                    "{} {} is not served by the cluster{}: {}",
                    obj.api_version,
                    obj.kind,
                    self.server_version()
                        .await
                        .map(|(_, _, v)| format!(" (Kubernetes {v})"))
                        .unwrap_or_default(),
                    crate::cluster::error_text(&e)
                )),
            };
            let namespace = namespace_of(obj, resolved.as_deref().ok());
            out.push(Planned {
                key: ObjKey {
                    group: obj.group().to_string(),
                    kind: obj.kind.clone(),
                    namespace: namespace.unwrap_or_default(),
                    name: obj.name.clone(),
                },
                resolved,
                adopt: self.opts.adopt || adopt_specs.contains(&obj.spec),
                app: None,
                schema_settling: false,
                obj,
            });
        }
        out
    }

    /// Custom resources whose kind was not served at planning time: wait (bounded) for
    /// their CRD to be served, then resolve again. The CRD is one this sync applied in
    /// phase 1, or one already in the cluster: an earlier wave's (one-shot `apply` syncs
    /// each wave on its own), an operator's. A CRD reported Established can still be
    /// unknown to discovery for a moment (its discovery is updated apart from the
    /// condition): "404 page not found". In place: the batch is most of a sync's objects,
    /// and a second vector of them stood beside the first (2.6 MiB at 10,000 specs).
    pub(super) async fn resolve_deferred(
        &self,
        batch: &mut [Planned<'_>],
        applied: &[Option<ObjectResult>],
    ) {
        let written: Vec<(String, String)> = applied
            .iter()
            .flatten()
            .filter(|r| r.key.kind == "CustomResourceDefinition" && r.action.is_write())
            .filter_map(|r| {
                let crd = r.live.as_ref()?.value();
                Some((
                    crd["spec"]["group"].as_str()?.to_string(),
                    crd["spec"]["names"]["kind"].as_str()?.to_string(),
                ))
            })
            .collect();
        // The cluster's CRDs, read once and only when a kind is still unknown and this
        // sync wrote no CRD for it.
        let mut in_cluster: Option<Vec<CrdServes>> = None;
        // Kinds waited for in vain: their other objects do not wait again.
        let mut gave_up: Vec<(String, String)> = Vec::new();
        for p in batch.iter_mut() {
            p.schema_settling = written
                .iter()
                .any(|(group, kind)| *group == p.key.group && *kind == p.key.kind);
            if p.resolved.is_err() {
                let crd = applied.iter().flatten().find(|r| {
                    r.key.kind == "CustomResourceDefinition"
                        && r.live.as_ref().map(Packed::value).is_some_and(|crd| {
                            crd["spec"]["group"].as_str() == Some(p.key.group.as_str())
                                && crd["spec"]["names"]["kind"].as_str()
                                    == Some(p.key.kind.as_str())
                        })
                });
                let mut crd_name = crd.map(|c| c.key.name.clone());
                if crd_name.is_none() {
                    let crds = match &in_cluster {
                        Some(crds) => crds,
                        None => in_cluster.insert(self.crds_in_cluster().await),
                    };
                    let version = crate::object::split_api_version(&p.obj.api_version).1;
                    crd_name = crds
                        .iter()
                        .find(|c| {
                            c.group == p.key.group
                                && c.kind == p.key.kind
                                && c.versions.iter().any(|v| v == version)
                        })
                        .map(|c| c.name.clone());
                }
                let kind = (p.key.group.clone(), p.key.kind.clone());
                let not_established = |crd: &str| {
                    format!(
                        "its CustomResourceDefinition {crd} was not Established within {:?}",
                        self.opts.crd_wait
                    )
                };
                if let Some(crd_name) = &crd_name
                    && gave_up.contains(&kind)
                {
                    p.resolved = Err(not_established(crd_name));
                } else if let Some(crd_name) = crd_name
                    && !self.wait_served(p).await
                {
                    gave_up.push(kind);
                    p.resolved = Err(not_established(&crd_name));
                }
            }
        }
    }

    /// Resolves `p`'s kind again until it is served (then planned as at first) or the
    /// CRD wait is over (false).
    async fn wait_served(&self, p: &mut Planned<'_>) -> bool {
        let deadline = tokio::time::Instant::now() + self.opts.crd_wait;
        loop {
            if let Ok(r) = self.resolver.resolve(&p.obj.api_version, &p.obj.kind).await {
                p.key.namespace = namespace_of(p.obj, Some(&r)).unwrap_or_default();
                p.resolved = Ok(r);
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Every CRD in the cluster; none when they cannot be read (the kind's own error then
    /// stands). Whole objects: a rare read (a kind unknown to discovery), and CRDs have
    /// no field selector for their group.
    async fn crds_in_cluster(&self) -> Vec<CrdServes> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(self.client.clone());
        match api.list(&Default::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .map(|c| CrdServes {
                    versions: c
                        .spec
                        .versions
                        .iter()
                        .filter(|v| v.served)
                        .map(|v| v.name.clone())
                        .collect(),
                    group: c.spec.group,
                    kind: c.spec.names.kind,
                    name: c.metadata.name.unwrap_or_default(),
                })
                .collect(),
            Err(e) => {
                tracing::debug!(error = %crate::cluster::error_text(&e), "listing CRDs");
                Vec::new()
            }
        }
    }
}

/// A CRD in the cluster: the kind it defines, and the versions it serves.
struct CrdServes {
    group: String,
    kind: String,
    name: String,
    versions: Vec<String>,
}

/// `body` without the fields `ignored` names, and the whole body when that took any.
fn without_ignored(body: Value, ignored: &[String]) -> (Value, Option<Value>) {
    if !ignored.iter().any(|p| body.pointer(p).is_some()) {
        return (body, None);
    }
    let mut sent = body.clone();
    for p in ignored {
        pointer::remove(&mut sent, p);
    }
    (sent, Some(body))
}

/// Discovery knows the scope for certain: a cluster-scoped object has no namespace, a
/// namespaced one without a namespace is in "default".
fn namespace_of(obj: &Object, resolved: Option<&Resolved>) -> Option<String> {
    match resolved.map(|r| r.namespaced) {
        Some(false) => None,
        Some(true) => Some(
            obj.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
        ),
        None => obj.namespace.clone(),
    }
}
