//! The command line. This is the binary's edge: `anyhow` stops here, and
//! every subcommand maps its outcome to a kubectl-style exit code.

// The edge is where output is printed ([lints] keeps print out of the library).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod control;
mod docs;
mod oci;
mod output;
mod run;
mod sync;
mod tree;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::io::Write as _;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};

use driftless::cluster::Selection;
use driftless::render::{Facts, NodeFacts};

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
    Render(RenderArgs),
    /// Show what apply would change: live vs desired, including what prune would delete
    /// (exit 0: no difference, 1: differences, 2: error).
    Diff(DiffArgs),
    /// Sync a spec tree once (apply, prune), then exit.
    Apply(ApplyArgs),
    /// Run the daemon: keep the cluster in sync with a directory, a git repository or an
    /// OCI artifact.
    Run(RunArgs),
    /// Publish a spec tree as an OCI artifact, laid out as `flux push artifact` does
    /// (reproducible: the same tree gives the same digest).
    Push(oci::PushArgs),
    /// Show the daemon's status file as a table.
    Status(StatusArgs),
    /// Ask a running daemon to fetch its source and sync now; wait for the result
    /// (exit 1 if the sync failed).
    Reconcile(control::ReconcileArgs),
    /// Stop a running daemon from applying, pruning or correcting one spec.
    Suspend(control::SuspendArgs),
    /// Let a suspended spec sync again.
    Resume(control::ResumeArgs),
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
        Ok(policy)
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
    /// Write the tree to DIR instead, every Kustomize directory and Jsonnet file
    /// replaced by its output as plain YAML (the rendered-manifests pattern: CI commits
    /// DIR, and driftless applies it with no tool).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
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
#[derive(Args, Debug)]
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

#[derive(Args, Debug)]
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

