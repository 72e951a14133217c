//! The app as the unit of failure (DESIGN 1.12): an error of one app's render or
//! validation holds that app alone, neither applied nor pruned, while the other apps of
//! the revision go on; an error of the tree itself (a file no app renders) still stops
//! the whole revision, as does any error under `--all-or-nothing`.

use crate::spec::clusters::Destination;
use std::collections::BTreeMap;

pub(crate) use super::stage::AppError;
use crate::spec::settings::Settings;
use crate::spec::{Location, Policy, RenderedApps, SourceFile, SpecError, SpecErrors, SpecTree};

/// Moves the errors in files an app rendered from `errors` to `held`, each under the
/// innermost app that rendered its file, or the `[apps]` directory it lies in. Before
/// errors are said where written: that place is the app object's, not its render's. One
/// identity claimed by two apps is the tree's: neither app can be applied alone.
pub(super) fn classify(
    errors: &mut Vec<SpecError>,
    held: &mut Vec<AppError>,
    settings: &Settings,
    apps: &RenderedApps,
) {
    let app_of = |file: &str| {
        apps.app_of(file)
            .map(ToString::to_string)
            .or_else(|| settings.app_dir_of(file))
    };
    let mut tree = Vec::with_capacity(errors.len());
    for e in errors.drain(..) {
        let app = app_of(&e.at.file);
        let claimed_twice = e
            .message
            .split_once(" first defined at ")
            .filter(|_| e.message.starts_with("duplicate spec "))
            .map(|(_, first)| {
                let file = first.rsplitn(3, ':').nth(2).unwrap_or(first);
                app_of(file) != app
            })
            .unwrap_or(false);
        match app {
            Some(app) if !claimed_twice => held.push(AppError::new(app, e)),
            _ => tree.push(e),
        }
    }
    *errors = tree;
}

/// The policy with each app that names its cluster placed here or elsewhere, and so
/// each file it made (as the innermost such app that made it says); an app that names a
/// cluster the operator did not declare is held with why. An app placed elsewhere is not
/// this cluster's: its own errors are not held here.
fn placed(
    destinations: &BTreeMap<String, (Destination, Location)>,
    made_by: &BTreeMap<String, Location>,
    apps: &RenderedApps,
    policy: &Policy,
    held: &mut Vec<AppError>,
) -> Policy {
    let mut placed = BTreeMap::new();
    for (app, (to, at)) in destinations {
        match policy.cluster.place(to) {
            Ok(Some(here)) => {
                placed.insert(app.clone(), here);
            }
            Ok(None) => {}
            Err(why) => {
                let mut e = SpecError {
                    at: at.clone(),
                    message: format!("{}: {why}; nothing is applied", app_object(app)),
                };
                super::stage::said_where_written(&mut e, made_by);
                held.push(AppError::new(app.clone(), e));
            }
        }
    }
    held.retain(|h| placed.get(&h.app) != Some(&false));
    let files = match placed.is_empty() {
        true => BTreeMap::new(),
        false => apps
            .iter()
            .filter_map(|(file, made)| {
                let here = made
                    .iter()
                    .rev()
                    .find_map(|app| placed.get(&app.to_string()))?;
                Some((file.to_string(), *here))
            })
            .collect(),
    };
    let mut policy = policy.clone();
    policy.cluster.placed = std::sync::Arc::new(files);
    policy
}

/// The object an app is, as its errors name it: `Application web`, `Kustomization
/// ns/apps`, `HelmRelease ns/podinfo`.
fn app_object(app: &str) -> String {
    match app.split_once('/') {
        Some(("argo", name)) => format!("Application {name}"),
        Some(("flux", name)) => format!("Kustomization {name}"),
        Some(("flux-helm", name)) => format!("HelmRelease {name}"),
        _ => format!("app {app}"),
    }
}

