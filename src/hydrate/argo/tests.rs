use super::*;
use crate::hydrate::app_yaml::Install;
use crate::hydrate::app_yaml::normalise_url;

fn file(path: &str, text: &str) -> SourceFile {
    SourceFile {
        path: path.into(),
        contents: text.as_bytes().to_vec(),
    }
}

fn repository<'a>(root: &'a str) -> Repository<'a> {
    Repository {
        repo: None,
        root: Some(root),
        urls: [normalise_url("https://github.com/acme/gitops.git")]
            .into_iter()
            .collect(),
        revisions: &[],
    }
}

/// One pass of the finder over `files`, as the first of a revision (no Application met
/// before), Argo CD's install left out.
fn find_once(files: &mut [SourceFile], repo: &Repository) -> Found {
    find(
        files,
        repo,
        &Default::default(),
        &mut BTreeSet::new(),
        Install::LeftOut,
    )
    .0
}

fn application(name: &str, path: &str, extra: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: git@github.com:acme/GitOps.git\n    path: {path}\n    targetRevision: HEAD\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: shop\n{extra}"
    )
}

#[test]
fn applications_are_found_taken_out_and_their_directories_are_theirs() {
    let root_app = application(
        "root",
        "apps",
        "  syncPolicy:\n    automated:\n      prune: true\n",
    );
    let mut files = vec![
        file(
            "root.yaml",
            &format!(
                "{root_app}---\napiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata:\n  name: p\n"
            ),
        ),
        file("apps/web.yaml", &application("web", "web", "")),
        file(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        ),
    ];
    let mut seen = BTreeSet::new();
    let (found, apps) = find(
        &mut files,
        &repository(""),
        &Default::default(),
        &mut seen,
        Install::LeftOut,
    );
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    // The app in `apps/` is the root app's to render: found once that render is read.
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0].name, "root");
    assert!(apps[0].prune);
    assert_eq!(found.consumed, ["apps"]);
    assert_eq!(found.renders.parts.len(), 1);
    assert_eq!(found.renders.parts[0].output, "root.yaml#argo.root");
    assert!(matches!(
        &found.renders.parts[0].source,
        PartSource::Directory { path, recurse: false, .. } if path == "apps"
    ));
    // Blanked line for line.
    let text = String::from_utf8(files[0].contents.clone()).unwrap();
    assert!(
        text.trim_matches(|c| c == '\n' || c == '-').is_empty(),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&files[2].contents).contains("ConfigMap"));

    // The root app's render holds the app in `apps/`: it is found in turn.
    let mut rendered = vec![file("root.yaml#argo.root", &application("web", "web", ""))];
    let (found, apps) = find(
        &mut rendered,
        &repository(""),
        &Default::default(),
        &mut seen,
        Install::LeftOut,
    );
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    assert_eq!(
        found.renders.parts[0].output,
        "root.yaml#argo.root#argo.web"
    );
    assert!(!apps[0].prune, "no automated prune");
    // Met again: a cycle.
    let mut again = vec![file("x.yaml", &application("web", "web", ""))];
    let (found, _) = find(
        &mut again,
        &repository(""),
        &Default::default(),
        &mut seen,
        Install::LeftOut,
    );
    assert_eq!(found.errors.len(), 1);
    assert!(
        found.errors[0].message.contains("met twice"),
        "{:?}",
        found.errors
    );
}

