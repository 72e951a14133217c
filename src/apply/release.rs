//! Letting go of fields (`ignore-fields`): sent on create, never again. Server-side apply
//! removes a field its manager stops sending unless another manager owns it too, so
//! leaving it out of the next apply would delete it (or reset it to its default). The
//! field is first taken out of our manager's managedFields entry, as kubectl's
//! `csaupgrade` rewrites ownership: one merge patch, guarded by the resourceVersion. From
//! then on whoever changes it owns it, and our applies, which leave it out, never touch
//! it.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value};

use super::{Engine, Verb};
use crate::object::pointer;

/// `managed` (an object's managedFields) with the fields `pointers` name in `live` taken
/// out of `manager`'s Apply entries; `None` when they hold none of them.
fn released(
    managed: &[Value],
    manager: &str,
    pointers: &[String],
    live: &Value,
) -> Option<Vec<Value>> {
    let mut out = managed.to_vec();
    let mut changed = false;
    for entry in out.iter_mut().filter(|m| {
        m["manager"].as_str() == Some(manager) && m["operation"].as_str() == Some("Apply")
    }) {
        let Some(fields) = entry.get_mut("fieldsV1").and_then(Value::as_object_mut) else {
            continue;
        };
        for p in pointers {
            changed |= remove(fields, &pointer::steps(p), live);
        }
    }
    changed.then_some(out)
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
    /// Rewrites `obj`'s managedFields as `rewrite` says (`None`: nothing to change), in one
    /// merge patch: it replaces the whole list, and the resourceVersion read makes it fail
    /// (409) rather than overwrite a change made since. Then the object is read again and
    /// rewritten, up to `attempts` times in all. `obj` is read first when not given; the
    /// object as it is after, `None` when it is gone. What adoption (`adopt`) and
    /// `ignore-fields` (`release`) both do to ownership, as kubectl's `csaupgrade` does.
    pub(super) async fn rewrite_managed_fields(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        mut obj: Option<DynamicObject>,
        attempts: usize,
        rewrite: impl Fn(&[Value], &Value) -> Option<Vec<Value>>,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let live = match obj.take() {
                Some(o) => o,
                None => match api.get_opt(name).await? {
                    Some(o) => o,
                    None => return Ok(None),
                },
            };
            let managed: Vec<Value> = live
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .filter_map(|m| serde_json::to_value(m).ok())
                .collect();
            let Some(fields) = rewrite(&managed, &live.data) else {
                return Ok(Some(live));
            };
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": live.metadata.resource_version,
                "managedFields": fields,
            }});
            self.writes.count(Verb::Patch);
            let pp = PatchParams {
                field_manager: Some(self.opts.field_manager.clone()),
                ..PatchParams::default()
            };
            match api.patch(name, &pp, &Patch::Merge(&patch)).await {
                Err(kube::Error::Api(e)) if e.code == 409 && attempt < attempts => {}
                other => return other.map(Some),
            }
        }
    }

    /// `obj` after our manager let go of the fields `pointers` name, or as it is when it
    /// owns none of them. A controller's write right after a create (a Deployment's
    /// revision annotation) makes the first try fail: tried again on what it wrote.
    pub(super) async fn release(
        &self,
        api: &Api<DynamicObject>,
        obj: DynamicObject,
        pointers: &[String],
    ) -> Result<DynamicObject, kube::Error> {
        if pointers.is_empty() {
            return Ok(obj);
        }
        let name = obj.metadata.name.clone().unwrap_or_default();
        let manager = &self.opts.field_manager;
        let rewrite = |managed: &[Value], live: &Value| {
            let out = released(managed, manager, pointers, live);
            if out.is_some() {
                tracing::info!(fields = %pointers.join(", "), "letting go of ignored fields");
            }
            out
        };
        let after = self
            .rewrite_managed_fields(api, &name, Some(obj), 6, rewrite)
            .await?;
        after.ok_or_else(|| {
            let why = format!("{name} was deleted while its ignored fields were let go of");
            kube::Error::Api(
                kube::core::Status::failure(&why, "NotFound")
                    .with_code(404)
                    .boxed(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "fieldsV1": fields})
    }

    #[test]
    fn ignored_fields_leave_our_entry_only() {
        let live = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx"}]}}}});
        let item = json!({".": {}, "f:image": {}, "f:name": {}});
        let containers = json!({"k:{\"name\":\"web\"}": item});
        let ours = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": containers}}}});
        let managed = vec![
            entry("driftless", "Apply", ours),
            entry("kubectl", "Update", json!({"f:spec": {"f:replicas": {}}})),
        ];
        let pointers = [
            "/spec/replicas".to_string(),
            "/spec/template/spec/containers/0/image".to_string(),
        ];
        let managed = released(&managed, "driftless", &pointers, &live).unwrap();
        assert_eq!(
            managed[0]["fieldsV1"],
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {".": {}, "f:name": {}}
            }}}}})
        );
        assert_eq!(
            managed[1]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}}}),
            "another manager's ownership is theirs"
        );
        // Nothing left to let go of: no change, no write.
        assert_eq!(released(&managed, "driftless", &pointers, &live), None);
    }

    #[test]
    fn a_map_emptied_by_the_release_goes_with_it() {
        let live = json!({"data": {"a": "1"}});
        let managed = vec![entry(
            "driftless",
            "Apply",
            json!({"f:data": {"f:a": {}}, "f:metadata": {"f:name": {}}}),
        )];
        let managed = released(&managed, "driftless", &["/data/a".to_string()], &live).unwrap();
        assert_eq!(
            managed[0]["fieldsV1"],
            json!({"f:metadata": {"f:name": {}}})
        );
    }
}
