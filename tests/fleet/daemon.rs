//! One daemon serving a fleet (`run --clusters FILE` without `--cluster`): an engine per
//! cluster in one process, behind one listener, against two real control planes.

use super::{
    TwoClusters, config_maps, configmap, create_namespace, pairs, two_clusters, until_config_maps,
    write,
};
use crate::support;

use serde_json::Value;

use support::{Browser, Prometheus, assert_exit, http, printed, show};

const CLUSTERS: &str = "[cluster.edge]\nkubeconfig = \"edge.kubeconfig\"\nlabels = { fleet = \"yes\" }\n\n[cluster.in-cluster]\nlabels = { fleet = \"yes\" }\n";

/// The fleet's summary row of `cluster`.
fn row<'a>(fleet: &'a Value, cluster: &str) -> &'a Value {
    fleet["clusters"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["cluster"] == cluster))
        .unwrap_or(&Value::Null)
}

async fn fleet_summary(addr: std::net::SocketAddr) -> Value {
    let (code, body) = http(addr, "GET", "/api/v1/fleet", &[], b"").await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// One process serves both clusters: each gets its files, its status (a file of its own
/// beside the one `driftless status` reads, its API and page under `/clusters/NAME/`),
/// its samples in one `/metrics` a real Prometheus scrapes; the fleet's page and summary
/// show both. The edge cluster stopped: the home cluster still takes a change as soon, the
/// edge's specs say `Unknown` (`ClusterUnreachable`), the fleet stays ready; back, the
/// edge converges.
#[tokio::test]
async fn one_daemon_serves_each_cluster_and_one_stopped_delays_no_other() {
    let TwoClusters {
        home,
        ns,
        mut edge_server,
        edge,
        dir,
        clusters,
    } = two_clusters("fleet-one", |_| CLUSTERS.into()).await;
    let root = dir.path().join("tree");
    write(
        &root,
        ".driftless.toml",
        "[[cluster]]\npath = \"all/**\"\nlabels = { fleet = \"yes\" }\n\n[[cluster]]\npath = \"edge/**\"\nnames = [\"edge\"]\n",
    );
    for name in ["a", "b", "c"] {
        write(
            &root,
            &format!("all/{name}.yaml"),
            &configmap(name, &ns, "one"),
        );
    }
    write(&root, "edge/e.yaml", &configmap("e", &ns, "edge only"));
    write(&root, "h.yaml", &configmap("h", &ns, "home only"));
    let daemon = support::Daemon::builder(&ns)
        .args(&[
            "--dir",
            root.to_str().unwrap(),
            "--resync",
            "2s",
            "--clusters",
            clusters.as_str(),
        ])
        .start();
    let addr = daemon.metrics;
    let converged = |fleet: &Value| {
        ["in-cluster", "edge"]
            .iter()
            .all(|c| row(fleet, c)["converged"] == true)
    };
    support::eventually("both clusters converged", support::WAIT, || async {
        let fleet = fleet_summary(addr).await;
        match converged(&fleet) {
            true => Ok(fleet),
            false => Err(format!("{fleet:#}\n{}", support::tail(&daemon.log(), 4000))),
        }
    })
    .await;
    assert_eq!(
        config_maps(&home, &ns).await,
        pairs(&[("a", "one"), ("b", "one"), ("c", "one"), ("h", "home only")])
    );
    assert_eq!(
        config_maps(&edge, &ns).await,
        pairs(&[("a", "one"), ("b", "one"), ("c", "one"), ("e", "edge only")])
    );

    // Each cluster's own API, under its name.
    for (cluster, specs) in [("in-cluster", 4), ("edge", 4)] {
        let (code, body) = http(
            addr,
            "GET",
            &format!("/clusters/{cluster}/api/v1/status"),
            &[],
            b"",
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["cluster"], cluster, "{status:#}");
        assert_eq!(status["specs"].as_array().map(Vec::len), Some(specs));
    }
    let (code, body) = http(addr, "GET", "/api/v1/status", &[], b"").await;
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("/clusters/NAME/api/v1/status"), "{body}");
    let (code, _) = http(addr, "GET", "/clusters/edge", &[], b"").await;
    assert_eq!(
        code, 308,
        "a cluster's page is at its path with a closing slash"
    );
    let (code, body) = http(addr, "GET", "/clusters/nowhere/api/v1/status", &[], b"").await;
    assert_eq!(code, 404, "{body}");

    // `driftless status` of the fleet's status file: a row per cluster.
    let out = support::driftless(&[
        "status",
        "--status-file",
        daemon.status_file().to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let table = printed(&out);
    assert!(table.starts_with("CLUSTER "), "{}", show(&out));
    for cluster in ["in-cluster", "edge"] {
        assert!(
            table.contains(&format!("\n{cluster}: converged")),
            "{}",
            show(&out)
        );
    }

    // One /metrics, each family once, both clusters' samples, as a real Prometheus reads it.
    let (code, metrics) = http(addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(code, 200);
    assert_eq!(
        metrics.matches("# TYPE driftless_spec_ready gauge").count(),
        1,
        "{metrics}"
    );
    let prometheus = Prometheus::scraping(addr);
    support::eventually(
        "Prometheus to see each cluster's ready specs",
        support::WAIT,
        || async {
            let seen = prometheus.query("sum by (cluster) (driftless_spec_ready)")?;
            let mut by_cluster: Vec<(String, String)> = seen
                .iter()
                .map(|s| {
                    (
                        s["metric"]["cluster"].as_str().unwrap_or("").to_string(),
                        s["value"][1].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            by_cluster.sort();
            match by_cluster == pairs(&[("edge", "4"), ("in-cluster", "4")]) {
                true => Ok(()),
                false => Err(format!("{by_cluster:?}\n{}", prometheus.log())),
            }
        },
    )
    .await;

    // The fleet's page, in a real browser: a row per cluster, each leading to its page.
    let browser = Browser::start().await;
    browser.goto(&format!("http://{addr}/")).await;
    browser
        .wait_for_text("#cluster-rows", &["in-cluster", "edge", "converged"])
        .await;
    browser.click("a[href=\"clusters/edge/\"]").await;
    browser.wait_for_spec_rows(4).await;
    assert_eq!(browser.text("#cluster").await, "edge");
    assert_eq!(
        browser
            .eval("return !document.getElementById('fleet-link').hidden")
            .await,
        true,
        "a cluster's page leads back to the fleet's"
    );

    edge_server.stop();
    write(&root, "all/a.yaml", &configmap("a", &ns, "two"));
    std::fs::remove_file(root.join("all/c.yaml")).unwrap();
    let changed = pairs(&[("a", "two"), ("b", "one"), ("h", "home only")]);
    until_config_maps(
        "the home cluster to take the change while the edge is away",
        &home,
        &ns,
        &changed,
    )
    .await;
    let away = support::eventually(
        "the fleet to say the edge is not reached and home converged",
        support::WAIT,
        || async {
            let fleet = fleet_summary(addr).await;
            let edge_row = row(&fleet, "edge");
            let unknown = edge_row["not_ready"] == 3 && edge_row["last_sync"]["result"] == "failed";
            match edge_row["reachable"] == false
                && unknown
                && row(&fleet, "in-cluster")["converged"] == true
            {
                true => Ok(fleet),
                false => Err(format!("{fleet:#}")),
            }
        },
    )
    .await;
    assert!(
        row(&away, "edge")["last_sync"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the cluster cannot be reached: ")),
        "{away:#}"
    );
    let (code, body) = http(addr, "GET", "/clusters/edge/api/v1/status", &[], b"").await;
    assert_eq!(code, 200);
    let edge_status: Value = serde_json::from_str(&body).unwrap();
    assert!(
        edge_status["specs"].as_array().is_some_and(|specs| specs
            .iter()
            .all(|s| s["status"] == "Unknown" && s["reason"] == "ClusterUnreachable")),
        "{edge_status:#}"
    );
    let (code, body) = http(addr, "GET", "/readyz", &[], b"").await;
    assert_eq!(
        code, 200,
        "a cluster away keeps the fleet's listener ready: {body}"
    );
    browser.goto(&format!("http://{addr}/")).await;
    browser
        .wait_for_text("#summary", &["2 clusters", "1 converged", "1 not reached"])
        .await;
    browser.close().await;

    edge_server.start_again();
    let edge_changed = pairs(&[("a", "two"), ("b", "one"), ("e", "edge only")]);
    until_config_maps(
        "the edge to converge once it is back",
        &edge,
        &ns,
        &edge_changed,
    )
    .await;
    support::eventually(
        "the fleet to say both converged again",
        support::WAIT,
        || async {
            let fleet = fleet_summary(addr).await;
            match converged(&fleet) {
                true => Ok(()),
                false => Err(format!("{fleet:#}")),
            }
        },
    )
    .await;
}

/// Three replicas of one fleet's daemon (`run --clusters FILE --shard`) divide each
/// cluster's specs among them (by the Leases and holders table on that cluster), so the
/// unit of work is a (cluster, spec) pair: every replica holds a share of each cluster,
/// none holds a spec another holds. One replica SIGKILLed: the other two take its share of
/// both clusters, and a change of the tree reaches every object of both. The edge's
/// apiserver is the test's own, so its write counts are this test's: each object there
/// is written once per change, never by two replicas.
#[tokio::test]
async fn three_replicas_divide_a_fleet_by_cluster_and_spec_and_take_over_a_killed_one() {
    use crate::shards::{all_specs, division_problem, wait_accounts, write_specs};

    const N: usize = 30;
    const WRITTEN: &[&str] = &["serviceaccounts"];
    let limit = std::time::Duration::from_secs(120);
    let TwoClusters {
        home,
        ns,
        edge_server: _edge_server,
        edge,
        dir,
        clusters,
    } = two_clusters("fleet-shard", |_| CLUSTERS.into()).await;
    // The inventory, Leases and holders table apart from the specs (whose namespace is
    // protected from them), on each cluster.
    let inv = support::namespace(&home, "fleet-shard-inv").await;
    create_namespace(&edge, &inv).await;
    let root = dir.path().join("tree");
    write(
        &root,
        ".driftless.toml",
        "[[cluster]]\npath = \"specs/**\"\nlabels = { fleet = \"yes\" }\n",
    );
    write_specs(&root, &ns, N, None);
    let want = all_specs(&ns, N);
    let before = support::apiserver_writes_by_code_when_quiet(&edge, WRITTEN).await;

    let ids = ["a", "b", "c"];
    let replica = |id: &str| {
        support::Daemon::builder(&ns)
            .args(&[
                "--dir",
                root.to_str().unwrap(),
                "--clusters",
                clusters.as_str(),
                "--resync",
                "1h",
                "--shard",
                "--shard-identity",
                id,
                "--shard-lease",
                "6s",
                "--inventory-namespace",
                inv.as_str(),
            ])
            .start()
    };
    let mut replicas: Vec<support::Daemon> = ids.iter().map(|id| replica(id)).collect();
    let cluster_status = |d: &support::Daemon, cluster: &str| -> Value {
        let file = d
            .status_file()
            .with_file_name(format!("status.{cluster}.json"));
        std::fs::read_to_string(file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    };
    // Each cluster divided among `members` (of `replicas`, by index).
    let divided = |replicas: &[support::Daemon], members: &[usize]| {
        let mut problems = Vec::new();
        for cluster in ["in-cluster", "edge"] {
            let named: Vec<(&str, &support::Daemon)> =
                members.iter().map(|&i| (ids[i], &replicas[i])).collect();
            let statuses: Vec<Value> = members
                .iter()
                .map(|&i| cluster_status(&replicas[i], cluster))
                .collect();
            if let Some(why) = division_problem(&named, &statuses, &want) {
                problems.push(format!("cluster {cluster}: {why}"));
            }
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems.join("\n")),
        }
    };
    support::eventually("three replicas dividing both clusters", limit, || async {
        divided(&replicas, &[0, 1, 2])
    })
    .await;
    wait_accounts(&home, &ns, N, None, limit).await;
    wait_accounts(&edge, &ns, N, None, limit).await;
    let settled = support::apiserver_writes_by_code_when_quiet(&edge, WRITTEN).await;
    assert_eq!(
        support::carried_out(&settled) - support::carried_out(&before),
        N as u64,
        "the edge's ServiceAccounts: each written once, by one replica"
    );

    replicas[1].sigkill();
    write_specs(&root, &ns, N, Some("two"));
    wait_accounts(&home, &ns, N, Some("two"), limit).await;
    wait_accounts(&edge, &ns, N, Some("two"), limit).await;
    support::eventually("the two left dividing both clusters", limit, || async {
        divided(&replicas, &[0, 2])
    })
    .await;
    let after = support::apiserver_writes_by_code_when_quiet(&edge, WRITTEN).await;
    assert_eq!(
        support::carried_out(&after) - support::carried_out(&settled),
        N as u64,
        "the edge's ServiceAccounts after the kill: each written once, none twice"
    );
}
