//! What readiness reads of a live object, and nothing else: the daemon keeps every owned
//! object (and Endpoints) for as long as it runs, and a whole object as a
//! `serde_json::Value` is a tree of maps of about 6 KiB; a Deployment's pod template, a
//! ConfigMap's data or a CRD's schemas are most of that and no readiness rule reads them.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::spec::settings::BUILT_IN_GROUPS;

/// Spec fields that are maps or lists and that a readiness rule (or the daemon) reads;
/// every scalar of `spec` is kept (replicas, type, nodeName, parallelism...).
const SPEC_MAPS: &[&str] = &["selector", "updateStrategy", "names"];

const METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
];

/// A live object cut down to what `kstatus`, the figures, the drift check and ownership
/// read: apiVersion, kind, identity and lifecycle metadata, driftless's own labels and
/// annotations, the scalars of `spec` plus its selector, update strategy and CRD names,
/// all of `status`, and of an Endpoints only how many ready addresses each subset has.
pub fn readiness_view(mut obj: Value) -> Value {
    let Some(map) = obj.as_object_mut() else {
        return obj;
    };
    let endpoints = map.get("kind").and_then(Value::as_str) == Some("Endpoints");
    // A custom resource may be judged by a `[[health]]` rule reading any of its fields:
    // it keeps its labels, annotations and spec (few trees hold many).
    let custom = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(custom);
    map.retain(|k, _| {
        matches!(
            k.as_str(),
            "apiVersion" | "kind" | "metadata" | "spec" | "status"
        ) || (endpoints && k == "subsets")
    });
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| METADATA.contains(&k.as_str()));
        for field in ["labels", "annotations"].into_iter().filter(|_| !custom) {
            if let Some(m) = meta.get_mut(field).and_then(Value::as_object_mut) {
                m.retain(|k, _| ours(k));
                if m.is_empty() {
                    meta.remove(field);
                }
            }
        }
    }
    if let Some(spec) = map
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .filter(|_| !custom)
    {
        spec.retain(|k, v| !(v.is_object() || v.is_array()) || SPEC_MAPS.contains(&k.as_str()));
    }
    if let Some(subsets) = map.get_mut("subsets") {
        only_addresses(subsets);
    }
    obj
}

/// Whether an apiVersion is a custom resource's (not a built-in group's).
fn custom(api_version: &str) -> bool {
    !BUILT_IN_GROUPS.contains(&crate::object::group_of(api_version))
}

/// Health counts an Endpoints' ready addresses; their targets and ports are not read.
fn only_addresses(subsets: &mut Value) {
    for subset in subsets.as_array_mut().into_iter().flatten() {
        let addresses: Vec<Value> = subset["addresses"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|addr| serde_json::json!({ "ip": addr["ip"] }))
                    .collect()
            })
            .unwrap_or_default();
        *subset = serde_json::json!({ "addresses": addresses });
    }
}

/// What a watch keeps of an object it received as text: the view `readiness_view` makes,
/// and the text of its managedFields (whose entries are apply's to hash).
pub(crate) struct ViewOfText {
    pub view: Value,
    pub managed_fields: Option<Box<RawValue>>,
}

