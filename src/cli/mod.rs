//! The command line. This is the binary's edge: `anyhow` stops here, and
//! every subcommand maps its outcome to a kubectl-style exit code.

// The edge is where output is printed ([lints] keeps print out of the library).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod control;
mod docs;
mod fleet;
mod login;
mod oci;
mod output;
mod preview;
mod run;
mod secrets;
mod signin;
mod status;
mod sync;
mod tree;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::io::Write as _;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};

use driftless::cluster::Selection;
use driftless::spec::clusters::{Clusters, Target};

/// Exit codes shared by every subcommand (kubectl's where one exists).
pub mod exit {
    pub const OK: u8 = 0;
    /// `diff`: differences found; `apply --wait`: not ready in time.
    pub const DIFFERENCES: u8 = 1;
    /// Invalid input, a usage error, or something not built yet.
    pub const ERROR: u8 = 2;
    /// `apply` stopped by Ctrl-C (128 + SIGINT, as a shell reports a process it killed).
    pub const INTERRUPTED: u8 = 130;
}

#[derive(Parser, Debug)]
#[command(
    name = "driftless",
    version,
    about = "GitOps sync daemon for Kubernetes: TOML specs in git or a directory, server-side apply, safe prune, readiness",
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Requests per second to the apiserver at most, client-side, as client-go's rate
    /// limit (0: no limit). Answers 429 and 502-504 are retried either way.
    #[arg(long, global = true, value_name = "QPS",
          default_value_t = driftless::cluster::retry::DEFAULT_QPS, value_parser = parse_qps)]
    pub kube_api_qps: f32,
    /// Requests that may go out at once above --kube-api-qps before it paces them.
    #[arg(long, global = true, value_name = "N",
          default_value_t = driftless::cluster::retry::DEFAULT_BURST,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,
    /// Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Name of this driftless instance: instances sharing a cluster never touch each
    /// other's objects.
    #[arg(long, global = true, env = "DRIFTLESS_INSTANCE", default_value = driftless::object::ownership::DEFAULT_INSTANCE,
          value_parser = parse_instance)]
    pub instance: String,
}

fn parse_qps(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(q) if q.is_finite() && q >= 0.0 => Ok(q),
        _ => Err("expected a number of requests per second, 0 or more".into()),
    }
}

fn parse_instance(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    driftless::spec::names::label_value(s).map(|()| s.to_string())
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftMode {
    Correct,
    Report,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once per process; boxing the daemon's many flags would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check a spec tree; print every error as file:line:col: message (exit 2 when invalid).
    Validate(PathArg),
    /// Print the Kubernetes objects a spec tree renders to, as multi-document YAML.
    Render(tree::RenderArgs),
    /// Show what apply would change: live vs desired, including what prune would delete
    /// (exit 0: no difference, 1: differences, 2: error).
    Diff(DiffArgs),
    /// Sync a spec tree once (apply, prune), then exit.
    Apply(ApplyArgs),
    /// Run the daemon: keep the cluster in sync with a directory, a git repository or an
    /// OCI artifact.
    Run(run::RunArgs),
    /// Publish a spec tree as an OCI artifact, laid out as `flux push artifact` does
    /// (reproducible: the same tree gives the same digest).
    Push(oci::PushArgs),
    /// Show the daemon's status file as a table.
    Status(status::StatusArgs),
    /// Ask a running daemon to fetch its source and sync now; wait for the result
    /// (exit 1 if the sync failed).
    Reconcile(control::ReconcileArgs),
    /// Stop a running daemon from applying, pruning or correcting one spec.
    Suspend(control::SuspendArgs),
    /// Let a suspended spec sync again.
    Resume(control::ResumeArgs),
    /// Sign in with the daemon's OpenID Connect provider in a browser; the controls then
    /// act as you.
    Login(login::LoginArgs),
    /// Print the JSON Schema (Draft 7) of spec files, for editors.
    #[command(hide = true)]
    Schema,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(hide = true)]
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff) of driftless or of one subcommand.
    #[command(hide = true)]
    Man(docs::ManArgs),
    /// Write the book's generated reference pages (spec kinds, CLI, metrics) into a directory.
    #[command(hide = true)]
    Reference(docs::ReferenceArgs),
}

