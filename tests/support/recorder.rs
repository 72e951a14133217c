//! A loopback HTTP recorder that stands in for the receiving end of notifications only
//! (a webhook, a chat, GitHub's commit status API): it records every request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Uri};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Request {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Records every request and answers 201, as GitHub does for a new status.
pub struct Recorder {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Recorder {
    pub async fn start() -> Recorder {
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(Request {
                    path: uri.path().to_string(),
                    headers,
                    body,
                });
                axum::http::StatusCode::CREATED
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Recorder { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn under(&self, prefix: &str) -> Vec<Request> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|s| s.path.starts_with(prefix))
            .cloned()
            .collect()
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Waits until `check` accepts what arrived under `prefix`.
    pub async fn wait_for(&self, what: &str, prefix: &str, check: impl Fn(&[Request]) -> bool) {
        super::eventually(what, super::WAIT, || async {
            let seen = self.under(prefix);
            if check(&seen) {
                Ok(())
            } else {
                Err(format!(
                    "{:#?}",
                    seen.iter().map(Request::json).collect::<Vec<_>>()
                ))
            }
        })
        .await;
    }
}
