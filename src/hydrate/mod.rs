//! The rendering stage, between `source` and `spec` (DESIGN 1.9): a revision's files in,
//! the files the spec loader reads out. Kustomize directories are built by an external
//! `kustomize` (`kustomize.rs`, run by `runner.rs`), Jsonnet is evaluated in process
//! (`jsonnet/`), chart directories are recognised (`tree.rs`), JSON manifests are kept,
//! Flux's Kustomizations and HelmReleases are carried out rather than applied (`flux/`);
//! a rendered source's output is handed on as a YAML file at the path of the file it came
//! from, so policies, waves, hooks, tree settings, the prune guard and status treat it
//! exactly as committed YAML. Renders are cached by what they read (`cache.rs`). Cluster
//! facts, when a tool needs them, come in as values: this stage never reaches the cluster.

pub(crate) mod app_yaml;
pub mod apps;
pub mod argo;
pub mod cache;
pub mod dependencies;
pub mod error;
pub mod flux;
pub mod held;
pub mod helm;
pub mod jsonnet;
pub mod kustomize;
pub mod marks;
pub mod merge;
pub(crate) mod not_carried_out;
pub mod plugin;
mod post_render;
pub mod pull;
pub mod runner;
pub mod shape;
pub mod stage;
pub mod tool;
pub mod tree;
pub mod walk;

use std::sync::atomic::Ordering;

use crate::spec::settings::SETTINGS_FILE;
use crate::spec::{Location, SourceFile, SpecError};
use tree::{RenderedDir, base_of, is_under};

pub use stage::{Hydrated, Input, Options};
use stage::{Shared, error_at};

/// The app formats (`apps.rs`), found in this order in each pass.
const FORMATS: [apps::Registered; 2] = [flux::FORMAT, argo::FORMAT];

/// What an app format's file in `f` needs.
fn format_needs(f: &SourceFile) -> impl Iterator<Item = apps::Needs> + '_ {
    FORMATS.iter().map(|format| (format.needs)(&f.contents))
}

/// Whether a revision renders charts: helm is then told of the cluster.
pub fn uses_helm(files: &[SourceFile]) -> bool {
    files.iter().any(|f| {
        base_of(&f.path) == tree::CHART_FILE
            || (f.path.ends_with(".toml") && f.contents.windows(6).any(|w| w == b"[helm."))
            || format_needs(f).any(|n| n.charts)
    })
}

/// Whether a revision's files need the tree on disk (a git commit is then checked out):
/// kustomize and helm read files themselves.
pub fn needs_checkout(files: &[SourceFile]) -> bool {
    uses_helm(files)
        || files.iter().any(|f| {
            tree::KUSTOMIZATION_FILES.contains(&base_of(&f.path))
                || format_needs(f).any(|n| n.checkout)
        })
}

/// Apps that render apps (Flux Kustomizations, Argo CD Applications, either of the
/// other), this deep at most.
const MAX_DEPTH: usize = 8;

/// The stage: its options, tools found, and caches. One per process (CLI) or daemon.
pub struct Hydrator {
    shared: Shared,
    // The tools (tool.rs), each with what it keeps between revisions.
    kustomize: kustomize::Kustomizations,
    helm: helm::Releases,
    jsonnet: jsonnet::Evaluations,
    flux: flux::Builds,
    argo: argo::Directories,
    plugins: plugin::Plugins,
}

impl Hydrator {
    pub fn new(opts: Options) -> Self {
        Hydrator {
            shared: Shared::new(opts),
            kustomize: kustomize::Kustomizations::default(),
            helm: helm::Releases::default(),
            jsonnet: jsonnet::Evaluations::default(),
            flux: flux::Builds::default(),
            argo: argo::Directories::default(),
            plugins: plugin::Plugins,
        }
    }

    /// Tool runs and evaluations so far (not those answered from the cache).
    pub fn runs(&self) -> u64 {
        self.shared.runs.load(Ordering::Relaxed)
    }