#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    pub tree: TreeArgs,
    /// How to print the diff: text (unified diffs, coloured at a terminal), markdown (a
    /// pull-request comment: a summary table and a collapsed diff per object, at most
    /// 60,000 characters), json (one document: a summary and an entry per object).
    #[arg(long, short = 'o', value_enum, default_value_t = DiffOutput::Text)]
    pub output: DiffOutput,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffOutput {
    Text,
    Markdown,
    Json,
}

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["dir", "git", "oci"]))]
pub struct RunArgs {
    /// Watch this directory of specs.
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Sync from this git repository (credentials come from the environment, never argv).
    #[arg(long, value_name = "URL")]
    pub git: Option<String>,
    /// Branch to follow with --git (default: main).
    #[arg(long, requires = "git", conflicts_with_all = ["tag", "commit"])]
    pub branch: Option<String>,
    /// Tag to follow with --git or --oci (--oci's default: latest).
    #[arg(long, conflicts_with = "commit")]
    pub tag: Option<String>,
    /// Sync from this OCI artifact, oci://HOST/REPO (as `flux push artifact` or
    /// `driftless push` publish it); registry flags as for every command.
    #[arg(long, value_name = "oci://HOST/REPO")]
    pub oci: Option<String>,
    /// Follow the newest tag of --oci within this semver range, e.g. ">=1.0.0 <2.0.0".
    #[arg(long, value_name = "RANGE", requires = "oci", conflicts_with_all = ["tag", "digest"])]
    pub semver: Option<String>,
    /// Pin --oci to this digest (sha256:…): it never moves.
    #[arg(
        long,
        value_name = "sha256:…",
        requires = "oci",
        conflicts_with = "tag"
    )]
    pub digest: Option<String>,
    /// Commit to pin with --git.
    #[arg(long, requires = "git")]
    pub commit: Option<String>,
    /// Subdirectory of the repository (--git) or of the artifact's tree (--oci) that holds
    /// the specs.
    #[arg(long, value_name = "SUBDIR")]
    pub path: Option<String>,
    /// How often to fetch with --git or --oci (POST /hooks/git or /hooks/oci fetches at
    /// once).
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Full resync (and directory rescan) period.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub resync: Duration,
    /// Where to keep the git clone (default: $CACHE_DIRECTORY from systemd, else
    /// ~/.cache/driftless).
    #[arg(long, value_name = "DIR", env = "DRIFTLESS_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where to write the status file (JSON, replaced atomically) [default:
    /// $STATE_DIRECTORY/status.json under systemd, else
    /// ${XDG_STATE_HOME:-~/.local/state}/driftless/status.json; `status-<instance>.json`
    /// for an instance other than `default`]. `driftless status` reads the same.
    #[arg(long, value_name = "FILE", env = "DRIFTLESS_STATUS_FILE")]
    pub status_file: Option<PathBuf>,
    /// Address for /metrics, /healthz, /readyz and /hooks/git (a host name such as
    /// `localhost:0` is resolved; its first address is used).
    #[arg(long, default_value = "127.0.0.1:9477", value_parser = socket_addr)]
    pub metrics_addr: std::net::SocketAddr,
    /// File holding the HMAC secret the git hook must sign with (X-Hub-Signature-256).
    #[arg(long, value_name = "FILE")]
    pub hook_secret_file: Option<PathBuf>,
    /// Only the replica holding the Lease writes; the others keep caches warm.
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = driftless::apply::inventory::DEFAULT_NAMESPACE)]
    pub lease_namespace: String,
    /// Name of the Lease (default: driftless-<instance>).
    #[arg(long)]
    pub lease_name: Option<String>,
    /// A spec not ready this long after its revision was applied is reported failed.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub ready_timeout: Duration,
    /// A whole sync (applies, wave and hook waits, prune) still running after this long
    /// stops at its next safe point, is reported failed and retried with backoff; every
    /// wait within it is bounded by what is left. Large first applies may need more.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub sync_timeout: Duration,
    /// Record Kubernetes Events on the objects each sync changes, prunes or fails on.
    #[arg(long)]
    pub events: bool,
    /// File holding the bearer token the API's controls need (POST /api/v1/sync,
    /// suspend, resume); without it they are refused.
    #[arg(long, value_name = "FILE")]
    pub api_token_file: Option<PathBuf>,
    /// What to do when someone else changes an owned field: take it back, or only
    /// report it (status `drifted`, metric driftless_drifted_objects).
    #[arg(long, value_enum, default_value_t = DriftMode::Correct)]
    pub drift: DriftMode,
    #[command(flatten)]
    pub notify: run::NotifyArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Exit status: 0 when the daemon has converged (the newest revision is valid \
and synced, every spec ready), 1 when the status file says otherwise, 2 when it cannot be read."
)]
pub struct StatusArgs {
    /// The daemon's status file [default: as `run` writes it, see `run --status-file`].
    #[arg(long, value_name = "FILE", env = "DRIFTLESS_STATUS_FILE")]
    pub status_file: Option<PathBuf>,
    /// How to print it.
    #[arg(long, short = 'o', value_enum, default_value_t = StatusOutput::Table)]
    pub output: StatusOutput,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutput {
    Table,
    /// The table with nothing cut.
    Wide,
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
    };
    let mut cli = cli;
    // An `oci://` PATH is pulled first, and the commands read the unpacked tree.
    let _pulled = match &mut cli.command {
        Command::Validate(a) => oci::pull_path(&mut a.path, &a.policy.registry).await?,
        Command::Render(a) => oci::pull_path(&mut a.path, &a.policy.registry).await?,
        Command::Diff(a) => oci::pull_path(&mut a.tree.path, &a.tree.policy.registry).await?,
        Command::Apply(a) => oci::pull_path(&mut a.tree.path, &a.tree.policy.registry).await?,
        _ => None,
    };
    match &cli.command {
        Command::Validate(args) => validate(args),
        Command::Push(args) => oci::push(args).await,
        Command::Render(args) => render(args, &cli.global, &selection).await,
        Command::Schema => {
            let schema = driftless::spec::schema::generate()?;
            std::io::stdout().lock().write_all(schema.as_bytes())?;
            Ok(exit::OK)
        }
        Command::Diff(args) => sync::diff(args, &cli.global, &selection).await,
        Command::Apply(args) => sync::apply(args, &cli.global, &selection).await,
        Command::Run(args) => run::run(args, &cli.global, &selection).await,
        Command::Status(args) => status(args, &cli.global.instance),
        Command::Reconcile(args) => control::reconcile(args).await,
        Command::Suspend(args) => control::suspend(args).await,
        Command::Resume(args) => control::resume(args).await,
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
        Command::Reference(args) => docs::reference(args),
    }
}

