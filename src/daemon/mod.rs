//! The daemon: a source (a directory, git, OCI) feeds revisions; one loop owns the state and
//! a keyed queue; watches report drift, node changes and live state; syncs are applied
//! by the engine; readiness flows into the status file and metrics.
//!
//! What each of these does to the daemon's knowledge, and which keys it queues, is
//! decided in `state` (a plain value, tested without a cluster); the rest wires tasks,
//! channels and the engine to it. Keys are deduplicated; a failing key backs off on its
//! own.

mod events;
mod inspect;
mod labeller;
mod leadership;
mod ledger;
mod main_loop;
mod queue;
mod readiness;
mod restart;
mod review;
mod shards;
mod source;
mod state;
mod sync;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tracing::Instrument as _;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::{mpsc, watch as tokio_watch};
use tokio::time::Instant;

use crate::apply::suspensions::Suspension;
use crate::apply::{self, Cluster};
use crate::health;
use crate::report::api::{ApiState, Control, Published, Suspender};
use crate::report::notify::{self, Notifier};
use crate::report::status::{SpecStatus, StatusFile};
use crate::report::{http, metrics::Metrics};
pub use shards::ShardConfig;
use state::{Now, State, Tally};

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
}

pub struct Config {
    pub source: crate::source::Config,
    pub resync: Duration,
    pub status_file: Option<PathBuf>,
    pub metrics_addr: SocketAddr,
    /// TLS on that listener (`--tls-cert-file`, `--tls-key-file`); none serves plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub hook_secret: Option<Vec<u8>>,
    pub leader_elect: Option<LeaseConfig>,
    /// Replicas share the tree (`--shard`): this one's membership.
    pub shard: Option<ShardConfig>,
    /// A spec not ready this long after its revision was applied is reported failed.
    pub ready_timeout: Duration,
    pub sync_timeout: Duration,
    /// Which namespaces the specs may write into (`--allow-namespace`).
    pub policy: crate::spec::Policy,
    /// Record Kubernetes Events on the objects a sync changes (`--events`).
    pub events: bool,
    pub engine: apply::Options,
    /// Receivers told of transitions (`--notify`, `--notify-slack`, `--commit-status`).
    pub notify: Vec<crate::report::notify::Target>,
    /// The bearer token the API's controls need (`--api-token-file`); none refuses them.
    pub api_token: Option<Vec<u8>>,
    /// Whether the listener verifies client certificates (`--tls-client-ca-file`), which
    /// the controls accept as they accept the token.
    pub client_certificates: bool,
    /// Sign-in with an OpenID Connect provider (`--oidc-issuer`): people see and steer
    /// what the cluster's RBAC lets them.
    pub signin: Option<Arc<crate::report::signin::SignIn>>,
    /// How Kustomize and Jsonnet sources are rendered (`--kustomize`, `--render-timeout`…).
    pub render: crate::hydrate::Options,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("serving HTTP on {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Source(#[from] crate::source::OpenError),
    #[error("a cluster's engine stopped: {0}")]
    Engine(String),
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
    if let Some((source, reason)) = tally.source_failed {
        metrics.source_failed(source, reason);
    }
    if let Some(sync) = tally.sync {
        let unix = sync.at.as_millisecond() as f64 / 1000.0;
        metrics.sync_finished(sync.result, sync.elapsed, unix);
    }
    if let Some(revision) = &tally.applied {
        metrics.set_revision(revision);
    }
    if let Some(n) = tally.apps_held {
        metrics.apps_held.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    metrics.add_drift_corrections(tally.drift_corrections);
    metrics.add_pruned(tally.pruned);
}

pub async fn run(
    cfg: Config,
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let stop_rx = stop_on(shutdown);
    let (addr, tls) = (cfg.metrics_addr, cfg.tls.clone());
    let (face, engine) = start(cfg, client, stop_rx.clone());
    let listener = bind(addr, tls).await?;
    tokio::spawn(async move {
        let stopped = stopped(stop_rx);
        if let Err(e) = http::serve_on(listener, face, stopped).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
    engine.await
}

/// One daemon serving a fleet: an engine per cluster, each as a daemon of its own would
/// run (its source, render, syncs, watches, inventory and status on its own tasks, so
/// that one cluster away or slow holds up no other), behind one listener
/// (`report::fleet`). Returns when every engine has stopped; the first engine that
/// cannot start stops the daemon.
pub async fn run_fleet(
    engines: Vec<(String, Config, Client)>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let stop_rx = stop_on(shutdown);
    let mut members = Vec::new();
    let mut running = tokio::task::JoinSet::new();
    for (name, cfg, client) in engines {
        let span = tracing::info_span!("cluster", cluster = %name);
        // What the engine starts at once (its leadership) is on the cluster's span too.
        let (face, engine) = span.in_scope(|| start(cfg, client, stop_rx.clone()));
        members.push(crate::report::fleet::Member {
            cluster: name,
            face,
        });
        running.spawn(tracing::Instrument::instrument(engine, span));
    }
    let listener = bind(addr, tls).await?;
    tokio::spawn(async move {
        let stopped = stopped(stop_rx);
        if let Err(e) = crate::report::fleet::serve_on(listener, members, stopped).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
    while let Some(ended) = running.join_next().await {
        match ended {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(DaemonError::Engine(e.to_string())),
        }
    }
    Ok(())
}

/// A channel that turns true once `shutdown` resolves.
fn stop_on(
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio_watch::Receiver<bool> {
    let (stop_tx, stop_rx) = tokio_watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    stop_rx
}

async fn stopped(mut stop: tokio_watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The listener of `--metrics-addr`, plain or TLS.
async fn bind(
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<crate::report::tls::Listening, DaemonError> {
    let listener = http::bind(addr)
        .await
        .map_err(|source| DaemonError::Http { addr, source })?;
    crate::report::tls::Listening::new(listener, tls)
        .map_err(|source| DaemonError::Http { addr, source })
}

/// One cluster's engine: what it shows on a listener (its metrics, readiness, hook and
/// API), at once, and the engine itself, which renders, syncs and watches until `stop`.
fn start(
    mut cfg: Config,
    client: Client,
    stop_rx: tokio_watch::Receiver<bool>,
) -> (
    http::HttpState,
    futures::future::BoxFuture<'static, Result<(), DaemonError>>,
) {
    let metrics = Arc::new(Metrics::of_cluster(
        cfg.policy.cluster.named_in_fleet().as_deref(),
    ));
    let ready = Arc::new(AtomicBool::new(false));
    // The one way to the cluster, shared with the task each sync runs in.
    let cluster = Cluster::new(
        client,
        apply::Options {
            // Stand-ins kept only as what readiness reads of them.
            live_view: Some(health::readiness_view),
            ..cfg.engine.clone()
        },
    );
    let (api, ends) = api_state(&cfg, &cluster);
    let leadership = leadership::start(cfg.leader_elect.as_ref(), cluster.client());
    let (hook_tx, hook_rx) = mpsc::channel::<()>(1);
    let (kind, polled) = cfg.source.kind();
    let face = http::HttpState {
        metrics: metrics.clone(),
        ready: ready.clone(),
        unready: Some(leadership.problem.clone()),
        hook: polled.then_some((kind, hook_tx)),
        hook_secret: cfg.hook_secret.clone(),
        api: Some(Arc::new(api)),
        gate: cfg.signin.clone().map(|signin| {
            Arc::new(crate::report::signin::Gate {
                signin,
                token: cfg.api_token.clone(),
            })
        }),
    };
    let engine = async move {
        let active_rx = leadership.active;
        let (src_tx, src_rx) = mpsc::channel(4);
        // Room for a few reconcile requests besides the resync's.
        let (rescan_tx, rescan_rx) = mpsc::channel(8);
        let source_cfg =
            std::mem::replace(&mut cfg.source, crate::source::Config::Dir(PathBuf::new()));
        let (stage, kubernetes) = stage(&cfg, &cluster).await;
        let origins = notify::Origins::default();
        let source_name = source::start(
            source_cfg,
            stage,
            source::Channels {
                tx: src_tx,
                rescan: rescan_rx,
                hook: hook_rx,
                stop: stop_rx.clone(),
            },
            origins.clone(),
            &metrics,
        )?;
        let (ev_tx, ev_rx) = mpsc::channel(1024);
        let owned = start_watches(&cfg, &cluster, ev_tx);
        let (selectors_tx, selectors_rx) = tokio_watch::channel(labeller::Selectors::new());
        tokio::spawn(
            labeller::run(
                cluster.client().clone(),
                selectors_rx,
                cluster.writes.clone(),
                active_rx.clone(),
            )
            .in_current_span(),
        );
        let recorder = cfg
            .events
            .then(|| events::Events::new(cluster.client().clone(), &cfg.engine.instance));
        let notifier = start_notifier(&mut cfg, &source_name, origins, &metrics);
        let mut status =
            crate::report::snapshot::StatusWriter::new(cfg.status_file.clone(), ends.published);
        let (shard, member) = match cfg.shard.clone() {
            Some(shard) => {
                let (link, member, part) = start_shard(shard, &cluster, &stop_rx);
                status = status.with_part(part);
                (Some(link), Some(member))
            }
            None => (None, None),
        };
        let mut state = State::new(source_name, *active_rx.borrow());
        if let Some(link) = &shard {
            state.on_shard(link.view.borrow().clone());
        }
        state.kubernetes = kubernetes;
        state.cluster = cfg.policy.cluster.named_in_fleet();
        first_state(&mut state, &cfg, &cluster).await;
        main_loop::Loop {
            cfg,
            on: main_loop::OnCluster {
                cluster,
                owned,
                selectors: selectors_tx,
                recorder,
                writes_seen: Default::default(),
                first_lists_until: None,
            },
            out: main_loop::Outputs {
                metrics,
                ready,
                status,
                notifier,
                desired: ends.desired,
                ledger: ends.ledger,
            },
            state,
            queue: queue::Queue::default(),
            rescan: rescan_tx,
            control: ends.control,
            waiting: Vec::new(),
            running: None,
            shard,
            share_due: None,
        }
        .run(
            src_rx,
            ev_rx,
            (ends.controls, ends.audits),
            (active_rx, leadership.problem),
            stop_rx,
        )
        .await;
        // A member leaving gives its buckets up, so the others need not wait a lease out.
        if let Some(member) = member {
            let _ = tokio::time::timeout(Duration::from_secs(10), member).await;
        }
        Ok(())
    };
    (face, Box::pin(engine))
}

/// How long the cluster's answer to whether a person may is kept: a RoleBinding's change
/// reaches the listener within it.
const RBAC_KEPT: Duration = Duration::from_secs(10);

/// The loop's ends of what the API serves and asks.
struct ApiEnds {
    /// Where the loop publishes the status the API serves.
    published: tokio_watch::Sender<Arc<Published>>,
    /// The API's way in (the loop's own too, once a requested read is done).
    control: mpsc::Sender<Control>,
    controls: mpsc::Receiver<Control>,
    /// The listener's audit records, for the history.
    audits: mpsc::Receiver<crate::report::audit::AuditRecord>,
    /// What the object view renders a spec from.
    desired: tokio_watch::Sender<Option<inspect::Desired>>,
    /// The drift ledger, whose JSON the API serves.
    ledger: ledger::Ledger,
}

/// What the API serves (the status, the object view, the drift ledger) and its way to
/// the loop, with the loop's ends of them.
fn api_state(cfg: &Config, cluster: &Cluster) -> (ApiState, ApiEnds) {
    let (published_tx, published_rx) =
        tokio_watch::channel(Arc::new(Published::new(&StatusFile::starting())));
    let (control_tx, control_rx) = mpsc::channel(16);
    let (audit_tx, audit_rx) = mpsc::channel(crate::report::audit::RECORDS);
    let (desired_tx, desired_rx) = tokio_watch::channel(None);
    let mut api = ApiState::new(
        published_rx,
        control_tx.clone(),
        cfg.api_token.clone(),
        Arc::new(ClusterSuspender {
            client: cluster.client().clone(),
            store: cluster.store(),
            writes: cluster.writes.clone(),
        }),
    );
    api.inspect = Some(Arc::new(inspect::Inspector::new(
        cluster.clone(),
        desired_rx,
    )));
    let (ledger, drift_rx) =
        ledger::Ledger::open(cfg.status_file.as_deref().map(ledger::path_beside));
    api.drift = Some(drift_rx);
    api.client_certificates = cfg.client_certificates;
    api.rbac = cfg.signin.is_some().then(|| {
        Arc::new(crate::report::signin::Rbac::new(
            Arc::new(review::ClusterAccess(cluster.clone())),
            RBAC_KEPT,
        ))
    });
    api.audit = Some(audit_tx);
    let ends = ApiEnds {
        published: published_tx,
        control: control_tx,
        controls: control_rx,
        audits: audit_rx,
        desired: desired_tx,
        ledger,
    };
    (api, ends)
}

/// What renders the source's revisions, with the cluster's Kubernetes version as it said
/// it at start (none when it did not).
async fn stage(cfg: &Config, cluster: &Cluster) -> (source::Stage, Option<String>) {
    // Read again before each render (source::Stage); this first reading says the
    // version in the status.
    // Bounded: a cluster that is away at start must not hold up the status and the API.
    let facts = tokio::time::timeout(Duration::from_secs(10), cluster.chart_facts()).await;
    let facts = match facts {
        Ok(Ok(facts)) => facts,
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::cluster::error_text(&e), "cannot read the cluster's version for charts; helm's defaults are used");
            Default::default()
        }
        Err(_) => {
            tracing::warn!(
                "the cluster did not say its version for charts within 10s; helm's defaults are used"
            );
            Default::default()
        }
    };
    let kubernetes = facts.kube_version.clone();
    let lookup = match crate::cluster::lookup::start(cluster.client().clone()).await {
        Ok(l) => Some(Arc::new(l)),
        Err(e) => {
            tracing::warn!(error = %e, "charts' lookups return nothing");
            None
        }
    };
    let stage = source::Stage {
        hydrator: Arc::new(crate::hydrate::Hydrator::new(cfg.render.clone())),
        allow_empty: cfg.engine.prune.allow_mass,
        cluster: facts,
        live: Some(source::Live {
            client: cluster.client().clone(),
            lookup,
            // Counted from the time the daemon started, as the CLI's are: renders are
            // kept on disk across restarts, and a restarted daemon's first reading must
            // not be one an earlier process made.
            readings: Arc::new(std::sync::atomic::AtomicU64::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
            )),
        }),
    };
    (stage, kubernetes)
}

/// Starts the watches of Nodes and of suspensions; returns those of owned objects, set
/// by the loop to the kinds the tree renders. All report on `tx`.
fn start_watches(
    cfg: &Config,
    cluster: &Cluster,
    tx: mpsc::Sender<watch::Event>,
) -> watch::OwnedWatches {
    let client = cluster.client();
    tokio::spawn(watch::watch_nodes(client.clone(), tx.clone()).in_current_span());
    tokio::spawn(
        watch::watch_suspensions(
            client.clone(),
            cfg.engine.inventory_namespace.clone(),
            cfg.engine.instance.clone(),
            tx.clone(),
        )
        .in_current_span(),
    );
    watch::OwnedWatches::new(
        client.clone(),
        &cfg.engine.instance,
        &cfg.engine.field_manager,
        tx,
    )
}

/// Where transitions are told (`--notify`, `--notify-slack`, `--commit-status`), if
/// anywhere.
fn start_notifier(
    cfg: &mut Config,
    source_name: &str,
    origins: notify::Origins,
    metrics: &Arc<Metrics>,
) -> Option<Notifier> {
    (!cfg.notify.is_empty()).then(|| {
        Notifier::start(
            std::mem::take(&mut cfg.notify),
            notify::Context {
                instance: cfg.engine.instance.clone(),
                cluster: cfg.policy.cluster.named_in_fleet(),
                source: source_name.to_string(),
                origins,
            },
            metrics.clone(),
        )
    })
}

/// Joins the replicas that share the tree; returns the loop's link to the member, the
/// member's task (it ends once the member has left) and where the status gives the member
/// this replica's part.
fn start_shard(
    shard: ShardConfig,
    cluster: &Cluster,
    stop: &tokio_watch::Receiver<bool>,
) -> (
    main_loop::ShardLink,
    tokio::task::JoinHandle<()>,
    tokio_watch::Sender<Arc<Vec<SpecStatus>>>,
) {
    // Nothing is written before the table gives this replica a bucket.
    cluster.hold(Some(Arc::default()));
    let (confirmed_tx, confirmed_rx) = tokio_watch::channel(Default::default());
    let (part_tx, part_rx) = tokio_watch::channel(Arc::default());
    let started = shards::start(
        shard,
        cluster.client().clone(),
        shards::Channels {
            confirmed: confirmed_rx,
            part: part_rx,
            stop: stop.clone(),
        },
    );
    let link = main_loop::ShardLink {
        view: started.view,
        confirmed: confirmed_tx,
        peers: started.peers,
    };
    (link, started.handle, part_tx)
}

/// What the state is told before the first sync: who this daemon is, how it treats
/// drift, and the suspensions as they stand.
async fn first_state(state: &mut State, cfg: &Config, cluster: &Cluster) {
    state.instance.clone_from(&cfg.engine.instance);
    state.correct_drift = cfg.engine.correct_drift;
    // The suspensions as they stand, before the first sync: the watch may list them only
    // after the source's first revision is in, and a restart must not apply what a
    // suspension holds back meanwhile.
    if let Some(now) = watch::read_suspensions(
        cluster.client(),
        &cfg.engine.inventory_namespace,
        &cfg.engine.instance,
    )
    .await
    {
        state.on_event(watch::Event::Suspensions(now));
    }
}

/// Suspensions written to the cluster, where every replica's watch reads them.
struct ClusterSuspender {
    client: Client,
    store: apply::Store,
    writes: Arc<apply::Writes>,
}

impl Suspender for ClusterSuspender {
    fn set(
        &self,
        id: String,
        suspension: Option<Suspension>,
    ) -> futures::future::BoxFuture<'_, Result<(), apply::ApplyError>> {
        Box::pin(async move {
            self.store
                .set_suspension(&self.client, &self.writes, &id, suspension.as_ref())
                .await
        })
    }
}
