//! The audit trail of the listener: every request that asks the daemon to act (a control,
//! a hook: anything but a read), allowed or refused, in one structured log line with
//! who asked, from where, what, and the answer (with the refusal's reason), and the same
//! record in the daemon's history, which the API and the UI show.

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::tls::Peer;

/// The log target of audit lines: `RUST_LOG=driftless::audit=info` keeps them alone.
pub(crate) const TARGET: &str = "driftless::audit";

/// A refusal's body is a short JSON error; anything longer is not read for the line.
const REASON_LIMIT: usize = 4096;

/// One audited request, as the history keeps it (`/api/v1/controls`, the UI's history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// RFC 3339.
    pub time: String,
    pub who: String,
    pub from: String,
    /// Method and path.
    pub what: String,
    /// The HTTP status answered.
    pub answer: u16,
    /// A refusal's reason, as its caller was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where audited requests go besides the log: the daemon's loop, which keeps them in
/// its history, through a channel of their own (`RECORDS`). A flood of refused requests
/// must neither hold their answers nor take the places of the controls the loop is
/// asked for. `None` keeps the log line alone (the listener without a daemon).
pub type History = Option<tokio::sync::mpsc::Sender<AuditRecord>>;

/// Records the history's channel holds until the loop takes them; past that a record
/// is not waited for (its log line is its trace).
pub(crate) const RECORDS: usize = 256;

/// Whether records are being left out (the history full), so that is said once a flood,
/// not once a request.
static LEAVING_OUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The middleware; `signature_header`: the header a signed hook request carries.
pub async fn record(
    request: Request,
    next: Next,
    signature_header: &'static str,
    history: History,
) -> Response {
    // A sign-in's answer is a read that acts: it opens a session.
    let signing_in = request.uri().path() == "/auth/callback";
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) && !signing_in
    {
        return next.run(request).await;
    }
    // Known before the request when a fleet's gate found it; else the gate inside says
    // it on the answer.
    let identified = request
        .extensions()
        .get::<crate::report::signin::Identity>()
        .cloned();
    let peer = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|ConnectInfo(peer)| peer.clone());
    let from = peer
        .as_ref()
        .map_or_else(|| "-".to_string(), |p| p.addr.to_string());
    let what = format!("{} {}", request.method(), request.uri().path());
    let presented = presented(
        &request,
        signature_header,
        peer.as_ref().and_then(|p| p.client.as_deref()),
    );
    let response = next.run(request).await;
    let answer = response.status();
    let identity = identified.or_else(|| {
        response
            .extensions()
            .get::<crate::report::signin::Identity>()
            .cloned()
    });
    let who = match identity {
        Some(identity) => identity.name(),
        None => who(&presented, answer),
    };
    let control = if signing_in { "sign-in" } else { "control" };
    let (response, reason) = if answer.is_success() {
        tracing::info!(target: TARGET, who, from, what, answer = answer.as_u16(), "{control}");
        (response, None)
    } else {
        let (response, reason) = refusal_reason(response).await;
        let denied = matches!(answer, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
        if denied {
            tracing::warn!(target: TARGET, who, from, what, answer = answer.as_u16(), reason, "{control} denied");
        } else {
            tracing::info!(target: TARGET, who, from, what, answer = answer.as_u16(), reason, "{control}");
        }
        (response, Some(reason).filter(|r| !r.is_empty()))
    };
    if let Some(history) = history {
        let record = AuditRecord {
            time: k8s_openapi::jiff::Timestamp::now().to_string(),
            who,
            from,
            what,
            answer: answer.as_u16(),
            reason,
        };
        use std::sync::atomic::Ordering::Relaxed;
        match history.try_send(record) {
            Ok(()) => LEAVING_OUT.store(false, Relaxed),
            Err(_) => {
                if !LEAVING_OUT.swap(true, Relaxed) {
                    tracing::warn!(target: TARGET, "the history is full: records are left out of it until it takes them again; their log lines are their only trace");
                }
            }
        }
    }
    response
}

/// The reason a refusal gave its caller, read only when its body is short and whole (a
/// failed sync's 409 carries the sync's record, passed on as is); the response as it was.
async fn refusal_reason(response: Response) -> (Response, String) {
    let (parts, body) = response.into_parts();
    let short = hyper::body::Body::size_hint(&body)
        .exact()
        .is_some_and(|n| n <= REASON_LIMIT as u64);
    let (body, reason) = if short {
        match axum::body::to_bytes(body, REASON_LIMIT).await {
            Ok(bytes) => {
                let reason = reason_of(&bytes);
                (Body::from(bytes), reason)
            }
            Err(_) => (Body::empty(), "the answer could not be read".to_string()),
        }
    } else {
        (body, String::new())
    };
    (Response::from_parts(parts, body), reason)
}

