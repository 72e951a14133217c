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

mod environment;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Deserialize;

use super::argo::PluginPart;
use super::cache::KeyBuilder;
use super::runner::{self, Session};
use super::stage::Shared;
use super::tool::{Context, FindError, Rendered, Tool, ToolError};
use crate::spec::{Location, RenderedBy};
use environment::environment;

/// A repository larger than this is not copied for a plugin.
const MAX_REPOSITORY_BYTES: u64 = 256 << 20;
const REVISION_VARIABLE: &str = "ARGOCD_APP_REVISION";

/// The plugins of `--plugins-dir`, read again for each revision (an operator may add one
/// without a restart).
#[derive(Default)]
pub struct Plugins;

/// A `ConfigManagementPlugin` file as Argo CD reads one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PluginFile {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: PluginSpec,
}

#[derive(Debug, Clone, Deserialize)]
struct Metadata {
    name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PluginSpec {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    init: Option<Command>,
    generate: Command,
    #[serde(default)]
    discover: Option<Discover>,
    /// What Argo CD's UI announces; the plugin itself is told only what the Application sets.
    #[serde(default, rename = "parameters")]
    _parameters: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    preserve_file_mode: bool,
    /// Git credentials are never handed to a plugin by driftless (a plugin that needs a
    /// private repository reaches it with the operator's own configuration).
    #[serde(default, rename = "provideGitCreds")]
    _provide_git_creds: bool,
    /// Each render has a private copy: there is nothing to lock.
    #[serde(default, rename = "lockRepo")]
    _lock_repo: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Discover {
    #[serde(default)]
    file_name: Option<String>,
    #[serde(default)]
    find: Option<Find>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Find {
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
}

/// One declared plugin: the name an Application names it by, and its definition.
#[derive(Debug, Clone)]
pub struct Plugin {
    name: String,
    spec: PluginSpec,
    /// The definition's bytes, for the cache key.
    text: Vec<u8>,
}

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
    plugins: Result<Arc<Vec<Plugin>>, String>,
    repository: Result<Arc<Repository>, String>,
}

/// The plugins declared in `dir`: each `*.yaml`/`*.yml` file one `ConfigManagementPlugin`.
pub fn declared(dir: &Path) -> Result<Vec<Plugin>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("--plugins-dir {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    let mut plugins: Vec<Plugin> = Vec::new();
    for p in paths {
        let shown = p.display().to_string();
        let text = std::fs::read(&p).map_err(|e| format!("{shown}: {e}"))?;
        let file: PluginFile = serde_saphyr::from_slice(&text).map_err(|e| {
            format!(
                "{shown}: not a ConfigManagementPlugin: {}",
                e.to_string().lines().next().unwrap_or_default()
            )
        })?;
        if file.kind != "ConfigManagementPlugin" || !file.api_version.starts_with("argoproj.io/") {
            return Err(format!(
                "{shown}: a {} of {}, not an argoproj.io ConfigManagementPlugin",
                file.kind, file.api_version
            ));
        }
        if file.metadata.name.is_empty() || file.spec.generate.command.is_empty() {
            return Err(format!(
                "{shown}: a ConfigManagementPlugin needs metadata.name and spec.generate.command"
            ));
        }
        let name = match file.spec.version.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => format!("{}-{v}", file.metadata.name),
            None => file.metadata.name.clone(),
        };
        if plugins.iter().any(|q| q.name == name) {
            return Err(format!("{shown}: a second plugin named {name}"));
        }
        plugins.push(Plugin {
            name,
            spec: file.spec,
            text,
        });
    }
    Ok(plugins)
}

impl Repository {
    fn read(root: &Path) -> Result<Repository, String> {
        use sha2::Digest;
        let all = super::tree::repository_files(
            root,
            MAX_REPOSITORY_BYTES,
            "a plugin is not given a copy of it",
        )?;
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
    fn copy(&self, to: &Path, preserve_mode: bool) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        for (rel, executable, _) in &self.files {
            let target = to.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("a copy to run in: {e}"))?;
            }
            std::fs::copy(self.root.join(rel), &target)
                .map_err(|e| format!("copying {}: {e}", rel.display()))?;
            let mode = if preserve_mode && *executable {
                0o755
            } else {
                0o644
            };
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(|e| format!("copying {}: {e}", rel.display()))?;
        }
        Ok(())
    }
}

