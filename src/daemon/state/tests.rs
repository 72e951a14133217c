//! The state's decisions, without a cluster: which keys each input queues, and when a
//! revision counts as applied.

use serde_json::json;

use super::readiness::HealthNews;
use super::*;
use crate::apply::prune;
use crate::apply::{Action, ObjectResult, SyncReport};
use crate::daemon::watch;
use crate::health::{Figures, Status};
use crate::object::Packed;
use crate::spec::{Kind, Policy, SourceFile, parse_files};

fn files(list: &[(&str, &str)]) -> Vec<SourceFile> {
    list.iter()
        .map(|(path, text)| SourceFile {
            path: path.to_string(),
            contents: text.as_bytes().to_vec(),
        })
        .collect()
}

fn tree(list: &[(&str, &str)]) -> SpecTree {
    parse_files(&files(list)).expect("valid specs")
}

fn web(name: &str, qps: u32) -> String {
    format!("[elasticweb.{name}]\nimage = \"nginx\"\nsingle-pod-qps = 100\ntotal-qps = {qps}\n")
}

/// A one-file revision of elasticwebs in namespace `n`, each with its total QPS.
fn webs(webs: &[(&str, u32)]) -> Vec<SourceFile> {
    webs_after("", webs)
}

/// [`webs`] with `head` (comments, blank lines) before the file's first line.
fn webs_after(head: &str, webs: &[(&str, u32)]) -> Vec<SourceFile> {
    let body: String = webs.iter().map(|(name, qps)| web(name, *qps)).collect();
    files(&[("web.toml", &format!("{head}namespace = \"n\"\n{body}"))])
}

fn revision(id: &str, files: Vec<SourceFile>) -> SourceUpdate {
    SourceUpdate::Revision {
        id: id.into(),
        files,
        rendered: Default::default(),
    }
}

/// Revision `id` arrives from the source, under the default policy.
fn new_revision(state: &mut State, id: &str, files: Vec<SourceFile>) -> (Vec<Key>, Tally) {
    state.on_source(revision(id, files), &Policy::default(), now())
}

fn ids(set: &BTreeSet<SpecId>) -> Vec<String> {
    set.iter().map(SpecId::to_string).collect()
}

fn id(name: &str) -> SpecId {
    SpecId {
        kind: Kind::ElasticWeb,
        namespace: "n".into(),
        name: name.into(),
    }
}

fn spec(name: &str) -> Key {
    Key::Spec(id(name))
}

fn now() -> Now {
    Now {
        at: Instant::now(),
        wall: Timestamp::from_second(1_700_000_000).unwrap_or_default(),
    }
}

fn deployment(name: &str) -> ObjKey {
    ObjKey {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "n".into(),
        name: name.into(),
    }
}

/// Spec `name`'s Deployment, as a sync reports it.
fn result(name: &str, action: Action) -> ObjectResult {
    let fields = (!action.is_error()).then(|| format!("fields-{name}"));
    ObjectResult {
        key: deployment(name),
        spec: id(name),
        action,
        live: None,
        resource_version: None,
        fields,
        drift: None,
        warnings: Vec::new(),
    }
}

/// Specs a and b's Deployments, as a sync reports them when both had `action`.
fn a_and_b(action: Action) -> Vec<ObjectResult> {
    vec![result("a", action.clone()), result("b", action)]
}

fn ran(objects: Vec<ObjectResult>, refused: Option<&str>) -> SyncEnd<'static> {
    SyncEnd::Ran {
        report: SyncReport {
            held: Default::default(),
            objects,
            stopped: None,
            prune: prune::Report {
                refused: refused.map(str::to_string),
                ..prune::Report::default()
            },
        },
        objects: &[],
        elapsed: Duration::from_millis(1500),
    }
}

/// A sync of `keys` ran, reported `objects` and had no prune refused.
fn sync_ran(
    state: &mut State,
    keys: &[Key],
    objects: Vec<ObjectResult>,
) -> (Vec<(Key, bool)>, Tally) {
    state.on_sync_done(keys, ran(objects, None), now())
}

/// A leader that knows the nodes and the suspensions (none).
fn with_nodes() -> State {
    let mut state = State::new("dir:/specs".into(), true);
    state.on_event(watch::Event::Nodes(Vec::new()));
    state.on_event(watch::Event::Suspensions(Default::default()));
    state
}

/// A state whose revision `r1` (specs a and b) synced whole.
fn applied() -> State {
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100), ("b", 100)]));
    assert_eq!(keys, [Key::Full]);
    let (outcome, tally) = sync_ran(&mut state, &keys, a_and_b(Action::Created));
    assert_eq!(outcome, [(Key::Full, true)]);
    assert_eq!(tally.applied.as_deref(), Some("r1"));
    state
}

fn watched(fields: &str, spec: Option<SpecId>) -> Option<watch::Watched> {
    Some(watch::Watched {
        value: Packed::new(&json!({"kind": "Deployment"})),
        spec,
        fields: fields.into(),
    })
}

fn health(name: &str, status: Status) -> SpecHealth {
    SpecHealth {
        id: id(name).to_string(),
        status,
        ready: status == Status::Current,
        reason: None,
        message: "waiting".into(),
        figures: Figures::Manifest {},
        objects: Vec::new(),
    }
}

#[test]
fn changed_specs_are_the_added_removed_and_edited_ones() {
    let old = tree(&[
        (
            "a.toml",
            &format!("namespace = \"n\"\n{}{}", web("a", 100), web("b", 100)),
        ),
        ("c.toml", &format!("namespace = \"n\"\n{}", web("c", 100))),
    ]);
    assert!(changed_specs(&old, &old).is_empty());
    let new = tree(&[
        (
            "a.toml",
            &format!("namespace = \"n\"\n{}{}", web("a", 300), web("b", 100)),
        ),
        ("d.toml", &format!("namespace = \"n\"\n{}", web("d", 100))),
    ]);
    assert_eq!(
        ids(&changed_specs(&old, &new)),
        ["elasticweb/n/a", "elasticweb/n/c", "elasticweb/n/d"]
    );
}

#[test]
fn a_spec_that_moved_in_its_file_counts_as_changed() {
    // Its position is part of what the status reports for it.
    let old = tree(&[("a.toml", &format!("namespace = \"n\"\n{}", web("a", 100)))]);
    let new = tree(&[("a.toml", &format!("namespace = \"n\"\n\n{}", web("a", 100)))]);
    assert_eq!(ids(&changed_specs(&old, &new)), ["elasticweb/n/a"]);
}

#[test]
fn the_first_revision_syncs_the_whole_tree_and_counts_as_applied_once_synced() {
    let mut state = with_nodes();
    let (keys, tally) = new_revision(&mut state, "r1", webs(&[("a", 100)]));
    assert_eq!(keys, [Key::Full]);
    assert_eq!(tally, Tally::default());
    let snap = state.snapshot();
    assert_eq!(snap.revision_seen, Some("r1"));
    assert_eq!(snap.revision_applied, None);
    let (outcome, tally) = sync_ran(&mut state, &keys, vec![result("a", Action::Created)]);
    assert_eq!(outcome, [(Key::Full, true)]);
    assert_eq!(tally.applied.as_deref(), Some("r1"));
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("success"));
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    let last = state.last_sync.as_ref().expect("a last sync");
    assert_eq!((last.applied, last.unchanged, last.failed), (1, 0, 0));
    assert_eq!(last.time, "2023-11-14T22:13:20Z");
}

