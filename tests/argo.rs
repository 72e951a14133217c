//! An Argo CD repository, laid out as Argo CD's users lay one out (a root Application in
//! `argocd/` rendering the Applications of `apps/`: app of apps), taken to the test
//! cluster by driftless with no Argo CD present: a directory app (`recurse`,
//! `ignoreDifferences`), a Kustomize app (`namePrefix`, `images`, `commonLabels`, its sync
//! wave), an ApplicationSet (an app per directory), a chart of the repository
//! (`valueFiles`, `parameters`, `releaseName`) and a chart of a chart repository on
//! loopback with its values from this repository (`sources` with a `ref`); a pull request
//! previewed per Argo CD app with no cluster, as the live diff sees it, then applied; an
//! app removed from the tree pruned; the root app removed, all of it uninstalled. What is
//! not carried out is one line at its place, and nothing is applied. And Argo CD's own
//! `install.yaml`, as released, alone in a tree: a bundle like any other.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use driftless::object::ownership;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};

use support::{
    assert_exit, driftless_helm4 as offline, driftless_helm4_on_cluster as on_cluster, git,
    printed, show, write_file as write,
};

const REPO: &str = "https://github.com/acme/gitops.git";

fn application(name: &str, ns: &str, source: &str, extra: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\n  finalizers:\n    - resources-finalizer.argocd.argoproj.io\nspec:\n  project: default\n{source}  destination:\n    server: https://kubernetes.default.svc\n    namespace: {ns}\n  syncPolicy:\n    automated:\n      prune: true\n      selfHeal: true\n{extra}"
    )
}

fn repository(root: &Path, ns: &str, tag: &str, charts: &str) {
    // The root app: every Application of apps/ (the repository named as its remote is,
    // in another spelling).
    write(
        root,
        "argocd/root.yaml",
        &application(
            "root",
            "argocd",
            "  source:\n    repoURL: git@github.com:acme/gitops\n    targetRevision: HEAD\n    path: apps\n",
            "",
        ),
    );
    write(
        root,
        "apps/guestbook.yaml",
        &application(
            &format!("{ns}-guestbook"),
            ns,
            &format!(
                "  source:\n    repoURL: {REPO}\n    targetRevision: HEAD\n    path: guestbook\n    directory:\n      recurse: true\n      exclude: '*-test.yaml'\n"
            ),
            "  ignoreDifferences:\n    - group: apps\n      kind: Deployment\n      jsonPointers:\n        - /spec/replicas\n",
        ),
    );
    write(
        root,
        "guestbook/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: guestbook\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: guestbook}\n  template:\n    metadata:\n      labels: {app: guestbook}\n    spec:\n      containers:\n        - name: ui\n          image: nginx:1.27.0\n",
    );
    write(
        root,
        "guestbook/config/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: guestbook-settings\ndata:\n  theme: dark\n",
    );
    write(
        root,
        "guestbook/smoke-test.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: excluded\n",
    );
    write(root, "guestbook/README.md", "# guestbook\n");
    write(
        root,
        "apps/shop.yaml",
        &application(
            &format!("{ns}-shop"),
            ns,
            &format!("  source:\n    repoURL: {REPO}\n    targetRevision: HEAD\n    path: shop/overlays/staging\n    kustomize:\n      namePrefix: stg-\n      commonLabels:\n        team: shop\n      images:\n        - nginx:{tag}\n"),
            "",
        )
        .replace(
            "  finalizers:",
            "  annotations:\n    argocd.argoproj.io/sync-wave: \"1\"\n  finalizers:",
        ),
    );
    write(
        root,
        "shop/base/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deployment.yaml\n",
    );
    write(
        root,
        "shop/base/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: shop\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: shop}\n  template:\n    metadata:\n      labels: {app: shop}\n    spec:\n      containers:\n        - name: shop\n          image: nginx:1.0\n",
    );
    write(
        root,
        "shop/overlays/staging/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../base\n",
    );
    // A chart of the repository, and one of a chart repository with values from here.
    write(
        root,
        "apps/web.yaml",
        &application(
            &format!("{ns}-web"),
            ns,
            &format!(
                "  source:\n    repoURL: {REPO}\n    targetRevision: HEAD\n    path: charts/podinfo\n    helm:\n      releaseName: web\n      valueFiles:\n        - values-web.yaml\n      parameters:\n        - name: replicaCount\n          value: \"1\"\n"
            ),
            "",
        ),
    );
    support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/sources/podinfo/6.2.3/charts/podinfo"),
        &root.join("charts/podinfo"),
        &[],
    );
    write(
        root,
        "charts/podinfo/values-web.yaml",
        "ui:\n  message: web\nhpa:\n  enabled: false\n",
    );
    write(
        root,
        "apps/podinfo.yaml",
        &application(
            &format!("{ns}-podinfo"),
            ns,
            &format!(
                "  sources:\n    - repoURL: {charts}\n      chart: podinfo\n      targetRevision: 6.2.3\n      helm:\n        releaseName: podinfo\n        valueFiles:\n          - $values/values/podinfo.yaml\n    - repoURL: {REPO}\n      targetRevision: HEAD\n      ref: values\n"
            ),
            "",
        ),
    );
    // An ApplicationSet: an app per directory of teams/.
    write(
        root,
        "apps/teams.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: teams\n  namespace: argocd\nspec:\n  goTemplate: true\n  generators:\n    - git:\n        repoURL: {REPO}\n        revision: HEAD\n        directories:\n          - path: teams/*\n  template:\n    metadata:\n      name: '{ns}-team-{{{{.path.basename}}}}'\n    spec:\n      project: default\n      source:\n        repoURL: {REPO}\n        targetRevision: HEAD\n        path: '{{{{.path.path}}}}'\n      destination:\n        server: https://kubernetes.default.svc\n        namespace: {ns}\n      syncPolicy:\n        automated:\n          prune: true\n"
        ),
    );
    for team in ["blue", "red"] {
        write(
            root,
            &format!("teams/{team}/settings.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-{team}\ndata:\n  team: {team}\n"
            ),
        );
    }
    write(
        root,
        "values/podinfo.yaml",
        "ui:\n  message: from-argo\nhpa:\n  enabled: false\n",
    );
}

