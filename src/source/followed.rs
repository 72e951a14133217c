//! What every source is to the loop that follows it: something read when told to, that
//! yields a [`Revision`](super::Revision) or says why not in words and a reason. The
//! loop itself (polling, the hook, backoff, the error metric) is the daemon's, written
//! once; a source says only how it is read.

use std::time::Duration;

use tokio::sync::mpsc;

use super::Revision;

/// Why a read of a source failed: the words for the status, and a stable, low-cardinality
/// reason for the error metric (`driftless_source_errors_total{source,reason}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub message: String,
    pub reason: &'static str,
    /// The revision the source found and refused (a commit whose signature did not
    /// pass), where that is why it failed.
    pub revision: Option<String>,
}

impl Failure {
    pub fn new(reason: &'static str, message: impl std::fmt::Display) -> Failure {
        Failure {
            message: message.to_string(),
            reason,
            revision: None,
        }
    }
}

/// A source as the follow loop reads it.
pub trait Followed: Send + Sync + 'static {
    /// `dir`, `git`, `oci`: the error metric's `source` label, and its hook's path
    /// (`/hooks/KIND`) when it is polled.
    const KIND: &'static str;
    /// Every reason a read of it can fail for (besides rendering's): the metric has a
    /// series for each from the start, so a rate over it is 0 rather than absent.
    const REASONS: &'static [&'static str];
    /// How it is named in the status and the logs.
    fn name(&self) -> String;
    /// Reads it: `None` when nothing moved since the last read. `again` asks for the
    /// revision even then: the last read failed, and a good one clears its error.
    fn read(&self, again: bool) -> impl Future<Output = Result<Option<Revision>, Failure>> + Send;
}

/// What a source, once opened, is handed to: the follow loop, whichever its type.
pub trait Follow {
    type Output;
    /// `interval`: how often it is read (a polled source); `changes`: when it says it
    /// changed (a watched directory).
    fn follow<S: Followed>(
        self,
        source: S,
        interval: Option<Duration>,
        changes: Option<mpsc::Receiver<()>>,
    ) -> Self::Output;
}