#[test]
fn an_invalid_revision_changes_nothing_applied() {
    let mut state = applied();
    let tree_before = state.tree.clone();
    let at = now();
    let (keys, tally) = state.on_source(
        revision(
            "r2",
            files(&[("web.toml", "namespace = \"n\"\n[elasticweb.a]\n")]),
        ),
        &Policy::default(),
        at,
    );
    assert!(keys.is_empty());
    assert_eq!(
        tally.sync,
        Some(SyncCount {
            result: "invalid",
            elapsed: Duration::ZERO,
            at: at.wall,
        })
    );
    assert_eq!(tally.applied, None);
    assert_eq!(state.tree, tree_before);
    let snap = state.snapshot();
    assert_eq!(snap.revision_seen, Some("r2"));
    assert_eq!(snap.revision_applied, Some("r1"));
    assert_eq!(state.revision_current.as_deref(), Some("r1"));
    assert!(!snap.errors.is_empty());
    assert!(
        snap.errors
            .iter()
            .all(|e| e.file.as_deref() == Some("web.toml"))
    );
    // The last sync is still the one that applied r1.
    assert_eq!(snap.last_sync.map(|s| s.result.as_str()), Some("success"));
}

#[test]
fn a_source_failure_is_reported_until_the_next_revision() {
    let mut state = applied();
    let (keys, tally) = state.on_source(
        SourceUpdate::Failed {
            message: "fetch failed".into(),
            source: "git",
            reason: "fetch",
            revision: None,
        },
        &Policy::default(),
        now(),
    );
    assert!(keys.is_empty());
    assert_eq!(tally.source_failed, Some(("git", "fetch")));
    assert_eq!(state.snapshot().errors[0].message, "fetch failed");
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    // The same revision again (the source cleared what it remembered): no spec
    // changed, nothing to sync, and the error is gone.
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100), ("b", 100)]));
    assert!(keys.is_empty());
    assert!(state.snapshot().errors.is_empty());
}

#[test]
fn only_a_render_that_read_the_cluster_is_made_again_at_the_resync() {
    let mut state = applied();
    assert!(!state.render_again(), "r1's render read no cluster");
    let read_cluster = |id: &str, qps: u32| SourceUpdate::Revision {
        id: id.into(),
        files: webs(&[("a", qps), ("b", 100)]),
        rendered: Box::new(HydrateReport {
            read_cluster: true,
            ..HydrateReport::default()
        }),
    };
    let (keys, tally) = state.on_source(read_cluster("r2", 100), &Policy::default(), now());
    assert!(keys.is_empty());
    assert_eq!(tally.applied.as_deref(), Some("r2"));
    assert!(state.render_again());
    // Rendered again, r2 reads to something else (what a lookup found changed): what
    // changed syncs, and the revision is still r2.
    let (keys, _) = state.on_source(read_cluster("r2", 300), &Policy::default(), now());
    assert_eq!(keys, [spec("a")]);
    assert_eq!(state.revision_current.as_deref(), Some("r2"));
    // A failed read of the source says nothing of the render.
    state.on_source(
        SourceUpdate::Failed {
            message: "fetch failed".into(),
            source: "git",
            reason: "fetch",
            revision: None,
        },
        &Policy::default(),
        now(),
    );
    assert!(state.render_again());
    // A standby applies nothing: it reads no cluster for a render it would not use.
    state.on_leadership(false);
    assert!(!state.render_again());
    state.on_leadership(true);
    assert!(state.render_again());
    // A revision whose render read no cluster is never rendered again for it.
    new_revision(&mut state, "r3", webs(&[("a", 300), ("b", 100)]));
    assert!(!state.render_again());
}

#[test]
fn after_an_applied_revision_only_the_changed_specs_sync() {
    let mut state = applied();
    let (keys, tally) = new_revision(
        &mut state,
        "r2",
        webs(&[("a", 300), ("b", 100), ("c", 100)]),
    );
    assert_eq!(keys, [spec("a"), spec("c")]);
    assert_eq!(tally.applied, None);
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
}

#[test]
fn a_revision_that_changes_no_spec_is_applied_at_once() {
    let mut state = applied();
    // Specs a and b as `applied` has them, under a one-line comment each revision words
    // differently.
    let below = |comment| webs_after(comment, &[("a", 100), ("b", 100)]);
    let (keys, tally) = new_revision(&mut state, "r2", below("# a comment\n"));
    // The specs moved a line down in their file: that is a change.
    assert_eq!(keys, [spec("a"), spec("b")]);
    assert_eq!(tally.applied, None);
    let (keys, tally) = new_revision(&mut state, "r3", below("# another\n"));
    // Still pending from r2: they sync, and then r3 counts as applied.
    assert!(keys.is_empty());
    assert_eq!(tally.applied, None);
    let (_, tally) = sync_ran(
        &mut state,
        &[spec("a"), spec("b")],
        a_and_b(Action::Unchanged),
    );
    assert_eq!(tally.applied.as_deref(), Some("r3"));
    let (keys, tally) = new_revision(&mut state, "r4", below("# yet another\n"));
    assert!(keys.is_empty());
    assert_eq!(tally.applied.as_deref(), Some("r4"));
    assert_eq!(state.snapshot().revision_applied, Some("r4"));
}

#[test]
fn the_revision_counts_as_applied_only_when_every_changed_spec_has_synced() {
    let mut state = applied();
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 300), ("b", 300)]));
    assert_eq!(keys, [spec("a"), spec("b")]);
    let (outcome, tally) = sync_ran(
        &mut state,
        &[spec("a")],
        vec![result("a", Action::Configured)],
    );
    assert_eq!(outcome, [(spec("a"), true)]);
    assert_eq!(tally.applied, None);
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    // A spec whose objects failed still counts as synced (the failure is in the
    // status, and retried with backoff).
    let (outcome, tally) = sync_ran(
        &mut state,
        &[spec("b")],
        vec![result("b", Action::Failed("forbidden".into()))],
    );
    assert_eq!(outcome, [(spec("b"), false)]);
    assert_eq!(tally.applied.as_deref(), Some("r2"));
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("failed"));
    assert_eq!(state.snapshot().revision_applied, Some("r2"));
}

#[test]
fn a_failed_sync_leaves_the_changed_specs_pending() {
    let mut state = applied();
    // r2 arrives while a whole sync (the resync) is due, and that sync fails.
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 300), ("b", 100)]));
    assert_eq!(keys, [spec("a")]);
    let (outcome, tally) = state.on_sync_done(
        &[Key::Full, spec("a")],
        SyncEnd::Failed {
            message: "the API is down".into(),
            elapsed: Duration::from_secs(3),
            away: None,
        },
        now(),
    );
    assert_eq!(outcome, [(Key::Full, false), (spec("a"), false)]);
    assert_eq!(tally.applied, None);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("failed"));
    let last = state.snapshot().last_sync.cloned().expect("a last sync");
    assert_eq!(last.message.as_deref(), Some("the API is down"));
    assert_eq!(last.duration_seconds, 3.0);
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    // Still pending: the next revision adds its own changes, spec by spec.
    let (keys, _) = new_revision(&mut state, "r3", webs(&[("a", 300), ("b", 300)]));
    assert_eq!(keys, [spec("b")]);
    let (_, tally) = sync_ran(&mut state, &[spec("b")], Vec::new());
    assert_eq!(tally.applied, None, "a has not synced yet");
    // A whole sync that ran settles every pending spec.
    let (_, tally) = sync_ran(&mut state, &[Key::Full], Vec::new());
    assert_eq!(tally.applied.as_deref(), Some("r3"));
    let (keys, _) = new_revision(&mut state, "r4", webs(&[("a", 100)]));
    assert_eq!(keys, [spec("a"), spec("b")]);
}

