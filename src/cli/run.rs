//! `driftless run`: the daemon, from the command line (binary edge).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::secrets::{read_secret_file, secret_from_env};
use super::{DriftMode, EngineArgs, GlobalArgs, PolicyArgs, exit};
use driftless::cluster::Selection;
use driftless::daemon::{self, LeaseConfig};
use driftless::report::notify::{Provider, Target, repo_of_git_url};
use driftless::source::Config as SourceConfig;
use driftless::source::git::{GitAuth, GitConfig, GitRef};

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
    /// Apply only revisions signed by a key this file trusts: an allowed_signers file
    /// (ssh-keygen's format, as git's gpg.ssh.allowedSignersFile) for SSH signatures, or
    /// an OpenPGP keyring (public keys as gpg exports them, armored or not) for OpenPGP
    /// ones; repeat it for both. The commit's signature is checked, or with --tag the
    /// tag's. Any other revision is not applied and the last verified one stays (read
    /// again at each fetch).
    #[arg(long, value_name = "FILE", requires = "git")]
    pub verify_commits: Vec<PathBuf>,
    /// Subdirectory of the repository (--git) or of the artifact's tree (--oci) that holds
    /// the specs.
    #[arg(long, value_name = "SUBDIR")]
    pub path: Option<String>,
    /// How often to fetch with --git or --oci (POST /hooks/git or /hooks/oci fetches at
    /// once).
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Full resync (and directory rescan) period, counted from the end of the last whole
    /// sync.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub resync: Duration,
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
    /// Serve that address over TLS (1.2 and 1.3) with this certificate (PEM; the
    /// server's own first, then its chain). Read again when it changes on disk.
    #[arg(
        long,
        value_name = "FILE",
        env = "DRIFTLESS_TLS_CERT_FILE",
        requires = "tls_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        env = "DRIFTLESS_TLS_KEY_FILE",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<PathBuf>,
    /// Let machine callers present a client certificate this CA (PEM, one or more)
    /// signed for client authentication: the controls then accept it as they accept
    /// the API token, and the audit line names its subject's common name. Clients
    /// without one are served as before. Read at start.
    #[arg(
        long,
        value_name = "FILE",
        env = "DRIFTLESS_TLS_CLIENT_CA_FILE",
        requires = "tls_cert_file"
    )]
    pub tls_client_ca_file: Option<PathBuf>,
    /// Serve a --metrics-addr that is not loopback without an --api-token-file: whoever
    /// reaches it reads the status, the UI and /metrics (the controls stay refused).
    /// Without it, such a start is refused.
    #[arg(long, env = "DRIFTLESS_INSECURE_OPEN_LISTENER")]
    pub insecure_open_listener: bool,
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
    /// Replicas of this instance share the tree: each applies, prunes and reports the
    /// specs of the buckets it holds, divided among the live members (a Lease each, in
    /// the inventory namespace); a member that dies has its specs taken over.
    #[arg(long, conflicts_with = "leader_elect")]
    pub shard: bool,
    /// This replica's name among those sharing the tree: unique, and the same after a
    /// restart [default: $POD_NAME, else $HOSTNAME].
    #[arg(long, requires = "shard")]
    pub shard_identity: Option<String>,
    /// A member whose Lease has not been renewed this long is dead: the others take its
    /// specs over. It stops writing a third of this earlier.
    #[arg(long, default_value = "15s", value_parser = lease_duration, requires = "shard")]
    pub shard_lease: Duration,
    /// A spec not ready this long after its revision was applied is reported failed.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub ready_timeout: Duration,
    /// A sync (applies, wave and hook waits, prune) that goes this long without moving
    /// (no object applied or pruned, no stage ready) stops at its next safe point, is
    /// reported failed and retried with backoff; every wait within it is bounded by what
    /// is left. A large first apply that keeps applying is never cut short.
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
    pub signin: super::signin::SignInArgs,
    #[command(flatten)]
    pub notify: NotifyArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Where `driftless run` tells of its transitions.
