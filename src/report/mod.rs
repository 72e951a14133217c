//! What the daemon tells the outside world: the status file (`status`, built from the
//! daemon's state in `snapshot`), Prometheus metrics (`metrics`) and the HTTP server that
//! exposes them with health probes and the git hook (`http`). Nothing here talks to the
//! cluster; the daemon feeds these.

pub mod http;
pub mod metrics;
pub mod snapshot;
pub mod status;
