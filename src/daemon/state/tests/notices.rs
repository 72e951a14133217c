//! When the state tells people: once per transition, never in steady state.

use super::*;
use crate::report::notify::Event;

/// The health a refresh computed, taken as the loop takes it.
fn refreshed(state: &mut State, healths: Vec<SpecHealth>, at: Now) {
    state.take_health(healths, Duration::from_secs(60), at);
    state.health_dirty = false;
}

fn told(state: &mut State) -> Vec<(Event, Option<String>)> {
    state
        .take_notices(now())
        .into_iter()
        .map(|n| (n.event, n.revision))
        .collect()
}

fn event(e: Event, revision: &str) -> (Event, Option<String>) {
    (e, Some(revision.to_string()))
}

fn both_ready() -> Vec<SpecHealth> {
    vec![health("a", Status::Current), health("b", Status::Current)]
}

fn a_waiting() -> Vec<SpecHealth> {
    vec![
        health("a", Status::InProgress),
        health("b", Status::Current),
    ]
}

#[test]
fn a_revision_is_told_ready_once_when_every_spec_is() {
    let mut state = applied();
    // Synced, but readiness not refreshed since: nothing to tell yet.
    assert_eq!(told(&mut state), []);
    refreshed(&mut state, a_waiting(), now());
    assert_eq!(told(&mut state), []);
    refreshed(&mut state, both_ready(), now());
    assert_eq!(told(&mut state), [event(Event::RevisionReady, "r1")]);
    // Steady state, and a spec that dips and comes back: no news.
    assert_eq!(told(&mut state), []);
    refreshed(&mut state, a_waiting(), now());
    assert_eq!(told(&mut state), []);
    refreshed(&mut state, both_ready(), now());
    assert_eq!(told(&mut state), []);
}

#[test]
fn the_first_sync_of_a_revision_is_told_once() {
    let mut state = with_nodes();
    assert!(state.on_sync_start(now()).is_none(), "no revision yet");
    state.on_source(
        revision("r1", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
    let started = state.on_sync_start(now()).expect("told");
    assert_eq!(
        (started.event, started.revision.as_deref()),
        (Event::SyncStarted, Some("r1"))
    );
    assert!(state.on_sync_start(now()).is_none(), "a retry is not news");
}

#[test]
fn an_invalid_revision_is_told_with_its_errors_and_the_fix_is_a_recovery() {
    let mut state = applied();
    refreshed(&mut state, both_ready(), now());
    assert_eq!(told(&mut state), [event(Event::RevisionReady, "r1")]);

    let broken = files(&[("bad.toml", "[workspace.ide]\nimage = 42\n")]);
    state.on_source(revision("r2", broken.clone()), &Policy::default(), now());
    let notices = state.take_notices(now());
    assert_eq!(notices.len(), 1);
    let n = &notices[0];
    assert_eq!(
        (n.event, n.revision.as_deref()),
        (Event::RevisionInvalid, Some("r2"))
    );
    assert_eq!(n.errors[0].file.as_deref(), Some("bad.toml"));
    assert_eq!(n.errors[0].line, Some(2));
    assert_eq!(told(&mut state), [], "told once");
    // Another broken revision is news of its own.
    state.on_source(revision("r3", broken), &Policy::default(), now());
    assert_eq!(told(&mut state), [event(Event::RevisionInvalid, "r3")]);

    // The fix changes no spec of r1: applied at once, ready as before, a recovery.
    state.on_source(
        revision("r4", webs(&[("a", 100), ("b", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(told(&mut state), [event(Event::Recovered, "r4")]);
    assert_eq!(told(&mut state), []);
}

#[test]
fn a_failing_sync_is_told_once_however_often_it_is_retried() {
    let mut state = applied();
    refreshed(&mut state, both_ready(), now());
    told(&mut state);
    state.on_source(
        revision("r2", webs(&[("a", 200), ("b", 100)])),
        &Policy::default(),
        now(),
    );
    for _ in 0..3 {
        state.on_sync_done(
            &[spec("a")],
            ran(vec![result("a", Action::Failed("denied".into()))], None),
            now(),
        );
    }
    let notices = state.take_notices(now());
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(
        (notices[0].event, notices[0].revision.as_deref()),
        (Event::SyncFailed, Some("r2"))
    );
    assert_eq!(notices[0].specs, [id("a").to_string()]);
    assert_eq!(
        notices[0].message,
        "1 object not applied: Deployment.apps n/a: denied"
    );
    state.on_sync_done(
        &[spec("a")],
        ran(vec![result("a", Action::Failed("denied".into()))], None),
        now(),
    );
    assert_eq!(told(&mut state), []);

    // The retry that works, then readiness: recovered.
    state.on_sync_done(
        &[spec("a")],
        ran(vec![result("a", Action::Configured)], None),
        now(),
    );
    assert_eq!(told(&mut state), [], "not ready yet");
    refreshed(&mut state, both_ready(), now());
    assert_eq!(told(&mut state), [event(Event::Recovered, "r2")]);
}

#[test]
fn a_refused_prune_is_told() {
    let mut state = applied();
    state.on_source(revision("r2", webs(&[])), &Policy::default(), now());
    state.on_sync_done(
        &[spec("a"), spec("b")],
        ran(Vec::new(), Some("would prune 2 of 2 objects")),
        now(),
    );
    let notices = state.take_notices(now());
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].event, Event::PruneRefused);
    assert_eq!(notices[0].message, "would prune 2 of 2 objects");
}

#[test]
fn specs_not_ready_in_time_are_told_with_their_ids() {
    let mut state = applied();
    let start = now();
    state.applied_at = Some(start.at);
    let later = Now {
        at: start.at + Duration::from_secs(61),
        ..start
    };
    refreshed(&mut state, a_waiting(), later);
    let notices = state.take_notices(now());
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].event, Event::NotReady);
    assert_eq!(notices[0].specs, [id("a").to_string()]);
    assert!(
        notices[0].message.contains("not ready 60s after"),
        "{}",
        notices[0].message
    );
    refreshed(&mut state, a_waiting(), later);
    assert_eq!(told(&mut state), []);
    refreshed(&mut state, both_ready(), later);
    assert_eq!(told(&mut state), [event(Event::Recovered, "r1")]);
}

#[test]
fn a_standby_tells_nothing() {
    let mut state = applied();
    state.on_leadership(false);
    refreshed(&mut state, both_ready(), now());
    assert_eq!(told(&mut state), []);
    assert!(state.on_sync_start(now()).is_none());
}
