//! The readiness gate between a sync's stages (`apply::stages`), shared by the daemon
//! and `driftless apply`: polls the stage's objects until each is ready (kstatus), one
//! has failed, or the time given runs out. The daemon's own gate (`Steered`) also ends a
//! wait at once when its sync is cancelled, bounds every wait by the sync's deadline, and
//! keeps what the sync is doing where the status reads it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::apply::{Engine, Gate, Readiness, Step};
use crate::health::{Status, kstatus};
use crate::render::Object;
use crate::report::status::SyncProgress;

pub struct Poll<'a> {
    pub engine: &'a Engine,
    /// How long one stage may take to be ready.
    pub timeout: Duration,
    /// Told every `SAY_EVERY` of a wait what it waits on, so a person running `apply`
    /// never faces minutes of silence.
    pub say: Option<fn(&str)>,
    /// Why the sync is to stop (`apply` interrupted by Ctrl-C), once it is.
    pub cancel: Option<watch::Receiver<Option<String>>>,
}

/// How often `Poll::say` hears of a wait.
pub const SAY_EVERY: Duration = Duration::from_secs(10);

impl Gate for Poll<'_> {
    async fn ready(&self, objects: &[Object]) -> Readiness {
        let started = Instant::now();
        let said_at = Mutex::new(started);
        let limit = humantime::format_duration(self.timeout);
        let mut cancel = self.cancel.clone();
        poll(
            self.engine,
            objects,
            self.timeout,
            cancel.as_mut(),
            |said| {
                let Some(say) = self.say else {
                    return;
                };
                let mut at = match said_at.lock() {
                    Ok(at) => at,
                    Err(poisoned) => poisoned.into_inner(),
                };
                if at.elapsed() >= SAY_EVERY {
                    *at = Instant::now();
                    let elapsed = Duration::from_secs(started.elapsed().as_secs());
                    say(&format!(
                        "waiting ({} of {limit}) for {said}",
                        humantime::format_duration(elapsed)
                    ));
                }
            },
        )
        .await
    }

    fn cancelled(&self) -> Option<String> {
        self.cancel.as_ref().and_then(|c| c.borrow().clone())
    }
}

/// What a running sync is doing, shared by its task (which writes it) and the loop
/// (which shows it in the status).
pub(crate) type Progress = Arc<Mutex<SyncProgress>>;

/// The daemon's gate for one sync: `Poll`, cut short when the loop cancels the sync
/// (`cancel` holds why) or it has not moved for `sync_timeout`, and telling `progress` as
/// it goes.
pub(crate) struct Steered<'a> {
    pub engine: &'a Engine,
    /// How long one stage may take to be ready (`--ready-timeout`).
    pub stage_timeout: Duration,
    /// How long the sync may go without moving (`--sync-timeout`).
    pub sync_timeout: Duration,
    /// When it last moved: started, applied or pruned an object, saw a stage ready.
    pub moved: Moved,
    pub cancel: watch::Receiver<Option<String>>,
    pub progress: Progress,
}

/// When a sync last moved, shared by its gate (which moves it) and the task that stops a
/// sync that stands still.
#[derive(Debug, Clone)]
pub(crate) struct Moved(Arc<Mutex<Instant>>);

impl Moved {
    pub fn now() -> Moved {
        Moved(Arc::new(Mutex::new(Instant::now())))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        // A poisoned lock only means a panic elsewhere; the instant is still plain data.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn mark(&self) {
        *self.lock() = Instant::now();
    }

    /// When the sync stops if it does not move again: `limit` after it last did. A large
    /// first apply that keeps going is never cut short; one the API no longer answers is.
    pub fn deadline(&self, limit: Duration) -> Instant {
        *self.lock() + limit
    }
}

impl Steered<'_> {
    fn update(&self, f: impl FnOnce(&mut SyncProgress)) {
        // A poisoned lock only means a panic elsewhere; the progress is still plain data.
        let mut p = match self.progress.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut p);
    }
}

