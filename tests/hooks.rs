//! Helm hooks in rendered YAML and sync waves (docs/src/policies.md: "Waves and hooks"), against the
//! local cluster: the example chart's pre hooks run and are waited for before the rest,
//! its post hook after; hooks run again only when a revision changes something; a
//! failing pre hook applies nothing else; a wave starts only once the one before is
//! ready.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use support::{Daemon, assert_exit, printed, show};

/// What happened to Jobs and Deployments in a namespace, in the order the watches saw
/// it: `added Job/x`, `complete Job/x`, `deleted Job/x`, `added Deployment/y`; each with
/// the resourceVersion the apiserver wrote it at. Two watches report in turn, so only
/// that says which of a Job's and a Deployment's writes came first.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(u64, String)>>>);

/// The apiserver's version of `o`'s write (one etcd: one order for every kind).
fn written_at(o: &impl ResourceExt) -> u64 {
    o.resource_version()
        .and_then(|v| v.parse().ok())
        .expect("a resourceVersion of the test cluster's etcd")
}

impl Seen {
    fn start(client: &Client, ns: &str) -> Seen {
        let seen = Seen::default();
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let log = seen.clone();
        tokio::spawn(async move {
            let mut complete = BTreeSet::new();
            let mut known = BTreeSet::new();
            let mut stream = watcher(jobs, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = stream.next().await {
                match event {
                    watcher::Event::Apply(j) | watcher::Event::InitApply(j) => {
                        let uid = j.uid().unwrap_or_default();
                        if known.insert(uid.clone()) {
                            log.push(&j, format!("added Job/{}", j.name_any()));
                        }
                        let done = j
                            .status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| {
                                c.iter()
                                    .any(|c| c.type_ == "Complete" && c.status == "True")
                            });
                        if done && complete.insert(uid) {
                            log.push(&j, format!("complete Job/{}", j.name_any()));
                        }
                    }
                    watcher::Event::Delete(j) => {
                        log.push(&j, format!("deleted Job/{}", j.name_any()))
                    }
                    _ => {}
                }
            }
        });
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let log = seen.clone();
        tokio::spawn(async move {
            let mut known = BTreeSet::new();
            let mut stream = watcher(deployments, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = stream.next().await {
                match event {
                    watcher::Event::Apply(d) | watcher::Event::InitApply(d)
                        if known.insert(d.uid().unwrap_or_default()) =>
                    {
                        log.push(&d, format!("added Deployment/{}", d.name_any()));
                    }
                    watcher::Event::Delete(d) => {
                        log.push(&d, format!("deleted Deployment/{}", d.name_any()))
                    }
                    _ => {}
                }
            }
        });
        seen
    }

    fn push(&self, o: &impl ResourceExt, what: String) {
        self.0.lock().unwrap().push((written_at(o), what));
    }

    fn all(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    fn count(&self, what: &str) -> usize {
        self.all().iter().filter(|s| *s == what).count()
    }

    /// When `what` first happened, as the apiserver's resourceVersion of its write,
    /// failing the test when it did not. The watch reports a little after the apiserver
    /// answered the write, so it is waited for (the log only grows).
    async fn at(&self, what: &str) -> u64 {
        let seen = format!("the watch to report {what:?}");
        support::eventually(&seen, Duration::from_secs(30), || async {
            let log = self.0.lock().unwrap().clone();
            log.iter()
                .find(|(_, s)| s == what)
                .map(|(at, _)| *at)
                .ok_or_else(|| format!("never saw {what:?}: {:?}", self.all()))
        })
        .await
    }
}

const WRITTEN: &[&str] = &[
    "jobs",
    "deployments",
    "services",
    "serviceaccounts",
    "roles",
    "rolebindings",
];

fn bundle(dir: &Path, ns: &str) {
    support::copy_tree(
        &support::example("helm-hooks"),
        dir,
        &[("namespace: hooks-demo", &format!("namespace: {ns}"))],
    );
}

// Serial: it counts the apiserver's own writes to Jobs, Deployments, ...
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serial_a_rendered_chart_runs_its_hooks_around_the_rest_and_only_on_a_change() {
    let client = support::client().await;
    let ns = support::namespace(&client, "hooks").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    bundle(dir.path(), &ns);
    let file = dir.path().join("bundle.yaml");
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let seen = Seen::start(&client, &ns);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Install: the pre hooks, waited for, then the rest, then the post hook.
    let out = run(&["apply", path, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);
    // The watches run on their own threads; give them a moment to catch up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(seen.at("complete Job/demo-setup").await < seen.at("added Deployment/demo-web").await);
    assert!(seen.at("added Deployment/demo-web").await < seen.at("added Job/demo-smoke").await);
    // Deleted once they succeeded (`hook-succeeded`), the ServiceAccount with them; the
    // `test` hook was never applied.
    support::eventually("the hooks deleted", Duration::from_secs(20), || async {
        (jobs.get_opt("demo-setup").await.unwrap().is_none()
            && jobs.get_opt("demo-smoke").await.unwrap().is_none())
        .then_some(())
        .ok_or_else(|| format!("{:?}", seen.all()))
    })
    .await;
    assert!(accounts.get_opt("demo-setup").await.unwrap().is_none());
    assert!(pods.get_opt("demo-test").await.unwrap().is_none());
    let deployment = deployments.get("demo-web").await.unwrap().uid();

    // Unchanged: no hook runs, nothing is written, diff is quiet.
    let before = support::apiserver_writes_when_quiet(&client, WRITTEN).await;
    let again = run(&["apply", path, "--wait", "--timeout", "30s"]);
    assert_exit(&again, 0);
    assert_eq!(
        support::apiserver_writes(&client, WRITTEN).await,
        before,
        "{}",
        show(&again)
    );
    assert_exit(&run(&["diff", path]), 0);
    assert_eq!(seen.count("added Job/demo-setup"), 1);

    // The daemon's syncs and resyncs run none either.
    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", path, "--resync", "2s"])
        .start();
    daemon
        .wait_status("two syncs", |s| {
            s["last_sync"]["result"] == "success" && support::all_ready(s)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        support::apiserver_writes(&client, WRITTEN).await,
        before,
        "{}",
        daemon.log()
    );
    assert_eq!(seen.count("added Job/demo-setup"), 1, "{:?}", seen.all());

    // A chart bump changes a label on every object: the daemon runs both hooks again,
    // the Deployment is updated in place between them.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("demo-0.1.0", "demo-0.2.0")).unwrap();
    support::eventually("the hooks run again", Duration::from_secs(60), || async {
        (seen.count("complete Job/demo-smoke") == 2)
            .then_some(())
            .ok_or_else(|| format!("{:?}", seen.all()))
    })
    .await;
    let all = seen.all();
    let second_setup = all
        .iter()
        .enumerate()
        .filter(|(_, s)| *s == "complete Job/demo-setup")
        .map(|(i, _)| i)
        .nth(1)
        .unwrap_or_else(|| panic!("{all:?}"));
    let second_smoke = all
        .iter()
        .rposition(|s| s == "added Job/demo-smoke")
        .unwrap();
    assert!(second_setup < second_smoke, "{all:?}");
    let bumped = deployments.get("demo-web").await.unwrap();
    assert_eq!(bumped.uid(), deployment);
    assert_eq!(bumped.labels()["helm.sh/chart"], "demo-0.2.0");

    // A change to one object alone (a sync of its spec only) runs them as well.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("image: nginx:1.21", "image: nginx:1.22"),
    )
    .unwrap();
    support::eventually(
        "the hooks run a third time",
        Duration::from_secs(60),
        || async {
            (seen.count("complete Job/demo-smoke") == 3)
                .then_some(())
                .ok_or_else(|| format!("{:?}", seen.all()))
        },
    )
    .await;
    assert_eq!(seen.count("complete Job/demo-setup"), 3, "{:?}", seen.all());
    daemon.stop();

    // A pre hook that fails stops the revision: nothing else applied, exit 1, the Job's
    // reason said.
    let text = std::fs::read_to_string(&file).unwrap();
    let failing = text
        .replace(
            "        app.kubernetes.io/version: \"0.1.0\"\n",
            "        app.kubernetes.io/version: \"0.1.0\"\n      annotations:\n        testbed.driftless.dev/exit-code: \"1\"\n",
        )
        .replace("image: nginx:1.22", "image: nginx:1.23");
    assert_ne!(failing, text);
    std::fs::write(&file, failing).unwrap();
    let out = run(&["apply", path, "--timeout", "60s"]);
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(said.contains("the hook did not succeed"), "{}", show(&out));
    assert!(
        said.contains("JobFailed") || said.contains("BackoffLimitExceeded"),
        "{}",
        show(&out)
    );
    assert!(said.contains("stopped: pre hooks"), "{}", show(&out));
    let image = deployments
        .get("demo-web")
        .await
        .unwrap()
        .spec
        .template
        .spec
        .unwrap()
        .containers[0]
        .image
        .clone()
        .unwrap();
    assert_eq!(image, "nginx:1.22");
}

fn wave(ns: &str, name: &str, wave: i32, delay: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{driftless.dev/wave: \"{wave}\"}}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {{testbed.driftless.dev/ready-delay-seconds: \"{delay}\"}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.21\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_starts_only_once_the_wave_before_is_ready_and_prunes_in_reverse() {
    let client = support::client().await;
    let ns = support::namespace(&client, "waves").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let seen = Seen::start(&client, &ns);
    // Argo CD's annotation is read the same way.
    std::fs::write(
        dir.path().join("db.yaml"),
        wave(&ns, "db", 1, 4).replace("driftless.dev/wave", "argocd.argoproj.io/sync-wave"),
    )
    .unwrap();
    std::fs::write(dir.path().join("web.yaml"), wave(&ns, "web", 2, 0)).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let out = run(&["apply", path, "--timeout", "60s"]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let created = |d: &Deployment| d.creation_timestamp().unwrap().0;
    let db = deployments.get("db").await.unwrap();
    let web = deployments.get("web").await.unwrap();
    // db's Pod is ready 4 s after it starts: web is created after that.
    let gap = created(&web).duration_since(created(&db));
    // lower bound: the order of the two waves, in seconds (a loaded machine only widens
    // the gap).
    assert!(
        gap.as_secs_f64() >= 3.0,
        "db {:?}, web {:?}: {}",
        created(&db),
        created(&web),
        show(&out)
    );
    assert!(seen.at("added Deployment/db").await < seen.at("added Deployment/web").await);

    // Not ready in time: the next wave is not applied, and nothing is pruned.
    std::fs::write(
        dir.path().join("db.yaml"),
        wave(&ns, "db", 1, 600).replace("nginx:1.21", "nginx:1.22"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("web.yaml"),
        wave(&ns, "web", 2, 0).replace("nginx:1.21", "nginx:1.22"),
    )
    .unwrap();
    let out = run(&["apply", path, "--timeout", "3s"]);
    assert_exit(&out, 1);
    assert!(
        printed(&out).contains("stopped: wave 1: not ready within 3s"),
        "{}",
        show(&out)
    );
    let web_image = |d: Deployment| {
        d.spec.template.spec.unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(
        web_image(deployments.get("web").await.unwrap()),
        "nginx:1.21"
    );

    // Removed together: the higher wave goes first.
    std::fs::remove_file(dir.path().join("db.yaml")).unwrap();
    std::fs::remove_file(dir.path().join("web.yaml")).unwrap();
    assert_exit(&run(&["apply", path, "--allow-mass-prune"]), 0);
    support::eventually("both pruned", Duration::from_secs(20), || async {
        (seen.count("deleted Deployment/db") == 1 && seen.count("deleted Deployment/web") == 1)
            .then_some(())
            .ok_or_else(|| format!("{:?}", seen.all()))
    })
    .await;
    assert!(
        seen.at("deleted Deployment/web").await < seen.at("deleted Deployment/db").await,
        "{:?}",
        seen.all()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_says_every_10s_what_a_wave_waits_on() {
    let client = support::client().await;
    let ns = support::namespace(&client, "waves-said").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("db.yaml"), wave(&ns, "db", 1, 600)).unwrap();
    std::fs::write(dir.path().join("web.yaml"), wave(&ns, "web", 2, 0)).unwrap();
    let out = support::driftless_on_cluster(
        &ns,
        &["apply", dir.path().to_str().unwrap(), "--timeout", "12s"],
    );
    assert_exit(&out, 1);
    let said = show(&out);
    // What it waits on, and of which limit; not how many seconds had passed when it said
    // so (a loaded machine says it a second later).
    let waiting = format!(" of 12s) for Deployment.apps {ns}/db");
    assert!(
        said.lines()
            .any(|l| l.contains("waiting (") && l.contains(&waiting)),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_apply_waiting_on_a_wave_and_says_what_was_applied() {
    let client = support::client().await;
    let ns = support::namespace(&client, "waves-interrupted").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("db.yaml"), wave(&ns, "db", 1, 600)).unwrap();
    std::fs::write(dir.path().join("web.yaml"), wave(&ns, "web", 2, 0)).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "--kubeconfig",
            support::admin_kubeconfig().to_str().unwrap(),
            "--instance",
            &ns,
            "apply",
            dir.path().to_str().unwrap(),
            "--timeout",
            "2m",
        ])
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "warn")
        .stdout(std::fs::File::create(logs.path().join("out")).unwrap())
        .stderr(std::fs::File::create(logs.path().join("err")).unwrap())
        .spawn()
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    support::eventually("db applied", Duration::from_secs(30), || async {
        match deployments.get_opt("db").await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let interrupted = std::time::Instant::now();
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        // hang guard: apply stops at once on Ctrl-C; one that ignored it would wait out
        // its 2 min timeout.
        assert!(
            interrupted.elapsed() < Duration::from_secs(60),
            "apply did not stop within 60 s of Ctrl-C"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let out = std::fs::read_to_string(logs.path().join("out")).unwrap();
    let err = std::fs::read_to_string(logs.path().join("err")).unwrap();
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(
        out.contains("stopped: interrupted (Ctrl-C)"),
        "{out}\n{err}"
    );
    assert!(
        err.contains("interrupted: what is listed above was applied"),
        "{err}"
    );
    // Wave 2 was never applied.
    assert!(deployments.get_opt("web").await.unwrap().is_none());
}

/// A hook Job of the kind current charts give (`ttlSecondsAfterFinished: 0`): the TTL
/// controller deletes it the moment it completes. Its completion is still seen (a watch
/// follows each run from its creation), so install and upgrade go on, each hook run once,
/// through the CLI and the daemon.
#[tokio::test]
async fn hooks_that_delete_themselves_once_done_are_done_not_lost() {
    let client = support::client().await;
    let ns = support::namespace(&client, "hooks-ttl").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let file = dir.path().join("chart.yaml");
    let job = |name: &str, hook: &str, chart: &str| {
        format!(
            "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    helm.sh/chart: {chart}\n  annotations:\n    helm.sh/hook: {hook}\n    helm.sh/hook-delete-policy: before-hook-creation\nspec:\n  ttlSecondsAfterFinished: 0\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: busybox:1.36\n          command: [\"true\"]\n"
        )
    };
    let chart = |chart: &str| {
        job("migrate", "pre-install,pre-upgrade", chart)
            + &job("notify", "post-install,post-upgrade", chart)
            + &format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n  labels:\n    helm.sh/chart: {chart}\ndata:\n  chart: {chart}\n"
            )
    };
    std::fs::write(&file, chart("demo-0.1.0")).unwrap();
    let seen = Seen::start(&client, &ns);
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);

    // Install: both hooks run and are seen done, though each is gone at once.
    let out = run(&["apply", path, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);
    assert!(maps.get("settings").await.is_ok(), "{}", show(&out));
    seen.at("deleted Job/migrate").await;
    seen.at("deleted Job/notify").await;

    // Upgrade: each hook once more.
    std::fs::write(&file, chart("demo-0.2.0")).unwrap();
    let out = run(&["apply", path, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);
    support::eventually("each hook run twice", Duration::from_secs(20), || async {
        let all = seen.all();
        (seen.count("added Job/migrate") == 2 && seen.count("added Job/notify") == 2)
            .then_some(())
            .ok_or_else(|| format!("{all:?}"))
    })
    .await;

    // The daemon: an upgrade runs each hook once more, and the sync succeeds.
    let mut daemon = Daemon::builder(&ns).args(&["--dir", path]).start();
    daemon
        .wait_status("the first sync", |s| s["last_sync"]["result"] == "success")
        .await;
    std::fs::write(&file, chart("demo-0.3.0")).unwrap();
    daemon
        .wait_status("the upgrade synced", |s| {
            s["last_sync"]["result"] == "success"
                && support::spec_or_null(s, &format!("manifest/{ns}/ConfigMap/settings"))["ready"]
                    == true
                && newest_applied(s)
        })
        .await;
    support::eventually(
        "each hook run three times",
        Duration::from_secs(20),
        || async {
            let all = seen.all();
            (seen.count("added Job/migrate") == 3 && seen.count("added Job/notify") == 3)
                .then_some(())
                .ok_or_else(|| format!("{all:?}"))
        },
    )
    .await;
    daemon.stop();
    let data = maps.get("settings").await.unwrap().data.unwrap_or_default();
    assert_eq!(data["chart"], "demo-0.3.0");
}

/// Whether a status's newest revision is the one applied.
fn newest_applied(status: &serde_json::Value) -> bool {
    status["revision_seen"] == status["revision_applied"]
}

/// A wave's Job that deletes itself once done (`ttlSecondsAfterFinished: 0`) is followed
/// from its apply, as a hook's run is: gone by the time its wave is waited for, it is
/// still seen to have completed, and the next wave goes. One deleted before it finished
/// fails the sync at once, saying so in one line, not at the end of `--ready-timeout`.
#[tokio::test]
async fn a_waves_job_that_deletes_itself_once_done_is_done_and_one_deleted_midway_fails() {
    let client = support::client().await;
    let ns = support::namespace(&client, "wave-ttl").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("waves.yaml");
    let job = |name: &str, pod_annotations: &str| {
        format!(
            "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    driftless.dev/wave: \"-1\"\nspec:\n  ttlSecondsAfterFinished: 0\n  backoffLimit: 0\n  template:\n    metadata:\n      annotations: {{{pod_annotations}}}\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: busybox:1.36\n          command: [\"true\"]\n"
        )
    };
    // Argo CD's `Sync` hook of the same wave runs once the wave is applied and before it
    // is waited for: ready only seconds later (the kubelet stand-in's `slowready-N`), by
    // when the Job has long completed and the TTL controller has deleted it.
    let hook = format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: settle\n  namespace: {ns}\n  annotations:\n    argocd.argoproj.io/hook: Sync\n    driftless.dev/wave: \"-1\"\nspec:\n  containers:\n    - name: wait\n      image: nginx:slowready-5\n"
    );
    let config = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  wave: \"0\"\n"
        )
    };
    std::fs::write(&file, job("migrate", "") + &hook + &config("after")).unwrap();
    let seen = Seen::start(&client, &ns);
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    // A wave not ready in time would stop the sync long after the test's own wait: only
    // what follows the Job ends it.
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            dir.path().to_str().unwrap(),
            "--ready-timeout",
            "10m",
        ])
        .start();
    daemon
        .wait_status("the next wave applied", |s| {
            s["last_sync"]["result"] == "success"
                && support::spec_or_null(s, &format!("manifest/{ns}/ConfigMap/after"))["ready"]
                    == true
        })
        .await;
    seen.at("complete Job/migrate").await;
    seen.at("deleted Job/migrate").await;
    assert!(maps.get_opt("after").await.unwrap().is_some());

    // A Job that never ends (its Pod runs on), deleted by someone while its wave waits.
    std::fs::write(
        &file,
        job(
            "stuck",
            "testbed.driftless.dev/ready-delay-seconds: \"3600\"",
        ) + &hook
            + &config("later"),
    )
    .unwrap();
    daemon
        .wait_status("the wave waiting on the Job", |s| {
            s["sync_progress"]["waiting_on"]
                .as_str()
                .is_some_and(|w| w.contains("stuck"))
        })
        .await;
    jobs.delete("stuck", &kube::api::DeleteParams::background())
        .await
        .unwrap();
    let status = daemon
        .wait_status("the sync failed", |s| s["last_sync"]["result"] == "failed")
        .await;
    let message = status["last_sync"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "wave -1: Job.batch {ns}/stuck was deleted before it was seen to finish"
        )) && !message.contains('\n'),
        "{status:#}"
    );
    assert!(maps.get_opt("later").await.unwrap().is_none());
    daemon.stop();
    // Its retry may have made it again.
    let _ = jobs
        .delete("stuck", &kube::api::DeleteParams::background())
        .await;
}
