//! The JSON API, v1, on the daemon's HTTP listener: the status document, one spec (with a
//! long-poll until it is ready), a stream of status changes (Server-Sent Events), and the
//! controls (sync now, suspend, resume) behind a bearer token.
//!
//! Reads are open on the listener, like `/metrics`. The status is shared through a
//! `watch` channel holding only the newest document, so a client that reads slowly or
//! not at all skips versions instead of holding the daemon back or queueing memory.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

mod control;
mod published;
mod view;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};

use super::delta::Delta;
pub(crate) use control::{Control, NoSync, Suspender};
pub(crate) use published::Published;
pub(crate) use view::Caller;

/// Longest a long-poll may wait.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(300);
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// Event streams open at once; more are refused (503) rather than each holding a task.
const MAX_STREAMS: usize = 64;
/// Largest control request body (a suspension's reason).
pub(crate) const CONTROL_BODY_LIMIT: usize = 16 * 1024;

/// Why the object view has no view to show. What cannot be read of the object itself
/// (its live copy, its diff) is said inside the view, not as this.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("the daemon has no valid revision of the specs yet")]
    NoTree,
    #[error("there is no spec {0} in the current revision")]
    NoSpec(String),
    #[error("rendering spec {spec}: {source}")]
    Render {
        spec: String,
        source: crate::render::RenderError,
    },
}

/// Reads one object of a spec from the cluster for the web UI's object view: live and
/// desired manifests, their diff, what it owns and the events (see `daemon::inspect`).
pub trait Inspect: Send + Sync {
    fn object<'a>(
        &'a self,
        spec: &'a str,
        object: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Value, InspectError>>;
}

pub struct ApiState {
    pub status: watch::Receiver<Arc<Published>>,
    /// The object view's reads; none without a cluster (tests of the API alone).
    pub inspect: Option<Arc<dyn Inspect>>,
    /// The drift ledger and sync history as JSON (`{"drifts": [...], "syncs": [...]}`),
    /// as the daemon last wrote them.
    pub drift: Option<watch::Receiver<Arc<String>>>,
    pub control: mpsc::Sender<Control>,
    /// Where the listener's audit records go for the history (`report::audit`), apart
    /// from the controls; none: the log lines alone.
    pub audit: crate::report::audit::History,
    /// The bearer token mutating calls need; `None` refuses them all (403) unless
    /// client certificates are verified.
    pub token: Option<Vec<u8>>,
    /// The listener verifies client certificates: a request on a connection that
    /// presented one may use the controls.
    pub client_certificates: bool,
    pub suspender: Arc<dyn Suspender>,
    /// With sign-in: the cluster's RBAC, which decides what a person sees and steers.
    pub rbac: Option<Arc<crate::report::signin::Rbac>>,
    streams: Arc<Semaphore>,
}

impl ApiState {
    pub fn new(
        status: watch::Receiver<Arc<Published>>,
        control: mpsc::Sender<Control>,
        token: Option<Vec<u8>>,
        suspender: Arc<dyn Suspender>,
    ) -> ApiState {
        ApiState {
            status,
            inspect: None,
            drift: None,
            control,
            audit: None,
            token,
            client_certificates: false,
            suspender,
            rbac: None,
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
        }
    }
}

pub(crate) fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/api/v1/status", get(status))
        .route("/api/v1/events", get(events))
        .route("/api/v1/sync", post(control::sync))
        .route("/api/v1/specs", get(specs))
        .route("/api/v1/object", get(object))
        .route("/api/v1/drift", get(drift))
        .route("/api/v1/syncs", get(syncs))
        .route("/api/v1/controls", get(controls))
        .route("/api/v1/specs/{*id}", get(spec).post(control::control_spec))
        // Anything else under /api answers in JSON too, not with an empty 404.
        .route("/api", axum::routing::any(unknown))
        .route("/api/{*rest}", axum::routing::any(unknown))
        .layer(axum::extract::DefaultBodyLimit::max(CONTROL_BODY_LIMIT))
        .with_state(state)
}

/// The ids of the specs `caller` may see; none when they see every spec.
pub(crate) async fn seen_specs(
    api: &ApiState,
    caller: &Caller,
) -> Option<std::collections::HashSet<String>> {
    match view::of(api, caller).await {
        view::View::All => None,
        view::View::Only { specs, .. } => Some(specs),
    }
}

/// `/metrics` as a person may see it: a spec's samples only for specs they may see.
pub(crate) async fn seen_samples(api: &ApiState, caller: &Caller, page: String) -> String {
    match view::of(api, caller).await {
        view::View::All => page,
        view::View::Only { names, .. } => super::metrics::only_specs(&page, &names),
    }
}

fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (code, axum::Json(json!({"error": message.into()}))).into_response()
}

fn json_text(text: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

async fn specs(State(api): State<Arc<ApiState>>, caller: Caller) -> Response {
    let view = view::of(&api, &caller).await;
    let current = api.status.borrow().clone();
    let mut specs = current.specs();
    specs.retain(|s| s["id"].as_str().is_some_and(|id| view.sees(id)));
    json_text(json!({ "specs": specs }).to_string())
}

async fn unknown(uri: axum::http::Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no such API route: {}; the API is /api/v1/status, /api/v1/events, /api/v1/sync, /api/v1/specs[/<id>], /api/v1/object?spec=<id>&object=<object>, /api/v1/drift and /api/v1/syncs",
            uri.path()
        ),
    )
}

/// The drift ledger: every drift recorded, oldest first (see `daemon::ledger`).
async fn drift(State(api): State<Arc<ApiState>>, caller: Caller) -> Response {
    ledger_part(&api, "drifts", &caller).await
}

/// The history of syncs, oldest first, kept beside the drift ledger.
async fn syncs(State(api): State<Arc<ApiState>>, caller: Caller) -> Response {
    ledger_part(&api, "syncs", &caller).await
}

/// The history of audited controls, oldest first, kept beside the drift ledger.
async fn controls(State(api): State<Arc<ApiState>>, caller: Caller) -> Response {
    ledger_part(&api, "controls", &caller).await
}

async fn ledger_part(api: &ApiState, part: &str, caller: &Caller) -> Response {
    let text = api.drift.as_ref().map(|d| d.borrow().clone());
    let doc: Value = text
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let list = match &doc[part] {
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    let list = view::of(api, caller).await.ledger(part, list);
    json_text(json!({ part: list }).to_string())
}

#[derive(Deserialize)]
struct ObjectQuery {
    spec: String,
    object: String,
}

/// One object of a spec, read from the cluster now (`Inspect`). Only an object the
/// status lists for that spec: an open read must not become a way to read anything the
/// daemon's identity can.
async fn object(
    State(api): State<Arc<ApiState>>,
    Query(q): Query<ObjectQuery>,
    caller: Caller,
) -> Response {
    let seen = view::of(&api, &caller).await.sees(&q.spec);
    let Some(spec) = api.status.borrow().clone().spec(&q.spec).filter(|_| seen) else {
        return error(StatusCode::NOT_FOUND, format!("no spec {}", q.spec));
    };
    let listed = spec["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| o["object"] == q.object.as_str())
        || spec["drifted"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o == q.object.as_str());
    if !listed {
        return error(
            StatusCode::NOT_FOUND,
            format!("spec {} has no object {}", q.spec, q.object),
        );
    }
    let Some(inspect) = &api.inspect else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "this daemon cannot read objects for the object view",
        );
    };
    match inspect.object(&q.spec, &q.object).await {
        Ok(view) => json_text(view.to_string()),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn status(State(api): State<Arc<ApiState>>, caller: Caller) -> Response {
    let view = view::of(&api, &caller).await;
    let current = api.status.borrow().clone();
    json_text(view.status(current.json()))
}

#[derive(Deserialize)]
struct WaitQuery {
    wait: Option<String>,
    timeout: Option<String>,
    /// Wait for this revision (a commit, or its first 7+ hex digits) rather than the one
    /// a fresh read of the source finds.
    revision: Option<String>,
}

/// Whether a spec's `revision` is the one asked about: the same, or a commit it begins
/// with (abbreviated as git abbreviates, 7 digits at least).
fn same_revision(spec: &str, asked: &str) -> bool {
    spec == asked || (asked.len() >= 7 && spec.starts_with(asked))
}

/// Has the daemon read its source now and says which revision it has seen since; `None`
/// when it cannot say (busy, stopping, or no valid revision yet).
async fn read_source(api: &ApiState, limit: Duration) -> Option<String> {
    let (tx, rx) = oneshot::channel();
    api.control.try_send(Control::Read { done: tx }).ok()?;
    tokio::time::timeout(limit, rx).await.ok()?.ok()?
}

fn entry(spec: &Value) -> Response {
    json_text(spec.to_string())
}

async fn spec(
    State(api): State<Arc<ApiState>>,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
    caller: Caller,
) -> Response {
    // Not seen is not there: whether a spec exists is itself not said.
    if !view::of(&api, &caller).await.sees(&id) {
        return error(StatusCode::NOT_FOUND, format!("no spec {id}"));
    }
    let wait = match q.wait.as_deref() {
        None => None,
        Some("ready") => {
            let limit = match q.timeout.as_deref().map(humantime::parse_duration) {
                None => DEFAULT_WAIT,
                Some(Ok(d)) if d <= MAX_WAIT => d,
                Some(Ok(_)) => {
                    return error(StatusCode::BAD_REQUEST, "timeout is at most 5m");
                }
                Some(Err(e)) => {
                    return error(StatusCode::BAD_REQUEST, format!("timeout: {e}"));
                }
            };
            Some(limit)
        }
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("wait takes `ready`, not `{other}`"),
            );
        }
    };
    let mut rx = api.status.clone();
    let Some(limit) = wait else {
        let current = rx.borrow().clone();
        return match current.spec(&id) {
            Some(s) => entry(&s),
            None => error(StatusCode::NOT_FOUND, format!("no spec {id}")),
        };
    };
    let deadline = tokio::time::Instant::now() + limit;
    // Readiness of the revision asked about: the one named, or what the source holds now
    // (a spec written a moment ago, then waited for at once, is waited for in its new
    // revision, never answered from the old one's Pod).
    let target = match q.revision {
        Some(r) => Some(r),
        None => read_source(&api, limit).await,
    };
    loop {
        let current = rx.borrow_and_update().clone();
        // A spec just written to the source is not in the status until the daemon has
        // read that revision: it is waited for too, and unknown only when time is up.
        let Some(s) = current.spec(&id) else {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return error(StatusCode::NOT_FOUND, format!("no spec {id}")),
            }
        };
        let in_target = match (&target, s["revision"].as_str()) {
            (None, _) => true,
            (Some(want), Some(have)) => same_revision(have, want),
            (Some(_), None) => false,
        };
        if s["ready"] == true && in_target {
            return entry(&s);
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => continue,
            // Timed out, or the daemon is stopping: the entry as it is.
            _ => {
                let mut response = entry(&s);
                *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
                return response;
            }
        }
    }
}

