//! The kubelet stand-in: writes the status a kubelet would for every Pod bound to a fake
//! Node, and completes Pod deletes (no real kubelet is there to finalize them).
//!
//! Simulated behaviour, chosen per Pod so one cluster serves every test:
//! - an image whose name contains `crashloop`: the container is in CrashLoopBackOff;
//! - an image whose name contains `unpullable`: Pending in ImagePullBackOff;
//! - annotation `testbed.driftless.dev/ready-delay-seconds: "N"`: Running but not Ready
//!   for N seconds after the Pod started; so does an image whose tag contains
//!   `slowready-N` (for specs whose kind sets no Pod annotations, as a workspace);
//! - annotation `testbed.driftless.dev/exit-code: "N"`: containers terminate with code N
//!   (Succeeded when 0, Failed otherwise);
//! - a Pod that is not restarted (`restartPolicy` Never or OnFailure, as a Job's are)
//!   runs to completion: Succeeded, so Jobs complete;
//! - otherwise Running and Ready.
//!
//! Init containers are reported as a 1.29+ kubelet does: an ordinary one terminated
//! (Completed) before the containers start; a sidecar (`restartPolicy: Always` on the init
//! container, GA in 1.33) running, started and ready beside them for the Pod's whole life,
//! also in a Pod that runs to completion (the kubelet stops sidecars after the main
//! containers exit, so a Succeeded Pod shows them terminated too).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::nodes::{Registry, chrono_now};

pub const READY_DELAY_ANNOTATION: &str = "testbed.driftless.dev/ready-delay-seconds";
pub const EXIT_CODE_ANNOTATION: &str = "testbed.driftless.dev/exit-code";

#[derive(Debug, Clone, PartialEq)]
enum Behaviour {
    Ready,
    CrashLoop,
    Unpullable,
    ReadyAfter(Duration),
    Exit(i32),
}

fn behaviour(pod: &Pod) -> Behaviour {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let image_has = |needle: &str| {
        containers
            .iter()
            .any(|c| c.image.as_deref().unwrap_or_default().contains(needle))
    };
    if image_has("unpullable") {
        return Behaviour::Unpullable;
    }
    if image_has("crashloop") {
        return Behaviour::CrashLoop;
    }
    let slow = containers.iter().find_map(|c| {
        let image = c.image.as_deref().unwrap_or_default();
        let at = image.find("slowready-")? + "slowready-".len();
        let digits: String = image[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse::<u64>().ok()
    });
    if let Some(secs) = slow {
        return Behaviour::ReadyAfter(Duration::from_secs(secs));
    }
    let ann = pod.annotations();
    if let Some(code) = ann.get(EXIT_CODE_ANNOTATION).and_then(|v| v.parse().ok()) {
        return Behaviour::Exit(code);
    }
    if let Some(secs) = ann.get(READY_DELAY_ANNOTATION).and_then(|v| v.parse().ok()) {
        return Behaviour::ReadyAfter(Duration::from_secs(secs));
    }
    let restart = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
    if matches!(restart, Some("Never" | "OnFailure")) {
        return Behaviour::Exit(0);
    }
    Behaviour::Ready
}

/// Pod IPs come from a pool no test ever connects to; they only fill Endpoints. The
/// range is routed to nowhere by `testbed/cluster.sh` (`POD_RANGE` there), so whatever
/// dials one (an APIService's or a webhook's endpoint) fails at once on this machine.
struct IpPool(AtomicU32);

impl IpPool {
    fn next(&self) -> String {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        // 10.128.0.0/16 minus .0 and .255 in the last octet.
        let host = n % (1 << 16);
        let (c, d) = ((host >> 8) & 0xff, host & 0xff);
        let d = d.clamp(1, 254);
        format!("10.128.{c}.{d}")
    }
}

pub async fn run(client: Client, registry: Registry) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::all(client.clone());
    let pool = Arc::new(IpPool(AtomicU32::new(1)));
    // Pods whose status must change later (a readiness delay running out): the watch
    // will not tell us, so they come back through this channel.
    let (recheck_tx, mut recheck_rx) = mpsc::unbounded_channel::<(String, String)>();
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    loop {
        let pod = tokio::select! {
            ev = crate::next_event(&mut events, "pods") => match ev {
                Some(pod) => pod,
                None => anyhow::bail!("pod watch ended"),
            },
            Some((ns, name)) = recheck_rx.recv() => {
                match Api::<Pod>::namespaced(client.clone(), &ns).get_opt(&name).await {
                    Ok(Some(pod)) => pod,
                    _ => continue,
                }
            }
        };
        let node = match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            Some(n) => n,
            None => continue,
        };
        let Some(host_ip) = registry.ip_of(&node) else {
            continue;
        };
        let client = client.clone();
        let pool = pool.clone();
        let recheck_tx = recheck_tx.clone();
        // Per-pod work runs on its own task so a slow write never stalls the watch.
        tokio::spawn(async move {
            match sync_pod(&client, &pod, &host_ip, &pool).await {
                Ok(None) => {}
                Ok(Some(after)) => {
                    tokio::time::sleep(after).await;
                    let _ = recheck_tx.send((pod.namespace().unwrap_or_default(), pod.name_any()));
                }
                Err(e) => tracing::warn!(pod = %pod.name_any(), error = %e, "pod sync failed"),
            }
        });
    }
}

