//! Tree-level settings (`.driftless.toml`, docs "Tree-level settings") against the local
//! cluster: target namespaces by path, ignore rules across kinds (by label and by field
//! manager), CEL health rules for a custom resource, and strict variables.

use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::json;

use support::{Daemon, assert_exit, printed, show};

const WAIT: Duration = Duration::from_secs(90);

fn write(root: &Path, name: &str, text: &str) {
    let path = root.join(name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn configmap(name: &str, namespace: Option<&str>) -> String {
    let ns = namespace.map_or(String::new(), |n| format!("  namespace: {n}\n"));
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{ns}data:\n  a: \"1\"\n")
}

fn deployment(name: &str, ns: &str, labels: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{labels}}}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n"
    )
}

async fn replicas(api: &Api<Deployment>, name: &str) -> i32 {
    let d = api.get(name).await.unwrap();
    d.spec.replicas.unwrap_or_default()
}

/// A `[[namespace]]` rule puts the namespaced objects of matching files that name no
/// namespace into its namespace; an object that names one keeps it, and files outside
/// the path are not touched. `diff` and prune see the same objects.
#[tokio::test]
async fn a_namespace_rule_places_objects_and_diff_and_prune_agree() {
    let client = support::client().await;
    let ns = support::namespace(&client, "tns").await;
    let other = support::namespace(&client, "tns-own").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    write(
        root,
        ".driftless.toml",
        &format!("[[namespace]]\npath = \"vendor/**\"\nnamespace = \"{ns}\"\n"),
    );
    write(
        root,
        "vendor/app/bundle.yaml",
        &format!(
            "{}---\n{}",
            configmap("plain", None),
            configmap("named", Some(&other))
        ),
    );
    write(root, "own.yaml", &configmap("own", Some(&other)));

    let render = run(&["render", path]);
    assert_exit(&render, 0);
    assert!(
        printed(&render).contains(&format!("name: plain\n  namespace: {ns}\n")),
        "{}",
        show(&render)
    );
    assert_exit(&run(&["apply", path]), 0);
    let in_rule: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let in_other: Api<ConfigMap> = Api::namespaced(client.clone(), &other);
    in_rule
        .get("plain")
        .await
        .expect("plain lands in the rule's namespace");
    in_other
        .get("named")
        .await
        .expect("named keeps its own namespace");
    in_other.get("own").await.unwrap();
    let diff = run(&["diff", path]);
    assert_exit(&diff, 0);

    // The object leaves the file: diff names it in the rule's namespace, apply prunes it.
    write(
        root,
        "vendor/app/bundle.yaml",
        &configmap("named", Some(&other)),
    );
    let diff = run(&["diff", path]);
    assert_exit(&diff, 1);
    assert!(
        printed(&diff).contains(&format!("# prune: ConfigMap {ns}/plain left the specs")),
        "{}",
        show(&diff)
    );
    assert_exit(&run(&["apply", path]), 0);
    assert!(in_rule.get_opt("plain").await.unwrap().is_none());
    in_other.get("named").await.unwrap();
}

