//! The real bundles of `../shared/realworld-2026`: fourteen projects' install YAML, byte
//! for byte as each ships it at two versions released in 2025-2026. Each goes through driftless's whole
//! life cycle with no hand edit, as a user would run it: `validate` (with
//! `--allow-namespace kube-system` where the bundle installs there), install, a re-apply
//! the apiserver counts no write for, a quiet `diff`, the upgrade to the newer version
//! (what it dropped pruned), `apply --wait` (readiness reported, not required: this
//! cluster has no LoadBalancer addresses), a re-apply with no write and a quiet diff
//! again, and an uninstall (an empty tree, `--allow-mass-prune`) after which nothing of
//! the bundle is left.
//!
//! Each test is named `serial_*`: it counts the apiserver's own write requests, which
//! other tests' writes would blur, so `scripts/test` runs them alone, one at a time.
//! The files are never copied into the repository nor edited: they stand for what users
//! download.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use support::{assert_exit, show};

/// Every YAML file of `version`, into `root/bundle` (which is emptied first).
fn put(version: &Path, root: &Path) {
    let bundle = root.join("bundle");
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle).unwrap();
    }
    support::copy_tree(version, &bundle, &[]);
}

/// The apiserver's count of writes to `plurals`, once no controller is still writing
/// to them (a new namespace's root CA ConfigMap, a ServiceAccount's token).
async fn settled_writes(client: &kube::Client, plurals: &[&str]) -> u64 {
    let mut last = support::apiserver_writes(client, plurals).await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = support::apiserver_writes(client, plurals).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("writes to {plurals:?} did not settle within 45 s");
}

struct Run {
    instance: String,
    root: PathBuf,
    kube_system: bool,
}

impl Run {
    fn driftless(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.push(self.root.to_str().unwrap());
        if self.kube_system {
            all.extend(["--allow-namespace", "kube-system"]);
        }
        support::driftless_on_cluster(&self.instance, &all)
    }

    /// A re-apply the apiserver counts no write for, then a diff that finds nothing.
    async fn settled(&self, client: &kube::Client, objects: &[driftless::render::Object]) {
        let found = support::resources(client, objects).await;
        let mut plurals: BTreeSet<&str> = found.iter().map(|(_, r)| r.plural.as_str()).collect();
        plurals.insert("configmaps"); // the inventory
        let plurals: Vec<&str> = plurals.into_iter().collect();
        let before = settled_writes(client, &plurals).await;
        let out = self.driftless(&["apply"]);
        assert_exit(&out, 0);
        let after = support::apiserver_writes(client, &plurals).await;
        assert_eq!(
            after - before,
            0,
            "a re-apply wrote to {plurals:?}\n{}",
            show(&out)
        );
        support::assert_no_writes(&out);
        let diff = self.driftless(&["diff"]);
        assert_exit(&diff, 0);
    }
}

/// No line of `out` says an object failed, conflicted or was refused.
fn no_failures(out: &Output) {
    let text = support::printed(out);
    for word in [" failed", " conflict", "refused", "error:"] {
        assert!(!text.contains(word), "{word:?} in:\n{}", show(out));
    }
}

/// Every line of `out` is a line, not a dump: an apiserver's refusal is said in one.
fn short_lines(out: &Output) {
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
    {
        assert!(
            line.chars().count() <= 800,
            "a line of {} characters:\n{line}",
            line.len()
        );
    }
}

/// The whole life cycle of `project`.
async fn life_cycle(project: &str) {
    let client = support::client().await;
    let (old, new) = support::realworld_versions(project);
    let dir = tempfile::tempdir().unwrap();
    let run = Run {
        instance: format!("rw-{project}"),
        root: dir.path().to_path_buf(),
        kube_system: support::reads_kube_system(&old) || support::reads_kube_system(&new),
    };

    // Install.
    put(&old, &run.root);
    let out = run.driftless(&["validate"]);
    assert_exit(&out, 0);
    let old_objects = support::rendered_objects(&run.root, run.kube_system);
    let out = run.driftless(&["apply"]);
    assert_exit(&out, 0);
    no_failures(&out);
    run.settled(&client, &old_objects).await;

    // Upgrade.
    put(&new, &run.root);
    let out = run.driftless(&["validate"]);
    assert_exit(&out, 0);
    let new_objects = support::rendered_objects(&run.root, run.kube_system);
    let out = run.driftless(&["apply"]);
    short_lines(&out);
    assert_exit(&out, 0);
    no_failures(&out);
    let dropped: Vec<String> = old_objects
        .iter()
        .filter(|o| !new_objects.iter().any(|n| n.key() == o.key()))
        .map(|o| o.display_ref())
        .collect();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for o in &dropped {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(o.as_str()) && l.contains("pruned")),
            "{o} was dropped by the upgrade but not pruned:\n{}",
            show(&out)
        );
    }
    // Readiness is reported, not required: no LoadBalancer addresses here.
    let out = run.driftless(&["apply", "--wait", "--timeout", "20s"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", show(&out));
    no_failures(&out);
    run.settled(&client, &new_objects).await;

    // Uninstall: nothing of either version is left.
    let gone = support::resources(&client, &old_objects)
        .await
        .into_iter()
        .chain(support::resources(&client, &new_objects).await)
        .collect::<Vec<_>>();
    std::fs::remove_dir_all(run.root.join("bundle")).unwrap();
    // hang guard: the bundle's CRDs wait on the apiserver's CRD cleanup (driftless nudges
    // one whose cleanup stalled, which otherwise waits up to five minutes). Shorter than
    // the runner's guard (.config/nextest.toml), so a deletion that never ends fails with
    // driftless's word on what it waits for, not a silent kill.
    let out = run.driftless(&["apply", "--allow-mass-prune", "--wait", "--timeout", "5m"]);
    assert_exit(&out, 0);
    no_failures(&out);
    support::all_gone(&client, &gone).await;
}

macro_rules! bundles {
    ($($name:ident => $project:literal;)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                life_cycle($project).await;
            }
        )*
    };
}

bundles! {
    serial_realworld_argo_rollouts => "argo-rollouts";
    serial_realworld_cloudnative_pg => "cloudnative-pg";
    serial_realworld_contour => "contour";
    serial_realworld_descheduler => "descheduler";
    serial_realworld_gateway_api => "gateway-api";
    serial_realworld_ingress_nginx => "ingress-nginx";
    serial_realworld_kube_state_metrics => "kube-state-metrics";
    serial_realworld_kured => "kured";
    serial_realworld_local_path_provisioner => "local-path-provisioner";
    serial_realworld_longhorn => "longhorn";
    serial_realworld_metallb => "metallb";
    serial_realworld_reloader => "reloader";
    serial_realworld_rook => "rook";
    serial_realworld_strimzi_kafka_operator => "strimzi-kafka-operator";
}

/// Every project of the corpus has its test above: a bundle added to
/// `../shared/realworld-2026` is not silently left out.
#[test]
fn every_bundle_of_the_corpus_is_tested() {
    let projects: Vec<String> = support::realworld_projects()
        .iter()
        .map(|p| p.replace('-', "_"))
        .collect();
    let this = include_str!("realworld.rs");
    for p in &projects {
        assert!(
            this.contains(&format!("serial_realworld_{p} =>")),
            "no test for {p}"
        );
    }
    assert_eq!(projects.len(), 14, "{projects:?}");
}
