//! Argo CD's example repository's app of apps (argoproj/argocd-example-apps: `apps/`, a
//! chart rendering fourteen Applications, three of them rendered by config management
//! plugins), laid out as published and written here (the repository cannot be fetched
//! from the test machine): every app that needs no plugin is applied, each plugin app the
//! operator has not declared is held alone with one line naming its plugin, and the
//! `kustomized-helm` plugin, once declared in `--plugins-dir`, renders its app with the
//! real helm and kustomize. Undeclared again, that app is held and what it applied stays.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;

use support::{assert_exit, git, show, write_file as write};

const REPO: &str = "https://github.com/argoproj/argocd-example-apps";

const APPS: [&str; 14] = [
    "blue-green",
    "guestbook",
    "helm-dependency",
    "helm-guestbook",
    "helm-hooks",
    "jsonnet-guestbook",
    "jsonnet-guestbook-tla",
    "kustomize-guestbook",
    "plugin-kasane",
    "plugin-kustomized-helm",
    "plugin-nix",
    "pre-post-sync",
    "sock-shop",
    "sync-waves",
];

/// `apps/`: the chart whose template makes an Application per entry of its values.
fn app_of_apps(root: &Path, ns: &str) {
    write(
        root,
        "apps/Chart.yaml",
        "apiVersion: v2\nname: applications\ndescription: Applications\ntype: application\nversion: 0.1.0\nappVersion: \"1.0\"\n",
    );
    write(
        root,
        "apps/templates/applications.yaml",
        r#"{{- range .Values.applications }}
{{- $config := $.Values.config -}}
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {{ printf "example.%s" .name | quote }}
  namespace: argocd
  finalizers:
  - resources-finalizer.argocd.argoproj.io
spec:
  destination:
    namespace: {{ .namespace | default .name | quote }}
    server: {{ $config.spec.destination.server | quote }}
  project: default
  source:
    path: {{ .path | default .name | quote }}
    repoURL: {{ $config.spec.source.repoURL }}
    targetRevision: {{ $config.spec.source.targetRevision }}
    {{- with .tool }}
    {{- . | toYaml | nindent 4 }}
    {{- end }}
  syncPolicy:
    syncOptions:
      - CreateNamespace=true
    automated:
      prune: true
      selfHeal: true
---
{{ end -}}
"#,
    );
    // As published, but for each app's namespace: this test's own (the published values
    // name none, so each app's namespace is its name).
    let tool = |name: &str| {
        match name {
        "blue-green" | "helm-dependency" | "helm-guestbook" => {
            format!("    tool:\n      helm:\n        releaseName: {name}\n")
        }
        "plugin-kasane" => "    path: plugins/kasane\n    tool:\n      plugin:\n        name: kasane\n".into(),
        "plugin-kustomized-helm" => "    path: plugins/kustomized-helm\n    tool:\n      plugin:\n        name: kustomized-helm\n".into(),
        "plugin-nix" => "    path: plugins/nix\n    tool:\n      plugin:\n        name: nix\n".into(),
        _ => String::new(),
    }
    };
    let mut values = format!(
        "config:\n  spec:\n    destination:\n      server: https://kubernetes.default.svc\n    source:\n      repoURL: {REPO}\n      targetRevision: master\n\napplications:\n"
    );
    for name in APPS {
        values.push_str(&format!(
            "  - name: {name}\n    namespace: {ns}-{name}\n{}",
            tool(name)
        ));
    }
    write(root, "apps/values.yaml", &values);
}

fn deployment(name: &str, image: &str, port: u16) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  revisionHistoryLimit: 3\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - image: {image}\n        name: {name}\n        ports:\n        - containerPort: {port}\n"
    )
}

fn service(name: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  ports:\n  - port: {port}\n    targetPort: {port}\n  selector:\n    app: {name}\n"
    )
}

fn job(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  {name}\n  annotations:\n{annotations}spec:\n  template:\n    spec:\n      containers:\n        - name: step\n          image: alpine:latest\n          command: [\"sleep\", \"2\"]\n      restartPolicy: Never\n  backoffLimit: 0\n"
    )
}

fn replica_set(name: &str, tier: &str, annotations: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: {name}\n{annotations}spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      tier: {tier}\n  template:\n    metadata:\n      labels:\n        tier: {tier}\n    spec:\n      containers:\n        - name: main\n          image: nginx:latest\n"
    )
}

