//! The daemon: a source (directory or git) feeds revisions; one loop owns the state and
//! a keyed queue; watches report drift, node changes and live state; syncs are applied
//! by the engine; readiness flows into the status file and metrics.
//!
//! One sync runs at a time (objects within it in parallel, bounded), so the inventory
//! has a single writer. Keys are deduplicated; a failing spec backs off on its own.

pub mod events;
pub mod labeller;
pub mod queue;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::Value;
use tokio::sync::{mpsc, watch as tokio_watch};
use tokio::time::Instant;

use crate::apply::{self, Action, Engine, ObjKey, Observed, Verb};
use crate::health::{self, SpecHealth, Status};
use crate::render::{self, NodeFacts, Object};
use crate::report::{http, metrics::Metrics, status};
use crate::source;
use crate::spec::{SourceFile, SpecBody, SpecId, SpecTree};
use queue::{Key, Queue};

/// How many not-ready Deployments' Pods a readiness refresh lists at once.
const PODS_LISTS_AT_ONCE: usize = 8;

pub enum SourceConfig {
    Dir(PathBuf),
    Git {
        config: source::git::GitConfig,
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
    Dir(#[from] source::dir::DirError),
    #[error("opening the git source: {0}")]
    Git(#[from] source::git::GitError),
    #[error("leader election: {0}")]
    Lease(String),
}

/// What the source produced: a revision's files, or why there is none.
enum SourceUpdate {
    Revision { id: String, files: Vec<SourceFile> },
    Failed { message: String },
}

/// Everything the loop knows.
struct State {
    source_name: String,
    /// Shared with the sync that applies it (no copy of the tree per sync).
    tree: Option<Arc<SpecTree>>,
    /// While a revision is applied spec by spec (only the specs it changed): those not
    /// synced yet. `revision_applied` moves to the revision once this is empty.
    pending: Option<BTreeSet<SpecId>>,
    /// What the tree renders to, as readiness needs it (not the objects' bodies).
    expected: Vec<health::Expected>,
    /// The tree or the nodes changed since `expected` was rendered.
    render_dirty: bool,
    /// The revision `tree` came from, once synced.
    revision_applied: Option<String>,
    /// The revision `tree` came from (synced or not yet).
    revision_current: Option<String>,
    revision_seen: Option<String>,
    seen_at: Option<Instant>,
    /// When the current revision was first synced, for --ready-timeout and latency.
    applied_at: Option<Instant>,
    latency_observed: bool,
    errors: Vec<status::SourceError>,
    nodes: Vec<NodeFacts>,
    /// Whether the Node watch has delivered its first full list. Until then a render
    /// would see no nodes, and prune would delete every localservice's Services.
    nodes_known: bool,
    /// Per owned object: its spec and the fields our manager owned after our last write.
    recorded: HashMap<ObjKey, (SpecId, String)>,
    actions: HashMap<ObjKey, String>,
    /// Live state of owned objects, from the watches.
    live: Observed,
    last_sync: Option<status::LastSync>,
    health: Vec<SpecHealth>,
    health_dirty: bool,
    active: bool,
    /// The last status write failed (a read-only or full directory): retried each second,
    /// even when nothing changed, so the file catches up once it can be written.
    status_failed: bool,
    /// Why the Node watch cannot reach the API, while it cannot.
    cluster_error: Option<String>,
}

/// Hands memory freed by a sync back to the OS. A sync allocates and frees whole object
/// trees; glibc keeps freed memory in per-thread arenas, and over a burst of saves at
/// 5,000 specs the daemon's RSS grew from 380 to 650 MiB without it (the load test in
/// tests/faults.rs). mimalloc instead raised the peak at 1,000 specs by a fifth.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only returns free pages of glibc's heaps to the kernel; it
        // takes the allocator's own locks and touches no memory of ours.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// A sync that applied nothing: reported, and every key retried with backoff.
fn failed_sync(
    state: &mut State,
    metrics: &Metrics,
    keys: &[Key],
    elapsed: Duration,
    message: String,
) -> Vec<(Key, bool)> {
    let now = Timestamp::now();
    metrics.sync_finished("failed", elapsed, now.as_millisecond() as f64 / 1000.0);
    state.last_sync = Some(status::LastSync {
        time: now.to_string(),
        result: "failed".into(),
        duration_seconds: elapsed.as_secs_f64(),
        message: Some(message),
        applied: 0,
        unchanged: 0,
        pruned: 0,
        failed: 0,
    });
    keys.iter().map(|k| (k.clone(), false)).collect()
}

fn spec_of(live: &Value) -> Option<SpecId> {
    let id = live["metadata"]["annotations"][render::ownership::SPEC].as_str()?;
    let mut parts = id.splitn(3, '/');
    let kind = crate::spec::Kind::parse(parts.next()?)?;
    Some(SpecId {
        kind,
        namespace: parts.next()?.to_string(),
        name: parts.next()?.to_string(),
    })
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
    let (hook_tx, hook_rx) = mpsc::channel::<()>(1);
    let is_git = matches!(cfg.source, SourceConfig::Git { .. });
    let http_state = http::HttpState {
        metrics: metrics.clone(),
        ready: ready.clone(),
        hook: is_git.then_some(hook_tx),
        hook_secret: cfg.hook_secret.clone(),
    };
    let listener = http::bind(cfg.metrics_addr)
        .await
        .map_err(|source| DaemonError::Http {
            addr: cfg.metrics_addr,
            source,
        })?;
    let mut http_stop = stop_rx.clone();
    tokio::spawn(async move {
        let stopped = async move {
            let _ = http_stop.wait_for(|s| *s).await;
        };
        if let Err(e) = http::serve_on(listener, http_state, stopped).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });

    // Leadership: without --leader-elect this replica always writes.
    let (active_tx, mut active_rx) = tokio_watch::channel(cfg.leader_elect.is_none());
    if let Some(lease) = &cfg.leader_elect {
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
    }

    let (src_tx, mut src_rx) = mpsc::channel::<SourceUpdate>(4);
    let (rescan_tx, rescan_rx) = mpsc::channel::<()>(1);
    let source_cfg = std::mem::replace(&mut cfg.source, SourceConfig::Dir(PathBuf::new()));
    let source_name = start_source(source_cfg, src_tx, rescan_rx, hook_rx, stop_rx.clone())?;

    let (ev_tx, mut ev_rx) = mpsc::channel::<watch::Event>(1024);
    tokio::spawn(watch::watch_nodes(client.clone(), ev_tx.clone()));
    let mut owned = watch::OwnedWatches::new(
        client.clone(),
        &cfg.engine.instance,
        &cfg.engine.field_manager,
        ev_tx,
    );
    let (selectors_tx, selectors_rx) = tokio_watch::channel(labeller::Selectors::new());

    let engine = Engine::new(
        client.clone(),
        apply::Options {
            // Stand-ins kept only as what readiness reads of them.
            live_view: Some(health::readiness_view),
            ..cfg.engine.clone()
        },
    );
    let recorder = cfg
        .events
        .then(|| events::Events::new(client.clone(), &cfg.engine.instance));
    tokio::spawn(labeller::run(
        client.clone(),
        selectors_rx,
        engine.writes.clone(),
        active_rx.clone(),
    ));

    let mut state = State {
        source_name,
        tree: None,
        pending: None,
        expected: Vec::new(),
        render_dirty: true,
        revision_applied: None,
        revision_current: None,
        revision_seen: None,
        seen_at: None,
        applied_at: None,
        latency_observed: false,
        errors: Vec::new(),
        nodes: Vec::new(),
        nodes_known: false,
        recorded: HashMap::new(),
        actions: HashMap::new(),
        live: Observed::default(),
        last_sync: None,
        health: Vec::new(),
        health_dirty: true,
        active: *active_rx.borrow(),
        status_failed: false,
        cluster_error: None,
    };
    let mut queue = Queue::default();
    let mut resync = tokio::time::interval_at(Instant::now() + cfg.resync, cfg.resync);
    let mut refresh = tokio::time::interval(Duration::from_secs(1));
    // A refresh that overran must not be followed at once by another (Burst, the
    // default, does that): the loop would spend its time refreshing, not draining events.
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut writes_seen: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut stop = stop_rx.clone();

    loop {
        let next = queue
            .next_due()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            Some(update) = src_rx.recv() => {
                for key in on_source(&mut state, update, &metrics, &cfg.policy) {
                    queue.push(key, Instant::now());
                }
                // A standby is ready once warm: it serves metrics and waits to lead.
                if !state.active && state.revision_seen.is_some() {
                    ready.store(true, Ordering::Relaxed);
                }
                write_status(&cfg, &mut state, &metrics);
            }
            Some(ev) = ev_rx.recv() => {
                if let Some(key) = on_event(&mut state, ev) {
                    // A short delay batches a burst of events into one sync.
                    queue.push(key, Instant::now() + Duration::from_millis(100));
                }
            }
            _ = tokio::time::sleep_until(next) => {
                let keys = queue.take_due(Instant::now());
                if !state.nodes_known {
                    // Not lost: they run once the node set is known.
                    for k in keys {
                        queue.push(k, Instant::now() + Duration::from_millis(200));
                    }
                    continue;
                }
                if !state.active || state.tree.is_none() {
                    continue;
                }
                let outcome = sync(&engine, &mut state, &keys, &metrics, recorder.as_ref(), stop_rx.clone(), cfg.sync_timeout).await;
                release_free_memory();
                for (key, ok) in outcome {
                    if ok { queue.succeeded(&key); } else {
                        let delay = queue.failed(key.clone(), Instant::now());
                        tracing::info!(key = ?key, retry_in = ?delay, "sync failed; backing off");
                    }
                }
                for verb in [Verb::Patch, Verb::Create, Verb::Delete] {
                    let total = engine.writes.get(verb);
                    let seen = writes_seen.entry(verb.as_str()).or_insert(0);
                    metrics.add_api_writes(verb.as_str(), total - *seen);
                    *seen = total;
                }
                let kinds = state.expected.iter().map(|e| (e.api_version.as_str(), e.key.kind.as_str()));
                owned.set(&engine.resolved_kinds(kinds).await);
                let _ = selectors_tx.send(localservice_selectors(state.tree.as_deref()));
                ready.store(true, Ordering::Relaxed);
                write_status(&cfg, &mut state, &metrics);
            }
            _ = resync.tick() => {
                // The directory is re-read too: a safety net for missed watch events.
                let _ = rescan_tx.try_send(());
                queue.push(Key::Full, Instant::now());
            }
            _ = refresh.tick() => {
                if state.health_dirty {
                    refresh_health(&engine, &mut state, &metrics, cfg.ready_timeout).await;
                    write_status(&cfg, &mut state, &metrics);
                } else if state.status_failed {
                    write_status(&cfg, &mut state, &metrics);
                }
            }
            Ok(()) = active_rx.changed() => {
                let now_active = *active_rx.borrow_and_update();
                if now_active && !state.active {
                    tracing::info!("became leader: syncing");
                    queue.push(Key::Full, Instant::now());
                } else if !now_active && state.active {
                    tracing::info!("lost leadership: standing by");
                }
                state.active = now_active;
                write_status(&cfg, &mut state, &metrics);
            }
        }
    }
    tracing::info!("shutting down");
    // The final status reflects every change already reported, not a stale copy.
    while let Ok(ev) = ev_rx.try_recv() {
        on_event(&mut state, ev);
    }
    state.health_dirty = true;
    refresh_health(&engine, &mut state, &metrics, cfg.ready_timeout).await;
    write_status(&cfg, &mut state, &metrics);
    Ok(())
}

/// Starts the source task; returns the source's display name.
fn start_source(
    cfg: SourceConfig,
    tx: mpsc::Sender<SourceUpdate>,
    mut rescan: mpsc::Receiver<()>,
    mut hook: mpsc::Receiver<()>,
    mut stop: tokio_watch::Receiver<bool>,
) -> Result<String, DaemonError> {
    match cfg {
        SourceConfig::Dir(root) => {
            let (watch, mut changes) = source::dir::watch(&root, Duration::from_millis(200))?;
            let name = format!("dir:{}", root.display());
            tokio::spawn(async move {
                let _watch = watch;
                let mut last: Option<String> = None;
                loop {
                    let update = match source::dir::read(&root) {
                        Ok((id, files)) => (last.as_ref() != Some(&id)).then(|| {
                            last = Some(id.clone());
                            SourceUpdate::Revision { id, files }
                        }),
                        Err(crate::spec::LoadError::Invalid(errors)) => {
                            last = None;
                            Some(SourceUpdate::Failed {
                                message: errors.to_string(),
                            })
                        }
                        Err(e) => {
                            last = None;
                            Some(SourceUpdate::Failed {
                                message: e.to_string(),
                            })
                        }
                    };
                    if let Some(u) = update
                        && tx.send(u).await.is_err()
                    {
                        return;
                    }
                    tokio::select! {
                        Some(()) = changes.recv() => {}
                        Some(()) = rescan.recv() => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            });
            Ok(name)
        }
        SourceConfig::Git { config, interval } => {
            let source = Arc::new(source::git::GitSource::open(config)?);
            let name = source.display_url();
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(interval);
                let mut last: Option<String> = None;
                loop {
                    tokio::select! {
                        _ = ticker.tick() => {}
                        Some(()) = hook.recv() => tracing::info!("fetch requested by the git hook"),
                        Some(()) = rescan.recv() => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                    let update = match source::git::fetch(source.clone()).await {
                        Ok(rev) => (last.as_ref() != Some(&rev.commit)).then(|| {
                            last = Some(rev.commit.clone());
                            SourceUpdate::Revision {
                                id: rev.commit,
                                files: rev.files,
                            }
                        }),
                        Err(e) => {
                            // The next good fetch is reported even if its commit is the
                            // same, so the error it replaces is cleared.
                            last = None;
                            Some(SourceUpdate::Failed {
                                message: e.to_string(),
                            })
                        }
                    };
                    if let Some(u) = update
                        && tx.send(u).await.is_err()
                    {
                        return;
                    }
                }
            });
            Ok(name)
        }
    }
}

/// Takes a new revision: valid → it becomes current, and the keys to sync it are returned
/// (the specs it changed, or the whole tree); invalid → its errors are reported, the last
/// good revision stays in force, and nothing is returned.
fn on_source(
    state: &mut State,
    update: SourceUpdate,
    metrics: &Metrics,
    policy: &crate::spec::Policy,
) -> Vec<Key> {
    match update {
        SourceUpdate::Failed { message } => {
            metrics.source_failed();
            tracing::warn!(error = %message, "source error; the last good revision stays in force");
            state.errors = vec![status::SourceError {
                file: None,
                line: None,
                column: None,
                message,
            }];
            Vec::new()
        }
        SourceUpdate::Revision { id, files } => {
            state.revision_seen = Some(id.clone());
            state.seen_at = Some(Instant::now());
            match crate::spec::parse_files_with(&files, policy) {
                Ok(tree) => {
                    tracing::info!(revision = %id, specs = tree.specs.len(), "new revision");
                    state.errors.clear();
                    // Only what changed is synced when the tree before this one was
                    // applied (or is being applied spec by spec): the other specs'
                    // objects are as last applied, and drift on them is a watch's to
                    // report. Otherwise (the first revision, or one whose sync failed
                    // outright) the whole tree.
                    let incremental = state.tree.is_some()
                        && state.revision_applied.is_some()
                        && (state.pending.is_some()
                            || state.revision_applied == state.revision_current);
                    let keys = match state.tree.as_deref().filter(|_| incremental) {
                        Some(old) => {
                            let changed = changed_specs(old, &tree);
                            let pending = state.pending.get_or_insert_with(BTreeSet::new);
                            pending.extend(changed.iter().cloned());
                            changed.into_iter().map(Key::Spec).collect()
                        }
                        None => {
                            state.pending = None;
                            vec![Key::Full]
                        }
                    };
                    state.tree = Some(Arc::new(tree));
                    state.render_dirty = true;
                    state.revision_current = Some(id);
                    state.latency_observed = false;
                    if state.pending.as_ref().is_some_and(BTreeSet::is_empty) {
                        // Nothing a spec says changed (a comment, a file moved).
                        state.pending = None;
                        mark_applied(state, metrics);
                    }
                    keys
                }
                Err(errors) => {
                    tracing::warn!(revision = %id, errors = errors.0.len(), "invalid revision; nothing applied");
                    state.errors = errors
                        .0
                        .iter()
                        .map(|e| status::SourceError {
                            file: Some(e.at.file.clone()),
                            line: Some(e.at.line),
                            column: Some(e.at.column),
                            message: e.message.clone(),
                        })
                        .collect();
                    metrics.sync_finished(
                        "invalid",
                        Duration::ZERO,
                        Timestamp::now().as_millisecond() as f64 / 1000.0,
                    );
                    Vec::new()
                }
            }
        }
    }
}

/// The specs `new` adds, removes or changes relative to `old`.
fn changed_specs(old: &SpecTree, new: &SpecTree) -> BTreeSet<SpecId> {
    let before: HashMap<&SpecId, &crate::spec::Spec> =
        old.specs.iter().map(|s| (&s.id, s)).collect();
    let after: HashMap<&SpecId, &crate::spec::Spec> =
        new.specs.iter().map(|s| (&s.id, s)).collect();
    let mut out: BTreeSet<SpecId> = BTreeSet::new();
    for (id, spec) in &after {
        if before.get(id) != Some(spec) {
            out.insert((*id).clone());
        }
    }
    out.extend(
        before
            .keys()
            .filter(|id| !after.contains_key(*id))
            .map(|id| (*id).clone()),
    );
    out
}

/// The current revision is applied from now on.
fn mark_applied(state: &mut State, metrics: &Metrics) {
    if state.revision_applied != state.revision_current {
        state.revision_applied = state.revision_current.clone();
        state.applied_at = Some(Instant::now());
        if let Some(rev) = &state.revision_applied {
            metrics.set_revision(rev);
        }
    }
}

/// Folds a watch event into the state; returns a key to sync when it is drift or a
/// node change that matters.
fn on_event(state: &mut State, ev: watch::Event) -> Option<Key> {
    match ev {
        watch::Event::Cluster(error) => {
            state.cluster_error = error;
            // Written with the next refresh.
            state.health_dirty = true;
            None
        }
        watch::Event::Nodes(nodes) => {
            if state.nodes != nodes {
                state.render_dirty = true;
                state.health_dirty = true;
            }
            state.nodes = nodes;
            state.nodes_known = true;
            let has_local = state.tree.as_ref().is_some_and(|t| {
                t.specs
                    .iter()
                    .any(|s| matches!(s.body, SpecBody::LocalService(_)))
            });
            has_local.then_some(Key::Full)
        }
        watch::Event::Object(key, live) => {
            state.health_dirty = true;
            if key.group.is_empty() && key.kind == "Endpoints" {
                let k = (key.namespace.clone(), key.name.clone());
                match live {
                    Some(w) => state.live.endpoints.insert(k, w.value),
                    None => state.live.endpoints.remove(&k),
                };
                return None;
            }
            let recorded = state.recorded.get(&key).cloned();
            let drift = match (&live, &recorded) {
                (None, Some(_)) => true,
                (Some(w), Some((_, fields))) => &w.fields != fields,
                _ => false,
            };
            let spec = recorded
                .map(|(s, _)| s)
                .or_else(|| live.as_ref().and_then(|w| w.spec.clone()));
            match live {
                Some(w) => state.live.objects.insert(key.clone(), w.value),
                None => state.live.objects.remove(&key),
            };
            if drift {
                tracing::info!(object = %key, "drift detected");
            }
            drift.then_some(spec.map(Key::Spec).unwrap_or(Key::Full))
        }
    }
}

/// Runs the due keys as one sync; returns each key's success.
async fn sync(
    engine: &Engine,
    state: &mut State,
    keys: &[Key],
    metrics: &Metrics,
    recorder: Option<&events::Events>,
    mut stop: tokio_watch::Receiver<bool>,
    sync_timeout: Duration,
) -> Vec<(Key, bool)> {
    let Some(tree) = state.tree.clone() else {
        return Vec::new();
    };
    let full = keys.contains(&Key::Full);
    let facts = render::Facts {
        instance: engine.opts.instance.clone(),
        nodes: state.nodes.clone(),
    };
    let specs: BTreeSet<SpecId> = keys
        .iter()
        .filter_map(|k| match k {
            Key::Spec(s) => Some(s.clone()),
            Key::Full => None,
        })
        .collect();
    // A whole sync renders every object; a sync of some specs keeps only theirs. When the
    // tree or the nodes changed, the whole tree is rendered (one spec at a time) to check
    // it still renders, and the specs' objects are taken from that pass.
    let rendered = if full {
        render::render(&tree, &facts)
    } else {
        let mut subset = Vec::new();
        let mut keep = |spec: &crate::spec::Spec, objects: Vec<Object>| {
            if specs.contains(&spec.id) {
                subset.extend(objects);
            }
        };
        let done = if state.render_dirty {
            rerender(&engine.opts.instance, state, &mut keep)
        } else {
            render::render_each(
                tree.specs.iter().filter(|s| specs.contains(&s.id)),
                &facts,
                &mut keep,
            )
        };
        done.map(|()| {
            subset.sort_by_key(Object::apply_phase);
            subset
        })
    };
    let objects = match rendered {
        Ok(o) => o,
        Err(e) => {
            // Nothing applies and nothing is pruned; the status says why (a node joining
            // can make two localservices' per-node Service names collide).
            tracing::error!(error = %e, "render failed");
            let message = format!("rendering the specs: {e}");
            return failed_sync(state, metrics, keys, Duration::ZERO, message);
        }
    };
    let adopt = tree.adopt_specs();
    let started = Instant::now();
    let run = async {
        if full {
            engine.sync(&objects, &adopt).await
        } else {
            engine.sync_subset(&objects, &adopt, &specs).await
        }
    };
    // On shutdown an in-flight sync gets a few seconds to finish, then is abandoned
    // (the inventory's record-before-apply keeps that safe).
    let abandon = async {
        let _ = stop.wait_for(|s| *s).await;
        tokio::time::sleep(Duration::from_secs(7)).await;
    };
    // Stopping a sync midway is as safe as a crash (record-before-apply); a hung one
    // would leave the status saying all is well.
    let result = tokio::select! {
        r = run => Some(r.map_err(|e| e.to_string())),
        _ = abandon => None,
        _ = tokio::time::sleep(sync_timeout) => Some(Err(format!(
            "the sync did not finish within {}: the Kubernetes API is slow or unreachable; \
             stopped, and retried with backoff",
            humantime::format_duration(sync_timeout)
        ))),
    };
    let elapsed = started.elapsed();
    let now_ts = Timestamp::now();
    let unix = now_ts.as_millisecond() as f64 / 1000.0;
    let Some(result) = result else {
        tracing::warn!("in-flight sync abandoned at shutdown");
        return Vec::new();
    };
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "sync failed");
            return failed_sync(state, metrics, keys, elapsed, e);
        }
    };

