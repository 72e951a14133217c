//! Live objects as the engine keeps them: managedFields dropped once hashed.

use kube::api::{DynamicObject, ObjectMeta};
use serde_json::Value;

use super::hash::owned_fields_hash_of;
use super::{Options, Resolved};
use crate::object::Packed;

/// A live object as the engine keeps it: its JSON without `metadata.managedFields`, and
/// the hash of the fields `manager` owns, taken from them first. managedFields are a
/// tree of many small maps, most of an object's memory as a `Value`; nothing else in
/// them is needed, and keeping them made a sync of a few thousand objects take hundreds
/// of MiB.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub(super) value: Value,
    pub(super) fields: String,
    /// Its resourceVersion, as read or written (a view of it may leave it out).
    pub(super) version: Option<String>,
}

/// A live object as one JSON value without its managedFields, and the hash of the fields
/// `manager` owns (taken from them first). The body is moved into the value, not
/// serialised as a second copy. `types` stands in for the apiVersion and kind of an
/// object that has none (list and watch items do not).
pub(crate) fn live_parts(
    mut obj: DynamicObject,
    types: Option<&kube::discovery::ApiResource>,
    manager: &str,
) -> (Value, String) {
    let fields = owned_fields_hash_of(&obj.metadata, manager);
    obj.metadata.managed_fields = None;
    let metadata = serde_json::to_value(&obj.metadata).unwrap_or(Value::Null);
    let mut v = match obj.data {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let (api_version, kind) = match (obj.types, types) {
        (Some(t), _) => (Some(t.api_version), Some(t.kind)),
        (None, Some(r)) => (Some(r.api_version.clone()), Some(r.kind.clone())),
        (None, None) => (None, None),
    };
    if let Some(a) = api_version {
        v.insert("apiVersion".into(), a.into());
    }
    if let Some(k) = kind {
        v.insert("kind".into(), k.into());
    }
    v.insert("metadata".into(), metadata);
    (Value::Object(v), fields)
}

/// A listed object held until the sync reaches it: packed, and unpacked once, when it is
/// taken. A sync lists every object it owns before it applies any, and as `Value`s the
/// 20,000 listed objects of a 10,000-spec tree held 54 MiB (a map node is about 600
/// bytes however few keys it has) on top of the rendered tree; as text, about a fifth.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    body: Packed,
    fields: String,
}

impl Listed {
    /// An object as a watch last saw it: what a list would have told of it.
    pub fn seen(seen: crate::object::Seen) -> Listed {
        Listed {
            body: seen.view,
            fields: seen.fields,
        }
    }

    /// The listed object as readiness keeps it.
    pub(super) fn into_seen(self) -> crate::object::Seen {
        crate::object::Seen {
            view: self.body,
            fields: self.fields,
        }
    }

    pub(super) fn of(live: Live) -> Listed {
        Listed {
            body: Packed::new(&live.value),
            fields: live.fields,
        }
    }

    /// From a metadata-only list item: enough for ownership, the UID and the no-write
    /// rule, which is all a sync reads of an object it does not write. Packed straight
    /// from the metadata, never a `Value`.
    pub(super) fn of_meta(mut meta: ObjectMeta, r: &Resolved, opts: &Options) -> Listed {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Shell<'a> {
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
        }
        let fields = owned_fields_hash_of(&meta, &opts.field_manager);
        meta.managed_fields = None;
        let body = Packed::of(&Shell {
            api_version: &r.resource.api_version,
            kind: &r.resource.kind,
            metadata: &meta,
        });
        Listed { body, fields }
    }

    /// The listed object as a value, read back now.
    pub(super) fn value(&self) -> Value {
        self.body.value()
    }

    pub(super) fn unpack(self) -> Live {
        let value = self.body.value();
        Live {
            version: value["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            value,
            fields: self.fields,
        }
    }
}

impl Live {
    pub(super) fn of(obj: DynamicObject, opts: &Options) -> Live {
        let version = obj.metadata.resource_version.clone();
        let (value, fields) = live_parts(obj, None, &opts.field_manager);
        let value = match opts.live_view {
            Some(view) => view(value),
            None => value,
        };
        Live {
            value,
            fields,
            version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::hash::tests::owned_fields_hash;
    use super::*;
    use serde_json::json;

    #[test]
    fn live_objects_drop_managed_fields_but_keep_their_hash() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "managedFields": [
                {"manager": "driftless", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80}": {".": {}}}}}},
                {"manager": "kube-controller-manager", "operation": "Update",
                 "fieldsV1": {"f:status": {}}},
                {"manager": "driftless", "operation": "Apply", "apiVersion": "v1"},
            ]},
            "spec": {"ports": [{"port": 80}]}
        }))
        .unwrap();
        let full = serde_json::to_value(&obj).unwrap();
        let want = owned_fields_hash(&full, "driftless");
        assert_eq!(owned_fields_hash_of(&obj.metadata, "driftless"), want);
        let live = Live::of(obj, &Options::default());
        assert_eq!(live.fields, want);
        assert!(live.value["metadata"].get("managedFields").is_none());
        assert_eq!(live.value["spec"], full["spec"]);
    }

    #[test]
    fn a_listed_metadata_item_unpacks_as_the_object_it_stands_for() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "web", "namespace": "n", "uid": "u-1",
            "labels": {"driftless.dev/instance": "i"},
            "managedFields": [{"manager": "driftless", "operation": "Apply",
                "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
        }))
        .unwrap();
        let want = owned_fields_hash_of(&meta, "driftless");
        let r = Resolved {
            resource: kube::discovery::ApiResource {
                group: "apps".into(),
                version: "v1".into(),
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                plural: "deployments".into(),
            },
            namespaced: true,
        };
        let opts = Options {
            field_manager: "driftless".into(),
            ..Options::default()
        };
        let listed = Listed::of_meta(meta, &r, &opts);
        let live = listed.clone().unpack();
        assert_eq!(live.fields, want);
        assert_eq!(
            live.value,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                "name": "web", "namespace": "n", "uid": "u-1",
                "labels": {"driftless.dev/instance": "i"}}})
        );
        assert_eq!(listed.value(), live.value);
    }
}
