//! Runs followed from their creation: a hook's run (`hooks`) and a wave's Job that the
//! TTL controller deletes once it finishes (`stages`). Current charts give their Jobs
//! `ttlSecondsAfterFinished: 0`, so the TTL controller deletes a Job the moment it
//! completes, and a read after that finds nothing. A watch from the run's creation keeps
//! the last state it saw before the run's deletion began, and whether that deletion
//! came; readiness (`observe`) reads a run that is gone or going by that state, so a
//! run is judged by how it ended, and one deleted before it was seen to end is said to
//! be so (`gate`), never waited on until a timeout.

use std::collections::{BTreeSet, HashMap};

use kube::api::DynamicObject;

use super::Engine;
use super::plan::Planned;
use crate::object::{ObjKey, Seen};

/// A run as the watch from its creation saw it.
#[derive(Debug, Default)]
pub(super) struct Followed {
    /// Its last state before its deletion began (a Job's foreground deletion can hold it
    /// for a while).
    last: Option<DynamicObject>,
    /// Its deletion began (or ended): it will not change any more.
    deleted: bool,
}

/// The runs being followed, by key.
pub(super) type Runs = std::sync::Mutex<HashMap<ObjKey, Followed>>;

/// A run to follow while its stage is waited for: its object, and the resourceVersion
/// its apply answered with (the watch starts there, so what came since is seen however
/// late the wait begins).
pub(super) type Run<'a> = (Planned<'a>, Option<String>);

impl Engine {
    fn followed_runs(&self) -> std::sync::MutexGuard<'_, HashMap<ObjKey, Followed>> {
        // A poisoned lock only means a panic elsewhere; what it holds is plain data.
        self.followed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows `runs` until the future is dropped (it never ends): each with a watch from
    /// its apply. A watch that fails leaves readiness to judge that run by reads alone.
    pub(super) async fn follow_runs(&self, runs: &[Run<'_>]) -> std::convert::Infallible {
        futures::future::join_all(
            runs.iter()
                .map(|(p, since)| self.follow_run(p, &p.key, since.clone())),
        )
        .await;
        std::future::pending().await
    }

    /// Forgets what was seen of the runs `keys` (their wait is over).
    pub(super) fn unfollow<'k>(&self, keys: impl IntoIterator<Item = &'k ObjKey>) {
        let mut followed = self.followed_runs();
        for key in keys {
            followed.remove(key);
        }
    }

    /// Follows run `key` (of `p`'s kind) with a watch from `since` (its create's or
    /// apply's resourceVersion). Never ends.
    pub(super) async fn follow_run(
        &self,
        p: &Planned<'_>,
        key: &ObjKey,
        since: Option<String>,
    ) -> std::convert::Infallible {
        use futures::TryStreamExt;
        use kube::api::{WatchEvent, WatchParams};
        let mut since = since.unwrap_or_else(|| "0".to_string());
        if let Ok(api) = self.hook_api(p) {
            let params = WatchParams::default().fields(&format!("metadata.name={}", key.name));
            'watch: loop {
                let Ok(stream) = api.watch(&params, &since).await else {
                    break;
                };
                let mut stream = std::pin::pin!(stream);
                loop {
                    let (obj, deleted) = match stream.try_next().await {
                        Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o))) => (o, false),
                        Ok(Some(WatchEvent::Deleted(o))) => (o, true),
                        Ok(Some(WatchEvent::Bookmark(b))) => {
                            since = b.metadata.resource_version;
                            continue;
                        }
                        // The server ended it (its timeout): again from the last seen.
                        Ok(None) => continue 'watch,
                        Ok(Some(WatchEvent::Error(_))) | Err(_) => break 'watch,
                    };
                    if let Some(rv) = obj.metadata.resource_version.clone() {
                        since = rv;
                    }
                    let begun = obj.metadata.deletion_timestamp.is_some();
                    let mut followed = self.followed_runs();
                    let run = followed.entry(key.clone()).or_default();
                    // How it ended is the last state before its deletion began (a
                    // deletion with nothing to wait for ends in one event, whose object
                    // is that state).
                    if !begun {
                        run.last = Some(obj);
                    }
                    run.deleted |= begun || deleted;
                }
            }
        }
        std::future::pending().await
    }

    /// `live` with the followed runs that are gone or going as their watch last saw them
    /// before that, so a run is judged by how it ended, never by a read that finds
    /// nothing or finds it being deleted; and those of them whose deletion the watch saw.
    pub(super) fn with_followed(
        &self,
        mut live: HashMap<ObjKey, Seen>,
        wanted: &BTreeSet<&ObjKey>,
    ) -> (HashMap<ObjKey, Seen>, BTreeSet<ObjKey>) {
        let followed = self.followed_runs();
        let mut deleted = BTreeSet::new();
        for (key, run) in followed.iter() {
            let going = live
                .get(key)
                .is_none_or(|s| !s.view.value()["metadata"]["deletionTimestamp"].is_null());
            if !wanted.contains(key) || !going {
                continue;
            }
            if let Some(obj) = &run.last {
                let seen = super::live::Listed::of(super::live::Live::of(obj.clone(), &self.opts));
                live.insert(key.clone(), seen.into_seen());
            }
            if run.deleted {
                deleted.insert(key.clone());
            }
        }
        (live, deleted)
    }
}