#[test]
fn until_a_revision_is_applied_every_revision_syncs_the_whole_tree() {
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100)]));
    assert_eq!(keys, [Key::Full]);
    let failed = SyncEnd::Failed {
        message: "down".into(),
        elapsed: Duration::ZERO,
        away: None,
    };
    state.on_sync_done(&keys, failed, now());
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 200)]));
    assert_eq!(keys, [Key::Full]);
    assert_eq!(state.snapshot().revision_applied, None);
}

#[test]
fn a_refused_prune_of_a_spec_sync_retries_as_a_whole_sync() {
    let mut state = applied();
    new_revision(&mut state, "r2", webs(&[("a", 100)]));
    let (outcome, tally) = state.on_sync_done(
        &[spec("b")],
        ran(Vec::new(), Some("would delete 50% of the inventory")),
        now(),
    );
    // Not spec by spec: each removed spec alone would prune a share small enough to
    // pass.
    assert_eq!(outcome, [(spec("b"), true), (Key::Full, false)]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("refused"));
    let last = state.snapshot().last_sync.cloned().expect("a last sync");
    assert_eq!(last.result, "refused");
    assert_eq!(
        last.message.as_deref(),
        Some("would delete 50% of the inventory")
    );
    // A refused whole sync fails as itself; nothing is added.
    let (outcome, _) = state.on_sync_done(
        &[Key::Full],
        ran(Vec::new(), Some("would delete 50% of the inventory")),
        now(),
    );
    assert_eq!(outcome, [(Key::Full, false)]);
}

#[test]
fn a_prune_left_waiting_on_a_finalizer_is_retried_but_is_no_failure() {
    let mut state = applied();
    new_revision(&mut state, "r2", webs(&[("a", 100)]));
    let waiting = prune::Outcome {
        key: deployment("b"),
        spec: id("b").to_string(),
        action: prune::PruneAction::Pruned,
        waiting: Some("waiting for finalizers x".into()),
    };
    let end = |objects: Vec<prune::Outcome>| SyncEnd::Ran {
        report: SyncReport {
            held: Default::default(),
            objects: Vec::new(),
            stopped: None,
            prune: prune::Report {
                objects,
                ..prune::Report::default()
            },
        },
        objects: &[],
        elapsed: Duration::from_millis(1),
    };
    let (outcome, tally) = state.on_sync_done(&[spec("b")], end(vec![waiting.clone()]), now());
    // Retried (the next sync looks again), yet the sync succeeded.
    assert_eq!(outcome, [(spec("b"), false)]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("success"));
    let (outcome, _) = state.on_sync_done(&[Key::Full], end(vec![waiting.clone()]), now());
    assert_eq!(outcome, [(Key::Full, false)]);
    // Gone: done.
    let gone = prune::Outcome {
        action: prune::PruneAction::AlreadyGone,
        waiting: None,
        ..waiting
    };
    let (outcome, _) = state.on_sync_done(&[spec("b")], end(vec![gone]), now());
    assert_eq!(outcome, [(spec("b"), true)]);
}

#[test]
fn a_whole_sync_fails_when_any_spec_does_and_a_spec_key_only_for_its_own() {
    let mut state = applied();
    let objects = vec![
        result("a", Action::Unchanged),
        result("b", Action::Conflict("another manager".into())),
    ];
    let (outcome, tally) = sync_ran(&mut state, &[Key::Full, spec("a"), spec("b")], objects);
    assert_eq!(
        outcome,
        [(Key::Full, false), (spec("a"), true), (spec("b"), false)]
    );
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("failed"));
    let last = state.snapshot().last_sync.cloned().expect("a last sync");
    assert_eq!((last.applied, last.unchanged, last.failed), (0, 1, 1));
}

#[test]
fn drift_on_an_owned_object_queues_its_spec() {
    let mut state = applied();
    let key = deployment("a");
    // What the sync recorded: no drift.
    assert_eq!(
        state.on_event(watch::Event::Object(key.clone(), watched("fields-a", None))),
        None
    );
    // Someone else changed the fields we own.
    assert_eq!(
        state.on_event(watch::Event::Object(key.clone(), watched("edited", None))),
        Some(spec("a"))
    );
    // Deleted.
    assert_eq!(
        state.on_event(watch::Event::Object(key.clone(), None)),
        Some(spec("a"))
    );
    assert!(!state.live.observed.objects.contains_key(&key));
    // An object no sync of ours recorded is not drift, whatever its annotation says.
    assert_eq!(
        state.on_event(watch::Event::Object(
            deployment("z"),
            watched("x", Some(id("z")))
        )),
        None
    );
    assert!(state.live.observed.objects.contains_key(&deployment("z")));
}

#[test]
fn drift_corrections_count_writes_that_are_not_a_new_revisions() {
    let mut state = applied();
    new_revision(&mut state, "r2", webs(&[("a", 300), ("b", 100)]));
    let (_, tally) = sync_ran(
        &mut state,
        &[spec("a"), spec("b")],
        a_and_b(Action::Configured),
    );
    assert_eq!(tally.drift_corrections, 1);
    let (_, tally) = sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("b", Action::Configured)],
    );
    assert_eq!(tally.drift_corrections, 0);
}

#[test]
fn drift_a_fresh_daemon_reported_stays_listed_when_the_watch_first_reports_the_object() {
    // A daemon's first sync found a's Deployment drifted (left as edited): nothing is
    // recorded of it, so the watch's first event cannot judge it.
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100), ("b", 100)]));
    let objects = vec![result("a", Action::Drifted), result("b", Action::Unchanged)];
    sync_ran(&mut state, &keys, objects);
    let a = deployment("a").to_string();
    assert!(state.drifted_objects().contains(&a));
    let key = state.on_event(watch::Event::Object(
        deployment("a"),
        watched("edited", None),
    ));
    assert_eq!(key, None, "nothing to correct");
    assert!(state.drifted_objects().contains(&a), "still drifted");
    // b's was recorded: the watch judges it as before.
    state.on_event(watch::Event::Object(
        deployment("b"),
        watched("fields-b", None),
    ));
    assert!(
        !state
            .drifted_objects()
            .contains(&deployment("b").to_string())
    );
    // Gone (and nothing recorded): drifted no more.
    state.on_event(watch::Event::Object(deployment("a"), None));
    assert!(!state.drifted_objects().contains(&a));
    // Found drifted again, then as we want it by a later sync: the drift is over.
    sync_ran(&mut state, &keys, vec![result("a", Action::Drifted)]);
    assert!(state.drifted_objects().contains(&a));
    sync_ran(&mut state, &keys, a_and_b(Action::Unchanged));
    assert!(!state.drifted_objects().contains(&a));
}

#[test]
fn a_kind_listed_whole_calls_for_readiness_and_queues_nothing() {
    let mut state = applied();
    state.health_dirty = false;
    assert_eq!(state.on_event(watch::Event::Listed(deployments())), None);
    assert!(state.health_dirty);
}

#[test]
fn endpoints_feed_readiness_and_never_queue() {
    let mut state = applied();
    let key = ObjKey {
        group: String::new(),
        kind: "Endpoints".into(),
        namespace: "n".into(),
        name: "a".into(),
    };
    state.health_dirty = false;
    assert_eq!(
        state.on_event(watch::Event::Object(key.clone(), watched("x", None))),
        None
    );
    assert!(state.health_dirty);
    assert!(
        state
            .live
            .observed
            .endpoints
            .contains_key(&("n".into(), "a".into()))
    );
    assert_eq!(state.on_event(watch::Event::Object(key, None)), None);
    assert!(state.live.observed.endpoints.is_empty());
}

