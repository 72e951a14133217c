//! The source task for an OCI artifact: polls the tag (one manifest request when nothing
//! moved), at once on `POST /hooks/oci`, and less often while the registry fails, the
//! last good revision staying in force meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Channels, HOOK_FETCH_SPACING, Read, Rendering, report};
use crate::hydrate::{Input, OnDisk};
use crate::report::notify::{Origins, commit_of_origin};
use crate::source::oci::{Fetched, OciSource, Revision};

/// The longest wait between polls while the registry keeps failing (unless the interval
/// itself is longer).
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The wait before the next poll after `failures` failed polls in a row: the interval,
/// then doubling from it, to [`MAX_BACKOFF`] (or the interval, when that is longer).
pub(super) fn next_poll(interval: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return interval;
    }
    let doubled = interval.saturating_mul(1u32 << (failures - 1).min(16));
    doubled.min(MAX_BACKOFF.max(interval))
}

pub(super) async fn follow(
    oci: Arc<OciSource>,
    rendering: Rendering,
    interval: Duration,
    origins: Origins,
    channels: Channels,
) {
    let Channels {
        tx,
        mut rescan,
        mut hook,
        mut stop,
    } = channels;
    let mut last: Option<String> = None;
    let mut failures = 0u32;
    let mut next = Instant::now();
    let mut last_hook_fetch: Option<Instant> = None;
    loop {
        let mut asked = None;
        let mut by_hook = false;
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            Some(()) = hook.recv() => by_hook = true,
            Some(r) = rescan.recv() => asked = r.done,
            _ = stop.wait_for(|s| *s) => return,
        }
        if by_hook {
            if let Some(at) = last_hook_fetch {
                tokio::select! {
                    _ = tokio::time::sleep_until(at + HOOK_FETCH_SPACING) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
            while hook.try_recv().is_ok() {}
            last_hook_fetch = Some(Instant::now());
            tracing::info!("pull requested by the OCI hook");
        }
        let read: Option<Read> = match oci.fetch().await {
            Ok(Fetched::New(rev)) => {
                if let Some(commit) = rev
                    .annotations
                    .get(crate::source::oci::ANNOTATION_REVISION)
                    .and_then(|r| commit_of_origin(r))
                {
                    origins.record(&rev.id, &commit);
                }
                tracing::info!(
                    source = %oci.display(),
                    revision = %rev.id,
                    origin = rev.annotations.get(crate::source::oci::ANNOTATION_SOURCE).map(String::as_str).unwrap_or(""),
                    origin_revision = rev.annotations.get(crate::source::oci::ANNOTATION_REVISION).map(String::as_str).unwrap_or(""),
                    "pulled a new artifact"
                );
                Some(read(&oci, &rendering, rev).await)
            }
            // After a failure the unchanged revision is sent again, so that it clears the
            // error; otherwise nothing moved and nothing is read or rendered.
            Ok(Fetched::Unchanged(rev)) if last.is_none() => {
                Some(read(&oci, &rendering, rev).await)
            }
            Ok(Fetched::Unchanged(_)) => None,
            Err(e) => Some(Err(e.to_string())),
        };
        failures = match &read {
            Some(Err(_)) => failures.saturating_add(1),
            _ => 0,
        };
        next = Instant::now() + next_poll(interval, failures);
        if failures > 0 {
            tracing::warn!(
                source = %oci.display(),
                retry_in = %humantime::format_duration(next_poll(interval, failures)),
                "the OCI source failed; the last good revision stays in force"
            );
        }
        if let Some(read) = read
            && !report(&tx, &mut last, read).await
        {
            return;
        }
        if let Some(done) = asked {
            let _ = done.send(());
        }
    }
}

/// The unpacked artifact (its `--path`), read as a directory is, and rendered.
/// Kustomize bases may reach the whole artifact's tree, as they reach a git repository.
async fn read(oci: &OciSource, rendering: &Rendering, rev: Revision) -> Read {
    let root = oci.spec_root(&rev).map_err(|e| e.to_string())?;
    let tree = rev.dir.clone();
    let input = tokio::task::spawn_blocking(move || {
        let (files, unread) = crate::spec::read_dir_all(&root).map_err(|e| e.to_string())?;
        let disk = OnDisk {
            root: root
                .canonicalize()
                .map_err(|e| format!("{}: {e}", root.display()))?,
            repo: tree,
        };
        Ok::<_, String>(Input {
            files,
            unread,
            disk: Some(disk),
            ..Input::default()
        })
    })
    .await
    .map_err(|e| format!("reading the artifact: {e}"))??;
    rendering.render(Some(rev.id), input).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_back_off_while_failing_and_return_to_the_interval() {
        let s = Duration::from_secs;
        assert_eq!(next_poll(s(60), 0), s(60));
        assert_eq!(next_poll(s(60), 1), s(60));
        assert_eq!(next_poll(s(60), 2), s(120));
        assert_eq!(next_poll(s(60), 3), s(240));
        assert_eq!(next_poll(s(60), 4), s(300));
        assert_eq!(next_poll(s(60), 40), s(300));
        // An interval longer than the cap is never shortened.
        assert_eq!(next_poll(s(3600), 5), s(3600));
        assert_eq!(next_poll(s(1), 3), s(4));
    }
}
