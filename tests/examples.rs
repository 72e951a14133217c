//! The examples under `examples/` do what their READMEs say: every tree validates, the
//! workload examples apply to the local cluster and become ready (each test in its own
//! namespace: the tree is copied and its namespace rewritten), their workflows (start/stop
//! a workspace, scale by total-qps, prune) work, the in-cluster manifests are consistent,
//! and the CI job's steps run with bash against the cluster.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Node, PersistentVolumeClaim, Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use support::{Daemon, WAIT, assert_exit, driftless, example, show};

/// `driftless apply <dir> --wait` as `instance` with the admin kubeconfig.
fn apply(instance: &str, dir: &Path, extra: &[&str]) -> Output {
    let kubeconfig = support::admin_kubeconfig();
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--instance",
        instance,
        "apply",
        dir.to_str().unwrap(),
        "--wait",
        "--timeout",
        "2m",
    ];
    args.extend(extra);
    driftless(&args)
}

fn diff(instance: &str, dir: &Path) -> Output {
    let kubeconfig = support::admin_kubeconfig();
    driftless(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--instance",
        instance,
        "diff",
        dir.to_str().unwrap(),
    ])
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The changed lines of a unified diff (no headers).
fn changed_lines(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect()
}

fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.replicas
}

// ---------------------------------------------------------------------------------------
// Offline: validate, and the manifests' consistency.

fn spec_count(out: &Output) -> usize {
    stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix("valid: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `valid: N specs` line:\n{}", show(out)))
}

#[test]
fn every_example_tree_validates() {
    let expected = [
        ("cloud-ide", 4),
        ("elastic-web", 3),
        ("local-service", 3),
        ("operator-bundle", 11),
        ("tree-settings", 4),
        ("virtual-machine", 3),
    ];
    // Every directory of examples/ with spec files is in this list.
    let with_specs: BTreeSet<String> = std::fs::read_dir(example(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| has_toml(p))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        with_specs,
        expected.iter().map(|(d, _)| d.to_string()).collect(),
        "an example tree without a test"
    );
    for (dir, specs) in expected {
        let out = driftless(&["validate", example(dir).to_str().unwrap()]);
        assert_exit(&out, 0);
        assert_eq!(spec_count(&out), specs, "{dir}: {}", show(&out));
    }

    // The spec tree inside the in-cluster example's ConfigMap.
    let docs = support::yaml_docs(&support::read(&example("kubernetes/specs-configmap.yaml")));
    let data = docs[0]["data"].as_object().expect("ConfigMap data");
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in data {
        assert!(file.ends_with(".toml"), "{file}");
        std::fs::write(dir.path().join(file), text.as_str().unwrap()).unwrap();
    }
    let out = driftless(&["validate", dir.path().to_str().unwrap()]);
    assert_exit(&out, 0);
    assert!(spec_count(&out) >= 1);

    // And validate does catch what a PR could break, with the position.
    let broken = tempfile::tempdir().unwrap();
    support::copy_tree(
        &example("elastic-web"),
        broken.path(),
        &[("single-pod-qps = 800", "single-pod-qps = 0")],
    );
    let out = driftless(&["validate", broken.path().to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("apps.toml:11:18:")
            || stdout(&out).contains("apps.toml:11:18:"),
        "{}",
        show(&out)
    );
}

fn has_toml(dir: &Path) -> bool {
    dir.is_dir()
        && std::fs::read_dir(dir).unwrap().any(|e| {
            let p = e.unwrap().path();
            has_toml(&p) || p.extension().is_some_and(|x| x == "toml")
        })
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

#[test]
fn the_in_cluster_manifests_are_consistent() {
    let mut files = Vec::new();
    yaml_files(&example("kubernetes"), &mut files);
    files.sort();
    let mut docs: Vec<Value> = Vec::new();
    for f in &files {
        for d in support::yaml_docs(&support::read(f)) {
            assert!(
                d["apiVersion"].is_string()
                    && d["kind"].is_string()
                    && d["metadata"]["name"].is_string(),
                "{}: {d}",
                f.display()
            );
            docs.push(d);
        }
    }
    let find = |kind: &str, name: &str| -> &Value {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    // Namespaced objects all live in driftless-system.
    for d in &docs {
        let cluster_scoped = matches!(
            d["kind"].as_str(),
            Some("Namespace" | "ClusterRole" | "ClusterRoleBinding")
        );
        assert_eq!(
            d["metadata"]["namespace"].as_str(),
            (!cluster_scoped).then_some("driftless-system"),
            "{d}"
        );
    }

    let deployment = find("Deployment", "driftless");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "driftless");
    find("ServiceAccount", "driftless");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "ghcr.io/example/driftless:0.1.0");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "run");
    for a in [
        "--leader-elect",
        "--metrics-addr=0.0.0.0:9477",
        "--lease-name=driftless",
    ] {
        assert!(args.contains(&a), "{a} missing from {args:?}");
    }
    // The arguments are the binary's: `driftless <args> --help` parses every one of them
    // (an unknown flag or a bad value fails before `--help` is reached) and shows `run`'s
    // help.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args.iter().copied().chain(["--help"]))
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(help.contains("--leader-elect"), "not run's help:\n{help}");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "POD_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "{env:?}"
    );
    // Everything the daemon writes is on a writable volume.
    let mounts = c["volumeMounts"].as_array().unwrap();
    let writable: Vec<&str> = mounts
        .iter()
        .filter(|m| m["readOnly"] != true)
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    for a in args.iter().filter_map(|a| {
        a.strip_prefix("--status-file=")
            .or(a.strip_prefix("--cache-dir="))
    }) {
        assert!(
            writable.iter().any(|m| a.starts_with(m)),
            "{a} not on a writable mount {writable:?}"
        );
    }
    let specs_dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--dir="))
        .expect("--dir");
    let specs_mount = mounts
        .iter()
        .find(|m| m["mountPath"] == specs_dir)
        .expect("the spec directory is mounted");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == specs_mount["name"])
        .unwrap();
    find(
        "ConfigMap",
        volume["configMap"]["name"]
            .as_str()
            .expect("a ConfigMap volume"),
    );

    // The Lease the Deployment uses is the one the Role lets it renew.
    let role = find("Role", "driftless");
    assert!(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"][0] == "leases" && r["resourceNames"][0] == "driftless"),
        "{role}"
    );

    // The metrics Service reaches the container's port.
    let svc = find("Service", "driftless-metrics");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v);
    }
    assert_eq!(svc["spec"]["ports"][0]["port"], 9477);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], c["ports"][0]["name"]);
}

