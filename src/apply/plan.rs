//! Planning: each rendered object's key, namespace-corrected body and API, before any
//! write; custom resources whose CRD this revision brings are resolved again later.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use super::{Engine, ObjKey, ObjectResult, Packed, Resolved, normalize};
use crate::object::pointer;
use crate::render::Object;
use crate::spec::SpecId;

/// An object ready to apply (or diff): its API resolved (or the reason it is not).
#[derive(Clone)]
pub(super) struct Planned<'a> {
    pub(super) obj: &'a Object,
    pub(super) key: ObjKey,
    /// The body with the namespace discovery says it has (none when cluster-scoped),
    /// without the fields the policy ignores: what an existing object is sent.
    pub(super) body: Cow<'a, Value>,
    /// The whole body, for a create, when the policy ignores fields it has.
    pub(super) full: Option<Value>,
    pub(super) resolved: Result<Resolved, String>,
    pub(super) adopt: bool,
    /// A custom resource whose CRD this sync wrote: the apiserver takes up a new schema a
    /// moment after the CRD's write is answered, and there is no condition to wait for, so
    /// a field refusal is asked again until then (`crd_wait`).
    pub(super) schema_settling: bool,
}

impl Engine {
    /// The key, namespace-corrected body and API of each object. A kind not served yet
    /// (its CRD is in this revision) keeps its error for now.
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
            let (body, namespace) = fix_namespace(obj, resolved.as_ref().ok());
            let body = normalize::compatible(obj.group(), &obj.kind, body);
            let (body, full) = without_ignored(body, &obj.policy.ignore_fields);
            out.push(Planned {
                key: ObjKey {
                    group: obj.group().to_string(),
                    kind: obj.kind.clone(),
                    namespace: namespace.unwrap_or_default(),
                    name: obj.name.clone(),
                },
                body,
                full,
                resolved,
                adopt: self.opts.adopt || adopt_specs.contains(&obj.spec),
                schema_settling: false,
                obj,
            });
        }
        out
    }

    /// Custom resources whose kind was not served at planning time: wait (bounded) for
    /// their CRD, applied in phase 1, to be Established, then resolve again.
    pub(super) async fn resolve_deferred<'a>(
        &self,
        batch: Vec<Planned<'a>>,
        applied: &[ObjectResult],
    ) -> Vec<Planned<'a>> {
        let written: Vec<(String, String)> = applied
            .iter()
            .filter(|r| r.key.kind == "CustomResourceDefinition" && r.action.is_write())
            .filter_map(|r| {
                let crd = r.live.as_ref()?.value();
                Some((
                    crd["spec"]["group"].as_str()?.to_string(),
                    crd["spec"]["names"]["kind"].as_str()?.to_string(),
                ))
            })
            .collect();
        let mut out = Vec::with_capacity(batch.len());
        for mut p in batch {
            p.schema_settling = written
                .iter()
                .any(|(group, kind)| *group == p.key.group && *kind == p.key.kind);
            if p.resolved.is_err() {
                let crd = applied.iter().find(|r| {
                    r.key.kind == "CustomResourceDefinition"
                        && r.live.as_ref().map(Packed::value).is_some_and(|crd| {
                            crd["spec"]["group"].as_str() == Some(p.key.group.as_str())
                                && crd["spec"]["names"]["kind"].as_str()
                                    == Some(p.key.kind.as_str())
                        })
                });
                if let Some(crd) = crd {
                    let deadline = tokio::time::Instant::now() + self.opts.crd_wait;
                    loop {
                        if let Ok(r) = self.resolver.resolve(&p.obj.api_version, &p.obj.kind).await
                        {
                            let (body, namespace) = fix_namespace(p.obj, Some(&r));
                            let body = normalize::compatible(p.obj.group(), &p.obj.kind, body);
                            (p.body, p.full) = without_ignored(body, &p.obj.policy.ignore_fields);
                            p.key.namespace = namespace.unwrap_or_default();
                            p.resolved = Ok(r);
                            break;
                        }
                        if tokio::time::Instant::now() >= deadline {
                            p.resolved = Err(format!(
                                "its CustomResourceDefinition {} was not Established within {:?}",
                                crd.key.name, self.opts.crd_wait
                            ));
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
            }
            out.push(p);
        }
        out
    }
}

/// `body` without the fields `ignored` names, and the whole body when that took any.
fn without_ignored<'a>(
    body: Cow<'a, Value>,
    ignored: &[String],
) -> (Cow<'a, Value>, Option<Value>) {
    if !ignored.iter().any(|p| body.pointer(p).is_some()) {
        return (body, None);
    }
    let full = body.into_owned();
    let mut sent = full.clone();
    for p in ignored {
        pointer::remove(&mut sent, p);
    }
    (Cow::Owned(sent), Some(full))
}

/// Discovery knows the scope for certain: a cluster-scoped object loses any namespace, a
/// namespaced one without a namespace gets "default".
/// The body is borrowed when it already says so (every rendered kind's does): a copy of
/// every body per sync was a third of a sync's memory.
fn fix_namespace<'a>(
    obj: &'a Object,
    resolved: Option<&Resolved>,
) -> (Cow<'a, Value>, Option<String>) {
    let namespace = match resolved.map(|r| r.namespaced) {
        Some(false) => None,
        Some(true) => Some(
            obj.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
        ),
        None => obj.namespace.clone(),
    };
    if obj.body["metadata"].is_object()
        && obj.body["metadata"]["namespace"].as_str() == namespace.as_deref()
    {
        return (Cow::Borrowed(&obj.body), namespace);
    }
    let mut body = obj.body.clone();
    crate::render::set_namespace(&mut body, namespace.as_deref());
    (Cow::Owned(body), namespace)
}
