//! Argo CD's config management plugins (CMP v2): an Application whose source says
//! `plugin` is rendered by a plugin the operator declared, never by one the tree brings.
//! The operator's `--plugins-dir` holds `ConfigManagementPlugin` files (Argo CD's
//! `plugin.yaml`, one plugin each); an Application names one (`name`, or `name-version`)
//! or leaves it to their `discover` rules. The plugin's `init` and `generate` run in the
//! render runner (its time limit, process group, output cap and clean environment) in a
//! private copy of the repository, in the app's directory, told what Argo CD tells a
//! plugin: the build environment (`ARGOCD_APP_*`, `KUBE_VERSION`, `KUBE_API_VERSIONS`),
//! the Application's `plugin.env` as `ARGOCD_ENV_*`, and its `parameters` as
//! `ARGOCD_APP_PARAMETERS` and `PARAM_*`. What `generate` prints is the app's objects.
//!
//! A render is kept in the render cache under the plugin's definition, the repository's
//! files and what the plugin is told; the revision's commit is part of it only where the
//! definition or the repository names `ARGOCD_APP_REVISION`, so a commit that leaves an
//! app's inputs alone runs its plugin again only if the plugin may print the commit.

mod declare;
mod environment;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::argo::PluginPart;
use super::cache::KeyBuilder;
use super::marks::AppMarks;
use super::runner::{self, Session};
use super::stage::Shared;
use super::tool::{Context, Entry, FindError, Keyed, Output, Ran, Rendered, Tool, ToolError};
use crate::spec::{AppId, Location, RenderedBy};
pub use declare::declared;
use declare::{Command, Discover};
pub(crate) use declare::{DeclareError, Plugin};
use environment::environment;

/// A repository larger than this is not copied for a plugin.
const MAX_REPOSITORY_BYTES: u64 = 256 << 20;
const REVISION_VARIABLE: &str = "ARGOCD_APP_REVISION";

/// The plugins of `--plugins-dir`, read again for each revision (an operator may add one
/// without a restart).
#[derive(Default)]
pub(crate) struct Plugins;

/// The repository as a plugin sees it: its files (no `.git`), read once per revision.
#[derive(Debug)]
pub struct Repository {
    root: PathBuf,
    /// Path relative to the root, whether executable, contents' digest.
    files: Vec<(PathBuf, bool, [u8; 32])>,
    names_revision: bool,
}

/// What every plugin render of a revision shares.
pub struct Ready {
    plugins: Result<Arc<Vec<Plugin>>, DeclareError>,
    repository: Result<Arc<Repository>, RepositoryError>,
}

/// Why a plugin has no copy of the repository to run in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RepositoryError {
    #[error("a config management plugin needs its tree on disk")]
    NotOnDisk,
    /// The repository's files not read (too large, unreadable), in the reader's words.
    #[error("{0}")]
    Files(crate::hydrate::tree::RepositoryFilesError),
    #[error("a directory to run in: {0}")]
    Workspace(String),
    #[error("a copy to run in: {0}")]
    CopyDirectory(String),
    #[error("a home to run in: {0}")]
    Home(String),
    #[error("copying {file}: {why}")]
    Copying { file: String, why: String },
}

/// Why no plugin is chosen for an app.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ChooseError {
    #[error(
        "config management plugin {name:?} is not declared (driftless runs only the plugins its operator declares with --plugins-dir; {})",
        those_declared(.declared)
    )]
    NotDeclared { name: String, declared: Vec<String> },
    #[error(
        "config management plugin {name:?}: its discover rules do not match {}",
        shown_path(.path)
    )]
    NotDiscovered { name: String, path: String },
    #[error(
        "no config management plugin's discover rules match {} ({})",
        shown_path(.path),
        those_declared(.declared)
    )]
    NoneDiscovers { path: String, declared: Vec<String> },
    #[error("discover glob {pattern:?}: {why}")]
    Glob { pattern: String, why: String },
    /// A `find.command` had no copy to run in.
    #[error(transparent)]
    Repository(#[from] RepositoryError),
}

/// The plugins declared, as a refusal names them.
fn those_declared(names: &[String]) -> String {
    match names.len() {
        0 => "none is declared".to_string(),
        _ => format!("those declared are {}", names.join(", ")),
    }
}

/// Why a plugin's command printed nothing to use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CommandError {
    #[error("names no command")]
    NoCommand,
    #[error("{0} is not on PATH")]
    NotOnPath(String),
    #[error(transparent)]
    Run(runner::RunError),
}

