//! The scale workload's pure parts: the apiserver's counts, growth and change, convergence.

use super::*;

#[test]
fn the_apiserver_s_counts_are_read_by_verb_and_resource_without_heartbeats() {
    let text = r#"# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",group="apps",resource="deployments",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",resource="leases",verb="PUT"} 50
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="WATCH"} 4
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST"} 1.5e+01
"#;
    let counts = parse_requests(text);
    assert_eq!(counts.get("APPLY deployments"), Some(&7));
    assert_eq!(counts.get("PUT deployments"), Some(&5));
    assert_eq!(counts.get("LIST pods"), Some(&15));
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert_eq!(only_writes(counts.clone()).values().sum::<u64>(), 12);
    let later: BTreeMap<String, u64> = [
        ("APPLY deployments".to_string(), 9),
        ("LIST pods".to_string(), 15),
    ]
    .into();
    assert_eq!(
        delta(&counts, &later),
        [("APPLY deployments".to_string(), 2)].into()
    );
}

#[test]
fn growth_is_per_spec_against_the_smallest_run_and_change_against_the_committed_one() {
    let point = |specs: usize, first: f64| ScalePoint {
        specs,
        objects: 2 * specs,
        first_sync_s: first,
        restart_s: 1.0,
        ..ScalePoint::default()
    };
    let results = |points| ScaleResults {
        date: String::new(),
        commit: "now".into(),
        machine: Value::Null,
        apiserver_version: String::new(),
        points,
        baseline_commit: None,
    };
    let mut now = results(vec![point(1000, 10.0), point(10_000, 150.0)]);
    assert_eq!(
        growth(&now.points, &now.points[1], "first sync s"),
        Some(1.5)
    );
    assert_eq!(
        growth(&now.points, &now.points[0], "first sync s"),
        Some(1.0)
    );
    let mut base = results(vec![point(10_000, 100.0)]);
    base.commit = "then".into();
    compare(&mut now, &base);
    assert_eq!(now.baseline_commit.as_deref(), Some("then"));
    assert!(now.points[0].change_pct.is_empty());
    assert_eq!(now.points[1].change_pct.get("first sync s"), Some(&50.0));
    assert_eq!(now.points[1].change_pct.get("restart s"), Some(&0.0));
    assert!(markdown(&now).contains("| 10000 | first sync s | 150.00 | 1.50x | +50.0 % |"));
}

#[test]
fn converged_means_every_spec_ready_and_the_revision_applied() {
    let ok = serde_json::json!({"revision_applied": "r", "revision_seen": "r",
            "last_sync": {"result": "success"}, "specs": [{"ready": true}, {"ready": true}]});
    assert!(is_converged(&ok, 2));
    assert!(!is_converged(&ok, 3));
    let mut one_not = ok.clone();
    one_not["specs"][1]["ready"] = false.into();
    assert!(!is_converged(&one_not, 2));
    let mut behind = ok.clone();
    behind["revision_seen"] = "s".into();
    assert!(!is_converged(&behind, 2));
}
