//! A Flux repository, laid out as `flux bootstrap` and Flux's kustomize example lay one out
//! (`clusters/staging/flux-system/`, Kustomizations for infrastructure and apps, a base and
//! an overlay), taken to the test cluster by driftless with no Flux controller present:
//! Flux's Kustomizations are carried out (path, targetNamespace, namePrefix, images,
//! patches, postBuild.substitute, commonMetadata, dependsOn) and its HelmRelease rendered
//! from a chart repository on loopback, its own install is left out,
//! an upgrade is applied, a pull request is previewed per Flux app, and a Kustomization
//! removed from the tree is pruned. What is not carried out is an error at its place, and
//! nothing is applied.

use crate::support;

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use support::{
    assert_exit, driftless_helm4 as offline, driftless_helm4_on_cluster as on_cluster, git,
    printed, show, write_file as write,
};

/// What `flux bootstrap` commits (its install cut down to two objects: the real one is
/// the same kind of object, 6,000 lines of them), and the repository's own layout.
fn repository(root: &Path, ns: &str, tag: &str, charts: &str) {
    write(
        root,
        "clusters/staging/flux-system/gotk-components.yaml",
        "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n  labels:\n    app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: source-controller\n  namespace: flux-system\n  labels:\n    app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux\n",
    );
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m0s\n  ref:\n    branch: main\n  secretRef:\n    name: flux-system\n  url: ssh://git@github.com/acme/fleet\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m0s\n  path: ./clusters/staging\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    write(
        root,
        "clusters/staging/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- gotk-components.yaml\n- gotk-sync.yaml\n",
    );
    write(
        root,
        "clusters/staging/infrastructure.yaml",
        &format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: infra-configs\n  namespace: flux-system\nspec:\n  interval: 1h\n  retryInterval: 1m\n  timeout: 5m\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  path: ./infrastructure/configs\n  targetNamespace: {ns}\n  prune: true\n  wait: true\n"
        ),
    );
    write(
        root,
        "clusters/staging/apps.yaml",
        &format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 10m0s\n  dependsOn:\n    - name: infra-configs\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  path: ./apps/staging\n  prune: true\n  wait: true\n  targetNamespace: {ns}\n  namePrefix: stg-\n  commonMetadata:\n    labels:\n      team: shop\n  images:\n    - name: nginx\n      newTag: \"{tag}\"\n  patches:\n    - patch: |\n        - op: replace\n          path: /spec/replicas\n          value: 2\n      target:\n        kind: Deployment\n  postBuild:\n    substitute:\n      cluster_env: staging\n"
        ),
    );
    // No kustomization.yaml: Flux generates one from the manifests.
    write(
        root,
        "infrastructure/configs/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: infra-settings\ndata:\n  tier: shared\n",
    );
    write(
        root,
        "apps/base/web/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deployment.yaml\n- config.yaml\n",
    );
    write(
        root,
        "apps/base/web/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.0\n",
    );
    write(
        root,
        "apps/base/web/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  env: ${cluster_env}\n  greeting: ${greeting:=hello}\n",
    );
    write(
        root,
        "apps/staging/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base/web\n- ../base/podinfo\npatches:\n- path: podinfo-values.yaml\n  target:\n    kind: HelmRelease\n",
    );
    // As Flux's example keeps a chart: a HelmRelease in the base, the overlay's values
    // patched in; its HelmRepository with the infrastructure (out of the apps'
    // namePrefix, which would rename it and not the reference, in Flux too).
    write(
        root,
        "apps/base/podinfo/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- release.yaml\n",
    );
    write(
        root,
        "infrastructure/configs/podinfo-repository.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\nspec:\n  interval: 5m\n  url: {charts}\n"
        ),
    );
    write(
        root,
        "apps/base/podinfo/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  releaseName: podinfo\n  chart:\n    spec:\n      chart: podinfo\n      version: \">=6.0.0\"\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n  interval: 50m\n  install:\n    remediation:\n      retries: 3\n  values:\n    replicaCount: 1\n    hpa:\n      enabled: false\n",
    );
    write(
        root,
        "apps/staging/podinfo-values.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  values:\n    ui:\n      message: staging\n",
    );
}

#[tokio::test]
async fn a_flux_repository_installs_upgrades_previews_and_prunes_with_no_flux_controller() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    let charts_dir = tempfile::tempdir().unwrap();
    let charts = crate::helm::ChartRepo::start(charts_dir.path());
    repository(root, &ns, "1.27.0", &charts.url);
    commit(root, "bootstrap");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();

    let out = offline(&["validate", cluster]);
    assert_exit(&out, 0);
    let said = printed(&out);
    for line in [
        "rendered: apps.yaml#flux.flux-system.apps: Flux Kustomization flux-system/apps: kubectl kustomize apps/staging",
        "rendered: infrastructure.yaml#flux.flux-system.infra-configs: Flux Kustomization flux-system/infra-configs: kubectl kustomize infrastructure/configs",
        "notice: 2 objects of Flux's own install (gotk-components) not applied",
    ] {
        assert!(said.contains(line), "no {line:?} in\n{said}");
    }
    assert!(said.contains("valid: 5 specs"), "{said}");
    let release = "rendered: apps.yaml#flux.flux-system.apps#flux-helm.NS.stg-podinfo: helm template podinfo podinfo --namespace NS --repo ";
    assert!(said.contains(&release.replace("NS", &ns)), "{said}");

    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let web = deployments.get("stg-web").await.unwrap();
    let labels = web.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("shop"));
    assert_eq!(
        labels
            .get("kustomize.toolkit.fluxcd.io/name")
            .map(String::as_str),
        Some("apps")
    );
    let spec = web.spec.clone();
    assert_eq!(spec.replicas, Some(2), "the patch");
    let image = spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx:1.27.0"), "the image override");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let config = maps.get("stg-web-config").await.unwrap().data.unwrap();
    assert_eq!(config.get("env").map(String::as_str), Some("staging"));
    assert_eq!(config.get("greeting").map(String::as_str), Some("hello"));
    assert!(
        maps.get("infra-settings").await.is_ok(),
        "the infrastructure"
    );
    // The HelmRelease, as a release of the chart from the loopback repository, with the
    // overlay's values.
    let podinfo = deployments.get("podinfo").await.unwrap();
    assert_ui_message(&podinfo, "staging");
    // Flux's own install and its objects were not applied: no GitRepository or
    // Kustomization kind exists, and nothing of flux-system was written.
    let diff = on_cluster(&ns, &["diff", cluster, "--output", "json"]);
    assert_exit(&diff, 0);

    // A pull request: the image tag moves. Previewed per Flux app, with no cluster.
    repository(root, &ns, "1.27.1", &charts.url);
    let preview = offline(&["diff", "--base", "main", cluster, "--output", "json"]);
    assert_exit(&preview, 1);
    let doc: serde_json::Value = serde_json::from_slice(&preview.stdout).unwrap();
    assert_eq!(
        doc["apps"],
        serde_json::json!([{"app": "flux/flux-system/apps", "summary": {"create": 0, "update": 1, "replace": 0, "prune": 0, "error": 0}}]),
        "{doc:#}"
    );
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let web = deployments.get("stg-web").await.unwrap();
    let image = web.spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx:1.27.1"));

    // The apps Kustomization leaves the tree: what it applied is pruned, the rest stays.
    std::fs::remove_file(root.join("clusters/staging/apps.yaml")).unwrap();
    // Two of three objects go: past the prune guard's default share.
    let out = on_cluster(&ns, &["apply", cluster, "--allow-mass-prune"]);
    assert_exit(&out, 0);
    assert!(
        deployments.get_opt("stg-web").await.unwrap().is_none(),
        "{}",
        show(&out)
    );
    assert!(deployments.get_opt("podinfo").await.unwrap().is_none());
    assert!(maps.get("infra-settings").await.is_ok());
}

