//! What changed in Kubernetes since 1.20, each proven on the real apiserver: `scripts/test`
//! runs this file on the 1.37 lane and on the 1.34 one.
//!
//! - API versions Kubernetes removed are refused by `validate`, with no cluster;
//! - a CRD's CEL rule (`x-kubernetes-validations`) and a ValidatingAdmissionPolicy refuse
//!   in one line naming the object and the rule's or the policy's message;
//! - what a MutatingAdmissionPolicy adds is not drift: a re-apply writes nothing and diff
//!   is quiet (on 1.34 the lane turns the beta API on);
//! - a Pod with a sidecar (an init container that restarts always) counts as running and
//!   its Deployment becomes ready;
//! - an object `kubectl create` made is adopted so that a field the tree drops goes;
//! - what the apiserver warns of (`Warning` headers) is shown once per object;
//! - a field the schema does not have refuses the whole revision, at its `file:line:col`.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;
use support::{assert_exit, assert_no_writes, printed, show};

/// The cluster's minor version (37 or 34).
async fn minor(client: &kube::Client) -> u32 {
    let v = client.apiserver_version().await.unwrap();
    v.minor.trim_end_matches('+').parse().unwrap()
}

fn write(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// Each of `instances` applies an empty tree: what it made is pruned.
fn uninstall(instances: &[&str]) {
    let empty = tempfile::tempdir().unwrap();
    for instance in instances {
        let out = support::driftless_on_cluster(
            instance,
            &[
                "apply",
                empty.path().to_str().unwrap(),
                "--allow-mass-prune",
            ],
        );
        assert_exit(&out, 0);
    }
}

#[test]
fn a_removed_api_version_is_refused_by_validate_with_no_cluster() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "psp.yaml",
        "# from a 2019 chart\napiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: restricted\nspec:\n  privileged: false\n",
    );
    write(
        dir.path(),
        "cron.yaml",
        "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: nightly, namespace: ops}\nspec: {schedule: '@daily'}\n",
    );
    let out = support::driftless(&["validate", dir.path().to_str().unwrap()]);
    assert_exit(&out, 2);
    let said = printed(&out);
    assert!(
        said.lines().any(|l| l.ends_with(
            "psp.yaml:2:1: policy/v1beta1 PodSecurityPolicy was removed in Kubernetes 1.25 (use Pod Security Admission: namespace labels pod-security.kubernetes.io/*)"
        )),
        "{}",
        show(&out)
    );
    assert!(
        said.lines().any(|l| l.ends_with(
            "cron.yaml:1:1: batch/v1beta1 CronJob was removed in Kubernetes 1.25 (use batch/v1)"
        )),
        "{}",
        show(&out)
    );
}