impl Repository {
    fn read(root: &Path) -> Result<Repository, RepositoryError> {
        use sha2::Digest;
        let all = super::tree::repository_files(
            root,
            MAX_REPOSITORY_BYTES,
            "a plugin is not given a copy of it",
        )
        .map_err(RepositoryError::Files)?;
        let names_revision = all
            .iter()
            .any(|f| super::tree::mentions(&f.contents, REVISION_VARIABLE.as_bytes()));
        let files = all
            .into_iter()
            .map(|f| {
                let digest = sha2::Sha256::digest(&f.contents).into();
                (f.path, f.executable, digest)
            })
            .collect();
        Ok(Repository {
            root: root.to_path_buf(),
            files,
            names_revision,
        })
    }

    /// A private copy in `to`: plain files, executable only with `preserveFileMode`.
    fn copy(&self, to: &Path, preserve_mode: bool) -> Result<(), RepositoryError> {
        use std::os::unix::fs::PermissionsExt;
        for (rel, executable, _) in &self.files {
            let copying = |e: std::io::Error| RepositoryError::Copying {
                file: rel.display().to_string(),
                why: e.to_string(),
            };
            let target = to.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| RepositoryError::CopyDirectory(e.to_string()))?;
            }
            std::fs::copy(self.root.join(rel), &target).map_err(copying)?;
            let mode = if preserve_mode && *executable {
                0o755
            } else {
                0o644
            };
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(copying)?;
        }
        Ok(())
    }
}

impl Tool for Plugins {
    type Item = PluginPart;
    type Ready = Ready;
    type Prepared = PluginRun;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("an Argo CD config management plugin")
    }

    fn at(&self, item: &PluginPart) -> Location {
        item.at.clone()
    }

    fn app(&self, item: &PluginPart) -> Option<AppId> {
        Some(AppId::Argo {
            name: item.app.clone(),
        })
    }

    fn output_file(&self, item: &PluginPart) -> String {
        item.output.clone()
    }

    fn marks(&self, item: &PluginPart) -> Vec<AppMarks> {
        vec![item.marks.clone()]
    }

    fn ready(&self, r: &Shared, cx: &Context) -> Result<Ready, FindError> {
        // Each app says what it lacks: a plugin not declared holds its app alone.
        let plugins = match &r.opts.plugins_dir {
            Some(dir) => declared(dir).map(Arc::new),
            None => Ok(Arc::new(Vec::new())),
        };
        let repository = match &cx.input.checkout {
            Some(c) => Repository::read(&c.repo).map(Arc::new),
            None => Err(RepositoryError::NotOnDisk),
        };
        Ok(Ready {
            plugins,
            repository,
        })
    }

    /// The plugin chosen and what it is told, keyed with the repository's files.
    fn prepare(
        &self,
        r: &Shared,
        ready: &Ready,
        part: &PluginPart,
        cx: &Context,
    ) -> Result<Keyed<PluginRun>, ToolError> {
        let said = |m: String| ToolError::from(format!("Application {}: {m}", part.app));
        let plugins = ready.plugins.as_ref().map_err(|e| said(e.to_string()))?;
        let repository = ready.repository.as_ref().map_err(|e| said(e.to_string()))?;
        // What the plugin is told; `find.command` is told it too.
        let env = environment(part, cx);
        let plugin = choose(r, plugins, repository, part, &env).map_err(|e| said(e.to_string()))?;
        let mut key = KeyBuilder::new("argo-cmp");
        key.part(&plugins[plugin].text).part(part.path.as_bytes());
        for (k, v) in &env {
            if k.starts_with(REVISION_VARIABLE)
                && !(repository.names_revision
                    || super::tree::mentions(&plugins[plugin].text, REVISION_VARIABLE.as_bytes()))
            {
                continue;
            }
            key.part(k.as_bytes()).part(v.as_bytes());
        }
        for (rel, executable, digest) in &repository.files {
            key.part(rel.as_os_str().as_encoded_bytes())
                .part(&[u8::from(*executable)])
                .part(digest);
        }
        Ok(Keyed {
            inputs: PluginRun {
                plugins: Arc::clone(plugins),
                plugin,
                repository: Arc::clone(repository),
                env,
            },
            key: Some(key.finish()),
        })
    }

    fn run(&self, r: &Shared, _: &Ready, part: &PluginPart, p: &PluginRun, _: &Context) -> Ran {
        Ran::kept(run(r, p.plugin(), &p.repository, part, &p.env).map(Arc::new))
    }

    fn finish(
        &self,
        _: &Shared,
        _: &Ready,
        part: &PluginPart,
        p: PluginRun,
        output: Entry,
        _: &Context,
    ) -> Result<Rendered, ToolError> {
        let said = |m: String| ToolError::from(format!("Application {}: {m}", part.app));
        let output = output.map_err(|e| said(e.message))?;
        Ok(Rendered {
            output: Output::Yaml(Arc::unwrap_or_clone(output)),
            by: RenderedBy {
                // "(config management plugin kustomized-helm)", as `validate` says it.
                tool: "config management plugin".into(),
                version: p.plugin().name.clone(),
                command: format!(
                    "Argo CD Application {}: {}",
                    part.app,
                    shown_path(&part.path)
                ),
                release: None,
            },
            notices: Vec::new(),
            read_cluster: false,
        })
    }
}

