//! What the daemon tells the outside world: the status file (`status`, built from the
//! daemon's state in `snapshot`), Prometheus metrics (`metrics`) and the HTTP server that
//! exposes them with health probes and the git hook (`http`), and notifications of
//! transitions to webhooks, chat and commit statuses (`notify`); the book's generated
//! reference pages (`reference`). Nothing here talks to the
//! cluster; the daemon feeds these.

pub mod api;
pub mod audit;
mod compress;
pub mod delta;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod notify;
pub mod outbound;
pub mod reference;
pub mod signin;
pub mod snapshot;
pub mod status;
pub mod tls;
pub mod ui;
