//! The source task: one follow loop for every source (`follow`), which reads it when
//! something says to (a change of the directory, the interval, the hook, a rescan),
//! renders what it read, and sends each new revision or failure to the daemon's loop.
//! While reads fail, a polled source is read less often (the interval, doubling to
//! [`MAX_BACKOFF`]), the last good revision staying in force. What differs between
//! sources is how one is read: each implements [`source::Followed`] in its own module
//! of `source`, and `source::Config` chooses among them.

use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use tokio::sync::{mpsc, oneshot, watch as tokio_watch};

use super::state::{HydrateReport, SourceUpdate};
use crate::hydrate::{Hydrator, Input};
use crate::report::metrics::Metrics;
use crate::report::notify::Origins;
use crate::source::{self, Failure, Followed};
use crate::spec::SourceFile;

/// The hydrate stage as the source task runs it: every revision read is rendered
/// before the loop sees it, off the async threads; its cache lives as long as the task.
#[derive(Clone)]
pub struct Stage {
    pub hydrator: Arc<Hydrator>,
    /// `--allow-mass-prune`: a tree with files but no specs is an uninstall.
    pub allow_empty: bool,
    /// What charts are told of the cluster, as last read.
    pub cluster: crate::hydrate::helm::ClusterFacts,
    /// The cluster, read again before each render: `.Capabilities` follow it (a CRD the
    /// tree installed is seen by the next render), and a chart's `lookup` reads it.
    pub live: Option<Live>,
}

/// What the stage reads of the live cluster.
#[derive(Clone)]
pub struct Live {
    pub client: kube::Client,
    pub lookup: Option<Arc<crate::cluster::lookup::Lookup>>,
    /// The reading of the cluster renders are made for (part of a render's cache key
    /// when it read the cluster): a new one for each new revision and for each render
    /// the loop asks for again ([`Rescan::render_again`]), so a chart's lookups are done
    /// again then; the same one for a read that finds the revision already rendered (a
    /// poll), whose renders are answered from the cache.
    pub readings: Arc<std::sync::atomic::AtomicU64>,
}

/// How long reading the cluster's version and APIs may hold up a render; past it the
/// last ones read are used.
const FACTS_TIMEOUT: Duration = Duration::from_secs(5);

/// A read revision, rendered.
pub(super) type Read = Result<Hydrated, Failure>;

/// A revision as the stage rendered it.
pub(super) struct Hydrated {
    pub id: String,
    /// The files the spec loader reads.
    pub files: Vec<SourceFile>,
    /// What the stage said.
    pub report: HydrateReport,
    /// For a render that read the cluster: what it rendered to, named as a directory's
    /// revision is. Rendered again, the revision is news only if this differs.
    pub rendered_as: Option<String>,
}

/// Whether a render of revision `id` takes a new reading of the cluster: when asked to
/// render again, for a revision other than the one rendered last (`last`), and for a
/// directory's read that follows a change of it (`moved`: a directory's revisions are
/// named by what they render to, so any such read may be a new one); not for a read that
/// finds the revision just rendered (a poll, a hook, a rescan not asked to render again),
/// whose charts then run no more.
fn new_reading(last: Option<&str>, id: Option<&str>, again: bool, moved: bool) -> bool {
    again || id != last || (id.is_none() && moved)
}

/// What a revision renders to, named: the files the spec loader reads, the health rules
/// (which are in no file), and the errors (two broken states of one tree are two
/// revisions, each with its errors).
fn rendered_name(out: &crate::hydrate::Hydrated) -> String {
    let mut id = source::dir::revision_of(&out.files);
    // Rules a render found are in no file it hands on (a Flux Kustomization's lines are
    // taken out): a change of them is a revision too.
    if !out.health.is_empty() {
        let rules: String = out.health.iter().map(|r| r.text()).collect();
        id = format!(
            "{id}-{:08x}",
            crate::spec::names::fnv1a64(rules.bytes()) as u32
        );
    }
    if out.errors.is_empty() && out.held.is_empty() {
        return id;
    }
    let said: String = out
        .errors
        .iter()
        .chain(out.held.iter().map(|h| &h.error))
        .map(|e| format!("{e}\n"))
        .collect();
    format!(
        "{id}-{:08x}",
        crate::spec::names::fnv1a64(said.bytes()) as u32
    )
}

