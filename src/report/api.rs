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

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};

use super::delta::Delta;
use super::status::{LastSync, StatusFile};
use crate::apply::ApplyError;
use crate::apply::suspensions::Suspension;

/// Longest a long-poll may wait.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// Event streams open at once; more are refused (503) rather than each holding a task.
const MAX_STREAMS: usize = 64;
/// Largest control request body (a suspension's reason).
pub const CONTROL_BODY_LIMIT: usize = 16 * 1024;

/// The newest status, as the daemon last wrote it, kept as compact JSON text only: the
/// document as values (a map per spec's figures) was several times its size, held for
/// as long as the daemon runs.
#[derive(Debug, PartialEq, Eq)]
pub struct Published {
    json: String,
}

impl Published {
    pub fn new(doc: &StatusFile) -> Published {
        Published::sized(doc, 0)
    }

    /// `doc`, made in a buffer of about `hint` bytes (the last status's length) and kept
    /// in no more than it needs. Grown by doubling from nothing, a 10,000-spec status
    /// (7 MB) passed through buffers of 8 and 16 MiB at once and was kept in the 16. A
    /// status that outgrows the hint is measured first and made in a buffer of its size:
    /// grown from the hint, the first after a 10,000-spec tree's first sync stood in
    /// 11 MiB of buffers at the daemon's peak (bench/results/2026-11-30-scale-noop-window.md).
    pub fn sized(doc: &impl Serialize, hint: usize) -> Published {
        let mut buf = Vec::with_capacity(hint + hint / 8);
        // Strings, numbers and maps with string keys: serialising fails only when the
        // buffer is full, and serde_json writes UTF-8.
        if serde_json::to_writer(Bounded(&mut buf), doc).is_err() {
            drop(buf);
            let mut length = Length(0);
            let _ = serde_json::to_writer(&mut length, doc);
            buf = Vec::with_capacity(length.0);
            if serde_json::to_writer(&mut buf, doc).is_err() {
                buf.clear();
            }
        }
        let mut json = String::from_utf8(buf).unwrap_or_default();
        json.shrink_to_fit();
        Published { json }
    }

    pub fn json(&self) -> &str {
        &self.json
    }

    /// One spec's entry, by id.
    pub fn spec(&self, id: &str) -> Option<Value> {
        self.specs().into_iter().find(|s| s["id"] == id)
    }

    /// Every spec's entry.
    pub fn specs(&self) -> Vec<Value> {
        #[derive(Deserialize)]
        struct Specs {
            specs: Vec<Value>,
        }
        serde_json::from_str::<Specs>(&self.json)
            .map(|d| d.specs)
            .unwrap_or_default()
    }
}

/// What the API asks of the daemon's loop.
#[derive(Debug)]
pub enum Control {
    /// Fetch the source now and run a whole sync; `done` hears how that sync ended (or
    /// why none ran).
    Sync {
        done: Option<oneshot::Sender<Result<LastSync, NoSync>>>,
    },
    /// The read a `Sync` asked of the source reached the loop (the loop's own message).
    SourceRead {
        done: Option<oneshot::Sender<Result<LastSync, NoSync>>>,
    },
    /// Read the source now (a directory again; git: fetch); `done` hears the revision
    /// the daemon has seen once that read reached it.
    Read {
        done: oneshot::Sender<Option<String>>,
    },
    /// The read a `Read` asked for reached the loop (the loop's own message).
    ReadDone {
        done: oneshot::Sender<Option<String>>,
    },
}

/// Writes into a buffer until its capacity is reached, then refuses: the status did not
/// fit the room its last length gave it.
struct Bounded<'a>(&'a mut Vec<u8>);

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.len() > self.0.capacity() - self.0.len() {
            return Err(std::io::Error::other("the status outgrew its buffer"));
        }
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Counts what is written to it.
struct Length(usize);