#[test]
fn what_is_not_carried_out_is_an_error_at_its_place() {
    let cases = [
        (
            application("a", "a", "").replace("acme/GitOps", "other/repo"),
            "a.yaml:9:1: Application a: its source git@github.com:other/repo.git is not the repository being read",
        ),
        (
            application(
                "a",
                "a",
                "  syncPolicy:\n    syncOptions:\n      - FailOnSharedResource=true\n",
            ),
            "a.yaml:16:1: Application a: sync option \"FailOnSharedResource=true\" is not carried out by driftless yet; nothing is applied",
        ),
        (
            application("a", "a", "").replace("    server:", "    name: prod\n    server:"),
            "a.yaml:12:1: Application a: its destination gives both `name` and `server`; Argo CD takes one; nothing is applied",
        ),
        (
            application(
                "a",
                "a",
                "  ignoreDifferences:\n    - kind: Deployment\n      jqPathExpressions: ['.spec.template.spec.containers[] | select(.name == \"x\")']\n",
            ),
            "a.yaml:15:1: Application a: ignoreDifferences[0]: the jq expression",
        ),
        (
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: s\nspec:\n  generators:\n    - matrix: {}\n"
                .to_string(),
            "a.yaml:7:1: ApplicationSet s: the matrix generator is not carried out by driftless yet (list, git and clusters are); nothing is applied",
        ),
        // Of another type than Argo CD's CRD has it: refused, not read as absent.
        (
            application("a", "a", "").replace("targetRevision: HEAD", "targetRevision: 4.0"),
            "a.yaml:11:1: Application a: `spec.source.targetRevision` is a number, not a string; nothing is applied",
        ),
        // Read by hand, these were taken as absent: not pruned, no API versions.
        (
            application("a", "a", "  syncPolicy:\n    automated:\n      prune: \"true\"\n"),
            "a.yaml:17:1: Application a: `spec.syncPolicy.automated.prune` is a string, not true or false; nothing is applied",
        ),
        (
            application("a", "a", "").replace(
                "targetRevision: HEAD",
                "targetRevision: HEAD\n    helm:\n      apiVersions: monitoring.coreos.com/v1",
            ),
            "a.yaml:13:1: Application a: `spec.source.helm.apiVersions` is a string, not a list; nothing is applied",
        ),
        // A source's keys beyond Argo CD's, at their own line.
        (
            application("a", "a", "").replace(
                "targetRevision: HEAD",
                "targetRevision: HEAD\n    directory:\n      recurse: true\n      exclud: '*.md'",
            ),
            "a.yaml:14:1: Application a: `directory.exclud` is not carried out by driftless yet; nothing is applied",
        ),
    ];
    for (text, want) in cases {
        let mut files = vec![file("a.yaml", &text)];
        let found = find_once(&mut files, &repository(""));
        // A refused Application is held alone; a refused ApplicationSet is the tree's
        // error (the apps it would make are unknown).
        let (said, held) = match text.contains("kind: ApplicationSet") {
            true => (&found.errors, found.held.is_empty()),
            false => (
                &found.held.iter().map(|h| h.error.clone()).collect(),
                found.errors.is_empty() && found.held.iter().all(|h| h.app == "argo/a"),
            ),
        };
        assert!(held, "{found:?}");
        assert_eq!(said.len(), 1, "{text}");
        let said = said[0].to_string();
        assert!(said.starts_with(want), "{said}\nwanted {want}");
        assert!(found.renders.parts.is_empty() && found.renders.releases.is_empty());
    }
}

#[test]
fn charts_become_releases_with_their_values() {
    let text = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: podinfo\nspec:\n  sources:\n    - repoURL: https://charts.example.com/\n      chart: podinfo\n      targetRevision: 6.2.3\n      helm:\n        releaseName: web\n        valueFiles: [$values/values/podinfo.yaml]\n        valuesObject: {ui: {message: hi}}\n        parameters:\n          - {name: replicaCount, value: \"2\"}\n          - {name: ui.color, value: \"007\", forceString: true}\n        skipCrds: true\n    - repoURL: https://github.com/acme/gitops\n      targetRevision: main\n      ref: values\n  destination:\n    namespace: shop\n";
    let mut files = vec![file("apps/podinfo.yaml", text)];
    let found = find_once(&mut files, &repository("clusters/prod"));
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    assert_eq!(found.renders.releases.len(), 1);
    let r = &found.renders.releases[0];
    assert_eq!(r.file, "apps/podinfo.yaml#argo.podinfo");
    assert_eq!(r.release.chart, "podinfo");
    assert_eq!(
        r.release.repository.as_deref(),
        Some("https://charts.example.com")
    );
    assert_eq!(r.release.version.as_deref(), Some("6.2.3"));
    assert_eq!(r.release.release_name, "web");
    assert_eq!(r.release.namespace, "shop");
    assert_eq!(r.release.values_files, ["../../values/podinfo.yaml"]);
    assert_eq!(
        r.release.values,
        serde_json::json!({"ui": {"message": "hi", "color": "007"}, "replicaCount": 2})
    );
    assert!(!r.release.include_crds);
}

