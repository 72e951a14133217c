//! Argo CD's hooks and hooks made from `generateName` (docs/src/policies.md, "Waves and
//! hooks"), against the local cluster: a `PreSync` Job with `generateName` runs before the
//! rest, each sync that runs hooks creates a new run, and its delete policy cleans up; a
//! `Skip` object is never applied; `SyncFail` runs only when the sync fails; Argo CD's
//! `PostSync` waits for the objects to be ready while Helm's `post-install` follows them
//! once they are applied (ingress-nginx's bundle on a cluster without load balancers).

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use support::{assert_exit, printed, show};

/// Jobs seen in a namespace, in order: `added Job/x`, `complete Job/x`, `failed Job/x`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn start(client: &Client, ns: &str) -> Seen {
        let seen = Seen::default();
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let log = seen.clone();
        tokio::spawn(async move {
            let mut said = BTreeSet::new();
            let mut stream = watcher(jobs, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = stream.next().await {
                let (watcher::Event::Apply(j) | watcher::Event::InitApply(j)) = event else {
                    continue;
                };
                let name = j.name_any();
                let conditions = j
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default();
                let mut events = vec!["added"];
                for (type_, what) in [("Complete", "complete"), ("Failed", "failed")] {
                    if conditions
                        .iter()
                        .any(|c| c.type_ == type_ && c.status == "True")
                    {
                        events.push(what);
                    }
                }
                for what in events {
                    if said.insert(format!("{what} {}", j.uid().unwrap_or_default())) {
                        log.0.lock().unwrap().push(format!("{what} Job/{name}"));
                    }
                }
            }
        });
        seen
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// How many events start with `prefix` (`added Job/migrate-`).
    fn count(&self, prefix: &str) -> usize {
        self.all().iter().filter(|s| s.starts_with(prefix)).count()
    }

    /// Where an event starting with `prefix` happened first.
    fn at(&self, prefix: &str) -> usize {
        let all = self.all();
        all.iter()
            .position(|s| s.starts_with(prefix))
            .unwrap_or_else(|| panic!("never saw {prefix:?}: {all:?}"))
    }
}

