//! Adopting what `kubectl apply` made. Client-side apply records its ownership under the
//! managers `kubectl-client-side-apply` (and `before-first-apply`) as Update entries,
//! plus the `last-applied-configuration` annotation. A server-side apply that only forces
//! leaves those entries in place, so a field later dropped from the spec stays on the
//! object for ever. Before the first apply of an adopted object, their fields move into
//! our Apply entry, as kubectl's `csaupgrade` does; the apply then owns them, and drops
//! whatever the spec does not set (the annotation included). An object `kubectl create`
//! made is taken over the same way: its fields are recorded under `kubectl-create`, an
//! Update entry no later apply would ever let go of.

use kube::api::{Api, DynamicObject};
use serde_json::{Map, Value, json};

use super::Engine;

/// The managers client-side apply (and `kubectl create`) record their ownership under.
const CLIENT_SIDE_MANAGERS: [&str; 3] = [
    "kubectl-client-side-apply",
    "before-first-apply",
    "kubectl-create",
];

fn is_client_side(entry: &Value) -> bool {
    entry["manager"]
        .as_str()
        .is_some_and(|m| CLIENT_SIDE_MANAGERS.contains(&m))
        && entry["operation"].as_str() == Some("Update")
        && entry["subresource"].as_str().unwrap_or_default().is_empty()
}

/// `managed` (an object's managedFields) with the client-side entries' fields moved into
/// `manager`'s Apply entry (made from the newest client-side entry when there is none);
/// `None` when there are no client-side entries. As in `csaupgrade`, the fields of
/// client-side entries of another API version than the Apply entry's are dropped: field
/// paths cannot be carried across versions without the schema.
pub(super) fn upgraded(managed: &[Value], manager: &str) -> Option<Vec<Value>> {
    let first_csa = managed.iter().position(is_client_side)?;
    let mut out: Vec<Value> = managed.to_vec();
    let target = out
        .iter()
        .position(|e| {
            e["manager"].as_str() == Some(manager)
                && e["operation"].as_str() == Some("Apply")
                && e["subresource"].as_str().unwrap_or_default().is_empty()
        })
        .unwrap_or_else(|| {
            out[first_csa]["manager"] = manager.into();
            out[first_csa]["operation"] = "Apply".into();
            first_csa
        });
    let version = out[target]["apiVersion"].clone();
    let mut fields = out[target]["fieldsV1"].take();
    for e in managed.iter().filter(|e| is_client_side(e)) {
        if e["apiVersion"] == version {
            union(&mut fields, &e["fieldsV1"]);
        }
    }
    out[target]["fieldsV1"] = fields;
    out[target]["fieldsType"] = "FieldsV1".into();
    Some(
        out.into_iter()
            .enumerate()
            .filter(|(i, e)| *i == target || !is_client_side(e))
            .map(|(_, e)| e)
            .collect(),
    )
}

/// The union of two field sets in their `FieldsV1` form (a tree of path elements).
fn union(into: &mut Value, from: &Value) {
    let Value::Object(from) = from else {
        return;
    };
    if !into.is_object() {
        *into = Value::Object(Map::new());
    }
    if let Value::Object(into) = into {
        for (k, v) in from {
            union(into.entry(k.clone()).or_insert_with(|| json!({})), v);
        }
    }
}

impl Engine {
    /// Moves client-side apply's ownership of `name` to our field manager, if it has
    /// any. The merge patch carries the resourceVersion read, so it fails (and is read
    /// again) rather than overwrite an ownership that changed meanwhile.
    pub(super) async fn take_over_client_side_apply(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> Result<(), kube::Error> {
        let manager = &self.opts.field_manager;
        let rewrite = |managed: &[Value], _: &Value| {
            let moved = upgraded(managed, manager);
            if moved.is_some() {
                tracing::info!(
                    object = name,
                    "taking over kubectl's client-side apply ownership"
                );
            }
            moved
        };
        self.rewrite_managed_fields(api, name, None, 3, rewrite)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, operation: &str, version: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": version,
               "fieldsType": "FieldsV1", "fieldsV1": fields, "time": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn client_side_ownership_becomes_our_apply_entry() {
        let managed = vec![
            entry(
                "kubectl-client-side-apply",
                "Update",
                "apps/v1",
                json!({"f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
                         "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:env": {"k:{\"name\":\"B\"}": {".": {}}}}}}}}}),
            ),
            entry(
                "kube-controller-manager",
                "Update",
                "apps/v1",
                json!({"f:status": {}}),
            ),
        ];
        let out = upgraded(&managed, "driftless").unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["manager"], "driftless");
        assert_eq!(out[0]["operation"], "Apply");
        assert!(
            out[0]["fieldsV1"]["f:metadata"]["f:annotations"]
                .get("f:kubectl.kubernetes.io/last-applied-configuration")
                .is_some()
        );
        assert_eq!(out[1]["manager"], "kube-controller-manager");
    }

    #[test]
    fn an_existing_apply_entry_takes_the_union_and_the_rest_go() {
        let managed = vec![
            entry("driftless", "Apply", "v1", json!({"f:data": {"f:a": {}}})),
            entry(
                "kubectl-client-side-apply",
                "Update",
                "v1",
                json!({"f:data": {"f:b": {}}}),
            ),
            entry(
                "before-first-apply",
                "Update",
                "v1",
                json!({"f:data": {"f:c": {}}, "f:metadata": {}}),
            ),
            // Another version's paths cannot be carried over: dropped, as csaupgrade does.
            entry(
                "kubectl-client-side-apply",
                "Update",
                "v2",
                json!({"f:x": {}}),
            ),
            entry(
                "kubectl-edit",
                "Update",
                "v1",
                json!({"f:data": {"f:d": {}}}),
            ),
        ];
        let out = upgraded(&managed, "driftless").unwrap();
        let managers: Vec<&str> = out.iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(managers, ["driftless", "kubectl-edit"]);
        assert_eq!(
            out[0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}, "f:metadata": {}})
        );
    }

    #[test]
    fn nothing_to_move_is_none() {
        let managed = vec![
            entry("driftless", "Apply", "v1", json!({"f:data": {}})),
            entry("kubectl-edit", "Update", "v1", json!({"f:data": {}})),
        ];
        assert_eq!(upgraded(&managed, "driftless"), None);
        let status = json!({"manager": "kubectl-client-side-apply", "operation": "Update",
                            "subresource": "status", "fieldsV1": {}});
        assert_eq!(upgraded(&[status], "driftless"), None);
    }
}
