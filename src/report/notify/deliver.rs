//! Delivery: one task per receiver posts its notices in order, retrying with backoff.
//! Nothing here is awaited by the daemon's loop.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::message::Outgoing;
use super::{Context, Notice, Target};
use crate::report::metrics::Metrics;
use crate::report::outbound::{self, HttpClient};

/// Tries per notice: about 15 s of backoff (1, 2, 4, 8 s) before it counts as failed.
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// One request's limit: a receiver that accepts the connection and never answers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run(
    target: Arc<Target>,
    ctx: Arc<Context>,
    client: HttpClient,
    mut queue: mpsc::Receiver<Arc<Notice>>,
    metrics: Arc<Metrics>,
) {
    while let Some(notice) = queue.recv().await {
        let Some(out) = target.message(&notice, &ctx) else {
            continue;
        };
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            match post(&client, &out).await {
                Ok(()) => {
                    tracing::debug!(receiver = %target, event = notice.event.as_str(), "notified");
                    metrics.notification("sent");
                    break;
                }
                Err(Failure { why, retry }) => {
                    if !retry || attempt == ATTEMPTS {
                        tracing::warn!(
                            receiver = %target,
                            event = notice.event.as_str(),
                            attempts = attempt,
                            error = %why,
                            "notification failed"
                        );
                        metrics.notification("failed");
                        break;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
    }
}

struct Failure {
    why: String,
    retry: bool,
}

async fn post(client: &HttpClient, out: &Outgoing) -> Result<(), Failure> {
    let (status, _) = outbound::request(
        client,
        hyper::Method::POST,
        &out.url,
        &out.headers,
        out.body.clone(),
        REQUEST_TIMEOUT,
    )
    .await
    .map_err(|e| Failure {
        why: e.to_string(),
        retry: true,
    })?;
    if status.is_success() {
        return Ok(());
    }
    // A refusal (bad token, unknown repository) will not change by asking again; a busy
    // or broken receiver may.
    let retry = status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429;
    Err(Failure {
        why: format!("the receiver answered {status}"),
        retry,
    })
}