fn status(args: &StatusArgs, instance: &str) -> anyhow::Result<u8> {
    let path = match &args.status_file {
        Some(path) => path.clone(),
        None => default_status_file(instance)?,
    };
    let file = match driftless::report::status::StatusFile::read(&path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("driftless status: {e}");
            return Ok(exit::ERROR);
        }
    };
    let not_converged = file.not_converged(k8s_openapi::jiff::Timestamp::now());
    let mut text = match args.output {
        StatusOutput::Table => file.table(),
        StatusOutput::Wide => file.wide_table(),
        StatusOutput::Json => serde_json::to_string_pretty(&file)? + "\n",
    };
    // The verdict, for a person; JSON stays the file as it is (the exit status says it).
    if args.output != StatusOutput::Json {
        match not_converged.is_empty() {
            true => text.push_str("\nconverged\n"),
            false => {
                text.push_str("\nnot converged:\n");
                for why in &not_converged {
                    text.push_str(&format!("  - {why}\n"));
                }
            }
        }
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(match not_converged.is_empty() {
        true => exit::OK,
        false => exit::DIFFERENCES,
    })
}

/// `--metrics-addr`: `IP:PORT`, or `HOST:PORT` resolved (`localhost:0`), loopback first.
fn socket_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let addrs: Vec<std::net::SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("{text:?} is not an address (HOST:PORT, e.g. 127.0.0.1:9477): {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("{text:?} resolves to no address"))
}

/// Where `run` writes its status file and `status` reads it, unless told: systemd's
/// state directory, else the XDG state directory; one file per instance.
pub(crate) fn default_status_file(instance: &str) -> anyhow::Result<PathBuf> {
    let name = match instance {
        driftless::object::ownership::DEFAULT_INSTANCE => "status.json".to_string(),
        other => format!("status-{other}.json"),
    };
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY").filter(|d| !d.is_empty()) {
        // systemd may list several, colon-separated: the first is ours.
        let dir = PathBuf::from(dir);
        let first = dir
            .to_str()
            .and_then(|d| d.split(':').next())
            .map(PathBuf::from)
            .unwrap_or(dir);
        return Ok(first.join(name));
    }
    let state = match std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/state"),
            None => anyhow::bail!(
                "no --status-file, and neither STATE_DIRECTORY, XDG_STATE_HOME nor HOME is set to find the default"
            ),
        },
    };
    Ok(state.join("driftless").join(name))
}

fn validate(args: &PathArg) -> anyhow::Result<u8> {
    let policy = args.policy.policy()?;
    let Some(loaded) = tree::load_rendered(&args.path, &policy, &args.policy.tools, false)? else {
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
    tree::describe(&mut out, &loaded)?;
    Ok(exit::OK)
}

async fn render(
    args: &RenderArgs,
    global: &GlobalArgs,
    selection: &Selection,
) -> anyhow::Result<u8> {
    let Some(loaded) = tree::load_rendered(
        &args.path,
        &args.policy.policy()?,
        &args.policy.tools,
        false,
    )?
    else {
        return Ok(exit::ERROR);
    };
    if let Some(dir) = &args.out {
        let n = tree::write_out(&loaded, dir)?;
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
        driftless::spec::sops::mask_sealed(&mut o.body, None, "");
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

    #[test]
    fn metrics_addr_takes_a_host_name() {
        assert_eq!(
            socket_addr("127.0.0.1:9477").unwrap(),
            "127.0.0.1:9477".parse().unwrap()
        );
        let local = socket_addr("localhost:0").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 0, "{local}");
        assert!(socket_addr("no port").unwrap_err().contains("HOST:PORT"));
    }
}
