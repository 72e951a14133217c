//! Reading a spec tree from a path, as every command does: the source's files, the
//! rendering stage (`driftless::hydrate`), then the spec loader. Its flags (the tools and
//! their limits) and `validate`/`render --out`, which show what the stage did.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use driftless::cluster::Selection;
use driftless::hydrate::{self, Hydrator};
use driftless::render::{Facts, NodeFacts};
use driftless::spec::AppId;

use super::{GlobalArgs, PathArg, PolicyArgs, exit};
use driftless::source::TreeError;
use driftless::spec::{LoadError, SpecErrors, SpecTree};

/// How Kustomize directories and Jsonnet files are rendered; every command that reads a
/// tree takes these.
#[derive(Args, Debug, Clone)]
pub struct RenderToolArgs {
    /// The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or
    /// newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`.
    #[arg(long, env = "DRIFTLESS_KUSTOMIZE", value_name = "PROGRAM")]
    pub kustomize: Option<PathBuf>,
    /// The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH.
    #[arg(long, env = "DRIFTLESS_HELM", value_name = "PROGRAM")]
    pub helm: Option<PathBuf>,
    /// How long one render may run before it (and what it started) is killed, e.g. 90s.
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub render_timeout: Duration,
    /// Rendering tools run at once at most.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub render_concurrency: u16,
    /// The directory a chart release's `username-file`, `password-file` and `ca-file` are
    /// read from (the operator's, e.g. a mounted Secret); a spec can name nothing outside it.
    #[arg(long, value_name = "DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// The directory of Argo CD config management plugins (`ConfigManagementPlugin`
    /// files, as Argo CD's `plugin.yaml`) that Applications with `source.plugin` are
    /// rendered by; only these run, a tree never brings a command.
    #[arg(long, env = "DRIFTLESS_PLUGINS_DIR", value_name = "DIR")]
    pub plugins_dir: Option<PathBuf>,
    /// Where driftless keeps what it fetched and rendered: pulled charts, renders (an
    /// unchanged chart, kustomization or Jsonnet file is not rendered again), and with
    /// `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else
    /// ~/.cache/driftless].
    #[arg(long, value_name = "DIR", env = "DRIFTLESS_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

impl Default for RenderToolArgs {
    fn default() -> Self {
        RenderToolArgs {
            kustomize: None,
            helm: None,
            render_timeout: Duration::from_secs(90),
            render_concurrency: 4,
            credentials_dir: None,
            plugins_dir: None,
            cache_dir: None,
        }
    }
}

/// How much of the cache directory a command line's renders may take: every tree it
/// reads shares it, the least recently used renders going first.
const RENDER_CACHE_MAX: u64 = 512 * 1024 * 1024;

impl RenderToolArgs {
    /// The CLI's: renders kept on disk for the next command, whichever tree it reads.
    pub fn options(&self) -> hydrate::Options {
        let cache = self.cache_dir();
        hydrate::Options {
            kustomize: self.kustomize.clone(),
            helm: self.helm.clone(),
            chart_cache: Some(cache.join("charts")),
            render_cache: Some(cache.join("renders")),
            render_cache_max: Some(RENDER_CACHE_MAX),
            credentials_dir: self.credentials_dir.clone(),
            plugins_dir: self.plugins_dir.clone(),
            limits: hydrate::runner::Limits {
                timeout: self.render_timeout,
                ..hydrate::runner::Limits::default()
            },
            concurrency: usize::from(self.render_concurrency),
            clusters: Default::default(),
        }
    }

    /// `--cache-dir` (or `$DRIFTLESS_CACHE_DIR`), systemd's `CACHE_DIRECTORY`, else
    /// `~/.cache/driftless`.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .or_else(|| std::env::var_os("CACHE_DIRECTORY").map(PathBuf::from))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/driftless")))
            .unwrap_or_else(|| std::env::temp_dir().join("driftless-cache"))
    }
}

/// A tree as read and rendered.
pub(crate) struct Loaded {
    pub tree: SpecTree,
    pub rendered: hydrate::Hydrated,
}