    /// Renders a revision.
    pub fn hydrate(&self, input: Input) -> Hydrated {
        let settings = crate::spec::settings_of(&input.files);
        let mut out = Hydrated {
            // The settings alone are no content: a tree emptied for an uninstall may keep them.
            had_files: input.files.iter().any(|f| f.path != SETTINGS_FILE)
                || !input.unread.is_empty(),
            ..Hydrated::default()
        };
        let paths = input
            .files
            .iter()
            .map(|f| f.path.as_str())
            .chain(input.unread.iter().map(String::as_str));
        let (dirs, problems) = tree::rendered_dirs(paths);
        for (file, message) in problems {
            out.errors.push(error_at(&file, 1, 1, message));
        }
        let (releases, problems) = crate::spec::helm::releases(&input.files);
        out.errors.extend(problems);
        // A release's values files are helm's to read, not specs.
        let values_files: std::collections::BTreeSet<String> = releases
            .iter()
            .flat_map(|r| r.values_files.iter().cloned())
            .collect();
        let consumed =
            |p: &str| values_files.contains(p) || dirs.iter().any(|d| is_under(p, d.dir()));
        let mut jsonnet_files = Vec::new();
        for f in &input.files {
            let p = f.path.as_str();
            if p == SETTINGS_FILE {
                out.files.push(f.clone());
            } else if consumed(p) || p.ends_with(".libsonnet") {
            } else if p.ends_with(".jsonnet") {
                jsonnet_files.push(p.to_string());
            } else if p.ends_with(".json") {
                match json_manifest(f) {
                    Ok(true) => out.files.push(f.clone()),
                    Ok(false) => out.unread.push(f.path.clone()),
                    Err(e) => out.errors.push(e),
                }
            } else {
                out.files.push(f.clone());
            }
        }
        out.unread
            .extend(input.unread.iter().filter(|p| !consumed(p)).cloned());
        out.unread.sort();

        let mut releases: Vec<helm::ReleaseAt> = releases
            .into_iter()
            .map(|r| helm::ReleaseAt {
                file: format!("{}#helm.{}", r.at.file, r.name),
                app: Some(crate::spec::AppId::Helm {
                    name: r.name.clone(),
                }),
                release: r,
                app_marks: None,
            })
            .collect();
        let mut kustomizations = Vec::new();
        for d in &dirs {
            match d {
                RenderedDir::Chart { dir, file } => {
                    let named = releases.iter().any(|r| r.release.chart == *dir);
                    let meta = chart_yaml(file, &input.files);
                    let library = meta.as_ref().and_then(|m| m.chart_type.as_deref());
                    if !named && library != Some("library") {
                        // Argo CD's rule: a chart nobody names is a release of its own.
                        let ns = settings.namespace_for(file).unwrap_or("default");
                        let at = Location {
                            file: file.clone(),
                            line: 1,
                            column: 1,
                        };
                        // A chart at the spec root has no directory name of its own
                        // (the checkout's is a commit or a temporary directory): it is
                        // named as `helm install NAME .` users name it, by its chart.
                        let name = match dir.as_str() {
                            "" => meta.map(|m| m.name).unwrap_or_default(),
                            dir => tree::base_of(dir).to_string(),
                        };
                        releases.push(helm::ReleaseAt {
                            release: helm::unnamed_release(dir, &name, ns, at),
                            file: file.clone(),
                            app: None,
                            app_marks: None,
                        });
                    }
                }
                RenderedDir::Kustomize { dir, file } => kustomizations.push(kustomize::Dir {
                    dir: dir.clone(),
                    file: file.clone(),
                }),
            }
        }
        let cx = tool::Context {
            input: &input,
            settings: &settings,
        };
        tool::hydrate_with(
            &self.shared,
            &self.kustomize,
            &kustomizations,
            &cx,
            &mut out,
        );
        tool::hydrate_with(&self.shared, &self.helm, &releases, &cx, &mut out);
        tool::hydrate_with(&self.shared, &self.jsonnet, &jsonnet_files, &cx, &mut out);
        self.carry_out_apps(&cx, &mut out);
        self.shared.cache.retain_used();
        out.files.sort_by(|a, b| a.path.cmp(&b.path));
        held::classify(
            &mut out.errors,
            &mut out.held,
            &settings,
            &out.rendered_apps,
        );
        for e in out
            .errors
            .iter_mut()
            .chain(out.held.iter_mut().map(|h| &mut h.error))
        {
            stage::said_where_written(e, &out.made_by);
        }
        out.errors.sort();
        out.held.sort();
        out
    }
}

