//! A real Prometheus scrapes a running daemon: every series the README's Metrics table
//! documents can be queried through Prometheus's HTTP API, with the labels the table
//! names, and the target is up. The table is read from README.md, so a metric documented
//! there and not exposed (or exposed in a form Prometheus does not take) fails here.

mod support;

use std::time::Duration;

use support::{Daemon, Prometheus, all_ready, spec};
use tempfile::TempDir;

/// One row of the README's Metrics table.
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

/// The rows of the table under `### Metrics` in README.md.
fn documented_series() -> Vec<Documented> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let section = readme
        .split("\n### ")
        .find(|s| s.starts_with("Metrics"))
        .expect("a `### Metrics` section in README.md");
    section
        .lines()
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