/// A CRD whose `spec.replicas` is at most 5 by a CEL rule, and a custom resource that
/// breaks it; a ValidatingAdmissionPolicy that refuses a ConfigMap with a `forbidden` key
/// in this test's namespace, and one that has it.
#[tokio::test]
async fn a_cel_rule_and_an_admission_policy_refuse_in_one_line_each() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-cel").await;
    let group = format!("{ns}.driftless.test");
    let dir = tempfile::tempdir().unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [{"rule": "self.replicas <= 5", "message": "a widget runs at most 5 replicas"}],
                        "properties": {"replicas": {"type": "integer"}}}}}}}]}});
    let policy = format!("{ns}-no-forbidden-keys");
    let vap = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "!has(object.data) || !('forbidden' in object.data)",
                "message": "no ConfigMap may hold a forbidden key"}]}});
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy},
        "spec": {"policyName": policy, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}});
    for (file, doc) in [
        ("crd.json", &crd),
        ("vap.json", &vap),
        ("binding.json", &binding),
    ] {
        write(dir.path(), file, &doc.to_string());
    }
    let out = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&out, 0);

    // The policy takes effect once the apiserver has read it: a dry-run create of the
    // ConfigMap it refuses says when.
    let probe: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "probe", "namespace": ns}, "data": {"forbidden": "x"}}))
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    support::eventually("the policy in force", Duration::from_secs(60), || {
        let (cms, probe) = (cms.clone(), probe.clone());
        async move {
            match cms
                .create(
                    &kube::api::PostParams {
                        dry_run: true,
                        ..Default::default()
                    },
                    &probe,
                )
                .await
            {
                Err(kube::Error::Api(e)) if e.code == 403 || e.code == 422 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;

    let app = tempfile::tempdir().unwrap();
    write(
        app.path(),
        "app.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: big, namespace: {ns}}}\nspec: {{replicas: 9}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}}}\ndata: {{forbidden: 'yes'}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: fine, namespace: {ns}}}\ndata: {{a: b}}\n"
        ),
    );
    let app_instance = format!("{ns}-app");
    for verb in ["diff", "apply"] {
        let out =
            support::driftless_on_cluster(&app_instance, &[verb, app.path().to_str().unwrap()]);
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{verb}: {}",
            show(&out)
        );
        let said = printed(&out);
        let one_line = |object: &str, words: &str| {
            said.lines()
                .any(|l| l.contains(object) && l.contains(words) && l.chars().count() < 400)
        };
        assert!(
            one_line(
                &format!("Widget.{group} {ns}/big"),
                "a widget runs at most 5 replicas"
            ),
            "{verb}: {}",
            show(&out)
        );
        assert!(
            one_line(
                &format!("ConfigMap {ns}/settings"),
                "no ConfigMap may hold a forbidden key"
            ) && one_line(&format!("ConfigMap {ns}/settings"), &policy),
            "{verb}: {}",
            show(&out)
        );
        assert!(!said.contains("Status {"), "{verb}: a dump: {}", show(&out));
    }

    uninstall(&[&app_instance, &ns]);
}

/// A MutatingAdmissionPolicy that labels every ConfigMap of this test's namespace: the
/// label is the policy's, not drift.
#[tokio::test]
async fn serial_a_mutating_admission_policys_change_is_not_drift() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-map").await;
    // GA (v1) in 1.36; the 1.34 lane serves the beta.
    let version = if minor(&client).await >= 36 {
        "v1"
    } else {
        "v1beta1"
    };
    let policy = format!("{ns}-label-configmaps");
    let dir = tempfile::tempdir().unwrap();
    let map = json!({
        "apiVersion": format!("admissionregistration.k8s.io/{version}"), "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": policy},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": "Object{metadata: Object.metadata{labels: {\"mutated-by\": \"policy\"}}}"}}]}});
    let binding = json!({
        "apiVersion": format!("admissionregistration.k8s.io/{version}"), "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": policy},
        "spec": {"policyName": policy,
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}});
    write(dir.path(), "map.json", &map.to_string());
    write(dir.path(), "binding.json", &binding.to_string());
    let out = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&out, 0);

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    support::eventually("the policy in force", Duration::from_secs(60), || {
        let cms = cms.clone();
        let ns = ns.clone();
        async move {
            let probe: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": "probe", "namespace": ns}}))
                    .unwrap();
            let made = cms
                .create(
                    &kube::api::PostParams {
                        dry_run: true,
                        ..Default::default()
                    },
                    &probe,
                )
                .await
                .map_err(|e| e.to_string())?;
            match made.metadata.labels.unwrap_or_default().get("mutated-by") {
                Some(v) if v == "policy" => Ok(()),
                _ => Err("not labelled yet".to_string()),
            }
        }
    })
    .await;

    let app = tempfile::tempdir().unwrap();
    write(
        app.path(),
        "settings.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}, labels: {{team: web}}}}\ndata: {{a: b}}\n"
        ),
    );
    let app_instance = format!("{ns}-app");
    let path = app.path().to_str().unwrap();
    let out = support::driftless_on_cluster(&app_instance, &["apply", path]);
    assert_exit(&out, 0);
    let live = cms.get("settings").await.unwrap();
    let labels = live.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("mutated-by").map(String::as_str), Some("policy"));
    assert_eq!(labels.get("team").map(String::as_str), Some("web"));

    // The policy's label is not ours to take back: nothing to write, nothing to show.
    let before = support::apiserver_writes_when_quiet(&client, &["configmaps"]).await;
    let out = support::driftless_on_cluster(&app_instance, &["apply", path]);
    assert_exit(&out, 0);
    assert_no_writes(&out);
    let after = support::apiserver_writes(&client, &["configmaps"]).await;
    assert_eq!(after - before, 0, "a re-apply wrote\n{}", show(&out));
    let diff = support::driftless_on_cluster(&app_instance, &["diff", path]);
    assert_exit(&diff, 0);

    // A change of ours still goes through, with the policy's label kept.
    write(
        app.path(),
        "settings.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}, labels: {{team: web}}}}\ndata: {{a: c}}\n"
        ),
    );
    let out = support::driftless_on_cluster(&app_instance, &["apply", path]);
    assert_exit(&out, 0);
    let live = cms.get("settings").await.unwrap();
    assert_eq!(live.data.unwrap_or_default()["a"], "c");
    let diff = support::driftless_on_cluster(&app_instance, &["diff", path]);
    assert_exit(&diff, 0);

    uninstall(&[&app_instance, &ns]);
}