#[test]
fn node_changes_rerender_and_sync_the_whole_tree_only_under_localservices() {
    let mut state = State::new("dir:/specs".into(), true);
    state.on_event(watch::Event::Suspensions(Default::default()));
    new_revision(&mut state, "r1", webs(&[("a", 100)]));
    assert_eq!(state.due(), Due::Later);
    assert_eq!(state.on_event(watch::Event::Nodes(Vec::new())), None);
    assert_eq!(state.due(), Due::Sync);
    let node = NodeFacts {
        name: "node-1".into(),
        labels: Default::default(),
    };
    state.render_dirty = false;
    assert_eq!(
        state.on_event(watch::Event::Nodes(vec![node.clone()])),
        None
    );
    assert!(state.render_dirty);

    let local = "namespace = \"n\"\n[localservice.ls]\nselector = { app = \"x\" }\nports = [{ port = 80 }]\n";
    new_revision(&mut state, "r2", files(&[("ls.toml", local)]));
    state.render_dirty = false;
    // The same nodes: nothing to render again, but a whole sync all the same.
    assert_eq!(
        state.on_event(watch::Event::Nodes(vec![node])),
        Some(Key::Full)
    );
    assert!(!state.render_dirty);
}

#[test]
fn keys_wait_for_the_nodes_and_are_dropped_by_a_standby_or_without_a_tree() {
    let mut state = State::new("dir:/specs".into(), false);
    assert_eq!(state.due(), Due::Later);
    state.on_event(watch::Event::Nodes(Vec::new()));
    assert_eq!(state.due(), Due::Later, "the suspensions are not known yet");
    state.on_event(watch::Event::Suspensions(Default::default()));
    assert_eq!(state.due(), Due::Drop);
    assert_eq!(state.on_leadership(true), Some(Key::Full));
    assert_eq!(state.due(), Due::Drop, "no tree yet");
    assert!(!state.warm_standby());
    new_revision(&mut state, "r1", webs(&[("a", 100)]));
    assert_eq!(state.due(), Due::Sync);
    assert_eq!(state.on_leadership(true), None);
    assert_eq!(state.on_leadership(false), None);
    assert_eq!(state.due(), Due::Drop);
    assert!(state.warm_standby());
    assert!(!state.snapshot().leader);
}

#[test]
fn readiness_times_out_latency_is_observed_once_and_removed_specs_are_gone() {
    let mut state = applied();
    let start = now();
    let timeout = Duration::from_secs(60);
    state.applied_at = Some(start.at);
    state.seen_at = Some(start.at);
    // The same report before the timeout and after it.
    let a_in_progress = || {
        vec![
            health("a", Status::InProgress),
            health("b", Status::Current),
        ]
    };
    let news = state.take_health(a_in_progress(), timeout, start);
    assert_eq!(news, HealthNews::default());
    assert_eq!(state.health[0].status, Status::InProgress);

    let later = Now {
        at: start.at + Duration::from_secs(61),
        ..start
    };
    let news = state.take_health(a_in_progress(), timeout, later);
    assert_eq!(news, HealthNews::default());
    let a = &state.health[0];
    assert_eq!(a.status, Status::Failed);
    assert_eq!(a.reason.as_deref(), Some("ReadyTimeout"));
    assert_eq!(
        a.message,
        "not ready 60s after the revision was applied: waiting"
    );
    assert_eq!(state.health[1].status, Status::Current);

    let news = state.take_health(vec![health("a", Status::Current)], timeout, later);
    assert_eq!(news.gone, [id("b")]);
    assert_eq!(news.change_to_ready, Some(Duration::from_secs(61)));
    let news = state.take_health(vec![health("a", Status::Current)], timeout, later);
    assert_eq!(news, HealthNews::default(), "observed once per revision");
}

#[test]
fn a_suspended_spec_is_held_also_once_the_tree_has_dropped_it() {
    use crate::apply::suspensions::Suspension;
    let mut state = applied();
    let held = Suspension {
        reason: "incident 42".into(),
        since: "2026-11-23T10:00:00Z".into(),
        declared: false,
    };
    state.on_event(watch::Event::Suspensions(
        [
            (id("a").to_string(), held.clone()),
            (id("gone").to_string(), held),
        ]
        .into(),
    ));
    assert_eq!(state.held(), [id("a"), id("gone")].into());
    // Resuming queues a whole sync: what the suspension held back goes through.
    let key = state.on_event(watch::Event::Suspensions(Default::default()));
    assert_eq!(key, Some(Key::Full));
    assert!(state.held().is_empty());
}

mod notices;

#[test]
fn a_spec_waits_for_its_dependencies_and_is_released_once_they_are_ready() {
    let mut state = with_nodes();
    let text = format!(
        "namespace = \"n\"\n{}depends-on = [\"elasticweb/n/db\"]\n{}{}depends-on = [\"elasticweb/n/app\"]\n",
        web("app", 100),
        web("db", 100),
        web("top", 100)
    );
    new_revision(&mut state, "r1", files(&[("web.toml", &text)]));
    // Nothing assessed yet: app waits for db, top for app.
    let waiting = state.waiting();
    assert_eq!(
        waiting.keys().map(SpecId::to_string).collect::<Vec<_>>(),
        ["elasticweb/n/app", "elasticweb/n/top"]
    );
    assert_eq!(waiting[&id("app")], [id("db")]);

    // db is applied (a whole sync leaves out the specs that wait) and ready: app goes
    // ahead; top, never applied, still waits for app (whose own objects are not there
    // yet), and says so.
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("db", Action::Created)],
    );
    let healths = vec![
        health("app", Status::InProgress),
        health("db", Status::Current),
        health("top", Status::Current),
    ];
    let news = state.take_health(healths, Duration::from_secs(300), now());
    assert_eq!(news.released, [id("app")]);
    assert_eq!(
        state.waiting().keys().cloned().collect::<Vec<_>>(),
        [id("top")]
    );
    let top = state
        .health
        .iter()
        .find(|h| h.id == "elasticweb/n/top")
        .unwrap();
    assert!(!top.ready);
    assert_eq!(top.reason.as_deref(), Some("WaitingForDependencies"));
    assert_eq!(
        top.message,
        "waiting for elasticweb/n/app to be ready before it is applied"
    );
}

#[test]
fn a_scale_a_whole_sync_cannot_see_is_synced_again_by_spec() {
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 300), ("b", 100)]));
    let facts = crate::render::Facts {
        instance: "default".into(),
        nodes: Vec::new(),
    };
    let tree = state.tree.clone().expect("a tree");
    let rendered = crate::render::render(&tree, &facts).expect("the specs render");
    // A whole sync, as the engine ends it: these results, and the objects it ran on.
    let whole = |state: &mut State, keys: &[Key], action: Action| {
        let end = SyncEnd::Ran {
            report: SyncReport {
                held: Default::default(),
                objects: a_and_b(action),
                prune: prune::Report::default(),
                stopped: None,
            },
            objects: &rendered,
            elapsed: Duration::from_millis(10),
        };
        state.on_sync_done(keys, end, now())
    };
    // Spec `name`'s Deployment as the watch shows it, the fields we own as recorded.
    let at = |name: &str, replicas: i64| {
        let view = json!({"kind": "Deployment", "spec": {"replicas": replicas}});
        let watched = watch::Watched {
            value: Packed::new(&view),
            spec: None,
            fields: format!("fields-{name}"),
        };
        watch::Event::Object(deployment(name), Some(watched))
    };
    whole(&mut state, &keys, Action::Created);
    assert!(state.take_rechecks().is_empty());
    // Spec a asks for 3 replicas; someone scales it to 5 (the fields we own unchanged).
    assert_eq!(state.on_event(at("a", 5)), Some(spec("a")));
    assert_eq!(state.on_event(at("b", 1)), None);
    // The resync falls due with that key and takes it: read as metadata only, a is
    // "unchanged". It is synced again by spec; b, at its replicas, is not.
    whole(&mut state, &[Key::Full, spec("a")], Action::Unchanged);
    assert_eq!(state.take_rechecks(), [spec("a")]);
    assert!(state.take_rechecks().is_empty(), "taken once");
    // A spec sync reads its objects whole: whatever it found, it is not repeated.
    sync_ran(
        &mut state,
        &[spec("a")],
        vec![result("a", Action::Unchanged)],
    );
    assert!(state.take_rechecks().is_empty());
    // Reporting drift only: the scale is reported, never corrected.
    state.correct_drift = false;
    whole(&mut state, &[Key::Full], Action::Unchanged);
    assert!(state.take_rechecks().is_empty());
}

