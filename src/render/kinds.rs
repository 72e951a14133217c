//! One function a spec kind: typed k8s-openapi objects, serialised with apiVersion/kind.

use std::collections::BTreeMap;

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    Service, ServicePort, ServiceSpec, TCPSocketAction, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde_json::Value;

use super::{Facts, Object, RenderError, ownership};
use crate::object::Packed;
use crate::spec::model::{
    ElasticWeb, LocalService, Manifest, TargetPort, Workspace, WorkspaceState,
};
use crate::spec::{SpecId, names};

fn meta(spec: &SpecId, name: &str, facts: &Facts) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(spec.namespace.clone()),
        labels: Some(ownership::labels(spec, &facts.instance)),
        annotations: Some(ownership::annotations(spec)),
        ..ObjectMeta::default()
    }
}

fn object<K: Resource + Serialize>(
    spec: &SpecId,
    name: &str,
    obj: &K,
) -> Result<Object, RenderError> {
    let body = serde_json::to_value(obj).map_err(|source| RenderError::Serialize {
        spec: spec.clone(),
        what: K::KIND,
        source,
    })?;
    Ok(Object {
        spec: spec.clone(),
        api_version: K::API_VERSION.to_string(),
        kind: K::KIND.to_string(),
        namespace: Some(spec.namespace.clone()),
        name: name.to_string(),
        body: Packed::new(&body),
        policy: super::default_policy(),
        at: None,
    })
}

/// Requests equal to limits: the original workspace operator requested a fixed 2 CPU
/// whatever the limit, which the apiserver rejects when the limit is smaller.
fn resources(cpu: Option<&str>, memory: Option<&str>) -> Option<ResourceRequirements> {
    let mut amounts = BTreeMap::new();
    if let Some(cpu) = cpu {
        amounts.insert("cpu".to_string(), Quantity(cpu.to_string()));
    }
    if let Some(memory) = memory {
        amounts.insert("memory".to_string(), Quantity(memory.to_string()));
    }
    (!amounts.is_empty()).then(|| ResourceRequirements {
        limits: Some(amounts.clone()),
        requests: Some(amounts),
        ..ResourceRequirements::default()
    })
}

fn tcp_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: i32::from(port),
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}

