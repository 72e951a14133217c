//! `examples/kubernetes`' RBAC is enough and no more: the real binary, running with a
//! token of the example ServiceAccount against the local cluster (RBAC authorizer on),
//! syncs every kind, takes its Lease, labels Pods, scales and prunes; writes outside its
//! rules are forbidden. The CI role of `addons/rbac-ci-diff.yaml` can diff, not delete;
//! `addons/rbac-service-accounts.yaml` lets it ask whether a tenant's account may write.

use crate::support;

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use support::{Daemon, WAIT, account_token, driftless, show, token_kubeconfig};

/// The files of examples/kubernetes, in the order `kubectl apply` would need them.
const MANIFESTS: &[&str] = &[
    "namespace.yaml",
    "serviceaccount.yaml",
    "rbac.yaml",
    "specs-configmap.yaml",
    "deployment.yaml",
    "service.yaml",
    "addons/rbac-virtulmachine.yaml",
    "addons/rbac-ci-diff.yaml",
    "addons/rbac-service-accounts.yaml",
];

/// Deletes what this test made cluster-wide (ClusterRoles and their bindings of the same
/// names, the CRD), also when it fails: on drop, from a thread of its own, by name.
struct Cleanup {
    cluster_roles: Vec<String>,
    crd: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let roles = std::mem::take(&mut self.cluster_roles);
        let crd = std::mem::take(&mut self.crd);
        support::cleanup_on_own_thread(move |admin| async move {
            let dp = DeleteParams::default();
            for name in &roles {
                let _ = Api::<ClusterRole>::all(admin.clone())
                    .delete(name, &dp)
                    .await;
                let _ = Api::<ClusterRoleBinding>::all(admin.clone())
                    .delete(name, &dp)
                    .await;
            }
            let _ = Api::<CustomResourceDefinition>::all(admin)
                .delete(&crd, &dp)
                .await;
        });
    }
}

/// Cluster-scoped RBAC names get the test's suffix (and so do references to them), so
/// tests never share a ClusterRole.
fn unique_cluster_names(doc: &mut Value, suffix: &str) {
    if matches!(
        doc["kind"].as_str(),
        Some("ClusterRole" | "ClusterRoleBinding")
    ) && let Some(name) = doc["metadata"]["name"].as_str()
    {
        doc["metadata"]["name"] = json!(format!("{name}-{suffix}"));
    }
    if doc["roleRef"]["kind"] == "ClusterRole"
        && let Some(name) = doc["roleRef"]["name"].as_str()
    {
        doc["roleRef"]["name"] = json!(format!("{name}-{suffix}"));
    }
}

async fn client_for(kubeconfig: &Path) -> Client {
    driftless::cluster::Selection {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        ..Default::default()
    }
    .client()
    .await
    .unwrap()
}

#[track_caller]
fn assert_forbidden<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

fn workloads(ns: &str, app: &str, total_qps: u32, state: &str) -> String {
    format!(
        r#"namespace = "{ns}"

[workspace.ide]
image = "mangohow/code-server-go1.19:v1.0"
cpu = "500m"
memory = "512Mi"
storage = "1Gi"
state = "{state}"

[elasticweb.web]
image = "nginx:1.17.1"
single-pod-qps = 100
total-qps = {total_qps}

[localservice.local]
selector = {{ app = "{app}" }}
ports = [{{ name = "http", port = 80, target-port = 8080 }}]

# The Pods the localservice selects: a Deployment through `manifest`.
[[manifest]]
apiVersion = "apps/v1"
kind = "Deployment"
metadata = {{ name = "backend" }}
spec.replicas = 2
spec.selector.matchLabels = {{ app = "{app}" }}
spec.template.metadata.labels = {{ app = "{app}" }}
spec.template.spec.containers = [{{ name = "c", image = "nginx:1.17.1" }}]
"#
    )
}

