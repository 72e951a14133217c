//! `driftless run`: the daemon, from the command line (binary edge).

use std::path::PathBuf;

use anyhow::Context as _;

use super::{GlobalArgs, RunArgs, exit};
use driftless::cluster::Selection;
use driftless::daemon::{self, LeaseConfig, SourceConfig};
use driftless::source::git::{GitAuth, GitConfig, GitRef};

fn cache_dir(args: &RunArgs) -> PathBuf {
    if let Some(dir) = &args.cache_dir {
        return dir.clone();
    }
    // systemd's CacheDirectory= sets this.
    if let Some(dir) = std::env::var_os("CACHE_DIRECTORY") {
        return PathBuf::from(dir);
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/driftless"),
        None => std::env::temp_dir().join("driftless-cache"),
    }
}

pub async fn run(args: &RunArgs, global: &GlobalArgs, selection: &Selection) -> anyhow::Result<u8> {
    let source = match (&args.dir, &args.git) {
        (Some(dir), _) => SourceConfig::Dir(dir.clone()),
        (None, Some(url)) => {
            let reference = match (&args.tag, &args.commit, &args.branch) {
                (Some(t), _, _) => GitRef::Tag(t.clone()),
                (_, Some(c), _) => GitRef::Commit(c.clone()),
                (_, _, b) => GitRef::Branch(b.clone().unwrap_or_else(|| "main".to_string())),
            };
            if driftless::source::git::url_has_credentials(url) {
                // The status file and logs never show it, but argv is public on the host.
                tracing::warn!(
                    "the --git URL carries credentials, which every local user can read in the \
                     process list; use DRIFTLESS_GIT_TOKEN(_FILE) or DRIFTLESS_GIT_PASSWORD(_FILE) instead"
                );
            }
            let auth = GitAuth::from_env(|k| std::env::var(k).ok()).context("git credentials")?;
            let config = GitConfig {
                url: url.clone(),
                reference,
                path: args.path.clone(),
                cache_dir: cache_dir(args),
                auth,
            };
            SourceConfig::Git {
                config,
                interval: args.interval,
            }
        }
        (None, None) => anyhow::bail!("one of --dir or --git is required"),
    };
    let hook_secret = match &args.hook_secret_file {
        Some(f) => {
            let secret = std::fs::read(f)
                .with_context(|| format!("reading the hook secret {}", f.display()))?
                .trim_ascii()
                .to_vec();
            // Refused here rather than by the HTTP server, which would otherwise stop
            // alone and leave the daemon running without metrics or hook.
            anyhow::ensure!(
                !secret.is_empty(),
                "the hook secret file {} is empty",
                f.display()
            );
            Some(secret)
        }
        None => None,
    };
    if args.git.is_some() && hook_secret.is_none() && !args.metrics_addr.ip().is_loopback() {
        tracing::warn!(
            addr = %args.metrics_addr,
            "POST /hooks/git accepts unsigned requests on a non-loopback address: anyone who \
             reaches it can make the daemon fetch; set --hook-secret-file"
        );
    }
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
    let cfg = daemon::Config {
        policy: args
            .policy
            .policy()
            .protect(&args.engine.inventory_namespace),
        source,
        resync: args.resync,
        status_file: args.status_file.clone(),
        metrics_addr: args.metrics_addr,
        hook_secret,
        leader_elect,
        ready_timeout: args.ready_timeout,
        sync_timeout: args.sync_timeout,
        events: args.events,
        engine: args.engine.options(&global.instance),
    };
    let client = selection
        .client()
        .await
        .context("connecting to the cluster")?;
    daemon::run(cfg, client, shutdown_signal()).await?;
    Ok(exit::OK)
}

/// SIGTERM (systemd, kubelet) or SIGINT (a terminal).
async fn shutdown_signal() {
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