/// Reads, renders and validates the tree at `path`; prints every error and `None` when
/// it is invalid. `allow_empty`: a tree with files but no specs is an uninstall, not a
/// mistake (`--allow-mass-prune`).
pub(crate) fn load_rendered(
    path: &Path,
    policy: &driftless::spec::Policy,
    tools: &RenderToolArgs,
    allow_empty: bool,
) -> anyhow::Result<Option<Loaded>> {
    load_rendered_for(path, policy, tools, allow_empty, offline_facts(policy))
}

/// What charts are told of the served cluster when it is not reached: the version the
/// operator declared for it (`kube-version` in `--clusters`), else helm's defaults.
pub(crate) fn offline_facts(policy: &driftless::spec::Policy) -> hydrate::helm::ClusterFacts {
    hydrate::helm::ClusterFacts {
        kube_version: policy.cluster.cluster().kube_version.clone(),
        ..Default::default()
    }
}

/// Whether the tree at `path` renders charts (then told of the cluster, when there is one).
pub(crate) fn uses_helm(path: &Path) -> bool {
    driftless::spec::read_dir_all(path).is_ok_and(|(files, _)| hydrate::uses_helm(&files))
}

/// [`load_rendered`], charts told these facts of the cluster.
pub(crate) fn load_rendered_for(
    path: &Path,
    policy: &driftless::spec::Policy,
    tools: &RenderToolArgs,
    allow_empty: bool,
    cluster: hydrate::helm::ClusterFacts,
) -> anyhow::Result<Option<Loaded>> {
    let revision = match driftless::source::read_tree(path, None) {
        Ok(revision) => revision,
        Err(TreeError::Read(LoadError::Invalid(errors))) => {
            return print_errors(&errors).map(|()| None);
        }
        Err(e) => return Err(e.into()),
    };
    load_revision(revision, policy, tools, allow_empty, cluster)
}

/// [`load_rendered_for`] of a revision already read.
pub(crate) fn load_revision(
    revision: driftless::source::Revision,
    policy: &driftless::spec::Policy,
    tools: &RenderToolArgs,
    allow_empty: bool,
    cluster: hydrate::helm::ClusterFacts,
) -> anyhow::Result<Option<Loaded>> {
    let hydrator = Hydrator::new(hydrate::Options {
        clusters: policy.cluster.clusters.clone(),
        ..tools.options()
    });
    let rendered = hydrator.hydrate(hydrate::Input::of(revision, cluster));
    match hydrate::held::load(
        &rendered.files,
        &rendered.errors,
        &rendered.held,
        &rendered.made_by,
        &rendered.rendered_apps,
        &rendered.destinations,
        policy,
    ) {
        Ok(mut tree) => {
            // A tree whose apps are all held is no emptied tree: nothing of theirs goes.
            if tree.specs.is_empty() && tree.held.is_empty() && rendered.had_files && !allow_empty {
                return print_errors(&SpecErrors(vec![rendered.empty_tree_error()])).map(|()| None);
            }
            tree.rendered = std::sync::Arc::new(rendered.rendered.clone());
            tree.add_health(&rendered.health);
            Ok(Some(Loaded { tree, rendered }))
        }
        Err(errors) => print_errors(&errors).map(|()| None),
    }
}

/// A diff's output with the apps `tree` holds beside the others' changes: a `held` list
/// in JSON (each app with its errors), a section in Markdown; text says them on stderr
/// ([`print_held`]).
pub(crate) fn with_held(
    text: String,
    output: super::DiffOutput,
    tree: &SpecTree,
) -> anyhow::Result<String> {
    if tree.held.is_empty() {
        return Ok(text);
    }
    match output {
        super::DiffOutput::Text => Ok(text),
        super::DiffOutput::Json => {
            let mut doc: serde_json::Value = serde_json::from_str(&text)?;
            let held: Vec<serde_json::Value> = tree
                .held
                .iter()
                .map(|(app, errors)| {
                    let errors: Vec<serde_json::Value> = errors
                        .iter()
                        .map(|e| {
                            serde_json::json!({
                                "file": e.at.file, "line": e.at.line,
                                "column": e.at.column, "message": e.message,
                            })
                        })
                        .collect();
                    serde_json::json!({"app": app, "errors": errors})
                })
                .collect();
            if let Some(map) = doc.as_object_mut() {
                map.insert("held".into(), held.into());
            }
            Ok(serde_json::to_string_pretty(&doc)? + "\n")
        }
        super::DiffOutput::Markdown => {
            let mut text = text;
            text.push_str("\n**Held** (neither applied nor pruned):\n\n");
            for (app, errors) in tree.held.iter() {
                for e in errors {
                    text.push_str(&format!(
                        "- `{app}`: `{}:{}:{}` {}\n",
                        e.at.file, e.at.line, e.at.column, e.message
                    ));
                }
            }
            Ok(text)
        }
    }
}

