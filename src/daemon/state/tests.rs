//! The state's decisions, without a cluster: which keys each input queues, and when a
//! revision counts as applied.

use serde_json::json;

use super::readiness::HealthNews;
use super::*;
use crate::apply::prune;
use crate::apply::{Action, ObjectResult, SyncReport};
use crate::health::{Figures, Status};
use crate::object::Packed;
use crate::spec::{Kind, parse_files};

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
    let body: String = webs.iter().map(|(name, qps)| web(name, *qps)).collect();
    files(&[("web.toml", &format!("namespace = \"n\"\n{body}"))])
}

fn revision(id: &str, files: Vec<SourceFile>) -> SourceUpdate {
    SourceUpdate::Revision {
        id: id.into(),
        files,
    }
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
        fields,
    }
}

fn ran(objects: Vec<ObjectResult>, refused: Option<&str>) -> SyncEnd<'static> {
    SyncEnd::Ran {
        report: SyncReport {
            objects,
            prune: prune::Report {
                refused: refused.map(str::to_string),
                ..prune::Report::default()
            },
        },
        objects: &[],
        elapsed: Duration::from_millis(1500),
    }
}

fn with_nodes() -> State {
    let mut state = State::new("dir:/specs".into(), true);
    state.on_event(watch::Event::Nodes(Vec::new()));
    state
}