/// A sync that stopped before its end, as the engine reports one told to stop.
fn stopped(objects: Vec<ObjectResult>, why: &str) -> SyncEnd<'static> {
    SyncEnd::Ran {
        report: SyncReport {
            held: Default::default(),
            objects,
            stopped: Some(why.to_string()),
            prune: prune::Report::default(),
        },
        objects: &[],
        elapsed: Duration::from_millis(1500),
    }
}

#[test]
fn a_newer_revision_supersedes_the_running_sync_which_is_reported_superseded() {
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100)]));
    state.on_sync_begin();
    assert!(state.syncing);
    assert_eq!(state.sync_revision(), Some("r1"));
    // Nothing new: the sync goes on.
    assert_eq!(state.cancel_due(), None);
    let (next, _) = new_revision(&mut state, "r2", webs(&[("a", 200)]));
    assert_eq!(next, [Key::Full]);
    assert_eq!(state.cancel_due(), Some(Cancel::Superseded("r2".into())));
    // Told once.
    assert_eq!(state.cancel_due(), None);
    let (outcome, tally) = state.on_sync_done(
        &keys,
        stopped(
            vec![result("a", Action::Created)],
            "superseded by revision r2; wave 1 and what follows were not applied",
        ),
        now(),
    );
    assert!(!state.syncing);
    // Not a failure: no backoff, and synced again at once, of the new revision.
    assert_eq!(outcome, [(Key::Full, true)]);
    assert_eq!(state.take_rechecks(), [Key::Full]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("superseded"));
    assert_eq!(tally.applied, None);
    let last = state.last_sync().expect("a last sync");
    assert_eq!(last.result, "superseded");
    assert!(
        last.message
            .as_deref()
            .is_some_and(|m| m.contains("superseded by revision r2")),
        "{:?}",
        last.message
    );
    // What it applied is recorded all the same.
    assert_eq!(
        state.actions.get(&deployment("a")).map(String::as_str),
        Some("created")
    );
    assert_eq!(state.snapshot().revision_applied, None);
    // The next sync, of r2, applies it.
    state.on_sync_begin();
    assert_eq!(state.sync_revision(), Some("r2"));
    let (_, tally) = sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("a", Action::Configured)],
    );
    assert_eq!(tally.applied.as_deref(), Some("r2"));
}

#[test]
fn a_sync_that_ends_after_a_newer_revision_does_not_count_that_revision_applied() {
    let mut state = applied();
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 200), ("b", 100)]));
    assert_eq!(keys, [spec("a")]);
    state.on_sync_begin();
    // r3 changes b while the sync of r2's a runs; it ends before it heard.
    let (more, _) = new_revision(&mut state, "r3", webs(&[("a", 200), ("b", 300)]));
    assert_eq!(more, [spec("b")]);
    let (outcome, tally) = sync_ran(&mut state, &keys, vec![result("a", Action::Configured)]);
    assert_eq!(outcome, [(spec("a"), true)]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("success"));
    // r3 is applied only once both a (again, a no-op) and b are synced of it.
    assert_eq!(tally.applied, None);
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    assert_eq!(state.take_rechecks(), [spec("a")]);
    let (_, tally) = sync_ran(
        &mut state,
        &[spec("a"), spec("b")],
        vec![
            result("a", Action::Unchanged),
            result("b", Action::Configured),
        ],
    );
    assert_eq!(tally.applied.as_deref(), Some("r3"));
}

#[test]
fn a_whole_sync_across_a_new_revision_keeps_the_render_dirty() {
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100)]));
    state.on_sync_begin();
    let (more, _) = new_revision(&mut state, "r2", webs(&[("a", 300)]));
    assert_eq!(more, [Key::Full]);
    let (_, tally) = sync_ran(&mut state, &keys, vec![result("a", Action::Created)]);
    assert_eq!(tally.applied, None);
    // What it rendered was r1's: readiness renders r2 before it is judged.
    assert!(state.render_dirty);
    assert_eq!(state.snapshot().revision_applied, None);
}

#[test]
fn shutdown_stops_the_running_sync_which_is_reported_stopped() {
    let mut state = applied();
    assert_eq!(state.on_shutdown(), None, "no sync runs");
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 200), ("b", 100)]));
    state.on_sync_begin();
    assert_eq!(state.on_shutdown(), Some(Cancel::Shutdown));
    assert_eq!(state.on_shutdown(), None);
    let (outcome, tally) = state.on_sync_done(
        &keys,
        stopped(
            Vec::new(),
            "the daemon is stopping; not every object was applied",
        ),
        now(),
    );
    assert_eq!(outcome, [(spec("a"), true)]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("stopped"));
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
}

#[test]
fn a_sync_told_to_stop_that_failed_outright_is_reported_as_stopped_not_failed() {
    let mut state = applied();
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 200), ("b", 100)]));
    state.on_sync_begin();
    state.on_leadership(false);
    assert_eq!(state.cancel_due(), Some(Cancel::LostLeadership));
    let end = SyncEnd::Failed {
        message: "the sync made no progress for 5m".into(),
        elapsed: Duration::from_secs(1),
        away: None,
    };
    let (outcome, tally) = state.on_sync_done(&keys, end, now());
    assert_eq!(outcome, [(spec("a"), true)]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("stopped"));
    let last = state.last_sync().expect("a last sync");
    assert!(
        last.message
            .as_deref()
            .is_some_and(|m| m.starts_with("this replica lost leadership"))
    );
}

#[test]
fn a_sync_told_to_stop_that_finished_anyway_counts_as_it_went() {
    let mut state = with_nodes();
    let (keys, _) = new_revision(&mut state, "r1", webs(&[("a", 100)]));
    state.on_sync_begin();
    state.on_leadership(false);
    assert_eq!(state.cancel_due(), Some(Cancel::LostLeadership));
    let (outcome, tally) = sync_ran(&mut state, &keys, vec![result("a", Action::Created)]);
    assert_eq!(outcome, [(Key::Full, true)]);
    assert_eq!(tally.sync.as_ref().map(|s| s.result), Some("success"));
    assert_eq!(tally.applied.as_deref(), Some("r1"));
}