/// What a spec tree may do: shared by every command that loads one.
#[derive(Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// Let specs write into this protected namespace (kube-system, kube-public,
    /// kube-node-lease, driftless-system and the inventory namespace are refused
    /// otherwise). Repeatable.
    #[arg(long = "allow-namespace", value_name = "NAMESPACE", value_parser = parse_namespace)]
    pub allow_namespaces: Vec<String>,
    /// age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted
    /// YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops's default
    /// ~/.config/sops/age/keys.txt when present.
    #[arg(long = "sops-age-key-file", value_name = "FILE")]
    pub sops_age_key_file: Option<PathBuf>,
    /// Set variable NAME for `${NAME}` in spec values, over the tree's .driftless.toml
    /// [vars] and --vars-file. Repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster's
    /// own values), over the tree's .driftless.toml [vars]. Read once, at start.
    #[arg(long = "vars-file", value_name = "FILE")]
    pub vars_file: Option<PathBuf>,
    /// Any error stops the whole revision. Without it, an app (a Flux Kustomization, an
    /// Argo CD Application) whose render or validation fails is held alone, neither
    /// applied nor pruned, and the other apps go on.
    #[arg(long)]
    pub all_or_nothing: bool,
    /// The operator's clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or
    /// `secret`, `context`, `labels`) that a tree's `[[cluster]]` rules send files to.
    /// Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context.
    #[arg(long, env = "DRIFTLESS_CLUSTERS", value_name = "FILE")]
    pub clusters: Option<PathBuf>,
    /// A namespace of the home cluster whose Argo CD cluster Secrets
    /// (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`,
    /// `server` and labels; repeatable, comma-separated. Read when the command starts.
    #[arg(
        long = "cluster-secrets-namespace",
        env = "DRIFTLESS_CLUSTER_SECRETS_NAMESPACE",
        value_name = "NAMESPACE",
        value_delimiter = ',',
        value_parser = parse_namespace
    )]
    pub cluster_secrets_namespaces: Vec<String>,
    /// The clusters found in those Secrets (set once they are read).
    #[arg(skip)]
    pub found_clusters: Vec<driftless::spec::clusters::Cluster>,
    /// The cluster of --clusters this command serves: only the files that go to it are
    /// read, and it is reached with its kubeconfig (default: every declared cluster:
    /// `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once;
    /// `render` serves the home cluster, the one reached with --kubeconfig/--context).
    #[arg(long, env = "DRIFTLESS_CLUSTER", value_name = "NAME")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub tools: tree::RenderToolArgs,
    /// How an `oci://` PATH (or `run --oci`) is pulled.
    #[command(flatten)]
    pub registry: oci::RegistryArgs,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    match driftless::spec::vars::is_name(name) {
        true => Ok((name.to_string(), value.to_string())),
        false => Err(format!(
            "{name:?} is not a variable name: a letter or `_`, then letters, digits and `_`"
        )),
    }
}

fn parse_namespace(s: &str) -> Result<String, String> {
    driftless::spec::names::dns1123_label(s).map(|()| s.to_string())
}

impl PolicyArgs {
    /// The policy, with the age keys read now: a key file that cannot be used stops the
    /// command before it reads a spec.
    pub fn policy(&self) -> anyhow::Result<driftless::spec::Policy> {
        let keys = driftless::spec::AgeKeys::from_environment(self.sops_age_key_file.as_deref())
            .context("reading the age keys for SOPS files")?;
        let mut policy = driftless::spec::Policy::allowing(self.allow_namespaces.iter().cloned())
            .with_age_keys(keys);
        if let Some(path) = &self.vars_file {
            policy.vars = driftless::spec::vars::read_file(path)?;
        }
        policy.vars.extend(self.vars.iter().cloned());
        policy.all_or_nothing = self.all_or_nothing;
        policy.cluster = self.target()?;
        Ok(policy)
    }

