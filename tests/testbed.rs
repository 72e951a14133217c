//! The local cluster itself: these prove that the bed every other cluster test stands on
//! behaves like a Kubernetes cluster with worker nodes.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Node, PersistentVolumeClaim, Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn fake_nodes_are_ready_untainted_and_zoned() {
    let client = support::client().await;
    let nodes: Api<Node> = Api::all(client);
    let list = nodes
        .list(&ListParams::default().labels("testbed.driftless.dev/fake-node=true"))
        .await
        .unwrap();
    let names: BTreeSet<_> = list.items.iter().map(|n| n.name_any()).collect();
    for want in ["node-1", "node-2", "node-3"] {
        assert!(names.contains(want), "missing {want} in {names:?}");
    }
    for n in list
        .items
        .iter()
        .filter(|n| n.name_any().starts_with("node-"))
    {
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten();
        assert!(
            ready
                .clone()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            "{} not Ready",
            n.name_any()
        );
        let taints = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert!(
            taints.is_empty(),
            "{} still tainted: {taints:?}",
            n.name_any()
        );
        assert!(n.labels().contains_key("topology.kubernetes.io/zone"));
        assert_eq!(
            n.labels().get("kubernetes.io/hostname"),
            Some(&n.name_any())
        );
        assert_eq!(
            n.labels().get("kubernetes.io/os").map(String::as_str),
            Some("linux")
        );
        assert_eq!(
            n.labels().get("kubernetes.io/arch").map(String::as_str),
            Some("amd64")
        );
        // A kubelet still sets the beta labels, and older bundles select on them.
        assert_eq!(
            n.labels().get("beta.kubernetes.io/os").map(String::as_str),
            Some("linux")
        );
        assert_eq!(
            n.labels()
                .get("beta.kubernetes.io/arch")
                .map(String::as_str),
            Some("amd64")
        );
    }
}

/// A Job's Pods (restartPolicy Never or OnFailure) run to completion, so the Job does.
#[tokio::test]
async fn a_job_runs_to_completion() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-job").await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client, &ns);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}},
    });
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job).unwrap(),
    )
    .await
    .unwrap();
    support::eventually("Job once complete", WAIT, || async {
        let j = jobs.get("once").await.map_err(|e| e.to_string())?;
        let status = j.status.unwrap_or_default();
        match status.succeeded {
            Some(1) => Ok(()),
            _ => Err(format!("{status:?}")),
        }
    })
    .await;
}

