//! What a restart does before its first sync: the kinds its inventory records are
//! watched at once, and the first sync waits for those lists and takes what they hold,
//! so a restart lists each kind once. At 10,000 specs two rounds of lists were most of
//! a restart's time.
//!
//! The tree is not rendered while they list: tried at 10,000 specs, the lists took as
//! much longer as the render (0.2-0.3 s) saved after them, the apiserver serving them
//! and the daemon reading them had both cores already.

use std::time::Duration;

use tokio::time::Instant;

use super::main_loop::Loop;

/// How long a restart's first sync waits for the lists of the watches set before it
/// before it lists for itself what is not in. At 10,000 specs they take 3-4 s on two
/// cores.
const FIRST_LISTS_AWAITED: Duration = Duration::from_secs(30);

/// How long reading the kinds the inventory records may hold up a start.
const RECORDED_READ: Duration = Duration::from_secs(5);

impl Loop {
    /// A restart (the inventory records objects): their kinds are watched at once, so
    /// their lists run while the tree is read and rendered, and the first sync takes what
    /// they hold. A standby watches nothing before it leads; a first start has nothing
    /// recorded; a cluster away at start holds nothing up for long.
    pub(super) async fn watch_recorded(&mut self) {
        if !self.state.is_active() {
            return;
        }
        let kinds = match tokio::time::timeout(RECORDED_READ, self.on.cluster.recorded_kinds())
            .await
        {
            Ok(Ok(kinds)) => kinds,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the recorded kinds are not watched before the first sync");
                return;
            }
            Err(_) => return,
        };
        if kinds.is_empty() {
            return;
        }
        self.on.owned.set(&kinds);
        self.state.live.watching_first(
            kinds
                .iter()
                .map(|r| (r.resource.group.clone(), r.resource.kind.clone())),
        );
        self.on.first_lists_until = Some(Instant::now() + FIRST_LISTS_AWAITED);
    }

    /// The first sync has waited for the lists long enough: it lists for itself what is
    /// not in (says whether it stopped waiting now).
    pub(super) fn lists_overdue(&mut self) -> bool {
        if self.on.first_lists_until.is_none_or(|t| Instant::now() < t) {
            return false;
        }
        tracing::info!(
            "the watches' first lists are not in after {}; the first sync lists for itself",
            humantime::format_duration(FIRST_LISTS_AWAITED)
        );
        self.on.first_lists_until = None;
        self.state.live.lists_not_awaited();
        true
    }
}