/// The apps' own directories, each of the kind the example's is.
fn the_apps(root: &Path) {
    let ui = "gcr.io/google-samples/gb-frontend:v5";
    // A directory of manifests.
    write(
        root,
        "guestbook/guestbook-ui-deployment.yaml",
        &deployment("guestbook-ui", ui, 80),
    );
    write(
        root,
        "guestbook/guestbook-ui-svc.yaml",
        &service("guestbook-ui", 80),
    );
    // A chart of the repository.
    let helpers = "{{- define \"helm-guestbook.fullname\" -}}\n{{- if contains .Chart.Name .Release.Name -}}\n{{- .Release.Name | trunc 63 | trimSuffix \"-\" -}}\n{{- else -}}\n{{- printf \"%s-%s\" .Release.Name .Chart.Name | trunc 63 | trimSuffix \"-\" -}}\n{{- end -}}\n{{- end -}}\n";
    write(
        root,
        "helm-guestbook/Chart.yaml",
        "apiVersion: v2\nname: helm-guestbook\nversion: 0.1.0\nappVersion: \"1.0\"\n",
    );
    write(
        root,
        "helm-guestbook/values.yaml",
        "replicaCount: 1\nimage:\n  repository: gcr.io/google-samples/gb-frontend\n  tag: v5\nservice:\n  port: 80\n",
    );
    write(root, "helm-guestbook/templates/_helpers.tpl", helpers);
    write(
        root,
        "helm-guestbook/templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ template \"helm-guestbook.fullname\" . }}\nspec:\n  replicas: {{ .Values.replicaCount }}\n  selector:\n    matchLabels:\n      app: {{ template \"helm-guestbook.fullname\" . }}\n  template:\n    metadata:\n      labels:\n        app: {{ template \"helm-guestbook.fullname\" . }}\n    spec:\n      containers:\n        - name: {{ .Chart.Name }}\n          image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n          ports:\n            - containerPort: 80\n",
    );
    write(
        root,
        "helm-guestbook/templates/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ template \"helm-guestbook.fullname\" . }}\nspec:\n  ports:\n    - port: {{ .Values.service.port }}\n      targetPort: 80\n  selector:\n    app: {{ template \"helm-guestbook.fullname\" . }}\n",
    );
    // A chart whose dependency is on a chart repository it cannot reach (the published
    // one is on the internet; this test stays on the machine): held alone.
    write(
        root,
        "helm-dependency/Chart.yaml",
        "apiVersion: v2\nname: wordpress\nversion: 0.1.0\nappVersion: \"1.0\"\ndependencies:\n- name: wordpress\n  version: 9.0.3\n  repository: http://127.0.0.1:9/stable\n",
    );
    write(
        root,
        "helm-dependency/values.yaml",
        "wordpress:\n  wordpressPassword: foo\n",
    );
    // A chart of Argo Rollouts' Rollout, with its services.
    write(
        root,
        "blue-green/Chart.yaml",
        "apiVersion: v2\nname: blue-green\nversion: 0.1.0\n",
    );
    write(
        root,
        "blue-green/templates/services.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}-preview\nspec:\n  ports:\n  - port: 80\n  selector:\n    app: {{ .Release.Name }}\n",
    );
    // Helm hooks, Argo CD hooks and waves.
    write(
        root,
        "helm-hooks/manifests.yaml",
        &[
            job("generateName: upgrade-sql-schema", "    helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"-2\"\n"),
            job("name: maint-page-up", "    helm.sh/hook: pre-install\n    helm.sh/hook-delete-policy: before-hook-creation\n    helm.sh/hook-weight: \"-1\"\n"),
            replica_set("frontend", "frontend", ""),
            service("frontend", 80),
            job("name: maint-page-down", "    helm.sh/hook: post-install\n    helm.sh/hook-delete-policy: before-hook-creation\n"),
        ]
        .map(|d| format!("---\n{d}"))
        .concat(),
    );
    write(
        root,
        "sync-waves/manifests.yaml",
        &[
            job("generateName: upgrade-sql-schema", "    argocd.argoproj.io/hook: PreSync\n"),
            replica_set("backend", "backend", ""),
            service("backend", 8080),
            job("name: maint-page-up", "    argocd.argoproj.io/hook: Sync\n    argocd.argoproj.io/hook-delete-policy: BeforeHookCreation\n    argocd.argoproj.io/sync-wave: \"1\"\n"),
            replica_set("frontend", "frontend", "  annotations:\n    argocd.argoproj.io/sync-wave: \"2\"\n"),
            job("name: maint-page-down", "    argocd.argoproj.io/hook: Sync\n    argocd.argoproj.io/hook-delete-policy: BeforeHookCreation\n    argocd.argoproj.io/sync-wave: \"3\"\n"),
        ]
        .map(|d| format!("---\n{d}"))
        .concat(),
    );
    // Jsonnet in a directory source: a file with its parameters imported, and a function
    // whose defaults are its arguments.
    write(
        root,
        "jsonnet-guestbook/params.libsonnet",
        "{\n  containerPort: 80,\n  image: \"gcr.io/google-samples/gb-frontend:v5\",\n  name: \"jsonnet-guestbook-ui\",\n  replicas: 1,\n  servicePort: 80,\n}\n",
    );
    write(
        root,
        "jsonnet-guestbook/guestbook-ui.jsonnet",
        "local params = import 'params.libsonnet';\n[\n  { apiVersion: 'v1', kind: 'Service', metadata: { name: params.name },\n    spec: { ports: [{ port: params.servicePort, targetPort: params.containerPort }], selector: { app: params.name } } },\n  { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: params.name },\n    spec: { replicas: params.replicas, selector: { matchLabels: { app: params.name } },\n      template: { metadata: { labels: { app: params.name } },\n        spec: { containers: [{ image: params.image, name: params.name, ports: [{ containerPort: params.containerPort }] }] } } } },\n]\n",
    );
    write(
        root,
        "jsonnet-guestbook-tla/guestbook-ui.jsonnet",
        "function(containerPort=80, image='gcr.io/google-samples/gb-frontend:v5', name='jsonnet-guestbook-ui', replicas=1)\n[\n  { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: name },\n    spec: { replicas: replicas, selector: { matchLabels: { app: name } },\n      template: { metadata: { labels: { app: name } },\n        spec: { containers: [{ image: image, name: name, ports: [{ containerPort: containerPort }] }] } } } },\n]\n",
    );
    // Kustomize, and Kustomize on top of it with Argo CD hooks.
    write(
        root,
        "kustomize-guestbook/kustomization.yaml",
        "namePrefix: kustomize-\n\nresources:\n- guestbook-ui-deployment.yaml\n- guestbook-ui-svc.yaml\n",
    );
    write(
        root,
        "kustomize-guestbook/guestbook-ui-deployment.yaml",
        &deployment("guestbook-ui", ui, 80),
    );
    write(
        root,
        "kustomize-guestbook/guestbook-ui-svc.yaml",
        &service("guestbook-ui", 80),
    );
    write(
        root,
        "pre-post-sync/kustomization.yaml",
        "namePrefix: pre-post-sync-\n\nbases:\n- ../kustomize-guestbook\n\nresources:\n- pre-sync-job.yaml\n- post-sync-job.yaml\n",
    );
    write(
        root,
        "pre-post-sync/pre-sync-job.yaml",
        &job(
            "name: before",
            "    argocd.argoproj.io/hook: PreSync\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded\n",
        ),
    );
    write(
        root,
        "pre-post-sync/post-sync-job.yaml",
        &job(
            "name: after",
            "    argocd.argoproj.io/hook: PostSync\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded\n",
        ),
    );
    write(
        root,
        "sock-shop/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- base/carts-dep.yaml\n- base/carts-svc.yaml\n- base/front-end-dep.yaml\n- base/front-end-svc.yaml\n",
    );
    write(
        root,
        "sock-shop/base/carts-dep.yaml",
        &deployment("carts", "weaveworksdemos/carts:0.4.8", 80),
    );
    write(root, "sock-shop/base/carts-svc.yaml", &service("carts", 80));
    write(
        root,
        "sock-shop/base/front-end-dep.yaml",
        &deployment("front-end", "weaveworksdemos/front-end:0.3.12", 8079),
    );
    write(
        root,
        "sock-shop/base/front-end-svc.yaml",
        &service("front-end", 8079),
    );
    // The plugins' apps.
    write(
        root,
        "plugins/kasane/Kasanefile",
        "layers:\n- ../../guestbook/guestbook-ui-deployment.yaml\n- patch.jsonnet\n- ../../guestbook/guestbook-ui-svc.yaml\n",
    );
    write(
        root,
        "plugins/kasane/patch.jsonnet",
        "function (layers)\n[\n  layers[0] { spec+: { replicas: 2 } }\n]\n",
    );
    write(
        root,
        "plugins/nix/flake.nix",
        "{\n  outputs = { self }: { };\n}\n",
    );
    write(
        root,
        "plugins/kustomized-helm/Chart.yaml",
        "apiVersion: v2\nname: guestbook\ntype: application\nversion: 0.1.0\nappVersion: \"1.0\"\n\ndependencies:\n- name: helm-guestbook\n  version: 0.1.0\n  repository: file://../../helm-guestbook\n",
    );
    write(
        root,
        "plugins/kustomized-helm/.gitignore",
        "all.yaml\ncharts\nrequirements.lock\n",
    );
    write(
        root,
        "plugins/kustomized-helm/kustomization.yaml",
        "namePrefix: kustomize-\n\nresources:\n- ./all.yaml\n\npatches:\n- path: overlays/guestbook-deployment.yaml\n",
    );
    write(
        root,
        "plugins/kustomized-helm/overlays/guestbook-deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: release-name-helm-guestbook\nspec:\n  template:\n    spec:\n      containers:\n        - name: helm-guestbook\n          image: 'gcr.io/google-samples/gb-frontend:v6'\n",
    );
}

