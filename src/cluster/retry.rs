//! How each request to the apiserver behaves under pressure, as client-go's do: a
//! client-side rate limit (`--kube-api-qps`, `--kube-api-burst`), and a few jittered
//! retries of what the apiserver did not process: 429 (after its `Retry-After`), 502,
//! 503 and 504, and a connection refused or dropped before an answer.
//!
//! Bounded in tries and in time: a request whose apiserver answers 504 after a minute
//! (etcd away) is not tried again, and none is tried again past [`Policy::budget`]. The
//! budget also runs from the first of a client's requests the apiserver has not taken
//! since it last took one ([`Trouble`]): a sync of thousands of objects against an
//! apiserver that is down fails as soon as one request would, not after each object has
//! waited its own turn. The sync fails with the apiserver's last answer and how long it
//! was tried; retrying further is the sync queue's backoff, which is reported.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Bytes;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use kube::client::{Body, DynBody};
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceExt as _};

/// The client-side rate limit: a token bucket of `burst` tokens refilled at `qps` a
/// second, one token a request (a retry too). `qps` 0 turns it off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f32,
    pub burst: u32,
}

/// Above what the local test apiserver sustains (about 110 server-side applies a second
/// on 2 cores, docs/src/contributing/benchmarks.md), so a sync is as fast as the apiserver allows; a
/// runaway loop still cannot send more. What keeps a sync from crowding an apiserver is
/// `--concurrency` (requests in flight) and the retries here; on a shared production
/// cluster, lower it (Flux's controllers use 50 and 300).
pub const DEFAULT_QPS: f32 = 200.0;
/// A sync's first lists and reads (one per kind) go out at once.
pub const DEFAULT_BURST: u32 = 400;

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
        }
    }
}

/// Which answers are tried again, how often and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Tries in all, the first included.
    pub tries: u32,
    /// The wait before the first retry; it doubles on each, up to `max_wait`.
    pub first_wait: Duration,
    pub max_wait: Duration,
    /// No retry starts later than this after the first try, nor after the first
    /// request of the client the apiserver has not taken since it last took one (see
    /// [`Trouble`]): an apiserver that has not recovered by then is reported, not
    /// waited for.
    pub budget: Duration,
    /// The same for a connection refused or dropped: a blip (an apiserver restarting
    /// behind its load balancer) is ridden out, an apiserver that is down is reported
    /// about as soon as without retries.
    pub connection_budget: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        // client-go tries 10 times; the budget, not the count, is what usually ends it.
        Policy {
            tries: 10,
            first_wait: Duration::from_millis(250),
            max_wait: Duration::from_secs(8),
            budget: Duration::from_secs(30),
            connection_budget: Duration::from_secs(5),
        }
    }
}

/// Why an attempt is worth repeating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// 429: the apiserver shed the request unprocessed; `retry_after` is its hint.
    Throttled { retry_after: Option<Duration> },
    /// 502, 503, 504: the apiserver (or a proxy in front of it) could not serve it now.
    /// Not 500: a 1.20 apiserver answers 500 to a type error in an apply, and that
    /// answer does not change.
    Unavailable(StatusCode),
    /// The connection was refused or dropped while being made: the request never left.
    Unreached,
    /// The connection dropped after the request may have been sent: tried again only
    /// when sending it twice does what sending it once does.
    Dropped,
}

impl Policy {
    /// Whether an attempt's outcome is worth repeating, for a request of `method` whose
    /// body is of `content_type`.
    pub fn reason(
        method: &Method,
        content_type: Option<&HeaderValue>,
        status: Result<(StatusCode, &HeaderMap), &(dyn StdError + 'static)>,
    ) -> Option<Reason> {
        let reason = match status {
            Ok((StatusCode::TOO_MANY_REQUESTS, headers)) => Reason::Throttled {
                retry_after: headers.get(RETRY_AFTER).and_then(retry_after),
            },
            Ok((
                code @ (StatusCode::BAD_GATEWAY
                | StatusCode::SERVICE_UNAVAILABLE
                | StatusCode::GATEWAY_TIMEOUT),
                _,
            )) => Reason::Unavailable(code),
            Ok(_) => return None,
            Err(e) => transport(e)?,
        };
        (reason != Reason::Dropped || idempotent(method, content_type)).then_some(reason)
    }

    /// The wait before try `tries + 1` (after `tries` tries): exponential from
    /// `first_wait`, capped, and at least what the apiserver asked for; scaled by
    /// `jitter` (0..1) into 1–1.5× so that requests throttled together do not all
    /// return together.
    pub fn wait(&self, tries: u32, reason: Reason, jitter: f64) -> Duration {
        let exponential = self
            .first_wait
            .saturating_mul(1u32 << tries.saturating_sub(1).min(16))
            .min(self.max_wait);
        let asked = match reason {
            Reason::Throttled { retry_after } => retry_after.unwrap_or_default(),
            _ => Duration::ZERO,
        };
        exponential
            .max(asked)
            .mul_f64(1.0 + 0.5 * jitter.clamp(0.0, 1.0))
    }

    /// Whether there is a try `tries + 1` for `reason` that waits `wait` after
    /// `elapsed` since the first.
    pub fn again(&self, tries: u32, reason: Reason, elapsed: Duration, wait: Duration) -> bool {
        let budget = match reason {
            Reason::Throttled { .. } | Reason::Unavailable(_) => self.budget,
            Reason::Unreached | Reason::Dropped => self.connection_budget,
        };
        tries < self.tries && elapsed.saturating_add(wait) <= budget
    }
}

/// `Retry-After` as a number of seconds, the form the apiserver sends. An HTTP date
/// (which it does not send) is not read: the backoff applies alone.
fn retry_after(value: &HeaderValue) -> Option<Duration> {
    let seconds: u32 = value.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.into()))
}