    if let Some(recorder) = recorder {
        recorder.publish(&report, state.revision_current.as_deref());
    }
    let mut failed_specs: BTreeSet<SpecId> = BTreeSet::new();
    let (mut applied, mut unchanged, mut failed) = (0u64, 0u64, 0u64);
    // The live objects move from the report into the cache (no copy of every object).
    let mut report = report;
    for o in report.objects.iter_mut() {
        match &o.action {
            Action::Unchanged => unchanged += 1,
            a if a.is_write() => applied += 1,
            _ => {
                failed += 1;
                failed_specs.insert(o.spec.clone());
            }
        }
        state
            .actions
            .insert(o.key.clone(), o.action.label().to_string());
        if !o.action.is_error()
            && let Some(fields) = o.fields.clone()
        {
            state
                .recorded
                .insert(o.key.clone(), (o.spec.clone(), fields));
            // The watches are the source of live state; what a write returned only
            // stands in until the watch reports the object, never over a newer event.
            if let Some(live) = o.live.take() {
                state.live.objects.entry(o.key.clone()).or_insert(live);
            }
        }
    }
    if !full {
        // Writes for specs a new revision changed are not corrections of drift.
        let drift_writes = report
            .objects
            .iter()
            .filter(|o| o.action.is_write())
            .filter(|o| !state.pending.as_ref().is_some_and(|p| p.contains(&o.spec)))
            .count();
        metrics.add_drift_corrections(drift_writes as u64);
    }
    let pruned = report.prune.pruned() as u64;
    metrics.add_pruned(pruned);
    for p in &report.prune.objects {
        state.recorded.remove(&p.key);
        state.live.objects.remove(&p.key);
    }
    let result_label = if report.prune.refused.is_some() {
        "refused"
    } else if report.ok() {
        "success"
    } else {
        "failed"
    };
    metrics.sync_finished(result_label, elapsed, unix);
    state.last_sync = Some(status::LastSync {
        time: now_ts.to_string(),
        result: result_label.into(),
        duration_seconds: elapsed.as_secs_f64(),
        message: report.prune.refused.clone(),
        applied,
        unchanged,
        pruned,
        failed,
    });
    if full {
        state.expected = health::expected(&objects);
        state.render_dirty = false;
        state.pending = None;
        mark_applied(state, metrics);
    } else if let Some(pending) = state.pending.as_mut() {
        // Like a whole sync, a spec counts as applied when its sync ran, failures and
        // all (they are in the status and retried with backoff).
        pending.retain(|id| !specs.contains(id));
        if pending.is_empty() {
            state.pending = None;
            mark_applied(state, metrics);
        }
    }
    state.health_dirty = true;
    let refused = report.prune.refused.is_some();
    let mut outcome: Vec<(Key, bool)> = keys
        .iter()
        .map(|k| {
            let ok = match k {
                Key::Full => !refused && failed_specs.is_empty(),
                // A refused prune is retried by whole syncs (below), which also retry
                // these specs' failed objects: retried one by one with their own backoff,
                // the specs a revision removed would each prune a share small enough
                // to pass.
                Key::Spec(s) => refused || !failed_specs.contains(s),
            };
            (k.clone(), ok)
        })
        .collect();
    if refused && !full {
        outcome.push((Key::Full, false));
    }
    outcome
}

