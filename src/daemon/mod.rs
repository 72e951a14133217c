//! The daemon: a source (directory or git) feeds revisions; one loop owns the state and
//! a keyed queue; watches report drift, node changes and live state; syncs are applied
//! by the engine; readiness flows into the status file and metrics.
//!
//! What each of these does to the daemon's knowledge, and which keys it queues, is
//! decided in `state` (a plain value, tested without a cluster); the rest wires tasks,
//! channels and the engine to it. Keys are deduplicated; a failing key backs off on its
//! own.

mod events;
mod labeller;
mod main_loop;
mod queue;
mod readiness;
mod source;
mod state;
mod sync;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::{mpsc, watch as tokio_watch};
use tokio::time::Instant;

use crate::apply::{self, Engine};
use crate::health;
use crate::report::{http, metrics::Metrics};
use state::{Now, State, Tally};

pub enum SourceConfig {
    Dir(PathBuf),
    Git {
        config: crate::source::git::GitConfig,
        interval: Duration,
    },
}

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
}

pub struct Config {
    pub source: SourceConfig,
    pub resync: Duration,
    pub status_file: Option<PathBuf>,
    pub metrics_addr: SocketAddr,
    pub hook_secret: Option<Vec<u8>>,
    pub leader_elect: Option<LeaseConfig>,
    /// A spec not ready this long after its revision was applied is reported failed.
    pub ready_timeout: Duration,
    pub sync_timeout: Duration,
    /// Which namespaces the specs may write into (`--allow-namespace`).
    pub policy: crate::spec::Policy,
    /// Record Kubernetes Events on the objects a sync changes (`--events`).
    pub events: bool,
    pub engine: apply::Options,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("serving HTTP on {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("watching the spec directory: {0}")]
    Dir(#[from] crate::source::dir::DirError),
    #[error("opening the git source: {0}")]
    Git(#[from] crate::source::git::GitError),
    #[error("leader election: {0}")]
    Lease(String),
}

/// The time, for a transition of the state (which reads no clock itself).
fn now() -> Now {
    Now {
        at: Instant::now(),
        wall: Timestamp::now(),
    }
}

/// Counts what a transition of the state reported.
fn record(metrics: &Metrics, tally: Tally) {
    if tally.source_failed {
        metrics.source_failed();
    }
    if let Some(sync) = tally.sync {
        let unix = sync.at.as_millisecond() as f64 / 1000.0;
        metrics.sync_finished(sync.result, sync.elapsed, unix);
    }
    if let Some(revision) = &tally.applied {
        metrics.set_revision(revision);
    }
    metrics.add_drift_corrections(tally.drift_corrections);
    metrics.add_pruned(tally.pruned);
}

pub async fn run(
    mut cfg: Config,
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let (stop_tx, stop_rx) = tokio_watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let hook_rx = start_http(&cfg, metrics.clone(), ready.clone(), stop_rx.clone()).await?;
    let active_rx = start_leadership(cfg.leader_elect.as_ref(), &client).await?;

    let (src_tx, src_rx) = mpsc::channel(4);
    let (rescan_tx, rescan_rx) = mpsc::channel(1);
    let source_cfg = std::mem::replace(&mut cfg.source, SourceConfig::Dir(PathBuf::new()));
    let source_name = source::start(source_cfg, src_tx, rescan_rx, hook_rx, stop_rx.clone())?;

    let (ev_tx, ev_rx) = mpsc::channel(1024);
    tokio::spawn(watch::watch_nodes(client.clone(), ev_tx.clone()));
    let owned = watch::OwnedWatches::new(
        client.clone(),
        &cfg.engine.instance,
        &cfg.engine.field_manager,
        ev_tx,
    );
    let engine = Engine::new(
        client.clone(),
        apply::Options {
            // Stand-ins kept only as what readiness reads of them.
            live_view: Some(health::readiness_view),
            ..cfg.engine.clone()
        },
    );
    let (selectors_tx, selectors_rx) = tokio_watch::channel(labeller::Selectors::new());
    tokio::spawn(labeller::run(
        client.clone(),
        selectors_rx,
        engine.writes.clone(),
        active_rx.clone(),
    ));
    let recorder = cfg
        .events
        .then(|| events::Events::new(client.clone(), &cfg.engine.instance));
    let state = State::new(source_name, *active_rx.borrow());
    main_loop::Loop {
        status: crate::report::snapshot::StatusWriter::new(cfg.status_file.clone()),
        cfg,
        engine,
        recorder,
        metrics,
        ready,
        state,
        queue: queue::Queue::default(),
        owned,
        selectors: selectors_tx,
        rescan: rescan_tx,
        writes_seen: Default::default(),
    }
    .run(src_rx, ev_rx, active_rx, stop_rx)
    .await;
    Ok(())
}

/// Serves /metrics, the probes and the git hook until shutdown; returns what the hook
/// sends (a git source fetches on it).
async fn start_http(
    cfg: &Config,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    mut stop: tokio_watch::Receiver<bool>,
) -> Result<mpsc::Receiver<()>, DaemonError> {
    let (hook_tx, hook_rx) = mpsc::channel::<()>(1);
    let is_git = matches!(cfg.source, SourceConfig::Git { .. });
    let http_state = http::HttpState {
        metrics,
        ready,
        hook: is_git.then_some(hook_tx),
        hook_secret: cfg.hook_secret.clone(),
    };
    let listener = http::bind(cfg.metrics_addr)
        .await
        .map_err(|source| DaemonError::Http {
            addr: cfg.metrics_addr,
            source,
        })?;
    tokio::spawn(async move {
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = http::serve_on(listener, http_state, stopped).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
    Ok(hook_rx)
}

/// Whether this replica writes, as it changes. Without --leader-elect it always does.
async fn start_leadership(
    lease: Option<&LeaseConfig>,
    client: &Client,
) -> Result<tokio_watch::Receiver<bool>, DaemonError> {
    let (active_tx, active_rx) = tokio_watch::channel(lease.is_none());
    let Some(lease) = lease else {
        return Ok(active_rx);
    };
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&lease.identity)
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .map_err(|e| DaemonError::Lease(e.to_string()))?;
    let (mut leader_rx, _task) = manager.watch().await;
    tokio::spawn(async move {
        loop {
            let is_leader = *leader_rx.borrow_and_update();
            if active_tx.send(is_leader).is_err() {
                return;
            }
            if leader_rx.changed().await.is_err() {
                let _ = active_tx.send(false);
                return;
            }
        }
    });
    Ok(active_rx)
}