/// A Deployment whose Pods run a sidecar (an init container that restarts always, GA in
/// 1.33): `apply --wait` sees it ready, not stuck on an init container that never ends.
#[tokio::test]
async fn a_deployment_with_a_sidecar_becomes_ready() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-sidecar").await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "web.yaml",
        &format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      initContainers:
      - {{name: migrate, image: example.org/migrate:1}}
      - {{name: proxy, image: example.org/proxy:1, restartPolicy: Always}}
      containers:
      - {{name: web, image: nginx:1.27}}
"#
        ),
    );
    let out = support::driftless_on_cluster(
        &ns,
        &[
            "apply",
            dir.path().to_str().unwrap(),
            "--wait",
            "--timeout",
            "2m",
        ],
    );
    assert_exit(&out, 0);
    assert!(
        printed(&out).contains("ready"),
        "apply --wait said nothing of readiness: {}",
        show(&out)
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    let list = pods.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    for p in list.items {
        let st = p.status.unwrap();
        let sidecar = st
            .init_container_statuses
            .unwrap()
            .into_iter()
            .find(|c| c.name == "proxy")
            .unwrap();
        assert!(sidecar.ready && sidecar.state.unwrap().running.is_some());
    }
}

/// A ConfigMap `kubectl create` made, with keys a and b, adopted by a tree that has only a:
/// b goes, with no conflict and nothing else to do.
#[tokio::test]
async fn what_kubectl_create_made_is_adopted_and_a_dropped_field_goes() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-create").await;
    support::kubectl(&[
        "create",
        "configmap",
        "prefs",
        "-n",
        &ns,
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "prefs.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: prefs, namespace: {ns}}}\ndata: {{a: '1'}}\n"
        ),
    );
    let out =
        support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap(), "--adopt"]);
    assert_exit(&out, 0);
    let live = Api::<ConfigMap>::namespaced(client, &ns)
        .get("prefs")
        .await
        .unwrap();
    let data = live.data.unwrap_or_default();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["a"], "{data:?}");
    let managers: Vec<String> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        !managers.iter().any(|m| m == "kubectl-create"),
        "{managers:?}"
    );
    let diff = support::driftless_on_cluster(&ns, &["diff", dir.path().to_str().unwrap()]);
    assert_exit(&diff, 0);
}

/// The apiserver's `Warning` headers (here: a node label deprecated since 1.14) are shown
/// once per object: under its spec in `apply`'s output (not again once it is unchanged),
/// in the status per spec, in `driftless status` and in the UI.
#[tokio::test]
async fn the_apiservers_warnings_are_shown_once_per_object() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-warn").await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "web.yaml",
        &format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      nodeSelector: {{beta.kubernetes.io/arch: amd64}}
      containers:
      - {{name: web, image: nginx:1.27}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: quiet, namespace: {ns}}}
data: {{a: "1"}}
"#
        ),
    );
    let said = "spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use \"kubernetes.io/arch\" instead";
    let line = format!("  warning Deployment.apps {ns}/web: {said}");
    let out = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&out, 0);
    let text = printed(&out);
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("warning"))
            .collect::<Vec<_>>(),
        [line.as_str()],
        "{}",
        show(&out)
    );
    // Said of the write: an unchanged object is not warned of again.
    let again = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&again, 0);
    assert_no_writes(&again);
    assert!(!printed(&again).contains("warning"), "{}", show(&again));
    uninstall(&[&ns]);

    // The daemon keeps it on the spec while the object stands as written.
    let mut daemon = support::Daemon::builder(&ns)
        .args(&["--dir", dir.path().to_str().unwrap()])
        .start();
    let id = format!("manifest/{ns}/Deployment.apps/web");
    let want = format!("Deployment.apps {ns}/web: {said}");
    let status = daemon
        .wait_status("the spec's warning in the status", |s| {
            s["specs"].as_array().is_some_and(|specs| {
                specs
                    .iter()
                    .any(|spec| spec["id"] == id.as_str() && spec["warnings"] == json!([want]))
            })
        })
        .await;
    let quiet = status["specs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == format!("manifest/{ns}/ConfigMap/quiet"))
        .unwrap();
    assert!(quiet.get("warnings").is_none(), "{quiet}");
    let table = daemon.status_table();
    assert!(
        table.contains(&format!("warnings:         1\n  {id}: {want}\n")),
        "{table}"
    );
    let browser = support::Browser::start().await;
    browser
        .goto(&format!("http://{}/#/spec/{id}", daemon.metrics))
        .await;
    browser
        .wait_for_text("#detail-body", &["Warnings from the apiserver", &want])
        .await;
    browser.close().await;
    assert_eq!(daemon.stop(), Some(0));
    uninstall(&[&ns]);
}