fn init(root: &Path) {
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["remote", "add", "origin", REPO]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "apps"]);
}

#[tokio::test]
async fn an_argo_cd_repository_installs_previews_and_prunes_with_no_argo_cd() {
    let client = support::client().await;
    let ns = support::namespace(&client, "argo").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    let charts_dir = tempfile::tempdir().unwrap();
    let charts = crate::helm::ChartRepo::start(charts_dir.path());
    repository(root, &ns, "1.27.0", &charts.url);
    init(root);
    let tree = root.join("argocd");
    let tree = tree.to_str().unwrap();

    let out = offline(&["validate", tree]);
    assert_exit(&out, 0);
    let said = printed(&out);
    for line in [
        "rendered: root.yaml#argo.root: Argo CD Application root: directory apps".to_string(),
        format!(
            "rendered: root.yaml#argo.root#argo.{ns}-shop: Argo CD Application {ns}-shop: kubectl kustomize shop/overlays/staging"
        ),
        format!(
            "rendered: root.yaml#argo.root#argo.{ns}-web: helm template web ../charts/podinfo --namespace {ns}"
        ),
    ] {
        assert!(said.contains(&line), "no {line:?} in\n{said}");
    }

    let out = on_cluster(&ns, &["apply", tree, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // The directory app: recursed, the excluded file and the README left out.
    assert!(deployments.get("guestbook").await.is_ok(), "{}", show(&out));
    assert!(maps.get("guestbook-settings").await.is_ok());
    assert!(maps.get_opt("excluded").await.unwrap().is_none());
    // The ApplicationSet's apps, one per team directory.
    for team in ["team-blue", "team-red"] {
        assert!(maps.get(team).await.is_ok(), "{team}");
    }
    // The Kustomize app, with the Application's options.
    let shop = deployments.get("stg-shop").await.unwrap();
    let labels = shop.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("shop"));
    let image = shop.spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx:1.27.0"));
    // Both charts, with their values.
    for (name, message) in [("web-podinfo", "web"), ("podinfo", "from-argo")] {
        let d = deployments.get(name).await.unwrap();
        let env = d.spec.template.spec.unwrap().containers[0]
            .env
            .clone()
            .unwrap_or_default();
        assert!(
            env.iter()
                .any(|e| e.name == "PODINFO_UI_MESSAGE" && e.value.as_deref() == Some(message)),
            "{name}: {env:?}"
        );
    }

    // ignoreDifferences: replicas scaled by hand stay, and nothing differs.
    deployments
        .patch(
            "guestbook",
            &PatchParams::apply("scaler").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "guestbook"}, "spec": {"replicas": 3}
            })),
        )
        .await
        .unwrap();
    let diff = on_cluster(&ns, &["diff", tree]);
    assert_exit(&diff, 0);
    let out = on_cluster(&ns, &["apply", tree]);
    assert_exit(&out, 0);
    support::assert_no_writes(&out);
    let scaled = deployments.get("guestbook").await.unwrap();
    assert_eq!(scaled.spec.replicas, Some(3));

    // A pull request: the shop's image tag moves. Previewed per Argo CD app, no cluster.
    repository(root, &ns, "1.27.1", &charts.url);
    let preview = offline(&["diff", "--base", "main", tree, "--output", "json"]);
    assert_exit(&preview, 1);
    let doc: serde_json::Value = serde_json::from_slice(&preview.stdout).unwrap();
    assert_eq!(
        doc["apps"],
        serde_json::json!([{"app": format!("argo/{ns}-shop"), "summary": {"create": 0, "update": 1, "replace": 0, "prune": 0, "error": 0}}]),
        "{doc:#}"
    );

    // The live diff of the same change names the same objects, the same way; applied,
    // the change is there.
    let live = on_cluster(&ns, &["diff", tree, "--output", "json"]);
    assert_exit(&live, 1);
    let live: serde_json::Value = serde_json::from_slice(&live.stdout).unwrap();
    assert_eq!(
        support::diff_changes(&doc),
        support::diff_changes(&live),
        "{doc:#}\n{live:#}"
    );
    let out = on_cluster(&ns, &["apply", tree, "--wait", "--timeout", "3m"]);
    assert_exit(&out, 0);
    let shop = deployments.get("stg-shop").await.unwrap();
    let image = shop.spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx:1.27.1"));
    git(root, &["commit", "-q", "-am", "shop 1.27.1"]);
    let preview = offline(&["diff", "--base", "main", tree]);
    assert_exit(&preview, 0);

    // The guestbook app, still in the tree, pointed at a directory with no manifests (a
    // mis-pointed path): its own prune guard refuses to empty it, though its objects are
    // a small part of the tree's, and nothing at all is pruned.
    let guestbook = std::fs::read_to_string(root.join("apps/guestbook.yaml")).unwrap();
    write(root, "empty/README.md", "# nothing here yet\n");
    write(
        root,
        "apps/guestbook.yaml",
        &guestbook.replace("path: guestbook\n", "path: empty\n"),
    );
    let out = on_cluster(&ns, &["apply", tree]);
    assert_exit(&out, 1);
    let said = printed(&out);
    assert!(
        said.contains("prune refused")
            && said.contains(&format!(
                "app argo/{ns}-guestbook would prune all 2 of its inventoried objects"
            )),
        "{}",
        show(&out)
    );
    assert!(deployments.get_opt("guestbook").await.unwrap().is_some());
    assert!(maps.get_opt("guestbook-settings").await.unwrap().is_some());
    write(root, "apps/guestbook.yaml", &guestbook);

    // The guestbook app leaves the tree: what it applied is pruned, the rest stays.
    std::fs::remove_file(root.join("apps/guestbook.yaml")).unwrap();
    let out = on_cluster(&ns, &["apply", tree, "--allow-mass-prune"]);
    assert_exit(&out, 0);
    assert!(
        deployments.get_opt("guestbook").await.unwrap().is_none(),
        "{}",
        show(&out)
    );
    assert!(maps.get_opt("guestbook-settings").await.unwrap().is_none());
    assert!(deployments.get("stg-shop").await.is_ok());

    // Uninstall: the root app leaves, and with it every app and what each applied.
    std::fs::remove_file(root.join("argocd/root.yaml")).unwrap();
    let out = on_cluster(
        &ns,
        &[
            "apply",
            tree,
            "--allow-mass-prune",
            "--wait",
            "--timeout",
            "3m",
        ],
    );
    assert_exit(&out, 0);
    for name in ["stg-shop", "web-podinfo", "podinfo"] {
        assert!(
            deployments.get_opt(name).await.unwrap().is_none(),
            "{name} left: {}",
            show(&out)
        );
    }
    assert!(maps.get_opt("team-blue").await.unwrap().is_none());
}