/// A line per held app with its first error, each further error of it on a line of its
/// own (`apply`, `diff` and `validate` say them last); whether any app is held.
pub(crate) fn print_held(tree: &SpecTree) -> anyhow::Result<bool> {
    if tree.held.is_empty() {
        return Ok(false);
    }
    let mut err = std::io::stderr().lock();
    for (line, errors) in hydrate::held::describe_held(tree)
        .into_iter()
        .zip(tree.held.values())
    {
        writeln!(err, "{line}")?;
        for e in errors.iter().skip(1) {
            writeln!(err, "{e}")?;
        }
    }
    let n = tree.held.len();
    writeln!(
        err,
        "{n} app{} held: the rest of the tree is valid (--all-or-nothing stops it all)",
        if n == 1 { "" } else { "s" }
    )?;
    Ok(true)
}

pub(crate) fn print_errors(errors: &SpecErrors) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    for e in &errors.0 {
        writeln!(err, "{e}")?;
    }
    let n = errors.0.len();
    writeln!(err, "{n} error{}", if n == 1 { "" } else { "s" })?;
    Ok(())
}

/// What `validate` says of the stage: rendered sources, and files nothing reads.
pub(crate) fn describe(out: &mut impl std::io::Write, loaded: &Loaded) -> std::io::Result<()> {
    for (file, by) in loaded.rendered.rendered.iter() {
        writeln!(
            out,
            "rendered: {file}: {} ({} {})",
            by.command, by.tool, by.version
        )?;
    }
    for notice in &loaded.rendered.notices {
        writeln!(out, "notice: {notice}")?;
    }
    let unread = &loaded.rendered.unread;
    if !unread.is_empty() {
        let shown: Vec<&str> = unread.iter().take(10).map(String::as_str).collect();
        let more = unread.len().saturating_sub(10);
        writeln!(
            out,
            "notice: {} file{} not read (neither spec, YAML, JSON manifest nor Jsonnet, nor in a rendered directory; list them in .driftlessignore to silence this): {}{}",
            unread.len(),
            if unread.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

/// `render --out DIR`: the tree with every rendered source replaced by its output as
/// plain YAML, the rest of its spec files as they are; driftless reads it to the same
/// specs without any tool (the rendered-manifests pattern). A kustomization's output is
/// `DIR/<its directory>/rendered.yaml`, a Jsonnet file's `DIR/<file>.yaml`, an Argo CD
/// Application's `DIR/argo/NAME.yaml`, a Flux Kustomization's `DIR/flux/NS/NAME.yaml`.
pub(crate) fn write_out(loaded: &Loaded, dir: &Path) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = 0;
    for f in &loaded.rendered.files {
        let (path, contents) = match loaded.rendered.rendered.get(&f.path) {
            Some(by) => {
                let path = out_path(&f.path, loaded.rendered.rendered_apps.app_of(&f.path));
                let mut text = format!(
                    "# Rendered by driftless from {}: {} ({} {}). Do not edit: render again.\n",
                    f.path, by.command, by.tool, by.version
                )
                .into_bytes();
                text.extend_from_slice(&f.contents);
                (path, text)
            }
            None if f.path.ends_with(".toml") => (f.path.clone(), without_helm(&f.contents)),
            None => (f.path.clone(), f.contents.clone()),
        };
        let target = dir.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, contents)
            .with_context(|| format!("writing {}", target.display()))?;
        written += 1;
    }
    Ok(written)
}

/// A TOML spec file without its `[helm.NAME]` releases, whose objects `render --out`
/// writes on their own; a file without them as it is.
fn without_helm(text: &[u8]) -> Vec<u8> {
    let Ok(s) = std::str::from_utf8(text) else {
        return text.to_vec();
    };
    match s.parse::<toml::Table>() {
        Ok(mut t) if t.contains_key("helm") => {
            t.remove("helm");
            let rest = t.keys().any(|k| k != "namespace");
            match (rest, toml::to_string(&t)) {
                (true, Ok(out)) => out.into_bytes(),
                // Nothing but releases: a file with no spec left.
                _ => b"# Its helm releases are rendered beside it.\n".to_vec(),
            }
        }
        _ => text.to_vec(),
    }
}

/// Where a rendered source's output goes in `render --out`: what an app renders (`app`,
/// the innermost that made it), a file per app by the app's name.
fn out_path(source: &str, app: Option<&AppId>) -> String {
    if let Some(app) = app {
        return app.out_file(source);
    }
    let base = source.rsplit('/').next().unwrap_or(source);
    if hydrate::tree::KUSTOMIZATION_FILES.contains(&base) || base == hydrate::tree::CHART_FILE {
        match source.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/rendered.yaml"),
            None => "rendered.yaml".to_string(),
        }
    } else {
        format!("{source}.yaml")
    }
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// Root of the spec tree (every *.toml, *.yaml and *.yml under it, but what .driftlessignore lists),
    /// or an OCI artifact, oci://HOST/REPO[:TAG|@sha256:…], pulled first.
    #[arg(default_value = ".")]
    pub path: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Node names for `localservice` specs, instead of asking the cluster. Such nodes
    /// carry no labels, so only an empty node-selector matches them.
    #[arg(long, value_delimiter = ',', value_name = "NODE,...")]
    pub nodes: Option<Vec<String>>,
    /// Write the tree to DIR instead, every Kustomize directory, Jsonnet file, chart
    /// release and Flux or Argo CD app replaced by its output as plain YAML, an app's in
    /// DIR/argo/NAME.yaml or DIR/flux/NS/NAME.yaml (the rendered-manifests pattern: CI
    /// commits DIR, and driftless applies it with no tool).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub(super) fn validate(args: &PathArg) -> anyhow::Result<u8> {
    let policy = args.policy.policy()?;
    if args.policy.cluster.is_some() || !policy.cluster.is_fleet() {
        return validate_one(args, &policy);
    }
    // A fleet's tree is each cluster's own view of it (its files, its variables): each
    // is validated, under its name.
    let clusters = policy.cluster.clusters.clone();
    let mut code = exit::OK;
    for cluster in clusters.iter() {
        println!("cluster {}:", cluster.name);
        let policy = driftless::spec::Policy {
            cluster: driftless::spec::clusters::Target::named(clusters.clone(), &cluster.name)?,
            ..policy.clone()
        };
        code = code.max(validate_one(args, &policy)?);
    }
    Ok(code)
}