/// A field that changes what Flux would do and driftless does not carry out, or a source
/// that is another repository: one line at its place, and that Kustomization is held
/// while the rest is applied (with `--all-or-nothing`, nothing is applied).
#[tokio::test]
async fn what_driftless_does_not_carry_out_is_refused_at_its_place() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-refused").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    repository(root, &ns, "1.27.0", "http://127.0.0.1:9");
    git(root, &["init", "-q", "-b", "main"]);
    let apps = root.join("clusters/staging/apps.yaml");
    let text = std::fs::read_to_string(&apps).unwrap();
    std::fs::write(
        &apps,
        text.replace(
            "  prune: true\n",
            "  prune: true\n  kubeConfig:\n    secretRef:\n      name: remote\n",
        ),
    )
    .unwrap();
    let cluster = root.join("clusters/staging");
    // A remote cluster's Secret the operator declared as no cluster's (here, none).
    let refused = "apps.yaml:15:1: Kustomization flux-system/apps: its kubeConfig Secret flux-system/remote is not a declared cluster's (`secret` in --clusters): the declared clusters are in-cluster (home); nothing is applied\n";
    let out = on_cluster(
        &ns,
        &["apply", cluster.to_str().unwrap(), "--all-or-nothing"],
    );
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with(refused), "{}", show(&out));
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(
        maps.get_opt("infra-settings").await.unwrap().is_none(),
        "something was applied"
    );

    // Without it that Kustomization is held alone, said last; its sibling is applied.
    let out = on_cluster(&ns, &["apply", cluster.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        show(&out).contains(&format!(
            "held: app flux/flux-system/apps, neither applied nor pruned: {}",
            refused.trim_end()
        )),
        "{}",
        show(&out)
    );
    assert!(
        maps.get_opt("infra-settings").await.unwrap().is_some(),
        "{}",
        show(&out)
    );
}

/// A Kustomization whose build is written out in full is read whatever its size: 1,500
/// objects (the YAML parser's own budget stopped at 1,024 documents, and said so in its
/// own structure); and a source of the wrong type holds only what reads it, said at its
/// field, while its sibling renders.
#[test]
fn a_large_build_renders_and_a_broken_source_holds_only_its_readers() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    let sync = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\nspec:\n  url: https://example.com/fleet\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: flux-system}\nspec:\n  path: ./clusters/x\n  sourceRef: {kind: GitRepository, name: flux-system}\n";
    write(root, "clusters/x/sync.yaml", sync);
    write(
        root,
        "clusters/x/apps.yaml",
        &kustomization("shop", "many", ""),
    );
    let many: String = (0..1500)
        .map(|i| config_map(&format!("c{i}"), "x"))
        .collect();
    write(root, "many/maps.yaml", &many);
    git(root, &["init", "-q", "-b", "main"]);
    let cluster = root.join("clusters/x");
    let out = offline(&["render", cluster.to_str().unwrap()]);
    assert_exit(&out, 0);
    let rendered = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        rendered.matches("kind: ConfigMap").count(),
        1500,
        "{}",
        show(&out)
    );

    let broken = "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: other, namespace: flux-system}\nspec:\n  url: [https://example.com/other]\n";
    let reads_it = kustomization("shop", "few", "").replace("name: flux-system}", "name: other}");
    write(
        root,
        "clusters/x/other.yaml",
        &format!("{broken}{reads_it}"),
    );
    write(root, "few/maps.yaml", &config_map("f", "y"));
    let out = offline(&["validate", cluster.to_str().unwrap()]);
    assert_exit(&out, 2);
    let said = show(&out);
    assert!(
        said.contains("held: app flux/flux-system/few, neither applied nor pruned: other.yaml:6:1: Kustomization flux-system/few: its GitRepository flux-system/other is refused (`spec.url` is a list, not a string); nothing is applied"),
        "{said}"
    );
    assert!(
        said.contains("1 app held: the rest of the tree is valid"),
        "{said}"
    );
}

/// A Kustomization's `healthCheckExprs` judge the custom resources it applies, as Flux
/// judges them: a status the `failed` expression holds for makes `apply --wait` exit 1
/// with the expression and where it is written, the `current` one makes it ready. A
/// Widget of the same kind written outside that Kustomization has no status at all and
/// is ready at once: the rule is the Kustomization's, not the tree's. A daemon judges
/// the same, and logs once that it left Flux's own install out.
#[tokio::test]
async fn health_check_exprs_judge_what_their_kustomization_applies() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-health").await;
    let group = format!("{ns}.driftless.test");
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/widgets.yaml",
        &format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: widgets\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./widgets\n  prune: true\n  wait: true\n  targetNamespace: {ns}\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  healthCheckExprs:\n    - apiVersion: {group}/v1\n      kind: Widget\n      failed: status.phase == 'Broken'\n      current: status.phase == 'Ready'\n"
        ),
    );
    write(
        root,
        "clusters/staging/crd.yaml",
        &crate::tree_settings::widget_crd(&group),
    );
    write(
        root,
        "clusters/staging/plain.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: plain\n  namespace: {ns}\nspec:\n  size: 1\n"
        ),
    );
    write(
        root,
        "widgets/widget.yaml",
        &format!("apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 3\n"),
    );
    // Flux's own install, as bootstrap commits it: left out, with a notice.
    write(
        root,
        "clusters/staging/flux-system/gotk-components.yaml",
        FLUX_INSTALL,
    );
    commit(root, "widgets");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);

    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let set_phase = |phase: &'static str| {
        let widgets = widgets.clone();
        async move {
            let status = kube::api::Patch::Merge(serde_json::json!({"status": {"phase": phase}}));
            widgets
                .patch_status("w", &kube::api::PatchParams::default(), &status)
                .await
                .unwrap();
        }
    };
    set_phase("Broken").await;
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "90s"]);
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(
        said.contains("failed: status.phase == 'Broken' (rule at widgets.yaml:19:1)"),
        "{}",
        show(&out)
    );
    set_phase("Ready").await;
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "90s"]);
    assert_exit(&out, 0);
    assert!(widgets.get("plain").await.is_ok());

    // The daemon judges it by the same rule.
    let mut daemon = support::Daemon::builder(&ns)
        .args(&["--dir", cluster])
        .wait(std::time::Duration::from_secs(90))
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
    assert!(
        message.contains("status.phase == 'Broken' (rule at widgets.yaml:19:1)"),
        "{message}"
    );
    daemon.stop();
    let log = daemon.log();
    let notice = "1 object of Flux's own install (gotk-components) not applied";
    assert_eq!(log.matches(notice).count(), 1, "once: {log}");
}

