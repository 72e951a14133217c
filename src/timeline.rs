//! Where a sync's time goes, for whoever runs with `RUST_LOG=driftless=debug`: one line
//! per step, with the time since the step before and since the start. A restart that
//! converges slowly is otherwise a silent gap between two info lines.

use std::time::Instant;

pub(crate) struct Timeline {
    what: &'static str,
    start: Instant,
    last: Instant,
}

impl Timeline {
    pub fn start(what: &'static str) -> Self {
        let now = Instant::now();
        Timeline {
            what,
            start: now,
            last: now,
        }
    }

    /// `step` has just ended.
    pub fn mark(&mut self, step: &'static str) {
        let now = Instant::now();
        tracing::debug!(
            step,
            ms = now.duration_since(self.last).as_millis() as u64,
            since_start_ms = now.duration_since(self.start).as_millis() as u64,
            "{}",
            self.what
        );
        self.last = now;
    }
}