/// Brings `state.expected` up to the current tree and nodes (one spec rendered at a time,
/// each spec's objects then handed to `keep`); an error when the tree does not render.
/// Rendered again only when one of them changed: a render of every object each second
/// was the daemon's largest allocation.
fn rerender(
    instance: &str,
    state: &mut State,
    mut keep: impl FnMut(&crate::spec::Spec, Vec<Object>),
) -> Result<(), render::RenderError> {
    if !state.render_dirty {
        return Ok(());
    }
    let facts = render::Facts {
        instance: instance.to_string(),
        nodes: state.nodes.clone(),
    };
    let Some(tree) = &state.tree else {
        return Ok(());
    };
    let mut expected = Vec::with_capacity(state.expected.len());
    render::render_each(&tree.specs, &facts, |spec, objects| {
        expected.extend(objects.iter().map(health::Expected::of));
        keep(spec, objects);
    })?;
    state.expected = expected;
    state.render_dirty = false;
    Ok(())
}

async fn refresh_health(
    engine: &Engine,
    state: &mut State,
    metrics: &Metrics,
    ready_timeout: Duration,
) {
    // Without the node list, localservices would look like they have nothing to run.
    if !state.nodes_known {
        return;
    }
    state.health_dirty = false;
    // Readiness is judged against what the current tree renders to, so an object not
    // applied yet reads as missing (never as "nothing to wait for").
    if let Err(e) = rerender(&engine.opts.instance, state, |_, _| {}) {
        tracing::warn!(error = %e, "render failed");
        return;
    }
    let Some(tree) = &state.tree else { return };
    // Pods are read only for Deployments that are not ready: their reasons are the news.
    // The cache is moved out for this and put back below, not cloned: a deep copy of
    // every live object each second was the daemon's largest allocation.
    let mut observed = std::mem::take(&mut state.live);
    observed.pods.clear();
    let not_ready: Vec<&ObjKey> = state
        .expected
        .iter()
        .filter(|o| o.key.kind == "Deployment")
        .map(|o| &o.key)
        .filter(|key| {
            observed.objects.get(*key).is_some_and(|d| {
                health::kstatus::compute(Some(&d.value()), Timestamp::now()).status
                    != Status::Current
            })
        })
        .collect();
    // A few lists at a time: while hundreds of Deployments roll out, one after another
    // they held up the loop for seconds.
    let failing: Vec<(ObjKey, Vec<Value>)> = futures::stream::iter(not_ready)
        .map(|key| {
            let observed = &observed;
            async move {
                let mut pods = engine.pods_of(key, observed).await.unwrap_or_default();
                // Readiness reads only the failing ones. While hundreds of Deployments
                // roll out at once, keeping every starting Pod whole took 13 MiB at
                // 1,000 specs.
                pods.retain(|p| {
                    health::kstatus::compute(Some(p), Timestamp::now()).status == Status::Failed
                });
                (key.clone(), pods)
            }
        })
        .buffer_unordered(PODS_LISTS_AT_ONCE)
        .filter(|(_, pods)| futures::future::ready(!pods.is_empty()))
        .collect()
        .await;
    for (key, pods) in failing {
        observed
            .pods
            .insert(key, pods.into_iter().map(health::readiness_view).collect());
    }
    let mut healths =
        health::tree_health(&tree.specs, &state.expected, &observed, Timestamp::now());
    observed.pods.clear();
    state.live = observed;
    let overdue = state
        .applied_at
        .is_some_and(|t| t.elapsed() > ready_timeout);
    for h in healths.iter_mut() {
        if overdue && h.status == Status::InProgress {
            h.status = Status::Failed;
            h.message = format!(
                "not ready {}s after the revision was applied: {}",
                ready_timeout.as_secs(),
                h.message
            );
            if h.reason.is_none() {
                h.reason = Some("ReadyTimeout".into());
            }
        }
    }
    // Metrics follow the specs: removed specs lose their series.
    let before: BTreeSet<String> = state.health.iter().map(|h| h.id.clone()).collect();
    let by_id: HashMap<&str, &SpecHealth> = healths.iter().map(|h| (h.id.as_str(), h)).collect();
    for spec in &tree.specs {
        if let Some(h) = by_id.get(spec.id.to_string().as_str()) {
            metrics.set_spec_ready(
                spec.id.kind.as_str(),
                &spec.id.namespace,
                &spec.id.name,
                h.ready,
            );
            if let health::Figures::ElasticWeb { real_qps, .. } = &h.figures {
                metrics.set_real_qps(&spec.id.namespace, &spec.id.name, *real_qps as f64);
            }
        }
    }
    for gone in before.difference(&healths.iter().map(|h| h.id.clone()).collect()) {
        let mut parts = gone.splitn(3, '/');
        if let (Some(kind), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) {
            metrics.forget_spec(kind, ns, name);
            if kind == "elasticweb" {
                metrics.forget_real_qps(ns, name);
            }
        }
    }
    if !state.latency_observed
        && state.revision_applied == state.revision_current
        && !healths.is_empty()
        && healths.iter().all(|h| h.ready)
        && let Some(seen) = state.seen_at
    {
        metrics.observe_change_to_ready(seen.elapsed().as_secs_f64());
        state.latency_observed = true;
    }
    state.health = healths;
}

