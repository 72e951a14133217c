//! What the integration tests (one binary, `tests/main.rs`) share: the
//! local cluster and a namespace per test (`cluster`), the example files (`files`), the
//! real binary and `driftless run` as a child process (`binary`), git servers on
//! loopback (`git`: git daemon, smart HTTP, sshd), plain HTTP to the daemon (`http`), a
//! real Prometheus scraping it (`prometheus`), ServiceAccount kubeconfigs
//! (`accounts`), a second apiserver with flags of a test's own (`apiserver`), OCI
//! registries on loopback (`registry`) and artifacts for them (`oci`), and a real OpenID
//! Connect provider, Keycloak, on loopback (`keycloak`, used by its path:
//! `support::keycloak::Keycloak`).

mod accounts;
mod apiserver;
mod binary;
mod browser;
mod cluster;
mod files;
mod git;
mod http;
pub mod keycloak;
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

/// A loopback port that was free a moment ago, drawn at random from below the kernel's
/// ephemeral range. A port the kernel hands out itself (`bind` to port 0) is also what
/// it hands every outgoing connection: under load a daemon's own client, or any other
/// test's, took one between the draw and the daemon's bind ("Address already in use").
/// Below that range only another test drawing the same port can, one chance in
/// thousands; servers started on one still retry with another where they can.
pub fn free_port() -> u16 {
    let (low, _) = ephemeral_range();
    let floor = 10_000u16;
    let span = u64::from(low.saturating_sub(floor)).max(1);
    for _ in 0..1_000 {
        let port = floor + (random() % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {floor}..{low} after 1,000 draws")
}

/// The kernel's range for ports it picks itself; Linux's default where it cannot be read.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut parts = text.split_whitespace().map(str::parse::<u16>);
            Some((parts.next()?.ok()?, parts.next()?.ok()?))
        })
        .filter(|(low, _)| *low > 10_000)
        .unwrap_or((32_768, 60_999))
}

/// A fresh random number from the standard library's per-process seeded hasher.
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
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
