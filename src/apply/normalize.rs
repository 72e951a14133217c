//! Compatibility normalisation before apply, as fluxcd/pkg's `ssa` does it, so the same
//! upstream YAML works on old and new clusters:
//!
//! - Server-side apply before Kubernetes 1.22 refuses a container port or Service port
//!   without `protocol` (the list is keyed by port *and* protocol, and the key's default
//!   was applied too late: kubernetes#98576, structured-merge-diff#130). The default,
//!   `TCP`, is written in where it is missing; newer clusters default it to the same.
//! - A Secret's `stringData` is written as `data` (base64), as the apiserver would store
//!   it: applied as `stringData`, a key removed from the spec stays in `data` for ever
//!   (kubernetes#108008).
//! - `status` is not sent: it is the controllers' to write. Upstream YAML carries it (every
//!   generated CRD has an empty `status` block); the apiserver drops it, but on 1.20 our
//!   field manager is still recorded as owning it, and when the CRD controller writes its
//!   status that ownership moves, which would read as drift and re-apply each CRD once.
//!
//! The result is what is hashed and sent, every time the same: it causes no diff and no
//! write on re-apply.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::{Map, Value};

/// `body` as it is sent to a cluster; borrowed when it needs nothing.
pub(super) fn compatible<'a>(group: &str, kind: &str, body: Cow<'a, Value>) -> Cow<'a, Value> {
    let needs = body.get("status").is_some()
        || match (group, kind) {
            ("", "Service") => service_ports(&body).any(lacks_protocol),
            ("", "Secret") => body.get("stringData").is_some_and(|s| !s.is_null()),
            _ => pod_spec_path(group, kind)
                .and_then(|path| body.pointer(path))
                .is_some_and(|spec| pod_ports(spec).any(lacks_protocol)),
        };
    if !needs {
        return body;
    }
    let mut body = body.into_owned();
    if let Some(obj) = body.as_object_mut() {
        obj.remove("status");
    }
    match (group, kind) {
        ("", "Service") => {
            if let Some(ports) = body
                .pointer_mut("/spec/ports")
                .and_then(Value::as_array_mut)
            {
                ports.iter_mut().for_each(default_protocol);
            }
        }
        ("", "Secret") => string_data_as_data(&mut body),
        _ => {
            if let Some(spec) = pod_spec_path(group, kind).and_then(|p| body.pointer_mut(p)) {
                for list in ["containers", "initContainers"] {
                    for c in spec
                        .get_mut(list)
                        .and_then(Value::as_array_mut)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                            ports.iter_mut().for_each(default_protocol);
                        }
                    }
                }
            }
        }
    }
    Cow::Owned(body)
}

/// Where a workload kind keeps its Pod spec.
fn pod_spec_path(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "Pod") => Some("/spec"),
        ("", "PodTemplate") => Some("/template/spec"),
        ("", "ReplicationController")
        | ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job") => Some("/spec/template/spec"),
        ("batch", "CronJob") => Some("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

fn service_ports(body: &Value) -> impl Iterator<Item = &Value> {
    body.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn pod_ports(spec: &Value) -> impl Iterator<Item = &Value> {
    ["containers", "initContainers"]
        .into_iter()
        .filter_map(|list| spec.get(list).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("ports").and_then(Value::as_array))
        .flatten()
}

fn lacks_protocol(port: &Value) -> bool {
    port.is_object() && port.get("protocol").is_none_or(Value::is_null)
}

fn default_protocol(port: &mut Value) {
    if lacks_protocol(port)
        && let Some(p) = port.as_object_mut()
    {
        p.insert("protocol".into(), "TCP".into());
    }
}

/// `stringData` merged into `data` (its keys win, as the apiserver merges them); values
/// that are not strings are left for the apiserver to refuse.
fn string_data_as_data(body: &mut Value) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = obj.remove("stringData") else {
        return;
    };
    let mut data = match obj.remove("data") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    let mut kept = Map::new();
    for (k, v) in strings {
        match v.as_str() {
            Some(s) => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(s);
                data.insert(k, encoded.into());
            }
            None => {
                kept.insert(k, v);
            }
        }
    }
    obj.insert("data".into(), Value::Object(data));
    if !kept.is_empty() {
        obj.insert("stringData".into(), Value::Object(kept));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn normal(group: &str, kind: &str, body: Value) -> Value {
        compatible(group, kind, Cow::Owned(body)).into_owned()
    }

    #[test]
    fn ports_without_protocol_get_tcp() {
        let svc = normal(
            "",
            "Service",
            json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}}),
        );
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(svc["spec"]["ports"][1]["protocol"], "UDP");

        let pod = |ports: Value| {
            json!({"containers": [{"name": "a", "ports": ports}],
                                        "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}]})
        };
        let cases = [
            (
                "",
                "Pod",
                json!({"spec": pod(json!([{"containerPort": 8080}]))}),
                "/spec",
            ),
            (
                "apps",
                "Deployment",
                json!({"spec": {"template": {"spec": pod(json!([{"containerPort": 8080}]))}}}),
                "/spec/template/spec",
            ),
            (
                "batch",
                "CronJob",
                json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": pod(json!([{"containerPort": 8080}]))}}}}}),
                "/spec/jobTemplate/spec/template/spec",
            ),
        ];
        for (group, kind, body, path) in cases {
            let out = normal(group, kind, body);
            let spec = out.pointer(path).unwrap();
            assert_eq!(
                spec["containers"][0]["ports"][0]["protocol"], "TCP",
                "{kind}"
            );
            assert_eq!(
                spec["initContainers"][0]["ports"][0]["protocol"], "TCP",
                "{kind}"
            );
        }
    }

    #[test]
    fn a_body_that_needs_nothing_stays_borrowed_and_unchanged() {
        let body = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}]}});
        assert!(matches!(
            compatible("", "Service", Cow::Borrowed(&body)),
            Cow::Borrowed(_)
        ));
        let cm = json!({"data": {"a": "b"}});
        assert!(matches!(
            compatible("", "ConfigMap", Cow::Borrowed(&cm)),
            Cow::Borrowed(_)
        ));
        // A kind of another group with a Pod-like shape is not touched.
        let cr = json!({"spec": {"template": {"spec": {"containers": [{"ports": [{"containerPort": 1}]}]}}}});
        assert!(matches!(
            compatible("example.com", "Deployment", Cow::Borrowed(&cr)),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn normalising_twice_changes_nothing_more() {
        let svc = normal("", "Service", json!({"spec": {"ports": [{"port": 80}]}}));
        assert!(matches!(
            compatible("", "Service", Cow::Borrowed(&svc)),
            Cow::Borrowed(_)
        ));
        let secret = normal("", "Secret", json!({"stringData": {"a": "x"}}));
        assert!(matches!(
            compatible("", "Secret", Cow::Borrowed(&secret)),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn status_is_not_sent() {
        let crd = normal(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            json!({"spec": {"group": "g"}, "status": {"acceptedNames": {"kind": ""}}}),
        );
        assert_eq!(crd, json!({"spec": {"group": "g"}}));
    }

    #[test]
    fn secret_string_data_is_sent_as_data() {
        let out = normal(
            "",
            "Secret",
            json!({"data": {"a": "b2xk", "keep": "aw=="}, "stringData": {"a": "new", "b": "héllo"}}),
        );
        assert_eq!(
            out,
            json!({"data": {"a": "bmV3", "keep": "aw==", "b": "aMOpbGxv"}})
        );
    }
}