#[derive(clap::Args, Debug)]
pub struct NotifyArgs {
    /// POST each transition as JSON to this URL (repeatable): revision applied and ready,
    /// revision invalid, sync failed, prune refused, specs not ready in time, recovered.
    #[arg(long, value_name = "URL")]
    pub notify: Vec<String>,
    /// File holding the secret that signs --notify requests (X-Driftless-Signature:
    /// sha256=<HMAC-SHA256 of the body>).
    #[arg(long, value_name = "FILE", requires = "notify")]
    pub notify_secret_file: Option<PathBuf>,
    /// Post the same transitions to a Slack-compatible incoming webhook (repeatable). The
    /// URL is a credential: prefer the environment variable to argv.
    #[arg(
        long,
        value_name = "URL",
        env = "DRIFTLESS_NOTIFY_SLACK",
        value_delimiter = ','
    )]
    pub notify_slack: Vec<String>,
    /// Set a commit status on each git revision (with --oci: on the commit each artifact
    /// was built from, its org.opencontainers.image.revision): pending when its sync
    /// starts, success when applied and every spec ready, failure otherwise. Token from
    /// DRIFTLESS_COMMIT_STATUS_TOKEN or DRIFTLESS_COMMIT_STATUS_TOKEN_FILE.
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub commit_status: Option<CommitStatusProvider>,
    /// The provider's API base URL (default: https://api.github.com,
    /// https://gitlab.com/api/v4).
    #[arg(long, value_name = "URL", requires = "commit_status")]
    pub commit_status_url: Option<String>,
    /// The repository: GitHub owner/name, GitLab project path (default: from --git;
    /// needed with --oci).
    #[arg(long, value_name = "REPO", requires = "commit_status")]
    pub commit_status_repo: Option<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStatusProvider {
    Github,
    Gitlab,
}

/// The listener's TLS (`--tls-cert-file`, `--tls-key-file`), read now: an unusable pair
/// refuses the start; so does an address others reach with no token, unless the operator
/// says it may be open.
fn listener_tls(
    args: &RunArgs,
    token: bool,
) -> anyhow::Result<Option<std::sync::Arc<rustls::ServerConfig>>> {
    use driftless::report::tls;
    let closed = token || args.signin.oidc_issuer.is_some();
    anyhow::ensure!(
        args.metrics_addr.ip().is_loopback() || closed || args.insecure_open_listener,
        "--metrics-addr {} is not a loopback address and neither --api-token-file nor \
         --oidc-issuer is given: whoever reaches it would read the status and the UI; give \
         --api-token-file FILE or --oidc-issuer URL, or --insecure-open-listener to serve it open",
        args.metrics_addr
    );
    Ok(match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => Some(tls::server_config(
            &tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            },
            args.tls_client_ca_file.as_deref(),
        )?),
        _ => None,
    })
}

/// The receivers the flags name, checked before the daemon starts.
fn notify_targets(args: &NotifyArgs, git: Option<&str>, oci: bool) -> anyhow::Result<Vec<Target>> {
    let secret = match &args.notify_secret_file {
        Some(f) => Some(read_secret_file(f, "notification secret")?),
        None => None,
    };
    let mut targets = Vec::new();
    for url in &args.notify {
        check_url(url, "--notify")?;
        targets.push(Target::Webhook {
            url: url.clone(),
            secret: secret.clone(),
        });
    }
    for url in &args.notify_slack {
        check_url(url, "--notify-slack")?;
        targets.push(Target::Slack { url: url.clone() });
    }
    if let Some(provider) = args.commit_status {
        anyhow::ensure!(
            git.is_some() || oci,
            "--commit-status needs --git (or --oci)"
        );
        let provider = match provider {
            CommitStatusProvider::Github => Provider::GitHub,
            CommitStatusProvider::Gitlab => Provider::GitLab,
        };
        let base = args
            .commit_status_url
            .clone()
            .unwrap_or_else(|| provider.default_base().to_string());
        check_url(&base, "--commit-status-url")?;
        let repo = match (&args.commit_status_repo, git) {
            (Some(r), _) => r.trim_matches('/').to_string(),
            (None, Some(url)) => repo_of_git_url(url).with_context(
                || "cannot tell the repository from --git; set --commit-status-repo",
            )?,
            (None, None) if oci => anyhow::bail!(
                "--commit-status with --oci needs --commit-status-repo: an artifact does not \
                 say which repository its commit is in"
            ),
            (None, None) => anyhow::bail!("--commit-status needs --git (or --oci)"),
        };
        let token = secret_from_env("DRIFTLESS_COMMIT_STATUS_TOKEN")?.context(
            "--commit-status needs a token in DRIFTLESS_COMMIT_STATUS_TOKEN or \
             DRIFTLESS_COMMIT_STATUS_TOKEN_FILE",
        )?;
        targets.push(Target::CommitStatus {
            provider,
            base: base.trim_end_matches('/').to_string(),
            repo,
            token,
        });
    }
    Ok(targets)
}