/// Brings one Pod's status in line with its behaviour; returns when to look again, if
/// its status will change with time.
async fn sync_pod(
    client: &Client,
    pod: &Pod,
    host_ip: &str,
    pool: &IpPool,
) -> anyhow::Result<Option<Duration>> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);

    if pod.metadata.deletion_timestamp.is_some() {
        let mut dp = DeleteParams::default().grace_period(0);
        dp.preconditions = Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        });
        match api.delete(&name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(None);
    }

    let b = behaviour(pod);
    let status = pod.status.clone().unwrap_or_default();
    let pod_ip = status.pod_ip.clone().unwrap_or_else(|| pool.next());
    let started = status
        .start_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_else(|| chrono_now().0);
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();

    let mut recheck = None;
    let ready_now = match &b {
        Behaviour::Ready => true,
        Behaviour::ReadyAfter(d) => {
            let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(started);
            let remaining = d.as_secs_f64() - elapsed.as_secs_f64();
            if remaining > 0.0 {
                recheck = Some(Duration::from_secs_f64(remaining + 0.05));
            }
            remaining <= 0.0
        }
        Behaviour::CrashLoop | Behaviour::Unpullable | Behaviour::Exit(_) => false,
    };

    let (phase, container_statuses) = match &b {
        Behaviour::Ready | Behaviour::ReadyAfter(_) => (
            "Running",
            containers
                .iter()
                .map(|c| container_status(c, ready_now, json!({"running": {"startedAt": started.to_string()}}), None, 0))
                .collect::<Vec<_>>(),
        ),
        Behaviour::CrashLoop => (
            "Running",
            containers
                .iter()
                .map(|c| {
                    container_status(
                        c,
                        false,
                        json!({"waiting": {"reason": "CrashLoopBackOff",
                            "message": format!("back-off 5m0s restarting failed container={} pod={name}", c.name)}}),
                        Some(json!({"terminated": {"exitCode": 1, "reason": "Error",
                            "startedAt": started.to_string(), "finishedAt": started.to_string()}})),
                        5,
                    )
                })
                .collect(),
        ),
        Behaviour::Unpullable => (
            "Pending",
            containers
                .iter()
                .map(|c| {
                    container_status(
                        c,
                        false,
                        json!({"waiting": {"reason": "ImagePullBackOff",
                            "message": format!("Back-off pulling image \"{}\"", c.image.as_deref().unwrap_or_default())}}),
                        None,
                        0,
                    )
                })
                .collect(),
        ),
        Behaviour::Exit(code) => (
            if *code == 0 { "Succeeded" } else { "Failed" },
            containers
                .iter()
                .map(|c| {
                    container_status(
                        c,
                        false,
                        json!({"terminated": {"exitCode": code,
                            "reason": if *code == 0 { "Completed" } else { "Error" },
                            "startedAt": started.to_string(), "finishedAt": started.to_string()}}),
                        None,
                        0,
                    )
                })
                .collect(),
        ),
    };

    let init_statuses = init_container_statuses(pod, &b, &started.to_string());
    let reason = (!ready_now).then_some("ContainersNotReady");
    let desired = Summary {
        phase: phase.to_string(),
        pod_ip: pod_ip.clone(),
        ready: ready_now,
        container_states: container_statuses.iter().map(state_key).collect(),
        init_states: init_statuses.iter().map(state_key).collect(),
    };
    if Summary::of(pod) == Some(desired) {
        return Ok(recheck);
    }

    let now = chrono_now();
    let cond = |type_: &str, ok: bool| {
        let mut c = json!({"type": type_, "status": if ok { "True" } else { "False" }, "lastTransitionTime": now});
        if let (false, Some(r)) = (ok, reason) {
            c["reason"] = json!(r);
        }
        c
    };
    let patch = json!({"status": {
        "phase": phase,
        "hostIP": host_ip,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": started.to_string(),
        "conditions": [
            cond("Initialized", true),
            cond("Ready", ready_now),
            cond("ContainersReady", ready_now),
            cond("PodScheduled", true),
        ],
        "containerStatuses": container_statuses,
        "initContainerStatuses": init_statuses,
    }});
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(recheck),
        // The Pod went away while we looked at it.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The init containers' statuses: ordinary ones have run to completion; sidecars
