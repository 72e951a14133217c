//! The controls, behind a bearer token: sync now (and wait for that sync), suspend and
//! resume a spec; and what they ask of the daemon's loop.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::oneshot;

use super::view::Caller;
use super::{ApiState, error};
use crate::apply::ApplyError;
use crate::apply::suspensions::Suspension;
use crate::report::signin::same_token;
use crate::report::status::LastSync;
use crate::report::tls::Peer;

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

/// The connection's peer, as the listener saw it (none when served without one).
pub(super) type PeerInfo = Option<Extension<ConnectInfo<Peer>>>;

/// A signed-in person may when the cluster lets them patch the objects of the specs
/// asked about (`specs`; none: every spec); a verified client certificate is enough;
/// else the token: 403 when neither is configured, 401 for a missing or wrong token.
async fn authorize(
    api: &ApiState,
    headers: &HeaderMap,
    peer: &PeerInfo,
    caller: &Caller,
    specs: Option<Vec<serde_json::Value>>,
) -> Result<(), (StatusCode, String)> {
    if let Some(Extension(identity)) = caller
        && let Some(person) = identity.person()
    {
        let Some(rbac) = &api.rbac else {
            return Err((
                StatusCode::FORBIDDEN,
                "sign-in is not configured here".into(),
            ));
        };
        let specs = specs.unwrap_or_else(|| api.status.borrow().specs());
        for spec in &specs {
            if let Some(ask) = rbac.lacks(person, spec, "patch").await {
                return Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "{} may not {ask}, which steering {} needs",
                        person.user,
                        spec["id"].as_str().unwrap_or("this spec")
                    ),
                ));
            }
        }
        return Ok(());
    }
    let certified = peer
        .as_ref()
        .is_some_and(|Extension(ConnectInfo(p))| p.client.is_some());
    if api.client_certificates && certified {
        return Ok(());
    }
    let Some(token) = &api.token else {
        if api.client_certificates {
            return Err((
                StatusCode::UNAUTHORIZED,
                "present a client certificate that --tls-client-ca-file's CA signed".into(),
            ));
        }
        if api.rbac.is_some() {
            return Err((StatusCode::UNAUTHORIZED, "sign in first".into()));
        }
        return Err((
            StatusCode::FORBIDDEN,
            "controls are disabled: start the daemon with --api-token-file FILE and send \
             Authorization: Bearer <token>"
                .into(),
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(g) if same_token(g.as_bytes(), token) => Ok(()),
        Some(_) => Err((StatusCode::UNAUTHORIZED, "wrong token".into())),
        None => Err((
            StatusCode::UNAUTHORIZED,
            "missing Authorization: Bearer <token>".into(),
        )),
    }
}

#[derive(Deserialize)]
pub(super) struct SyncQuery {
    wait: Option<bool>,
}

pub(super) async fn sync(
    State(api): State<Arc<ApiState>>,
    Query(q): Query<SyncQuery>,
    headers: HeaderMap,
    peer: PeerInfo,
    caller: Caller,
) -> Response {
    if let Err((code, why)) = authorize(&api, &headers, &peer, &caller, None).await {
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

pub(super) async fn control_spec(
    State(api): State<Arc<ApiState>>,
    Path(path): Path<String>,
    headers: HeaderMap,
    peer: PeerInfo,
    caller: Caller,
    body: Bytes,
) -> Response {
    let (id, verb) = match path.rsplit_once('/') {
        Some((id, verb @ ("suspend" | "resume"))) => (id.to_string(), verb),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "POST /api/v1/specs/{id}/suspend or /api/v1/specs/{id}/resume",
            );
        }
    };
    let entry = api.status.borrow().spec(&id);
    let asked = Some(entry.clone().into_iter().collect());
    if let Err((code, why)) = authorize(&api, &headers, &peer, &caller, asked).await {
        return error(code, why);
    }
    let held_by_tree = match entry {
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
        assert!(same_token(b"s3cret", b"s3cret"));
        assert!(!same_token(b"s3cret", b"s3cre"));
        assert!(!same_token(b"s3cret", b"s3cret "));
        assert!(!same_token(b"", b"x"));
    }
}