/// `suspend: true` as Flux's controller keeps it: what the Kustomization applies is left
/// as it is (nothing created, changed or pruned, also an object its path no longer holds),
/// the rest of the tree is applied, and once resumed what was held back goes through.
#[tokio::test]
async fn a_suspended_kustomization_is_left_as_it_is_until_it_is_resumed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-suspend").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        GOTK_SYNC,
    );
    let kustomizations = |suspend: bool| {
        kustomization(&ns, "apps", "")
            + &kustomization(&ns, "extra", &format!("  suspend: {suspend}\n"))
    };
    let map = config_map;
    write(root, "clusters/staging/apps.yaml", &kustomizations(true));
    write(root, "apps/config.yaml", &map("a", "one"));
    write(
        root,
        "extra/config.yaml",
        &(map("b", "one") + &map("c", "one")),
    );
    commit(root, "suspended");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = |m: &ConfigMap| m.data.clone().unwrap_or_default()["v"].clone();

    // Suspended from the start: nothing of it is created.
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "60s"]);
    assert_exit(&out, 0);
    assert!(
        show(&out).contains("left as they are: 2 specs suspended in the tree: Flux Kustomization flux-system/extra is suspended (suspend: true)"),
        "{}",
        show(&out)
    );
    assert!(maps.get("a").await.is_ok(), "{}", show(&out));
    assert!(maps.get_opt("b").await.unwrap().is_none(), "{}", show(&out));

    // Resumed: applied.
    write(root, "clusters/staging/apps.yaml", &kustomizations(false));
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    let b = maps.get("b").await.unwrap();
    assert!(maps.get("c").await.is_ok(), "{}", show(&out));

    // Suspended again: a change and a removal are held back (the apiserver's own
    // resourceVersion says b was not written; c is not pruned).
    write(root, "clusters/staging/apps.yaml", &kustomizations(true));
    write(root, "extra/config.yaml", &map("b", "two"));
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    let still = maps.get("b").await.unwrap();
    assert_eq!(data(&still), "one", "{}", show(&out));
    assert_eq!(
        still.metadata.resource_version,
        b.metadata.resource_version,
        "{}",
        show(&out)
    );
    assert!(maps.get("c").await.is_ok(), "not pruned: {}", show(&out));

    // Resumed again: what was held back goes through.
    write(root, "clusters/staging/apps.yaml", &kustomizations(false));
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    assert_eq!(data(&maps.get("b").await.unwrap()), "two", "{}", show(&out));
    assert!(
        maps.get_opt("c").await.unwrap().is_none(),
        "pruned: {}",
        show(&out)
    );
}

/// One Kustomization whose build fails (a patch that matches nothing, as kustomize
/// refuses it) holds itself and what depends on it, and nothing else: its siblings are
/// applied, its own objects are neither changed nor pruned, `validate`, `diff` and `apply`
/// say so last and exit 2; `--all-or-nothing` stops the whole revision instead. Fixed in
/// the next commit, it is applied; removed, only its objects are pruned.
#[tokio::test]
async fn a_broken_kustomization_holds_only_itself_and_its_dependents() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-held").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        GOTK_SYNC,
    );
    let k = |name: &str, extra: &str| kustomization(&ns, name, extra);
    let broken = "  patches:\n    - patch: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: missing\n        data:\n          v: x\n";
    let kustomizations = |extra: &str, with_extra: bool| {
        let mut all = k("apps", "");
        if with_extra {
            all += &k("extra", extra);
            all += &k("later", "  dependsOn:\n    - name: extra\n");
        }
        all
    };
    let map = config_map;
    write(
        root,
        "clusters/staging/apps.yaml",
        &kustomizations("", true),
    );
    write(root, "apps/config.yaml", &map("a", "one"));
    write(
        root,
        "extra/config.yaml",
        &(map("b", "one") + &map("c", "one")),
    );
    write(root, "later/config.yaml", &map("d", "one"));
    commit(root, "three apps");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = |m: &ConfigMap| m.data.clone().unwrap_or_default()["v"].clone();

    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    let b = maps.get("b").await.unwrap();
    let d = maps.get("d").await.unwrap();

    // extra breaks, and in the same commit every app changes and extra drops c.
    write(
        root,
        "clusters/staging/apps.yaml",
        &kustomizations(broken, true),
    );
    write(root, "apps/config.yaml", &map("a", "two"));
    write(root, "extra/config.yaml", &map("b", "two"));
    write(root, "later/config.yaml", &map("d", "two"));
    let held_line = "held: app flux/flux-system/extra, neither applied nor pruned: apps.yaml:";
    let waits = "held: app flux/flux-system/later, neither applied nor pruned: apps.yaml:";
    let out = offline(&["validate", cluster]);
    assert_exit(&out, 2);
    let said = show(&out);
    assert!(said.contains(held_line) && said.contains(waits), "{said}");
    assert!(
        said.contains("Kustomization flux-system/later: waits for Kustomization flux-system/extra, which is held"),
        "{said}"
    );

    // All or nothing: nothing of the revision is applied.
    let out = on_cluster(&ns, &["apply", cluster, "--all-or-nothing"]);
    assert_exit(&out, 2);
    assert_eq!(data(&maps.get("a").await.unwrap()), "one", "{}", show(&out));

    // The live diff shows the sibling's change, not the held apps' (no prune of c).
    let out = on_cluster(&ns, &["diff", cluster]);
    assert_exit(&out, 2);
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("two"), "{}", show(&out));
    assert!(
        !diff.contains(&format!("{ns}/c")) && !diff.contains(&format!("{ns}/b")),
        "{}",
        show(&out)
    );
    assert!(show(&out).contains(held_line), "{}", show(&out));
    let out = on_cluster(&ns, &["diff", cluster, "--output", "json"]);
    assert_exit(&out, 2);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let held: Vec<&str> = doc["held"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["app"].as_str())
        .collect();
    assert_eq!(
        held,
        ["flux/flux-system/extra", "flux/flux-system/later"],
        "{doc:#}"
    );

    // The preview of the same change with no cluster: the held apps as the base has
    // them (no prune shown), said beside the others' changes.
    let out = offline(&["diff", "--base", "main", cluster, "--output", "json"]);
    assert_exit(&out, 2);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let apps: Vec<&str> = doc["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["app"].as_str())
        .collect();
    assert_eq!(apps, ["flux/flux-system/apps"], "{doc:#}");
    assert_eq!(doc["held"].as_array().map(Vec::len), Some(2), "{doc:#}");

    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.trim_end().ends_with(
            "2 apps held: the rest of the tree is valid (--all-or-nothing stops it all)"
        ),
        "{}",
        show(&out)
    );
    assert_eq!(data(&maps.get("a").await.unwrap()), "two", "{}", show(&out));
    for (held, before) in [("b", &b), ("d", &d)] {
        let now = maps.get(held).await.unwrap();
        assert_eq!(
            now.metadata.resource_version,
            before.metadata.resource_version,
            "{held} written: {}",
            show(&out)
        );
    }
    assert!(maps.get("c").await.is_ok(), "c pruned: {}", show(&out));

    // The daemon holds the same two apps and says so: the status file (each error with
    // its app), `driftless status` (not converged), the metric.
    let mut daemon = support::Daemon::builder(&ns)
        .args(&["--dir", cluster])
        .start();
    let status = daemon
        .wait_status("the held apps in the status", |s| {
            s["errors"].as_array().is_some_and(|e| {
                e.iter().any(|e| e["app"] == "flux/flux-system/later")
                    && e.iter().all(|e| e["app"].is_string())
            }) && s["last_sync"]["result"] == "success"
        })
        .await;
    assert_eq!(
        status["errors"].as_array().map(Vec::len),
        Some(2),
        "{status:#}"
    );
    let table = driftless_status(&daemon);
    assert!(
        table.contains("app flux/flux-system/extra held, neither applied nor pruned")
            && !table.starts_with("exit Some(0)"),
        "{table}"
    );
    let (_, metrics) = support::http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert!(metrics.contains("driftless_apps_held 2"), "{metrics}");
    daemon.stop();
    for (held, before) in [("b", &b), ("d", &d)] {
        let now = maps.get(held).await.unwrap();
        assert_eq!(
            now.metadata.resource_version,
            before.metadata.resource_version,
            "{held} written by the daemon: {}",
            daemon.log()
        );
    }
    assert!(
        maps.get("c").await.is_ok(),
        "c pruned by the daemon: {}",
        daemon.log()
    );

    // Fixed in the next commit: applied, c pruned.
    write(
        root,
        "clusters/staging/apps.yaml",
        &kustomizations("", true),
    );
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    assert_eq!(data(&maps.get("b").await.unwrap()), "two", "{}", show(&out));
    assert_eq!(data(&maps.get("d").await.unwrap()), "two", "{}", show(&out));
    assert!(maps.get_opt("c").await.unwrap().is_none(), "{}", show(&out));

    // Removed (with what depends on it): only their objects are pruned.
    write(
        root,
        "clusters/staging/apps.yaml",
        &kustomizations("", false),
    );
    let out = on_cluster(&ns, &["apply", cluster, "--allow-mass-prune"]);
    assert_exit(&out, 0);
    assert!(maps.get_opt("b").await.unwrap().is_none(), "{}", show(&out));
    assert!(maps.get_opt("d").await.unwrap().is_none(), "{}", show(&out));
    assert_eq!(data(&maps.get("a").await.unwrap()), "two", "{}", show(&out));
}

