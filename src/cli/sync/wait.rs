//! Waiting within `apply`: for readiness, for what prune deleted to be gone, and for
//! Ctrl-C, which ends a wait at once.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::time::Duration;

use driftless::apply::Engine;
use driftless::gate::{Poll, SAY_EVERY};
use driftless::health::{SpecHealth, Status};
use driftless::render::Object;
use driftless::spec::SpecTree;

use super::super::exit;

/// Syncs again (reads, and no writes when nothing changed) until nothing the prune
/// deleted is still being deleted, or `timeout` passes; whether all are gone.
pub(super) async fn wait_for_deletions(
    engine: &Engine,
    tree: &SpecTree,
    objects: &[Object],
    timeout: Duration,
) -> anyhow::Result<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    let gate = Poll {
        engine,
        timeout,
        say: None,
        cancel: None,
    };
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let again = engine.sync(objects, &tree.facts(), &gate).await?;
        let waiting: Vec<String> = again
            .prune
            .waiting()
            .map(|o| format!("{} ({})", o.key, o.waiting.as_deref().unwrap_or("")))
            .collect();
        if waiting.is_empty() {
            eprintln!("every object prune deleted is gone");
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            eprintln!(
                "still being deleted after --timeout {}: {}",
                humantime::format_duration(timeout),
                waiting.join("; ")
            );
            return Ok(false);
        }
    }
}

/// Whether waiting longer cannot help: some spec is not ready, and every spec that is not
/// has objects not ready, each of which failed to apply (`failed`, by object) or is
/// Failed. A spec not ready for no object's sake (none rendered yet) may still become so.
fn hopeless(health: &[SpecHealth], failed: &BTreeSet<String>) -> bool {
    let mut waiting = health.iter().filter(|h| !h.ready).peekable();
    waiting.peek().is_some()
        && waiting.all(|h| {
            let mut not_ready = h
                .objects
                .iter()
                .filter(|o| o.status.status != Status::Current)
                .peekable();
            not_ready.peek().is_some()
                && not_ready
                    .all(|o| o.status.status == Status::Failed || failed.contains(&o.object))
        })
}

/// What `apply` says of a wait between stages, every `SAY_EVERY`: on its own line, also
/// under the terminal's progress line.
pub(super) fn say(line: &str) {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    eprintln!("{line}");
}

/// Polls until every spec is ready or failed, waiting is hopeless (every object not ready
/// failed to apply or is Failed), or `timeout` passes; the last health.
pub(super) async fn wait(
    engine: &Engine,
    tree: &SpecTree,
    objects: &[Object],
    failed: &BTreeSet<String>,
    timeout: Duration,
    interrupt: &Interrupt,
) -> anyhow::Result<Vec<SpecHealth>> {
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let tty = std::io::stderr().is_terminal();
    let expected = driftless::health::expected(objects);
    let mut said_at = started;
    loop {
        let observed = engine.observe(objects).await?;
        let health = driftless::health::tree_health(
            &tree.specs,
            &expected,
            &observed,
            k8s_openapi::jiff::Timestamp::now(),
        );
        let ready = health.iter().filter(|h| h.ready).count();
        let settled = health.iter().all(|h| h.status != Status::InProgress);
        let hopeless = !settled && hopeless(&health, failed);
        if said_at.elapsed() >= SAY_EVERY
            && let Some(first) = health.iter().find(|h| !h.ready)
        {
            said_at = tokio::time::Instant::now();
            let elapsed = Duration::from_secs(started.elapsed().as_secs());
            say(&format!(
                "waiting ({} of {}): {ready}/{} specs ready; {}: {}",
                humantime::format_duration(elapsed),
                humantime::format_duration(timeout),
                health.len(),
                first.id,
                first.message
            ));
        }
        if tty {
            eprint!("\r\x1b[2Kwaiting: {ready}/{} specs ready", health.len());
        }
        let interrupted = interrupt.borrow().is_some();
        if settled || hopeless || interrupted || tokio::time::Instant::now() >= deadline {
            if tty {
                eprintln!();
            }
            if hopeless {
                eprintln!(
                    "stopped waiting: every object not ready failed to apply, was not applied, or is Failed"
                );
            } else if !settled && !interrupted {
                eprintln!(
                    "timed out after {} waiting for readiness",
                    humantime::format_duration(timeout)
                );
            }
            return Ok(health);
        }
        let mut woken = interrupt.clone();
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = woken.changed() => {}
        }
    }
}

/// Why `apply` is to stop, once Ctrl-C said so.
pub(super) type Interrupt = tokio::sync::watch::Receiver<Option<String>>;

/// Listens for Ctrl-C: the first stops the sync at its next safe point (waits end at once,
/// writes under way finish and are recorded, nothing is pruned), a second quits at once.
pub(super) fn on_interrupt() -> Interrupt {
    let (tx, rx) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: Ctrl-C keeps its default, ending at once.
            return;
        }
        eprintln!("\ninterrupted: finishing the writes under way (Ctrl-C again to quit at once)");
        let _ = tx.send(Some("interrupted (Ctrl-C)".to_string()));
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(exit::INTERRUPTED));
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftless::health::{Figures, ObjectHealth, ObjectStatus};

    fn spec(objects: &[(&str, Status)]) -> SpecHealth {
        let ready = objects.iter().all(|(_, s)| *s == Status::Current);
        SpecHealth {
            id: "manifest/ns/x".into(),
            status: if ready {
                Status::Current
            } else {
                Status::InProgress
            },
            ready,
            reason: None,
            message: String::new(),
            figures: Figures::Manifest {},
            objects: objects
                .iter()
                .map(|(o, s)| ObjectHealth {
                    object: o.to_string(),
                    status: ObjectStatus {
                        status: *s,
                        reason: None,
                        message: String::new(),
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn waiting_is_hopeless_only_when_everything_not_ready_has_failed() {
        let failed: BTreeSet<String> = ["Nope.x.example ns/a".to_string()].into();
        let applied_but_failed = spec(&[("Nope.x.example ns/a", Status::NotFound)]);
        let crashing = spec(&[
            ("Pod ns/b", Status::Failed),
            ("Service ns/b", Status::Current),
        ]);
        let starting = spec(&[("Pod ns/c", Status::InProgress)]);
        let ready = spec(&[("ConfigMap ns/d", Status::Current)]);
        let empty = spec(&[]);
        let not_ready_without_objects = SpecHealth {
            ready: false,
            ..empty.clone()
        };

        assert!(hopeless(
            &[applied_but_failed.clone(), ready.clone()],
            &failed
        ));
        assert!(hopeless(
            &[applied_but_failed.clone(), crashing.clone()],
            &failed
        ));
        // Something may still come up: keep waiting.
        assert!(!hopeless(&[applied_but_failed.clone(), starting], &failed));
        assert!(!hopeless(
            &[applied_but_failed, not_ready_without_objects],
            &failed
        ));
        // Everything ready is done, not hopeless.
        assert!(!hopeless(&[ready, empty], &failed));
        // An object that is not ready and did not fail to apply is still being created.
        let absent = spec(&[("ConfigMap ns/e", Status::NotFound)]);
        assert!(!hopeless(&[absent], &failed));
    }
}