#[tokio::test]
async fn the_example_rbac_lets_driftless_sync_every_kind_and_nothing_more() {
    let admin = support::client().await;
    let ns = support::namespace(&admin, "rbac").await;
    let sys = support::namespace(&admin, "rbac-sys").await;
    let suffix = support::suffix(&ns);
    let group = format!("{ns}.driftless.test");
    let apps = format!("{ns}-apps");

    // examples/kubernetes as a user applies it, in this test's own namespace and names.
    let _cleanup = Cleanup {
        cluster_roles: [
            "driftless",
            "driftless-manifest-virtulmachine",
            "driftless-diff",
            "driftless-service-accounts",
        ]
        .iter()
        .map(|n| format!("{n}-{suffix}"))
        .collect(),
        crd: format!("virtulmachines.{group}"),
    };
    for file in MANIFESTS {
        let text = support::read(&support::example("kubernetes").join(file))
            .replace("driftless-system", &sys)
            .replace("infra.sealyun.com", &group);
        for mut doc in support::yaml_docs(&text) {
            unique_cluster_names(&mut doc, &suffix);
            if doc["kind"] == "ClusterRole" {
                let name = doc["metadata"]["name"].as_str().unwrap();
                assert!(_cleanup.cluster_roles.iter().any(|n| n == name), "{name}");
            }
            support::apply_manifest(&admin, &doc).await;
        }
    }
    // The in-cluster Deployment is accepted and comes up (the testbed's kubelet runs it).
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &sys);
    support::eventually("the driftless Deployment available", WAIT, || async {
        let d = deployments
            .get("driftless")
            .await
            .map_err(|e| e.to_string())?;
        match d.status.and_then(|s| s.available_replicas) {
            Some(2) => Ok(()),
            other => Err(format!("available: {other:?}")),
        }
    })
    .await;

    let dir = tempfile::tempdir().unwrap();
    let sa_kubeconfig = dir.path().join("driftless.kubeconfig");
    token_kubeconfig(
        &account_token(&admin, &sys, "driftless", None).await,
        &sa_kubeconfig,
    );
    let diff_kubeconfig = dir.path().join("diff.kubeconfig");
    token_kubeconfig(
        &account_token(&admin, &sys, "driftless-diff", Some("driftless-diff-token")).await,
        &diff_kubeconfig,
    );
    let sa = client_for(&sa_kubeconfig).await;

    // Every kind: workspace, elasticweb, localservice (+ a manifest Deployment) in a
    // namespace that does not exist yet (driftless creates it), and the VirtulMachine CRD
    // and resources of examples/virtual-machine.
    let specs = dir.path().join("specs");
    let app = format!("backend-{suffix}");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(
        specs.join("workloads.toml"),
        workloads(&apps, &app, 200, "running"),
    )
    .unwrap();
    support::copy_tree(
        &support::example("virtual-machine"),
        &specs.join("vm"),
        &[
            ("infra.sealyun.com", &group),
            ("namespace = \"default\"", &format!("namespace = \"{ns}\"")),
        ],
    );
    // An object written as an account (Flux's serviceAccountName): driftless may ask
    // whether that account may write it (addons/rbac-service-accounts.yaml).
    std::fs::write(
        specs.join("as-account.yaml"),
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: as-account\n  namespace: {ns}\n  annotations:\n    driftless.dev/service-account: {sys}/driftless\nspec:\n  ports:\n    - port: 80\n"
        ),
    )
    .unwrap();
    let sa_path = sa_kubeconfig.to_str().unwrap();
    let specs_path = specs.to_str().unwrap();
    let engine_flags = ["--inventory-namespace", &sys];

    // One-shot apply as the ServiceAccount: everything applied and ready.
    let mut args = vec![
        "--kubeconfig",
        sa_path,
        "--instance",
        &ns,
        "apply",
        specs_path,
    ];
    args.extend(engine_flags);
    args.extend(["--wait", "--timeout", "2m"]);
    let out = driftless(&args);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for id in [
        format!("workspace/{apps}/ide"),
        format!("elasticweb/{apps}/web"),
        format!("localservice/{apps}/local"),
        format!("manifest/{ns}/VirtulMachine.{group}/vm-sample"),
        format!("manifest//CustomResourceDefinition.apiextensions.k8s.io/virtulmachines.{group}"),
        format!("manifest/{ns}/Service/as-account"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&id) && l.contains(" ready")),
            "{id} not ready:\n{}",
            show(&out)
        );
    }
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    assert_eq!(
        namespaces.get(&apps).await.unwrap().labels()["driftless.dev/instance"],
        ns,
        "the namespace was not created by driftless"
    );

    // The CI identity: diff works and finds nothing to do...
    let diff_path = diff_kubeconfig.to_str().unwrap();
    let mut args = vec![
        "--kubeconfig",
        diff_path,
        "--instance",
        &ns,
        "diff",
        specs_path,
    ];
    args.extend(engine_flags);
    let out = driftless(&args);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // ...shows a new object (without `create`, from the rendered object)...
    std::fs::write(
        specs.join("new.toml"),
        format!("namespace = \"{apps}\"\n[elasticweb.fresh]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 1\ntotal-qps = 1\n"),
    )
    .unwrap();
    let out = driftless(&args);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("+++ desired/Deployment.apps/{apps}/fresh")),
        "{}",
        show(&out)
    );
    std::fs::remove_file(specs.join("new.toml")).unwrap();
    // ...and it cannot delete or create anything.
    let ci = client_for(&diff_kubeconfig).await;
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    assert_forbidden(
        "the CI identity deleting a Deployment",
        Api::<Deployment>::namespaced(ci.clone(), &apps)
            .delete("web", &dry_delete)
            .await,
    );
    assert_forbidden(
        "the CI identity creating a namespace",
        Api::<Namespace>::all(ci.clone())
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &serde_json::from_value(json!({"metadata": {"name": format!("{ns}-ci")}})).unwrap(),
            )
            .await,
    );

    // The daemon as the ServiceAccount, with leader election: it takes its Lease, watches,
    // labels Pods, and follows edits (a scale, a stopped workspace whose Pod is pruned).
    let mut args = vec![
        "--dir",
        specs_path,
        "--leader-elect",
        "--lease-namespace",
        &sys,
        "--lease-name",
        "driftless",
        "--resync",
        "1h",
        "--events",
    ];
    args.extend(engine_flags);
    let mut daemon = Daemon::start(&sa_kubeconfig, &ns, &args);
    daemon
        .wait_status("leader, synced, every spec ready", |s| {
            s["leader"] == true && s["revision_applied"].is_string() && support::all_ready(s)
        })
        .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &apps);
    support::eventually("backend Pods labelled with their node", WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .map_err(|e| e.to_string())?;
        let unlabelled: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                node.is_none() || p.labels().get("localservice.driftless.dev/node") != node.as_ref()
            })
            .map(|p| p.name_any())
            .collect();
        if list.items.len() == 2 && unlabelled.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} pods, unlabelled {unlabelled:?}",
                list.items.len()
            ))
        }
    })
    .await;
    // Endpoints are watched: the per-node Services' ready endpoints reach the status.
    daemon
        .wait_status("2 ready endpoints for the localservice", |s| {
            support::spec_or_null(s, &format!("localservice/{apps}/local"))["figures"]["ready_endpoints"]
                .as_object()
                .is_some_and(|m| m.values().filter_map(Value::as_u64).sum::<u64>() == 2)
        })
        .await;

    std::fs::write(
        specs.join("workloads.toml"),
        workloads(&apps, &app, 300, "stopped"),
    )
    .unwrap();
    let web: Api<Deployment> = Api::namespaced(admin.clone(), &apps);
    support::eventually("web scaled to 3", WAIT, || async {
        let d = web.get("web").await.map_err(|e| e.to_string())?;
        match d.spec.replicas {
            Some(3) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    support::eventually("the stopped workspace's Pod pruned", WAIT, || async {
        match pods.get_opt("ide").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), &apps);
    assert!(pvcs.get_opt("ide").await.unwrap().is_some(), "the PVC went");
    daemon
        .wait_status("every spec ready after the edit", support::all_ready)
        .await;

    let lease = Api::<Lease>::namespaced(admin.clone(), &sys)
        .get("driftless")
        .await
        .unwrap();
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty()),
        "the Lease has no holder"
    );
    assert_eq!(daemon.stop(), Some(0), "{}", daemon.log());
    let log = daemon.log();
    // --events works with the granted rules: the daemon's events are there.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(admin.clone(), &apps);
    support::eventually("events recorded by the daemon's identity", WAIT, || async {
        let list = events
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let ours = list
            .items
            .iter()
            .filter(|e| {
                e.reporting_controller.as_deref() == Some("driftless")
                    && e.reason.as_deref() == Some("Applied")
            })
            .count();
        if ours > 0 {
            Ok(())
        } else {
            Err(format!(
                "{} events, none Applied by driftless; daemon log:\n{log}",
                list.items.len()
            ))
        }
    })
    .await;
    for needle in ["forbidden", "Forbidden", " 403"] {
        assert!(
            !log.contains(needle),
            "the daemon hit a permission it lacks:\n{log}"
        );
    }

    // Outside its rules, the ServiceAccount can do nothing (dry-run: were RBAC wrong, the
    // shared cluster would still not be touched).
    let dry_post = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    assert_forbidden(
        "reading Secrets",
        Api::<Secret>::namespaced(sa.clone(), &ns)
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "creating a Secret",
        Api::<Secret>::namespaced(sa.clone(), &ns)
            .create(
                &dry_post,
                &serde_json::from_value(json!({"metadata": {"name": "s"}})).unwrap(),
            )
            .await,
    );
    assert_forbidden(
        "creating a ClusterRole",
        Api::<ClusterRole>::all(sa.clone())
            .create(
                &dry_post,
                &serde_json::from_value(
                    json!({"metadata": {"name": format!("escalate-{suffix}")}, "rules": []}),
                )
                .unwrap(),
            )
            .await,
    );
    assert_forbidden(
        "deleting a Node",
        Api::<Node>::all(sa.clone())
            .delete("node-1", &dry_delete)
            .await,
    );
    assert_forbidden(
        "deleting a Namespace",
        Api::<Namespace>::all(sa.clone())
            .delete(&ns, &dry_delete)
            .await,
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "b"}});
    assert_forbidden(
        "writing a ConfigMap outside the inventory namespace",
        Api::<ConfigMap>::namespaced(sa.clone(), &ns)
            .patch(
                "settings",
                &PatchParams::apply("driftless").dry_run(),
                &Patch::Apply(&cm),
            )
            .await,
    );
    assert_forbidden(
        "renewing another Lease",
        Api::<Lease>::namespaced(sa.clone(), &sys)
            .patch(
                "someone-else",
                &PatchParams::apply("driftless").dry_run(),
                &Patch::Apply(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"})),
            )
            .await,
    );
    let other_crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")}});
    assert_forbidden(
        "writing a CRD the add-on does not name",
        Api::<CustomResourceDefinition>::all(sa.clone())
            .patch(
                &format!("gadgets.{group}"),
                &PatchParams::apply("driftless").dry_run(),
                &Patch::Apply(&other_crd),
            )
            .await,
    );

    // A manifest of a kind with no grant: driftless cannot list what it owns of that kind,
    // so that kind's objects are skipped and reported, the way operator-rs skips kinds it
    // may not list.
    let extra = dir.path().join("extra");
    std::fs::create_dir(&extra).unwrap();
    std::fs::write(
        extra.join("cm.toml"),
        format!(
            "namespace = \"{ns}\"\n[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"settings\" }}\ndata = {{ a = \"b\" }}\n\n[elasticweb.granted]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 1\ntotal-qps = 1\n"
        ),
    )
    .unwrap();
    let other_instance = format!("{ns}-cm");
    let mut args = vec![
        "--kubeconfig",
        sa_path,
        "--instance",
        &other_instance,
        "apply",
        extra.to_str().unwrap(),
    ];
    args.extend(engine_flags);
    let out = driftless(&args);
    // That object fails alone, saying which grant is missing; the rest of the revision
    // applies (apply exits 1 for the failed object).
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("failed ConfigMap") && stdout.contains("may not list configmaps"),
        "{}",
        show(&out)
    );
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), &ns)
            .get_opt("granted")
            .await
            .unwrap()
            .is_some(),
        "the granted part of the revision was not applied"
    );
    assert!(
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), &ns)
            .get_opt("settings")
            .await
            .unwrap()
            .is_none(),
        "an object of an ungranted kind was written"
    );

    // Pruning everything (allowed explicitly) deletes with the same rules: the custom
    // resources, their CRD, the workloads.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let mut args = vec![
        "--kubeconfig",
        sa_path,
        "--instance",
        &ns,
        "apply",
        empty.to_str().unwrap(),
        "--allow-mass-prune",
    ];
    args.extend(engine_flags);
    let out = driftless(&args);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    support::eventually("the CRD pruned", WAIT, || async {
        match crds
            .get_opt(&format!("virtulmachines.{group}"))
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
    assert!(web.get_opt("web").await.unwrap().is_none());
}