/// `readiness_view` of a built-in kind's object read straight from its JSON text: what
/// the view drops (the pod template, managedFields, other managers' labels) is skipped
/// as it is read, never built into a `Value`. The watches' lists at 10,000 specs spent
/// most of the daemon's time building whole Deployments only to cut them down, on the
/// two cores the apiserver serves those lists from. `api_version` and `kind` are the
/// watched resource's, for items that do not name them (a list's). `None` for a custom
/// resource: a `[[health]]` rule may read any of its fields (`readiness_view` keeps them).
pub(crate) fn readiness_view_of_text(
    text: &str,
    api_version: &str,
    kind: &str,
) -> Option<serde_json::Result<ViewOfText>> {
    if custom(api_version) {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let read = Top {
        endpoints: kind == "Endpoints",
    }
    .deserialize(&mut de)
    .and_then(|read| de.end().map(|()| read));
    Some(read.map(|(mut view, managed_fields)| {
        // As a whole object's `types` would: the text's own first, else the resource's.
        if !(view.contains_key("apiVersion") && view.contains_key("kind")) {
            view.insert("apiVersion".into(), api_version.into());
            view.insert("kind".into(), kind.into());
        }
        ViewOfText {
            view: Value::Object(view),
            managed_fields,
        }
    }))
}

/// The object: its types and status whole, its metadata and spec cut down as read.
struct Top {
    endpoints: bool,
}

impl<'de> DeserializeSeed<'de> for Top {
    type Value = (Map<String, Value>, Option<Box<RawValue>>);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top {
    type Value = (Map<String, Value>, Option<Box<RawValue>>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut view = Map::new();
        let mut managed = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "apiVersion" | "kind" | "status" => {
                    let v: Value = map.next_value()?;
                    view.insert(key, v);
                }
                "subsets" if self.endpoints => {
                    let mut v: Value = map.next_value()?;
                    only_addresses(&mut v);
                    view.insert(key, v);
                }
                "metadata" => {
                    let (meta, fields) = map.next_value_seed(Meta)?;
                    managed = fields;
                    view.insert(key, Value::Object(meta));
                }
                "spec" => {
                    let spec = map.next_value_seed(Spec)?;
                    view.insert(key, Value::Object(spec));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((view, managed))
    }
}

/// The identity and lifecycle metadata, and of the labels and annotations only
/// driftless's own; managedFields kept as their text.
struct Meta;

impl<'de> DeserializeSeed<'de> for Meta {
    type Value = (Map<String, Value>, Option<Box<RawValue>>);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Meta {
    type Value = (Map<String, Value>, Option<Box<RawValue>>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut meta = Map::new();
        let mut managed = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "managedFields" => managed = Some(map.next_value::<Box<RawValue>>()?),
                "labels" | "annotations" => {
                    let mut m: Map<String, Value> = map.next_value()?;
                    m.retain(|k, _| ours(k));
                    if !m.is_empty() {
                        meta.insert(key, Value::Object(m));
                    }
                }
                k if METADATA.contains(&k) => {
                    let v: Value = map.next_value()?;
                    // A typed ObjectMeta, as a whole object's metadata was read, has no nulls.
                    if !v.is_null() {
                        meta.insert(key, v);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((meta, managed))
    }
}

/// Every scalar of `spec`, and of its maps and lists only those in `SPEC_MAPS`.
struct Spec;

impl<'de> DeserializeSeed<'de> for Spec {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Spec {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object's spec")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut spec = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if SPEC_MAPS.contains(&key.as_str()) {
                let v: Value = map.next_value()?;
                spec.insert(key, v);
            } else if let Some(v) = map.next_value_seed(Scalar)? {
                spec.insert(key, v);
            }
        }
        Ok(spec)
    }
}

/// A scalar as a `Value`; a map or a list read past.
struct Scalar;

impl<'de> DeserializeSeed<'de> for Scalar {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scalar {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.into()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v.into()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// Labels and annotations driftless sets and reads back (ownership, spec id).
fn ours(key: &str) -> bool {
    crate::spec::names::is_driftless_key(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::kstatus;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "u-1", "generation": 3,
                "resourceVersion": "99",
                "labels": {
                    "app.kubernetes.io/managed-by": "driftless",
                    "driftless.dev/instance": "default",
                    "app.kubernetes.io/name": "web"
                },
                "annotations": {
                    "driftless.dev/spec": "elasticweb/shop/web",
                    "deployment.kubernetes.io/revision": "3"
                }
            },
            "spec": {
                "replicas": 2,
                "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
                "strategy": {"type": "RollingUpdate"},
                "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}
            },
            "status": {
                "observedGeneration": 3, "replicas": 2, "updatedReplicas": 2,
                "readyReplicas": 1, "availableReplicas": 1,
                "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]
            }
        })
    }

    #[test]
    fn keeps_what_readiness_and_ownership_read_and_drops_the_rest() {
        let v = readiness_view(deployment());
        assert_eq!(v["spec"]["replicas"], 2);
        assert_eq!(v["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(
            v["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
            "web"
        );
        assert!(v["spec"].get("template").is_none());
        assert!(v["spec"].get("strategy").is_none());
        assert_eq!(v["status"], deployment()["status"]);
        assert_eq!(v["metadata"]["uid"], "u-1");
        assert_eq!(v["metadata"]["generation"], 3);
        assert!(v["metadata"].get("resourceVersion").is_none());
        assert_eq!(v["metadata"]["labels"]["driftless.dev/instance"], "default");
        assert!(
            v["metadata"]["labels"]
                .get("app.kubernetes.io/managed-by")
                .is_none()
        );
        assert!(
            v["metadata"]["labels"]
                .get("app.kubernetes.io/name")
                .is_none()
        );
        assert_eq!(
            v["metadata"]["annotations"],
            json!({"driftless.dev/spec": "elasticweb/shop/web"})
        );
    }

    #[test]
    fn readiness_is_the_same_on_the_view() {
        let now = Timestamp::now();
        let full = deployment();
        let mut ready = deployment();
        ready["status"]["readyReplicas"] = json!(2);
        ready["status"]["availableReplicas"] = json!(2);
        ready["status"]["conditions"] = json!([{"type": "Available", "status": "True"}]);
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "c",
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}]}
        });
        let sts = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "generation": 1},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}},
            "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "currentReplicas": 2, "updatedReplicas": 1}
        });
        let lb = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}
        });
        for obj in [full, ready, pod, sts, lb] {
            assert_eq!(
                kstatus::compute(Some(&readiness_view(obj.clone())), now),
                kstatus::compute(Some(&obj), now),
                "{obj}"
            );
        }
        let view = readiness_view(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"nodeName": "node-1", "containers": []}
        }));
        assert_eq!(view["spec"], json!({"nodeName": "node-1"}));
    }

    #[test]
    fn data_and_endpoint_details_are_dropped_but_addresses_counted() {
        let cm = readiness_view(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"big": "x".repeat(1000)}
        }));
        assert!(cm.get("data").is_none());
        let ep = readiness_view(json!({
            "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "s"},
            "subsets": [
                {"addresses": [
                    {"ip": "10.0.0.1", "nodeName": "n", "targetRef": {"kind": "Pod", "name": "a"}},
                    {"ip": "10.0.0.2", "targetRef": {"kind": "Pod", "name": "b"}}
                ], "ports": [{"port": 80}]},
                {"notReadyAddresses": [{"ip": "10.0.0.3"}]}
            ]
        }));
        assert_eq!(
            ep["subsets"],
            json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}, {"addresses": []}])
        );
    }

    #[test]
    fn crd_names_survive_for_deferred_resolution() {
        let crd = readiness_view(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}
        }));
        assert_eq!(crd["spec"]["group"], "example.com");
        assert_eq!(crd["spec"]["names"]["kind"], "Widget");
        assert!(crd["spec"].get("versions").is_none());
    }

    #[test]
    fn non_objects_pass_through() {
        assert_eq!(readiness_view(Value::Null), Value::Null);
    }
}