/// The names of the Jobs in `ns` starting with `prefix`, not being deleted.
async fn jobs_named(client: &Client, ns: &str, prefix: &str) -> Vec<String> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    jobs.list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| j.name_any())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// A Job hook; `extra` goes under `metadata.annotations`, `pod` under the Pod's.
fn job(ns: &str, name_field: &str, annotations: &str, pod: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  {name_field}\n  namespace: {ns}\n  annotations:\n{annotations}\nspec:\n  backoffLimit: 0\n  template:\n    metadata:\n      annotations: {{{pod}}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: run\n        image: busybox:1.33\n        command: [\"true\"]\n"
    )
}

fn deployment(ns: &str, name: &str, image: &str, ready_delay: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {{testbed.driftless.dev/ready-delay-seconds: \"{ready_delay}\"}}\n    spec:\n      containers:\n      - name: web\n        image: {image}\n"
    )
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_argo_presync_job_from_generate_name_runs_first_each_time_and_is_cleaned_up() {
    let client = support::client().await;
    let ns = support::namespace(&client, "argo-hooks").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let seen = Seen::start(&client, &ns);
    write(
        dir.path(),
        "migrate.yaml",
        &job(
            &ns,
            "generateName: migrate-",
            "    argocd.argoproj.io/hook: PreSync\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded",
            "",
        ),
    );
    // No delete policy: Argo CD's default, `BeforeHookCreation`: one run kept at a time.
    write(
        dir.path(),
        "notify.yaml",
        &job(
            &ns,
            "generateName: notify-",
            "    argocd.argoproj.io/hook: PostSync",
            "",
        ),
    );
    write(
        dir.path(),
        "cleanup.yaml",
        &job(
            &ns,
            "generateName: cleanup-",
            "    argocd.argoproj.io/hook: SyncFail",
            "",
        ),
    );
    write(
        dir.path(),
        "skipped.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: skipped\n  namespace: {ns}\n  annotations:\n    argocd.argoproj.io/hook: Skip\ndata: {{a: b}}\n"
        ),
    );
    write(
        dir.path(),
        "web.yaml",
        &deployment(&ns, "web", "nginx:1.21", 0),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    assert_exit(&run(&["validate", path]), 0);
    let out = run(&["apply", path, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);
    // The spec is named by its prefix, stable across runs.
    assert!(
        printed(&out).contains("Job.batch/migrate-"),
        "{}",
        show(&out)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let all = seen.all();
    assert!(
        seen.at("complete Job/migrate-") < seen.at("added Job/notify-"),
        "{all:?}"
    );
    // The PreSync run is deleted once it succeeded; the PostSync one stays.
    support::eventually(
        "the PreSync run deleted",
        Duration::from_secs(20),
        || async {
            jobs_named(&client, &ns, "migrate-")
                .await
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("{:?}", seen.all()))
        },
    )
    .await;
    let first_notify = jobs_named(&client, &ns, "notify-").await;
    assert_eq!(first_notify.len(), 1, "{:?}", seen.all());
    // Skipped and never applied; SyncFail not run on a sync that succeeded.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(configmaps.get_opt("skipped").await.unwrap().is_none());
    assert_eq!(seen.count("added Job/cleanup-"), 0, "{:?}", seen.all());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &ns);
    let web = deployments.get("web").await.unwrap();
    let web_created = web.creation_timestamp().unwrap().0;

    // Unchanged: no hook runs again.
    assert_exit(&run(&["apply", path, "--wait", "--timeout", "60s"]), 0);
    assert_eq!(seen.count("added Job/migrate-"), 1, "{:?}", seen.all());
    assert_exit(&run(&["diff", path]), 0);

    // A change: a new run of each, the earlier PostSync run deleted before the new one.
    write(
        dir.path(),
        "web.yaml",
        &deployment(&ns, "web", "nginx:1.22", 0),
    );
    let out = run(&["apply", path, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen.count("added Job/migrate-"), 2, "{:?}", seen.all());
    assert_eq!(seen.count("complete Job/migrate-"), 2, "{:?}", seen.all());
    support::eventually("one PostSync run", Duration::from_secs(20), || async {
        let now = jobs_named(&client, &ns, "notify-").await;
        (now.len() == 1 && now != first_notify)
            .then_some(())
            .ok_or_else(|| format!("{now:?}: {:?}", seen.all()))
    })
    .await;
    assert!(jobs_named(&client, &ns, "migrate-").await.is_empty());
    assert_eq!(
        deployments
            .get("web")
            .await
            .unwrap()
            .creation_timestamp()
            .unwrap()
            .0,
        web_created
    );

    // A PreSync run that fails: the sync stops, and the SyncFail hook runs.
    write(
        dir.path(),
        "migrate.yaml",
        &job(
            &ns,
            "generateName: migrate-",
            "    argocd.argoproj.io/hook: PreSync\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded",
            "testbed.driftless.dev/exit-code: \"1\"",
        ),
    );
    let out = run(&["apply", path, "--timeout", "60s"]);
    assert_exit(&out, 1);
    assert!(
        printed(&out).contains("the hook did not succeed"),
        "{}",
        show(&out)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        seen.at("failed Job/migrate-") < seen.at("complete Job/cleanup-"),
        "{:?}",
        seen.all()
    );
    // The failed run stays (no `HookFailed`), for its logs.
    assert_eq!(jobs_named(&client, &ns, "migrate-").await.len(), 1);
}

/// A Job a Helm chart runs after install: `helm.sh/hook: post-install,post-upgrade`.
fn helm_post_job(ns: &str) -> String {
    job(
        ns,
        "name: admission-patch",
        "    helm.sh/hook: post-install,post-upgrade\n    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded",
        "",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helm_post_install_runs_once_applied_while_postsync_waits_for_ready() {
    let client = support::client().await;
    let ns = support::namespace(&client, "helm-post").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let seen = Seen::start(&client, &ns);
    // As ingress-nginx's bundle: a LoadBalancer Service that never gets an address here,
    // a controller that never becomes ready, and the post-install Job patching its
    // webhook.
    write(
        dir.path(),
        "controller.yaml",
        &format!(
            "{}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: controller\n  namespace: {ns}\nspec:\n  type: LoadBalancer\n  selector: {{app: controller}}\n  ports:\n  - port: 80\n",
            deployment(&ns, "controller", "nginx:1.21", 600)
        ),
    );
    write(dir.path(), "patch.yaml", &helm_post_job(&ns));
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Not ready, and not waited for: the Helm hook runs once the rest is applied, and
    // apply is done as soon as it has. A wait for the controller would end in exit 1,
    // "not ready within 60s" (as the PostSync below does), however fast the machine.
    let out = run(&["apply", path, "--timeout", "60s"]);
    assert_exit(&out, 0);
    assert!(
        !printed(&out).contains("not ready within"),
        "{}",
        show(&out)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        seen.count("complete Job/admission-patch"),
        1,
        "{:?}",
        seen.all()
    );

    // Argo CD's PostSync waits for the controller, which is never ready: not run, and
    // the sync says why it stopped. The Helm hook ran before that, again (the tree
    // changed).
    write(
        dir.path(),
        "smoke.yaml",
        &job(
            &ns,
            "generateName: smoke-",
            "    argocd.argoproj.io/hook: PostSync",
            "",
        ),
    );
    let out = run(&["apply", path, "--timeout", "5s"]);
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(said.contains("not ready within 5s"), "{}", show(&out));
    assert!(said.contains("post hooks"), "{}", show(&out));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        seen.count("complete Job/admission-patch"),
        2,
        "{:?}",
        seen.all()
    );
    assert_eq!(seen.count("added Job/smoke-"), 0, "{:?}", seen.all());
}

#[test]
fn an_ordinary_object_with_generate_name_is_one_line_saying_it_needs_a_name() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: settings-\n  namespace: dev\ndata: {a: b}\n",
    );
    let out = support::driftless(&["validate", dir.path().to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    let said = printed(&out);
    let lines: Vec<&str> = said.lines().filter(|l| l.contains("cm.yaml")).collect();
    assert_eq!(lines.len(), 1, "{}", show(&out));
    assert!(
        lines[0].contains("cm.yaml:4:3: `metadata.generateName` is only for hooks"),
        "{}",
        show(&out)
    );
    assert!(lines[0].contains("needs `metadata.name`"), "{}", show(&out));
}
