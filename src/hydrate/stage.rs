//! What the stage and every tool share: how tools are run (`Options`), what a revision
//! brings in (`Input`) and what the stage hands on (`Hydrated`), the runs' shared parts
//! (`Shared`: slots, the render cache, the count of runs), and how an error is placed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use super::{cache, runner};
use crate::source::{Checkout, Revision, Signatures};
use crate::spec::{Location, RenderedBy, SourceFile, SpecError};

/// How the stage runs its tools.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--kustomize` / `DRIFTLESS_KUSTOMIZE`: the program, else found on `PATH`.
    pub kustomize: Option<PathBuf>,
    /// `--helm` / `DRIFTLESS_HELM`: the program, else `helm` on `PATH`.
    pub helm: Option<PathBuf>,
    /// Where charts pulled from chart repositories are kept (none: they are refused).
    pub chart_cache: Option<PathBuf>,
    /// `--credentials-dir`: the only place a release's `username-file`, `password-file` and
    /// `ca-file` are read from. A commit must not make the daemon send any file of its
    /// host to a repository the commit names.
    pub credentials_dir: Option<PathBuf>,
    /// `--plugins-dir`: the Argo CD config management plugins the operator declares; a
    /// tree can never bring a command to run.
    pub plugins_dir: Option<PathBuf>,
    /// Where renders are kept across restarts (none: in memory only).
    pub render_cache: Option<PathBuf>,
    /// The render cache's directory is shared by every tree read (the CLI's), up to this
    /// many bytes; none: it holds the latest tree's renders (a daemon's).
    pub render_cache_max: Option<u64>,
    pub limits: runner::Limits,
    /// Tool runs at once (`--render-concurrency`).
    pub concurrency: usize,
    /// The operator's clusters (`--clusters`), which an ApplicationSet's `clusters`
    /// generator makes Applications for.
    pub clusters: std::sync::Arc<crate::spec::clusters::Clusters>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kustomize: None,
            helm: None,
            chart_cache: None,
            render_cache: None,
            render_cache_max: None,
            credentials_dir: None,
            plugins_dir: None,
            limits: runner::Limits::default(),
            concurrency: 4,
            clusters: Default::default(),
        }
    }
}

/// A revision's files, as a source read them.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub files: Vec<SourceFile>,
    /// Files the source did not read (by path), for what is said about them.
    pub unread: Vec<String>,
    /// Where the tree lies on disk, for the tools that read files themselves.
    pub checkout: Option<Checkout>,
    /// What charts are told of the cluster (`.Capabilities`).
    pub cluster: ClusterFacts,
    /// What the revision's signatures were found to be, for what the tree asks of them.
    pub signatures: Signatures,
}

impl Input {
    /// A source's revision, with what charts are told of the cluster.
    pub fn of(revision: Revision, cluster: ClusterFacts) -> Input {
        Input {
            files: revision.files,
            unread: revision.unread,
            checkout: revision.checkout,
            cluster,
            signatures: revision.signatures,
        }
    }
}

/// What the spec loader reads, and what the stage found wrong.
#[derive(Debug, Clone, Default)]
pub struct Hydrated {
    pub files: Vec<SourceFile>,
    /// A render that failed, at its file: the revision is invalid.
    pub errors: Vec<SpecError>,
    /// An app's own errors (its render, or its app object as read): that app is held,
    /// the rest of the revision goes on (`held.rs`).
    pub held: Vec<AppError>,
    /// Files nothing reads (neither spec, YAML, JSON manifest, Jsonnet, nor part of a
    /// rendered directory).
    pub unread: Vec<String>,
    pub rendered: BTreeMap<String, RenderedBy>,
    /// Whether the revision held anything at all: files read or not.
    pub had_files: bool,
    /// What the stage left out on purpose, for `validate` to say.
    pub notices: Vec<String>,
    /// Health rules the rendered apps give their objects (Flux's `healthCheckExprs`).
    pub health: Vec<std::sync::Arc<crate::spec::settings::HealthRule>>,
    /// Where what rendered each rendered file is written: errors in a rendered file
    /// (none on disk) are said there ([`said_where_written`]).
    pub made_by: BTreeMap<String, Location>,
    /// The apps that made each rendered file, the innermost last: an error in the file
    /// holds its innermost app (`held.rs`).
    pub rendered_apps: crate::spec::RenderedApps,
    /// A render read the live cluster (a chart's `lookup`), succeeding or not: what the
    /// revision renders to may change with no new revision, as what it read changes.
    pub read_cluster: bool,
    /// The apps that name the cluster their objects go to (an Argo CD Application's
    /// `destination`), by app (`argo/NAME`), with where they name it.
    pub destinations: BTreeMap<String, (crate::spec::clusters::Destination, Location)>,
}