/// An `[[ignore]]` rule selecting Deployments by label: `kubectl scale` on a selected one
/// survives a re-apply and a daemon's resyncs with zero apiserver writes to Deployments;
/// an unselected one is scaled back. `serial_`: it counts the apiserver's own writes.
#[tokio::test]
async fn serial_an_ignore_rule_by_label_leaves_replicas_to_the_scaler() {
    let client = support::client().await;
    let ns = support::namespace(&client, "tignore").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    write(
        root,
        ".driftless.toml",
        "[[ignore]]\nkind = \"Deployment\"\nlabels = { autoscaled = \"true\" }\npaths = [\"/spec/replicas\"]\n",
    );
    write(
        root,
        "auto.yaml",
        &deployment("auto", &ns, "autoscaled: \"true\""),
    );
    write(root, "fixed.yaml", &deployment("fixed", &ns, "team: web"));
    // Ready: the Deployment controller's own first write (its revision annotation) is
    // made before the count starts.
    assert_exit(&run(&["apply", path, "--wait", "--timeout", "90s"]), 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert_eq!(replicas(&deployments, "auto").await, 2, "sent on create");

    support::kubectl(&["-n", &ns, "scale", "deployment/auto", "--replicas=4"]);
    // The count starts once the cluster's own writes to Deployments have stopped: the
    // Deployment controller's, and the namespace controller's deleting an earlier
    // test's Deployments.
    let before = support::apiserver_writes_when_quiet(&client, &["deployments"]).await;
    let out = run(&["apply", path]);
    assert_exit(&out, 0);
    support::assert_no_writes(&out);
    let diff = run(&["diff", path]);
    assert_exit(&diff, 0);
    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", path, "--resync", "2s"])
        .wait(WAIT)
        .start();
    daemon
        .wait_status("the first sync", |s| !s["last_sync"].is_null())
        .await;
    // Two resyncs at least.
    tokio::time::sleep(Duration::from_secs(5)).await;
    daemon
        .wait_status("a finished sync", |s| s["syncing"] == false)
        .await;
    let after = support::apiserver_writes(&client, &["deployments"]).await;
    assert_eq!(after - before, 0, "writes to Deployments: {}", daemon.log());
    assert_eq!(replicas(&deployments, "auto").await, 4);

    // Not selected: its replicas are driftless's, and scaling them is drift the daemon
    // corrects.
    support::kubectl(&["-n", &ns, "scale", "deployment/fixed", "--replicas=4"]);
    support::eventually("fixed scaled back to 2", WAIT, || async {
        match replicas(&deployments, "fixed").await {
            2 => Ok(()),
            n => Err(format!("{n} replicas")),
        }
    })
    .await;
    daemon.stop();
    assert_eq!(replicas(&deployments, "auto").await, 4);
}

/// An `[[ignore]]` rule by field manager: what another manager (an autoscaler) wrote is
/// left to it by apply and diff; the same edit on an unselected object is corrected.
#[tokio::test]
async fn an_ignore_rule_by_manager_leaves_that_managers_fields_alone() {
    let client = support::client().await;
    let ns = support::namespace(&client, "tmanager").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    write(
        root,
        ".driftless.toml",
        "[[ignore]]\nkind = \"Deployment\"\nname = \"scaled-.*\"\nmanagers = [\"test-scaler\"]\n",
    );
    write(root, "a.yaml", &deployment("scaled-a", &ns, "team: a"));
    write(root, "b.yaml", &deployment("other", &ns, "team: b"));
    assert_exit(&run(&["apply", path]), 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let scale = Patch::Merge(json!({"spec": {"replicas": 5}}));
    let by_scaler = PatchParams {
        field_manager: Some("test-scaler".into()),
        ..PatchParams::default()
    };
    deployments
        .patch("scaled-a", &by_scaler, &scale)
        .await
        .unwrap();
    let diff = run(&["diff", path]);
    assert_exit(&diff, 0);
    deployments
        .patch("other", &by_scaler, &scale)
        .await
        .unwrap();
    assert_exit(&run(&["apply", path]), 0);
    assert_eq!(replicas(&deployments, "scaled-a").await, 5, "the scaler's");
    assert_eq!(replicas(&deployments, "other").await, 2, "corrected");
    let out = run(&["apply", path]);
    assert_exit(&out, 0);
    support::assert_no_writes(&out);
    assert_exit(&run(&["diff", path]), 0);
}

pub(crate) fn widget_crd(group: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\nspec:\n  group: {group}\n  names: {{kind: Widget, plural: widgets, singular: widget}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    subresources: {{status: {{}}}}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n          status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
    )
}

/// A `[[health]]` rule judges a custom resource by its status, which the test sets
/// through the status subresource: `Broken` makes `apply --wait` exit 1 saying Failed
/// long before its timeout, `Ready` makes it ready. `failed` also names a field the
/// object never has (`status.error.code`): that part is false, and never holds anything
/// up. The daemon reports the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_rule_judges_a_custom_resource_by_its_status() {
    let client = support::client().await;
    let ns = support::namespace(&client, "thealth").await;
    let group = format!("{ns}.driftless.test");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap().to_string();
    write(
        root,
        ".driftless.toml",
        &format!(
            "[[health]]\napi-version = \"{group}/v1\"\nkind = \"Widget\"\ncurrent = \"status.phase == 'Ready'\"\nfailed = \"status.phase == 'Broken' || status.error.code > 0\"\nin-progress = \"status.phase == 'Pending'\"\n"
        ),
    );
    write(root, "crd.yaml", &widget_crd(&group));
    write(
        root,
        "widget.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: {ns}\nspec:\n  size: 3\n"
        ),
    );
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let set_phase = |phase: &'static str| {
        let widgets = widgets.clone();
        async move {
            let status = Patch::Merge(json!({"status": {"phase": phase}}));
            widgets
                .patch_status("w", &PatchParams::default(), &status)
                .await
                .unwrap();
        }
    };

    // No status yet: `apply --wait` waits; once the status says Broken, it stops.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .arg("--kubeconfig")
        .arg(support::admin_kubeconfig())
        .args([
            "--instance",
            &ns,
            "apply",
            &path,
            "--wait",
            "--timeout",
            "120s",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("DRIFTLESS_INSTANCE")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::eventually("the widget exists", WAIT, || async {
        match widgets.get_opt("w").await {
            Ok(Some(w)) => Ok(w),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "apply --wait returned before the widget had a status"
    );
    set_phase("Broken").await;
    let broken = Instant::now();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(said.contains("Failed"), "{}", show(&out));
    assert!(said.contains("status.phase == 'Broken'"), "{}", show(&out));
    // hang guard: it answers within seconds of the Broken status; one that waited out
    // its 120 s timeout would take nearly two minutes more.
    assert!(
        broken.elapsed() < Duration::from_secs(60),
        "it waited out its timeout instead of answering: {}",
        show(&out)
    );

    set_phase("Ready").await;
    let out = support::driftless_on_cluster(&ns, &["apply", &path, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);

    // The daemon's status: ready, then Failed with the rule's words.
    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", &path])
        .wait(WAIT)
        .start();
    let id = format!("manifest/{ns}/Widget.{group}/w");
    daemon
        .wait_status("the widget ready", |s| {
            support::spec_or_null(s, &id)["ready"] == true
        })
        .await;
    set_phase("Broken").await;
    let status = daemon
        .wait_status("the widget failed", |s| {
            support::spec_or_null(s, &id)["status"] == "Failed"
        })
        .await;
    let message = support::spec(&status, &id)["message"].to_string();
    assert!(message.contains("status.phase == 'Broken'"), "{message}");
    daemon.stop();
}

/// `${name}` from `[vars]`, overridden by `--var` and `--vars-file`; `$${name}` kept
/// literally; an object annotated `driftless.dev/substitute: disabled` and the files
/// `[substitute] skip` matches left alone; a plain `${n}` read as a number; an unset
/// variable a validation error at its place.
#[tokio::test]
async fn variables_are_substituted_strictly() {
    let client = support::client().await;
    let ns = support::namespace(&client, "tvars").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = root.to_str().unwrap();
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    write(
        root,
        ".driftless.toml",
        "[vars]\ncluster = \"staging\"\nreplicas = \"3\"\n\n[substitute]\nskip = [\"vendor/**\"]\n",
    );
    // A vendored file with shell of its own, skipped whole.
    write(
        root,
        "vendor/provisioner.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: provisioner\n  namespace: {ns}\ndata:\n  setup: mkdir -p ${{absolutePath}}\n"
        ),
    );
    write(
        root,
        "app.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-${{cluster}}\n  namespace: {ns}\ndata:\n  cluster: ${{cluster}}\n  literal: \"$${{cluster}}\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: script\n  namespace: {ns}\n  annotations:\n    driftless.dev/substitute: disabled\ndata:\n  run.sh: echo ${{HOME}} ${{cluster}}\n---\n{}",
            deployment("web", &ns, "team: web").replace("replicas: 2", "replicas: ${replicas}")
        ),
    );
    let validate = run(&["validate", path]);
    assert_exit(&validate, 0);
    assert!(
        printed(&validate).contains("settings: .driftless.toml: 2 variables\n"),
        "{}",
        show(&validate)
    );
    let render = run(&["render", path]);
    assert_exit(&render, 0);
    let yaml = printed(&render);
    for want in [
        "name: settings-staging",
        "cluster: staging",
        "literal: ${cluster}",
        "run.sh: echo ${HOME} ${cluster}",
        "setup: mkdir -p ${absolutePath}",
        "replicas: 3",
    ] {
        assert!(yaml.contains(want), "{want}: {}", show(&render));
    }
    let render = run(&["render", path, "--var", "cluster=prod"]);
    assert!(
        printed(&render).contains("name: settings-prod"),
        "{}",
        show(&render)
    );
    let vars_file = root.join("../cluster-vars.toml");
    std::fs::write(&vars_file, "cluster = \"east\"\n").unwrap();
    let vars_file = vars_file.to_str().unwrap();
    let render = run(&["render", path, "--vars-file", vars_file]);
    assert!(
        printed(&render).contains("name: settings-east"),
        "{}",
        show(&render)
    );
    let render = run(&[
        "render",
        path,
        "--vars-file",
        vars_file,
        "--var",
        "cluster=west",
    ]);
    assert!(
        printed(&render).contains("name: settings-west"),
        "{}",
        show(&render)
    );

    assert_exit(&run(&["apply", path, "--var", "cluster=prod"]), 0);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = cms
        .get("settings-prod")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    assert_eq!(data["cluster"], "prod");
    assert_eq!(data["literal"], "${cluster}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert_eq!(replicas(&deployments, "web").await, 3);

    // Unset: an error at the reference, and nothing applied.
    write(
        root,
        "more.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n  namespace: {ns}\ndata:\n  region: \"in ${{region}}\"\n"
        ),
    );
    let out = run(&["validate", path]);
    assert_exit(&out, 2);
    assert!(
        printed(&out).contains("more.yaml:7:15: variable `region` is not set"),
        "{}",
        show(&out)
    );
    assert_exit(&run(&["apply", path, "--var", "cluster=prod"]), 2);
    assert!(cms.get_opt("more").await.unwrap().is_none());
}

/// What is wrong in `.driftless.toml` is a validation error at its place: an expression
/// CEL cannot parse, a rule for a kind kstatus judges, an unknown setting.
#[test]
fn bad_settings_fail_validate_at_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        ".driftless.toml",
        "[[health]]\napi-version = \"example.com/v1\"\nkind = \"Widget\"\ncurrent = \"status.phase ==\"\n\n[[health]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\ncurrent = \"true\"\n\n[[namespace]]\npath = \"a/**\"\nnamespace = \"Not_A_Name\"\n\n[ignores]\n",
    );
    write(root, "cm.yaml", &configmap("x", Some("default")));
    let out = support::driftless(&["validate", root.to_str().unwrap()]);
    assert_exit(&out, 2);
    let said = printed(&out);
    for want in [
        ".driftless.toml:4:11: `current` is not a valid CEL expression",
        ".driftless.toml:7:15: apps/v1 is a Kubernetes kind",
        ".driftless.toml:13:13: invalid namespace \"Not_A_Name\"",
        ".driftless.toml:15:2: unknown setting `ignores` (did you mean `ignore`?)",
    ] {
        assert!(said.contains(want), "{want}: {}", show(&out));
    }
}