impl std::io::Write for Length {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a sync asked for (`POST /api/v1/sync?wait=true`) has no end to tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoSync {
    #[error("the daemon is stopping")]
    Stopping,
    /// It ended without an end the state kept.
    #[error("the sync was abandoned")]
    Abandoned,
    #[error("no valid revision to sync yet")]
    NoRevision,
    #[error("this replica is a standby; the leader syncs")]
    Standby,
}

/// Writes a suspension where every replica reads it (the cluster).
pub trait Suspender: Send + Sync {
    fn set(
        &self,
        id: String,
        suspension: Option<Suspension>,
    ) -> futures::future::BoxFuture<'_, Result<(), ApplyError>>;
}

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
    /// The bearer token mutating calls need; `None` refuses them all (403).
    pub token: Option<Vec<u8>>,
    pub suspender: Arc<dyn Suspender>,
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
            token,
            suspender,
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
        }
    }
}

pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/api/v1/status", get(status))
        .route("/api/v1/events", get(events))
        .route("/api/v1/sync", post(sync))
        .route("/api/v1/specs", get(specs))
        .route("/api/v1/object", get(object))
        .route("/api/v1/drift", get(drift))
        .route("/api/v1/syncs", get(syncs))
        .route("/api/v1/specs/{*id}", get(spec).post(control_spec))
        // Anything else under /api answers in JSON too, not with an empty 404.
        .route("/api", axum::routing::any(unknown))
        .route("/api/{*rest}", axum::routing::any(unknown))
        .layer(axum::extract::DefaultBodyLimit::max(CONTROL_BODY_LIMIT))
        .with_state(state)
}

fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (code, axum::Json(json!({"error": message.into()}))).into_response()
}