/// The operator's declaration of `kustomized-helm`, as its README gives it (with
/// `kubectl kustomize`, which is the kustomize this machine has), in a sidecar's form.
const KUSTOMIZED_HELM: &str = "apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: kustomized-helm
spec:
  init:
    command: [\"/bin/sh\", \"-c\"]
    args: [\"helm dependency build\"]
  generate:
    command: [\"/bin/sh\", \"-c\"]
    args: [\"helm template . --namespace $ARGOCD_APP_NAMESPACE --kube-version $KUBE_VERSION > all.yaml && kubectl kustomize .\"]
";

/// driftless on the cluster with helm 4 and kubectl on its PATH (what the plugin runs).
fn driftless(ns: &str, args: &[&str]) -> Output {
    let helm = support::helm4();
    let helm_dir = Path::new(&helm).parent().unwrap();
    let kubectl = std::env::var("DRIFTLESS_TEST_KUBECTL_V35").expect("the testbed's kubectl");
    let kubectl_dir = Path::new(&kubectl).parent().unwrap();
    let path = format!(
        "{}:{}:{}",
        helm_dir.display(),
        kubectl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubeconfig = support::admin_kubeconfig();
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--instance",
            ns,
        ])
        .args(args)
        .args(["--helm", &helm])
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .env_remove("DRIFTLESS_INSTANCE")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run driftless")
}

#[tokio::test]
async fn argo_cds_example_app_of_apps_holds_only_the_plugin_apps_not_declared() {
    let client = support::client().await;
    let ns = support::namespace(&client, "argo-example").await;
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    app_of_apps(root, &ns);
    the_apps(root);
    git(root, &["init", "-q", "-b", "master"]);
    git(root, &["remote", "add", "origin", REPO]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "apps"]);
    let tree = root.join("apps");
    let tree = tree.to_str().unwrap();
    let deployments =
        |app: &str| Api::<Deployment>::namespaced(client.clone(), &format!("{ns}-{app}"));

    // No plugin declared: the three plugin apps are held, each one line naming its plugin.
    let out = driftless(&ns, &["apply", tree]);
    assert_exit(&out, 2);
    let said = show(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for plugin in ["kasane", "kustomized-helm", "nix"] {
        let held: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("held: app argo/example.plugin-{plugin},")))
            .collect();
        assert_eq!(held.len(), 1, "{said}");
        assert!(
            held[0].contains(&format!(
                "Application example.plugin-{plugin}: config management plugin \"{plugin}\" is not declared"
            )),
            "{said}"
        );
    }
    // The chart whose dependency cannot be fetched is held too, and nothing else.
    assert!(
        stderr.contains("held: app argo/example.helm-dependency,"),
        "{said}"
    );
    let held_apps: Vec<&str> = stderr.lines().filter(|l| l.starts_with("held: ")).collect();
    assert_eq!(held_apps.len(), 4, "{said}");
    // Every other app's objects are live.
    for (app, name) in [
        ("guestbook", "guestbook-ui"),
        ("helm-guestbook", "helm-guestbook"),
        ("jsonnet-guestbook", "jsonnet-guestbook-ui"),
        ("jsonnet-guestbook-tla", "jsonnet-guestbook-ui"),
        ("kustomize-guestbook", "kustomize-guestbook-ui"),
        ("pre-post-sync", "pre-post-sync-kustomize-guestbook-ui"),
        ("sock-shop", "front-end"),
    ] {
        assert!(
            deployments(app).get_opt(name).await.unwrap().is_some(),
            "{app}: no Deployment {name}\n{said}"
        );
    }
    for (app, name) in [
        ("helm-hooks", "frontend"),
        ("sync-waves", "frontend"),
        ("sync-waves", "backend"),
    ] {
        let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &format!("{ns}-{app}"));
        assert!(
            sets.get_opt(name).await.unwrap().is_some(),
            "{app}: {name}\n{said}"
        );
    }
    let services: Api<Service> = Api::namespaced(client.clone(), &format!("{ns}-blue-green"));
    assert!(
        services
            .get_opt("blue-green-preview")
            .await
            .unwrap()
            .is_some(),
        "{said}"
    );
    assert!(
        deployments("plugin-kustomized-helm")
            .get_opt("kustomize-release-name-helm-guestbook")
            .await
            .unwrap()
            .is_none(),
        "{said}"
    );

    // Declared: its app renders with the real helm and kustomize, and applies.
    let plugins = tempfile::tempdir().unwrap();
    write(plugins.path(), "kustomized-helm.yaml", KUSTOMIZED_HELM);
    let dir = plugins.path().to_str().unwrap();
    let out = driftless(&ns, &["apply", tree, "--plugins-dir", dir]);
    assert_exit(&out, 2);
    let said = show(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("held: app argo/example.plugin-kustomized-helm,")
            && stderr.contains("held: app argo/example.plugin-kasane,")
            && stderr.contains("those declared are kustomized-helm"),
        "{said}"
    );
    let made = deployments("plugin-kustomized-helm")
        .get_opt("kustomize-release-name-helm-guestbook")
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("the plugin's Deployment\n{said}"));
    let made = serde_json::to_value(&made).unwrap();
    let image = &made["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(
        image, "gcr.io/google-samples/gb-frontend:v6",
        "kustomize's patch"
    );

    // Undeclared again: the app is held, and what it applied stays.
    let out = driftless(&ns, &["apply", tree]);
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("held: app argo/example.plugin-kustomized-helm,"),
        "{}",
        show(&out)
    );
    assert!(
        deployments("plugin-kustomized-helm")
            .get_opt("kustomize-release-name-helm-guestbook")
            .await
            .unwrap()
            .is_some(),
        "a held app's objects were pruned\n{}",
        show(&out)
    );
}