/// The spec tree of a rendered revision: `files` as the stage handed them on, `errors`
/// the tree's own (said where written), `held` the apps' own. Every error of the tree,
/// or any error at all under `policy.all_or_nothing`, makes the revision invalid with
/// all of them; otherwise the held apps' files (and those of the apps they render) are
/// left out, and the tree says which apps it holds and why.
pub fn load(
    files: &[SourceFile],
    errors: &[SpecError],
    held: &[AppError],
    made_by: &BTreeMap<String, Location>,
    apps: &RenderedApps,
    destinations: &BTreeMap<String, (Destination, Location)>,
    policy: &Policy,
) -> Result<SpecTree, SpecErrors> {
    let mut tree_errors = errors.to_vec();
    let mut held = held.to_vec();
    let policy = &placed(destinations, made_by, apps, policy, &mut held);
    let rendered_apps = std::sync::Arc::new(apps.clone());
    let parsed = crate::spec::parse_files_with(files, policy).map(|mut tree| {
        tree.rendered_apps = rendered_apps.clone();
        tree
    });
    if let Err(more) = &parsed {
        let mut more = more.0.clone();
        let mut more_held = Vec::new();
        classify(
            &mut more,
            &mut more_held,
            &crate::spec::settings_of(files),
            apps,
        );
        for e in more
            .iter_mut()
            .chain(more_held.iter_mut().map(|h| &mut h.error))
        {
            super::stage::said_where_written(e, made_by);
        }
        tree_errors.extend(more);
        held.extend(more_held);
    }
    if !tree_errors.is_empty() || (policy.all_or_nothing && !held.is_empty()) {
        return Err(all_errors(tree_errors, held));
    }
    if held.is_empty() {
        return parsed.map(|mut tree| {
            tree.all_or_nothing = policy.all_or_nothing;
            tree
        });
    }
    let mut by_app: BTreeMap<String, Vec<SpecError>> = BTreeMap::new();
    for h in held {
        by_app.entry(h.app).or_default().push(h.error);
    }
    for errors in by_app.values_mut() {
        errors.sort();
        errors.dedup();
    }
    let kept: Vec<SourceFile> = files
        .iter()
        .filter(|f| !by_app.keys().any(|app| made_by_app(apps, &f.path, app)))
        .cloned()
        .collect();
    match crate::spec::parse_files_with(&kept, policy) {
        Ok(mut tree) => {
            tree.rendered_apps = rendered_apps;
            tree.held = std::sync::Arc::new(by_app);
            tree.all_or_nothing = policy.all_or_nothing;
            Ok(tree)
        }
        // What is left is the tree's own and fails without the held apps (a `depends-on`
        // naming one of their specs): the revision is invalid, with every reason.
        Err(mut rest) => {
            for e in &mut rest.0 {
                super::stage::said_where_written(e, made_by);
            }
            let held = by_app
                .into_iter()
                .flat_map(|(app, es)| es.into_iter().map(move |e| AppError::new(app.clone(), e)))
                .collect();
            Err(all_errors(rest.0, held))
        }
    }
}

/// Whether `file` is `app`'s (as said: `argo/web`, `dir/teams/a`): rendered by it or by an
/// app it rendered, or, for an `[apps]` directory, under it.
fn made_by_app(apps: &RenderedApps, file: &str, app: &str) -> bool {
    match app.strip_prefix("dir/") {
        Some(dir) => {
            let base = file.split('#').next().unwrap_or(file);
            base.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
        }
        None => apps.rendered_by(file, app),
    }
}

fn all_errors(tree: Vec<SpecError>, held: Vec<AppError>) -> SpecErrors {
    let mut all = tree;
    all.extend(held.into_iter().map(|h| h.error));
    all.sort();
    all.dedup();
    SpecErrors(all)
}

