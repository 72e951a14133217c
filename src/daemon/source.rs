//! The source task: reads the directory (on every change and rescan) or fetches the git
//! repository (every interval, on the hook, on rescan), and sends each new revision or
//! failure to the loop.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch as tokio_watch};

use super::state::SourceUpdate;
use super::{DaemonError, SourceConfig};
use crate::source;
use crate::spec::SourceFile;

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
        let read = source::dir::read(&root).map_err(|e| e.to_string());
        if !report(&tx, &mut last, read).await {
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
        let read = source::git::fetch(git.clone())
            .await
            .map(|rev| (rev.commit, rev.files))
            .map_err(|e| e.to_string());
        if !report(&tx, &mut last, read).await {
            return;
        }
    }
}

/// Sends what a read of the source tells the loop: a revision it has not sent yet, or a
/// failure. After a failure the next good read is sent even if its revision is the same,
/// so the error it replaces is cleared. False once the loop has gone.
async fn report(
    tx: &mpsc::Sender<SourceUpdate>,
    last: &mut Option<String>,
    read: Result<(String, Vec<SourceFile>), String>,
) -> bool {
    let update = match read {
        Ok((id, files)) => (last.as_ref() != Some(&id)).then(|| {
            *last = Some(id.clone());
            SourceUpdate::Revision { id, files }
        }),
        Err(message) => {
            *last = None;
            Some(SourceUpdate::Failed { message })
        }
    };
    match update {
        Some(u) => tx.send(u).await.is_ok(),
        None => true,
    }
}