impl Gate for Steered<'_> {
    async fn ready(&self, objects: &[Object]) -> Readiness {
        if let Some(why) = self.cancelled() {
            return Readiness::NotReady(why);
        }
        // Each stage's wait is bounded by what is left of the sync's time.
        let left = self
            .moved
            .deadline(self.sync_timeout)
            .saturating_duration_since(Instant::now());
        let mut cancel = self.cancel.clone();
        let started = Instant::now();
        let waited = poll(
            self.engine,
            objects,
            self.stage_timeout.min(left),
            Some(&mut cancel),
            |said| {
                self.update(|p| {
                    p.phase = "waiting".into();
                    p.waiting_on = Some(said.to_string());
                    p.waiting_seconds = started.elapsed().as_secs();
                })
            },
        )
        .await;
        self.update(|p| {
            p.waiting_on = None;
            p.waiting_seconds = 0;
        });
        if matches!(waited, Readiness::Ready) {
            self.moved.mark();
        }
        match self.cancelled() {
            Some(why) => Readiness::NotReady(why),
            None => waited,
        }
    }

    fn cancelled(&self) -> Option<String> {
        if let Some(why) = self.cancel.borrow().clone() {
            return Some(why);
        }
        (Instant::now() >= self.moved.deadline(self.sync_timeout)).then(|| {
            format!(
                "the sync made no progress for {} (--sync-timeout)",
                humantime::format_duration(self.sync_timeout)
            )
        })
    }

    fn progress(&self, step: Step) {
        if !matches!(step, Step::Waiting { .. }) {
            self.moved.mark();
        }
        self.update(|p| match step {
            Step::Planned { objects } => {
                p.phase = "applying".into();
                p.total = objects as u64;
                p.applied = 0;
            }
            Step::Applied => {
                p.phase = "applying".into();
                p.applied = p.applied.saturating_add(1);
                p.waiting_for = None;
            }
            Step::Waiting { stage } => {
                p.phase = "waiting".into();
                p.waiting_for = Some(stage);
            }
            Step::Pruning { objects } => {
                p.phase = "pruning".into();
                p.pruning = objects as u64;
                p.waiting_for = None;
            }
        });
    }
}

/// Polls `objects` until all are ready, one failed, `timeout` passed, or `cancel` (if
/// given) says the sync stops; `waiting` hears what is not ready yet after each poll.
async fn poll(
    engine: &Engine,
    objects: &[Object],
    timeout: Duration,
    mut cancel: Option<&mut watch::Receiver<Option<String>>>,
    waiting_on: impl Fn(&str),
) -> Readiness {
    let deadline = Instant::now() + timeout;
    loop {
        let late = Instant::now() >= deadline;
        let read = engine.observe(objects);
        let observed = match cancel.as_deref_mut() {
            Some(rx) => tokio::select! {
                o = read => o,
                why = cancelled(rx) => return Readiness::NotReady(why),
            },
            None => read.await,
        };
        let waiting = match observed {
            Ok(observed) => {
                let now = Timestamp::now();
                let mut waiting = None;
                for o in objects {
                    let live = observed.objects.get(&o.key()).map(|s| s.view.value());
                    let status =
                        kstatus::compute_with(live.as_ref(), now, o.policy.health.as_deref());
                    let said = match &status.reason {
                        Some(r) => format!("{} [{r}]: {}", o.display_ref(), status.message),
                        None => format!("{}: {}", o.display_ref(), status.message),
                    };
                    match status.status {
                        Status::Current => {}
                        Status::Failed => return Readiness::Failed(said),
                        // A run deleted before it was seen to end never will: said now,
                        // not at the timeout.
                        _ if observed.deleted.contains(&o.key()) => {
                            let last = match &live {
                                Some(_) => format!(" (last seen: {})", status.message),
                                None => String::new(),
                            };
                            return Readiness::Failed(format!(
                                "{} was deleted before it was seen to finish{last}",
                                o.display_ref()
                            ));
                        }
                        _ => {
                            waiting.get_or_insert(said);
                        }
                    }
                }
                waiting
            }
            Err(e) => Some(format!("reading its objects: {e}")),
        };
        match waiting {
            None => return Readiness::Ready,
            Some(said) if late => {
                return Readiness::NotReady(format!(
                    "not ready within {}: {said}",
                    humantime::format_duration(timeout)
                ));
            }
            Some(said) => {
                waiting_on(&said);
                let pause = tokio::time::sleep(Duration::from_millis(500));
                match cancel.as_deref_mut() {
                    Some(rx) => tokio::select! {
                        () = pause => {}
                        why = cancelled(rx) => return Readiness::NotReady(why),
                    },
                    None => pause.await,
                }
            }
        }
    }
}

/// Resolves once the sync is cancelled, with why; never when the canceller is gone
/// without a word (the sync then runs to its own end).
async fn cancelled(rx: &mut watch::Receiver<Option<String>>) -> String {
    let why = rx.wait_for(Option::is_some).await.map(|why| why.clone());
    match why {
        Ok(why) => why.unwrap_or_default(),
        Err(_) => std::future::pending().await,
    }
}