/// A GitOps tool's own install with nothing of the tree to carry out in its place (no
/// Flux Kustomization or HelmRelease, no Argo CD Application) is a bundle like any other:
/// installed, a no-op with no write, upgraded and uninstalled. Here each is cut down to
/// objects of the test's namespace, labelled as the real installs label theirs.
#[tokio::test]
async fn a_tools_own_install_alone_is_a_bundle_like_any_other() {
    let client = support::client().await;
    let ns = support::namespace(&client, "own-install").await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let installs = [
        (
            "gotk-components.yaml",
            "app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux",
            "source-controller",
        ),
        (
            "install.yaml",
            "app.kubernetes.io/name: argocd-cm\n    app.kubernetes.io/part-of: argocd",
            "argocd-cm",
        ),
    ];
    for (file, labels, name) in installs {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        let install = |v: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    {labels}\ndata:\n  v: {v}\n"
            )
        };
        write(root, file, &install("one"));
        let tree = root.to_str().unwrap();
        let out = offline(&["validate", tree]);
        assert_exit(&out, 0);
        assert!(!show(&out).contains("own install"), "{}", show(&out));
        let out = on_cluster(&ns, &["apply", tree]);
        assert_exit(&out, 0);
        assert!(maps.get(name).await.is_ok(), "{}", show(&out));
        let out = on_cluster(&ns, &["apply", tree]);
        assert_exit(&out, 0);
        support::assert_no_writes(&out);
        write(root, file, &install("two"));
        let out = on_cluster(&ns, &["apply", tree]);
        assert_exit(&out, 0);
        let data = maps.get(name).await.unwrap().data.unwrap_or_default();
        assert_eq!(data["v"], "two", "{}", show(&out));
        std::fs::remove_file(root.join(file)).unwrap();
        write(root, "README.md", "uninstalled\n");
        let out = on_cluster(&ns, &["apply", tree, "--allow-mass-prune"]);
        assert_exit(&out, 0);
        assert!(
            maps.get_opt(name).await.unwrap().is_none(),
            "{}",
            show(&out)
        );
    }
}

/// What `driftless status` says of a daemon's status file, its exit status beside.
fn driftless_status(daemon: &support::Daemon) -> String {
    let out = support::driftless(&[
        "status",
        "--status-file",
        &daemon.status_file().to_string_lossy(),
    ]);
    format!("exit {:?}\n{}", out.status.code(), show(&out))
}

