//! Replace on immutable fields (docs/src/policies.md): an apply the apiserver refuses only
//! because immutable fields changed deletes and recreates the object where its policy
//! says so — a Job by default, what `driftless.dev/replace: on-immutable` or
//! `--replace-on-immutable KIND.GROUP` names — and `diff` shows the replace first.
//! Anything else keeps the refusal, in one line that says how to opt in.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::Api;

use support::{assert_exit, printed, show};

fn job(ns: &str, image: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: run\n  namespace: {ns}\n  annotations: {{{annotations}}}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: {image}\n"
    )
}

fn deployment(ns: &str, app: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {app}}}\n  template:\n    metadata:\n      labels: {{app: {app}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.17.1\n"
    )
}

#[tokio::test]
async fn a_changed_job_is_replaced_and_what_may_not_be_says_how_to_allow_it() {
    let client = support::client().await;
    let ns = support::namespace(&client, "replace").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let image = |j: &Job| {
        j.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image
            .clone()
            .unwrap()
    };

    std::fs::write(root.join("job.yaml"), job(&ns, "busybox:1", "")).unwrap();
    assert_exit(&run(&["apply", path]), 0);
    let first = jobs.get("run").await.unwrap();

    // A new image: a Job's template is immutable, so the new Job replaces the old.
    std::fs::write(root.join("job.yaml"), job(&ns, "busybox:2", "")).unwrap();
    let diff = run(&["diff", path]);
    assert_exit(&diff, 1);
    assert!(
        printed(&diff).contains(&format!(
            "# replace: Job.batch {ns}/run cannot change in place"
        )),
        "{}",
        show(&diff)
    );
    let out = run(&["apply", path]);
    assert_exit(&out, 0);
    assert!(printed(&out).contains("replaced"), "{}", show(&out));
    let second = jobs.get("run").await.unwrap();
    assert_ne!(second.uid(), first.uid());
    assert_eq!(image(&second), "busybox:2");
    let again = run(&["apply", path]);
    assert_exit(&again, 0);
    support::assert_no_writes(&again);

    // `never`: the refusal stands, said in one line with how to allow it.
    std::fs::write(
        root.join("job.yaml"),
        job(&ns, "busybox:3", "driftless.dev/replace: never"),
    )
    .unwrap();
    let hint = "annotate it `driftless.dev/replace: on-immutable` (or pass --replace-on-immutable Job.batch)";
    let diff = run(&["diff", path]);
    assert_exit(&diff, 2);
    assert!(printed(&diff).contains(hint), "{}", show(&diff));
    let out = run(&["apply", path]);
    assert_exit(&out, 1);
    let said: Vec<String> = printed(&out)
        .lines()
        .filter(|l| l.contains(hint))
        .map(String::from)
        .collect();
    assert!(
        said.iter()
            .any(|l| l.contains("spec.template: field is immutable")),
        "{}",
        show(&out)
    );
    assert_eq!(jobs.get("run").await.unwrap().uid(), second.uid());
    std::fs::remove_file(root.join("job.yaml")).unwrap();

    // Other kinds only when asked: a Deployment's selector is immutable.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    std::fs::write(root.join("web.yaml"), deployment(&ns, "a")).unwrap();
    assert_exit(&run(&["apply", path, "--allow-mass-prune"]), 0);
    let old = deployments.get("web").await.unwrap().uid();
    std::fs::write(root.join("web.yaml"), deployment(&ns, "b")).unwrap();
    let out = run(&["apply", path]);
    assert_exit(&out, 1);
    assert!(
        printed(&out).contains("--replace-on-immutable Deployment.apps"),
        "{}",
        show(&out)
    );
    let flag = ["--replace-on-immutable", "Deployment.apps"];
    let diff = run(&["diff", path, flag[0], flag[1]]);
    assert_exit(&diff, 1);
    assert!(
        printed(&diff).contains("# replace: Deployment.apps"),
        "{}",
        show(&diff)
    );
    assert_exit(&run(&["apply", path, flag[0], flag[1]]), 0);
    let new = deployments.get("web").await.unwrap();
    assert_ne!(new.uid(), old);
    assert_eq!(new.spec.selector.match_labels.unwrap()["app"], "b");
}

const STATEFULSET: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: NS\n  annotations: {driftless.dev/replace: on-immutable}\nspec:\n  serviceName: db\n  replicas: 1\n  selector:\n    matchLabels: {app: db}\n  template:\n    metadata:\n      labels: {app: db}\n    spec:\n      containers:\n      - name: db\n        image: nginx:1.21\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources: {requests: {storage: 1Gi}}\n";

const CLAIM: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: files\n  namespace: NS\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n";