#[derive(Deserialize)]
struct EventsQuery {
    /// `1`/`true`: the whole document once, then deltas (`delta::Sent`).
    deltas: Option<String>,
}

async fn events(
    State(api): State<Arc<ApiState>>,
    Query(q): Query<EventsQuery>,
    caller: Caller,
) -> Response {
    let Ok(permit) = api.streams.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("at most {MAX_STREAMS} event streams at once"),
        );
    };
    let deltas = matches!(q.deltas.as_deref(), Some("1" | "true"));
    Sse::new(status_stream(api.clone(), caller, permit, deltas))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The current status at once, then each newer one (or, with `deltas`, what changed in
/// it). Only the newest is ever kept, so a client that stops reading costs one shared
/// document (and, with deltas, what it was last sent), not a queue.
fn status_stream(
    api: Arc<ApiState>,
    caller: Caller,
    permit: OwnedSemaphorePermit,
    deltas: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let sent: Option<super::delta::Sent> = None;
    let rx = api.status.clone();
    // A person is sent what they may see of each document (asked of RBAC's kept answers).
    let filtering = api.rbac.is_some()
        && caller
            .as_ref()
            .is_some_and(|axum::Extension(i)| i.person().is_some());
    futures::stream::unfold(
        (rx, permit, sent, true),
        move |(mut rx, permit, mut sent, mut first)| {
            let (api, caller) = (api.clone(), caller.clone());
            async move {
                loop {
                    if !first {
                        rx.changed().await.ok()?;
                    }
                    first = false;
                    let current = rx.borrow_and_update().clone();
                    let seen = match filtering {
                        true => Some(view::of(&api, &caller).await.status(current.json())),
                        false => None,
                    };
                    let text = seen.as_deref().unwrap_or(current.json());
                    if deltas && let Some(s) = sent.as_mut() {
                        match s.delta(text) {
                            Delta::Same => continue,
                            Delta::Changed(delta) => {
                                let event = SseEvent::default().event("delta").data(delta);
                                return Some((Ok(event), (rx, permit, sent, false)));
                            }
                            // Not comparable: sent whole, as the first is.
                            Delta::Whole => {}
                        }
                    }
                    if deltas {
                        let mut primed = super::delta::Sent::default();
                        let _ = primed.delta(text);
                        sent = Some(primed);
                    }
                    let event = SseEvent::default().event("status").data(text);
                    return Some((Ok(event), (rx, permit, sent, false)));
                }
            }
        },
    )
    .boxed()
}