/// The layout of Flux's kustomize-helm example as it is kept now: an `ArtifactGenerator`
/// cuts `infrastructure/` and `apps/` into artifacts, `infra-controllers` installs an
/// operator's chart from an OCI registry (an `OCIRepository` `chartRef`, its CRD in the
/// chart), `infra-configs` waits for it and applies a custom resource of that CRD with a
/// patch, and `apps` waits for both and releases podinfo from a chart repository, its
/// staging values patched in. Installed, upgraded (a new chart version) and uninstalled on
/// the test cluster by driftless, with every source on loopback and no Flux controller.
#[tokio::test]
async fn the_example_layout_of_artifacts_installs_upgrades_and_uninstalls() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-example").await;
    let group = format!("{ns}.driftless.test");
    let work = tempfile::tempdir().unwrap();
    for dir in ["charts", "registry"] {
        std::fs::create_dir_all(work.path().join(dir)).unwrap();
    }
    let charts = crate::helm::ChartRepo::start(&work.path().join("charts"));
    let registry = support::TestRegistry::plain(&work.path().join("registry"));
    // The operator's chart: its CRD, and a Deployment of its controller.
    let operator = work.path().join("widget-operator");
    write(
        &operator,
        "Chart.yaml",
        "apiVersion: v2\nname: widget-operator\nversion: 1.2.0\n",
    );
    write(
        &operator,
        "crds/widgets.yaml",
        &format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\nspec:\n  group: {group}\n  names: {{kind: Widget, plural: widgets, singular: widget}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
        ),
    );
    write(
        &operator,
        "templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: widget-operator}\n  template:\n    metadata:\n      labels: {app: widget-operator}\n    spec:\n      containers:\n        - name: manager\n          image: example.com/widget-operator:1.2.0\n",
    );
    let helm = support::helm4();
    for args in [
        vec![
            "package",
            operator.to_str().unwrap(),
            "-d",
            work.path().to_str().unwrap(),
        ],
        vec![
            "push",
            work.path()
                .join("widget-operator-1.2.0.tgz")
                .to_str()
                .unwrap(),
            &format!("oci://{}/charts", registry.host),
            "--plain-http",
        ],
    ] {
        let out = std::process::Command::new(&helm)
            .args(&args)
            .env("HOME", work.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/flux-system/gotk-components.yaml",
        FLUX_INSTALL,
    );
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        GOTK_SYNC,
    );
    write(
        root,
        "clusters/staging/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\n",
    );
    write(
        root,
        "clusters/staging/artifacts.yaml",
        "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  sources:\n    - alias: monorepo\n      kind: GitRepository\n      name: flux-system\n  artifacts:\n    - name: infrastructure\n      originRevision: \"@monorepo\"\n      copy:\n        - from: \"@monorepo/infrastructure/**\"\n          to: \"@artifact/\"\n          exclude: [\"**/testdata/**\", \"*.md\"]\n    - name: apps\n      originRevision: \"@monorepo\"\n      copy:\n        - from: \"@monorepo/apps/base/**\"\n          to: \"@artifact/base/\"\n        - from: \"@monorepo/apps/staging/**\"\n          to: \"@artifact/staging/\"\n        - from: \"@monorepo/apps/overrides/podinfo-values.yaml\"\n          to: \"@artifact/staging/podinfo-values.yaml\"\n          strategy: Merge\n",
    );
    write(
        root,
        "clusters/staging/infrastructure.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: infra-controllers\n  namespace: flux-system\nspec:\n  interval: 1h\n  retryInterval: 2m\n  timeout: 5m\n  sourceRef:\n    kind: ExternalArtifact\n    name: infrastructure\n  path: ./controllers\n  prune: true\n  wait: true\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: infra-configs\n  namespace: flux-system\nspec:\n  dependsOn:\n    - name: infra-controllers\n  interval: 1h\n  sourceRef:\n    kind: ExternalArtifact\n    name: infrastructure\n  path: ./configs\n  prune: true\n  patches:\n    - patch: |\n        - op: replace\n          path: /spec/size\n          value: 3\n      target:\n        kind: Widget\n        name: main\n",
    );
    write(
        root,
        "clusters/staging/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  dependsOn:\n    - name: infra-configs\n  interval: 1h\n  sourceRef:\n    kind: ExternalArtifact\n    name: apps\n  path: ./staging\n  prune: true\n  wait: true\n",
    );
    write(
        root,
        "infrastructure/controllers/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - widget-operator.yaml\n",
    );
    write(
        root,
        "infrastructure/controllers/widget-operator.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: widget-operator\n  namespace: {ns}\nspec:\n  interval: 24h\n  url: oci://{}/charts/widget-operator\n  insecure: true\n  layerSelector:\n    mediaType: \"application/vnd.cncf.helm.chart.content.v1.tar+gzip\"\n    operation: copy\n  ref:\n    semver: \"1.x\"\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: widget-operator\n  namespace: {ns}\nspec:\n  interval: 12h\n  install:\n    strategy:\n      name: RetryOnFailure\n  upgrade:\n    strategy:\n      name: RetryOnFailure\n  chartRef:\n    kind: OCIRepository\n    name: widget-operator\n",
            registry.host
        ),
    );
    // No kustomization here: Flux's generator takes every manifest below, so the
    // fixture under testdata/ would be applied but for the copy rule's `exclude`.
    write(
        root,
        "infrastructure/configs/testdata/fixture.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: fixture\n  namespace: {ns}\nspec:\n  size: 9\n"
        ),
    );
    write(
        root,
        "infrastructure/configs/README.md",
        "# not a manifest\n",
    );
    write(
        root,
        "infrastructure/configs/widget.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: main\n  namespace: {ns}\nspec:\n  size: 1\n"
        ),
    );
    write(
        root,
        "apps/base/podinfo/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\nresources:\n  - repository.yaml\n  - release.yaml\n"
        ),
    );
    write(
        root,
        "apps/base/podinfo/repository.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\nspec:\n  interval: 5m\n  url: {}\n",
            charts.url
        ),
    );
    write(
        root,
        "apps/base/podinfo/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  interval: 50m\n  releaseName: podinfo\n  chart:\n    spec:\n      chart: podinfo\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n  install:\n    strategy:\n      name: RetryOnFailure\n  values:\n    replicaCount: 1\n    hpa:\n      enabled: false\n",
    );
    write(
        root,
        "apps/staging/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base/podinfo\npatches:\n  - path: podinfo-values.yaml\n    target:\n      kind: HelmRelease\n",
    );
    let staging_values = |version: &str| {
        format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  chart:\n    spec:\n      version: \"{version}\"\n  test:\n    enable: false\n  values:\n    ui:\n      message: staging\n"
        )
    };
    write(
        root,
        "apps/staging/podinfo-values.yaml",
        &staging_values("6.0.x"),
    );
    // Merged into the staging patch by the apps artifact's last copy rule.
    write(
        root,
        "apps/overrides/podinfo-values.yaml",
        "spec:\n  values:\n    ui:\n      message: staging, merged\n",
    );
    commit(root, "bootstrap");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();

    // Installed: the operator from the registry, its CRD and the patched resource, then
    // the app from the chart repository.
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.get("widget-operator").await.is_ok());
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let widget = widgets.get("main").await.unwrap();
    assert_eq!(widget.data["spec"]["size"], 3, "infra-configs' patch");
    assert!(
        widgets.get_opt("fixture").await.unwrap().is_none(),
        "excluded from the artifact"
    );
    let chart_of = |d: &Deployment| {
        d.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("helm.sh/chart")
            .cloned()
    };
    let podinfo = deployments.get("podinfo").await.unwrap();
    assert_eq!(chart_of(&podinfo).as_deref(), Some("podinfo-6.0.0"));
    assert_ui_message(&podinfo, "staging, merged");

    // Upgraded: the staging values ask for any version from the repository.
    write(
        root,
        "apps/staging/podinfo-values.yaml",
        &staging_values(">=1.0.0-alpha"),
    );
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let podinfo = deployments.get("podinfo").await.unwrap();
    assert_eq!(chart_of(&podinfo).as_deref(), Some("podinfo-6.2.3"));

    // Uninstalled: the Kustomizations and the generator leave the tree.
    for f in ["apps.yaml", "infrastructure.yaml", "artifacts.yaml"] {
        std::fs::remove_file(root.join("clusters/staging").join(f)).unwrap();
    }
    let out = on_cluster(&ns, &["apply", cluster, "--allow-mass-prune"]);
    assert_exit(&out, 0);
    for name in ["podinfo", "widget-operator"] {
        assert!(
            deployments.get_opt(name).await.unwrap().is_none(),
            "{name}: {}",
            show(&out)
        );
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    support::eventually(
        "the operator's CRD gone",
        std::time::Duration::from_secs(90),
        || async {
            match crds.get_opt(&format!("widgets.{group}")).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Flux's multi-tenancy layout: the platform's Kustomization gives a tenant a
/// ServiceAccount and a Role (ConfigMaps only) in its namespace, and the tenant's
/// Kustomization, with `serviceAccountName`, applies what the tenant keeps. driftless
/// writes as that account may: its ConfigMap is applied, its Secret is refused in one line
/// and never written, as Flux's impersonation refuses it.
#[tokio::test]
async fn a_tenants_kustomization_writes_only_what_its_service_account_may() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-tenant").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/tenants.yaml",
        &format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: tenants\n  namespace: flux-system\nspec:\n  interval: 5m\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n  path: ./tenants/base\n  prune: true\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: {ns}\nspec:\n  dependsOn:\n    - name: tenants\n      namespace: flux-system\n  serviceAccountName: dev-team\n  interval: 5m\n  sourceRef: {{kind: GitRepository, name: flux-system, namespace: flux-system}}\n  path: ./dev-team\n  targetNamespace: {ns}\n  prune: true\n"
        ),
    );
    let rbac = |verbs: &str| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: dev-team\n  namespace: {ns}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: dev-team\n  namespace: {ns}\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [{verbs}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: dev-team\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: dev-team\nsubjects:\n  - kind: ServiceAccount\n    name: dev-team\n    namespace: {ns}\n"
        )
    };
    let all = "get, list, watch, create, patch, update, delete";
    write(root, "tenants/base/rbac.yaml", &rbac(all));
    let map = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: \"1\"\n---\n"
        )
    };
    let secret =
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: forbidden\nstringData:\n  token: x\n";
    write(
        root,
        "dev-team/app.yaml",
        &format!(
            "{}{}{}{secret}",
            map("allowed"),
            map("kept"),
            map("also-kept")
        ),
    );
    commit(root, "tenants");
    let cluster = root.join("clusters/staging");
    let out = on_cluster(&ns, &["apply", cluster.to_str().unwrap()]);
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(
        said.contains(&format!(
            "failed Secret {ns}/forbidden: ServiceAccount {ns}/dev-team may not create it"
        )),
        "{}",
        show(&out)
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(maps.get("allowed").await.is_ok(), "{}", show(&out));
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    assert!(secrets.get_opt("forbidden").await.unwrap().is_none());

    // What the account applied, it prunes: with delete taken from its Role, a ConfigMap
    // that leaves the tenant's tree stays, and says why (the Secret left too: a failed
    // apply would stop the sync before any prune).
    write(
        root,
        "tenants/base/rbac.yaml",
        &rbac("get, list, watch, create, patch, update"),
    );
    write(
        root,
        "dev-team/app.yaml",
        &format!("{}{}", map("kept"), map("also-kept")),
    );
    commit(root, "no delete");
    let out = on_cluster(&ns, &["apply", cluster.to_str().unwrap()]);
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(
        said.contains(&format!("ServiceAccount {ns}/dev-team may not delete it")),
        "{}",
        show(&out)
    );
    assert!(maps.get("allowed").await.is_ok(), "{}", show(&out));
    // Given delete again, the account prunes it.
    write(root, "tenants/base/rbac.yaml", &rbac(all));
    commit(root, "delete");
    let out = on_cluster(&ns, &["apply", cluster.to_str().unwrap()]);
    assert_exit(&out, 0);
    assert!(
        maps.get_opt("allowed").await.unwrap().is_none(),
        "{}",
        show(&out)
    );
    assert!(maps.get("kept").await.is_ok());
}