/// `argo/web: 1 error`, one line per held app, as the CLI says them last.
pub fn describe_held(tree: &SpecTree) -> Vec<String> {
    tree.held
        .iter()
        .map(|(app, errors)| {
            let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
            match errors.len() {
                1 => format!("held: app {app}, neither applied nor pruned: {first}"),
                n => format!("held: app {app}, neither applied nor pruned ({n} errors): {first}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::AppId;

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            contents: text.as_bytes().to_vec(),
        }
    }

    const GOOD: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n  namespace: team\n";
    const BAD: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n  namespace: team\n";

    fn argo(name: &str) -> AppId {
        AppId::Argo { name: name.into() }
    }

    fn flux(namespace: &str, name: &str) -> AppId {
        AppId::Flux {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The apps beside each file, as a render hands them on.
    fn made(files: &[(&str, Vec<AppId>)]) -> RenderedApps {
        let mut apps = RenderedApps::new();
        for (file, made) in files {
            apps.insert(file.to_string(), made.clone());
        }
        apps
    }

    #[test]
    fn a_file_belongs_to_the_apps_that_made_it_and_to_the_directory_it_lies_in() {
        let apps = made(&[
            ("root.yaml#1", vec![argo("root"), argo("web")]),
            ("teams/a/k.yaml#2", vec![flux("ns", "n")]),
        ]);
        assert!(made_by_app(&apps, "root.yaml#1", "argo/root"));
        assert!(made_by_app(&apps, "root.yaml#1", "argo/web"));
        assert!(!made_by_app(&apps, "root.yaml#1", "argo/we"));
        // A file's name says nothing of its apps.
        assert!(!made_by_app(&apps, "root.yaml#argo.web", "argo/web"));
        assert!(!made_by_app(&apps, "root.yaml", "argo/root"));
        assert!(made_by_app(&apps, "teams/a/k.yaml#2", "flux/ns/n"));
        assert!(made_by_app(&apps, "teams/a/k.yaml#2", "dir/teams/a"));
        assert!(!made_by_app(&apps, "teams/ab/k.yaml", "dir/teams/a"));
    }

    #[test]
    fn declared_directories_are_apps() {
        assert!(
            crate::spec::guards_own_prune("flux/ns/a")
                && !crate::spec::guards_own_prune("helm/web")
        );

        let settings = crate::spec::settings_of(&[file(
            crate::spec::settings::SETTINGS_FILE,
            "[apps]\ndirectories = [\"teams/*\"]\n",
        )]);
        assert_eq!(
            settings.app_dir_of("teams/a/x/y.yaml").as_deref(),
            Some("dir/teams/a")
        );
        assert_eq!(
            settings.app_dir_of("teams/a/kustomization.yaml").as_deref(),
            Some("dir/teams/a")
        );
        assert_eq!(settings.app_dir_of("teams/x.yaml"), None);
        assert_eq!(settings.app_dir_of("plain.yaml"), None);

        let error =
            |file: &str, message: &str| crate::hydrate::stage::error_at(file, 1, 1, message.into());
        let mut errors = vec![
            error("teams/a/x.yaml", "bad"),
            error(
                "teams/b/y.yaml",
                "duplicate spec manifest/ns/ConfigMap/a: first defined at teams/a/x.yaml:3:1",
            ),
            error(
                "teams/b/z.yaml",
                "duplicate spec manifest/ns/ConfigMap/b: first defined at teams/b/y.yaml:3:1",
            ),
            error("plain.yaml", "bad"),
        ];
        let mut held = Vec::new();
        classify(&mut errors, &mut held, &settings, &RenderedApps::new());
        let held: Vec<(&str, &str)> = held
            .iter()
            .map(|h| (h.app.as_str(), h.error.at.file.as_str()))
            .collect();
        assert_eq!(
            held,
            [
                ("dir/teams/a", "teams/a/x.yaml"),
                ("dir/teams/b", "teams/b/z.yaml")
            ]
        );
        // One identity in two apps is the tree's.
        let tree: Vec<&str> = errors.iter().map(|e| e.at.file.as_str()).collect();
        assert_eq!(tree, ["teams/b/y.yaml", "plain.yaml"]);
    }

    #[test]
    fn an_apps_error_holds_it_and_a_trees_error_stops_everything() {
        // The app is what the render says beside the file, whatever the file's name.
        let apps = made(&[("x.yaml#1", vec![argo("root"), argo("web")])]);
        let files = [file("plain.yaml", GOOD), file("x.yaml#1", BAD)];
        let policy = Policy::default();
        let tree = load(
            &files,
            &[],
            &[],
            &BTreeMap::new(),
            &apps,
            &BTreeMap::new(),
            &policy,
        )
        .expect("the rest is valid");
        assert_eq!(tree.specs.len(), 1);
        assert_eq!(tree.held.keys().collect::<Vec<_>>(), ["argo/web"]);
        assert!(tree.held["argo/web"][0].message.contains("Not_A_Name"));
        assert!(
            describe_held(&tree)[0].starts_with("held: app argo/web, neither applied nor pruned: ")
        );
        let facts = tree.facts();
        assert!(facts.holds(Some("argo/web")));
        // An app gone from the tree while another is held may have been its.
        assert!(facts.holds(Some("argo/gone")));
        // And so may an object of no app that the revision no longer holds (a HelmRelease
        // a held Kustomization rendered): the caller asks only of those.
        assert!(facts.holds(None));
        assert!(!Policy::default().all_or_nothing);

        let strict = Policy {
            all_or_nothing: true,
            ..Policy::default()
        };
        let errors = load(
            &files,
            &[],
            &[],
            &BTreeMap::new(),
            &apps,
            &BTreeMap::new(),
            &strict,
        )
        .unwrap_err();
        assert_eq!(errors.0.len(), 1);

        // The tree's own error: nothing goes, and every error is said.
        let files = [file("plain.yaml", BAD), file("x.yaml#1", BAD)];
        let errors = load(
            &files,
            &[],
            &[],
            &BTreeMap::new(),
            &apps,
            &BTreeMap::new(),
            &policy,
        )
        .unwrap_err();
        assert_eq!(errors.0.len(), 2, "{errors}");

        // An app object that could not be read holds that app: its render is no file.
        let files = [file("plain.yaml", GOOD)];
        let held = [AppError::new(
            "flux/ns/broken".into(),
            crate::hydrate::stage::error_at("k.yaml", 3, 1, "refused".into()),
        )];
        let tree = load(
            &files,
            &[],
            &held,
            &BTreeMap::new(),
            &RenderedApps::new(),
            &BTreeMap::new(),
            &policy,
        )
        .expect("valid");
        assert_eq!(tree.specs.len(), 1);
        assert_eq!(
            tree.held["flux/ns/broken"][0].to_string(),
            "k.yaml:3:1: refused"
        );
        let facts = tree.facts();
        assert!(facts.apps.contains("flux/ns/broken"));
        assert!(facts.held_apps.contains("flux/ns/broken"));
    }

    /// An Argo CD Application's destination places its objects: on the cluster it names
    /// (by name or by its kubeconfig's server), over the tree's `[[cluster]]` rules; the
    /// home cluster's (`https://kubernetes.default.svc`) leaves it to those rules; one
    /// the operator did not declare holds the app, with why, at its place.
    #[test]
    fn an_applications_destination_places_its_objects() {
        use crate::spec::clusters::{Clusters, Target};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("edge.yaml"),
            "apiVersion: v1\nkind: Config\ncurrent-context: e\ncontexts:\n- name: e\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://10.0.0.9:6443/'}\nusers:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("clusters.toml"),
            "[cluster.edge]\nkubeconfig = \"edge.yaml\"\n",
        )
        .unwrap();
        let clusters =
            std::sync::Arc::new(Clusters::read_file(&dir.path().join("clusters.toml")).unwrap());
        assert_eq!(
            clusters.get("edge").unwrap().server.as_deref(),
            Some("https://10.0.0.9:6443")
        );
        let cm = |name: &str| GOOD.replace("good", name);
        let files = [
            file("plain.yaml", &cm("plain")),
            file("apps.yaml#argo.by-name", &cm("by-name")),
            file("apps.yaml#argo.by-server", &cm("by-server")),
            file("apps.yaml#argo.home", &cm("home")),
            file("apps.yaml#argo.mars", &cm("mars")),
        ];
        let at = |line: usize| Location {
            file: "apps.yaml".into(),
            line,
            column: 1,
        };
        let destinations = BTreeMap::from([
            (
                "argo/by-name".to_string(),
                (Destination::Named("edge".into()), at(10)),
            ),
            (
                "argo/by-server".to_string(),
                (Destination::Server("https://10.0.0.9:6443".into()), at(20)),
            ),
            (
                "argo/home".to_string(),
                (
                    Destination::Server("https://kubernetes.default.svc".into()),
                    at(30),
                ),
            ),
            (
                "argo/mars".to_string(),
                (Destination::Named("mars".into()), at(40)),
            ),
        ]);
        let apps = made(&[
            ("apps.yaml#argo.by-name", vec![argo("by-name")]),
            ("apps.yaml#argo.by-server", vec![argo("by-server")]),
            ("apps.yaml#argo.home", vec![argo("home")]),
            ("apps.yaml#argo.mars", vec![argo("mars")]),
        ]);
        let names = |policy: &Policy| placed_names(&files, &apps, &destinations, policy);
        let home = Policy {
            cluster: Target::home(clusters.clone()),
            ..Policy::default()
        };
        let mars = "apps.yaml:40:1: Application mars: its destination cluster \"mars\" is not a declared cluster: the declared clusters are edge, in-cluster (home) (--clusters); nothing is applied";
        assert_eq!(
            names(&home),
            (vec!["home".into(), "plain".into()], vec![mars.to_string()])
        );
        let edge = Policy {
            cluster: Target::named(clusters, "edge").unwrap(),
            ..Policy::default()
        };
        assert_eq!(
            names(&edge),
            (
                vec!["by-name".into(), "by-server".into()],
                vec![mars.to_string()]
            )
        );
    }

    /// The ConfigMaps a cluster's view of `files` holds, and the errors of the apps it
    /// holds.
    fn placed_names(
        files: &[SourceFile],
        apps: &RenderedApps,
        destinations: &BTreeMap<String, (Destination, Location)>,
        policy: &Policy,
    ) -> (Vec<String>, Vec<String>) {
        let tree = load(
            files,
            &[],
            &[],
            &BTreeMap::new(),
            apps,
            destinations,
            policy,
        )
        .unwrap();
        let held: Vec<String> = tree
            .held
            .values()
            .flatten()
            .map(|e| e.to_string())
            .collect();
        let mut names: Vec<String> = tree
            .specs
            .iter()
            .map(|s| s.id.name.trim_start_matches("ConfigMap/").to_string())
            .collect();
        names.sort();
        (names, held)
    }

    /// Flux's hub and spokes: a Kustomization's or HelmRelease's `kubeConfig.secretRef`
    /// sends what it renders to the cluster the operator declared with that Secret; the
    /// innermost app that names one decides (a HelmRelease patched with a `kubeConfig`
    /// inside a Kustomization that has none); a Secret no cluster is declared with holds
    /// its app.
    #[test]
    fn flux_kubeconfig_secrets_place_their_apps_on_the_declared_cluster() {
        use crate::spec::clusters::{Clusters, SecretRef, Target};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("clusters.toml"),
            "[cluster.staging]\nsecret = \"hub/cluster-kubeconfig\"\n",
        )
        .unwrap();
        let clusters =
            std::sync::Arc::new(Clusters::read_file(&dir.path().join("clusters.toml")).unwrap());
        let cm = |name: &str| GOOD.replace("good", name);
        let files = [
            file("hub.yaml", &cm("plain")),
            file("hub.yaml#flux.hub.tenants", &cm("tenant")),
            file("hub.yaml#flux.hub.apps", &cm("hub-app")),
            file(
                "hub.yaml#flux.hub.apps#flux-helm.hub.podinfo",
                &cm("podinfo"),
            ),
            file("hub.yaml#flux.hub.lost", &cm("lost")),
        ];
        let secret = |name: &str, key: Option<&str>| {
            Destination::Secret(SecretRef {
                namespace: "hub".into(),
                name: name.into(),
                key: key.map(str::to_string),
                argocd: false,
            })
        };
        let at = |line: usize| Location {
            file: "hub.yaml".into(),
            line,
            column: 3,
        };
        let destinations = BTreeMap::from([
            (
                "flux/hub/tenants".to_string(),
                (secret("cluster-kubeconfig", None), at(10)),
            ),
            (
                "flux-helm/hub/podinfo".to_string(),
                (secret("cluster-kubeconfig", Some("value")), at(20)),
            ),
            (
                "flux/hub/lost".to_string(),
                (secret("cluster-kubeconfig", Some("other")), at(30)),
            ),
        ]);
        let podinfo = AppId::FluxHelm {
            namespace: "hub".into(),
            name: "podinfo".into(),
        };
        let apps = made(&[
            ("hub.yaml#flux.hub.tenants", vec![flux("hub", "tenants")]),
            ("hub.yaml#flux.hub.apps", vec![flux("hub", "apps")]),
            (
                "hub.yaml#flux.hub.apps#flux-helm.hub.podinfo",
                vec![flux("hub", "apps"), podinfo],
            ),
            ("hub.yaml#flux.hub.lost", vec![flux("hub", "lost")]),
        ]);
        let names = |policy: &Policy| placed_names(&files, &apps, &destinations, policy);
        let lost = "hub.yaml:30:3: Kustomization hub/lost: its kubeConfig Secret hub/cluster-kubeconfig (key other) is not a declared cluster's (`secret` in --clusters): the declared clusters are in-cluster (home), staging; nothing is applied";
        let home = Policy {
            cluster: Target::home(clusters.clone()),
            ..Policy::default()
        };
        assert_eq!(
            names(&home),
            (
                vec!["hub-app".into(), "plain".into()],
                vec![lost.to_string()]
            )
        );
        let staging = Policy {
            cluster: Target::named(clusters, "staging").unwrap(),
            ..Policy::default()
        };
        assert_eq!(
            names(&staging),
            (
                vec!["podinfo".into(), "tenant".into()],
                vec![lost.to_string()]
            )
        );
    }
}