#[test]
fn changes_seen_while_a_sync_runs_are_judged_once_it_ends() {
    let mut state = applied();
    let (keys, _) = new_revision(&mut state, "r2", webs(&[("a", 200), ("b", 100)]));
    assert_eq!(keys, [spec("a")]);
    state.on_sync_begin();
    // The sync's own write of a, seen by its watch before the sync ends: not drift.
    let own = watch::Event::Object(deployment("a"), watched("fields-a2", Some(id("a"))));
    assert_eq!(state.on_event(own), None);
    // Someone deletes b meanwhile: drift, synced once the sync ends.
    assert_eq!(
        state.on_event(watch::Event::Object(deployment("b"), None)),
        None
    );
    let mut written = result("a", Action::Configured);
    written.fields = Some("fields-a2".into());
    let (outcome, _) = sync_ran(&mut state, &keys, vec![written]);
    assert_eq!(outcome, [(spec("a"), true)]);
    assert_eq!(state.take_rechecks(), [spec("b")]);
    // With no sync running, a change is judged at once.
    let other = watch::Event::Object(deployment("a"), watched("fields-x", Some(id("a"))));
    assert_eq!(state.on_event(other), Some(spec("a")));
}

#[test]
fn a_sync_that_changes_nothing_keeps_the_last_change_on_show_but_clears_a_failure() {
    let mut state = applied();
    let action = |state: &State| {
        state
            .actions
            .get(&deployment("a"))
            .cloned()
            .unwrap_or_default()
    };
    sync_ran(&mut state, &[Key::Full], vec![result("a", Action::Created)]);
    assert_eq!(action(&state), "created");
    // A resync that wrote nothing: the entry (and so each open page) is left as it was.
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("a", Action::Unchanged)],
    );
    assert_eq!(action(&state), "created");
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("a", Action::Configured)],
    );
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("a", Action::Unchanged)],
    );
    assert_eq!(action(&state), "updated");
    // A failure shows until a sync goes through, whether it writes or not.
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("a", Action::Failed("refused".into()))],
    );
    assert_eq!(action(&state), "failed");
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![result("a", Action::Unchanged)],
    );
    assert_eq!(action(&state), "unchanged");
}

/// What member `me` holds of `names`' buckets: `held` of them (by index), as the table
/// gives them.
fn share(names: &[&str], held: &[usize]) -> crate::daemon::shards::ShardView {
    crate::daemon::shards::ShardView {
        member: "me".into(),
        held: held
            .iter()
            .map(|i| crate::apply::buckets::bucket_of(&id(names[*i]).to_string()))
            .collect(),
        members: vec!["me".into(), "other".into()],
        ..Default::default()
    }
}

#[test]
fn a_member_holds_the_specs_of_its_buckets_and_a_new_share_syncs_whole() {
    // Two specs in different buckets; `app` depends on `db`.
    let db = (0..)
        .map(|i| format!("db{i}"))
        .find(|n| {
            crate::apply::buckets::bucket_of(&id(n).to_string())
                != crate::apply::buckets::bucket_of(&id("app").to_string())
        })
        .unwrap();
    let names = ["app", db.as_str()];
    let mut state = with_nodes();
    assert_eq!(state.on_shard(share(&names, &[0])), None, "no tree yet");
    let text = format!(
        "namespace = \"n\"\n{}depends-on = [\"elasticweb/n/{db}\"]\n{}",
        web("app", 100),
        web(&db, 100)
    );
    let (keys, _) = new_revision(&mut state, "r1", files(&[("web.toml", &text)]));
    assert_eq!(keys, [Key::Full]);
    let held: Vec<String> = state.specs().iter().map(|s| s.id.to_string()).collect();
    assert_eq!(held, ["elasticweb/n/app"]);
    // Its dependency is another member's: waited for until that member publishes it
    // ready at this revision.
    assert_eq!(state.waiting()[&id("app")], [id(&db)]);
    let published = |revision: &str| {
        std::sync::Arc::new(HashMap::from([(
            id(&db).to_string(),
            std::sync::Arc::new(crate::report::status::SpecStatus {
                id: id(&db).to_string(),
                ready: true,
                revision: Some(revision.into()),
                member: Some("other".into()),
                ..Default::default()
            }),
        )]))
    };
    assert!(
        state.on_peers(published("r0")).is_empty(),
        "ready, but at r0"
    );
    assert_eq!(state.waiting()[&id("app")], [id(&db)]);
    assert_eq!(state.on_peers(published("r1")), [id("app")]);
    assert!(state.waiting().is_empty(), "{:?}", state.waiting());
    assert_eq!(state.snapshot().shard.map(|s| s.buckets.len()), Some(1));
    // The same share again (the members changed): nothing to sync.
    let mut same = share(&names, &[0]);
    same.members.pop();
    assert_eq!(state.on_shard(same), None);
    // Both buckets: both specs, a whole sync, and the dependency waited for by this
    // member's own judgement, not the other's part read before.
    assert_eq!(state.on_shard(share(&names, &[0, 1])), Some(Key::Full));
    assert_eq!(state.specs().len(), 2);
    assert_eq!(state.waiting()[&id("app")], [id(&db)]);
    // None: no spec.
    assert_eq!(state.on_shard(share(&names, &[])), Some(Key::Full));
    assert!(state.specs().is_empty());
}

#[test]
fn a_spec_the_tree_suspends_is_held_until_the_tree_lets_it_go() {
    use crate::apply::suspensions::Suspension;
    let mut state = applied();
    let map = |annotations: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: \"n\"\n{annotations}data: {{k: v}}\n"
        )
    };
    let held = map("  annotations: {driftless.dev/suspend: incident 7}\n");
    let c: SpecId = "manifest/n/ConfigMap/c".parse().unwrap();
    new_revision(&mut state, "r2", files(&[("c.yaml", &held)]));
    assert!(state.errors.is_empty(), "{:?}", state.errors);
    assert_eq!(state.held(), [c.clone()].into());
    let shown = state.snapshot().suspensions.get(&c.to_string()).cloned();
    let declared = Suspension {
        reason: "incident 7".into(),
        since: now().wall.to_string(),
        declared: true,
    };
    assert_eq!(shown, Some(declared.clone()));

    // A person's suspension is shown over it, and once lifted the tree's is there still.
    let asked = Suspension {
        reason: "incident 8".into(),
        since: "2026-11-23T10:00:00Z".into(),
        declared: false,
    };
    state.on_event(watch::Event::Suspensions(
        [(c.to_string(), asked.clone())].into(),
    ));
    assert_eq!(
        state.snapshot().suspensions.get(&c.to_string()),
        Some(&asked)
    );
    state.on_event(watch::Event::Suspensions(Default::default()));
    assert_eq!(
        state.snapshot().suspensions.get(&c.to_string()),
        Some(&declared)
    );

    // The next revision keeps it held since it first was; one without the mark lets it
    // go, and syncs it.
    new_revision(
        &mut state,
        "r3",
        files(&[("c.yaml", &held), ("d.yaml", "")]),
    );
    assert_eq!(
        state.snapshot().suspensions.get(&c.to_string()),
        Some(&declared)
    );
    let (keys, _) = new_revision(&mut state, "r4", files(&[("c.yaml", &map(""))]));
    assert!(state.held().is_empty());
    assert!(state.snapshot().suspensions.is_empty());
    assert!(
        keys.iter()
            .any(|k| *k == Key::Spec(c.clone()) || *k == Key::Full),
        "{keys:?}"
    );
}

/// Every object of `state`'s tree live and ready, as the watch would report them.
fn all_ready(state: &State) -> crate::object::Observed {
    let mut observed = crate::object::Observed::default();
    for e in state.expected() {
        let status = match e.key.kind.as_str() {
            "Deployment" => json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                "readyReplicas": 1, "availableReplicas": 1, "conditions": [
                    {"type": "Available", "status": "True"},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}),
            _ => json!({}),
        };
        let live = json!({"apiVersion": e.api_version, "kind": e.key.kind,
            "metadata": {"name": e.key.name, "namespace": e.key.namespace, "generation": 1},
            "spec": {"clusterIP": "10.0.0.10", "replicas": 1}, "status": status});
        let seen = crate::object::Seen {
            view: Packed::new(&crate::health::readiness_view(live)),
            fields: String::new(),
        };
        observed.objects_mut().insert(e.key.clone(), seen);
    }
    observed
}

