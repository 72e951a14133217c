//! The HTTP side of the daemon: `/metrics`, `/healthz`, `/readyz` and `POST /hooks/KIND` (`git`, `oci`).

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::metrics::{self, Metrics};
use super::tls::{Listening, Peer};
use axum::serve::Listener as _;

/// Largest hook request body accepted. Push events of big pushes reach a few hundred KiB;
/// anything past this is not a forge talking.
pub const HOOK_BODY_LIMIT: usize = 1024 * 1024;

/// The signature header GitHub and Gitea send: `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

pub struct HttpState {
    pub metrics: Arc<Metrics>,
    /// `/readyz` answers 200 once this is true (after the first completed sync), else 503.
    pub ready: Arc<AtomicBool>,
    /// Why this replica is not ready whatever `ready` says, while it is not: a Lease it
    /// may not use (it can never lead, so it is no standby either).
    pub unready: Option<tokio::sync::watch::Receiver<Option<String>>>,
    /// The hook: the kind of the source it asks to read (`git`, `oci`: its path is
    /// `/hooks/KIND`), and where `POST` to it sends `()`. `None` disables it (404).
    pub hook: Option<(&'static str, mpsc::Sender<()>)>,
    /// When set, a hook request needs a valid `X-Hub-Signature-256`; 401 otherwise.
    pub hook_secret: Option<Vec<u8>>,
    /// The JSON API (`/api/v1/...`); `None` serves none of it.
    pub api: Option<Arc<super::api::ApiState>>,
    /// Sign-in (`--oidc-issuer`): who a request comes from, and reads refused to nobody.
    pub gate: Option<Arc<super::signin::Gate>>,
}

// By hand, so the secret never reaches a log line.
impl fmt::Debug for HttpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpState")
            .field("ready", &self.ready.load(Ordering::Relaxed))
            .field("hook", &self.hook.is_some())
            .field(
                "hook_secret",
                &self.hook_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

/// Binds `addr`; an address in use is an error (the caller decides whether that is fatal).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding {addr}: {e}")))
}

/// Serves on an already bound listener (plain or TLS) until `shutdown` resolves, then
/// lets requests in flight finish.
pub async fn serve_on(
    listener: impl Into<Listening>,
    state: HttpState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // An empty key makes every signature trivially forgeable by anyone who guesses that
    // the secret is empty; refuse rather than pretend the hook is protected.
    if state.hook_secret.as_ref().is_some_and(Vec::is_empty) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the git hook secret is empty",
        ));
    }
    let listener = listener.into();
    if let Ok(addr) = listener.local_addr() {
        let tls = listener.is_tls();
        tracing::info!(%addr, tls, hook = state.hook.is_some(), "serving /metrics, /healthz, /readyz");
    }
    axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<Peer>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

fn router(state: HttpState) -> Router {
    let gate = state.gate.clone();
    routes(state, super::ui::router(), gate)
}

/// One cluster's routes as a fleet's listener serves them under `/clusters/NAME/`: all
/// but the page itself, which the fleet serves at the path with its closing slash. The
/// fleet's listener runs the gate around them all.
pub(super) fn cluster_router(state: HttpState) -> Router {
    routes(state, super::ui::assets(), None)
}

/// The gate as a layer, or nothing.
pub(super) fn gated(router: Router, gate: Option<Arc<super::signin::Gate>>) -> Router {
    match gate {
        Some(gate) => router.layer(axum::middleware::from_fn(move |request, next| {
            super::signin::gate(gate.clone(), request, next)
        })),
        None => router,
    }
}

fn routes(
    state: HttpState,
    ui: Router<Arc<HttpState>>,
    gate: Option<Arc<super::signin::Gate>>,
) -> Router {
    let history = state.api.as_ref().and_then(|api| api.audit.clone());
    let api = state.api.clone().map(super::api::router);
    let router = Router::new()
        .route("/metrics", get(metrics_page))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            "/hooks/{kind}",
            post(source_hook).layer(DefaultBodyLimit::max(HOOK_BODY_LIMIT)),
        )
        .merge(ui)
        .with_state(Arc::new(state));
    let router = match api {
        Some(api) => router.merge(api),
        None => router,
    };
    // Inside the audit, which names whom the gate found.
    gated(router, gate)
        .layer(axum::middleware::from_fn(move |request, next| {
            super::audit::record(request, next, SIGNATURE_HEADER, history.clone())
        }))
        .layer(axum::middleware::from_fn(super::compress::gzip))
}

async fn metrics_page(State(state): State<Arc<HttpState>>, caller: super::api::Caller) -> Response {
    let mut page = state.metrics.encode();
    if let Some(api) = &state.api {
        page = super::api::seen_samples(api, &caller, page).await;
    }
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], page).into_response()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<Arc<HttpState>>) -> (StatusCode, String) {
    if let Some(why) = state.unready.as_ref().and_then(|u| u.borrow().clone()) {
        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}"))
    } else if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no sync completed yet".into(),
        )
    }
}

async fn source_hook(
    Path(kind): Path<String>,
    State(state): State<Arc<HttpState>>,
    request: Request,
) -> Response {
    let hooks: Vec<_> = state.hook.iter().collect();
    hook(&kind, &hooks, state.hook_secret.as_deref(), request).await
}