// ---------------------------------------------------------------------------------------
// Against the local cluster.

#[tokio::test]
async fn cloud_ide_workspaces_apply_and_start_and_stop() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ex-ide").await;
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(
        &example("cloud-ide"),
        dir.path(),
        &[("\"cloud-ide\"", &format!("\"{ns}\""))],
    );
    let out = apply(&ns, dir.path(), &[]);
    assert_exit(&out, 0);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    for running in ["alice-go", "carol-rust", "carol-scratch"] {
        assert!(pods.get_opt(running).await.unwrap().is_some(), "{running}");
    }
    assert!(pods.get_opt("bob-py").await.unwrap().is_none());
    for keeps in ["alice-go", "bob-py", "carol-rust"] {
        assert!(pvcs.get_opt(keeps).await.unwrap().is_some(), "PVC {keeps}");
        assert!(
            services.get_opt(keeps).await.unwrap().is_some(),
            "Service {keeps}"
        );
    }
    assert!(pvcs.get_opt("carol-scratch").await.unwrap().is_none());

    // The README's workflow: Alice stops, Bob starts.
    let alice = dir.path().join("workspaces/alice.toml");
    let bob = dir.path().join("workspaces/bob.toml");
    support::edit(&alice, "state = \"running\"", "state = \"stopped\"");
    support::edit(&bob, "state = \"stopped\"", "state = \"running\"");
    let out = diff(&ns, dir.path());
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("Pod/{ns}/alice-go")) && text.contains(&format!("Pod/{ns}/bob-py")),
        "{}",
        show(&out)
    );
    let out = apply(&ns, dir.path(), &[]);
    assert_exit(&out, 0);
    support::eventually("alice's Pod gone", WAIT, || async {
        match pods.get_opt("alice-go").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
    // Her files and address stay; Bob's Pod mounts his old PVC.
    assert!(pvcs.get_opt("alice-go").await.unwrap().is_some());
    assert!(services.get_opt("alice-go").await.unwrap().is_some());
    let bob_pod = pods.get("bob-py").await.unwrap();
    let claims: Vec<String> = bob_pod
        .spec
        .unwrap()
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.persistent_volume_claim.map(|c| c.claim_name))
        .collect();
    assert_eq!(claims, ["bob-py"]);
}