#[test]
fn ready_verdicts_stand_through_a_resync_and_go_with_a_changed_spec() {
    let mut state = State::new("dir:/specs".into(), true);
    new_revision(&mut state, "r1", webs(&[("a", 100), ("b", 100)]));
    state.rerender("default", |_, _| {}).unwrap();
    let judge = |state: &mut State| {
        let observed = all_ready(state);
        let tree = state.tree.clone().unwrap();
        let mut judged = std::mem::take(&mut state.judged);
        let healths =
            judged.tree_health(&tree.specs, state.expected(), &observed, Timestamp::now());
        state.judged = judged;
        assert!(healths.iter().all(|h| h.ready), "{healths:?}");
        state.judged.last_judged
    };
    assert_eq!(judge(&mut state), 2);
    // A resync: the same files read again and rendered to the same objects.
    new_revision(&mut state, "r1", webs(&[("a", 100), ("b", 100)]));
    state.rerender("default", |_, _| {}).unwrap();
    assert_eq!(
        judge(&mut state),
        0,
        "nothing changed: nothing judged again"
    );
    // b's qps changes (its figures do; its one replica does not): b alone is judged.
    new_revision(&mut state, "r2", webs(&[("a", 100), ("b", 90)]));
    state.rerender("default", |_, _| {}).unwrap();
    assert_eq!(judge(&mut state), 1);
    // A spec added renders new objects: every verdict is judged again.
    new_revision(&mut state, "r3", webs(&[("a", 100), ("b", 90), ("c", 100)]));
    state.rerender("default", |_, _| {}).unwrap();
    assert_eq!(judge(&mut state), 3);
}

#[test]
fn a_resync_of_an_unchanged_tree_renders_nothing_and_a_new_revision_or_node_renders_again() {
    use crate::daemon::sync::render_keys;
    let mut state = State::new("dir:/specs".into(), true);
    new_revision(&mut state, "r1", webs(&[("a", 100), ("b", 200)]));
    let whole = BTreeSet::new();
    let first = render_keys("i", &mut state, true, &whole).expect("renders");
    assert_eq!(first.len(), 4, "a Deployment and a Service per elasticweb");
    // Readiness's expectations came from the same pass: no second render.
    assert!(!state.render_dirty);
    // Not kept while the watches' first lists are under way (the daemon's peak).
    let kinds = [deployments(), ("".into(), "Service".into())];
    state.live.watching(kinds.clone());
    for kind in &kinds {
        state.on_event(watch::Event::Listing(kind.clone()));
    }
    state.on_event(watch::Event::Listed(deployments()));
    let unkept = render_keys("i", &mut state, true, &whole).expect("renders");
    assert!(!Arc::ptr_eq(&first, &unkept));
    assert_eq!(*first, *unkept);
    state.on_event(watch::Event::Listed(kinds[1].clone()));
    let first = render_keys("i", &mut state, true, &whole).expect("renders");

    let again = render_keys("i", &mut state, true, &whole).expect("renders");
    assert!(
        Arc::ptr_eq(&first, &again),
        "an unchanged tree is not rendered again"
    );
    // A sync of one spec (a drift's correction) takes that spec's objects from it.
    let only_a: BTreeSet<SpecId> = [id("a")].into();
    let a = render_keys("i", &mut state, false, &only_a).expect("renders");
    let want: Vec<&crate::render::Object> = first.iter().filter(|o| o.spec == id("a")).collect();
    assert_eq!(a.iter().collect::<Vec<_>>(), want);
    assert_eq!(a.len(), 2);

    // The nodes changed: rendered again (elasticweb's objects do not depend on them).
    let node = NodeFacts {
        name: "node-1".into(),
        labels: Default::default(),
    };
    state.on_event(watch::Event::Nodes(vec![node]));
    let after_nodes = render_keys("i", &mut state, true, &whole).expect("renders");
    assert!(!Arc::ptr_eq(&again, &after_nodes));
    assert_eq!(*again, *after_nodes);

    // A new revision: rendered again, with what it changed.
    new_revision(&mut state, "r2", webs(&[("a", 100), ("b", 300)]));
    let r2 = render_keys("i", &mut state, true, &whole).expect("renders");
    assert_ne!(*r2, *after_nodes);
    assert!(Arc::ptr_eq(
        &r2,
        &render_keys("i", &mut state, true, &whole).expect("renders")
    ));
}

fn deployments() -> watch::GroupKind {
    ("apps".into(), "Deployment".into())
}

/// The Deployments' watch lists a's and b's, as the sync recorded them (no drift).
fn listing(state: &mut State) {
    state.on_event(watch::Event::Listing(deployments()));
    for name in ["a", "b"] {
        let fields = format!("fields-{name}");
        let ev = watch::Event::Object(deployment(name), watched(&fields, Some(id(name))));
        assert_eq!(state.on_event(ev), None);
    }
}

/// `applied`, with the Deployments watched and listed whole.
fn deployments_listed() -> State {
    let mut state = applied();
    state.live.watching([deployments()]);
    listing(&mut state);
    state.on_event(watch::Event::Listed(deployments()));
    state
}

#[test]
fn a_whole_sync_takes_the_objects_of_kinds_listed_whole_and_lists_itself_every_tenth_time() {
    let mut state = applied();
    state.live.watching([deployments()]);
    // Watched, but not listed whole yet: the sync lists.
    listing(&mut state);
    assert!(state.live.known().is_none());
    assert_eq!(state.on_event(watch::Event::Listed(deployments())), None);

    let known = state.live.known().expect("Deployments are listed whole");
    assert_eq!(known.kinds, BTreeSet::from([deployments()]));
    let mut keys: Vec<&ObjKey> = known.objects.keys().collect();
    keys.sort();
    assert_eq!(keys, [&deployment("a"), &deployment("b")]);
    // Every LIST_EVERY-th whole sync lists every kind itself.
    let taken = (2..=2 * crate::apply::LIST_EVERY)
        .filter(|_| state.live.known().is_some())
        .count();
    assert_eq!(taken as u32, 2 * crate::apply::LIST_EVERY - 3);

    // A list made again: not known whole until it is in.
    state.on_event(watch::Event::Listing(deployments()));
    assert!(state.live.known().is_none());
    state.on_event(watch::Event::Listed(deployments()));
    // A kind no longer watched is not known whole, nor made so again by its old
    // watch's last events, still queued.
    state.live.watching([]);
    assert!(state.live.known().is_none());
    state.live.watching([deployments()]);
    state.on_event(watch::Event::Listed(deployments()));
    assert!(state.live.known().is_none());
}

#[test]
fn a_list_made_again_without_an_object_held_is_its_delete() {
    let mut state = deployments_listed();
    // The watch lost its place; b was deleted meanwhile, and its list brings only a.
    state.on_event(watch::Event::Listing(deployments()));
    let ev = watch::Event::Object(deployment("a"), watched("fields-a", Some(id("a"))));
    assert_eq!(state.on_event(ev), None);
    assert_eq!(
        state.on_event(watch::Event::Listed(deployments())),
        Some(spec("b")),
        "b is gone: drift on b's spec"
    );
    assert!(!state.live.observed.objects.contains_key(&deployment("b")));
    assert!(state.live.observed.objects.contains_key(&deployment("a")));
    let known = state.live.known().expect("listed whole again");
    assert!(known.get(&deployment("b")).is_none());
}