fn validate_one(args: &PathArg, policy: &driftless::spec::Policy) -> anyhow::Result<u8> {
    let Some(loaded) = load_rendered(&args.path, policy, &args.policy.tools, false)? else {
        return Ok(exit::ERROR);
    };
    let tree = &loaded.tree;
    let mut out = std::io::stdout().lock();
    let counts = tree.count_by_kind();
    for kind in driftless::spec::Kind::ALL {
        let ids: Vec<String> = tree
            .specs
            .iter()
            .filter(|s| s.id.kind == kind)
            .map(|s| match s.id.namespace.as_str() {
                "" => s.id.name.clone(),
                ns => format!("{ns}/{}", s.id.name),
            })
            .collect();
        let n = counts.get(&kind).copied().unwrap_or(0);
        let shown: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
        let more = if ids.len() > 5 {
            format!(", and {} more", ids.len() - 5)
        } else {
            String::new()
        };
        writeln!(out, "{kind:<13} {n:>4}  {}{more}", shown.join(", "))?;
    }
    let from_yaml = tree
        .specs
        .iter()
        .filter(|s| !s.at.file.ends_with(".toml"))
        .count();
    match from_yaml {
        0 => writeln!(out, "valid: {} specs", tree.specs.len())?,
        n => writeln!(
            out,
            "valid: {} specs ({n} of them YAML manifests)",
            tree.specs.len()
        )?,
    }
    if let Some(summary) = tree.settings.summary() {
        writeln!(out, "settings: {summary}")?;
    }
    describe(&mut out, &loaded)?;
    drop(out);
    match print_held(tree)? {
        true => Ok(exit::ERROR),
        false => Ok(exit::OK),
    }
}

