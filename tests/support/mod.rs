//! What the integration tests share, each test binary taking the part it needs: the
//! local cluster and a namespace per test (`cluster`), the example files (`files`), the
//! real binary and `driftless run` as a child process (`binary`), and git servers on
//! loopback (`git`).
// Each test binary compiles all of it and uses a part.
#![allow(dead_code, unused_imports)]

mod binary;
mod cluster;
mod files;
mod git;

use std::net::TcpListener;
use std::time::Duration;

pub use binary::*;
pub use cluster::*;
pub use files::*;
pub use git::*;

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