impl Hydrator {
    /// The apps in what the tree holds and renders (Flux's Kustomizations and HelmReleases,
    /// Argo CD's Applications: `apps.rs`), carried out pass after pass (one may render
    /// more).
    fn carry_out_apps(&self, cx: &tool::Context, out: &mut Hydrated) {
        let root = cx.input.checkout.as_ref().map(|c| {
            c.root
                .strip_prefix(&c.repo)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let urls = cx
            .input
            .checkout
            .iter()
            .flat_map(|c| c.urls.iter())
            .chain(&cx.settings.repository_urls)
            .map(|u| app_yaml::normalise_url(u))
            .collect();
        let mut repo = apps::Repository {
            repo: cx.input.checkout.as_ref().map(|c| c.repo.as_path()),
            root: root.as_deref(),
            urls,
            revisions: cx
                .input
                .checkout
                .as_ref()
                .map_or(&[][..], |c| c.revisions.as_slice()),
        };
        let setting = apps::Setting {
            signatures: &cx.input.signatures,
            fleet: &self.shared.opts.clusters,
        };
        let mut formats: Vec<Box<dyn apps::AppFormat>> = FORMATS
            .iter()
            .map(|format| (format.new)(&out.files, &setting))
            .collect();
        let mut left_out = vec![0; formats.len()];
        for depth in 0..=MAX_DEPTH {
            let mut passes = Vec::with_capacity(formats.len());
            for (format, left_out) in formats.iter_mut().zip(&mut left_out) {
                let found = format.find(&mut out.files, &out.rendered_apps, &mut repo);
                out.errors.extend(found.errors);
                out.held.extend(found.held);
                out.destinations.extend(found.destinations);
                // Each pass reads the tree's sources again: a notice is said once.
                for n in found.notices {
                    if !out.notices.contains(&n) {
                        out.notices.push(n);
                    }
                }
                *left_out += found.install_left_out;
                drop_consumed(out, &found.consumed);
                passes.push(found.renders);
            }
            if passes.iter().all(apps::Renders::is_empty) {
                break;
            }
            if depth == MAX_DEPTH {
                for at in passes.iter().flat_map(apps::Renders::places) {
                    out.errors.push(error_at(
                        &at.file,
                        at.line,
                        at.column,
                        format!(
                            "Flux Kustomizations or Argo CD Applications render more of them more than {} deep; not carried out",
                            MAX_DEPTH
                        ),
                    ));
                }
                break;
            }
            for (format, renders) in formats.iter_mut().zip(&passes) {
                self.render(renders, cx, out);
                format.rendered(renders, out);
            }
        }
        for (format, n) in formats.iter().zip(left_out) {
            let objects = match n {
                0 => continue,
                1 => "1 object".to_string(),
                n => format!("{n} objects"),
            };
            out.notices.push(format.install_left_out(&objects));
        }
    }

    /// What an app format's pass renders, each by its tool.
    fn render(&self, renders: &apps::Renders, cx: &tool::Context, out: &mut Hydrated) {
        let shared = &self.shared;
        tool::hydrate_with(shared, &self.flux, &renders.kustomizations, cx, out);
        tool::hydrate_with(shared, &self.argo, &renders.parts, cx, out);
        tool::hydrate_with(shared, &self.plugins, &renders.plugins, cx, out);
        tool::hydrate_with(shared, &self.helm, &renders.releases, cx, out);
    }
}

/// Takes out what lies in directories an Application renders (`dirs`, relative to the
/// spec root): those files are its, and a render of them as the tree's own (a chart nobody
/// named, a kustomization) would apply them twice.
fn drop_consumed(out: &mut Hydrated, dirs: &[String]) {
    if dirs.is_empty() {
        return;
    }
    let inside = |p: &str| {
        let base = p.split('#').next().unwrap_or(p);
        dirs.iter().any(|d| is_under(base, d) || d.is_empty())
    };
    out.files.retain(|f| !inside(&f.path));
    out.unread.retain(|p| !inside(p));
    out.rendered.retain(|p, _| !inside(p));
    out.rendered_apps.retain(|p| !inside(p));
    out.errors.retain(|e| !inside(&e.at.file));
    out.held.retain(|h| !inside(&h.error.at.file));
}

/// Whether a JSON file holds a Kubernetes object; not JSON at all is an error at its place.
fn json_manifest(f: &SourceFile) -> Result<bool, SpecError> {
    match serde_json::from_slice::<serde_json::Value>(&f.contents) {
        Ok(v) => Ok(tree::is_manifest_json(&v)),
        Err(e) => Err(error_at(
            &f.path,
            e.line().max(1),
            e.column().max(1),
            format!("not valid JSON: {}", strip_position(&e.to_string())),
        )),
    }
}

/// serde_json's message without its own " at line L column C".
fn strip_position(msg: &str) -> &str {
    msg.split(" at line ").next().unwrap_or(msg)
}

/// Whether the chart whose `Chart.yaml` is `file` is a library chart (never rendered).
fn chart_yaml(file: &str, files: &[SourceFile]) -> Option<tree::ChartMeta> {
    files
        .iter()
        .find(|f| f.path == file)
        .and_then(|f| tree::ChartMeta::parse(&f.contents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Checkout;
    use std::path::PathBuf;

    fn file(p: &str, t: &str) -> SourceFile {
        SourceFile {
            path: p.into(),
            contents: t.as_bytes().to_vec(),
        }
    }

    #[test]
    fn json_jsonnet_charts_and_unread_files() {
        let r = Hydrator::new(Options::default());
        let out = r.hydrate(Input {
            files: vec![
                file(
                    "cm.json",
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
                ),
                file("dash.json", r#"{"panels":[]}"#),
                file(
                    "app.jsonnet",
                    "{ x: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'n' } } }",
                ),
                file("lib.libsonnet", "{}"),
                file(
                    "chart/Chart.yaml",
                    "apiVersion: v2\nname: web\nversion: 1.2.3\n",
                ),
                file("chart/templates/d.yaml", "{{ .Values.x }}"),
                file(
                    "libchart/Chart.yaml",
                    "apiVersion: v2\nname: common\ntype: library\nversion: 1\n",
                ),
            ],
            unread: vec!["README.md".into(), "chart/README.md".into()],
            ..Input::default()
        });
        let paths: Vec<&str> = out.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["app.jsonnet", "cm.json"]);
        assert_eq!(out.unread, ["README.md", "dash.json"]);
        assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
        assert_eq!(out.errors[0].at.file, "chart/Chart.yaml");
        // A chart no spec names is a release of its own: here with no helm to render it
        // (there is none on PATH, nor a disk), one line at its Chart.yaml.
        assert!(
            out.errors[0]
                .message
                .contains("chart needs its tree on disk"),
            "{:?}",
            out.errors
        );
        assert_eq!(out.rendered["app.jsonnet"].tool, "jsonnet");
        assert_eq!(r.runs(), 1);
        // Unchanged: answered from the cache.
        let _ = r.hydrate(Input {
            files: vec![file(
                "app.jsonnet",
                "{ x: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'n' } } }",
            )],
            ..Input::default()
        });
        assert_eq!(r.runs(), 1);
    }

    #[test]
    fn a_jsonnet_file_is_evaluated_again_when_a_file_its_imports_looked_for_appears() {
        let r = Hydrator::new(Options::default());
        let main = "(import 'lib.libsonnet').ns";
        let lib = |name: &str| {
            format!(
                "{{ ns: {{ apiVersion: 'v1', kind: 'Namespace', metadata: {{ name: '{name}' }} }} }}"
            )
        };
        let hydrate = |files: Vec<SourceFile>| {
            let out = r.hydrate(Input {
                files,
                ..Input::default()
            });
            let text: Vec<String> = out
                .files
                .iter()
                .filter(|f| f.path == "app/main.jsonnet")
                .map(|f| String::from_utf8_lossy(&f.contents).into_owned())
                .collect();
            (text.join(""), out.errors.len())
        };
        // The import is nowhere: an error, kept while nothing it looked at changes.
        let (_, errors) = hydrate(vec![file("app/main.jsonnet", main)]);
        assert_eq!((errors, r.runs()), (1, 1));
        let (_, errors) = hydrate(vec![file("app/main.jsonnet", main)]);
        assert_eq!(
            (errors, r.runs()),
            (1, 1),
            "unchanged: answered from the cache"
        );
        // Added where the import looked: evaluated again, and mended.
        let mended = || {
            vec![
                file("app/main.jsonnet", main),
                file("app/lib.libsonnet", &lib("beside")),
            ]
        };
        let (text, errors) = hydrate(mended());
        assert_eq!((errors, r.runs()), (0, 2));
        assert!(text.contains("beside"), "{text}");
        let (_, errors) = hydrate(mended());
        assert_eq!(
            (errors, r.runs()),
            (0, 2),
            "unchanged again: from the cache"
        );
    }

    /// An app of apps, rendered from disk: each output file carries the apps that made
    /// it, the outermost first, and an error in one holds its innermost app alone.
    #[test]
    fn what_an_app_of_apps_renders_carries_its_apps_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let app = |name: &str, path: &str| {
            format!(
                "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: https://example.com/acme/gitops.git\n    path: {path}\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: shop\n"
            )
        };
        let cm = |name: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shop\n"
            )
        };
        let written = [
            (
                ".driftless.toml",
                "[repository]\nurls = [\"https://example.com/acme/gitops.git\"]\n".to_string(),
            ),
            ("root.yaml", app("root", "apps")),
            (
                "apps/web.yaml",
                format!("{}---\n{}", app("web", "web"), app("db", "db")),
            ),
            ("web/cm.yaml", cm("web")),
            ("db/cm.yaml", "kind: [not a mapping\n".to_string()),
        ];
        for (path, text) in &written {
            let at = dir.path().join(path);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, text).unwrap();
        }
        let r = Hydrator::new(Options::default());
        let out = r.hydrate(Input {
            files: written.iter().map(|(p, t)| file(p, t)).collect(),
            checkout: Some(Checkout::for_dir(dir.path()).unwrap()),
            ..Input::default()
        });
        let argo = |name: &str| crate::spec::AppId::Argo { name: name.into() };
        let web = out
            .files
            .iter()
            .find(|f| String::from_utf8_lossy(&f.contents).contains("\"name\": \"web\""))
            .expect("web's render");
        assert_eq!(
            out.rendered_apps.of(&web.path),
            [argo("root"), argo("web")],
            "{:?}",
            out.rendered_apps
        );
        assert_eq!(
            out.rendered_apps.app_of("root.yaml"),
            None,
            "the tree's own"
        );
        // db's render read no YAML: db is held, with nothing else.
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let held: Vec<&str> = out.held.iter().map(|h| h.app.as_str()).collect();
        assert_eq!(held, ["argo/db"], "{:?}", out.held);
    }