    /// The operator's clusters (`--clusters`), the home cluster alone without it.
    pub fn clusters(&self) -> anyhow::Result<std::sync::Arc<Clusters>> {
        let declared = match &self.clusters {
            Some(path) => Clusters::read_file(path)?,
            None => Clusters::default(),
        };
        let all = declared
            .with_found(self.found_clusters.clone())
            .map_err(anyhow::Error::msg)?;
        Ok(std::sync::Arc::new(all))
    }

    /// The cluster served (`--cluster`, else the home cluster) of the operator's.
    pub fn target(&self) -> anyhow::Result<Target> {
        let clusters = self.clusters()?;
        Ok(match &self.cluster {
            Some(name) => Target::named(clusters, name)?,
            None => Target::home(clusters),
        })
    }

    /// How the served cluster is reached: its kubeconfig (and context) when it is not
    /// the home cluster, or the kubeconfig in its Secret of the home cluster (which the
    /// command line's `selection` reaches), else the command line's `selection`.
    pub fn selection(&self, selection: &Selection) -> anyhow::Result<Selection> {
        let target = self.target()?;
        let cluster = target.cluster();
        Ok(match (&cluster.kubeconfig, &cluster.secret) {
            (Some(path), _) => Selection {
                kubeconfig: Some(path.clone()),
                context: cluster.context.clone(),
                rate: selection.rate,
                secret: None,
            },
            (None, Some(s)) => Selection {
                secret: Some(driftless::cluster::KubeconfigSecret {
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    key: s.key.clone(),
                    context: cluster.context.clone(),
                    argocd: s.argocd,
                }),
                ..selection.clone()
            },
            (None, None) => selection.clone(),
        })
    }
}

#[derive(Args, Debug)]
pub struct PathArg {
    /// Root of the spec tree (every *.toml, *.yaml and *.yml under it, but what .driftlessignore lists),
    /// or an OCI artifact, oci://HOST/REPO[:TAG|@sha256:…], pulled first.
    #[arg(default_value = ".")]
    pub path: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// How objects are applied and pruned; shared by `apply`, `diff` and `run`.
#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// Field manager for server-side apply.
    #[arg(long, default_value = driftless::object::ownership::MANAGER)]
    pub field_manager: String,
    /// Take fields that other field managers own instead of reporting a conflict.
    #[arg(long)]
    pub force_conflicts: bool,
    /// Take over existing objects driftless did not create (per spec: `adopt = true`).
    #[arg(long)]
    pub adopt: bool,
    /// Do not delete objects that left the specs.
    #[arg(long)]
    pub no_prune: bool,
    /// Refuse a revision that would prune more than this share of the inventory.
    #[arg(long, default_value_t = 0.5, value_parser = parse_ratio)]
    pub max_prune_ratio: f64,
    /// Allow pruning everything, or more than --max-prune-ratio.
    #[arg(long)]
    pub allow_mass_prune: bool,
    /// Objects applied (or dry-run) at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Namespace of the inventory ConfigMaps.
    #[arg(long, default_value = driftless::apply::inventory::DEFAULT_NAMESPACE)]
    pub inventory_namespace: String,
    /// Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch)
    /// when an apply is refused only for immutable fields; Jobs always are, unless their
    /// `driftless.dev/replace: never` says otherwise. Repeatable.
    #[arg(long = "replace-on-immutable", value_name = "KIND[.GROUP]", value_parser = parse_kind)]
    pub replace_on_immutable: Vec<(String, String)>,
}

/// `Kind` or `Kind.group` as (group, kind).
fn parse_kind(s: &str) -> Result<(String, String), String> {
    let (kind, group) = s.split_once('.').unwrap_or((s, ""));
    if kind.is_empty() || !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err("expected KIND or KIND.GROUP, as Job.batch or StatefulSet.apps".into());
    }
    Ok((group.to_string(), kind.to_string()))
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err("must be a number between 0 and 1".into()),
    }
}