/// Nothing the fake cluster dials leaves the machine: its Service, Node and Pod ranges
/// are routed to nowhere, so an admission webhook behind a Service fails at once with
/// the kernel's refusal, not after a timeout on some network out there.
#[tokio::test]
async fn a_webhooks_service_is_dialled_nowhere() {
    for ip in ["10.96.0.1", "10.127.0.10", "10.128.0.1"] {
        let out = std::process::Command::new("ip")
            .args(["route", "get", ip])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            !text.contains(" via ") && !text.contains(" dev "),
            "{ip} is routed somewhere: {text}"
        );
    }
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-hook").await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let svc = json!({"metadata": {"name": "hook"},
        "spec": {"ports": [{"port": 443, "targetPort": 9443}], "selector": {"app": "hook"}}});
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(svc).unwrap(),
        )
        .await
        .unwrap();
    let hooks: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(client.clone());
    let name = format!("{ns}-deny");
    let hook = json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "deny.bed.driftless.dev",
            "clientConfig": {"service": {"namespace": ns, "name": "hook", "path": "/v"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "objectSelector": {"matchLabels": {"bed": "hook"}},
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 30,
        }],
    });
    hooks
        .create(
            &PostParams::default(),
            &serde_json::from_value(hook).unwrap(),
        )
        .await
        .unwrap();
    // Select by one of the test's own labels (kubernetes.io/metadata.name would do too
    // since 1.22).
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kubernetes.io/metadata.name": ns}}})),
        )
        .await
        .unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = json!({"metadata": {"name": "x", "labels": {"bed": "hook"}}});
    let err = support::eventually("the webhook to be called", WAIT, || async {
        match cms
            .create(
                &PostParams::default(),
                &serde_json::from_value(cm.clone()).unwrap(),
            )
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("failed calling webhook") => Ok(e),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    hooks.delete(&name, &DeleteParams::default()).await.unwrap();
    // The kernel refuses the connect at once (a blackhole route); a dial that went out
    // would wait for an answer and time out.
    assert!(
        err.message.contains("dial tcp 10.96.")
            && err.message.contains("connect: ")
            && !err.message.contains("i/o timeout")
            && !err.message.contains("deadline exceeded"),
        "the apiserver's dial was not refused on this machine: {}",
        err.message
    );
}

#[tokio::test]
async fn ssa_deployment_becomes_available_and_its_endpoints_list_the_pods() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-deploy").await;
    let pp = PatchParams::apply("driftless-test").force();
    let labels = json!({"app": "web"});
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.17.1",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
            },
        },
    });
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    });
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    deployments
        .patch("web", &pp, &Patch::Apply(&deploy))
        .await
        .unwrap();
    services
        .patch("web", &pp, &Patch::Apply(&svc))
        .await
        .unwrap();

    support::eventually("Deployment web Available with 2 replicas", WAIT, || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get("web").await.map_err(|e| e.to_string())?;
            let st = d.status.clone().unwrap_or_default();
            let available = st.conditions.unwrap_or_default().iter().any(|c| {
                c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")
            });
            if available && st.available_replicas == Some(2) {
                Ok(())
            } else {
                Err(format!("{:?}", d.status))
            }
        }
    })
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod_names: BTreeSet<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(pod_names.len(), 2, "{pod_names:?}");

    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &ns);
    support::eventually("Endpoints web to list both Pods", WAIT, || {
        let endpoints = endpoints.clone();
        let pod_names = pod_names.clone();
        async move {
            let ep = endpoints.get_opt("web").await.map_err(|e| e.to_string())?;
            let targets: BTreeSet<String> = ep
                .iter()
                .flat_map(|e| e.subsets.clone().unwrap_or_default())
                .flat_map(|s| s.addresses.unwrap_or_default())
                .filter_map(|a| a.target_ref.and_then(|r| r.name))
                .collect();
            if targets == pod_names {
                Ok(())
            } else {
                Err(format!("{targets:?}"))
            }
        }
    })
    .await;
}

async fn wait_for_container_waiting(pods: &Api<Pod>, name: &str, reason: &str) -> Pod {
    support::eventually(&format!("Pod {name} waiting with {reason}"), WAIT, || {
        let pods = pods.clone();
        let name = name.to_string();
        let reason = reason.to_string();
        async move {
            let p = pods.get(&name).await.map_err(|e| e.to_string())?;
            let waiting = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone());
            if waiting.as_deref() == Some(reason.as_str()) {
                Ok(p)
            } else {
                Err(format!("{:?}", p.status))
            }
        }
    })
    .await
}

fn pod(name: &str, image: &str, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": image}]},
    }))
    .unwrap()
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn simulated_crashloop_is_visible_in_pod_status() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-crash").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(
        &PostParams::default(),
        &pod("crasher", "example.com/crashloop:1", json!({})),
    )
    .await
    .unwrap();
    let p = wait_for_container_waiting(&pods, "crasher", "CrashLoopBackOff").await;
    let st = p.status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Running"));
    let cs = &st.container_statuses.unwrap()[0];
    assert!(!cs.ready);
    assert!(cs.restart_count > 0);
    assert!(
        !st.conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
}

#[tokio::test]
async fn simulated_image_pull_failure_keeps_pod_pending() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-pull").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(
        &PostParams::default(),
        &pod("nopull", "example.com/unpullable:1", json!({})),
    )
    .await
    .unwrap();
    let p = wait_for_container_waiting(&pods, "nopull", "ImagePullBackOff").await;
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
}