/// Requests that do the same sent twice as once: reads, and writes that state a result
/// (server-side apply, a merge patch, a replace, a delete, which the apply path takes
/// as done when it meets 404). Not a create (POST): a second one may meet 409
/// AlreadyExists for the object the first made.
fn idempotent(method: &Method, content_type: Option<&HeaderValue>) -> bool {
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE => true,
        Method::PATCH => content_type
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| {
                matches!(
                    t.trim(),
                    "application/apply-patch+yaml" | "application/merge-patch+json"
                )
            }),
        _ => false,
    }
}

/// A transport error worth repeating: a connection refused, reset or closed early. Not
/// a timeout (repeating it multiplies the wait) nor a TLS failure (it fails again).
fn transport(e: &(dyn StdError + 'static)) -> Option<Reason> {
    let mut connecting = false;
    let mut dropped = false;
    let mut next = Some(e);
    while let Some(cause) = next {
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            match e.kind() {
                K::TimedOut => return None,
                K::ConnectionRefused => {
                    connecting = true;
                    dropped = true;
                }
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                    dropped = true;
                }
                _ => {}
            }
        } else if let Some(e) = cause.downcast_ref::<hyper::Error>() {
            if e.is_timeout() {
                return None;
            }
            dropped |= e.is_incomplete_message() || e.is_canceled();
        } else if let Some(e) = cause.downcast_ref::<hyper_util::client::legacy::Error>() {
            connecting |= e.is_connect();
        }
        next = cause.source();
    }
    match (dropped, connecting) {
        (false, _) => None,
        (true, true) => Some(Reason::Unreached),
        (true, false) => Some(Reason::Dropped),
    }
}

/// A token bucket shared by every request of a client.
#[derive(Debug)]
pub(crate) struct Bucket {
    qps: f64,
    burst: f64,
    /// Tokens (negative when requests are waiting for ones not yet refilled) as of an
    /// instant.
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    /// `None` for no limit (`qps` 0).
    pub fn new(limit: RateLimit) -> Option<Bucket> {
        (limit.qps > 0.0).then(|| Bucket {
            qps: f64::from(limit.qps),
            burst: f64::from(limit.burst.max(1)),
            state: Mutex::new((f64::from(limit.burst.max(1)), Instant::now())),
        })
    }

    /// Takes a token, returning how long to wait until it is there. Taken now, in the
    /// order asked: later requests wait behind earlier ones.
    pub fn take(&self, now: Instant) -> Duration {
        // A panic elsewhere while holding it leaves plain numbers behind: still usable.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, then) = *state;
        let refilled =
            (tokens + now.saturating_duration_since(then).as_secs_f64() * self.qps).min(self.burst);
        let left = refilled - 1.0;
        *state = (left, now.max(then));
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.qps)
        }
    }
}

/// Since when the apiserver has taken none of a client's requests: set by the first
/// answer (or connection) worth retrying, cleared by any answer that is not.
#[derive(Debug, Default)]
pub struct Trouble(Mutex<Option<Instant>>);

impl Trouble {
    /// Notes an outcome at `now`; returns since when the trouble has lasted, if any.
    pub fn note(&self, now: Instant, retryable: bool) -> Option<Instant> {
        let mut since = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if retryable {
            Some(*since.get_or_insert(now))
        } else {
            *since = None;
            None
        }
    }
}

/// What every request of one client shares.
#[derive(Debug)]
struct Shared {
    bucket: Option<Bucket>,
    trouble: Trouble,
    policy: Policy,
}

/// The layer: rate limit, then retries, around kube's service (behind a buffer, which
/// makes it cloneable).
#[derive(Clone)]
pub(crate) struct Layer(Arc<Shared>);

impl Layer {
    pub fn new(limit: RateLimit, policy: Policy) -> Layer {
        Layer(Arc::new(Shared {
            bucket: Bucket::new(limit),
            trouble: Trouble::default(),
            policy,
        }))
    }
}

