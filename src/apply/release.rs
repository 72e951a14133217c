//! Letting go of fields (`ignore-fields`): sent on create, never again. Server-side apply
//! removes a field its manager stops sending unless another manager owns it too, so
//! leaving it out of the next apply would delete it (or reset it to its default). The
//! field is first taken out of our manager's managedFields entry, as kubectl's
//! `csaupgrade` rewrites ownership: one merge patch, guarded by the resourceVersion. From
//! then on whoever changes it owns it, and our applies, which leave it out, never touch
//! it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value};

use super::{Engine, Verb};
use crate::object::pointer;

/// Takes the fields `pointers` name in `live` out of `manager`'s Apply entries of
/// `managed`; whether any was there.
fn release(
    managed: &mut [ManagedFieldsEntry],
    manager: &str,
    pointers: &[String],
    live: &Value,
) -> bool {
    let mut changed = false;
    for entry in managed.iter_mut().filter(|m| {
        m.manager.as_deref() == Some(manager) && m.operation.as_deref() == Some("Apply")
    }) {
        let Some(Value::Object(fields)) = entry.fields_v1.as_mut().map(|f| &mut f.0) else {
            continue;
        };
        for p in pointers {
            changed |= remove(fields, &pointer::steps(p), live);
        }
    }
    changed
}

/// Removes the field `steps` leads to (through `live`, which says what each step is) from
/// a fieldsV1 map, and the maps left empty on the way: an empty map there would claim the
/// field it stands for as a whole.
fn remove(node: &mut Map<String, Value>, steps: &[String], live: &Value) -> bool {
    let Some((step, rest)) = steps.split_first() else {
        return false;
    };
    let (key, below) = match live {
        Value::Object(m) => (Some(format!("f:{step}")), m.get(step.as_str())),
        Value::Array(items) => {
            let item = step.parse::<usize>().ok().and_then(|i| items.get(i));
            (item.and_then(|item| item_key(node, item)), item)
        }
        _ => (None, None),
    };
    let Some(key) = key else {
        return false;
    };
    if rest.is_empty() {
        return node.remove(&key).is_some();
    }
    let (Some(Value::Object(child)), Some(below)) = (node.get_mut(&key), below) else {
        return false;
    };
    let removed = remove(child, rest, below);
    if removed && child.is_empty() {
        node.remove(&key);
    }
    removed
}

/// The fieldsV1 key of a list item: `k:{…}` when its keys match, `v:…` for a set's
/// value.
fn item_key(node: &Map<String, Value>, item: &Value) -> Option<String> {
    node.keys()
        .find(|k| {
            if let Some(keys) = k.strip_prefix("k:") {
                serde_json::from_str::<Map<String, Value>>(keys)
                    .is_ok_and(|keys| keys.iter().all(|(f, v)| item.get(f) == Some(v)))
            } else if let Some(v) = k.strip_prefix("v:") {
                serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
            } else {
                false
            }
        })
        .cloned()
}

impl Engine {
    /// `obj` after our manager let go of the fields `pointers` name, or as it is when it
    /// owns none of them.
    pub(super) async fn release(
        &self,
        api: &Api<DynamicObject>,
        mut obj: DynamicObject,
        pointers: &[String],
    ) -> Result<DynamicObject, kube::Error> {
        let name = obj.metadata.name.clone().unwrap_or_default();
        let mut attempt = 0;
        loop {
            let Some(mut managed) = obj.metadata.managed_fields.take() else {
                return Ok(obj);
            };
            if pointers.is_empty()
                || !release(&mut managed, &self.opts.field_manager, pointers, &obj.data)
            {
                obj.metadata.managed_fields = Some(managed);
                return Ok(obj);
            }
            // A merge patch replaces the whole list; the resourceVersion makes it fail
            // (409) rather than overwrite a change made since `obj` was read.
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": obj.metadata.resource_version,
                "managedFields": managed,
            }});
            self.writes.count(Verb::Patch);
            tracing::info!(fields = ?pointers, "letting go of ignored fields");
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                // A controller's write right after a create (a Deployment's revision
                // annotation): read it again and let go of them in that.
                Err(kube::Error::Api(e)) if e.code == 409 && attempt < 5 => {
                    attempt += 1;
                    obj = api.get(&name).await?;
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn entry(manager: &str, operation: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn ignored_fields_leave_our_entry_only() {
        let live = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx"}]}}}});
        let item = json!({".": {}, "f:image": {}, "f:name": {}});
        let containers = json!({"k:{\"name\":\"web\"}": item});
        let ours = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": containers}}}});
        let mut managed = vec![
            entry("driftless", "Apply", ours),
            entry("kubectl", "Update", json!({"f:spec": {"f:replicas": {}}})),
        ];
        let pointers = [
            "/spec/replicas".to_string(),
            "/spec/template/spec/containers/0/image".to_string(),
        ];
        assert!(release(&mut managed, "driftless", &pointers, &live));
        assert_eq!(
            managed[0].fields_v1.as_ref().unwrap().0,
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {".": {}, "f:name": {}}
            }}}}})
        );
        assert_eq!(
            managed[1].fields_v1.as_ref().unwrap().0,
            json!({"f:spec": {"f:replicas": {}}}),
            "another manager's ownership is theirs"
        );
        // Nothing left to let go of: no change, no write.
        assert!(!release(&mut managed, "driftless", &pointers, &live));
    }

    #[test]
    fn a_map_emptied_by_the_release_goes_with_it() {
        let live = json!({"data": {"a": "1"}});
        let mut managed = vec![entry(
            "driftless",
            "Apply",
            json!({"f:data": {"f:a": {}}, "f:metadata": {"f:name": {}}}),
        )];
        assert!(release(
            &mut managed,
            "driftless",
            &["/data/a".to_string()],
            &live
        ));
        assert_eq!(
            managed[0].fields_v1.as_ref().unwrap().0,
            json!({"f:metadata": {"f:name": {}}})
        );
    }
}