/// A HelmRelease's kustomize post-renderers (`patches`, `images`) run over the chart's
/// output before it is applied, in order, as Flux's helm-controller runs them; a second
/// render of the unchanged release runs neither helm nor kustomize (the render cache).
#[tokio::test]
async fn a_helm_releases_post_renderers_patch_what_the_chart_renders() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-post").await;
    let work = tempfile::tempdir().unwrap();
    let charts = crate::helm::ChartRepo::start(work.path());
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/podinfo.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\n  namespace: {ns}\nspec:\n  url: {}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: {ns}\nspec:\n  chart:\n    spec:\n      chart: podinfo\n      version: 6.2.3\n      sourceRef: {{kind: HelmRepository, name: podinfo}}\n  values:\n    hpa: {{enabled: false}}\n  postRenderers:\n    - kustomize:\n        patches:\n          - target: {{kind: Deployment, name: podinfo}}\n            patch: |\n              - op: add\n                path: /metadata/labels/team\n                value: shop\n        images:\n          - name: ghcr.io/stefanprodan/podinfo\n            newName: registry.example/podinfo\n    - kustomize:\n        patches:\n          - target: {{kind: Deployment, name: podinfo}}\n            patch: |\n              - op: replace\n                path: /metadata/labels/team\n                value: web\n",
            charts.url
        ),
    );
    commit(root, "podinfo");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();
    let cache = work.path().join("cache");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args(args)
            .args(["--helm", &support::helm4()])
            .env_remove("KUBECONFIG")
            .env("DRIFTLESS_CACHE_DIR", &cache)
            .env("RUST_LOG", "driftless::hydrate=info")
            .output()
            .unwrap()
    };
    let kubeconfig = support::admin_kubeconfig();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let apply = || {
        run(&[
            "--kubeconfig",
            kubeconfig,
            "--instance",
            &ns,
            "apply",
            cluster,
        ])
    };
    let out = apply();
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let podinfo = deployments.get("podinfo").await.unwrap();
    let labels = podinfo.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("team").map(String::as_str),
        Some("web"),
        "the second renderer after the first"
    );
    let image = podinfo.spec.template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default();
    assert!(image.starts_with("registry.example/podinfo:"), "{image}");
    let renders = |out: &std::process::Output| {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("rendered") && l.contains("ok=true"))
            .count()
    };
    // With no cluster (a cluster's API versions, which other tests change, are part of
    // helm's key), a second render of the unchanged release runs no tool.
    let rendered = work.path().join("rendered");
    let rendered = rendered.to_str().unwrap();
    let first = run(&["render", cluster, "--out", rendered]);
    assert_exit(&first, 0);
    assert!(renders(&first) >= 1, "{}", show(&first));
    let written: String = walkdir(std::path::Path::new(rendered))
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    assert!(
        written.contains("\"image\": \"registry.example/podinfo:")
            && written.contains("\"team\": \"web\""),
        "{written}"
    );
    let again = run(&["render", cluster, "--out", rendered]);
    assert_exit(&again, 0);
    assert_eq!(renders(&again), 0, "{}", show(&again));
}

/// Every file under `dir`.
fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match p.is_dir() {
            true => out.extend(walkdir(&p)),
            false => out.push(p),
        }
    }
    out
}

/// A repository of `root`'s files, on branch main, as the tree is read from.
fn commit(root: &Path, message: &str) {
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", message]);
}