impl Tool for Plugins {
    type Item = PluginPart;
    type Ready = Ready;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("an Argo CD config management plugin")
    }

    fn at(&self, item: &PluginPart) -> Location {
        item.at.clone()
    }

    fn output_file(&self, item: &PluginPart) -> String {
        item.output.clone()
    }

    fn ready(&self, r: &Shared, cx: &Context) -> Result<Ready, FindError> {
        // Each app says what it lacks: a plugin not declared holds its app alone.
        let plugins = match &r.opts.plugins_dir {
            Some(dir) => declared(dir).map(Arc::new),
            None => Ok(Arc::new(Vec::new())),
        };
        let repository = match &cx.input.checkout {
            Some(c) => Repository::read(&c.repo).map(Arc::new),
            None => Err("a config management plugin needs its tree on disk".into()),
        };
        Ok(Ready {
            plugins,
            repository,
        })
    }

    fn render(
        &self,
        r: &Shared,
        ready: &Ready,
        part: &PluginPart,
        cx: &Context,
    ) -> Result<Rendered, ToolError> {
        let said = |m: String| ToolError::from(format!("Application {}: {m}", part.app));
        let plugins = ready.plugins.as_ref().map_err(|e| said(e.clone()))?;
        let repository = ready.repository.as_ref().map_err(|e| said(e.clone()))?;
        // What the plugin is told; `find.command` is told it too.
        let env = environment(part, cx);
        let plugin = choose(r, plugins, repository, part, &env).map_err(said)?;
        let mut key = KeyBuilder::new("argo-cmp");
        key.part(&plugin.text).part(part.path.as_bytes());
        for (k, v) in &env {
            if k.starts_with(REVISION_VARIABLE)
                && !(repository.names_revision
                    || super::tree::mentions(&plugin.text, REVISION_VARIABLE.as_bytes()))
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
        let key = key.finish();
        let output = match r.cache.get(&key) {
            Some(hit) => hit,
            None => {
                let result = run(r, plugin, repository, part, &env).map(Arc::new);
                r.cache.put(key, result.clone());
                result
            }
        }
        .map_err(|e| said(e.message))?;
        Ok(Rendered {
            yaml: output.to_vec(),
            by: RenderedBy {
                // "(config management plugin kustomized-helm)", as `validate` says it.
                tool: "config management plugin".into(),
                version: plugin.name.clone(),
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

/// The plugin that renders `part`: the one it names (whose discover rules, if it has any,
/// must match, as Argo CD asks), else the first whose rules match.
fn choose<'a>(
    r: &Shared,
    plugins: &'a [Plugin],
    repository: &Repository,
    part: &PluginPart,
    env: &[(String, String)],
) -> Result<&'a Plugin, String> {
    let declared = || match plugins.len() {
        0 => "none is declared".to_string(),
        _ => format!(
            "those declared are {}",
            plugins
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    match &part.wanted.name {
        Some(name) => {
            let plugin = plugins.iter().find(|p| &p.name == name).ok_or_else(|| {
                format!(
                    "config management plugin {name:?} is not declared (driftless runs only the plugins its operator declares with --plugins-dir; {})",
                    declared()
                )
            })?;
            match &plugin.spec.discover {
                Some(d) if !discovers(r, d, repository, part, env)? => Err(format!(
                    "config management plugin {name:?}: its discover rules do not match {}",
                    shown_path(&part.path)
                )),
                _ => Ok(plugin),
            }
        }
        None => {
            for p in plugins {
                if let Some(d) = &p.spec.discover
                    && discovers(r, d, repository, part, env)?
                {
                    return Ok(p);
                }
            }
            Err(format!(
                "no config management plugin's discover rules match {} ({})",
                shown_path(&part.path),
                declared()
            ))
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
) -> Result<bool, String> {
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
    let glob = |pattern: &str| -> Result<bool, String> {
        let pattern = pattern.trim_start_matches("./");
        let m = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("discover glob {pattern:?}: {e}"))?
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

fn private_copy(repository: &Repository, preserve_mode: bool) -> Result<tempfile::TempDir, String> {
    let copy = tempfile::Builder::new()
        .prefix("driftless-cmp-")
        .tempdir()
        .map_err(|e| format!("a directory to run in: {e}"))?;
    repository.copy(&copy.path().join("repo"), preserve_mode)?;
    std::fs::create_dir_all(copy.path().join("home"))
        .map_err(|e| format!("a home to run in: {e}"))?;
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
    let copy = private_copy(repository, plugin.spec.preserve_file_mode)?;
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
                hide(e)
            )
        })?;
    }
    let out = run_one(r, &plugin.spec.generate, &dir, &home, env).map_err(|e| {
        format!(
            "config management plugin {}: generate: {}",
            plugin.name,
            hide(e)
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
) -> Result<Vec<u8>, String> {
    let Some((program, first)) = command.command.split_first() else {
        return Err("names no command".into());
    };
    let resolved = if program.contains('/') {
        PathBuf::from(program)
    } else {
        runner::on_path(program).ok_or_else(|| format!("{program} is not on PATH"))?
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
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = declared(dir.path()).unwrap_err();
        assert!(
            e.contains("b.yaml: not a ConfigManagementPlugin") && e.contains("genrate"),
            "{e}"
        );
    }
}
