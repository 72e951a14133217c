//! Hooks written with `generateName` instead of a name (`spec::order`): each run is a new
//! object, created with a POST (server-side apply needs a name) and named by the
//! apiserver. Every run carries a label naming the instance's hook spec it ran for
//! ([`HOOK_RUN`]), which is how a later run finds the earlier ones its delete policy
//! removes (`BeforeHookCreation`): nothing else records their names.
//!
//! The inventory keeps one entry per hook spec, under its `generateName` prefix (an
//! object of that name never exists), with the hash of what the last run was sent: what
//! decides whether the next revision runs its hooks, as for any hook.

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, PropagationPolicy};
use serde_json::Value;

use super::hash::{BodyHashes, body_hashes};
use super::live::Live;
use super::plan::Planned;
use super::{Action, Engine, Inventory, ObjectResult, Packed, Verb, record};
use crate::cluster::error_text;
use crate::object::ownership::{HOOK_RUN, INSTANCE, SPEC};
use crate::render::Object;

/// The `generateName` prefix `obj` is created from, when it has no name.
pub(super) fn generated(obj: &Object) -> Option<String> {
    let body = obj.body.value();
    let meta = body.get("metadata")?;
    match meta.get("name") {
        Some(Value::String(_)) => None,
        _ => meta.get("generateName")?.as_str().map(str::to_string),
    }
}

/// The [`HOOK_RUN`] label value of `instance`'s runs of the hook spec `spec`.
fn run_label(instance: &str, spec: &str) -> String {
    crate::spec::names::short_hash(&format!("{instance}\0{spec}"))
}

impl Engine {
    /// Creates a new run of the hook `p`, after deleting the earlier ones if its delete
    /// policy says so. The result, and the run as an object of its own name (what is
    /// waited for and deleted), when it was created.
    pub(super) async fn create_run(
        &self,
        p: &Planned<'_>,
        inv: &mut Inventory,
    ) -> (ObjectResult, Option<Object>) {
        let result = |action: Action| ObjectResult {
            key: p.key.clone(),
            spec: p.obj.spec.clone(),
            action,
            live: None,
            resource_version: None,
            fields: None,
            drift: None,
            warnings: Vec::new(),
        };
        let api = match self.hook_api(p) {
            Ok(api) => api,
            Err(why) => return (result(Action::Failed(why.clone())), None),
        };
        let label = run_label(&self.opts.instance, &p.obj.spec.to_string());
        let delete_before = p.obj.policy.hook.as_ref().is_some_and(|h| h.delete_before);
        if delete_before && let Err(e) = self.delete_runs(&api, p, &label).await {
            let msg = format!("deleting its earlier runs: {}", error_text(&e));
            return (result(Action::Failed(msg)), None);
        }
        // What would be applied, hashed as for any object (keyed for a Secret): what
        // `Engine::changed` compares the next revision's with.
        let keyed = p.key.is("", "Secret") || p.obj.policy.sealed;
        let key = match keyed {
            true => match self.hash_key().await {
                Ok(k) => Some(k),
                Err(e) => return (result(Action::Failed(e.to_string())), None),
            },
            false => None,
        };
        let p = p.shaped();
        let BodyHashes { applied, shape } = body_hashes(&p.body, key);
        let mut body = p.full.clone().unwrap_or_else(|| p.body.clone());
        if let Some(labels) = body
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .map(|m| {
                m.entry("labels")
                    .or_insert_with(|| Value::Object(Default::default()))
            })
            .and_then(Value::as_object_mut)
        {
            labels.insert(HOOK_RUN.into(), label.into());
        }
        let obj: DynamicObject = match serde_json::from_value(body) {
            Ok(obj) => obj,
            Err(e) => return (result(Action::Failed(format!("its body: {e}"))), None),
        };
        let pp = PostParams {
            field_manager: Some(self.opts.field_manager.clone()),
            ..PostParams::default()
        };
        self.writes.count(Verb::Create);
        let created = match api.create(&pp, &obj).await {
            Ok(created) => created,
            Err(e) => return (result(Action::Failed(error_text(&e))), None),
        };
        let Some(name) = created.metadata.name.clone() else {
            let msg = "the apiserver gave the new run no name".to_string();
            return (result(Action::Failed(msg)), None);
        };
        let live = Live::of(created, &self.opts);
        record::settle(
            inv,
            &p.key,
            Some(record::confirmed(&p, &live, applied, shape)),
        );
        let mut run = p.obj.clone();
        run.name = name.clone();
        run.body.edit(|body| {
            if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("name".into(), name.into());
            }
        });
        let done = ObjectResult {
            live: Some(Packed::new(&live.value)),
            resource_version: live.version,
            fields: Some(live.fields),
            ..result(Action::Created)
        };
        (done, Some(run))
    }

    /// Deletes every earlier run of `p` by this instance, with its Pods. They do not
    /// stand in the new run's way (it gets a new name), so none is waited for.
    async fn delete_runs(
        &self,
        api: &Api<DynamicObject>,
        p: &Planned<'_>,
        label: &str,
    ) -> Result<(), kube::Error> {
        let selector = format!("{INSTANCE}={},{HOOK_RUN}={label}", self.opts.instance);
        let runs = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await?;
        let spec = p.obj.spec.to_string();
        for run in runs {
            // The label is a short hash: the spec annotation makes sure the run is this
            // hook's before it goes.
            let of_spec = run
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SPEC))
                .is_some_and(|s| *s == spec);
            let (Some(name), true) = (run.metadata.name.as_deref(), of_spec) else {
                continue;
            };
            if run.metadata.deletion_timestamp.is_some() {
                continue;
            }
            self.delete_object(api, name).await?;
            tracing::info!(spec = %p.obj.spec, object = %name, "earlier hook run deleted, as its delete policy asks");
        }
        Ok(())
    }

    /// Deletes a hook's object by name with its Pods (a Job's own default would orphan
    /// them); already gone is done.
    pub(super) async fn delete_object(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> Result<(), kube::Error> {
        self.writes.count(Verb::Delete);
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_told_apart_by_instance_and_spec() {
        let a = run_label("default", "manifest/ns/Job.batch/migrate-");
        assert_eq!(a, run_label("default", "manifest/ns/Job.batch/migrate-"));
        assert_ne!(a, run_label("other", "manifest/ns/Job.batch/migrate-"));
        assert_ne!(a, run_label("default", "manifest/ns/Job.batch/seed-"));
        assert!(crate::spec::names::label_value(&a).is_ok());
    }

    #[test]
    fn only_an_object_without_a_name_is_generated() {
        let obj = |meta: Value| Object {
            spec: "manifest/ns/Job.batch/migrate-".parse().unwrap(),
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: Some("ns".into()),
            name: "migrate-".into(),
            body: Packed::new(&serde_json::json!({"metadata": meta})),
            policy: Default::default(),
            at: None,
        };
        assert_eq!(
            generated(&obj(serde_json::json!({"generateName": "migrate-"}))),
            Some("migrate-".to_string())
        );
        assert_eq!(
            generated(&obj(
                serde_json::json!({"name": "m", "generateName": "migrate-"})
            )),
            None
        );
        assert_eq!(generated(&obj(serde_json::json!({"name": "m"}))), None);
    }
}