/// Bootstrap's GitRepository and the Kustomization of the tree being read, at
/// `clusters/staging`.
/// A HelmRelease whose chart fails to render holds only itself and the HelmRelease that
/// `dependsOn` it: the sibling release and the Kustomization beside them are applied, the
/// held releases' objects are left as they were; fixed, it is applied; removed, only its
/// objects are pruned. A `[helm.NAME]` release is an app of its own the same way.
#[tokio::test]
async fn a_broken_release_holds_only_itself_and_what_depends_on_it() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-release-held").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        GOTK_SYNC,
    );
    write(
        root,
        "charts/maps/Chart.yaml",
        "apiVersion: v2\nname: maps\nversion: 1.0.0\n",
    );
    write(
        root,
        "charts/maps/templates/map.yaml",
        "{{- if .Values.broken }}{{ fail \"broken on purpose\" }}{{ end }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  v: {{ .Values.v | quote }}\n",
    );
    let release = |name: &str, values: &str, extra: &str| {
        format!(
            "---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/maps\n      sourceRef: {{kind: GitRepository, name: flux-system, namespace: flux-system}}\n  values: {values}\n{extra}"
        )
    };
    let releases = |broken: &str, with_broken: bool| {
        let mut all = release("sibling", "{v: one}", "");
        if with_broken {
            all += &release("shaky", &format!("{{v: one{broken}}}"), "");
            all += &release("after", "{v: one}", "  dependsOn:\n    - name: shaky\n");
        }
        all + &kustomization(&ns, "apps", "")
    };
    write(root, "clusters/staging/apps.yaml", &releases("", true));
    write(root, "apps/config.yaml", &config_map("plain", "one"));
    commit(root, "three releases");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = |m: &ConfigMap| m.data.clone().unwrap_or_default()["v"].clone();
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    let shaky = maps.get("shaky").await.unwrap();

    // shaky breaks, in the same commit as a change to every release and the Kustomization.
    let two = |s: &str| s.replace("v: one", "v: two");
    write(
        root,
        "clusters/staging/apps.yaml",
        &two(&releases(", broken: true", true)),
    );
    write(root, "apps/config.yaml", &config_map("plain", "two"));
    commit(root, "shaky breaks");
    let held = format!("held: app flux-helm/{ns}/shaky, neither applied nor pruned: apps.yaml:");
    let waits = format!("held: app flux-helm/{ns}/after, neither applied nor pruned: apps.yaml:");
    let out = offline(&["validate", cluster]);
    assert_exit(&out, 2);
    let said = show(&out);
    assert!(
        said.contains(&held) && said.contains("broken on purpose"),
        "{said}"
    );
    assert!(
        said.contains(&waits)
            && said.contains(&format!(
                "HelmRelease {ns}/after: waits for HelmRelease {ns}/shaky, which is held"
            )),
        "{said}"
    );
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 2);
    assert!(show(&out).contains(&held), "{}", show(&out));
    for (name, v) in [
        ("sibling", "two"),
        ("plain", "two"),
        ("shaky", "one"),
        ("after", "one"),
    ] {
        assert_eq!(
            data(&maps.get(name).await.unwrap()),
            v,
            "{name}: {}",
            show(&out)
        );
    }
    assert_eq!(
        maps.get("shaky").await.unwrap().metadata.resource_version,
        shaky.metadata.resource_version,
        "a held release's objects are not written"
    );

    // Fixed: applied.
    write(
        root,
        "clusters/staging/apps.yaml",
        &two(&releases("", true)),
    );
    commit(root, "shaky fixed");
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    for name in ["shaky", "after"] {
        assert_eq!(
            data(&maps.get(name).await.unwrap()),
            "two",
            "{}",
            show(&out)
        );
    }

    // Removed: only its objects (and its dependent's) are pruned.
    write(
        root,
        "clusters/staging/apps.yaml",
        &two(&releases("", false)),
    );
    commit(root, "shaky and after removed");
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);
    for name in ["shaky", "after"] {
        assert!(
            maps.get_opt(name).await.unwrap().is_none(),
            "{name}: {}",
            show(&out)
        );
    }
    for name in ["sibling", "plain"] {
        assert_eq!(
            data(&maps.get(name).await.unwrap()),
            "two",
            "{}",
            show(&out)
        );
    }

    // A `[helm.NAME]` release whose chart fails holds only itself too.
    let ns = support::namespace(&client, "helm-release-held").await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let tree = tempfile::tempdir().unwrap();
    let t = tree.path();
    std::fs::create_dir_all(t.join("charts")).unwrap();
    for f in ["Chart.yaml", "templates/map.yaml"] {
        write(
            t,
            &format!("charts/maps/{f}"),
            &std::fs::read_to_string(root.join("charts/maps").join(f)).unwrap(),
        );
    }
    let toml = |broken: bool| {
        format!(
            "[helm.good]\nnamespace = \"{ns}\"\nchart = \"charts/maps\"\nrelease-name = \"toml-good\"\nvalues = {{ v = \"three\" }}\n\n[helm.bad]\nnamespace = \"{ns}\"\nchart = \"charts/maps\"\nrelease-name = \"toml-bad\"\nvalues = {{ v = \"three\", broken = {broken} }}\n"
        )
    };
    write(t, "apps.toml", &toml(true));
    let t = t.to_str().unwrap();
    let out = on_cluster(&ns, &["apply", t]);
    assert_exit(&out, 2);
    assert!(
        show(&out).contains("held: app helm/bad, neither applied nor pruned: apps.toml:"),
        "{}",
        show(&out)
    );
    assert_eq!(data(&maps.get("toml-good").await.unwrap()), "three");
    assert!(maps.get_opt("toml-bad").await.unwrap().is_none());
}

/// An object the apiserver refuses (a field its schema lacks) holds the app it is in: a
/// sibling Kustomization is applied, the held one's objects are neither applied nor pruned
/// (one it drops stays), and the refusal is said in one line with the app;
/// `--all-or-nothing` stops the whole revision instead.
#[tokio::test]
async fn an_object_the_apiserver_refuses_holds_its_app_alone() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-refused").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        GOTK_SYNC,
    );
    let apps = kustomization(&ns, "apps", "") + &kustomization(&ns, "extra", "");
    write(root, "clusters/staging/apps.yaml", &apps);
    write(root, "apps/config.yaml", &config_map("a", "one"));
    write(
        root,
        "extra/config.yaml",
        &(config_map("b", "one") + &config_map("c", "one")),
    );
    commit(root, "two apps");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = |m: &ConfigMap| m.data.clone().unwrap_or_default()["v"].clone();
    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 0);

    write(root, "apps/config.yaml", &config_map("a", "two"));
    write(
        root,
        "extra/config.yaml",
        &(config_map("b", "two")
            + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicass: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: nginx:1.27}]\n"),
    );
    commit(root, "extra refused");
    let out = on_cluster(&ns, &["apply", cluster, "--all-or-nothing"]);
    assert_exit(&out, 1);
    assert!(
        printed(&out).contains("stopped: the apiserver refused 1 object"),
        "{}",
        show(&out)
    );
    assert_eq!(data(&maps.get("a").await.unwrap()), "one", "{}", show(&out));

    let out = on_cluster(&ns, &["apply", cluster]);
    assert_exit(&out, 2);
    let line = format!(
        "held: app flux/flux-system/extra, neither applied nor pruned: the apiserver refused Deployment.apps {ns}/web: "
    );
    assert!(
        show(&out)
            .lines()
            .any(|l| l.starts_with(&line) && l.contains("unknown field spec.replicass")),
        "{}",
        show(&out)
    );
    assert_eq!(data(&maps.get("a").await.unwrap()), "two", "{}", show(&out));
    assert_eq!(data(&maps.get("b").await.unwrap()), "one", "{}", show(&out));
    assert!(
        maps.get_opt("c").await.unwrap().is_some(),
        "a held app's object was pruned"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.get_opt("web").await.unwrap().is_none());
}

