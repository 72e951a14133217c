//! The listener of one daemon serving a fleet (`run --clusters` without `--cluster`).
//! Each cluster keeps what a daemon of its own would serve, under `/clusters/NAME/`
//! (its page, API, controls, `/metrics`, probes); the listener adds the fleet as a whole:
//! its page at `/`, its summary at `/api/v1/fleet`, `/metrics` with every cluster's
//! samples (each labelled with its cluster), `/readyz` over them all, and the hook, which
//! asks every cluster's source to read.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::http::{HOOK_BODY_LIMIT, HttpState, SIGNATURE_HEADER};
use super::metrics::{self, Metrics};
use super::status::{ClusterSummary, StatusFile};
use super::tls::{Listening, Peer};
use axum::serve::Listener as _;

/// One cluster of the fleet, as its engine shows itself.
pub struct Member {
    pub cluster: String,
    pub face: HttpState,
}

/// What the fleet's own routes read of each member.
struct Fleet {
    members: Vec<Seen>,
    hook_secret: Option<Vec<u8>>,
}

struct Seen {
    cluster: String,
    metrics: Arc<Metrics>,
    ready: Arc<std::sync::atomic::AtomicBool>,
    status: Option<tokio::sync::watch::Receiver<Arc<super::api::Published>>>,
    hook: Option<(&'static str, tokio::sync::mpsc::Sender<()>)>,
    api: Option<Arc<super::api::ApiState>>,
}

impl Seen {
    /// The cluster's status as its engine holds it now (so written now: the file's
    /// `written` says how fresh a file is, and this is no file).
    fn status(&self) -> Option<StatusFile> {
        let published = self.status.as_ref()?.borrow().clone();
        let mut file: StatusFile = serde_json::from_str(published.json()).ok()?;
        file.written
            .get_or_insert_with(|| Timestamp::now().to_string());
        Some(file)
    }
}

/// Serves the fleet on `listener` until `shutdown`, then lets requests in flight finish.
pub async fn serve_on(
    listener: impl Into<Listening>,
    members: Vec<Member>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let hook_secret = members.first().and_then(|m| m.face.hook_secret.clone());
    if hook_secret.as_ref().is_some_and(Vec::is_empty) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the git hook secret is empty",
        ));
    }
    let listener = listener.into();
    if let Ok(addr) = listener.local_addr() {
        let clusters = members.len();
        tracing::info!(%addr, tls = listener.is_tls(), clusters, "serving the fleet's /metrics, /healthz, /readyz, API and UI");
    }
    axum::serve(
        listener,
        router(members, hook_secret).into_make_service_with_connect_info::<Peer>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

fn router(members: Vec<Member>, hook_secret: Option<Vec<u8>>) -> Router {
    let gate = members.first().and_then(|m| m.face.gate.clone());
    let names: Vec<String> = members.iter().map(|m| m.cluster.clone()).collect();
    let fleet = Fleet {
        members: members
            .iter()
            .map(|m| Seen {
                cluster: m.cluster.clone(),
                metrics: m.face.metrics.clone(),
                ready: m.face.ready.clone(),
                status: m.face.api.as_ref().map(|a| a.status.clone()),
                hook: m.face.hook.clone(),
                api: m.face.api.clone(),
            })
            .collect(),
        hook_secret,
    };
    let mut router = Router::new()
        .route("/metrics", get(metrics_page))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route(
            "/hooks/{kind}",
            post(hook).layer(DefaultBodyLimit::max(HOOK_BODY_LIMIT)),
        )
        .route("/api/v1/fleet", get(summary))
        .route("/api", any(elsewhere))
        .route("/api/{*rest}", any(elsewhere))
        .merge(super::ui::fleet_router(&names))
        .with_state(Arc::new(fleet));
    for member in members {
        router = router.nest(
            &format!("/clusters/{}", member.cluster),
            super::http::cluster_router(member.face),
        );
    }
    // The gate around every cluster's routes too; the audit around the fleet's own
    // requests that act (the hook, a sign-in): the clusters' routes record their own.
    super::http::gated(router, gate)
        .layer(axum::middleware::from_fn(
            |request: Request, next: axum::middleware::Next| async move {
                if request.uri().path().starts_with("/clusters/") {
                    return next.run(request).await;
                }
                super::audit::record(request, next, SIGNATURE_HEADER, None).await
            },
        ))
        .layer(axum::middleware::from_fn(super::compress::gzip))
}

async fn metrics_page(State(fleet): State<Arc<Fleet>>, caller: super::api::Caller) -> Response {
    let mut pages: Vec<String> = Vec::with_capacity(fleet.members.len());
    for member in &fleet.members {
        let page = member.metrics.encode();
        pages.push(match &member.api {
            Some(api) => super::api::seen_samples(api, &caller, page).await,
            None => page,
        });
    }
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        Metrics::merge(&pages),
    )
        .into_response()
}

/// Ready once every cluster has finished a sync, or its last one found it away: a
/// cluster that is down must not take the fleet's page and API out of a Service.
async fn readyz(State(fleet): State<Arc<Fleet>>) -> (StatusCode, String) {
    let waiting: Vec<&str> = fleet
        .members
        .iter()
        .filter(|m| {
            !m.ready.load(Ordering::Acquire) && m.status().is_none_or(|status| status.reached())
        })
        .map(|m| m.cluster.as_str())
        .collect();
    match waiting.is_empty() {
        true => (StatusCode::OK, "ready".into()),
        false => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: no sync completed yet of cluster {}",
                waiting.join(", ")
            ),
        ),
    }
}

