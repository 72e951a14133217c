//! The source task: reads the directory (on every change and rescan) or fetches the git
//! repository (every interval, on the hook, on rescan), and sends each new revision or
//! failure to the loop. An OCI artifact's follow loop is its own (`oci`), with a backoff.

mod oci;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch as tokio_watch};

use super::state::{Rendering as Rendered, SourceUpdate};
use super::{DaemonError, SourceConfig};
use crate::hydrate::{Input, OnDisk, Renderer};
use crate::source;
use crate::spec::SourceFile;

/// The rendering stage as the source task runs it: every revision read is rendered
/// before the loop sees it, off the async threads; its cache lives as long as the task.
#[derive(Clone)]
pub struct Rendering {
    pub renderer: Arc<Renderer>,
    /// `--allow-mass-prune`: a tree with files but no specs is an uninstall.
    pub allow_empty: bool,
    /// What charts are told of the cluster, read once at start.
    pub cluster: crate::hydrate::helm::ClusterFacts,
}

/// A read revision, rendered: its id, the files the spec loader reads, and what the stage
/// said.
pub(super) type Read = Result<(String, Vec<SourceFile>, Rendered), String>;

impl Rendering {
    pub(super) async fn render(&self, id: Option<String>, input: Input) -> Read {
        let this = self.clone();
        let input = Input {
            cluster: self.cluster.clone(),
            ..input
        };
        tokio::task::spawn_blocking(move || {
            let out = this.renderer.render(input);
            let if_empty = (out.had_files && !this.allow_empty).then(|| out.empty_tree_error());
            // A directory's revision is named by what it renders to, so an edit that only
            // a tool reads (a kustomization's `.env`, a base outside the root) is one.
            let id = id.unwrap_or_else(|| {
                let id = source::dir::revision_of(&out.files);
                match out.errors.is_empty() {
                    true => id,
                    // Two broken states of one tree are two revisions, each with its errors.
                    false => {
                        let said: String = out.errors.iter().map(|e| format!("{e}\n")).collect();
                        format!(
                            "{id}-{:08x}",
                            crate::spec::names::fnv1a64(said.bytes()) as u32
                        )
                    }
                }
            });
            (
                id,
                out.files,
                Rendered {
                    errors: out.errors,
                    by: out.rendered,
                    if_empty,
                },
            )
        })
        .await
        .map_err(|e| format!("rendering: {e}"))
    }
}

/// A request to read the source again; `done` hears once that read was handed to the
/// loop (so a whole sync queued after it covers what it found).
#[derive(Debug, Default)]
pub struct Rescan {
    pub done: Option<oneshot::Sender<()>>,
}

/// What the source task talks to the loop (and the HTTP hook) through.
pub struct Channels {
    pub tx: mpsc::Sender<SourceUpdate>,
    pub rescan: mpsc::Receiver<Rescan>,
    pub hook: mpsc::Receiver<()>,
    pub stop: tokio_watch::Receiver<bool>,
}

/// Starts the source task; returns the source's display name. `origins` hears the commit
/// each OCI revision was built from, for commit statuses.
pub fn start(
    cfg: SourceConfig,
    rendering: Rendering,
    channels: Channels,
    origins: crate::report::notify::Origins,
) -> Result<String, DaemonError> {
    let Channels {
        tx,
        rescan,
        hook,
        stop,
    } = channels;
    match cfg {
        SourceConfig::Dir(root) => {
            let (watch, changes) = source::dir::watch(&root, Duration::from_millis(200))?;
            let name = format!("dir:{}", root.display());
            tokio::spawn(async move {
                let _watch = watch;
                follow_dir(root, rendering, tx, changes, rescan, stop).await;
            });
            Ok(name)
        }
        SourceConfig::Git { config, interval } => {
            let git = Arc::new(source::git::GitSource::open(config)?);
            let name = git.display_url();
            tokio::spawn(follow_git(git, rendering, interval, tx, rescan, hook, stop));
            Ok(name)
        }
        SourceConfig::Oci { config, interval } => {
            let oci = Arc::new(source::oci::OciSource::open(config)?);
            let name = oci.display();
            tokio::spawn(oci::follow(
                oci,
                rendering,
                interval,
                origins,
                Channels {
                    tx,
                    rescan,
                    hook,
                    stop,
                },
            ));
            Ok(name)
        }
    }
}