pub(super) async fn render(
    args: &RenderArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<u8> {
    // What render writes is applied as it is (`--out`: the rendered-manifests pattern):
    // a held app's objects left out of it would be pruned, so any error stops it all.
    let policy = driftless::spec::Policy {
        all_or_nothing: true,
        ..args.policy.policy()?
    };
    let Some(loaded) = load_rendered(&args.path, &policy, &args.policy.tools, false)? else {
        return Ok(exit::ERROR);
    };
    if let Some(dir) = &args.out {
        let n = write_out(&loaded, dir)?;
        writeln!(
            std::io::stdout().lock(),
            "wrote {n} file{} to {}",
            if n == 1 { "" } else { "s" },
            dir.display()
        )?;
        return Ok(exit::OK);
    }
    let tree = loaded.tree;
    let needs_nodes = tree
        .specs
        .iter()
        .any(|s| s.id.kind == driftless::spec::Kind::LocalService);
    let nodes = match &args.nodes {
        Some(names) => names
            .iter()
            .filter(|n| !n.is_empty())
            .map(|n| NodeFacts {
                name: n.clone(),
                labels: Default::default(),
            })
            .collect(),
        None if needs_nodes => {
            let client = selection
                .client()
                .await
                .context("localservice specs need the cluster's nodes (or pass --nodes)")?;
            driftless::cluster::node_facts(&client)
                .await
                .context("listing nodes")?
        }
        None => Vec::new(),
    };
    let facts = Facts {
        instance: global.instance.clone(),
        nodes,
    };
    let mut objects = driftless::render::render(&tree, &facts)?;
    // What a SOPS file decrypts to is never printed (docs/src/sops.md).
    for o in objects.iter_mut().filter(|o| o.policy.sealed) {
        o.body
            .edit(|body| driftless::spec::sops::mask_sealed(body, None, ""));
    }
    std::io::stdout()
        .lock()
        .write_all(driftless::render::to_yaml(&objects)?.as_bytes())?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_sources_are_written_where_no_tool_reads_them() {
        assert_eq!(
            out_path("apps/web/kustomization.yaml", None),
            "apps/web/rendered.yaml"
        );
        assert_eq!(out_path("Kustomization", None), "rendered.yaml");
        assert_eq!(out_path("ksm/main.jsonnet", None), "ksm/main.jsonnet.yaml");
        let helm = AppId::Helm { name: "web".into() };
        assert_eq!(
            out_path("apps.toml#helm.web", Some(&helm)),
            "apps.helm-web.yaml"
        );
        // Each app of Argo CD's and Flux's, a file of its own, by the app it is.
        let web = AppId::Argo { name: "web".into() };
        assert_eq!(
            out_path("root.yaml#argo.root#argo.web", Some(&web)),
            "argo/web.yaml"
        );
        assert_eq!(
            out_path("root.yaml#argo.root#argo.web#1", Some(&web)),
            "argo/web.1.yaml"
        );
        let numbered = AppId::Argo {
            name: "2048".into(),
        };
        assert_eq!(
            out_path("root.yaml#argo.2048", Some(&numbered)),
            "argo/2048.yaml"
        );
        let apps = AppId::Flux {
            namespace: "flux-system".into(),
            name: "apps".into(),
        };
        assert_eq!(
            out_path("apps.yaml#flux.flux-system.apps", Some(&apps)),
            "flux/flux-system/apps.yaml"
        );
        let podinfo = AppId::FluxHelm {
            namespace: "shop".into(),
            name: "podinfo".into(),
        };
        assert_eq!(
            out_path(
                "apps.yaml#flux.flux-system.apps#flux-helm.shop.podinfo",
                Some(&podinfo)
            ),
            "flux/shop/podinfo.helm.yaml"
        );
        assert_eq!(
            out_path("charts/web/Chart.yaml", None),
            "charts/web/rendered.yaml"
        );
        let kept = without_helm(
            b"namespace = \"a\"\n[helm.x]\nchart = \"c\"\n[elasticweb.w]\nimage = \"i\"\n",
        );
        let kept = String::from_utf8(kept).unwrap();
        assert!(
            !kept.contains("helm") && kept.contains("[elasticweb.w]"),
            "{kept}"
        );
    }
}
