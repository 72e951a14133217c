//! A real Prometheus scrapes a running daemon: every series the book's metrics reference
//! documents can be queried through Prometheus's HTTP API, with the labels the table
//! names, and the target is up. The table is read from docs/src/reference/metrics.md
//! (generated from the registry), so a metric documented there and not exposed (or
//! exposed in a form Prometheus does not take) fails here. And every panel of the Grafana
//! dashboard in examples/monitoring/ returns data once the daemon has synced, corrected
//! drift, suspended a spec and applied a change.

use crate::support;

use std::time::Duration;

use support::{Daemon, Prometheus, all_ready, spec};
use tempfile::TempDir;

/// One row of the metrics reference's table.
#[derive(Debug)]
struct Documented {
    /// The series name, e.g. `driftless_sync_total`.
    name: String,
    /// The label names in braces, e.g. `["result"]`.
    labels: Vec<String>,
    histogram: bool,
}

impl Documented {
    /// What to ask Prometheus for: a histogram is stored as `_bucket`, `_sum` and `_count`
    /// series.
    fn query(&self) -> String {
        if self.histogram {
            format!("{}_count", self.name)
        } else {
            self.name.clone()
        }
    }
}

/// The rows of the table in docs/src/reference/metrics.md.
fn documented_series() -> Vec<Documented> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/reference/metrics.md");
    let page = std::fs::read_to_string(path).unwrap();
    page.lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).filter(|c| !c.is_empty());
            let series = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let kind = cells.next()?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (
                    name,
                    rest.trim_end_matches('}')
                        .split(',')
                        .map(|l| l.trim().to_string())
                        .collect(),
                ),
                None => (series, Vec::new()),
            };
            Some(Documented {
                name: name.to_string(),
                labels,
                histogram: kind.starts_with("histogram"),
            })
        })
        .collect()
}

/// Every documented series that Prometheus cannot answer (with its labels), or `Ok`.
fn missing(prometheus: &Prometheus, documented: &[Documented], ns: &str) -> Result<(), String> {
    let up = prometheus.query("up{job=\"driftless\"} == 1")?;
    if up.len() != 1 {
        return Err(format!("up{{job=\"driftless\"}} == 1 answered {up:?}"));
    }
    let mut absent = Vec::new();
    for series in documented {
        let samples = prometheus.query(&series.query())?;
        let labelled = samples.iter().any(|s| {
            series
                .labels
                .iter()
                .all(|l| s["metric"][l.as_str()].is_string())
                // The per-spec series are the test's own spec's.
                && (!series.labels.contains(&"namespace".to_string())
                    || s["metric"]["namespace"] == ns)
        });
        if !labelled {
            absent.push(format!(
                "{} (labels {:?}): {samples:?}",
                series.query(),
                series.labels
            ));
        }
    }
    if !absent.is_empty() {
        return Err(format!("not queryable:\n{}", absent.join("\n")));
    }
    // And a value, not only a name: 2 available replicas × 100 QPS each.
    let qps = prometheus.query(&format!(
        "driftless_elasticweb_real_qps{{namespace=\"{ns}\",name=\"shop\"}}"
    ))?;
    match qps.first().map(|s| &s["value"][1]) {
        Some(v) if v == "200" => Ok(()),
        other => Err(format!("real_qps of shop: {other:?}")),
    }
}

#[tokio::test]
async fn prometheus_scrapes_every_documented_series() {
    let documented = documented_series();
    // The table was found and read, not skipped.
    assert!(documented.len() >= 15, "{documented:#?}");
    assert!(
        documented
            .iter()
            .any(|d| d.name == "driftless_sync_total" && d.labels == ["result"])
    );

    let client = support::client().await;
    let ns = support::namespace(&client, "prometheus").await;
    // An elasticweb (for real_qps); the per-spec gauges (ready, suspended, drifted) exist
    // for every spec, and a first sync writes (api_writes_total{verb}) and sets the
    // revision.
    let specs = TempDir::new().unwrap();
    std::fs::write(
        specs.path().join("app.toml"),
        format!(
            "namespace = \"{ns}\"\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
             single-pod-qps = 100\ntotal-qps = 200\n"
        ),
    )
    .unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&["--dir", specs.path().to_str().unwrap()])
        .start();
    let id = format!("elasticweb/{ns}/shop");
    daemon
        .wait_status("the elasticweb ready with 2 replicas", |s| {
            all_ready(s) && spec(s, &id)["figures"]["available_replicas"] == 2
        })
        .await;

    let prometheus = Prometheus::scraping(daemon.metrics);
    support::eventually(
        "Prometheus to answer for every documented series",
        Duration::from_secs(120),
        || async {
            missing(&prometheus, &documented, &ns).map_err(|e| {
                format!(
                    "{e}\nPrometheus log (tail):\n{}",
                    support::tail(&prometheus.log(), 3000)
                )
            })
        },
    )
    .await;
}

/// One query of the dashboard: the panel it belongs to and its PromQL as written.
#[derive(Debug)]
struct PanelQuery {
    panel: String,
    expr: String,
}