fn check_url(url: &str, flag: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        url.starts_with("http://") || url.starts_with("https://"),
        "{flag} takes an http:// or https:// URL"
    );
    anyhow::ensure!(url.parse::<hyper::Uri>().is_ok(), "{flag}: not a valid URL");
    Ok(())
}

pub async fn run(args: &RunArgs, global: &GlobalArgs, selection: &Selection) -> anyhow::Result<u8> {
    warn_of(args);
    let cfg = config(args, global, &args.policy, status_file(args, global)?)?;
    let client = selection
        .followed_client()
        .await
        .context("connecting to the cluster")?;
    daemon::run(cfg, client, shutdown_signal()).await?;
    Ok(exit::OK)
}

/// `--status-file`, or the default (its directory made if missing).
pub(super) fn status_file(args: &RunArgs, global: &GlobalArgs) -> anyhow::Result<PathBuf> {
    if let Some(path) = &args.status_file {
        return Ok(path.clone());
    }
    let path = default_status_file(&global.instance)?;
    // Made if missing; a directory that cannot be made is reported by the writer, which
    // retries.
    let _ = path.parent().map(std::fs::create_dir_all);
    Ok(path)
}

/// What the flags risk, said once at start.
pub(super) fn warn_of(args: &RunArgs) {
    if let Some(url) = &args.git
        && driftless::source::git::url_has_credentials(url)
    {
        // The status file and logs never show it, but argv is public on the host.
        tracing::warn!(
            "the --git URL carries credentials, which every local user can read in the \
             process list; use DRIFTLESS_GIT_TOKEN(_FILE) or DRIFTLESS_GIT_PASSWORD(_FILE) instead"
        );
    }
    if (args.git.is_some() || args.oci.is_some())
        && args.hook_secret_file.is_none()
        && !args.metrics_addr.ip().is_loopback()
    {
        let hook = match args.oci.is_some() {
            true => "/hooks/oci",
            false => "/hooks/git",
        };
        tracing::warn!(
            addr = %args.metrics_addr,
            "POST {hook} accepts unsigned requests on a non-loopback address: anyone who \
             reaches it can make the daemon fetch; set --hook-secret-file"
        );
    }
}