    #[test]
    fn a_tools_own_install_is_left_out_only_where_the_tree_holds_its_apps() {
        let flux = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n  labels:\n    app.kubernetes.io/instance: flux-system\n    app.kubernetes.io/part-of: flux\n";
        let argo = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  namespace: argocd\n  labels:\n    app.kubernetes.io/name: argocd-cm\n    app.kubernetes.io/part-of: argocd\n";
        // A CRD of the tool's own group is no app object of it.
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: applications.argoproj.io\n  labels:\n    app.kubernetes.io/part-of: argocd\nspec:\n  group: argoproj.io\n  names: {kind: Application, plural: applications}\n  scope: Namespaced\n  versions: []\n";
        let r = Hydrator::new(Options::default());
        let alone = r.hydrate(Input {
            files: vec![
                file("flux/gotk-components.yaml", flux),
                file("argo/install.yaml", &format!("{argo}---\n{crd}")),
            ],
            ..Input::default()
        });
        assert!(alone.errors.is_empty(), "{:?}", alone.errors);
        assert!(alone.notices.is_empty(), "{:?}", alone.notices);
        let kept: Vec<String> = alone
            .files
            .iter()
            .map(|f| String::from_utf8_lossy(&f.contents).into_owned())
            .collect();
        assert!(kept.iter().any(|t| t.contains("name: flux-system")));
        assert!(kept.iter().any(|t| t.contains("name: argocd-cm")));
        assert!(kept.iter().any(|t| t.contains("applications.argoproj.io")));

        // Beside an Application (which driftless carries out), Argo CD's install is left
        // out and said; Flux's, with no Flux app object, is still applied.
        let app = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  project: default\n  source:\n    repoURL: https://example.com/other.git\n    path: web\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: web\n";
        let with_app = r.hydrate(Input {
            files: vec![
                file("flux/gotk-components.yaml", flux),
                file("argo/install.yaml", argo),
                file("apps/web.yaml", app),
            ],
            ..Input::default()
        });
        let kept: Vec<String> = with_app
            .files
            .iter()
            .map(|f| String::from_utf8_lossy(&f.contents).into_owned())
            .collect();
        assert!(kept.iter().any(|t| t.contains("name: flux-system")));
        assert!(
            !kept.iter().any(|t| t.contains("name: argocd-cm")),
            "{kept:?}"
        );
        assert!(
            with_app
                .notices
                .iter()
                .any(|n| n.starts_with("1 object of Argo CD's own install not applied")),
            "{:?}",
            with_app.notices
        );
        // The Application names another repository: held alone, not the tree's error.
        assert!(with_app.errors.is_empty(), "{:?}", with_app.errors);
        assert_eq!(with_app.held.len(), 1, "{:?}", with_app.held);
        assert_eq!(with_app.held[0].app, "argo/web");
    }