pub(super) fn workspace(
    spec: &SpecId,
    w: &Workspace,
    facts: &Facts,
) -> Result<Vec<Object>, RenderError> {
    let name = spec.name.as_str();
    let mut out = Vec::new();
    if let Some(size) = &w.storage {
        let pvc = PersistentVolumeClaim {
            metadata: meta(spec, name, facts),
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec![w.access_mode.as_str().to_string()]),
                storage_class_name: w.storage_class.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(size.clone()),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        };
        out.push(object(spec, name, &pvc)?);
    }
    if w.state == WorkspaceState::Running {
        let (mounts, volumes) = match &w.storage {
            Some(_) => (
                Some(vec![VolumeMount {
                    name: "data".to_string(),
                    mount_path: w.mount_path.clone(),
                    ..VolumeMount::default()
                }]),
                Some(vec![Volume {
                    name: "data".to_string(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: name.to_string(),
                        read_only: None,
                    }),
                    ..Volume::default()
                }]),
            ),
            None => (None, None),
        };
        let pod = Pod {
            metadata: meta(spec, name, facts),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "workspace".to_string(),
                    image: Some(w.image.clone()),
                    ports: Some(vec![tcp_port("ide", w.port)]),
                    resources: resources(w.cpu.as_deref(), w.memory.as_deref()),
                    readiness_probe: Some(Probe {
                        tcp_socket: Some(TCPSocketAction {
                            port: IntOrString::Int(i32::from(w.port)),
                            host: None,
                        }),
                        period_seconds: Some(5),
                        ..Probe::default()
                    }),
                    volume_mounts: mounts,
                    ..Container::default()
                }],
                volumes,
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        out.push(object(spec, name, &pod)?);
    }
    let svc = Service {
        metadata: meta(spec, name, facts),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(ownership::selector(spec)),
            ports: Some(vec![ServicePort {
                name: Some("ide".to_string()),
                port: i32::from(w.port),
                target_port: Some(IntOrString::Int(i32::from(w.port))),
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    out.push(object(spec, name, &svc)?);
    Ok(out)
}

pub(super) fn elasticweb(
    spec: &SpecId,
    e: &ElasticWeb,
    facts: &Facts,
) -> Result<Vec<Object>, RenderError> {
    let name = spec.name.as_str();
    let selector = ownership::selector(spec);
    // Validation caps replicas at i32::MAX.
    let replicas = i32::try_from(e.replicas()).unwrap_or(i32::MAX);
    let deployment = Deployment {
        metadata: meta(spec, name, facts),
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".to_string(),
                        image: Some(e.image.clone()),
                        ports: Some(vec![tcp_port("http", e.container_port)]),
                        resources: resources(Some(&e.cpu), Some(&e.memory)),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    };
    let svc = Service {
        metadata: meta(spec, name, facts),
        spec: Some(ServiceSpec {
            type_: Some(
                if e.port.is_some() {
                    "NodePort"
                } else {
                    "ClusterIP"
                }
                .to_string(),
            ),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some("http".to_string()),
                port: i32::from(e.container_port),
                target_port: Some(IntOrString::String("http".to_string())),
                node_port: e.port.map(i32::from),
                // HTTP is TCP; the original declared SCTP.
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Ok(vec![
        object(spec, name, &deployment)?,
        object(spec, name, &svc)?,
    ])
}

/// The Service name for `node`: `<spec>-<node>`, made a valid, stable, unique DNS-1035
/// label when the node's name does not fit (dots, length).
pub(crate) fn localservice_name(spec_name: &str, node: &str) -> String {
    names::joined_label(spec_name, node, 63)
}

pub(super) fn localservice(
    spec: &SpecId,
    l: &LocalService,
    facts: &Facts,
) -> Result<Vec<Object>, RenderError> {
    let mut nodes: Vec<_> = facts
        .nodes
        .iter()
        .filter(|n| {
            l.node_selector
                .iter()
                .all(|(k, v)| n.labels.get(k) == Some(v))
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let ports: Vec<ServicePort> = l
        .ports
        .iter()
        .map(|p| ServicePort {
            name: p.name.clone(),
            port: i32::from(p.port),
            target_port: Some(match &p.target_port {
                Some(TargetPort::Number(n)) => IntOrString::Int(i32::from(*n)),
                Some(TargetPort::Name(s)) => IntOrString::String(s.clone()),
                None => IntOrString::Int(i32::from(p.port)),
            }),
            protocol: Some(p.protocol.as_str().to_string()),
            ..ServicePort::default()
        })
        .collect();
    let mut out = Vec::with_capacity(nodes.len());
    for node in nodes {
        let name = localservice_name(&spec.name, &node.name);
        let mut metadata = meta(spec, &name, facts);
        metadata
            .annotations
            .get_or_insert_default()
            .insert(ownership::NODE_NAME.to_string(), node.name.clone());
        let mut selector = l.selector.clone();
        selector.insert(
            ownership::NODE.to_string(),
            names::as_label_value(&node.name),
        );
        let svc = Service {
            metadata,
            spec: Some(ServiceSpec {
                type_: Some(l.type_.as_str().to_string()),
                selector: Some(selector),
                ports: Some(ports.clone()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        out.push(object(spec, &name, &svc)?);
    }
    Ok(out)
}

pub(super) fn manifest(spec: &SpecId, m: &Manifest, facts: &Facts) -> Object {
    let mut body = m.to_json();
    let namespace = (!spec.namespace.is_empty()).then(|| spec.namespace.clone());
    super::set_namespace(&mut body, namespace.as_deref());
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        // A YAML manifest may say `labels:` with nothing after it: null, which would
        // otherwise keep our marks off the object.
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        if labels.is_null() {
            *labels = Value::Object(Default::default());
        }
        // The manifest's own labels go as written: driftless adds its mark and nothing
        // else (no `app.kubernetes.io/*`, which belong to the manifest's author).
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(ownership::INSTANCE.into(), facts.instance.clone().into());
        }
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if annotations.is_null() {
            *annotations = Value::Object(Default::default());
        }
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(ownership::SPEC.into(), spec.to_string().into());
        }
    }
    Object {
        spec: spec.clone(),
        api_version: m.api_version.clone(),
        kind: m.kind.clone(),
        namespace,
        name: m.metadata.name.clone(),
        body: Packed::new(&body),
        policy: super::default_policy(),
        at: None,
    }
}