/// Strict field validation refuses the whole revision: a field the schema does not have
/// and a list entry given twice are each one line at the manifest's `file:line:col` naming
/// the field, and the apiserver counts no write (the Namespace and the fine ConfigMap of
/// the same revision are not made). Fixed, the revision applies.
#[tokio::test]
async fn serial_a_field_the_schema_lacks_refuses_the_whole_revision() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-strict").await;
    let dir = tempfile::tempdir().unwrap();
    let tree = |replicas_key: &str, second_port: &str| {
        format!(
            r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}-more}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: fine, namespace: {ns}}}
data: {{a: "1"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  {replicas_key}: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{{containerPort: 80}}, {{containerPort: {second_port}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec:
  ports: [{{port: 80}}]
  selector: {{app: web}}
  sessionAffinityy: None
"#
        )
    };
    write(dir.path(), "app.yaml", &tree("replicass", "81"));
    let resources = ["namespaces", "configmaps", "deployments", "services"];
    let before = support::apiserver_writes_when_quiet(&client, &resources).await;
    let out = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&out, 1);
    let text = printed(&out);
    for line in [
        format!("  failed Deployment.apps {ns}/web: app.yaml:10:1: unknown field spec.replicass"),
        format!("  failed Service {ns}/web: app.yaml:24:1: unknown field spec.sessionAffinityy"),
        "stopped: the apiserver refused 2 objects of this revision (a field its schema does not have, or given twice): nothing of it was applied, and nothing was pruned".to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "no line {line:?}\n{}", show(&out));
    }
    assert_no_writes(&out);
    assert_eq!(
        support::apiserver_writes(&client, &resources).await,
        before,
        "the apiserver counted writes\n{}",
        show(&out)
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(configmaps.get_opt("fine").await.unwrap().is_none());

    // The typo fixed, a port given twice is the one refusal left.
    write(
        dir.path(),
        "app.yaml",
        &tree("replicas", "80").replace("  sessionAffinityy: None\n", ""),
    );
    let out = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&out, 1);
    assert!(
        printed(&out).lines().any(|l| l
            == format!("  failed Deployment.apps {ns}/web: app.yaml:10:1: duplicate entries for key [containerPort=80,protocol=\"TCP\"] in spec.template.spec.containers[name=\"web\"].ports")),
        "{}",
        show(&out)
    );
    assert_no_writes(&out);

    write(
        dir.path(),
        "app.yaml",
        &tree("replicas", "81").replace("  sessionAffinityy: None\n", ""),
    );
    let out = support::driftless_on_cluster(&ns, &["apply", dir.path().to_str().unwrap()]);
    assert_exit(&out, 0);
    assert!(configmaps.get_opt("fine").await.unwrap().is_some());
    uninstall(&[&ns]);
}

/// A field of a custom resource is judged by the schema its CRD has once applied: an
/// upgrade that adds the field to the CRD and uses it in the same revision applies (the CRD
/// first); a field an unchanged CRD does not have refuses the revision at its place.
#[tokio::test]
async fn a_field_a_crd_upgrade_adds_applies_with_it() {
    let client = support::client().await;
    let ns = support::namespace(&client, "k8s-crd-up").await;
    let group = format!("{ns}.driftless.test");
    let dir = tempfile::tempdir().unwrap();
    let crd = |fields: serde_json::Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("gadgets.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": fields}}}}}]}})
        .to_string()
    };
    let gadget = |spec: &str| {
        format!(
            "apiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: g, namespace: {ns}}}\nspec: {spec}\n"
        )
    };
    write(
        dir.path(),
        "crd.json",
        &crd(json!({"size": {"type": "integer"}})),
    );
    write(dir.path(), "gadget.yaml", &gadget("{size: 1}"));
    let path = dir.path().to_str().unwrap();
    let out = support::driftless_on_cluster(&ns, &["apply", path]);
    assert_exit(&out, 0);

    // The upgrade: the CRD gains `colour`, and the gadget says it.
    write(
        dir.path(),
        "crd.json",
        &crd(json!({"size": {"type": "integer"}, "colour": {"type": "string"}})),
    );
    write(dir.path(), "gadget.yaml", &gadget("{size: 1, colour: red}"));
    let out = support::driftless_on_cluster(&ns, &["apply", path]);
    assert_exit(&out, 0);

    // A field the CRD, unchanged, does not have: the revision is refused.
    write(
        dir.path(),
        "gadget.yaml",
        &gadget("{size: 2, colour: red, weight: 3}"),
    );
    let out = support::driftless_on_cluster(&ns, &["apply", path]);
    assert_exit(&out, 1);
    assert!(
        printed(&out).lines().any(|l| l
            == format!(
                "  failed Gadget.{group} {ns}/g: gadget.yaml:1:1: unknown field spec.weight"
            )),
        "{}",
        show(&out)
    );
    assert_no_writes(&out);
    uninstall(&[&ns]);
}