async fn follow_dir(
    root: std::path::PathBuf,
    rendering: Rendering,
    tx: mpsc::Sender<SourceUpdate>,
    mut changes: mpsc::Receiver<()>,
    mut rescan: mpsc::Receiver<Rescan>,
    mut stop: tokio_watch::Receiver<bool>,
) {
    let mut last: Option<String> = None;
    let mut asked: Option<oneshot::Sender<()>> = None;
    loop {
        let read = match read_dir(&root) {
            Ok(input) => rendering.render(None, input).await,
            Err(e) => Err(e),
        };
        if !report(&tx, &mut last, read).await {
            return;
        }
        if let Some(done) = asked.take() {
            let _ = done.send(());
        }
        tokio::select! {
            Some(()) = changes.recv() => {}
            Some(r) = rescan.recv() => asked = r.done,
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The directory's files, as the rendering stage takes them.
fn read_dir(root: &std::path::Path) -> Result<Input, String> {
    let (files, unread) = crate::spec::read_dir_all(root).map_err(|e| e.to_string())?;
    let disk = OnDisk::for_dir(root).map_err(|e| format!("spec root {}: {e}", root.display()))?;
    Ok(Input {
        files,
        unread,
        disk: Some(disk),
        ..Input::default()
    })
}

/// Fetches the git hook starts are at least this far apart. The first hook after a quiet
/// spell fetches at once; hooks that arrive within this of a hook's fetch wait for the
/// next one, which starts after them and so sees their pushes. A flood of hooks (a forge
/// redelivering, a script, an attacker who reaches the port) is then a fetch every few
/// seconds at most, not one for each hook that lands while the previous fetch runs.
pub(super) const HOOK_FETCH_SPACING: Duration = Duration::from_secs(2);

async fn follow_git(
    git: Arc<source::git::GitSource>,
    rendering: Rendering,
    interval: Duration,
    tx: mpsc::Sender<SourceUpdate>,
    mut rescan: mpsc::Receiver<Rescan>,
    mut hook: mpsc::Receiver<()>,
    mut stop: tokio_watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval);
    let mut last: Option<String> = None;
    let mut last_hook_fetch: Option<tokio::time::Instant> = None;
    loop {
        let mut asked = None;
        let mut by_hook = false;
        tokio::select! {
            _ = ticker.tick() => {}
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
            // A hook taken while waiting is answered by the fetch below.
            while hook.try_recv().is_ok() {}
            last_hook_fetch = Some(tokio::time::Instant::now());
            tracing::info!("fetch requested by the git hook");
        }
        let read = match source::git::fetch(git.clone()).await {
            Ok(rev) => {
                let input = Input {
                    files: rev.files,
                    unread: rev.unread,
                    disk: rev.disk,
                    ..Input::default()
                };
                rendering.render(Some(rev.commit), input).await
            }
            Err(e) => Err(e.to_string()),
        };
        if !report(&tx, &mut last, read).await {
            return;
        }
        if let Some(done) = asked {
            let _ = done.send(());
        }
    }
}

/// Sends what a read of the source tells the loop: a revision it has not sent yet, or a
/// failure. After a failure the next good read is sent even if its revision is the same,
/// so the error it replaces is cleared. False once the loop has gone.
pub(super) async fn report(
    tx: &mpsc::Sender<SourceUpdate>,
    last: &mut Option<String>,
    read: Read,
) -> bool {
    let update = match read {
        Ok((id, files, rendered)) => (last.as_ref() != Some(&id)).then(|| {
            *last = Some(id.clone());
            SourceUpdate::Revision {
                id,
                files,
                rendered,
            }
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