/// Every target of every panel of examples/monitoring/dashboard.json (rows' panels too).
fn dashboard_queries() -> Vec<PanelQuery> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/monitoring/dashboard.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fn walk(panels: &serde_json::Value, out: &mut Vec<PanelQuery>) {
        for panel in panels.as_array().into_iter().flatten() {
            walk(&panel["panels"], out);
            if panel["type"] == "row" {
                continue;
            }
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            assert!(!targets.is_empty(), "panel {title:?} has no query");
            for target in targets {
                let expr = target["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("panel {title:?}: a target without expr"));
                out.push(PanelQuery {
                    panel: title.clone(),
                    expr: expr.to_string(),
                });
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Grafana's variables given the values Grafana would: the whole test run fits in the
/// windows, and `$instance` is every daemon (its "All").
fn concrete(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "15s")
        .replace("$__range", "10m")
        .replace("${instance}", ".*")
        .replace("$instance", ".*")
}

/// The metric names a query uses (`driftless_...`), as the registry names them: a
/// histogram's `_bucket`, `_sum` and `_count` series by their family.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("driftless_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

/// Every query that returns nothing, or only NaN, named by its panel.
fn empty_panels(prometheus: &Prometheus, queries: &[PanelQuery]) -> Result<(), String> {
    let mut empty = Vec::new();
    for q in queries {
        let samples = prometheus.query(&concrete(&q.expr))?;
        let numbers = samples
            .iter()
            .filter(|s| s["value"][1].as_str().is_some_and(|v| v != "NaN"))
            .count();
        if numbers == 0 {
            empty.push(format!("{:?}: {} → {samples:?}", q.panel, q.expr));
        }
    }
    if empty.is_empty() {
        Ok(())
    } else {
        Err(format!("panels without data:\n{}", empty.join("\n")))
    }
}

#[tokio::test]
async fn every_dashboard_panel_returns_data() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{queries:#?}");
    // Only metrics the registry has, and those the dashboard is for.
    let registry: Vec<driftless::report::metrics::MetricDoc> =
        driftless::report::metrics::documented();
    let mut used = std::collections::BTreeSet::new();
    for q in &queries {
        for name in metric_names(&q.expr) {
            let family = registry.iter().find(|m| {
                m.name == name
                    || (m.kind == "histogram"
                        && ["_bucket", "_sum", "_count"]
                            .iter()
                            .any(|s| name.strip_suffix(s) == Some(m.name.as_str())))
            });
            match family {
                Some(m) => used.insert(m.name.clone()),
                None => panic!(
                    "panel {:?} queries {name}, which the registry does not have",
                    q.panel
                ),
            };
        }
    }
    for wanted in [
        "driftless_sync_total",
        "driftless_sync_duration_seconds",
        "driftless_spec_ready",
        "driftless_drift_corrections_total",
        "driftless_drifted_objects",
        "driftless_spec_suspended",
        "driftless_change_to_ready_seconds",
    ] {
        assert!(
            used.contains(wanted),
            "the dashboard has no panel for {wanted}"
        );
    }

    let client = support::client().await;
    let ns = support::namespace(&client, "dashboard").await;
    let dir = TempDir::new().unwrap();
    let specs = dir.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    let web = |total: u32| {
        format!(
            "namespace = \"{ns}\"\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
             single-pod-qps = 100\ntotal-qps = {total}\n"
        )
    };
    std::fs::write(specs.join("app.toml"), web(200)).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "dashboard-test-token\n").unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            specs.to_str().unwrap(),
            "--api-token-file",
            token.to_str().unwrap(),
        ])
        .start();
    let id = format!("elasticweb/{ns}/shop");
    daemon.wait_status("the elasticweb ready", all_ready).await;
    let prometheus = Prometheus::scraping(daemon.metrics);
    // The events below must come after Prometheus's first samples: a rate needs the
    // counters to move between two of them.
    support::eventually(
        "Prometheus to scrape the daemon",
        Duration::from_secs(60),
        || async {
            match prometheus
                .query("driftless_change_to_ready_seconds_count")?
                .len()
            {
                0 => Err("no sample yet".to_string()),
                _ => Ok(()),
            }
        },
    )
    .await;

    // Drift: someone else scales the Deployment; the daemon sets it back.
    support::scale_as_someone_else(&client, &ns, "shop", 7).await;
    // Set back before the suspension below: a correction still queued when the spec is
    // suspended waits for the resume, and the commit after it would then change the very
    // field someone else holds (a conflict, not drift).
    let deployments =
        kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns);
    support::eventually("the drift corrected", Duration::from_secs(60), || async {
        let d = deployments.get("shop").await.map_err(|e| e.to_string())?;
        match d.spec.replicas {
            Some(2) => Ok(()),
            other => Err(format!("replicas {other:?}")),
        }
    })
    .await;
    // A suspension and its end, through the CLI as an operator would.
    let control = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args(args)
            .args(["--server", &format!("http://{}", daemon.metrics)])
            .args(["--token-file", token.to_str().unwrap()])
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", support::show(&out));
    };
    control(&["suspend", &id, "--reason", "dashboard test"]);
    daemon
        .wait_status("the spec suspended", |s| {
            !spec(s, &id)["suspended"].is_null()
        })
        .await;
    control(&["resume", &id]);
    // A change, so that commit-to-ready is observed.
    std::fs::write(specs.join("app.toml"), web(300)).unwrap();
    daemon
        .wait_status("the change applied and ready", |s| {
            all_ready(s)
                && spec(s, &id)["suspended"].is_null()
                && spec(s, &id)["figures"]["desired_replicas"] == 3
        })
        .await;

    support::eventually(
        "every dashboard panel to return data",
        Duration::from_secs(120),
        || async {
            empty_panels(&prometheus, &queries).map_err(|e| {
                format!(
                    "{e}\nPrometheus log (tail):\n{}",
                    support::tail(&prometheus.log(), 3000)
                )
            })
        },
    )
    .await;
}