impl Stage {
    /// Renders `revision`; with a new reading of the cluster when `new_reading` (else the
    /// last one, whose renders are in the cache).
    pub(super) async fn hydrate(&self, revision: source::Revision, new_reading: bool) -> Read {
        let this = self.clone();
        let id = revision.id.clone();
        let mut cluster = self.cluster.clone();
        if let Some(live) = &self.live {
            match tokio::time::timeout(FACTS_TIMEOUT, crate::cluster::chart_facts(&live.client))
                .await
            {
                Ok(Ok(fresh)) => {
                    cluster.kube_version = fresh.kube_version;
                    cluster.api_versions = fresh.api_versions;
                }
                Ok(Err(e)) => tracing::warn!(
                    error = %crate::cluster::error_text(&e),
                    "cannot read the cluster's version and APIs for charts; the last ones read are used"
                ),
                Err(_) => tracing::warn!(
                    "the cluster did not say its version and APIs for charts in time; the last ones read are used"
                ),
            }
            cluster.lookup = live
                .lookup
                .as_ref()
                .map(|l| crate::hydrate::stage::LookupAccess {
                    kubeconfig: l.kubeconfig.clone(),
                    reading: match new_reading {
                        true => {
                            live.readings
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                                + 1
                        }
                        false => live.readings.load(std::sync::atomic::Ordering::Relaxed),
                    },
                });
        }
        let input = Input::of(revision, cluster);
        tokio::task::spawn_blocking(move || {
            let out = this.hydrator.hydrate(input);
            let if_empty = (out.had_files && !this.allow_empty).then(|| out.empty_tree_error());
            // A directory's revision is named by what it renders to, so an edit that only
            // a tool reads (a kustomization's `.env`, a base outside the root) is one.
            let rendered_as = out.read_cluster.then(|| rendered_name(&out));
            let id =
                id.unwrap_or_else(|| rendered_as.clone().unwrap_or_else(|| rendered_name(&out)));
            Hydrated {
                id,
                files: out.files,
                report: HydrateReport {
                    errors: out.errors,
                    held: out.held,
                    by: out.rendered,
                    if_empty,
                    health: out.health,
                    notices: out.notices,
                    made_by: out.made_by,
                    rendered_apps: out.rendered_apps,
                    read_cluster: out.read_cluster,
                    destinations: out.destinations,
                },
                rendered_as,
            }
        })
        .await
        .map_err(|e| Failure::new("render", format!("rendering: {e}")))
    }
}

/// A request to read the source again; `done` hears once that read was handed to the
/// loop (so a whole sync queued after it covers what it found).
#[derive(Debug, Default)]
pub(crate) struct Rescan {
    pub done: Option<oneshot::Sender<()>>,
    /// Render the revision again with a new reading of the cluster, even if the source
    /// has not moved, and hand it on if it renders to something else (`State::render_again`).
    pub render_again: bool,
}

/// What the source task talks to the loop (and the HTTP hook) through.
pub(crate) struct Channels {
    pub tx: mpsc::Sender<SourceUpdate>,
    pub rescan: mpsc::Receiver<Rescan>,
    pub hook: mpsc::Receiver<()>,
    pub stop: tokio_watch::Receiver<bool>,
}

/// Starts the source task; returns the source's display name. `origins` hears the commit
/// each revision was built from, when it says (an OCI artifact), for commit statuses.
pub fn start(
    cfg: source::Config,
    stage: Stage,
    channels: Channels,
    origins: Origins,
    metrics: &Metrics,
) -> Result<String, source::OpenError> {
    cfg.open(Start {
        stage,
        channels,
        origins,
        metrics,
    })
}

