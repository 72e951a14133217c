//! What readiness reads of a live object, and nothing else: the daemon keeps every owned
//! object (and Endpoints) for as long as it runs, and a whole object as a
//! `serde_json::Value` is a tree of maps of about 6 KiB; a Deployment's pod template, a
//! ConfigMap's data or a CRD's schemas are most of that and no readiness rule reads them.

use serde_json::Value;

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
        .is_some_and(|v| !BUILT_IN_GROUPS.contains(&crate::object::group_of(v)));
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
    if let Some(subsets) = map.get_mut("subsets").and_then(Value::as_array_mut) {
        // Health counts the ready addresses; their targets and ports are not read.
        for subset in subsets.iter_mut() {
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
    obj
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