const GOTK_SYNC: &str = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m\n  ref: {branch: main}\n  url: https://git.example.com/fleet\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./clusters/staging\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n";

/// A Kustomization `name` of this repository building `./name` into namespace `ns`, with
/// `extra` lines of its spec.
fn kustomization(ns: &str, name: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n  path: ./{name}\n  targetNamespace: {ns}\n  prune: true\n{extra}"
    )
}

/// A ConfigMap `name` whose `v` is `v`, as one document.
fn config_map(name: &str, v: &str) -> String {
    format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: {v}\n")
}

/// Flux's own install as bootstrap commits it, cut down to one of its objects.
const FLUX_INSTALL: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n  labels:\n    app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux\n";

/// podinfo's Deployment shows `message` (its `ui.message` value, as its first container's
/// PODINFO_UI_MESSAGE).
#[track_caller]
fn assert_ui_message(podinfo: &Deployment, message: &str) {
    let spec = podinfo.spec.clone();
    let env = spec.template.spec.unwrap_or_default().containers[0]
        .env
        .clone()
        .unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e.name == "PODINFO_UI_MESSAGE" && e.value.as_deref() == Some(message)),
        "{env:?}"
    );
}

/// Flux's multi-tenancy layout (fluxcd/flux2-multi-tenancy), the tenant's repository kept
/// as a branch of this one: the platform's `tenants` Kustomization (as Flux's
/// `kustomize-controller`) gives the tenant a ServiceAccount bound to `cluster-admin` in
/// its namespace and the tenant's own GitRepository and Kustomization, which comes after
/// it and releases podinfo from a chart repository on loopback as the tenant's account.
/// Installed, upgraded and uninstalled by driftless with no Flux controller.
#[tokio::test]
async fn the_multi_tenancy_layout_installs_upgrades_and_uninstalls() {
    let client = support::client().await;
    let ns = support::namespace(&client, "flux-tenancy").await;
    let work = tempfile::tempdir().unwrap();
    let charts = crate::helm::ChartRepo::start(work.path());
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "clusters/staging/flux-system/gotk-components.yaml",
        FLUX_INSTALL,
    );
    write(
        root,
        "clusters/staging/flux-system/gotk-sync.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m\n  ref: {branch: main}\n  url: https://github.com/acme/flux2-multi-tenancy\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./clusters/staging\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
    );
    write(
        root,
        "clusters/staging/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\n",
    );
    write(
        root,
        "clusters/staging/tenants.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: tenants\n  namespace: flux-system\nspec:\n  serviceAccountName: kustomize-controller\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  path: ./tenants/staging\n  prune: true\n  interval: 1h\n  timeout: 5m\n",
    );
    // The tenant's namespace is the test's (made already), not written here.
    write(
        root,
        "tenants/base/dev-team/rbac.yaml",
        &format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  labels:\n    toolkit.fluxcd.io/tenant: dev-team\n  name: flux\n  namespace: {ns}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  labels:\n    toolkit.fluxcd.io/tenant: dev-team\n  name: dev-team-reconciler\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: gotk:{ns}:reconciler\n- kind: ServiceAccount\n  name: flux\n  namespace: {ns}\n"
        ),
    );
    write(
        root,
        "tenants/base/dev-team/sync.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: dev-team\n  namespace: {ns}\nspec:\n  interval: 1m\n  url: https://github.com/acme/flux2-multi-tenancy\n  ref:\n    branch: dev-team\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: {ns}\nspec:\n  serviceAccountName: flux\n  interval: 5m\n  sourceRef:\n    kind: GitRepository\n    name: dev-team\n  prune: true\n"
        ),
    );
    write(
        root,
        "tenants/base/dev-team/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - rbac.yaml\n  - sync.yaml\n",
    );
    write(
        root,
        "tenants/staging/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base/dev-team\npatches:\n  - path: dev-team-patch.yaml\n",
    );
    write(
        root,
        "tenants/staging/dev-team-patch.yaml",
        &format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: {ns}\nspec:\n  path: ./staging\n"
        ),
    );
    // The tenant's repository (its branch dev-team, read in place).
    write(
        root,
        "base/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\nresources:\n  - podinfo-repository.yaml\n  - podinfo-release.yaml\n"
        ),
    );
    write(
        root,
        "base/podinfo-repository.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\nspec:\n  interval: 5m\n  url: {}\n",
            charts.url
        ),
    );
    write(
        root,
        "base/podinfo-release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  releaseName: podinfo\n  chart:\n    spec:\n      chart: podinfo\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n  interval: 50m\n  values:\n    replicaCount: 1\n    hpa:\n      enabled: false\n",
    );
    write(
        root,
        "staging/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base\npatches:\n  - path: podinfo-values.yaml\n    target:\n      kind: HelmRelease\n",
    );
    let values = |version: &str| {
        format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n  chart:\n    spec:\n      version: \"{version}\"\n  values:\n    ui:\n      message: dev-team staging\n"
        )
    };
    write(root, "staging/podinfo-values.yaml", &values("6.0.x"));
    commit(root, "tenancy");
    let cluster = root.join("clusters/staging");
    let cluster = cluster.to_str().unwrap();

    // Installed: the tenant's RBAC, then its release as its account may write it.
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let podinfo = deployments.get("podinfo").await.unwrap();
    let chart =
        |d: &Deployment| d.metadata.labels.clone().unwrap_or_default()["helm.sh/chart"].clone();
    assert_eq!(chart(&podinfo), "podinfo-6.0.0");
    assert_ui_message(&podinfo, "dev-team staging");

    // Upgraded: the tenant's values ask for any version.
    write(
        root,
        "staging/podinfo-values.yaml",
        &values(">=1.0.0-alpha"),
    );
    let out = on_cluster(&ns, &["apply", cluster, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    assert_eq!(
        chart(&deployments.get("podinfo").await.unwrap()),
        "podinfo-6.2.3"
    );

    // Uninstalled: the platform's tenants Kustomization leaves the tree.
    std::fs::remove_file(root.join("clusters/staging/tenants.yaml")).unwrap();
    let out = on_cluster(&ns, &["apply", cluster, "--allow-mass-prune"]);
    assert_exit(&out, 0);
    assert!(
        deployments.get_opt("podinfo").await.unwrap().is_none(),
        "{}",
        show(&out)
    );
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), &ns);
    assert!(accounts.get_opt("flux").await.unwrap().is_none());
}