/// What a source, once opened, is started with.
struct Start<'m> {
    stage: Stage,
    channels: Channels,
    origins: Origins,
    metrics: &'m Metrics,
}

impl source::Follow for Start<'_> {
    type Output = String;

    fn follow<S: Followed>(
        self,
        source: S,
        interval: Option<Duration>,
        changes: Option<mpsc::Receiver<()>>,
    ) -> String {
        for reason in S::REASONS.iter().chain(&["render"]) {
            self.metrics.source_may_fail(S::KIND, reason);
        }
        let name = source.name();
        tokio::spawn(
            follow(
                source,
                interval,
                changes,
                self.stage,
                self.channels,
                self.origins,
            )
            .in_current_span(),
        );
        name
    }
}

/// Fetches the hook starts are at least this far apart. The first hook after a quiet
/// spell fetches at once; hooks that arrive within this of a hook's fetch wait for the
/// next one, which starts after them and so sees their pushes. A flood of hooks (a forge
/// redelivering, a script, an attacker who reaches the port) is then a fetch every few
/// seconds at most, not one for each hook that lands while the previous fetch runs.
pub(super) const HOOK_FETCH_SPACING: Duration = Duration::from_secs(2);

/// The longest wait between polls while the source keeps failing (unless the interval
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

/// The one follow loop: reads `source` at once, then whenever `interval` (polled sources),
/// `changes` (a watched directory), the hook or a rescan says to, until stopped.
async fn follow<S: Followed>(
    source: S,
    interval: Option<Duration>,
    mut changes: Option<mpsc::Receiver<()>>,
    stage: Stage,
    channels: Channels,
    origins: Origins,
) {
    let Channels {
        tx,
        mut rescan,
        mut hook,
        mut stop,
    } = channels;
    let mut last: Option<Sent> = None;
    let mut failures = 0u32;
    let mut next = tokio::time::Instant::now();
    let mut last_hook_fetch: Option<tokio::time::Instant> = None;
    let mut asked: Option<oneshot::Sender<()>> = None;
    // The revision rendered last: a read that finds it again renders from the cache.
    let mut rendered: Option<String> = None;
    let mut first = true;
    loop {
        let mut by_hook = false;
        let mut again = false;
        // The first read, or a directory that says it changed: a new revision, maybe.
        let mut moved = first;
        if !std::mem::take(&mut first) {
            let changed = async {
                match changes.as_mut() {
                    Some(c) => c.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep_until(next), if interval.is_some() => {}
                Some(()) = changed => moved = true,
                Some(()) = hook.recv() => by_hook = true,
                Some(r) = rescan.recv() => (asked, again) = (r.done, r.render_again),
                _ = stop.wait_for(|s| *s) => return,
            }
        }
        if by_hook {
            if let Some(at) = last_hook_fetch {
                tokio::select! {
                    _ = tokio::time::sleep_until(at + HOOK_FETCH_SPACING) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
            // A hook taken while waiting is answered by the read below.
            while hook.try_recv().is_ok() {}
            last_hook_fetch = Some(tokio::time::Instant::now());
            tracing::info!(source = S::KIND, "read requested by the hook");
        }
        // Asked to render again, the revision is wanted even if the source has not moved.
        let read = match source.read(last.is_none() || again).await {
            Ok(Some(revision)) => {
                if let (Some(id), Some(commit)) = (&revision.id, &revision.origin) {
                    origins.record(id, commit);
                }
                let fresh = new_reading(rendered.as_deref(), revision.id.as_deref(), again, moved);
                rendered.clone_from(&revision.id);
                Some(stage.hydrate(revision, fresh).await)
            }
            Ok(None) => None,
            Err(failure) => Some(Err(failure)),
        };
        failures = match &read {
            Some(Err(_)) => failures.saturating_add(1),
            _ => 0,
        };
        if let Some(interval) = interval {
            let wait = next_poll(interval, failures);
            next = tokio::time::Instant::now() + wait;
            if failures > 0 {
                tracing::warn!(
                    source = S::KIND,
                    retry_in = %humantime::format_duration(wait),
                    "the source failed; the last good revision stays in force"
                );
            }
        }
        if let Some(read) = read
            && !report(&tx, &mut last, S::KIND, read, again).await
        {
            return;
        }
        if let Some(done) = asked.take() {
            let _ = done.send(());
        }
    }
}

/// What the follow loop last sent the loop of a revision.
struct Sent {
    id: String,
    /// What it rendered to, when its render read the cluster ([`Hydrated::rendered_as`]).
    rendered_as: Option<String>,
}

/// Sends what a read of the source tells the loop: a revision it has not sent yet (or,
/// rendered `again`, one that renders to something else now), or a failure. After a
/// failure the next good read is sent even if its revision is the same, so the error it
/// replaces is cleared. False once the loop has gone.
async fn report(
    tx: &mpsc::Sender<SourceUpdate>,
    last: &mut Option<Sent>,
    kind: &'static str,
    read: Read,
    again: bool,
) -> bool {
    let update = match read {
        Ok(h) => {
            let news = match last.as_ref() {
                Some(sent) if sent.id == h.id => again && sent.rendered_as != h.rendered_as,
                _ => true,
            };
            news.then(|| {
                *last = Some(Sent {
                    id: h.id.clone(),
                    rendered_as: h.rendered_as,
                });
                SourceUpdate::Revision {
                    id: h.id,
                    files: h.files,
                    rendered: Box::new(h.report),
                }
            })
        }
        Err(Failure {
            message,
            reason,
            revision,
        }) => {
            *last = None;
            Some(SourceUpdate::Failed {
                message,
                source: kind,
                reason,
                revision,
            })
        }
    };
    match update {
        Some(u) => tx.send(u).await.is_ok(),
        None => true,
    }
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

    #[test]
    fn a_poll_that_finds_the_revision_rendered_takes_no_new_reading() {
        // A poll of the commit just rendered: its charts' lookups are not done again.
        assert!(!new_reading(Some("c1"), Some("c1"), false, false));
        // Asked to render again (a resync of a render that read the cluster): they are.
        assert!(new_reading(Some("c1"), Some("c1"), true, false));
        // A new revision, and the first.
        assert!(new_reading(Some("c1"), Some("c2"), false, false));
        assert!(new_reading(None, Some("c1"), false, false));
        // A directory (no id of its own): read after it changed, or first, a new reading;
        // read again by a rescan not asked to render again, none.
        assert!(new_reading(None, None, false, true));
        assert!(!new_reading(None, None, false, false));
        assert!(new_reading(None, None, true, false));
    }

    fn rendered(id: &str, rendered_as: Option<&str>) -> Read {
        Ok(Hydrated {
            id: id.into(),
            files: Vec::new(),
            report: HydrateReport::default(),
            rendered_as: rendered_as.map(str::to_string),
        })
    }

    #[tokio::test]
    async fn a_revision_rendered_again_is_news_only_when_it_renders_to_something_else() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut last = None;
        let mut sent = async |read: Read, again: bool| {
            assert!(report(&tx, &mut last, "git", read, again).await);
            rx.try_recv().ok().map(|u| match u {
                SourceUpdate::Revision { id, .. } => id,
                SourceUpdate::Failed { message, .. } => message,
            })
        };
        assert_eq!(
            sent(rendered("c1", Some("x")), false).await.as_deref(),
            Some("c1")
        );
        // A poll of the same commit, and a render again to the same output: nothing.
        assert_eq!(sent(rendered("c1", Some("x")), false).await, None);
        assert_eq!(sent(rendered("c1", Some("x")), true).await, None);
        // Rendered again to something else (what a lookup read changed): news.
        assert_eq!(
            sent(rendered("c1", Some("y")), true).await.as_deref(),
            Some("c1")
        );
        // A render that read no cluster is never news again for it.
        assert_eq!(
            sent(rendered("c2", None), false).await.as_deref(),
            Some("c2")
        );
        assert_eq!(sent(rendered("c2", None), true).await, None);
    }
}