#[tokio::test]
async fn elastic_web_scales_by_editing_total_qps() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ex-web").await;
    // NodePorts are cluster-wide: one this test is unlikely to share.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let node_port = 31000 + (nanos / 1000 + std::process::id()) % 1500;
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(
        &example("elastic-web"),
        dir.path(),
        &[
            ("\"shop\"", &format!("\"{ns}\"")),
            ("port = 30080", &format!("port = {node_port}")),
        ],
    );
    let out = apply(&ns, dir.path(), &[]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    for (name, want) in [("storefront", 3), ("checkout", 2), ("reports", 0)] {
        let d = deployments.get(name).await.unwrap();
        assert_eq!(replicas(&d), Some(want), "{name}");
    }
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let storefront = services.get("storefront").await.unwrap().spec.unwrap();
    assert_eq!(storefront.type_.as_deref(), Some("NodePort"));
    assert_eq!(
        storefront.ports.unwrap()[0].node_port,
        Some(node_port as i32)
    );
    assert_eq!(
        services
            .get("checkout")
            .await
            .unwrap()
            .spec
            .unwrap()
            .type_
            .as_deref(),
        Some("ClusterIP")
    );

    // The README's workflow: the sale. The PR's diff shows exactly the replica change.
    support::edit(
        &dir.path().join("apps.toml"),
        "total-qps = 2400",
        "total-qps = 8000",
    );
    let out = diff(&ns, dir.path());
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("--- live/Deployment.apps/{ns}/storefront")),
        "{text}"
    );
    assert_eq!(
        changed_lines(&text),
        ["-  replicas: 3", "+  replicas: 10"],
        "{text}"
    );
    let out = apply(&ns, dir.path(), &[]);
    assert_exit(&out, 0);
    let d = deployments.get("storefront").await.unwrap();
    assert_eq!(replicas(&d), Some(10));
    assert_eq!(d.status.and_then(|s| s.available_replicas), Some(10));
    // Applied: nothing left to show.
    assert_exit(&diff(&ns, dir.path()), 0);
}