impl Hydrated {
    /// Why a tree with files but no specs is refused: it would prune everything it once
    /// applied, and is more often a mistake (a wrong path, a tree of files nothing reads)
    /// than an uninstall, which says so with `--allow-mass-prune`.
    pub fn empty_tree_error(&self) -> SpecError {
        let mut message = "the tree holds no specs".to_string();
        if !self.unread.is_empty() {
            let shown: Vec<&str> = self.unread.iter().take(3).map(String::as_str).collect();
            let more = self.unread.len().saturating_sub(3);
            message.push_str(&format!(
                " ({} file{} not read: {}{})",
                self.unread.len(),
                if self.unread.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        message
            .push_str("; an emptied tree is applied only with --allow-mass-prune (an uninstall)");
        error_at(".", 1, 1, message)
    }
}

/// An error that holds one app (`flux/NS/NAME`, `argo/NAME`): that app is neither
/// applied nor pruned, the rest of the revision goes on (`held.rs`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AppError {
    pub app: String,
    pub error: SpecError,
}

impl AppError {
    pub fn new(app: String, error: SpecError) -> AppError {
        AppError { app, error }
    }
}

/// Cluster facts a chart may ask for (`.Capabilities`), handed in by whoever reached the
/// cluster; empty when rendering offline (helm's defaults, or the spec's own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// `v1.20.2`.
    pub kube_version: Option<String>,
    /// `apps/v1`, `monitoring.coreos.com/v1`…
    pub api_versions: Vec<String>,
    /// Where a chart's `lookup` reads the cluster; none: its lookups return nothing, as
    /// `helm template`'s do.
    pub lookup: Option<LookupAccess>,
}

/// A chart's way to the cluster for `lookup` (`cluster::lookup`: read-only, with
/// driftless's rights), and which reading of the cluster this render is: a render that
/// used lookup is kept for one reading only, so what it read is read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupAccess {
    /// A kubeconfig for helm's `--kubeconfig`.
    pub kubeconfig: PathBuf,
    pub reading: u64,
}

/// What every tool's runs share, whichever the tool: the options, the slots runs wait
/// for, the render cache, and the count of runs.
pub struct Shared {
    pub opts: Options,
    pub slots: runner::Slots,
    pub cache: cache::Cache,
    pub runs: AtomicU64,
}

impl Shared {
    pub fn new(opts: Options) -> Shared {
        Shared {
            slots: runner::Slots::new(opts.concurrency),
            cache: match (&opts.render_cache, opts.render_cache_max) {
                (Some(dir), Some(max)) => cache::Cache::shared(dir.clone(), max),
                (dir, _) => cache::Cache::new(dir.clone()),
            },
            opts,
            runs: AtomicU64::new(0),
        }
    }
}

/// Objects as YAML documents (each JSON, which YAML reads), one per object.
pub fn to_yaml(objects: &[serde_json::Value]) -> Vec<u8> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_json::to_string_pretty(o).unwrap_or_default());
        out.push('\n');
    }
    out.into_bytes()
}

/// An error in a rendered file, which is nowhere on disk, said where what rendered it is
/// written (for an app of apps' Application, at the app of apps), the rendered file and
/// its line kept in the message: `render --out` writes that file. A kustomization's output
/// has the kustomization's own name, so its line is said as the output's, never as one of
/// the file written.
pub(crate) fn said_where_written(e: &mut SpecError, made_by: &BTreeMap<String, Location>) {
    let Some(first) = made_by.get(&e.at.file) else {
        return;
    };
    let mut at = first.clone();
    // Bounded as the apps' depth is: a rendered file is made by what an earlier one held.
    for _ in 0..16 {
        match made_by.get(&at.file) {
            Some(up) if up.file != at.file => at = up.clone(),
            _ => break,
        }
    }
    e.message = match at.file == e.at.file {
        true => format!("{} (line {} of what it renders)", e.message, e.at.line),
        false => format!(
            "{} (in what it renders: {}, line {})",
            e.message, e.at.file, e.at.line
        ),
    };
    e.at = at;
}

pub(crate) fn error_at(file: &str, line: usize, column: usize, message: String) -> SpecError {
    SpecError {
        at: Location {
            file: file.to_string(),
            line,
            column,
        },
        message,
    }
}
