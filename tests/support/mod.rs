//! What the integration tests (one binary, `tests/main.rs`) share: the
//! local cluster and a namespace per test (`cluster`), the example files (`files`), the
//! real binary and `driftless run` as a child process (`binary`), git servers on
//! loopback (`git`: git daemon, smart HTTP, sshd), plain HTTP to the daemon (`http`), a
//! real Prometheus scraping it (`prometheus`), ServiceAccount kubeconfigs
//! (`accounts`), a second apiserver with flags of a test's own (`apiserver`), and OCI
//! registries on loopback (`registry`) and artifacts for them (`oci`).

mod accounts;
mod apiserver;
mod binary;
mod browser;
mod cluster;
mod files;
mod git;
mod http;
mod oci;
mod prometheus;
mod proxy;
mod realworld;
mod recorder;
mod registry;
mod sse;

use std::net::TcpListener;
use std::process::Child;
use std::time::{Duration, Instant};

pub use accounts::*;
pub use apiserver::*;
pub use binary::*;
pub use browser::*;
pub use cluster::*;
pub use files::*;
pub use git::*;
pub use http::*;
pub use oci::*;
pub use prometheus::*;
pub use proxy::*;
pub use realworld::*;
pub use recorder::*;
pub use registry::*;
pub use sse::*;

/// A bound on waiting for the cluster or a daemon, not a timing assertion.
pub const WAIT: Duration = Duration::from_secs(120);

/// A loopback port that was free a moment ago. Another process may take it before the
/// caller binds it; servers started on one retry with another where they can.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server just spawned, once `ready` says it serves; `None` when it exits first (its
/// port was taken, say) or is not ready within `limit`, and then it is killed.
pub fn await_ready(mut child: Child, limit: Duration, ready: impl Fn() -> bool) -> Option<Child> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if ready() {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