/// (`restartPolicy: Always`) run beside the containers, and have stopped once a Pod that
/// runs to completion is done.
fn init_container_statuses(pod: &Pod, b: &Behaviour, started: &str) -> Vec<Value> {
    let inits = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let done = json!({"terminated": {"exitCode": 0, "reason": "Completed",
        "startedAt": started, "finishedAt": started}});
    inits
        .iter()
        .map(|c| {
            let sidecar = c.restart_policy.as_deref() == Some("Always");
            match b {
                Behaviour::Exit(_) => container_status(c, false, done.clone(), None, 0),
                _ if sidecar => {
                    container_status(c, true, json!({"running": {"startedAt": started}}), None, 0)
                }
                _ => container_status(c, false, done.clone(), None, 0),
            }
        })
        .collect()
}

fn container_status(
    c: &Container,
    ready: bool,
    state: Value,
    last: Option<Value>,
    restarts: i32,
) -> Value {
    let mut s = json!({
        "name": c.name,
        "image": c.image.clone().unwrap_or_default(),
        "imageID": "",
        "ready": ready,
        "started": ready,
        "restartCount": restarts,
        "state": state,
    });
    if let Some(last) = last {
        s["lastState"] = last;
    }
    s
}

fn state_key(status: &Value) -> String {
    let state = &status["state"];
    let kind = ["running", "waiting", "terminated"]
        .into_iter()
        .find(|k| state.get(*k).is_some())
        .unwrap_or("none");
    let reason = state[kind]["reason"].as_str().unwrap_or_default();
    format!(
        "{}:{kind}:{reason}:{}",
        status["name"].as_str().unwrap_or_default(),
        status["ready"]
    )
}

/// The fields whose change warrants a status write; a Pod whose live status already
/// matches gets none, so a resync never becomes a write loop.
#[derive(PartialEq, Debug)]
struct Summary {
    phase: String,
    pod_ip: String,
    ready: bool,
    container_states: Vec<String>,
    init_states: Vec<String>,
}

impl Summary {
    fn of(pod: &Pod) -> Option<Summary> {
        let s = pod.status.as_ref()?;
        let ready = s
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let keys = |statuses: &[ContainerStatus]| {
            statuses
                .iter()
                .map(|cs| {
                    serde_json::to_value(cs)
                        .map(|v| state_key(&v))
                        .unwrap_or_default()
                })
                .collect()
        };
        let container_states = keys(s.container_statuses.as_deref()?);
        let init_states = keys(s.init_container_statuses.as_deref().unwrap_or_default());
        Some(Summary {
            phase: s.phase.clone()?,
            pod_ip: s.pod_ip.clone()?,
            ready,
            container_states,
            init_states,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(image: &str, annotations: &[(&str, &str)]) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }))
        .unwrap()
    }

    #[test]
    fn behaviour_follows_image_and_annotations() {
        assert_eq!(behaviour(&pod("nginx", &[])), Behaviour::Ready);
        assert_eq!(behaviour(&pod("x/crashloop:1", &[])), Behaviour::CrashLoop);
        assert_eq!(
            behaviour(&pod("x/unpullable:1", &[])),
            Behaviour::Unpullable
        );
        assert_eq!(
            behaviour(&pod("nginx", &[(READY_DELAY_ANNOTATION, "3")])),
            Behaviour::ReadyAfter(Duration::from_secs(3))
        );
        assert_eq!(
            behaviour(&pod("code-server:slowready-3", &[])),
            Behaviour::ReadyAfter(Duration::from_secs(3))
        );
        assert_eq!(
            behaviour(&pod("nginx", &[(EXIT_CODE_ANNOTATION, "1")])),
            Behaviour::Exit(1)
        );
        let with_restart = |policy: &str| {
            let mut p = pod("busybox", &[]);
            p.spec.as_mut().unwrap().restart_policy = Some(policy.to_string());
            behaviour(&p)
        };
        assert_eq!(with_restart("Never"), Behaviour::Exit(0));
        assert_eq!(with_restart("OnFailure"), Behaviour::Exit(0));
        assert_eq!(with_restart("Always"), Behaviour::Ready);
    }

    #[test]
    fn ip_pool_never_hands_out_network_or_broadcast() {
        let pool = IpPool(AtomicU32::new(0));
        for _ in 0..600 {
            let ip = pool.next();
            let last: u32 = ip.rsplit('.').next().unwrap().parse().unwrap();
            assert!((1..=254).contains(&last), "{ip}");
            assert!(ip.starts_with("10.128."), "{ip}");
        }
    }
}