/// The daemon's configuration for the cluster `policy` serves.
pub(super) fn config(
    args: &RunArgs,
    global: &GlobalArgs,
    policy: &super::PolicyArgs,
    status_file: PathBuf,
) -> anyhow::Result<daemon::Config> {
    for (given, flag) in [
        (args.tag.is_some(), "--tag"),
        (args.path.is_some(), "--path"),
    ] {
        anyhow::ensure!(
            !given || args.git.is_some() || args.oci.is_some(),
            "{flag} needs --git or --oci"
        );
    }
    let source = match (&args.dir, &args.git) {
        (Some(dir), _) => SourceConfig::Dir(dir.clone()),
        (None, None) if args.oci.is_some() => oci_source(args)?,
        (None, Some(url)) => {
            let reference = match (&args.tag, &args.commit, &args.branch) {
                (Some(t), _, _) => GitRef::Tag(t.clone()),
                (_, Some(c), _) => GitRef::Commit(c.clone()),
                (_, _, b) => GitRef::Branch(b.clone().unwrap_or_else(|| "main".to_string())),
            };
            let auth = GitAuth::from_env(|k| std::env::var(k).ok()).context("git credentials")?;
            // Refused at start, in the file's words, rather than at every fetch.
            driftless::source::git::verify::Trusted::read(&args.verify_commits)?;
            let config = GitConfig {
                url: url.clone(),
                reference,
                path: args.path.clone(),
                cache_dir: policy.tools.cache_dir(),
                needs_checkout: driftless::hydrate::needs_checkout,
                auth,
                verify: args.verify_commits.clone(),
            };
            SourceConfig::Git {
                config,
                interval: args.interval,
            }
        }
        (None, None) => anyhow::bail!("one of --dir, --git or --oci is required"),
    };
    let hook_secret = match &args.hook_secret_file {
        Some(f) => Some(read_secret_file(f, "hook secret")?),
        None => None,
    };
    let notify = notify_targets(&args.notify, args.git.as_deref(), args.oci.is_some())?;
    let api_token = match &args.api_token_file {
        Some(f) => Some(read_secret_file(f, "API token")?),
        None => None,
    };
    let tls = listener_tls(args, api_token.is_some())?;
    let leader_elect = args.leader_elect.then(|| LeaseConfig {
        namespace: args.lease_namespace.clone(),
        name: args
            .lease_name
            .clone()
            .unwrap_or_else(|| format!("driftless-{}", global.instance)),
        identity: std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .map(|h| format!("{h}-{}", std::process::id()))
            .unwrap_or_else(|_| format!("driftless-{}", std::process::id())),
    });
    let shard = match args.shard {
        false => None,
        true => Some(daemon::ShardConfig {
            namespace: args.engine.inventory_namespace.clone(),
            instance: global.instance.clone(),
            identity: match &args.shard_identity {
                Some(id) => id.clone(),
                None => std::env::var("POD_NAME")
                    .or_else(|_| std::env::var("HOSTNAME"))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "--shard needs --shard-identity when neither POD_NAME nor HOSTNAME is set"
                        )
                    })?,
            },
            lease: args.shard_lease,
        }),
    };
    let cfg = daemon::Config {
        shard,
        policy: policy.policy()?.protect(&args.engine.inventory_namespace),
        source,
        resync: args.resync,
        status_file: Some(status_file),
        metrics_addr: args.metrics_addr,
        tls,
        client_certificates: args.tls_client_ca_file.is_some(),
        signin: super::signin::sign_in(&args.signin)?,
        hook_secret,
        leader_elect,
        ready_timeout: args.ready_timeout,
        sync_timeout: args.sync_timeout,
        events: args.events,
        engine: driftless::apply::Options {
            correct_drift: args.drift == super::DriftMode::Correct,
            ..args.engine.options(&global.instance)
        },
        notify,
        api_token,
        render: driftless::hydrate::Options {
            // The daemon's directory holds the one tree it follows.
            render_cache_max: None,
            clusters: policy.clusters()?,
            ..policy.tools.options()
        },
    };
    Ok(cfg)
}

/// `--oci` and what it follows: `--tag` (default latest, or the reference's own),
/// `--semver`, `--digest`.
fn oci_source(args: &RunArgs) -> anyhow::Result<SourceConfig> {
    use driftless::source::oci::{Selector, reference};
    let url = args.oci.as_deref().unwrap_or_default();
    let selector = match (&args.tag, &args.semver, &args.digest) {
        (Some(t), _, _) => {
            reference::check_tag(t).map_err(|e| anyhow::anyhow!("--tag: {e}"))?;
            Some(Selector::Tag(t.clone()))
        }
        (_, Some(r), _) => Some(Selector::Semver(
            semver::VersionReq::parse(r)
                .map_err(|e| anyhow::anyhow!("--semver {r:?} is not a semver range: {e}"))?,
        )),
        (_, _, Some(d)) => Some(Selector::Digest(
            reference::check_digest(d).map_err(|e| anyhow::anyhow!("--digest: {e}"))?,
        )),
        _ => None,
    };
    let mut config = args
        .policy
        .registry
        .config(url, selector, args.policy.tools.cache_dir())?;
    config.path = driftless::source::oci::normalize_path(args.path.as_deref().unwrap_or(""))?;
    Ok(SourceConfig::Oci {
        config,
        interval: args.interval,
    })
}

/// SIGTERM (systemd, kubelet) or SIGINT (a terminal).
pub(super) async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
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
pub(super) fn default_status_file(instance: &str) -> anyhow::Result<PathBuf> {
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

/// A lease of whole seconds, at least 3 (a Lease says its duration in seconds).
fn lease_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(3) || d.subsec_nanos() != 0 {
        return Err("must be whole seconds, at least 3s".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

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