/// `POST /hooks/KIND`: judged once, then asks each source of that kind to read
/// (a fleet's daemon has one per cluster).
pub(super) async fn hook(
    kind: &str,
    hooks: &[&(&'static str, mpsc::Sender<()>)],
    secret: Option<&[u8]>,
    request: Request,
) -> Response {
    let senders: Vec<&mpsc::Sender<()>> = hooks
        .iter()
        .filter(|(name, _)| *name == kind)
        .map(|(_, tx)| tx)
        .collect();
    if senders.is_empty() {
        // The path is the caller's: not said back.
        return (StatusCode::NOT_FOUND, "no such hook is enabled").into_response();
    }
    // Judging the declared length before reading means a client that waits for
    // `100 Continue` never sends an oversized body at all.
    if declared_length(request.headers()).is_some_and(|n| n > HOOK_BODY_LIMIT as u64) {
        return too_large();
    }
    let headers = request.headers().clone();
    // Bytes honours the DefaultBodyLimit layer and answers 413 (or 400 for a broken
    // body) by itself.
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) => return rejection.into_response(),
    };
    match judge_hook(secret, &headers, &body) {
        HookVerdict::TooLarge => too_large(),
        HookVerdict::BadSignature => {
            tracing::warn!("{kind} hook: rejected a request without a valid {SIGNATURE_HEADER}");
            (
                StatusCode::UNAUTHORIZED,
                "missing or invalid X-Hub-Signature-256",
            )
                .into_response()
        }
        HookVerdict::Fetch => {
            // Full: a fetch is already pending and will see this push too. This is what
            // collapses a flood of hooks into a fetch or two.
            let running = senders
                .iter()
                .filter(|tx| !matches!(tx.try_send(()), Err(mpsc::error::TrySendError::Closed(()))))
                .count();
            match running {
                0 => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the fetcher is not running",
                )
                    .into_response(),
                _ => {
                    tracing::info!("{kind} hook: fetch requested");
                    (StatusCode::ACCEPTED, "fetch scheduled").into_response()
                }
            }
        }
    }
}

/// What the hook makes of a request, from its headers and whole body alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookVerdict {
    /// Ask for a fetch (202).
    Fetch,
    /// The declared or actual body is over [`HOOK_BODY_LIMIT`] (413).
    TooLarge,
    /// A secret is configured and the request does not carry a valid signature (401).
    BadSignature,
}

/// Judges a hook request: the route and the fuzz target (`fuzz/fuzz_targets/hook.rs`)
/// both ask this, so what is fuzzed is what answers. Pure; never panics, whatever the
/// bytes.
pub fn judge_hook(secret: Option<&[u8]>, headers: &HeaderMap, body: &[u8]) -> HookVerdict {
    if body.len() > HOOK_BODY_LIMIT
        || declared_length(headers).is_some_and(|n| n > HOOK_BODY_LIMIT as u64)
    {
        return HookVerdict::TooLarge;
    }
    match secret {
        Some(secret) if !signature_valid(secret, headers, body) => HookVerdict::BadSignature,
        _ => HookVerdict::Fetch,
    }
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the hook body is limited to {HOOK_BODY_LIMIT} bytes"),
    )
        .into_response()
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// HMAC-SHA256 of the body under `secret`, compared in constant time with the header's.
fn signature_valid(secret: &[u8], headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(given) = headers
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().strip_prefix("sha256="))
        .and_then(decode_hex)
    else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digit = |c: u8| (c as char).to_digit(16);
            Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    // The same `sha256=<hex HMAC-SHA256>` form the daemon's own webhooks carry.
    use crate::report::notify::message::sign;

    fn headers(signature: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(v) = signature.parse() {
            h.insert(SIGNATURE_HEADER, v);
        }
        h
    }

    #[test]
    fn hex() {
        assert_eq!(decode_hex("00ff7A"), Some(vec![0, 255, 122]));
        assert_eq!(decode_hex(""), Some(vec![]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex("+1"), None);
    }

    #[test]
    fn signatures() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        // GitHub's documented example: secret "It's a Secret to Everybody", body "Hello, World!".
        assert_eq!(
            sign(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
        let good = sign(b"s3cret", body);
        assert!(signature_valid(b"s3cret", &headers(&good), body));
        assert!(!signature_valid(b"other", &headers(&good), body));
        assert!(!signature_valid(b"s3cret", &headers(&good), b"tampered"));
        assert!(!signature_valid(b"s3cret", &HeaderMap::new(), body));
        assert!(!signature_valid(
            b"s3cret",
            &headers(good.trim_start_matches("sha256=")),
            body
        ));
        // A truncated tag must not pass as a prefix match.
        assert!(!signature_valid(b"s3cret", &headers(&good[..40]), body));
        assert!(!signature_valid(b"s3cret", &headers("sha256="), body));
    }

    #[test]
    fn verdicts() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        let good = headers(&sign(b"s3cret", body));
        assert_eq!(
            judge_hook(None, &HeaderMap::new(), body),
            HookVerdict::Fetch
        );
        assert_eq!(judge_hook(Some(b"s3cret"), &good, body), HookVerdict::Fetch);
        assert_eq!(
            judge_hook(Some(b"s3cret"), &HeaderMap::new(), body),
            HookVerdict::BadSignature
        );
        // Size before signature: an oversized request is 413 even when signed.
        let mut declared = good.clone();
        declared.insert(header::CONTENT_LENGTH, (HOOK_BODY_LIMIT + 1).into());
        assert_eq!(
            judge_hook(Some(b"s3cret"), &declared, body),
            HookVerdict::TooLarge
        );
        let big = vec![b' '; HOOK_BODY_LIMIT + 1];
        assert_eq!(
            judge_hook(None, &HeaderMap::new(), &big),
            HookVerdict::TooLarge
        );
    }

    #[test]
    fn debug_hides_the_secret() {
        let state = HttpState {
            metrics: Arc::new(Metrics::new()),
            ready: Arc::default(),
            unready: None,
            hook: None,
            hook_secret: Some(b"hunter2".to_vec()),
            api: None,
            gate: None,
        };
        let text = format!("{state:?}");
        assert!(!text.contains("hunter2") && !text.contains("104"), "{text}");
    }
}