fn json_text(text: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

async fn specs(State(api): State<Arc<ApiState>>) -> Response {
    let current = api.status.borrow().clone();
    json_text(json!({ "specs": current.specs() }).to_string())
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
async fn drift(State(api): State<Arc<ApiState>>) -> Response {
    ledger_part(&api, "drifts")
}

/// The history of syncs, oldest first, kept beside the drift ledger.
async fn syncs(State(api): State<Arc<ApiState>>) -> Response {
    ledger_part(&api, "syncs")
}

fn ledger_part(api: &ApiState, part: &str) -> Response {
    let text = api.drift.as_ref().map(|d| d.borrow().clone());
    let doc: Value = text
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let list = match &doc[part] {
        Value::Array(a) => Value::Array(a.clone()),
        _ => Value::Array(Vec::new()),
    };
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
async fn object(State(api): State<Arc<ApiState>>, Query(q): Query<ObjectQuery>) -> Response {
    let Some(spec) = api.status.borrow().clone().spec(&q.spec) else {
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

async fn status(State(api): State<Arc<ApiState>>) -> Response {
    let current = api.status.borrow().clone();
    json_text(current.json().to_string())
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
) -> Response {
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

async fn events(State(api): State<Arc<ApiState>>, Query(q): Query<EventsQuery>) -> Response {
    let Ok(permit) = api.streams.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("at most {MAX_STREAMS} event streams at once"),
        );
    };
    let deltas = matches!(q.deltas.as_deref(), Some("1" | "true"));
    Sse::new(status_stream(api.status.clone(), permit, deltas))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The current status at once, then each newer one (or, with `deltas`, what changed in
/// it). Only the newest is ever kept, so a client that stops reading costs one shared
/// document (and, with deltas, what it was last sent), not a queue.
fn status_stream(
    rx: watch::Receiver<Arc<Published>>,
    permit: OwnedSemaphorePermit,
    deltas: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let sent: Option<super::delta::Sent> = None;
    futures::stream::unfold(
        (rx, permit, sent, true),
        move |(mut rx, permit, mut sent, mut first)| async move {
            loop {
                if !first {
                    rx.changed().await.ok()?;
                }
                first = false;
                let current = rx.borrow_and_update().clone();
                if deltas && let Some(s) = sent.as_mut() {
                    match s.delta(current.json()) {
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
                    let _ = primed.delta(current.json());
                    sent = Some(primed);
                }
                let event = SseEvent::default().event("status").data(current.json());
                return Some((Ok(event), (rx, permit, sent, false)));
            }
        },
    )
    .boxed()
}

/// 403 when no token is configured, 401 for a missing or wrong one.
fn authorize(api: &ApiState, headers: &HeaderMap) -> Result<(), (StatusCode, &'static str)> {
    let Some(token) = &api.token else {
        return Err((
            StatusCode::FORBIDDEN,
            "controls are disabled: start the daemon with --api-token-file FILE and send \
             Authorization: Bearer <token>",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(g) if same(g.as_bytes(), token) => Ok(()),
        Some(_) => Err((StatusCode::UNAUTHORIZED, "wrong token")),
        None => Err((
            StatusCode::UNAUTHORIZED,
            "missing Authorization: Bearer <token>",
        )),
    }
}

/// Compares in constant time, lengths included (both are hashed first).
fn same(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[derive(Deserialize)]
struct SyncQuery {
    wait: Option<bool>,
}

async fn sync(
    State(api): State<Arc<ApiState>>,
    Query(q): Query<SyncQuery>,
    headers: HeaderMap,
) -> Response {
    if let Err((code, why)) = authorize(&api, &headers) {
        return error(code, why);
    }
    let wait = q.wait.unwrap_or(false);
    let (tx, rx) = oneshot::channel();
    let request = Control::Sync {
        done: wait.then_some(tx),
    };
    if api.control.try_send(request).is_err() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the daemon is busy with earlier requests; try again",
        );
    }
    if !wait {
        return (StatusCode::ACCEPTED, axum::Json(json!({"accepted": true}))).into_response();
    }
    match rx.await {
        Ok(Ok(last)) => {
            let code = if last.result == "success" {
                StatusCode::OK
            } else {
                StatusCode::CONFLICT
            };
            (code, axum::Json(json!({"last_sync": last}))).into_response()
        }
        Ok(Err(why)) => error(StatusCode::CONFLICT, why.to_string()),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the daemon is stopping"),
    }
}

#[derive(Deserialize)]
struct SuspendBody {
    reason: String,
}

async fn control_spec(
    State(api): State<Arc<ApiState>>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err((code, why)) = authorize(&api, &headers) {
        return error(code, why);
    }
    let (id, verb) = match path.rsplit_once('/') {
        Some((id, verb @ ("suspend" | "resume"))) => (id.to_string(), verb),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "POST /api/v1/specs/{id}/suspend or /api/v1/specs/{id}/resume",
            );
        }
    };
    let held_by_tree = match api.status.borrow().spec(&id) {
        None => return error(StatusCode::NOT_FOUND, format!("no spec {id}")),
        Some(s) => match &s["suspended"] {
            held if held["declared"] == true => held["reason"].as_str().map(String::from),
            _ => None,
        },
    };
    if let (Some(reason), "resume") = (held_by_tree, verb) {
        return error(
            StatusCode::CONFLICT,
            format!("{id} is suspended by the tree ({reason}): resume it there"),
        );
    }
    let suspension = if verb == "suspend" {
        let reason = match serde_json::from_slice::<SuspendBody>(&body) {
            Ok(b) if !b.reason.trim().is_empty() => b.reason.trim().to_string(),
            Ok(_) => return error(StatusCode::BAD_REQUEST, "the reason is empty"),
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("expected {{\"reason\": \"...\"}}: {e}"),
                );
            }
        };
        Some(Suspension {
            reason,
            since: k8s_openapi::jiff::Timestamp::now().to_string(),
            declared: false,
        })
    } else {
        None
    };
    tracing::info!(spec = %id, verb, "requested through the API");
    match api.suspender.set(id.clone(), suspension.clone()).await {
        Ok(()) => axum::Json(json!({"id": id, "suspended": suspension})).into_response(),
        Err(e) => error(StatusCode::BAD_GATEWAY, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cret", b"s3cre"));
        assert!(!same(b"s3cret", b"s3cret "));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn a_status_is_the_same_text_whatever_room_its_hint_gave_it() {
        let doc = json!({"specs": (0..500).map(|i| json!({"id": format!("s{i}"), "message": "a \"quoted\" line\n"})).collect::<Vec<_>>()});
        let whole = serde_json::to_string(&doc).unwrap();
        for hint in [
            0,
            10,
            whole.len() / 2,
            whole.len() - 1,
            whole.len(),
            whole.len() * 4,
        ] {
            let made = Published::sized(&doc, hint);
            assert_eq!(made.json(), whole, "hint {hint}");
            assert_eq!(
                made.json.capacity(),
                whole.len(),
                "hint {hint}: kept in no more than it needs"
            );
        }
    }
}