async fn hook(
    Path(kind): Path<String>,
    State(fleet): State<Arc<Fleet>>,
    request: Request,
) -> Response {
    let hooks: Vec<_> = fleet
        .members
        .iter()
        .filter_map(|m| m.hook.as_ref())
        .collect();
    super::http::hook(&kind, &hooks, fleet.hook_secret.as_deref(), request).await
}

/// Each cluster's row; a signed-in person's counts are of the specs they may see there.
async fn summary(State(fleet): State<Arc<Fleet>>, caller: super::api::Caller) -> Response {
    let now = Timestamp::now();
    let mut rows: Vec<serde_json::Value> = Vec::with_capacity(fleet.members.len());
    for m in &fleet.members {
        let seen = match &m.api {
            Some(api) => super::api::seen_specs(api, &caller).await,
            None => None,
        };
        rows.push(match m.status() {
            Some(mut file) => {
                if let Some(seen) = seen {
                    file.specs.retain(|s| seen.contains(&s.id));
                }
                serde_json::to_value(ClusterSummary::of(&m.cluster, &file, now))
                    .unwrap_or_else(|e| json!({"cluster": m.cluster, "error": e.to_string()}))
            }
            None => json!({"cluster": m.cluster, "error": "no status yet"}),
        });
    }
    axum::Json(json!({ "clusters": rows })).into_response()
}

async fn elsewhere(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({
            "error": format!(
                "no route {}: this daemon serves a fleet; the fleet is /api/v1/fleet, each cluster's API is under /clusters/NAME{}",
                uri.path(),
                uri.path()
            )
        })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With sign-in, the gate stands before every cluster's routes too: nobody reads a
    /// cluster's API or the fleet's summary; probes and the UI's files stay open.
    #[tokio::test]
    async fn the_gate_covers_each_cluster_s_routes() {
        use crate::report::signin::{Gate, Provider, SignIn};
        let provider = Provider::new(
            "https://idp.invalid/realms/r".into(),
            "driftless".into(),
            None,
            std::time::Duration::from_secs(60),
            crate::report::outbound::client(),
        );
        let signin = SignIn::new(
            provider,
            "https://gitops.invalid",
            "sub".into(),
            "groups".into(),
            String::new(),
            String::new(),
            vec!["openid".into()],
            std::time::Duration::from_secs(3600),
            Some(b"secret"),
        );
        let face = HttpState {
            metrics: Arc::new(Metrics::new()),
            ready: Arc::default(),
            unready: None,
            hook: None,
            hook_secret: None,
            api: None,
            gate: Some(Arc::new(Gate {
                signin: Arc::new(signin),
                token: None,
            })),
        };
        let router = router(
            vec![Member {
                cluster: "edge".into(),
                face,
            }],
            None,
        );
        for (path, want) in [
            ("/clusters/edge/api/v1/status", 401),
            ("/clusters/edge/metrics", 401),
            ("/api/v1/fleet", 401),
            ("/metrics", 401),
            ("/clusters/edge/ui/app.js", 200),
            ("/healthz", 200),
            ("/clusters/edge/healthz", 200),
        ] {
            let request = axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            let mut service = router.clone();
            let answer = tower::Service::call(&mut service, request).await.unwrap();
            assert_eq!(answer.status().as_u16(), want, "{path}");
        }
    }

    /// A cluster's row says what its status says, in `driftless status`'s words.
    #[test]
    fn a_row_says_whether_the_cluster_was_reached_and_how_many_specs_are_ready() {
        let specs: Vec<serde_json::Value> = ["a", "b"]
            .iter()
            .map(|name| {
                json!({
                    "id": format!("manifest/ns/ConfigMap/{name}"), "kind": "ConfigMap",
                    "namespace": "ns", "name": name, "file": format!("{name}.yaml"), "line": 1,
                    "ready": false, "status": "Unknown", "reason": "ClusterUnreachable",
                    "message": "the cluster cannot be reached: refused", "figures": {}
                })
            })
            .collect();
        let file: StatusFile = serde_json::from_value(json!({
            "version": crate::report::status::VERSION,
            "written": "2026-12-04T10:00:00Z",
            "source": "dir:/srv/tree",
            "revision_seen": "abc",
            "revision_applied": "abc",
            "leader": null,
            "kubernetes": "v1.37.0",
            "last_sync": {"result": "failed", "time": "2026-12-04T10:00:00Z", "duration_seconds": 0.1,
                "message": "the cluster cannot be reached: refused", "applied": 0, "unchanged": 0, "pruned": 0, "failed": 0},
            "specs": specs,
            "errors": []
        }))
        .unwrap();
        let row = ClusterSummary::of("edge", &file, "2026-12-04T10:00:05Z".parse().unwrap());
        assert_eq!(row.cluster, "edge");
        assert!(!row.reachable);
        assert_eq!((row.ready, row.not_ready), (0, 2));
        assert!(!row.converged);
        assert!(
            row.not_converged
                .iter()
                .any(|w| w.contains("the cluster cannot be reached")),
            "{:?}",
            row.not_converged
        );
    }
}