impl EngineArgs {
    pub fn options(&self, instance: &str) -> driftless::apply::Options {
        driftless::apply::Options {
            instance: instance.to_string(),
            field_manager: self.field_manager.clone(),
            inventory_namespace: self.inventory_namespace.clone(),
            concurrency: usize::from(self.concurrency),
            force_conflicts: self.force_conflicts,
            adopt: self.adopt,
            prune: driftless::apply::prune::Options {
                enabled: !self.no_prune,
                max_ratio: self.max_prune_ratio,
                allow_mass: self.allow_mass_prune,
            },
            replace_on_immutable: self.replace_on_immutable.clone(),
            ..driftless::apply::Options::default()
        }
    }
}

/// What `diff` and `apply` work on: a spec tree, the namespaces it may write into, and
/// how the engine writes.
#[derive(Args, Debug, Clone)]
pub struct TreeArgs {
    /// Root of the spec tree (every *.toml, *.yaml and *.yml under it, but what .driftlessignore lists),
    /// or an OCI artifact, oci://HOST/REPO[:TAG|@sha256:…], pulled first.
    #[arg(default_value = ".")]
    pub path: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub tree: TreeArgs,
    /// Wait until every spec is ready (or failed) before exiting.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits, e.g. 90s, 5m.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

#[derive(Args, Debug, Clone)]
pub struct DiffArgs {
    #[command(flatten)]
    pub tree: TreeArgs,
    /// How to print the diff: text (unified diffs, coloured at a terminal), markdown (a
    /// pull-request comment: a summary table and a collapsed diff per object, at most
    /// 60,000 characters), json (one document: a summary and an entry per object).
    #[arg(long, short = 'o', value_enum, default_value_t = DiffOutput::Text)]
    pub output: DiffOutput,
    /// Preview a change with no cluster: render the tree as commit REV has it and as the
    /// work tree has it (or --head), and show what applying the change over REV creates,
    /// updates and prunes, per app. Needs no kubeconfig.
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// With --base: the change is commit REV, not the work tree.
    #[arg(long, value_name = "REV", requires = "base")]
    pub head: Option<String>,
    /// With --base: node names for `localservice` specs (there is no cluster to list them).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NODE,...",
        requires = "base"
    )]
    pub nodes: Option<Vec<String>>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffOutput {
    Text,
    Markdown,
    Json,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon logs what it does; one-shot commands print results and log only trouble.
    let daemon = matches!(cli.command, Command::Run(_));
    let default_level = if daemon { "info" } else { "warn" };
    output::init_tracing(cli.global.log_format, default_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("driftless: starting the async runtime: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        // Whoever read the output stopped reading (`| head`): nothing to tell them.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::from(output::BROKEN_PIPE),
        Err(e) => {
            let e: &(dyn std::error::Error + 'static) = e.as_ref();
            eprintln!("driftless: {}", driftless::cluster::error_text(e));
            ExitCode::from(exit::ERROR)
        }
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    let selection = Selection {
        kubeconfig: cli.global.kubeconfig.clone(),
        context: cli.global.context.clone(),
        rate: driftless::cluster::retry::RateLimit {
            qps: cli.global.kube_api_qps,
            burst: cli.global.kube_api_burst,
        },
        secret: None,
    };
    let mut cli = cli;
    // Argo CD's cluster Secrets are read first: they are clusters as the file's are.
    if let Some(p) = policy_args_mut(&mut cli.command)
        && !p.cluster_secrets_namespaces.is_empty()
    {
        let home = selection
            .client()
            .await
            .context("connecting to the home cluster for its cluster Secrets")?;
        p.found_clusters = fleet::argocd_clusters(&home, &p.cluster_secrets_namespaces).await?;
    }
    // A cluster of the operator's --clusters is reached with its own kubeconfig.
    let home = selection.clone();
    let selection = match policy_args(&cli.command) {
        Some(p) => p.selection(&selection)?,
        None => selection,
    };
    // An `oci://` PATH is pulled first, and the commands read the unpacked tree.
    let _pulled = match &mut cli.command {
        Command::Validate(a) => oci::pull_path(&mut a.path, &a.policy.registry).await?,
        Command::Render(a) => oci::pull_path(&mut a.path, &a.policy.registry).await?,
        Command::Diff(a) if a.base.is_some() && oci::is_oci(&a.tree.path) => {
            anyhow::bail!("--base reads a git repository's history; an oci:// PATH has none")
        }
        Command::Diff(a) => oci::pull_path(&mut a.tree.path, &a.tree.policy.registry).await?,
        Command::Apply(a) => oci::pull_path(&mut a.tree.path, &a.tree.policy.registry).await?,
        _ => None,
    };
    match &cli.command {
        Command::Validate(args) => tree::validate(args),
        Command::Push(args) => oci::push(args).await,
        Command::Render(args) => tree::render(args, &cli.global, &selection).await,
        Command::Schema => {
            let schema = driftless::spec::schema::generate()?;
            std::io::stdout().lock().write_all(schema.as_bytes())?;
            Ok(exit::OK)
        }
        Command::Diff(args) => match &args.base {
            Some(base) => preview::preview(args, base, &cli.global).await,
            None if fleet::every_cluster(&args.tree.policy)? => {
                fleet::diff_each(args, &cli.global, &home).await
            }
            None => sync::diff(args, &cli.global, &selection).await,
        },
        Command::Apply(args) if fleet::every_cluster(&args.tree.policy)? => {
            fleet::apply_each(args, &cli.global, &home).await
        }
        Command::Apply(args) => sync::apply(args, &cli.global, &selection).await,
        Command::Run(args) if fleet::every_cluster(&args.policy)? => {
            fleet::run(args, &cli.global, &home).await
        }
        Command::Run(args) => run::run(args, &cli.global, &selection).await,
        Command::Status(args) => status::status(args, &cli.global.instance),
        Command::Reconcile(args) => control::reconcile(args).await,
        Command::Suspend(args) => control::suspend(args).await,
        Command::Resume(args) => control::resume(args).await,
        Command::Login(args) => login::login(args).await,
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
        Command::Reference(args) => docs::reference(args),
    }
}

/// The tree flags of a command that reads a tree, to fill in what is read first.
fn policy_args_mut(command: &mut Command) -> Option<&mut PolicyArgs> {
    match command {
        Command::Validate(a) => Some(&mut a.policy),
        Command::Render(a) => Some(&mut a.policy),
        Command::Diff(a) => Some(&mut a.tree.policy),
        Command::Apply(a) => Some(&mut a.tree.policy),
        Command::Run(a) => Some(&mut a.policy),
        _ => None,
    }
}

/// The tree flags of a command that reads a tree.
fn policy_args(command: &Command) -> Option<&PolicyArgs> {
    match command {
        Command::Validate(a) => Some(&a.policy),
        Command::Render(a) => Some(&a.policy),
        Command::Diff(a) => Some(&a.tree.policy),
        Command::Apply(a) => Some(&a.tree.policy),
        Command::Run(a) => Some(&a.policy),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_listen_on_loopback_by_default() {
        let cli = Cli::try_parse_from(["driftless", "run", "--dir", "."]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert!(
            args.metrics_addr.ip().is_loopback(),
            "{}",
            args.metrics_addr
        );
    }

    /// The in-cluster example's Deployment passes arguments this binary takes as `run`.
    #[test]
    fn the_example_deployment_runs_the_daemon() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/kubernetes/deployment.yaml"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let deployment: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let cli = Cli::try_parse_from(std::iter::once("driftless").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(matches!(cli.command, Command::Run(_)), "{cli:?}");
    }
}