#[tokio::test]
async fn a_replaced_statefulset_keeps_its_pods_and_a_claim_is_never_replaced_unasked() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    let client = support::client().await;
    let ns = support::namespace(&client, "replace-sts").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);

    std::fs::write(root.join("db.yaml"), STATEFULSET.replace("NS", &ns)).unwrap();
    std::fs::write(root.join("files.yaml"), CLAIM.replace("NS", &ns)).unwrap();
    assert_exit(&run(&["apply", path]), 0);
    let pod = support::eventually("db-0", std::time::Duration::from_secs(60), || async {
        pods.get_opt("db-0")
            .await
            .unwrap()
            .ok_or_else(|| "no db-0 yet".to_string())
    })
    .await
    .uid();
    let set = sets.get("db").await.unwrap().uid();
    let claim = claims.get("files").await.unwrap().uid();

    // A StatefulSet's volumeClaimTemplates and a claim's access modes cannot change.
    let bigger = |t: &str| t.replace("NS", &ns).replace("1Gi", "2Gi");
    std::fs::write(root.join("db.yaml"), bigger(STATEFULSET)).unwrap();
    std::fs::write(
        root.join("files.yaml"),
        CLAIM
            .replace("NS", &ns)
            .replace("ReadWriteOnce", "ReadWriteMany"),
    )
    .unwrap();
    let diff = run(&["diff", path, "-o", "json"]);
    assert_exit(&diff, 2);
    let doc: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    let objects = doc["objects"].as_array().unwrap();
    let of = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("{kind}: {doc}"))
    };
    assert_eq!(of("StatefulSet")["action"], "replace", "{doc}");
    // Which field the apiserver names changed with its version: the whole spec up to
    // 1.34, the field itself on 1.37.
    let immutable = &of("StatefulSet")["immutable"];
    assert!(
        [
            serde_json::json!(["spec"]),
            serde_json::json!(["spec.volumeClaimTemplates"])
        ]
        .contains(immutable),
        "{doc}"
    );
    let hint = "--replace-on-immutable PersistentVolumeClaim";
    assert!(
        of("PersistentVolumeClaim")["error"]
            .as_str()
            .unwrap()
            .contains(hint),
        "{doc}"
    );

    let out = run(&["apply", path]);
    assert_exit(&out, 1);
    let said = printed(&out);
    let refusal: Vec<&str> = said.lines().filter(|l| l.contains(hint)).collect();
    assert_eq!(refusal.len(), 1, "{}", show(&out));
    assert!(
        !said.contains("core.PersistentVolumeClaimSpec"),
        "{}",
        show(&out)
    );
    assert!(said.contains("1 replaced"), "{}", show(&out));
    let new = sets.get("db").await.unwrap();
    assert_ne!(new.uid(), set);
    // Orphaned, not deleted: the new StatefulSet adopts the same Pod.
    support::eventually(
        "db-0 adopted",
        std::time::Duration::from_secs(60),
        || async {
            let p = pods.get("db-0").await.unwrap();
            let owner = p
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone());
            match (p.uid() == Some(pod.clone().unwrap()), owner == new.uid()) {
                (true, true) => Ok(()),
                (false, _) => Err(format!("db-0 was recreated: {:?}", p.uid())),
                (true, false) => Err(format!("db-0 owned by {owner:?}")),
            }
        },
    )
    .await;
    assert_eq!(claims.get("files").await.unwrap().uid(), claim);
}

#[tokio::test]
async fn the_daemon_replaces_a_changed_job() {
    let client = support::client().await;
    let ns = support::namespace(&client, "replace-daemon").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    std::fs::write(root.join("job.yaml"), job(&ns, "busybox:1", "")).unwrap();
    let mut daemon = support::Daemon::builder(&ns)
        .args(&["--dir", root.to_str().unwrap(), "--resync", "1h"])
        .start();
    let first = support::eventually("the Job", std::time::Duration::from_secs(60), || async {
        jobs.get_opt("run")
            .await
            .unwrap()
            .ok_or_else(|| "not yet".to_string())
    })
    .await
    .uid();
    std::fs::write(root.join("job.yaml"), job(&ns, "busybox:2", "")).unwrap();
    support::eventually(
        "the Job replaced",
        std::time::Duration::from_secs(60),
        || async {
            match jobs.get_opt("run").await.unwrap() {
                Some(j) if j.uid() != first => Ok(()),
                _ => Err(daemon.log()),
            }
        },
    )
    .await;
    // The new Job can be seen before that sync ends and says so: wait for the sync of the
    // change itself, not the one before it.
    daemon
        .wait_status("the change's sync", |s| {
            s["last_sync"]["result"] == "success"
                && s["revision_applied"] == s["revision_seen"]
                && s["syncing"] == false
        })
        .await;
    support::eventually(
        "the daemon saying it replaced the Job",
        std::time::Duration::from_secs(10),
        || async {
            match daemon.log() {
                log if log.contains("replaced") => Ok(()),
                log => Err(log),
            }
        },
    )
    .await;
    daemon.stop();
}