#[tokio::test]
async fn readiness_delay_holds_ready_back_then_releases_it() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-delay").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let ann = json!({"testbed.driftless.dev/ready-delay-seconds": "3"});
    pods.create(&PostParams::default(), &pod("slow", "nginx", ann))
        .await
        .unwrap();
    let running = support::eventually("Pod slow Running", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("slow").await.map_err(|e| e.to_string())?;
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() == Some("Running") {
                Ok(p)
            } else {
                Err(format!("{phase:?}"))
            }
        }
    })
    .await;
    let started = running
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .unwrap()
        .0;
    let ready = support::eventually("Pod slow Ready", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("slow").await.map_err(|e| e.to_string())?;
            if is_ready(&p) {
                Ok(p)
            } else {
                Err(format!("{:?}", p.status))
            }
        }
    })
    .await;
    let became_ready = ready
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_transition_time)
        .unwrap()
        .0;
    // lower bound (order, not speed): Ready is only granted once the delay has passed.
    assert!(
        became_ready.duration_since(started).as_secs_f64() >= 2.9,
        "ready at {became_ready}, started {started}"
    );
}

#[tokio::test]
async fn pvc_is_bound_and_its_pod_runs() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-pvc").await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "nfs-csi",
                 "resources": {"requests": {"storage": "8Gi"}}},
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    support::eventually("PVC data Bound", WAIT, || {
        let pvcs = pvcs.clone();
        async move {
            let p = pvcs.get("data").await.map_err(|e| e.to_string())?;
            let phase = p.status.and_then(|s| s.phase);
            if phase.as_deref() == Some("Bound") {
                Ok(())
            } else {
                Err(format!("{phase:?}"))
            }
        }
    })
    .await;
    // The Pod once its claim is bound: one created beside an unbound claim is marked
    // unschedulable, and kube-scheduler 1.34 once missed the binding's event under CI's
    // load and did not try it again within the wait (it retries unschedulable Pods
    // every 5 minutes).
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let with_volume: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ide"},
        "spec": {
            "containers": [{"name": "main", "image": "code-server",
                "volumeMounts": [{"name": "data", "mountPath": "/user_data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &with_volume)
        .await
        .unwrap();
    support::eventually("Pod ide Ready", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("ide").await.map_err(|e| e.to_string())?;
            if is_ready(&p) {
                Ok(())
            } else {
                Err(format!("{:?}", p.status))
            }
        }
    })
    .await;
}

#[tokio::test]
async fn pod_delete_completes_without_a_kubelet() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-delete").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(&PostParams::default(), &pod("gone", "nginx", json!({})))
        .await
        .unwrap();
    support::eventually("Pod gone Ready", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("gone").await.map_err(|e| e.to_string())?;
            if is_ready(&p) {
                Ok(())
            } else {
                Err(format!("{:?}", p.status))
            }
        }
    })
    .await;
    // A default (graceful) delete: only a kubelet, or its stand-in, finishes it.
    pods.delete("gone", &DeleteParams::default()).await.unwrap();
    support::eventually("Pod gone deleted", WAIT, || {
        let pods = pods.clone();
        async move {
            match pods.get_opt("gone").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(p) => Err(format!(
                    "still there, deletionTimestamp {:?}",
                    p.metadata.deletion_timestamp
                )),
            }
        }
    })
    .await;
}

/// Empty strings in a custom resource are strings: a 1.20 apiserver built with a newer Go
/// once refused them as null (kubernetes#99804); the testbed's must never again.
#[tokio::test]
async fn a_custom_resources_empty_strings_stay_strings() {
    let client = support::client().await;
    let ns = support::namespace(&client, "bed-empty").await;
    let group = format!("{ns}.driftless.test");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("probes.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Probe", "plural": "probes", "singular": "probe"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "list": {"type": "array", "items": {"type": "string"}},
                        "str": {"type": "string"}}}}}}}]},
    });
    support::apply_manifest(&client, &crd).await;
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Probe"),
        "probes",
    );
    let probes: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let probe: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Probe",
        "metadata": {"name": "p"}, "spec": {"list": ["a", ""], "str": ""},
    }))
    .unwrap();
    let created = support::eventually("a Probe created", WAIT, || async {
        probes
            .create(&PostParams::default(), &probe)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(created.data["spec"], json!({"list": ["a", ""], "str": ""}));
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client);
    let _ = crds
        .delete(&format!("probes.{group}"), &DeleteParams::default())
        .await;
}