#[test]
fn marks_say_what_the_application_says() {
    let app = App {
        name: "web".into(),
        namespace: Some("shop".into()),
        wave: 2,
        prune: false,
        self_heal: false,
        replace: true,
        create_namespace: true,
        ignore: vec![crate::spec::helm::TargetedIgnore {
            select: crate::spec::select::ObjectSelector {
                group: Some("apps".into()),
                kind: Some("Deployment".into()),
                ..Default::default()
            },
            pointers: vec!["/spec/replicas".into()],
        }],
        destination: None,
    };
    let mut docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec: {}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n  annotations:\n    argocd.argoproj.io/sync-wave: \"-1\"\n",
    )
    .unwrap();
    // The render its namespace is created with (the find's choice: its first).
    let marks = crate::hydrate::marks::AppMarks {
        creates_namespace: Some("shop".into()),
        ..marks(&app)
    };
    crate::hydrate::marks::AppMarks::put_all(&[marks], &mut docs);
    assert_eq!(docs[0]["kind"], "Namespace");
    assert_eq!(
        docs[0]["metadata"]["annotations"]["driftless.dev/apply"],
        "create-only"
    );
    let d = &docs[1]["metadata"];
    assert_eq!(d["namespace"], "shop");
    assert_eq!(d["annotations"]["driftless.dev/wave"], "2");
    assert_eq!(d["annotations"]["driftless.dev/prune"], "disabled");
    assert_eq!(d["annotations"]["driftless.dev/replace"], "on-immutable");
    assert_eq!(
        d["annotations"]["driftless.dev/drift"], "report",
        "no selfHeal"
    );
    assert_eq!(
        d["annotations"]["driftless.dev/ignore-fields"],
        "/spec/replicas"
    );
    let r = &docs[2]["metadata"];
    assert!(r.get("namespace").is_none(), "cluster-scoped");
    assert!(
        r["annotations"].get("driftless.dev/wave").is_none(),
        "its own wave"
    );
}

#[test]
fn a_namespace_the_application_creates_goes_with_its_first_render_alone() {
    let two = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n  namespace: argocd\nspec:\n  project: default\n  sources:\n    - repoURL: https://github.com/acme/gitops.git\n      path: a\n    - repoURL: https://github.com/acme/gitops.git\n      path: b\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: shop\n  syncPolicy:\n    syncOptions: [CreateNamespace=true]\n";
    let mut files = vec![file("web.yaml", two)];
    let found = find_once(&mut files, &repository(""));
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    let created: Vec<_> = found
        .renders
        .parts
        .iter()
        .map(|p| (p.marks.of.as_str(), p.marks.creates_namespace.as_deref()))
        .collect();
    assert_eq!(
        created,
        [("Application web", Some("shop")), ("Application web", None)]
    );
}

#[test]
fn a_source_at_another_revision_of_this_repository_is_said_to_be_read_in_place() {
    let at = |name: &str, revision: &str| {
        application(name, name, "").replace(
            "targetRevision: HEAD",
            &format!("targetRevision: {revision}"),
        )
    };
    let text = [
        at("head", "HEAD"),
        at("main", "main"),
        at("pinned", "v1.2.0"),
        at("other", "release-2"),
    ]
    .join("---\n");
    let revisions = ["main".to_string(), "0123abcd".to_string()];
    let repo = Repository {
        revisions: &revisions,
        ..repository("")
    };
    let mut files = vec![file("apps.yaml", &text)];
    let found = find_once(&mut files, &repo);
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    assert_eq!(
        found.notices,
        [
            "Application pinned names revision v1.2.0 of this repository: driftless reads it in place, at the revision being synced (main), not at v1.2.0",
            "Application other names revision release-2 of this repository: driftless reads it in place, at the revision being synced (main), not at release-2",
        ]
    );
    // Where the revision being read has no name (an artifact), nothing is said.
    let mut files = vec![file("apps.yaml", &text)];
    let found = find_once(&mut files, &repository(""));
    assert!(found.notices.is_empty(), "{:?}", found.notices);
}