#[tokio::test]
async fn local_service_reaches_only_pods_on_its_node() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ex-local").await;
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(
        &example("local-service"),
        dir.path(),
        &[("\"edge\"", &format!("\"{ns}\""))],
    );
    let mut daemon = Daemon::start(
        &support::admin_kubeconfig(),
        &ns,
        &["--dir", dir.path().to_str().unwrap(), "--resync", "1h"],
    );
    daemon
        .wait_status("every spec ready", support::all_ready)
        .await;

    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &ns);
    // Each per-node Service reaches only Pods on its node, and between them the three
    // cache Pods are all reachable.
    support::eventually("each node's Service with its node's Pods", WAIT, || async {
        let mut reached = 0;
        for svc in services
            .list(&ListParams::default().labels("app.kubernetes.io/instance=edge-cache"))
            .await
            .map_err(|e| e.to_string())?
            .items
        {
            let node = svc.annotations()["localservice.driftless.dev/node-name"].clone();
            let Some(ep) = endpoints
                .get_opt(&svc.name_any())
                .await
                .map_err(|e| e.to_string())?
            else {
                continue;
            };
            for a in ep
                .subsets
                .unwrap_or_default()
                .into_iter()
                .flat_map(|s| s.addresses.unwrap_or_default())
            {
                assert_eq!(
                    a.node_name.as_deref(),
                    Some(node.as_str()),
                    "Service {} reaches a Pod on another node",
                    svc.name_any()
                );
                reached += 1;
            }
        }
        if reached == 3 {
            Ok(())
        } else {
            Err(format!("{reached} of 3 cache Pods reachable"))
        }
    })
    .await;
    for node in ["node-1", "node-2", "node-3"] {
        assert!(
            services
                .get_opt(&format!("edge-cache-{node}"))
                .await
                .unwrap()
                .is_some(),
            "no Service for {node}"
        );
    }
    // The zone-a variant covers exactly the zone-a nodes.
    let zone_a: BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels("topology.kubernetes.io/zone=a"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    let covered: BTreeSet<String> = services
        .list(&ListParams::default().labels("app.kubernetes.io/instance=edge-cache-zone-a"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| s.annotations()["localservice.driftless.dev/node-name"].clone())
        .collect();
    assert!(!zone_a.is_empty());
    assert_eq!(covered, zone_a);
    assert_eq!(daemon.stop(), Some(0), "{}", daemon.log());
}

#[tokio::test]
async fn virtual_machine_crd_and_resources_apply_and_prune() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ex-vm").await;
    // CRDs are cluster-wide: this test's own group.
    let group = format!("{ns}.driftless.test");
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(
        &example("virtual-machine"),
        dir.path(),
        &[
            ("infra.sealyun.com", &group),
            ("namespace = \"default\"", &format!("namespace = \"{ns}\"")),
        ],
    );
    let out = apply(&ns, dir.path(), &[]);
    assert_exit(&out, 0);
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "VirtulMachine"),
        "virtulmachines",
    );
    let vms: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let names: BTreeSet<String> = vms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|v| v.name_any())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["build-runner".to_string(), "vm-sample".to_string()])
    );
    let vm = vms.get("build-runner").await.unwrap();
    assert_eq!(vm.data["spec"]["cpu"], "4");

    // Removing the whole tree would prune everything: refused unless explicitly allowed;
    // then the resources go, and their CRD.
    let empty = tempfile::tempdir().unwrap();
    let out = apply(&ns, empty.path(), &[]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("prune refused"), "{}", show(&out));
    assert!(vms.get_opt("vm-sample").await.unwrap().is_some());
    let out = apply(&ns, empty.path(), &["--allow-mass-prune"]);
    assert_exit(&out, 0);
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
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
}

// ---------------------------------------------------------------------------------------
// The CI job.

/// The `run` script of the step named `name` in the workflow's job `job`.
/// examples/tree-settings as its README runs it, with production's values: the vendored
/// objects land in the `[[namespace]]` rule's namespace, `--vars-file` wins over the
/// tree's `[vars]`, and the script ConfigMap keeps its own `${HOSTNAME}`.
#[tokio::test]
async fn tree_settings_apply_with_a_clusters_values() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ex-settings").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    support::copy_tree(
        &example("tree-settings"),
        root,
        &[("namespace = \"podinfo\"", &format!("namespace = \"{ns}\""))],
    );
    let vars = root.join("clusters/prod.toml");
    let out = apply(&ns, root, &["--vars-file", vars.to_str().unwrap()]);
    assert_exit(&out, 0);
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = cms
        .get("podinfo-settings")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    assert_eq!(data["cluster"], "prod");
    let script = cms
        .get("podinfo-scripts")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    assert!(script["probe.sh"].contains("${HOSTNAME}"), "{script:?}");
    let web: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let d = web.get("podinfo").await.unwrap();
    let container = &d.spec.template.spec.unwrap().containers[0];
    assert_eq!(
        container.args.as_deref(),
        Some(&["--level=info".to_string()][..])
    );
    // Without production's values it is staging's tree: a difference.
    assert_exit(&diff(&ns, root), 1);
    let kubeconfig = support::admin_kubeconfig();
    let in_sync = driftless(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--instance",
        &ns,
        "diff",
        root.to_str().unwrap(),
        "--vars-file",
        vars.to_str().unwrap(),
    ]);
    assert_exit(&in_sync, 0);
}