/// A state whose revision `r1` (specs a and b) synced whole.
fn applied() -> State {
    let mut state = with_nodes();
    let (keys, _) = state.on_source(
        revision("r1", webs(&[("a", 100), ("b", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [Key::Full]);
    let objects = vec![result("a", Action::Created), result("b", Action::Created)];
    let (outcome, tally) = state.on_sync_done(&keys, ran(objects, None), now());
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
    let (keys, tally) = state.on_source(
        revision("r1", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [Key::Full]);
    assert_eq!(tally, Tally::default());
    let snap = state.snapshot();
    assert_eq!(snap.revision_seen, Some("r1"));
    assert_eq!(snap.revision_applied, None);
    let (outcome, tally) =
        state.on_sync_done(&keys, ran(vec![result("a", Action::Created)], None), now());
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
        },
        &Policy::default(),
        now(),
    );
    assert!(keys.is_empty());
    assert!(tally.source_failed);
    assert_eq!(state.snapshot().errors[0].message, "fetch failed");
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    // The same revision again (the source cleared what it remembered): no spec
    // changed, nothing to sync, and the error is gone.
    let (keys, _) = state.on_source(
        revision("r1", webs(&[("a", 100), ("b", 100)])),
        &Policy::default(),
        now(),
    );
    assert!(keys.is_empty());
    assert!(state.snapshot().errors.is_empty());
}

#[test]
fn after_an_applied_revision_only_the_changed_specs_sync() {
    let mut state = applied();
    let (keys, tally) = state.on_source(
        revision("r2", webs(&[("a", 300), ("b", 100), ("c", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [spec("a"), spec("c")]);
    assert_eq!(tally.applied, None);
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
}

#[test]
fn a_revision_that_changes_no_spec_is_applied_at_once() {
    let mut state = applied();
    let (keys, tally) = state.on_source(
        revision(
            "r2",
            files(&[(
                "web.toml",
                &format!(
                    "# a comment\nnamespace = \"n\"\n{}{}",
                    web("a", 100),
                    web("b", 100)
                ),
            )]),
        ),
        &Policy::default(),
        now(),
    );
    // The specs moved a line down in their file: that is a change.
    assert_eq!(keys, [spec("a"), spec("b")]);
    assert_eq!(tally.applied, None);
    let (keys, tally) = state.on_source(
        revision(
            "r3",
            files(&[(
                "web.toml",
                &format!(
                    "# another\nnamespace = \"n\"\n{}{}",
                    web("a", 100),
                    web("b", 100)
                ),
            )]),
        ),
        &Policy::default(),
        now(),
    );
    // Still pending from r2: they sync, and then r3 counts as applied.
    assert!(keys.is_empty());
    assert_eq!(tally.applied, None);
    let (_, tally) = state.on_sync_done(
        &[spec("a"), spec("b")],
        ran(
            vec![
                result("a", Action::Unchanged),
                result("b", Action::Unchanged),
            ],
            None,
        ),
        now(),
    );
    assert_eq!(tally.applied.as_deref(), Some("r3"));
    let (keys, tally) = state.on_source(
        revision(
            "r4",
            files(&[(
                "web.toml",
                &format!(
                    "# yet another\nnamespace = \"n\"\n{}{}",
                    web("a", 100),
                    web("b", 100)
                ),
            )]),
        ),
        &Policy::default(),
        now(),
    );
    assert!(keys.is_empty());
    assert_eq!(tally.applied.as_deref(), Some("r4"));
    assert_eq!(state.snapshot().revision_applied, Some("r4"));
}

#[test]
fn the_revision_counts_as_applied_only_when_every_changed_spec_has_synced() {
    let mut state = applied();
    let (keys, _) = state.on_source(
        revision("r2", webs(&[("a", 300), ("b", 300)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [spec("a"), spec("b")]);
    let (outcome, tally) = state.on_sync_done(
        &[spec("a")],
        ran(vec![result("a", Action::Configured)], None),
        now(),
    );
    assert_eq!(outcome, [(spec("a"), true)]);
    assert_eq!(tally.applied, None);
    assert_eq!(state.snapshot().revision_applied, Some("r1"));
    // A spec whose objects failed still counts as synced (the failure is in the
    // status, and retried with backoff).
    let (outcome, tally) = state.on_sync_done(
        &[spec("b")],
        ran(vec![result("b", Action::Failed("forbidden".into()))], None),
        now(),
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
    let (keys, _) = state.on_source(
        revision("r2", webs(&[("a", 300), ("b", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [spec("a")]);
    let (outcome, tally) = state.on_sync_done(
        &[Key::Full, spec("a")],
        SyncEnd::Failed {
            message: "the API is down".into(),
            elapsed: Duration::from_secs(3),
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
    let (keys, _) = state.on_source(
        revision("r3", webs(&[("a", 300), ("b", 300)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [spec("b")]);
    let (_, tally) = state.on_sync_done(&[spec("b")], ran(Vec::new(), None), now());
    assert_eq!(tally.applied, None, "a has not synced yet");
    // A whole sync that ran settles every pending spec.
    let (_, tally) = state.on_sync_done(&[Key::Full], ran(Vec::new(), None), now());
    assert_eq!(tally.applied.as_deref(), Some("r3"));
    let (keys, _) = state.on_source(
        revision("r4", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [spec("a"), spec("b")]);
}

#[test]
fn until_a_revision_is_applied_every_revision_syncs_the_whole_tree() {
    let mut state = with_nodes();
    let (keys, _) = state.on_source(
        revision("r1", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [Key::Full]);
    let failed = SyncEnd::Failed {
        message: "down".into(),
        elapsed: Duration::ZERO,
    };
    state.on_sync_done(&keys, failed, now());
    let (keys, _) = state.on_source(
        revision("r2", webs(&[("a", 200)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(keys, [Key::Full]);
    assert_eq!(state.snapshot().revision_applied, None);
}

#[test]
fn a_refused_prune_of_a_spec_sync_retries_as_a_whole_sync() {
    let mut state = applied();
    state.on_source(
        revision("r2", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
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
fn a_whole_sync_fails_when_any_spec_does_and_a_spec_key_only_for_its_own() {
    let mut state = applied();
    let objects = vec![
        result("a", Action::Unchanged),
        result("b", Action::Conflict("another manager".into())),
    ];
    let (outcome, tally) = state.on_sync_done(
        &[Key::Full, spec("a"), spec("b")],
        ran(objects, None),
        now(),
    );
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
    assert!(!state.live.objects.contains_key(&key));
    // An object no sync of ours recorded is not drift, whatever its annotation says.
    assert_eq!(
        state.on_event(watch::Event::Object(
            deployment("z"),
            watched("x", Some(id("z")))
        )),
        None
    );
    assert!(state.live.objects.contains_key(&deployment("z")));
}

#[test]
fn drift_corrections_count_writes_that_are_not_a_new_revisions() {
    let mut state = applied();
    state.on_source(
        revision("r2", webs(&[("a", 300), ("b", 100)])),
        &Policy::default(),
        now(),
    );
    let (_, tally) = state.on_sync_done(
        &[spec("a"), spec("b")],
        ran(
            vec![
                result("a", Action::Configured),
                result("b", Action::Configured),
            ],
            None,
        ),
        now(),
    );
    assert_eq!(tally.drift_corrections, 1);
    let (_, tally) = state.on_sync_done(
        &[Key::Full],
        ran(vec![result("b", Action::Configured)], None),
        now(),
    );
    assert_eq!(tally.drift_corrections, 0);
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
    assert!(state.live.endpoints.contains_key(&("n".into(), "a".into())));
    assert_eq!(state.on_event(watch::Event::Object(key, None)), None);
    assert!(state.live.endpoints.is_empty());
}

#[test]
fn node_changes_rerender_and_sync_the_whole_tree_only_under_localservices() {
    let mut state = State::new("dir:/specs".into(), true);
    state.on_source(
        revision("r1", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(state.gate(), Gate::Later);
    assert_eq!(state.on_event(watch::Event::Nodes(Vec::new())), None);
    assert_eq!(state.gate(), Gate::Sync);
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
    state.on_source(
        revision("r2", files(&[("ls.toml", local)])),
        &Policy::default(),
        now(),
    );
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
    assert_eq!(state.gate(), Gate::Later);
    state.on_event(watch::Event::Nodes(Vec::new()));
    assert_eq!(state.gate(), Gate::Drop);
    assert_eq!(state.on_leadership(true), Some(Key::Full));
    assert_eq!(state.gate(), Gate::Drop, "no tree yet");
    assert!(!state.warm_standby());
    state.on_source(
        revision("r1", webs(&[("a", 100)])),
        &Policy::default(),
        now(),
    );
    assert_eq!(state.gate(), Gate::Sync);
    assert_eq!(state.on_leadership(true), None);
    assert_eq!(state.on_leadership(false), None);
    assert_eq!(state.gate(), Gate::Drop);
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
    let news = state.take_health(
        vec![
            health("a", Status::InProgress),
            health("b", Status::Current),
        ],
        timeout,
        start,
    );
    assert_eq!(news, HealthNews::default());
    assert_eq!(state.health[0].status, Status::InProgress);

    let later = Now {
        at: start.at + Duration::from_secs(61),
        ..start
    };
    let news = state.take_health(
        vec![
            health("a", Status::InProgress),
            health("b", Status::Current),
        ],
        timeout,
        later,
    );
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
