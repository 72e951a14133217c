//! Stand-ins for what a real node would run, so the local control plane (etcd,
//! kube-apiserver, controller-manager, scheduler) behaves like a cluster with workers:
//!
//! - fake Nodes: created at start, kept Ready and untainted, their Leases renewed (the
//!   node lifecycle controller that would read them is off); Nodes a test adds later with the
//!   `testbed.driftless.dev/fake-node=true` label are made Ready too;
//! - a kubelet: writes the status of Pods bound to fake Nodes, finishes their deletes,
//!   and simulates failures (see `kubelet::Behaviour`);
//! - a volume provisioner: binds every unbound PVC to a hostPath PersistentVolume.

mod kubelet;
mod nodes;
mod storage;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Parser, Debug)]
#[command(
    name = "driftless-testbed",
    about = "Kubelet, node and volume stand-ins for driftless's local test cluster"
)]
struct Args {
    /// Kubeconfig of the local cluster.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// How many fake Nodes to create (node-1 .. node-N).
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    /// Directory the hostPath PersistentVolumes point into.
    #[arg(long)]
    pv_dir: PathBuf,
    /// Written once the initial Nodes are Ready, so the boot script can wait for it.
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;

    let registry = nodes::Registry::default();
    nodes::create_initial(&client, args.nodes, &registry).await?;
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"ready\n").with_context(|| format!("writing {}", path.display()))?;
    }
    tracing::info!(nodes = args.nodes, "fake nodes ready; running stand-ins");

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(nodes::run(client.clone(), registry.clone()));
    tasks.spawn(nodes::renew_leases(client.clone(), registry.clone()));
    tasks.spawn(kubelet::run(client.clone(), registry.clone()));
    tasks.spawn(storage::run(client.clone(), args.pv_dir.clone()));

    tokio::select! {
        res = tasks.join_next() => {
            // Every task loops forever; one ending is a bug worth failing loudly on.
            match res {
                Some(Ok(Ok(()))) => anyhow::bail!("a stand-in task ended"),
                Some(Ok(Err(e))) => Err(e),
                Some(Err(e)) => Err(e.into()),
                None => Ok(()),
            }
        }
        _ = shutdown_signal() => {
            tracing::info!("shutting down");
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The next event of a watch, riding out errors: a real kubelet outlives an apiserver
/// restart, and the fault-injection tests (tests/faults.rs) restart it. The watcher backs
/// off between errors by itself. `None` only when the watch itself ends.
pub async fn next_event<S, T>(events: &mut S, what: &str) -> Option<T>
where
    S: futures::Stream<Item = Result<T, kube::runtime::watcher::Error>> + Unpin,
{
    use futures::StreamExt as _;
    loop {
        match events.next().await? {
            Ok(ev) => return Some(ev),
            Err(e) => tracing::warn!(watch = what, error = %e, "watch error; retrying"),
        }
    }
}
