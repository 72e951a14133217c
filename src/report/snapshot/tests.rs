use super::*;
use crate::health::{Figures, ObjectHealth, ObjectStatus, Status};
use crate::spec::{SourceFile, parse_files};

fn specs() -> Vec<Spec> {
    let text = "namespace = \"n\"\n\
                [elasticweb.a]\nimage = \"nginx\"\nsingle-pod-qps = 100\ntotal-qps = 100\n\
                [elasticweb.b]\nimage = \"nginx\"\nsingle-pod-qps = 100\ntotal-qps = 100\n";
    let files = [SourceFile {
        path: "web.toml".into(),
        contents: text.as_bytes().to_vec(),
    }];
    parse_files(&files).expect("valid specs").specs
}

static NO_SUSPENSIONS: Suspensions = Suspensions::new();
static NO_DRIFT: BTreeMap<ObjKey, SpecId> = BTreeMap::new();
static NO_RENDERS: BTreeMap<String, crate::spec::RenderedBy> = BTreeMap::new();
static NO_APPS: crate::spec::RenderedApps = crate::spec::RenderedApps::new();
static NO_FAILURES: std::sync::LazyLock<HashMap<ObjKey, String>> =
    std::sync::LazyLock::new(HashMap::new);
static NO_WARNINGS: std::sync::LazyLock<HashMap<ObjKey, Vec<String>>> =
    std::sync::LazyLock::new(HashMap::new);
static NO_REVISIONS: std::sync::LazyLock<HashMap<SpecId, String>> =
    std::sync::LazyLock::new(HashMap::new);

fn snapshot<'a>(
    specs: &'a [Spec],
    health: &'a [Arc<SpecHealth>],
    actions: &'a HashMap<ObjKey, String>,
) -> Snapshot<'a> {
    Snapshot {
        source: "dir:/specs",
        revision_seen: Some("r2"),
        revision_applied: Some("r1"),
        last_sync: None,
        errors: &[],
        cluster_error: None,
        cluster_away: None,
        kubernetes: Some("v1.37.2"),
        cluster: Some("edge"),
        specs,
        rendered: &NO_RENDERS,
        rendered_apps: &NO_APPS,
        health,
        expected: &[],
        actions,
        failures: &NO_FAILURES,
        warnings: &NO_WARNINGS,
        settled_in: &NO_REVISIONS,
        instance: "default",
        leader: true,
        leader_problem: None,
        shard: None,
        suspensions: &NO_SUSPENSIONS,
        drifted: &NO_DRIFT,
        syncing: false,
        sync_progress: None,
        correct_drift: true,
        shared: None,
    }
}

#[test]
fn a_member_shows_the_whole_tree_its_own_the_others_and_the_unreported() {
    let specs = specs();
    let actions = HashMap::new();
    let shard = super::super::status::ShardStatus {
        member: "m0".into(),
        buckets: vec![1],
        members: vec!["m0".into(), "m1".into()],
        problem: None,
    };
    // m0 holds b; m1 published a; a spec of m1's at a revision m0 has not read yet
    // is not shown.
    let peers = HashMap::from([
        (
            "elasticweb/n/a".to_string(),
            Arc::new(SpecStatus {
                id: "elasticweb/n/a".into(),
                ready: true,
                status: "Current".into(),
                member: Some("m1".into()),
                ..SpecStatus::default()
            }),
        ),
        (
            "elasticweb/n/gone".to_string(),
            Arc::new(SpecStatus {
                id: "elasticweb/n/gone".into(),
                member: Some("m1".into()),
                ..SpecStatus::default()
            }),
        ),
    ]);
    let mine = [specs[1].clone()];
    let snap = Snapshot {
        specs: &mine,
        shard: Some(&shard),
        shared: Some(Shared {
            whole: &specs,
            peers: &peers,
        }),
        ..snapshot(&specs, &[], &actions)
    };
    let mut doc = snap.status_file();
    let own: Vec<(&str, Option<&str>)> = doc
        .specs
        .iter()
        .map(|s| (s.id.as_str(), s.member.as_deref()))
        .collect();
    assert_eq!(own, [("elasticweb/n/b", Some("m0"))]);
    snap.with_peers(&mut doc);
    let all: Vec<(&str, Option<&str>, bool)> = doc
        .specs
        .iter()
        .map(|s| (s.id.as_str(), s.member.as_deref(), s.ready))
        .collect();
    assert_eq!(
        all,
        [
            ("elasticweb/n/a", Some("m1"), true),
            ("elasticweb/n/b", Some("m0"), false)
        ]
    );

    // Nobody published a: said so, not left out.
    let nobody = HashMap::new();
    let snap = Snapshot {
        shared: Some(Shared {
            whole: &specs,
            peers: &nobody,
        }),
        ..snap
    };
    let mut doc = snap.status_file();
    snap.with_peers(&mut doc);
    let a = &doc.specs[0];
    assert_eq!(a.id, "elasticweb/n/a");
    assert_eq!((a.ready, a.member.as_deref()), (false, None));
    assert_eq!(a.reason.as_deref(), Some(UNREPORTED));
    assert_eq!((a.file.as_str(), a.line), ("web.toml", 2));
}