fn localservice_selectors(tree: Option<&SpecTree>) -> labeller::Selectors {
    let mut out = labeller::Selectors::new();
    for s in tree.map(|t| t.specs.as_slice()).unwrap_or_default() {
        if let SpecBody::LocalService(l) = &s.body {
            out.entry(s.id.namespace.clone())
                .or_default()
                .push(l.selector.clone());
        }
    }
    out
}

fn status_of(state: &State) -> status::StatusFile {
    // Lookups by id and by object reference, built once: searching the lists for every
    // spec and object was quadratic (seconds per status write at a few thousand specs).
    let health_by_id: HashMap<&str, &SpecHealth> =
        state.health.iter().map(|h| (h.id.as_str(), h)).collect();
    let action_by_ref: HashMap<&str, &String> = state
        .expected
        .iter()
        .filter_map(|e| Some((e.display.as_str(), state.actions.get(&e.key)?)))
        .collect();
    let specs = state
        .tree
        .as_ref()
        .map(|t| {
            t.specs
                .iter()
                .map(|spec| {
                    let id = spec.id.to_string();
                    let h = health_by_id.get(id.as_str()).copied();
                    status::SpecStatus {
                        id: id.clone(),
                        kind: spec.id.kind.as_str().to_string(),
                        namespace: spec.id.namespace.clone(),
                        name: spec.id.name.clone(),
                        file: spec.at.file.clone(),
                        line: spec.at.line,
                        ready: h.is_some_and(|h| h.ready),
                        status: h
                            .map(|h| format!("{:?}", h.status))
                            .unwrap_or_else(|| "Unknown".into()),
                        reason: h.and_then(|h| h.reason.clone()),
                        message: h
                            .map(|h| h.message.clone())
                            .unwrap_or_else(|| "not synced yet".into()),
                        figures: h
                            .and_then(|h| serde_json::to_value(&h.figures).ok())
                            .unwrap_or(Value::Null),
                        objects: h
                            .map(|h| {
                                h.objects
                                    .iter()
                                    .map(|o| status::ObjectState {
                                        object: o.object.clone(),
                                        status: format!("{:?}", o.status.status),
                                        reason: o.status.reason.clone(),
                                        message: o.status.message.clone(),
                                        action: action_by_ref
                                            .get(o.object.as_str())
                                            .map(|a| (*a).clone()),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    status::StatusFile {
        version: 1,
        source: state.source_name.clone(),
        revision_seen: state.revision_seen.clone(),
        revision_applied: state.revision_applied.clone(),
        last_sync: state.last_sync.clone(),
        errors: state
            .errors
            .iter()
            .cloned()
            .chain(state.cluster_error.iter().map(|e| status::SourceError {
                file: None,
                line: None,
                column: None,
                message: format!("cannot reach the Kubernetes API: {e}"),
            }))
            .collect(),
        specs,
        leader: Some(state.active),
    }
}

fn write_status(cfg: &Config, state: &mut State, metrics: &Metrics) {
    let Some(path) = &cfg.status_file else { return };
    match status::write_atomic(path, &status_of(state)) {
        Ok(_) => {
            if state.status_failed {
                tracing::info!(path = %path.display(), "status file written again");
            }
            state.status_failed = false;
        }
        Err(e) => {
            metrics.status_write_failed();
            // Once per outage, not every second.
            if !state.status_failed {
                tracing::warn!(path = %path.display(), error = %e, "could not write the status file; retrying every second");
            }
            state.status_failed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_files;

    fn tree(files: &[(&str, &str)]) -> SpecTree {
        let files: Vec<SourceFile> = files
            .iter()
            .map(|(path, text)| SourceFile {
                path: path.to_string(),
                contents: text.as_bytes().to_vec(),
            })
            .collect();
        parse_files(&files).expect("valid specs")
    }

    fn web(name: &str, qps: u32) -> String {
        format!("[elasticweb.{name}]\nimage = \"nginx\"\nsingle-pod-qps = 100\ntotal-qps = {qps}\n")
    }

    fn ids(set: &BTreeSet<SpecId>) -> Vec<String> {
        set.iter().map(SpecId::to_string).collect()
    }

    #[test]
    fn changed_specs_are_the_added_removed_and_edited_ones() {
        let old = tree(&[
            (
                "a.toml",
                &format!("namespace = \"n\"\n{}{}", web("a", 100), web("b", 100)),
            ),
            ("c.toml", &format!("namespace = \"n\"\n{}", web("c", 100))),
        ]);
        assert!(changed_specs(&old, &old).is_empty());
        let new = tree(&[
            (
                "a.toml",
                &format!("namespace = \"n\"\n{}{}", web("a", 300), web("b", 100)),
            ),
            ("d.toml", &format!("namespace = \"n\"\n{}", web("d", 100))),
        ]);
        assert_eq!(
            ids(&changed_specs(&old, &new)),
            ["elasticweb/n/a", "elasticweb/n/c", "elasticweb/n/d"]
        );
    }

    #[test]
    fn a_spec_that_moved_in_its_file_counts_as_changed() {
        // Its position is part of what the status reports for it.
        let old = tree(&[("a.toml", &format!("namespace = \"n\"\n{}", web("a", 100)))]);
        let new = tree(&[("a.toml", &format!("namespace = \"n\"\n\n{}", web("a", 100)))]);
        assert_eq!(ids(&changed_specs(&old, &new)), ["elasticweb/n/a"]);
    }
}