    #[test]
    fn broken_json_is_an_error_at_its_place() {
        let r = Hydrator::new(Options::default());
        let out = r.hydrate(Input {
            files: vec![file("x.json", "{\n  \"a\": ,\n}")],
            ..Input::default()
        });
        assert_eq!(out.errors.len(), 1);
        assert_eq!((out.errors[0].at.line, out.errors[0].at.column), (2, 8));
        assert!(out.errors[0].message.starts_with("not valid JSON"));
    }

    #[test]
    fn a_kustomization_without_a_disk_or_a_tool_is_one_line_at_its_file() {
        let r = Hydrator::new(Options {
            kustomize: Some(PathBuf::from("/nonexistent/kustomize")),
            ..Options::default()
        });
        let out = r.hydrate(Input {
            files: vec![file("app/kustomization.yaml", "resources: []\n")],
            ..Input::default()
        });
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].at.file, "app/kustomization.yaml");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("app")).unwrap();
        std::fs::write(dir.path().join("app/kustomization.yaml"), "resources: []\n").unwrap();
        let out = r.hydrate(Input {
            files: vec![file("app/kustomization.yaml", "resources: []\n")],
            checkout: Some(Checkout::for_dir(dir.path()).unwrap()),
            ..Input::default()
        });
        assert_eq!(out.errors.len(), 1);
        assert!(
            out.errors[0]
                .message
                .contains("/nonexistent/kustomize does not run"),
            "{:?}",
            out.errors
        );
    }
}
