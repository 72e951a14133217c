//! The source task: reads the directory (on every change and rescan) or fetches the git
//! repository (every interval, on the hook, on rescan), and sends each new revision or
//! failure to the loop.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch as tokio_watch};

use super::state::SourceUpdate;
use super::{DaemonError, SourceConfig};
use crate::source;

/// Starts the source task; returns the source's display name.
pub fn start(
    cfg: SourceConfig,
    tx: mpsc::Sender<SourceUpdate>,
    rescan: mpsc::Receiver<()>,
    hook: mpsc::Receiver<()>,
    stop: tokio_watch::Receiver<bool>,
) -> Result<String, DaemonError> {
    match cfg {
        SourceConfig::Dir(root) => {
            let (watch, changes) = source::dir::watch(&root, Duration::from_millis(200))?;
            let name = format!("dir:{}", root.display());
            tokio::spawn(async move {
                let _watch = watch;
                follow_dir(root, tx, changes, rescan, stop).await;
            });
            Ok(name)
        }
        SourceConfig::Git { config, interval } => {
            let git = Arc::new(source::git::GitSource::open(config)?);
            let name = git.display_url();
            tokio::spawn(follow_git(git, interval, tx, rescan, hook, stop));
            Ok(name)
        }
    }
}

async fn follow_dir(
    root: std::path::PathBuf,
    tx: mpsc::Sender<SourceUpdate>,
    mut changes: mpsc::Receiver<()>,
    mut rescan: mpsc::Receiver<()>,
    mut stop: tokio_watch::Receiver<bool>,
) {
    let mut last: Option<String> = None;
    loop {
        let update = match source::dir::read(&root) {
            Ok((id, files)) => (last.as_ref() != Some(&id)).then(|| {
                last = Some(id.clone());
                SourceUpdate::Revision { id, files }
            }),
            Err(crate::spec::LoadError::Invalid(errors)) => {
                last = None;
                Some(SourceUpdate::Failed {
                    message: errors.to_string(),
                })
            }
            Err(e) => {
                last = None;
                Some(SourceUpdate::Failed {
                    message: e.to_string(),
                })
            }
        };
        if let Some(u) = update
            && tx.send(u).await.is_err()
        {
            return;
        }
        tokio::select! {
            Some(()) = changes.recv() => {}
            Some(()) = rescan.recv() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

async fn follow_git(
    git: Arc<source::git::GitSource>,
    interval: Duration,
    tx: mpsc::Sender<SourceUpdate>,
    mut rescan: mpsc::Receiver<()>,
    mut hook: mpsc::Receiver<()>,
    mut stop: tokio_watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval);
    let mut last: Option<String> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            Some(()) = hook.recv() => tracing::info!("fetch requested by the git hook"),
            Some(()) = rescan.recv() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let update = match source::git::fetch(git.clone()).await {
            Ok(rev) => (last.as_ref() != Some(&rev.commit)).then(|| {
                last = Some(rev.commit.clone());
                SourceUpdate::Revision {
                    id: rev.commit,
                    files: rev.files,
                }
            }),
            Err(e) => {
                // The next good fetch is reported even if its commit is the same, so the
                // error it replaces is cleared.
                last = None;
                Some(SourceUpdate::Failed {
                    message: e.to_string(),
                })
            }
        };
        if let Some(u) = update
            && tx.send(u).await.is_err()
        {
            return;
        }
    }
}