#[test]
fn a_spec_without_readiness_is_unknown_and_not_synced_yet() {
    let specs = specs();
    let actions = HashMap::new();
    let status = snapshot(&specs, &[], &actions).status_file();
    assert_eq!(status.version, VERSION);
    assert_eq!(status.source, "dir:/specs");
    assert_eq!(status.revision_seen.as_deref(), Some("r2"));
    assert_eq!(status.revision_applied.as_deref(), Some("r1"));
    assert_eq!(status.leader, Some(true));
    let ids: Vec<&str> = status.specs.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["elasticweb/n/a", "elasticweb/n/b"]);
    let a = &status.specs[0];
    assert_eq!((a.kind.as_str(), a.namespace.as_str()), ("elasticweb", "n"));
    assert_eq!((a.file.as_str(), a.line), ("web.toml", 2));
    assert!(!a.ready);
    assert_eq!(a.status, "Unknown");
    assert_eq!(a.message, "not synced yet");
    assert_eq!(a.figures.value(), serde_json::Value::Null);
}

#[test]
fn statuses_use_the_kstatus_spelling() -> Result<(), Box<dyn std::error::Error>> {
    let specs = specs();
    let mut actions = HashMap::new();
    let key = ObjKey {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "n".into(),
        name: "a".into(),
    };
    actions.insert(key.clone(), "updated".to_string());
    let expected = [Expected {
        spec: specs[0].id.clone(),
        api_version: "apps/v1".into(),
        key,
        display: "Deployment n/a".into(),
        node: None,
        replicas: None,
        rule: None,
    }];
    let health = [Arc::new(SpecHealth {
        id: "elasticweb/n/a".into(),
        ready: false,
        status: Status::InProgress,
        reason: Some("Rollout".into()),
        message: "rolling out".into(),
        figures: Figures::Manifest {},
        objects: vec![ObjectHealth {
            object: "Deployment n/a".into(),
            status: ObjectStatus {
                status: Status::NotFound,
                reason: None,
                message: "not found".into(),
            },
        }],
    })];
    let snap = Snapshot {
        expected: &expected,
        ..snapshot(&specs, &health, &actions)
    };
    let status = snap.status_file();
    let a = &status.specs[0];
    assert_eq!(a.status, "InProgress");
    assert_eq!(a.reason.as_deref(), Some("Rollout"));
    assert_eq!(a.objects[0].status, "NotFound");
    assert_eq!(a.objects[0].action.as_deref(), Some("updated"));
    // In the JSON text too, which tools read.
    let json = serde_json::to_string(&status)?;
    assert!(json.contains(r#""status":"InProgress""#), "{json}");
    assert!(json.contains(r#""status":"NotFound""#), "{json}");
    Ok(())
}

#[test]
fn the_status_made_spec_by_spec_is_the_one_made_as_a_list() -> Result<(), Box<dyn std::error::Error>>
{
    let specs = specs();
    let key = |name: &str| ObjKey {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "n".into(),
        name: name.into(),
    };
    let expected: Vec<Expected> = ["a", "b"]
        .iter()
        .zip(&specs)
        .map(|(name, spec)| Expected {
            spec: spec.id.clone(),
            api_version: "apps/v1".into(),
            key: key(name),
            display: format!("Deployment n/{name}"),
            node: None,
            replicas: None,
            rule: None,
        })
        .collect();
    let actions = HashMap::from([(key("a"), "updated".to_string())]);
    let failures = HashMap::from([(key("b"), "denied by a webhook".to_string())]);
    let warnings = HashMap::from([(key("a"), vec!["deprecated field".to_string()])]);
    let drifted = BTreeMap::from([(key("a"), specs[0].id.clone())]);
    let release = crate::spec::Release {
        name: "web".into(),
        release_name: "web".into(),
        namespace: "n".into(),
        chart: "charts/web".into(),
        version: "1.0.0".into(),
        app_version: None,
        file: "web.toml".into(),
        line: 1,
    };
    let rendered = BTreeMap::from([(
        "web.toml".to_string(),
        crate::spec::RenderedBy {
            tool: "helm".into(),
            version: "v4.1.4".into(),
            command: "helm template".into(),
            release: Some(release),
        },
    )]);
    let health = [Arc::new(SpecHealth {
        id: "elasticweb/n/a".into(),
        ready: true,
        status: Status::Current,
        reason: None,
        message: "ready".into(),
        figures: Figures::ElasticWeb {
            desired_replicas: 1,
            available_replicas: 1,
            real_qps: 100,
        },
        objects: vec![ObjectHealth {
            object: "Deployment n/a".into(),
            status: ObjectStatus {
                status: Status::Current,
                reason: None,
                message: "ready".into(),
            },
        }],
    })];
    let snap = Snapshot {
        expected: &expected,
        failures: &failures,
        warnings: &warnings,
        drifted: &drifted,
        rendered: &rendered,
        ..snapshot(&specs, &health, &actions)
    };
    let listed = snap.status_file();
    assert_eq!(listed.specs[1].reason.as_deref(), Some("ApplyFailed"));
    assert_eq!(listed.specs[0].drifted, ["Deployment.apps n/a"]);
    assert_eq!(listed.specs[0].warnings.len(), 1);
    assert_eq!(listed.releases[0].tally.specs.len(), 2);
    // Each pass over the streamed specs makes them again, the same each time.
    let streamed = snap.streamed();
    let once = serde_json::to_string_pretty(&streamed)?;
    assert_eq!(once, serde_json::to_string_pretty(&listed)?);
    assert_eq!(
        serde_json::to_string(&streamed)?,
        serde_json::to_string(&listed)?
    );
    assert!(Published::new(&listed) == Published::sized(&streamed, 0));
    Ok(())
}

#[test]
fn an_unreachable_cluster_and_a_refused_lease_are_listed_after_the_source_errors() {
    let actions = HashMap::new();
    let errors = [SourceError {
        app: None,
        file: Some("web.toml".into()),
        line: Some(3),
        column: Some(1),
        message: "bad".into(),
    }];
    let status = Snapshot {
        errors: &errors,
        cluster_error: Some("connection refused"),
        kubernetes: None,
        leader: false,
        shard: None,
        leader_problem: Some("leader election: cannot use Lease ns/l: forbidden"),
        ..snapshot(&[], &[], &actions)
    }
    .status_file();
    let messages: Vec<&str> = status.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "bad",
            "cannot reach the Kubernetes API: connection refused",
            "leader election: cannot use Lease ns/l: forbidden"
        ]
    );
    assert_eq!(status.errors[1].file, None);
    assert!(status.specs.is_empty());
}

#[test]
fn a_failed_write_is_retried_and_counted() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let actions = HashMap::new();
    let snap = snapshot(&[], &[], &actions);
    let metrics = Metrics::new();
    let (published, mut readers) =
        watch::channel(Arc::new(Published::new(&StatusFile::starting())));
    let mut writer = StatusWriter::new(
        Some(dir.path().join("missing").join("s.json")),
        published.clone(),
    );
    writer.write(&snap, &metrics);
    // Readers of the API see the status although the file could not be written.
    assert!(readers.has_changed()?);
    assert_eq!(
        readers.borrow_and_update().json(),
        serde_json::to_string(&snap.status_file())?
    );
    assert!(writer.failing());
    assert!(
        metrics
            .encode()
            .contains("driftless_status_write_errors_total 1\n")
    );
    let mut writer = StatusWriter::new(Some(dir.path().join("s.json")), published.clone());
    writer.write(&snap, &metrics);
    assert!(!writer.failing());
    // The file also says when it was written; the API's document does not.
    let mut written = StatusFile::read(&dir.path().join("s.json"))?;
    assert!(written.written.take().is_some());
    assert_eq!(written, snap.status_file());
    let mut none = StatusWriter::new(None, published.clone());
    none.write(&snap, &metrics);
    assert!(!none.failing());
    // The same status again wakes no reader; a changed one wakes them.
    assert!(!readers.has_changed()?);
    let mut writer = StatusWriter::new(None, published);
    writer.write(
        &Snapshot {
            syncing: true,
            ..snap
        },
        &metrics,
    );
    assert!(readers.has_changed()?);
    assert!(
        readers
            .borrow_and_update()
            .json()
            .contains(r#""syncing":true"#)
    );
    Ok(())
}
