//! The loop's side of a tree replicas share (`shards`): what the member's coordinator
//! tells it (this replica's share, the other members' specs), and what a change of share
//! does to the running sync, the engine and the state.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Loop;
use crate::daemon::queue::Key;
use crate::daemon::shards::{Peers, ShardView};
use crate::daemon::state::Cancel;
use crate::daemon::sync::Finished;

/// The loop's side of the member's coordinator (`shards`).
pub(in crate::daemon) struct ShardLink {
    /// What this replica may write.
    pub view: tokio_watch::Receiver<ShardView>,
    /// What the loop no longer writes beyond.
    pub confirmed: tokio_watch::Sender<BTreeSet<u16>>,
    /// The other members' specs, as they published them.
    pub peers: tokio_watch::Receiver<Peers>,
}

/// What the member's coordinator tells the loop.
pub(super) enum ShardNews {
    /// This replica's share changed.
    Share(ShardView),
    /// The other members' specs changed.
    Peers(Peers),
}

/// The coordinator's next news, if the tree is shared (never, if not).
pub(super) async fn shard_news(shard: &mut Option<ShardLink>) -> ShardNews {
    if let Some(link) = shard {
        tokio::select! {
            Ok(()) = link.view.changed() => {
                return ShardNews::Share(link.view.borrow_and_update().clone());
            }
            Ok(()) = link.peers.changed() => {
                return ShardNews::Peers(link.peers.borrow_and_update().clone());
            }
            // The member has ended (the loop is stopping).
            else => {}
        }
    }
    std::future::pending().await
}

impl Loop {
    /// This replica's share of a shared tree changed. Buckets taken away are written no
    /// more before the member is told so: a running sync is told to stop at its next safe
    /// point (aborted at once when the member's Lease lapsed: others may hold them
    /// already), and the share is taken when it has ended; the loop never waits for it.
    pub(super) fn on_share(&mut self, view: ShardView, task: &Option<JoinHandle<Finished>>) {
        let before = self.state.shard_held().cloned().unwrap_or_default();
        let Some(running) = task.as_ref().filter(|_| !before.is_subset(&view.held)) else {
            self.share_due = None;
            self.take_share(view);
            return;
        };
        if view.urgent {
            running.abort();
        } else if let Some(why) = self.state.stop_running(Cancel::ShareChanged) {
            self.tell_sync(&why);
        }
        self.share_due = Some(view);
    }

    /// From now on the engine, the state and the member go by `view`.
    pub(super) fn take_share(&mut self, view: ShardView) {
        let held = view.held.clone();
        self.on.cluster.hold(Some(Arc::new(held.clone())));
        if let Some(key) = self.state.on_shard(view) {
            self.queue.push(key, Instant::now());
        }
        if let Some(link) = &self.shard {
            let _ = link.confirmed.send(held);
        }
        self.write_status();
    }

    /// The other members published their specs: what waited for one of theirs may go.
    pub(super) fn on_peers(&mut self, peers: Peers) {
        for spec in self.state.on_peers(peers) {
            tracing::info!(spec = %spec, "its dependencies are ready");
            self.queue.push(Key::Spec(spec), Instant::now());
        }
        self.write_status();
    }
}