fn step_script<'a>(workflow: &'a Value, job: &str, name: &str) -> &'a str {
    workflow["jobs"][job]["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .and_then(|s| {
            assert_eq!(s["shell"], "bash", "step {name}");
            s["run"].as_str()
        })
        .unwrap_or_else(|| panic!("no step {name:?} with a run script in job {job}"))
}

/// Runs a CI script as GitHub's `shell: bash` does, in `repo`, with the binary on PATH.
fn run_script(script: &str, repo: &Path, env: &[(&str, &str)]) -> Output {
    let file = repo.join(".ci-step.sh");
    std::fs::write(&file, script).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_driftless")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&file)
        .current_dir(repo)
        .env_clear()
        .env("PATH", path)
        .env("HOME", repo)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    out
}

/// A directory holding `name` as an executable script standing in for a CLI the CI jobs
/// call (`gh`, `curl`), and the PATH that finds it first, then the driftless binary. The
/// stub appends its arguments to `$STUB_LOG` and the file it would post to
/// `$STUB_LOG.body`.
fn stub(name: &str, script: &str) -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(
        &file,
        format!("#!/bin/bash\nprintf '%s\\n' \"$*\" >> \"$STUB_LOG\"\n{script}"),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_driftless")).parent().unwrap();
    let path = format!(
        "{}:{}:{}",
        dir.path().display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (dir, path)
}

#[tokio::test]
async fn the_ci_job_validates_and_diffs_a_pull_request() {
    let workflow: Value =
        serde_saphyr::from_str(&support::read(&example("ci/github-workflow.yml"))).unwrap();
    assert!(
        workflow["on"]["pull_request"].is_object(),
        "not triggered by pull requests: {:#}",
        workflow["on"]
    );
    let validate = step_script(&workflow, "validate", "Validate specs");
    let diff_step = step_script(&workflow, "diff", "Diff against the cluster");
    let comment_step = step_script(&workflow, "diff", "Comment on the pull request");
    assert!(validate.contains("driftless validate specs/"), "{validate}");
    assert!(
        diff_step.contains("diff specs/ --output markdown"),
        "{diff_step}"
    );
    assert_eq!(
        workflow["jobs"]["diff"]["permissions"]["pull-requests"], "write",
        "the diff job cannot comment"
    );
    // Untrusted PR data never reaches a script through an expression.
    for job in workflow["jobs"].as_object().unwrap().values() {
        for step in job["steps"].as_array().unwrap() {
            assert!(
                !step["run"].as_str().unwrap_or_default().contains("${{"),
                "{step}"
            );
        }
    }
    assert!(
        workflow["env"]["DRIFTLESS_INSTANCE"].is_string(),
        "diff must use the daemon's instance"
    );

    // A config repository with the elastic-web example as specs/, on a cluster where it
    // is not applied yet.
    let client = support::client().await;
    let ns = support::namespace(&client, "ex-ci").await;
    let repo = tempfile::tempdir().unwrap();
    let specs = repo.path().join("specs");
    support::copy_tree(
        &example("elastic-web"),
        &specs,
        &[
            ("\"shop\"", &format!("\"{ns}\"")),
            ("port = 30080", "# port = 30080"),
        ],
    );
    let runner_temp = tempfile::tempdir().unwrap();
    let summary = runner_temp.path().join("summary.md");
    let admin_kubeconfig = support::read(&support::admin_kubeconfig());
    let env = |kubeconfig: &str| -> Vec<(String, String)> {
        vec![
            (
                "RUNNER_TEMP".into(),
                runner_temp.path().to_string_lossy().into_owned(),
            ),
            (
                "GITHUB_STEP_SUMMARY".into(),
                summary.to_string_lossy().into_owned(),
            ),
            ("DRIFTLESS_INSTANCE".into(), ns.clone()),
            ("KUBECONFIG_CONTENT".into(), kubeconfig.to_string()),
        ]
    };
    let run = |script: &str, env: &[(String, String)]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_script(script, repo.path(), &env)
    };
    let good = env(&admin_kubeconfig);

    // Validate: passes; a broken file fails the step with an annotation at its position.
    assert_exit(&run(validate, &good), 0);
    std::fs::write(
        specs.join("bad.toml"),
        "[elasticweb.x]\nimage = \"nginx\"\nsingle-pod-qps = 0\ntotal-qps = 1\n",
    )
    .unwrap();
    let out = run(validate, &good);
    assert_exit(&out, 2);
    assert!(
        stdout(&out).contains("::error file=specs/bad.toml,line=3,col=18::"),
        "{}",
        show(&out)
    );
    std::fs::remove_file(specs.join("bad.toml")).unwrap();

    // Diff with changes (exit 1): the step passes and the markdown is in the job summary.
    let out = run(diff_step, &good);
    assert_exit(&out, 0);
    let text = support::read(&summary);
    assert!(
        text.contains("### driftless diff")
            && text.contains("| create | 6 |")
            && text.contains(&format!(
                "<b>create</b> <code>Deployment.apps {ns}/storefront</code>"
            ))
            && text.contains(&format!("+++ desired/Deployment.apps/{ns}/storefront")),
        "{text}"
    );
    assert!(
        !runner_temp.path().join("kubeconfig").exists(),
        "the kubeconfig was left on the runner"
    );

    // The comment step posts that markdown: a new comment, or an update of its own
    // earlier one. `gh` is a stub that records what it is asked and answers the search
    // for an earlier comment with $STUB_COMMENT_ID.
    let markdown = support::read(&runner_temp.path().join("diff.md"));
    let (_gh, gh_path) = stub(
        "gh",
        r#"prev=""
for a in "$@"; do
  case "$a" in body=@*) cat "${a#body=@}" > "$STUB_LOG.body" ;; esac
  if [ "$prev" = "--body-file" ]; then cat "$a" > "$STUB_LOG.body"; fi
  prev="$a"
done
if [ "$1" = api ] && [ "$2" != --method ]; then printf '%s' "${STUB_COMMENT_ID:-}"; fi
"#,
    );
    let gh_log = runner_temp.path().join("gh.log");
    let comment = |existing: &str| {
        let _ = std::fs::remove_file(&gh_log);
        let mut env = good.clone();
        env.extend(
            [
                ("PATH", gh_path.as_str()),
                ("STUB_LOG", &gh_log.to_string_lossy()),
                ("STUB_COMMENT_ID", existing),
                ("GH_TOKEN", "token"),
                ("PR_NUMBER", "12"),
                ("GITHUB_REPOSITORY", "acme/config"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let out = run(comment_step, &env);
        assert_exit(&out, 0);
        let calls = support::read(&gh_log);
        let body = support::read(&gh_log.with_extension("log.body"));
        (out, calls, body)
    };
    let (_, calls, body) = comment("");
    assert!(
        calls.starts_with("api repos/acme/config/issues/12/comments --paginate --jq ")
            && calls.ends_with(&format!(
                "\npr comment 12 --repo acme/config --body-file {}/diff.md\n",
                runner_temp.path().display()
            )),
        "{calls}"
    );
    assert_eq!(body, markdown);
    let (out, calls, body) = comment("42");
    assert!(
        calls.ends_with(&format!(
            "\napi --method PATCH repos/acme/config/issues/comments/42 -F body=@{}/diff.md\n",
            runner_temp.path().display()
        )),
        "{calls}"
    );
    assert_eq!(body, markdown);
    assert!(
        stdout(&out).contains("updated comment 42"),
        "{}",
        show(&out)
    );

    // The same with the GitLab job's script.
    let gitlab: Value =
        serde_saphyr::from_str(&support::read(&example("ci/gitlab-ci.yml"))).unwrap();
    let gl_validate = gitlab["driftless-validate"]["script"][0].as_str().unwrap();
    assert_eq!(gl_validate, "driftless validate specs/");
    let gl_diff = gitlab["driftless-diff"]["script"][0].as_str().unwrap();
    assert!(gl_diff.contains("diff specs/"), "{gl_diff}");
    let kubeconfig_path = support::admin_kubeconfig();
    let gl_env = [
        ("DRIFTLESS_KUBECONFIG", kubeconfig_path.to_str().unwrap()),
        ("DRIFTLESS_INSTANCE", ns.as_str()),
    ];
    assert!(
        gl_diff.contains("diff specs/ --output markdown"),
        "{gl_diff}"
    );
    let out = run_script(gl_diff, repo.path(), &gl_env);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("changes the cluster"),
        "{}",
        show(&out)
    );
    let gl_markdown = support::read(&repo.path().join("diff.md"));
    assert!(
        gl_markdown.contains("### driftless diff") && gl_markdown.contains("storefront"),
        "no diff artifact"
    );
    // The note: posted through the API with the token variable (`curl` is a stub), or
    // skipped with a hint when there is none.
    let gl_note = gitlab["driftless-diff"]["script"][1].as_str().unwrap();
    let (_curl, curl_path) = stub(
        "curl",
        r#"for a in "$@"; do case "$a" in body@*) cat "${a#body@}" > "$STUB_LOG.body" ;; esac; done
"#,
    );
    let curl_log = runner_temp.path().join("curl.log");
    let note_env = |token: &str| {
        [
            ("PATH", curl_path.clone()),
            ("STUB_LOG", curl_log.to_string_lossy().into_owned()),
            ("DRIFTLESS_GITLAB_TOKEN", token.to_string()),
            ("CI_API_V4_URL", "https://gitlab.example/api/v4".to_string()),
            ("CI_PROJECT_ID", "5".to_string()),
            ("CI_MERGE_REQUEST_IID", "9".to_string()),
        ]
    };
    let vars = note_env("");
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run_script(gl_note, repo.path(), &vars);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("set DRIFTLESS_GITLAB_TOKEN") && !curl_log.exists(),
        "{}",
        show(&out)
    );
    let vars = note_env("glpat-test");
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run_script(gl_note, repo.path(), &vars);
    assert_exit(&out, 0);
    assert_eq!(
        support::read(&curl_log),
        "--fail --silent --show-error --request POST --header PRIVATE-TOKEN: glpat-test \
         --data-urlencode body@diff.md https://gitlab.example/api/v4/projects/5/merge_requests/9/notes\n"
    );
    assert_eq!(
        support::read(&curl_log.with_extension("log.body")),
        gl_markdown
    );

    // Merged and applied: no changes.
    let out = apply(&ns, &specs, &[]);
    assert_exit(&out, 0);
    std::fs::remove_file(&summary).unwrap();
    let out = run(diff_step, &good);
    assert_exit(&out, 0);
    assert!(
        support::read(&summary).contains("no changes"),
        "{}",
        show(&out)
    );
    // The comment says so too, replacing the diff it showed before.
    let (_, _, body) = comment("42");
    assert!(
        body.contains("No changes: the cluster matches the specs."),
        "{body}"
    );
    let out = run_script(gl_diff, repo.path(), &gl_env);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("no changes"), "{}", show(&out));

    // A cluster it cannot use: the step fails.
    let out = run(diff_step, &env("this is not a kubeconfig"));
    assert_exit(&out, 2);
    assert!(
        stdout(&out).contains("::error::driftless diff failed"),
        "{}",
        show(&out)
    );
}