/// Variables are asked for: a tree without `[vars]`, read without `--var`, keeps every
/// `${...}` as written, as real bundles' scripts need (local-path-provisioner's
/// `mkdir -p ${absolutePath}`). With `--var`, the same tree is substituted strictly.
#[test]
fn without_vars_nothing_is_substituted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "script.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  namespace: default\ndata:\n  setup: mkdir -p ${absolutePath}\n",
    );
    let path = root.to_str().unwrap();
    let out = support::driftless(&["render", path]);
    assert_exit(&out, 0);
    assert!(
        printed(&out).contains("setup: mkdir -p ${absolutePath}"),
        "{}",
        show(&out)
    );
    let out = support::driftless(&["validate", path, "--var", "x=1"]);
    assert_exit(&out, 2);
    assert!(
        printed(&out).contains("script.yaml:7:19: variable `absolutePath` is not set"),
        "{}",
        show(&out)
    );
}

/// `[apps] directories` makes each directory it names an app of its own: a bad file in
/// one team's directory holds that team alone (its objects neither applied nor pruned),
/// the other team and the tree's own files are applied; without the setting the same
/// revision stops whole. One object claimed by two teams stops the whole revision.
#[tokio::test]
async fn directories_declared_apps_fail_alone() {
    let client = support::client().await;
    let ns = support::namespace(&client, "dir-apps").await;
    let run = |args: &[&str]| support::driftless_on_cluster(&ns, args);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tree = root.to_str().unwrap();
    let map = |name: &str, v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  v: \"{v}\"\n"
        )
    };
    write(
        root,
        ".driftless.toml",
        "[apps]\ndirectories = [\"teams/*\"]\n",
    );
    write(root, "shared.yaml", &map("shared", "1"));
    write(root, "teams/a/a.yaml", &map("a", "1"));
    write(root, "teams/b/b.yaml", &map("b", "1"));
    write(root, "teams/b/gone.yaml", &map("b-gone", "1"));
    assert_exit(&run(&["apply", tree]), 0);

    // Team b breaks (an invalid name) and drops an object in the same commit.
    for (name, v) in [("shared", "2"), ("a", "2")] {
        let file = if name == "shared" {
            "shared.yaml".to_string()
        } else {
            format!("teams/{name}/{name}.yaml")
        };
        write(root, &file, &map(name, v));
    }
    write(
        root,
        "teams/b/b.yaml",
        &(map("b", "2") + "---\n" + &map("Not_A_Name", "2")),
    );
    std::fs::remove_file(root.join("teams/b/gone.yaml")).unwrap();
    let out = support::driftless(&["validate", tree]);
    assert_exit(&out, 2);
    assert!(
        show(&out).contains("held: app dir/teams/b, neither applied nor pruned: teams/b/b.yaml:"),
        "{}",
        show(&out)
    );
    let out = run(&["apply", tree]);
    assert_exit(&out, 2);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let v = |m: ConfigMap| m.data.unwrap_or_default()["v"].clone();
    assert_eq!(v(maps.get("shared").await.unwrap()), "2", "{}", show(&out));
    assert_eq!(v(maps.get("a").await.unwrap()), "2");
    assert_eq!(
        v(maps.get("b").await.unwrap()),
        "1",
        "a held app's object was written"
    );
    assert!(
        maps.get_opt("b-gone").await.unwrap().is_some(),
        "a held app's object was pruned"
    );

    // Without the setting the tree is one app: nothing goes.
    write(root, ".driftless.toml", "");
    write(root, "shared.yaml", &map("shared", "3"));
    let out = run(&["apply", tree]);
    assert_exit(&out, 2);
    assert!(!show(&out).contains("held: app"), "{}", show(&out));
    assert_eq!(v(maps.get("shared").await.unwrap()), "2");

    // One object in two teams' directories is the tree's error.
    write(
        root,
        ".driftless.toml",
        "[apps]\ndirectories = [\"teams/*\"]\n",
    );
    write(
        root,
        "teams/b/b.yaml",
        &(map("b", "3") + "---\n" + &map("a", "3")),
    );
    let out = run(&["apply", tree]);
    assert_exit(&out, 2);
    assert!(show(&out).contains("duplicate spec"), "{}", show(&out));
    assert!(!show(&out).contains("held: app"), "{}", show(&out));
    assert_eq!(v(maps.get("shared").await.unwrap()), "2");

    // Fixed: team b is applied and what it dropped is pruned.
    write(root, "teams/b/b.yaml", &map("b", "3"));
    let out = run(&["apply", tree]);
    assert_exit(&out, 0);
    assert_eq!(v(maps.get("b").await.unwrap()), "3", "{}", show(&out));
    assert!(
        maps.get_opt("b-gone").await.unwrap().is_none(),
        "{}",
        show(&out)
    );
}