#[test]
fn an_object_a_sync_wrote_is_read_again_until_its_watch_reports_the_write() {
    let mut state = deployments_listed();
    // A sync writes a's new fields; b is unchanged.
    let written = ObjectResult {
        fields: Some("fields-a2".into()),
        ..result("a", Action::Configured)
    };
    sync_ran(
        &mut state,
        &[Key::Full],
        vec![written, result("b", Action::Unchanged)],
    );
    let known = state.live.known().expect("listed whole");
    assert!(known.get(&deployment("a")).is_none(), "a: read again");
    assert!(known.get(&deployment("b")).is_some());
    // An event from before the write confirms nothing.
    let old = watch::Event::Object(deployment("a"), watched("fields-a", Some(id("a"))));
    state.on_event(old);
    let known = state.live.known().expect("listed whole");
    assert!(known.get(&deployment("a")).is_none());
    // The write's own event does.
    let new = watch::Event::Object(deployment("a"), watched("fields-a2", Some(id("a"))));
    assert_eq!(state.on_event(new), None, "our own write is no drift");
    let known = state.live.known().expect("listed whole");
    assert!(known.get(&deployment("a")).is_some());
}

#[test]
fn a_restarts_first_sync_waits_for_the_watches_lists_and_readiness_for_that_sync() {
    let mut state = State::new("dir:/specs".into(), true);
    state.on_event(watch::Event::Nodes(Vec::new()));
    state.on_event(watch::Event::Suspensions(Default::default()));
    new_revision(&mut state, "r1", webs(&[("a", 100)]));
    let kinds = [deployments(), ("".into(), "Service".into())];
    state.live.watching_first(kinds.clone());
    for kind in &kinds {
        state.on_event(watch::Event::Listing(kind.clone()));
    }
    assert_eq!(state.due(), Due::Later, "no kind listed yet");
    assert!(state.judging_held());
    state.on_event(watch::Event::Listed(deployments()));
    assert_eq!(state.due(), Due::Later, "Services not listed yet");
    state.on_event(watch::Event::Listed(kinds[1].clone()));
    assert_eq!(state.due(), Due::Sync);
    let known = state.live.known().expect("the watches' objects");
    assert_eq!(known.kinds, kinds.iter().cloned().collect());
    // Judged once that sync has ended, not beside it.
    state.on_sync_begin();
    assert!(state.judging_held());
    state.on_sync_done(&[Key::Full], ran(Vec::new(), None), now());
    assert!(!state.judging_held());
    // A kind listed again later holds no sync back.
    state.on_event(watch::Event::Listing(deployments()));
    assert_eq!(state.due(), Due::Sync);

    // A list that fails ends the wait: the sync lists for itself.
    let mut state = State::new("dir:/specs".into(), true);
    state.on_event(watch::Event::Nodes(Vec::new()));
    state.on_event(watch::Event::Suspensions(Default::default()));
    new_revision(&mut state, "r1", webs(&[("a", 100)]));
    state.live.watching_first([deployments()]);
    state.on_event(watch::Event::Listing(deployments()));
    assert_eq!(state.due(), Due::Later);
    state.on_event(watch::Event::ListFailed);
    assert_eq!(state.due(), Due::Sync);
    assert!(!state.judging_held());
    assert!(state.live.known().is_none(), "nothing is known whole");
}

/// Revision `id` with a file Flux Kustomization `flux-system/extra` rendered, with a
/// name the apiserver would refuse, its app beside it as the render hands it on.
fn with_extra(id: &str) -> SourceUpdate {
    let mut files = webs(&[("a", 200), ("b", 300)]);
    files.extend(self::files(&[(
        "apps.yaml#flux.flux-system.extra",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n  namespace: team\n",
    )]));
    let mut report = HydrateReport::default();
    report.rendered_apps.insert(
        "apps.yaml#flux.flux-system.extra".into(),
        vec![crate::spec::AppId::Flux {
            namespace: "flux-system".into(),
            name: "extra".into(),
        }],
    );
    SourceUpdate::Revision {
        id: id.into(),
        files,
        rendered: Box::new(report),
    }
}

#[test]
fn an_apps_error_holds_that_app_and_the_rest_of_the_revision_goes_on() {
    let mut state = applied();
    let (keys, tally) = state.on_source(with_extra("r2"), &Policy::default(), now());
    // Whole: the apps it holds changed.
    assert_eq!(keys, [Key::Full], "the rest of the revision is synced");
    assert_eq!(tally.apps_held, Some(1));
    assert_eq!(tally.sync, None);
    let tree = state.tree.clone().expect("a tree");
    assert_eq!(tree.specs.len(), 2);
    assert_eq!(
        tree.held.keys().collect::<Vec<_>>(),
        ["flux/flux-system/extra"]
    );
    let facts = tree.facts();
    assert!(facts.held_apps.contains("flux/flux-system/extra"));
    assert!(facts.hold_departed);
    let snap = state.snapshot();
    assert_eq!(snap.revision_seen, Some("r2"));
    assert!(!snap.errors.is_empty());
    assert!(
        snap.errors
            .iter()
            .all(|e| e.app.as_deref() == Some("flux/flux-system/extra")),
        "{:?}",
        snap.errors
    );

    // Fixed: no spec of the tree changed, but what the app left meanwhile is pruned only
    // by a whole sync, so the revision syncs whole.
    let (outcome, _) = sync_ran(&mut state, &keys, a_and_b(Action::Configured));
    assert_eq!(outcome, [(Key::Full, true)]);
    let (keys, tally) = new_revision(&mut state, "r3", webs(&[("a", 200), ("b", 300)]));
    assert_eq!(keys, [Key::Full]);
    assert_eq!(tally.apps_held, Some(0));
    assert!(state.snapshot().errors.is_empty());

    // All or nothing: the same revision changes nothing applied.
    let mut state = applied();
    let policy = Policy {
        all_or_nothing: true,
        ..Policy::default()
    };
    let (keys, tally) = state.on_source(with_extra("r2"), &policy, now());
    assert!(keys.is_empty());
    assert_eq!(tally.sync.map(|s| s.result), Some("invalid"));
    assert_eq!(tally.apps_held, None);
}

#[test]
fn a_sync_that_finds_no_cluster_makes_every_spec_unknown_until_one_reaches_it() {
    let mut state = applied();
    let specs = |state: &State| -> Vec<(bool, String, Option<String>, String)> {
        state
            .snapshot()
            .status_file()
            .specs
            .into_iter()
            .map(|s| (s.ready, s.status, s.reason, s.message))
            .collect()
    };
    let before = specs(&state);
    assert!(!before.is_empty());
    let why = "the cluster cannot be reached: client error (Connect): tcp connect error: Connection refused";
    state.on_sync_done(
        &[Key::Full],
        SyncEnd::Failed {
            message: why.into(),
            elapsed: Duration::ZERO,
            away: Some("ClusterUnreachable"),
        },
        now(),
    );
    assert!(state.health_dirty);
    for (ready, status, reason, message) in specs(&state) {
        assert!(!ready);
        assert_eq!(status, "Unknown");
        assert_eq!(reason.as_deref(), Some("ClusterUnreachable"));
        assert_eq!(message, why);
    }
    // A failure of the specs' own (a render, say) says nothing of the cluster.
    let mut other = applied();
    other.on_sync_done(
        &[Key::Full],
        SyncEnd::Failed {
            message: "rendering the specs: a collision".into(),
            elapsed: Duration::ZERO,
            away: None,
        },
        now(),
    );
    assert_eq!(specs(&other), before);
    // A sync that reaches the cluster again: the specs say what they are.
    sync_ran(&mut state, &[Key::Full], Vec::new());
    assert_eq!(specs(&state), before);
}