/// A plugin part made ready: the plugin chosen (of the revision's), the repository and
/// what the plugin is told.
pub(crate) struct PluginRun {
    plugins: Arc<Vec<Plugin>>,
    plugin: usize,
    repository: Arc<Repository>,
    env: Vec<(String, String)>,
}

impl PluginRun {
    fn plugin(&self) -> &Plugin {
        &self.plugins[self.plugin]
    }
}

/// The plugin that renders `part`: the one it names (whose discover rules, if it has any,
/// must match, as Argo CD asks), else the first whose rules match.
fn choose(
    r: &Shared,
    plugins: &[Plugin],
    repository: &Repository,
    part: &PluginPart,
    env: &[(String, String)],
) -> Result<usize, ChooseError> {
    let declared = || plugins.iter().map(|p| p.name.clone()).collect();
    match &part.wanted.name {
        Some(name) => {
            let at = plugins
                .iter()
                .position(|p| &p.name == name)
                .ok_or_else(|| ChooseError::NotDeclared {
                    name: name.clone(),
                    declared: declared(),
                })?;
            match &plugins[at].spec.discover {
                Some(d) if !discovers(r, d, repository, part, env)? => {
                    Err(ChooseError::NotDiscovered {
                        name: name.clone(),
                        path: part.path.clone(),
                    })
                }
                _ => Ok(at),
            }
        }
        None => {
            for (at, p) in plugins.iter().enumerate() {
                if let Some(d) = &p.spec.discover
                    && discovers(r, d, repository, part, env)?
                {
                    return Ok(at);
                }
            }
            Err(ChooseError::NoneDiscovers {
                path: part.path.clone(),
                declared: declared(),
            })
        }
    }
}

fn shown_path(path: &str) -> &str {
    if path.is_empty() { "." } else { path }
}

/// Whether `d` matches the app's directory: `fileName` (a glob in the directory),
/// else `find.glob` (`**` allowed), else `find.command` (exit 0 and something printed).
fn discovers(
    r: &Shared,
    d: &Discover,
    repository: &Repository,
    part: &PluginPart,
    env: &[(String, String)],
) -> Result<bool, ChooseError> {
    let prefix = match part.path.as_str() {
        "" => PathBuf::new(),
        p => PathBuf::from(p),
    };
    let within: Vec<String> = repository
        .files
        .iter()
        .filter_map(|(rel, _, _)| rel.strip_prefix(&prefix).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let glob = |pattern: &str| -> Result<bool, ChooseError> {
        let pattern = pattern.trim_start_matches("./");
        let m = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ChooseError::Glob {
                pattern: pattern.to_string(),
                why: e.to_string(),
            })?
            .compile_matcher();
        Ok(within.iter().any(|f| m.is_match(f)))
    };
    if let Some(name) = d.file_name.as_deref().filter(|n| !n.is_empty()) {
        return glob(name);
    }
    let Some(find) = &d.find else {
        return Ok(false);
    };
    if let Some(g) = find.glob.as_deref().filter(|g| !g.is_empty()) {
        return glob(g);
    }
    if find.command.is_empty() {
        return Ok(false);
    }
    let copy = private_copy(repository, false)?;
    let dir = copy.path().join("repo").join(&part.path);
    let command = Command {
        command: find.command.clone(),
        args: find.args.clone(),
    };
    Ok(run_one(r, &command, &dir, &copy.path().join("home"), env)
        .is_ok_and(|out| !out.iter().all(u8::is_ascii_whitespace)))
}