/// What credential the request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Presented {
    /// A client certificate the listener verified, by its holder's name.
    Certificate(String),
    Token,
    HookSignature,
    Nothing,
}

/// A verified client certificate first: the controls accept it before a token.
fn presented(request: &Request, signature_header: &str, certificate: Option<&str>) -> Presented {
    let headers = request.headers();
    if let Some(name) = certificate {
        Presented::Certificate(name.to_string())
    } else if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "))
    {
        Presented::Token
    } else if headers.contains_key(signature_header) {
        Presented::HookSignature
    } else {
        Presented::Nothing
    }
}

/// Who asked, as far as the listener knows: the holder of the API token (or of the hook
/// secret) once the credential was accepted, anyone otherwise; a client certificate's
/// holder by its name (the listener verified it before any request).
fn who(presented: &Presented, answer: StatusCode) -> String {
    let accepted = !matches!(answer, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    match (presented, accepted) {
        (Presented::Certificate(name), _) => format!("certificate {name}"),
        (Presented::Token, true) => "api-token".to_string(),
        (Presented::HookSignature, true) => "hook-secret".to_string(),
        (Presented::Token, false) => "anonymous (a wrong token)".to_string(),
        (Presented::HookSignature, false) => "anonymous (a wrong signature)".to_string(),
        (Presented::Nothing, _) => "anonymous".to_string(),
    }
}

/// The `error` of a JSON refusal, or the text of a plain one, on one line.
fn reason_of(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => match v["error"].as_str() {
            Some(e) => e.to_string(),
            None => String::from_utf8_lossy(body).into_owned(),
        },
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A history that does not take records (the loop busy, or a flood of refused
    /// requests) holds as many as its channel does and no answer: every request is
    /// answered, the rest of the records are left out, and once the history takes them
    /// again the next request's record is kept.
    #[tokio::test]
    async fn a_full_history_leaves_records_out_and_holds_no_answer() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let history: History = Some(tx);
        let router = axum::Router::new()
            .route(
                "/api/v1/sync",
                axum::routing::post(|| async { (StatusCode::UNAUTHORIZED, "no token") }),
            )
            .layer(axum::middleware::from_fn(move |request, next| {
                record(request, next, "x-signature", history.clone())
            }));
        let post = || {
            let mut service = router.clone();
            async move {
                let request = axum::http::Request::post("/api/v1/sync")
                    .body(Body::empty())
                    .unwrap();
                tower::Service::call(&mut service, request).await.unwrap()
            }
        };
        for _ in 0..40 {
            assert_eq!(post().await.status(), StatusCode::UNAUTHORIZED);
        }
        let mut kept = Vec::new();
        while let Ok(r) = rx.try_recv() {
            kept.push(r);
        }
        assert_eq!(kept.len(), 4, "the channel's worth");
        assert_eq!(kept[0].reason.as_deref(), Some("no token"));
        assert_eq!(kept[0].what, "POST /api/v1/sync");
        post().await;
        assert!(rx.try_recv().is_ok(), "kept again once taken");
    }

    #[test]
    fn who_is_named_only_once_the_credential_is_accepted() {
        assert_eq!(who(&Presented::Token, StatusCode::OK), "api-token");
        assert_eq!(who(&Presented::Token, StatusCode::CONFLICT), "api-token");
        assert_eq!(
            who(&Presented::Token, StatusCode::UNAUTHORIZED),
            "anonymous (a wrong token)"
        );
        assert_eq!(who(&Presented::Nothing, StatusCode::FORBIDDEN), "anonymous");
        assert_eq!(
            who(&Presented::HookSignature, StatusCode::ACCEPTED),
            "hook-secret"
        );
        assert_eq!(
            who(&Presented::Certificate("deploy-bot".into()), StatusCode::OK),
            "certificate deploy-bot"
        );
    }

    #[test]
    fn reasons_are_one_line() {
        assert_eq!(reason_of(br#"{"error":"wrong token"}"#), "wrong token");
        assert_eq!(
            reason_of(b"missing or invalid\nX-Hub-Signature-256"),
            "missing or invalid X-Hub-Signature-256"
        );
    }
}
