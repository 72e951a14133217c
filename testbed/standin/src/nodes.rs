//! Fake Nodes: created with the labels a real kubelet sets, then kept Ready and free of
//! the not-ready taint that the apiserver's admission adds at creation, and alive through
//! their Leases in `kube-node-lease`, renewed as a kubelet renews them (every 10 s of a
//! 40 s lease), so a cluster whose node lifecycle controller runs would keep them too.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

/// Nodes labelled with this are the testbed's: it keeps them Ready and runs their Pods.
pub const FAKE_NODE_LABEL: &str = "testbed.driftless.dev/fake-node";
const MANAGER: &str = "driftless-testbed";
const ZONES: [&str; 3] = ["a", "b", "c"];
static KUBELET_VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The fake Nodes known so far, with the InternalIP each was given.
#[derive(Clone, Default)]
pub struct Registry(Arc<RwLock<BTreeMap<String, String>>>);

impl Registry {
    pub fn ip_of(&self, node: &str) -> Option<String> {
        self.0.read().ok()?.get(node).cloned()
    }

    fn insert(&self, node: &str, ip: String) {
        if let Ok(mut m) = self.0.write() {
            m.insert(node.to_string(), ip);
        }
    }

    fn remove(&self, node: &str) {
        if let Ok(mut m) = self.0.write() {
            m.remove(node);
        }
    }

    fn len(&self) -> usize {
        self.0.read().map(|m| m.len()).unwrap_or(0)
    }

    fn names(&self) -> Vec<String> {
        self.0
            .read()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

const LEASE_SECONDS: i32 = 40;
const RENEW_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Renews every fake Node's Lease, forever.
pub async fn renew_leases(client: Client, registry: Registry) -> anyhow::Result<()> {
    let api: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    loop {
        for name in registry.names() {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_SECONDS,
                    "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()),
                },
            });
            if let Err(e) = api
                .patch(
                    &name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(&lease),
                )
                .await
            {
                tracing::warn!(node = %name, error = %e, "could not renew the node's lease");
            }
        }
        tokio::time::sleep(RENEW_EVERY).await;
    }
}

pub async fn create_initial(
    client: &Client,
    count: u32,
    registry: &Registry,
) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    // The kubelet's version is the control plane's, as on a cluster kept at one version.
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|_| "v1.37.0".to_string());
    KUBELET_VERSION.get_or_init(|| version);
    for i in 1..=count {
        let name = format!("node-{i}");
        let zone = ZONES[(i as usize - 1) % ZONES.len()];
        let node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    FAKE_NODE_LABEL: "true",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": zone,
                },
            },
        });
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&node),
        )
        .await?;
        let live = api.get(&name).await?;
        make_ready(&api, &live, registry).await?;
    }
    Ok(())
}

pub async fn run(client: Client, registry: Registry) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client);
    let cfg = watcher::Config::default().labels(&format!("{FAKE_NODE_LABEL}=true"));
    let mut events = watcher(api.clone(), cfg).default_backoff().boxed();
    while let Some(ev) = crate::next_event(&mut events, "nodes").await {
        match ev {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => {
                if let Err(e) = make_ready(&api, &node, &registry).await {
                    tracing::warn!(node = %node.name_any(), error = %e, "could not make node ready");
                }
            }
            watcher::Event::Delete(node) => registry.remove(&node.name_any()),
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
    anyhow::bail!("node watch ended")
}

/// Writes the standard labels, Ready status, and removes startup taints, only where the
/// Node lacks them, so a Ready node sees no writes.
async fn make_ready(api: &Api<Node>, node: &Node, registry: &Registry) -> anyhow::Result<()> {
    let name = node.name_any();
    let existing_ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone());
    let ip = match existing_ip.or_else(|| registry.ip_of(&name)) {
        Some(ip) => ip,
        // Routed to nowhere by `testbed/cluster.sh` (`NODE_RANGE` there): an apiserver
        // that dials a kubelet (logs, exec) fails at once, on this machine.
        None => format!("10.127.0.{}", (registry.len() % 250) + 10),
    };
    registry.insert(&name, ip.clone());

    // The labels a kubelet sets on registration, which nodeSelectors in upstream
    // manifests rely on (the beta ones are still set, and older bundles select on them);
    // a Node added later (by a test, say) may lack them.
    let standard = [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ];
    let labels = node.labels();
    let missing: BTreeMap<&str, &str> = standard
        .into_iter()
        .filter(|(k, _)| !labels.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": missing}})),
        )
        .await?;
    }

    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let kept: Vec<_> = taints
        .iter()
        .filter(|t| !t.key.starts_with("node.kubernetes.io/"))
        .cloned()
        .collect();
    if kept.len() != taints.len() {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": kept}})),
        )
        .await?;
    }

    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let has_capacity = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .is_some();
    if !ready || !has_capacity {
        let now = chrono_now();
        let kubelet_version = KUBELET_VERSION
            .get()
            .map(String::as_str)
            .unwrap_or("v1.37.0");
        let resources =
            json!({"cpu": "4000", "memory": "16Ti", "pods": "10000", "ephemeral-storage": "64Ti"});
        let cond = |type_: &str, status: &str, reason: &str| {
            json!({"type": type_, "status": status, "reason": reason, "message": "driftless-testbed",
                   "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        let status = json!({"status": {
            "capacity": resources,
            "allocatable": resources,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [
                cond("Ready", "True", "KubeletReady"),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
            "nodeInfo": {
                "machineID": name, "systemUUID": name, "bootID": name,
                "kernelVersion": "testbed", "osImage": "driftless-testbed",
                "containerRuntimeVersion": "testbed://1", "kubeletVersion": kubelet_version,
                "operatingSystem": "linux", "architecture": "amd64",
            },
        }});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        tracing::info!(node = %name, %ip, "node ready");
    }
    Ok(())
}

pub fn chrono_now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}