fn private_copy(
    repository: &Repository,
    preserve_mode: bool,
) -> Result<tempfile::TempDir, RepositoryError> {
    let copy = tempfile::Builder::new()
        .prefix("driftless-cmp-")
        .tempdir()
        .map_err(|e| RepositoryError::Workspace(e.to_string()))?;
    repository.copy(&copy.path().join("repo"), preserve_mode)?;
    std::fs::create_dir_all(copy.path().join("home"))
        .map_err(|e| RepositoryError::Home(e.to_string()))?;
    Ok(copy)
}

/// Runs `init` then `generate` in a private copy; what `generate` printed.
fn run(
    r: &Shared,
    plugin: &Plugin,
    repository: &Repository,
    part: &PluginPart,
    env: &[(String, String)],
) -> Result<Vec<u8>, ToolError> {
    let copy = private_copy(repository, plugin.spec.preserve_file_mode)
        .map_err(|e| ToolError::from(e.to_string()))?;
    let dir = copy.path().join("repo").join(&part.path);
    if !dir.is_dir() {
        return Err(ToolError::from(format!(
            "path {:?} is not a directory of the repository",
            part.path
        )));
    }
    let home = copy.path().join("home");
    let span =
        tracing::info_span!("render", tool = "argo-cmp", plugin = %plugin.name, app = %part.app);
    let _enter = span.enter();
    r.runs.fetch_add(1, Ordering::Relaxed);
    let hide = |m: String| m.replace(&format!("{}/", copy.path().join("repo").display()), "");
    if let Some(init) = &plugin.spec.init
        && !init.command.is_empty()
    {
        run_one(r, init, &dir, &home, env).map_err(|e| {
            format!(
                "config management plugin {}: init: {}",
                plugin.name,
                hide(e.to_string())
            )
        })?;
    }
    let out = run_one(r, &plugin.spec.generate, &dir, &home, env).map_err(|e| {
        format!(
            "config management plugin {}: generate: {}",
            plugin.name,
            hide(e.to_string())
        )
    })?;
    tracing::info!("rendered");
    Ok(out)
}

fn run_one(
    r: &Shared,
    command: &Command,
    dir: &Path,
    home: &Path,
    env: &[(String, String)],
) -> Result<Vec<u8>, CommandError> {
    let Some((program, first)) = command.command.split_first() else {
        return Err(CommandError::NoCommand);
    };
    let resolved = if program.contains('/') {
        PathBuf::from(program)
    } else {
        runner::on_path(program).ok_or_else(|| CommandError::NotOnPath(program.clone()))?
    };
    let args: Vec<OsString> = first
        .iter()
        .chain(&command.args)
        .map(OsString::from)
        .collect();
    runner::run_in(
        &resolved,
        &args,
        dir,
        &r.opts.limits,
        &r.slots,
        Session {
            home: Some(home),
            stdin: None,
            env,
        },
    )
    .map_err(CommandError::Run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_plugins_declared() {
        assert_eq!(
            ChooseError::NotDeclared {
                name: "x".into(),
                declared: Vec::new()
            }
            .to_string(),
            "config management plugin \"x\" is not declared (driftless runs only the plugins its operator declares with --plugins-dir; none is declared)"
        );
        assert_eq!(
            ChooseError::NoneDiscovers {
                path: String::new(),
                declared: vec!["a".into(), "b-v1".into()]
            }
            .to_string(),
            "no config management plugin's discover rules match . (those declared are a, b-v1)"
        );
    }

    #[test]
    fn declared_plugins_are_named_by_name_and_version_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: kustomized-helm\nspec:\n  version: v1.0\n  init:\n    command: [sh, -c]\n    args: [helm dependency build]\n  generate:\n    command: [sh, -c, 'helm template .']\n  discover:\n    find:\n      glob: '**/Chart.yaml'\n",
        )
        .unwrap();
        let plugins = declared(dir.path()).unwrap();
        assert_eq!(plugins.len(), 1);
        assert_eq!(plugins[0].name, "kustomized-helm-v1.0");

        std::fs::write(
            dir.path().join("b.yaml"),
            "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: x\nspec:\n  generate:\n    command: [sh]\n  genrate: {}\n",
        )
        .unwrap();
        let e = declared(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("b.yaml: not a ConfigManagementPlugin") && e.contains("genrate"),
            "{e}"
        );
    }
}