/// A source that is another repository, or a field that changes what Argo CD would do and
/// driftless does not carry out: one line at its place, and that app is held (neither
/// applied nor pruned) while the other apps of the revision are applied; with
/// `--all-or-nothing`, nothing is applied.
#[tokio::test]
async fn what_driftless_does_not_carry_out_is_refused_at_its_place() {
    let client = support::client().await;
    let ns = support::namespace(&client, "argo-refused").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    repository(root, &ns, "1.27.0", "http://127.0.0.1:9");
    init(root);
    let web = root.join("apps/web.yaml");
    let text = std::fs::read_to_string(&web).unwrap();
    std::fs::write(&web, text.replace(REPO, "https://github.com/someone/else")).unwrap();
    let tree = root.join("argocd");
    let tree = tree.to_str().unwrap();
    let refused = format!(
        "Application {ns}-web: its source https://github.com/someone/else is not the repository being read"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    let out = on_cluster(&ns, &["apply", tree, "--all-or-nothing"]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        // Said where the app of apps that renders it is written, its render named.
        stderr.starts_with("root.yaml:1:1: ")
            && stderr.contains(&refused)
            && stderr
                .lines()
                .filter(|l| l.contains(" is not the repository being read"))
                .all(|l| l.contains("(in what it renders: root.yaml#argo.root, line ")),
        "{}",
        show(&out)
    );
    assert!(
        deployments.get_opt("guestbook").await.unwrap().is_none(),
        "something was applied"
    );

    // Without it the refused app is held alone, said last; the others are applied.
    let out = on_cluster(&ns, &["apply", tree]);
    assert_exit(&out, 2);
    let said = show(&out);
    assert!(
        said.contains(&format!(
            "held: app argo/{ns}-web, neither applied nor pruned: root.yaml:1:1: {refused}"
        )),
        "{said}"
    );
    assert!(
        deployments.get_opt("guestbook").await.unwrap().is_some(),
        "{said}"
    );
    assert!(
        deployments.get_opt("web-podinfo").await.unwrap().is_none(),
        "{said}"
    );
}

/// The daemon on an Argo CD tree: each Application is an app of its own in the status
/// file, `driftless status` and the web UI (trouble first, each narrowing the list to its
/// specs), at 1600 and 400 px in Chromium.
#[tokio::test]
async fn each_argo_cd_app_is_a_unit_in_the_status_and_the_ui() {
    let client = support::client().await;
    let ns = support::namespace(&client, "argo-ui").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    let charts_dir = tempfile::tempdir().unwrap();
    let charts = crate::helm::ChartRepo::start(charts_dir.path());
    repository(root, &ns, "1.27.0", &charts.url);
    // An app whose Deployment never becomes ready, synced last.
    write(
        root,
        "apps/broken.yaml",
        &application(
            &format!("{ns}-broken"),
            &ns,
            &format!("  source:\n    repoURL: {REPO}\n    path: broken\n"),
            "",
        )
        // Last: a wave waits for the one before it to be ready.
        .replace(
            "  finalizers:",
            "  annotations:\n    argocd.argoproj.io/sync-wave: \"2\"\n  finalizers:",
        ),
    );
    write(
        root,
        "broken/crashy.yaml",
        &support::one_pod_deployment(&ns, "crashy", "example.org/crashloop:1"),
    );
    init(root);
    let tree = root.join("argocd");
    let helm = support::helm4();
    let daemon = support::Daemon::builder(&ns)
        .args(&[
            "--dir",
            tree.to_str().unwrap(),
            "--resync",
            "1h",
            "--helm",
            &helm,
        ])
        .start();
    let broken = format!("argo/{ns}-broken");
    let status = daemon
        .wait_status("every app applied, the broken one failed", |s| {
            let apps = s["apps"].as_array().cloned().unwrap_or_default();
            apps.len() == 7
                && apps[0]["name"] == broken.as_str()
                && apps[0]["status"] == "Failed"
                && apps[1..].iter().all(|a| a["ready"] == true)
        })
        .await;
    let apps: Vec<&str> = status["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        apps,
        [
            broken.clone(),
            format!("argo/{ns}-guestbook"),
            format!("argo/{ns}-podinfo"),
            format!("argo/{ns}-shop"),
            format!("argo/{ns}-team-blue"),
            format!("argo/{ns}-team-red"),
            format!("argo/{ns}-web"),
        ],
        "trouble first, then by name"
    );
    // Every spec of the tree is some app's, and says which.
    let shop = format!("argo/{ns}-shop");
    let specs = status["specs"].as_array().unwrap();
    assert!(specs.iter().all(|s| s["app"].is_string()), "{status:#}");
    let shop_specs = specs.iter().filter(|s| s["app"] == shop.as_str()).count();
    assert_eq!(shop_specs, 1, "the shop's one Deployment");
    let table = daemon.status_table();
    assert!(table.contains("apps"), "{table}");
    assert!(
        table.contains(&format!("{broken}: 0/1 specs ready, Failed")),
        "{table}"
    );

    let browser = support::Browser::start().await;
    let addr = daemon.metrics;
    for (width, height) in [(1600, 1000), (400, 900)] {
        let size = format!("{width}x{height}");
        browser.client.set_window_size(width, height).await.unwrap();
        browser.goto(&format!("http://{addr}/")).await;
        let first = browser
            .wait_for(
                &format!("the apps at {size}"),
                "const rows = [...document.querySelectorAll('#app-rows tr')];\
                 return rows.length === 7 ? rows.map(r => r.innerText) : null;",
                vec![],
            )
            .await;
        let first = first[0].as_str().unwrap_or_default();
        assert!(
            first.contains(&broken) && first.contains("Failed") && first.contains("0/1"),
            "at {size}: {first}"
        );
        browser
            .assert_no_sideways_scroll(&format!("the apps at {size}"))
            .await;
        browser.shot(&format!("argo-apps-{size}.png")).await;
        // An app's count of specs narrows the list to them.
        browser
            .click(&format!("#app-rows tr[data-app='{shop}'] a.specs-link"))
            .await;
        browser.wait_for_spec_rows(1).await;
        let rows = browser.spec_rows().await;
        assert_eq!(
            rows,
            [format!("manifest/{ns}/Deployment.apps/stg-shop")],
            "at {size}"
        );
        assert_eq!(
            browser
                .eval("return document.getElementById('search').value")
                .await,
            serde_json::json!(format!("app:{shop}")),
            "at {size}"
        );

        // An app's name opens its objects as a tree by owner: Deployment → ReplicaSet →
        // Pod, each coloured by its health.
        browser.goto(&format!("http://{addr}/")).await;
        browser
            .click(&format!("#app-rows tr[data-app='{broken}'] th a"))
            .await;
        let tree = browser
            .wait_for(
                &format!("the broken app's tree at {size}"),
                "const pod = document.querySelector('#app-body ul.tree > li[data-object^=\"Deployment\"] > ul > li[data-object^=\"ReplicaSet\"] > ul > li[data-object^=\"Pod\"]');\
                 const top = document.querySelector('#app-body ul.tree > li[data-object^=\"Deployment\"]');\
                 return pod && top ? [top.dataset.object, top.querySelector('.badge').className, pod.dataset.object, pod.querySelector('.badge').className] : null;",
                vec![],
            )
            .await;
        assert_eq!(tree[0], format!("Deployment.apps {ns}/crashy"), "at {size}");
        assert!(
            tree[1].as_str().unwrap().contains("bad"),
            "at {size}: {tree}"
        );
        assert!(
            tree[2].as_str().unwrap().starts_with("Pod crashy-"),
            "at {size}: {tree}"
        );
        browser
            .assert_no_sideways_scroll(&format!("the app view at {size}"))
            .await;
        browser.shot(&format!("argo-app-tree-{size}.png")).await;
        // Its own objects link to their object view.
        browser
            .click("#app-body ul.tree > li[data-object^='Deployment'] > a")
            .await;
        browser
            .wait_for_text("#object-heading", &["Deployment.apps", "crashy"])
            .await;
    }
    browser.close().await;
}

/// The objects of `out` by spec id, each with what the CLI said it did (`created`,
/// `unchanged`, `updated`, ...): its table's lines are `ID COUNT ACTION`.
fn actions(out: &std::process::Output) -> BTreeMap<String, String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            match words.as_slice() {
                [id, count, action] if count.parse::<u32>().is_ok() => {
                    Some((id.to_string(), action.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

/// What a run of Argo CD's install leaves on the shared cluster, removed when dropped
/// (also when the test failed): the cluster-scoped objects `instance` made (their names
/// are Argo CD's, the same for every run: one left behind would be another instance's to
/// the next run, which driftless then refuses to touch) and the test's namespace, whose
/// name is the instance's.
struct Leftovers {
    instance: String,
    cluster_scoped: Vec<driftless::render::Object>,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let instance = std::mem::take(&mut self.instance);
        let objects = std::mem::take(&mut self.cluster_scoped);
        support::cleanup_on_own_thread(move |client| async move {
            for (o, resource) in support::resources(&client, &objects).await {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                if let Ok(Some(live)) = api.get_opt(&o.name).await
                    && live.labels().get(ownership::INSTANCE) == Some(&instance)
                {
                    let _ = api.delete(&o.name, &DeleteParams::default()).await;
                }
            }
            let namespaces: Api<Namespace> = Api::all(client);
            let _ = namespaces.delete(&instance, &DeleteParams::default()).await;
        });
    }
}

/// Waits (2 minutes at most) until none of `objects` (cluster-scoped) exists: another run
/// of this test on the same cluster, under another instance, is done with them.
async fn free_of_other_runs(client: &kube::Client, objects: &[driftless::render::Object]) {
    let found = support::resources(client, objects).await;
    support::eventually(
        "Argo CD's cluster-scoped objects left by no other run",
        std::time::Duration::from_secs(120),
        || async {
            let mut held = Vec::new();
            for (o, resource) in &found {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
                if let Some(live) = api.get_opt(&o.name).await.map_err(|e| e.to_string())? {
                    let owner = live.labels().get(ownership::INSTANCE).cloned();
                    held.push(format!("{} (instance {owner:?})", o.display_ref()));
                }
            }
            match held.is_empty() {
                true => Ok(()),
                false => Err(format!(
                    "{held:?}: another run's, or left by one killed before its cleanup (delete them)"
                )),
            }
        },
    )
    .await;
}

/// Argo CD's own `install.yaml` as released (v3.4.7, then v3.5.7: testbed/tools.sh takes
/// both out of the Go module proxy's zips of github.com/argoproj/argo-cd/v3), alone in a
/// tree, as a platform team keeps it to install Argo CD for its application teams: with no
/// Application nor ApplicationSet beside it nothing does Argo CD's job, so it is a bundle
/// like any other. Validated with every object kept, installed, re-applied with no write
/// and a quiet diff, upgraded (exactly what the release changed is updated), quiet again,
/// and uninstalled: every object of either release gone, its CRDs and cluster RBAC with
/// them. Its namespaced objects name no namespace (it is made for `kubectl apply -n
/// argocd`): a `[[namespace]]` rule gives them the test's.
#[tokio::test]
async fn argo_cds_own_install_alone_is_a_bundle_like_any_other() {
    let install = |var: &str| {
        let path = PathBuf::from(std::env::var(var).unwrap_or_else(|_| {
            panic!("{var} (the testbed's env; testbed/tools.sh installs Argo CD's install.yaml)")
        }));
        assert!(
            path.is_file(),
            "{var}={}: no such file (testbed/tools.sh installs it)",
            path.display()
        );
        path
    };
    let old = install("DRIFTLESS_TEST_ARGOCD_INSTALL_OLD");
    let new = install("DRIFTLESS_TEST_ARGOCD_INSTALL_NEW");
    let client = support::client().await;
    let ns = support::namespace(&client, "argocd-install").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tree = root.to_str().unwrap();
    write(
        root,
        ".driftless.toml",
        &format!("[[namespace]]\npath = \"argocd/**\"\nnamespace = \"{ns}\"\n"),
    );
    let file = root.join("argocd/install.yaml");
    let put = |release: &Path| {
        std::fs::copy(release, &file).unwrap();
        // What the release holds, every document of it an object driftless must keep.
        let docs = support::yaml_docs(&std::fs::read_to_string(release).unwrap()).len();
        let out = support::driftless(&["validate", tree]);
        assert_exit(&out, 0);
        assert!(
            !printed(&out).contains("own install"),
            "left out as Argo CD's own install\n{}",
            show(&out)
        );
        let objects = support::rendered_objects(root, false);
        assert_eq!(objects.len(), docs, "{}", release.display());
        objects
    };
    let apply =
        |extra: &[&str]| support::driftless_on_cluster(&ns, &[&["apply", tree], extra].concat());
    let quiet = || {
        let out = apply(&[]);
        assert_exit(&out, 0);
        support::assert_no_writes(&out);
        let out = support::driftless_on_cluster(&ns, &["diff", tree]);
        assert_exit(&out, 0);
    };

    // Install.
    std::fs::create_dir_all(root.join("argocd")).unwrap();
    let old_objects = put(&old);
    let cluster_scoped: Vec<_> = old_objects
        .iter()
        .filter(|o| o.namespace.is_none())
        .cloned()
        .collect();
    let _leftovers = Leftovers {
        instance: ns.clone(),
        cluster_scoped: cluster_scoped.clone(),
    };
    free_of_other_runs(&client, &cluster_scoped).await;
    let out = apply(&[]);
    assert_exit(&out, 0);
    let done = actions(&out);
    for o in &old_objects {
        assert_eq!(
            done.get(&o.spec.to_string()).map(String::as_str),
            Some("created"),
            "{}\n{}",
            o.display_ref(),
            show(&out)
        );
    }
    for (o, resource) in support::resources(&client, &old_objects).await {
        let api: Api<DynamicObject> = match &o.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let live = api.get(&o.name).await.unwrap();
        assert_eq!(
            live.labels().get(ownership::INSTANCE),
            Some(&ns),
            "{}",
            o.display_ref()
        );
    }
    quiet();

    // Upgrade: what the release changed is updated, nothing else is written.
    let new_objects = put(&new);
    let changed: BTreeSet<String> = new_objects
        .iter()
        .filter(|n| {
            old_objects
                .iter()
                .find(|o| o.key() == n.key())
                .is_none_or(|o| o.body.text() != n.body.text())
        })
        .map(|n| n.spec.to_string())
        .collect();
    assert!(!changed.is_empty(), "the two releases render alike");
    let out = apply(&[]);
    assert_exit(&out, 0);
    let done = actions(&out);
    for n in &new_objects {
        let id = n.spec.to_string();
        let want = match changed.contains(&id) {
            true if old_objects.iter().any(|o| o.key() == n.key()) => "updated",
            true => "created",
            false => "unchanged",
        };
        assert_eq!(
            done.get(&id).map(String::as_str),
            Some(want),
            "{id}\n{}",
            show(&out)
        );
    }
    for o in old_objects
        .iter()
        .filter(|o| !new_objects.iter().any(|n| n.key() == o.key()))
    {
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.contains(&o.display_ref()) && l.contains("pruned")),
            "{} was dropped by the upgrade but not pruned\n{}",
            o.display_ref(),
            show(&out)
        );
    }
    quiet();

    // Uninstall: nothing of either release is left, cluster-scoped objects included.
    let gone: Vec<_> = support::resources(&client, &old_objects)
        .await
        .into_iter()
        .chain(support::resources(&client, &new_objects).await)
        .collect();
    std::fs::remove_file(&file).unwrap();
    // Shorter than the runner's guard (.config/nextest.toml): a CRD deletion that never
    // ends fails with driftless's word on what it waits for.
    let out = apply(&["--allow-mass-prune", "--wait", "--timeout", "2m"]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for (o, _) in &gone {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(&o.display_ref()) && l.contains("pruned")),
            "{} not pruned\n{}",
            o.display_ref(),
            show(&out)
        );
    }
    support::all_gone(&client, &gone).await;
}