/// A plugin chosen by its discover rules is told what Argo CD tells one (the build
/// environment, `plugin.env` as `ARGOCD_ENV_*` with the build variables put in, the
/// parameters as JSON and as `PARAM_*`), and nothing of driftless's own environment; a
/// `ConfigManagementPlugin` in the tree is not run; an unchanged app is not rendered again.
#[test]
fn a_plugin_is_told_what_argo_cd_tells_one_and_nothing_else() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "argocd/app.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: told\nspec:\n  project: team-a\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: told-ns\n  source:\n    repoURL: {REPO}\n    targetRevision: HEAD\n    path: told\n    plugin:\n      env:\n        - name: FOO\n          value: rev-$ARGOCD_APP_REVISION_SHORT\n      parameters:\n        - name: values-files\n          array: [a.yaml, b.yaml]\n        - name: helm-parameters\n          map:\n            image.tag: v1.2.3\n"
        ),
    );
    write(root, "told/marker.envsrc", "anything\n");
    // A plugin the tree brings is not run.
    write(
        root,
        "argocd/cmp.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: from-the-tree\nspec:\n  generate:\n    command: [sh, -c, 'touch /tmp/should-not-run']\n",
    );
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["remote", "add", "origin", REPO]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "apps"]);
    let commit = git(root, &["rev-parse", "HEAD"]);
    let plugins = tempfile::tempdir().unwrap();
    // Chosen by discovery (the Application names none); a second plugin, which matches
    // nothing, is passed over.
    write(
        plugins.path(),
        "a-none.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: none\nspec:\n  generate:\n    command: [sh, -c, 'exit 1']\n  discover:\n    fileName: '*.nothing'\n",
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let marker = elsewhere.path().join("runs");
    write(
        plugins.path(),
        "b-printenv.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: printenv\nspec:\n  version: v1.0\n  discover:\n    find:\n      glob: '**/*.envsrc'\n  init:\n    command: [sh, -c, 'echo init > from-init']\n  generate:\n    command: [sh, -c]\n    args:\n      - |\n        echo run >> {}\n        echo 'apiVersion: v1'\n        echo 'kind: ConfigMap'\n        echo 'metadata: {{name: told}}'\n        echo 'data:'\n        env | sort | grep -v '^_=' | sed \"s/'/''/g; s/^\\([^=]*\\)=\\(.*\\)$/  \\1: '\\2'/\"\n        echo \"  INIT: $(cat from-init)\"\n",
            marker.display()
        ),
    );
    let tree = root.join("argocd");
    let render = || {
        Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args(["render", tree.to_str().unwrap()])
            .args(["--plugins-dir", plugins.path().to_str().unwrap()])
            .env("DRIFTLESS_CACHE_DIR", elsewhere.path().join("cache"))
            .env("SECRET_OF_THE_DAEMON", "not-for-plugins")
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "warn")
            .output()
            .expect("run driftless")
    };
    let out = render();
    assert_exit(&out, 0);
    let said = show(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .unwrap_or_else(|| panic!("{said}"));
    let data = &cm["data"];
    let short = &commit[..7];
    for (k, v) in [
        ("ARGOCD_APP_NAME", "told"),
        ("ARGOCD_APP_NAMESPACE", "told-ns"),
        ("ARGOCD_APP_PROJECT_NAME", "team-a"),
        ("ARGOCD_APP_REVISION", commit.as_str()),
        ("ARGOCD_APP_REVISION_SHORT", short),
        ("ARGOCD_APP_SOURCE_PATH", "told"),
        ("ARGOCD_APP_SOURCE_REPO_URL", REPO),
        ("ARGOCD_APP_SOURCE_TARGET_REVISION", "HEAD"),
        ("ARGOCD_ENV_FOO", &format!("rev-{short}")),
        ("PARAM_VALUES_FILES_0", "a.yaml"),
        ("PARAM_VALUES_FILES_1", "b.yaml"),
        ("PARAM_HELM_PARAMETERS_IMAGE_TAG", "v1.2.3"),
        ("INIT", "init"),
    ] {
        assert_eq!(data[k], v, "{k}\n{said}");
    }
    let params: serde_json::Value =
        serde_json::from_str(data["ARGOCD_APP_PARAMETERS"].as_str().unwrap()).unwrap();
    assert_eq!(
        params,
        serde_json::json!([
            {"name": "values-files", "array": ["a.yaml", "b.yaml"]},
            {"name": "helm-parameters", "map": {"image.tag": "v1.2.3"}}
        ])
    );
    assert!(data.get("SECRET_OF_THE_DAEMON").is_none(), "{said}");
    assert!(
        data["HOME"] != std::env::var("HOME").unwrap().as_str(),
        "{said}"
    );
    let validated = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(["validate", tree.to_str().unwrap()])
        .args(["--plugins-dir", plugins.path().to_str().unwrap()])
        .env("DRIFTLESS_CACHE_DIR", elsewhere.path().join("cache"))
        .env_remove("KUBECONFIG")
        .output()
        .expect("run driftless");
    assert_exit(&validated, 0);
    let stdout = String::from_utf8_lossy(&validated.stdout);
    assert!(
        stdout.contains("notice: cmp.yaml:1:1: ConfigManagementPlugin from-the-tree is not run from the tree")
            && stdout.contains("rendered: app.yaml#argo.told: Argo CD Application told: told (config management plugin printenv-v1.0)"),
        "{}",
        show(&validated)
    );
    assert!(!Path::new("/tmp/should-not-run").exists());
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "run\n");

    // Unchanged: answered from the render cache, the plugin not run again.
    let again = render();
    assert_exit(&again, 0);
    assert_eq!(again.stdout, out.stdout);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "run\n");
}