impl<S> tower::Layer<S> for Layer {
    type Service = Retrying<S>;
    fn layer(&self, inner: S) -> Retrying<S> {
        Retrying {
            inner,
            shared: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Retrying<S> {
    inner: S,
    shared: Arc<Shared>,
}

type Answer = Response<Box<DynBody>>;

impl<S> Service<Request<Body>> for Retrying<S>
where
    S: Service<Request<Body>, Response = Answer, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Answer;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

    /// Always ready: each try waits for the inner service's readiness itself.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        Box::pin(send(self.inner.clone(), self.shared.clone(), req))
    }
}

async fn send<S>(
    mut inner: S,
    shared: Arc<Shared>,
    mut req: Request<Body>,
) -> Result<Answer, BoxError>
where
    S: Service<Request<Body>, Response = Answer, Error = BoxError> + Send,
    S::Future: Send,
{
    let method = req.method().clone();
    let content_type = req.headers().get(CONTENT_TYPE).cloned();
    let mut tries = 0u32;
    // From the first try on: the time a request waited for the rate limit is not the
    // apiserver's to answer for.
    let mut first = None;
    loop {
        if let Some(b) = &shared.bucket {
            let wait = b.take(Instant::now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        let first = *first.get_or_insert_with(Instant::now);
        // A body that streams cannot be sent twice (kube sends none such): then this try
        // is the last.
        let again = copy(&req);
        tries += 1;
        let answer = match inner.ready().await {
            Ok(ready) => ready.call(req).await,
            Err(e) => return Err(e),
        };
        let reason = Policy::reason(
            &method,
            content_type.as_ref(),
            match &answer {
                Ok(a) => Ok((a.status(), a.headers())),
                Err(e) => Err(&**e),
            },
        );
        let now = Instant::now();
        // Only an answer says the apiserver is back: a TLS failure, say, is no news.
        let since = match (&answer, reason) {
            (Ok(_), None) => shared.trouble.note(now, false),
            (_, Some(_)) => shared.trouble.note(now, true),
            (Err(_), None) => None,
        };
        let (Some(reason), Some(again)) = (reason, again) else {
            return answer;
        };
        let policy = shared.policy;
        let wait = policy.wait(tries, reason, jitter());
        let elapsed = (now - first).max(since.map_or(Duration::ZERO, |t| now - t));
        if !policy.again(tries, reason, elapsed, wait) {
            return match answer {
                Ok(a) => Ok(gave_up(a, tries, first.elapsed()).await),
                Err(e) => Err(e),
            };
        }
        tracing::debug!(
            method = %method,
            uri = %again.uri(),
            ?reason,
            tries,
            ?wait,
            "the apiserver did not take the request; trying again"
        );
        tokio::time::sleep(wait).await;
        req = again;
    }
}

fn copy(req: &Request<Body>) -> Option<Request<Body>> {
    let body = req.body().try_clone()?;
    let mut copy = Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

/// 0..1, for jitter only.
fn jitter() -> f64 {
    use std::hash::{BuildHasher as _, RandomState};
    let bits = RandomState::new().hash_one(std::time::Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// The last answer when no retry is left, said in a line: the apiserver's message, how
/// often and how long it was tried. Its throttling answer is plain text, which kube
/// would report as "Failed to parse error data"; the answer becomes a Status.
async fn gave_up(answer: Answer, tries: u32, elapsed: Duration) -> Answer {
    /// More is not a message.
    const READ: usize = 64 << 10;
    let (mut parts, mut body) = answer.into_parts();
    // Read by hand: `Limited` over this boxed body trips rustc's check that the future
    // is Send (a higher-ranked `From` it cannot prove).
    let mut read = Vec::new();
    let reading = async {
        while read.len() < READ {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        read.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) | None => break,
            }
        }
    };
    // An answer whose body never ends is said without its words.
    if tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .is_err()
    {
        read.clear();
    }
    let text = String::from_utf8_lossy(&read).into_owned();
    let said: Option<kube::core::Status> = serde_json::from_str(&text).ok();
    let (message, reason) = match said {
        Some(s) => (s.message, s.reason),
        None => (text, String::new()),
    };
    let message = message.trim().trim_end_matches('.');
    let message = if message.is_empty() {
        parts
            .status
            .canonical_reason()
            .unwrap_or("the apiserver did not serve it")
    } else {
        message
    };
    let reason = match (reason.is_empty(), parts.status) {
        (false, _) => reason,
        (true, StatusCode::TOO_MANY_REQUESTS) => "TooManyRequests".into(),
        (true, StatusCode::SERVICE_UNAVAILABLE) => "ServiceUnavailable".into(),
        (true, StatusCode::GATEWAY_TIMEOUT) => "Timeout".into(),
        (true, _) => String::new(),
    };
    let tried = if tries == 1 {
        format!("tried once, for {:.0} s", elapsed.as_secs_f64())
    } else {
        format!("tried {tries} times in {:.0} s", elapsed.as_secs_f64())
    };
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": format!("{message}; {tried}"),
        "reason": reason,
        "code": parts.status.as_u16(),
    });
    let bytes = Bytes::from(status.to_string());
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body: Box<DynBody> =
        Box::new(http_body_util::Full::new(bytes).map_err(|never| -> BoxError { match never {} }));
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests;