/// The preview jobs (`examples/ci/preview-*.yml`) run with no kubeconfig and no secret: a
/// pull request scaling the elastic-web example is previewed as an update of its
/// Deployment, put in the job summary and commented under the preview's own marker; an
/// invalid tree fails the step.
#[test]
fn the_preview_jobs_show_a_pull_requests_change_without_a_cluster() {
    let text = support::read(&example("ci/preview-github.yml"));
    assert!(
        !text.contains("${{ secrets."),
        "the preview needs no secret"
    );
    let workflow: Value = serde_saphyr::from_str(&text).unwrap();
    let preview = step_script(&workflow, "preview", "Preview the change");
    let comment_step = step_script(&workflow, "preview", "Comment on the pull request");
    assert!(
        preview.contains("diff --base HEAD^1 specs/ --output markdown"),
        "{preview}"
    );
    assert_eq!(
        workflow["jobs"]["preview"]["steps"][0]["with"]["fetch-depth"], 2,
        "HEAD^1 is not fetched"
    );
    for step in workflow["jobs"]["preview"]["steps"].as_array().unwrap() {
        assert!(
            !step["run"].as_str().unwrap_or_default().contains("${{"),
            "{step}"
        );
    }

    // A config repository: the base commit, then the pull request's (as the merge commit
    // actions/checkout makes, whose first parent is the base).
    let repo = tempfile::tempdir().unwrap();
    let specs = repo.path().join("specs");
    support::copy_tree(&example("elastic-web"), &specs, &[]);
    support::git(repo.path(), &["init", "-q", "-b", "main"]);
    support::git(repo.path(), &["add", "."]);
    support::git(repo.path(), &["commit", "-q", "-m", "base"]);
    let base = support::git(repo.path(), &["rev-parse", "HEAD"]);
    let apps =
        support::read(&specs.join("apps.toml")).replace("total-qps = 1000", "total-qps = 2000");
    std::fs::write(specs.join("apps.toml"), apps).unwrap();
    support::git(repo.path(), &["commit", "-q", "-am", "scale checkout"]);

    let runner_temp = tempfile::tempdir().unwrap();
    let summary = runner_temp.path().join("summary.md");
    let env = [
        ("RUNNER_TEMP", runner_temp.path().to_str().unwrap()),
        ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
        ("DRIFTLESS_INSTANCE", "default"),
    ];
    let out = run_script(preview, repo.path(), &env);
    assert_exit(&out, 0);
    let md = support::read(&summary);
    assert!(
        md.starts_with("<!-- driftless diff --base -->\n### driftless diff: HEAD^1 (")
            && md.contains("| `apps.toml` | 0 | 1 | 0 |")
            && md.contains("<b>update</b> <code>Deployment.apps shop/checkout</code> in app <code>apps.toml</code>")
            && md.contains("-  replicas: 2\n+  replicas: 4\n"),
        "{md}"
    );

    let (_gh, gh_path) = stub(
        "gh",
        "if [ \"$1\" = api ] && [ \"$2\" != --method ]; then printf ''; fi\n",
    );
    let gh_log = runner_temp.path().join("gh.log");
    let mut comment_env = env.to_vec();
    let log = gh_log.to_string_lossy().into_owned();
    comment_env.extend([
        ("PATH", gh_path.as_str()),
        ("STUB_LOG", log.as_str()),
        ("GH_TOKEN", "token"),
        ("PR_NUMBER", "7"),
        ("GITHUB_REPOSITORY", "acme/config"),
    ]);
    let out = run_script(comment_step, repo.path(), &comment_env);
    assert_exit(&out, 0);
    let calls = support::read(&gh_log);
    assert!(
        calls.contains("select(.user.type == \"Bot\" and (.body | startswith(\"<!-- driftless diff --base -->\")))")
            && calls.ends_with(&format!(
                "\npr comment 7 --repo acme/config --body-file {}/preview.md\n",
                runner_temp.path().display()
            )),
        "{calls}"
    );

    // GitLab's job, against the merge base it is given.
    let gitlab: Value =
        serde_saphyr::from_str(&support::read(&example("ci/preview-gitlab.yml"))).unwrap();
    let script = gitlab["driftless-preview"]["script"][0].as_str().unwrap();
    let out = run_script(
        script,
        repo.path(),
        &[
            ("CI_MERGE_REQUEST_DIFF_BASE_SHA", base.trim()),
            ("DRIFTLESS_INSTANCE", "default"),
        ],
    );
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("changes what is applied"),
        "{}",
        show(&out)
    );
    assert!(
        support::read(&repo.path().join("preview.md")).contains("Deployment.apps shop/checkout")
    );

    // An invalid tree in the pull request fails the step, saying where.
    std::fs::write(specs.join("bad.toml"), "[elasticweb.x]\nimage = 1\n").unwrap();
    support::git(repo.path(), &["add", "."]);
    support::git(repo.path(), &["commit", "-q", "-m", "break"]);
    let out = run_script(preview, repo.path(), &env);
    assert_exit(&out, 2);
    assert!(
        stdout(&out).contains("bad.toml:2:")
            && stdout(&out).contains("::error::driftless diff --base failed"),
        "{}",
        show(&out)
    );
}
