//! The daemon's Prometheus metrics, encoded as OpenMetrics text.
//!
//! OpenMetrics names a counter's family without `_total` (`# TYPE driftless_sync counter`)
//! and its sample with it (`driftless_sync_total{result="success"} 3`); an info metric's
//! family likewise drops `_info`. Units are part of the name (`_seconds`).

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};

/// The OpenMetrics text format's media type, for `/metrics`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The results a sync ends with (an invalid revision counts as a sync that applied
/// nothing); their counters exist from the start so that `rate()` and `increase()` see
/// the first failure.
pub(crate) const SYNC_RESULTS: [&str; 4] = ["success", "failed", "refused", "invalid"];

/// How a notification ended: delivered, given up after its retries (or refused by the
/// receiver), or dropped from a full queue.
pub(crate) const NOTIFICATION_RESULTS: [&str; 3] = ["sent", "failed", "dropped"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SpecLabels {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceErrorLabels {
    pub source: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RevisionLabels {
    pub revision: String,
}

/// The registry and a handle on every metric in it; share it behind an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub sync_total: Family<ResultLabels, Counter>,
    pub sync_duration_seconds: Histogram,
    pub last_sync_timestamp_seconds: Gauge<f64, AtomicU64>,
    pub spec_ready: Family<SpecLabels, Gauge>,
    pub spec_suspended: Family<SpecLabels, Gauge>,
    pub apps_held: Gauge,
    pub drifted_objects: Family<SpecLabels, Gauge>,
    pub api_writes_total: Family<VerbLabels, Counter>,
    pub drift_corrections_total: Counter,
    pub drift_recorded_total: Counter,
    pub pruned_objects_total: Counter,
    /// A gauge, not an OpenMetrics `info`: promtool (Prometheus text format) and
    /// OpenMetrics parsers both read it, and `*_info` gauges are the common convention.
    pub source_revision_info: Family<RevisionLabels, Gauge>,
    pub elasticweb_real_qps: Family<ObjectLabels, Gauge<f64, AtomicU64>>,
    pub change_to_ready_seconds: Histogram,
    pub source_errors_total: Family<SourceErrorLabels, Counter>,
    pub status_write_errors_total: Counter,
    pub notifications_total: Family<ResultLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::of_cluster(None)
    }

    /// The metrics of a daemon that serves `cluster` of a fleet: every sample carries
    /// `cluster="NAME"`, so that one Prometheus scraping every cluster's daemon tells
    /// them apart by the same word the status and notifications use. None: no label, as
    /// for a daemon alone.
    pub(crate) fn of_cluster(cluster: Option<&str>) -> Metrics {
        let labels = cluster.map(|c| {
            (
                std::borrow::Cow::Borrowed("cluster"),
                std::borrow::Cow::Owned(c.to_string()),
            )
        });
        let mut registry = Registry::with_prefix_and_labels("driftless", labels.into_iter());
        let sync_total = results_family(&SYNC_RESULTS);
        let notifications_total = results_family(&NOTIFICATION_RESULTS);
        // A no-op resync takes well under a second; a sync that waits on a big apply or a
        // slow apiserver takes minutes.
        let sync_duration_seconds = Histogram::new([
            0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ]);
        // From a commit or a save to every spec ready: image pulls and rollouts make this
        // seconds to minutes.
        let change_to_ready_seconds = Histogram::new([
            0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
        ]);
        let m = Metrics {
            sync_total,
            sync_duration_seconds,
            last_sync_timestamp_seconds: Gauge::default(),
            spec_ready: Family::default(),
            spec_suspended: Family::default(),
            apps_held: Gauge::default(),
            drifted_objects: Family::default(),
            api_writes_total: Family::default(),
            drift_corrections_total: Counter::default(),
            drift_recorded_total: Counter::default(),
            pruned_objects_total: Counter::default(),
            source_revision_info: Family::default(),
            elasticweb_real_qps: Family::default(),
            change_to_ready_seconds,
            source_errors_total: Family::default(),
            status_write_errors_total: Counter::default(),
            notifications_total,
            registry: Registry::default(),
        };
        // A table of the families, one a line, in the order they are exposed: the handle,
        // the name after `driftless_` (a counter's samples add `_total`, a unit its
        // suffix), the unit, the help text.
        macro_rules! families {
            ($($metric:ident, $name:literal, $unit:expr, $help:literal;)*) => {
                $(register(&mut registry, $name, $unit, $help, m.$metric.clone());)*
            };
        }
        families! {
            sync_total, "sync", None, "Syncs finished, by result (success, failed, refused, invalid, superseded, stopped)";
            sync_duration_seconds, "sync_duration", Some(Unit::Seconds), "How long a sync took";
            last_sync_timestamp_seconds, "last_sync_timestamp", Some(Unit::Seconds), "When the last sync finished, in seconds since the Unix epoch";
            spec_ready, "spec_ready", None, "Whether a spec is ready (1) or not (0)";
            spec_suspended, "spec_suspended", None, "Whether a spec is suspended (1): not applied, pruned or corrected";
            apps_held, "apps_held", None, "Apps the newest valid revision holds (1.12): their render or validation failed, so they are neither applied nor pruned";
            drifted_objects, "drifted_objects", None, "A spec's objects that someone else changed and that were left so (--drift report, or suspended)";
            api_writes_total, "api_writes", None, "Writes sent to the Kubernetes API, by verb (patch, create, delete)";
            drift_corrections_total, "drift_corrections", None, "Objects changed in the cluster outside driftless and set back";
            drift_recorded_total, "drift_recorded", None, "Drifts recorded in the drift ledger (GET /api/v1/drift), corrected or reported";
            pruned_objects_total, "pruned_objects", None, "Objects deleted because they left the specs";
            source_revision_info, "source_revision_info", None, "The source revision last applied (always 1)";
            elasticweb_real_qps, "elasticweb_real_qps", None, "Queries per second an elasticweb spec can serve: available replicas times single-pod QPS";
            change_to_ready_seconds, "change_to_ready", Some(Unit::Seconds), "From a commit or a saved file to every spec ready";
            source_errors_total, "source_errors", None, "Source reads or fetches that failed, by source (dir, git, oci) and reason (git: fetch, auth, host_key, ref_not_found, ...; oci: registry, artifact, ...; read, render); the last good revision stayed in force";
            status_write_errors_total, "status_write_errors", None, "Status file writes that failed (retried every second until one succeeds)";
            notifications_total, "notifications", None, "Notifications to webhooks, chat and commit statuses, by result (sent, failed, dropped)";
        }
        Metrics { registry, ..m }
    }

    /// The OpenMetrics text exposition, ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error could only come from a metric's own
        // encoder, and a partial page is still more useful than none.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }

    /// Several registries' pages (a fleet's clusters', each labelled with its cluster)
    /// as one: a family's `# HELP`/`# TYPE`/`# UNIT` once, then every page's samples of
    /// it, and one `# EOF`. Their concatenation repeated each family, which Prometheus
    /// refuses.
    pub fn merge(pages: &[String]) -> String {
        // (the family's name, its header lines, its samples), in the order first met.
        let mut families: Vec<(&str, Vec<&str>, Vec<&str>)> = Vec::new();
        for page in pages {
            let mut current: Option<usize> = None;
            for line in page.lines() {
                if line == "# EOF" || line.is_empty() {
                    continue;
                }
                let header = line
                    .strip_prefix("# ")
                    .and_then(|rest| rest.split_once(' '))
                    .filter(|(word, _)| matches!(*word, "HELP" | "TYPE" | "UNIT"))
                    .and_then(|(_, rest)| rest.split(' ').next());
                match header {
                    Some(name) => {
                        let at = match families.iter().position(|(n, _, _)| *n == name) {
                            Some(at) => at,
                            None => {
                                families.push((name, Vec::new(), Vec::new()));
                                families.len() - 1
                            }
                        };
                        // The first page's header is the family's; the others' say the same.
                        if !families[at].1.contains(&line) {
                            families[at].1.push(line);
                        }
                        current = Some(at);
                    }
                    None => match current {
                        Some(at) => families[at].2.push(line),
                        None => families.push(("", Vec::new(), vec![line])),
                    },
                }
            }
        }
        let mut out = String::new();
        for (_, header, samples) in &families {
            for line in header.iter().chain(samples) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str("# EOF\n");
        out
    }

    pub fn sync_finished(&self, result: &str, duration: std::time::Duration, at_unix_seconds: f64) {
        self.sync_total
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        self.sync_duration_seconds.observe(duration.as_secs_f64());
        self.last_sync_timestamp_seconds.set(at_unix_seconds);
    }

    /// A spec's readiness, suspension and drifted objects.
    pub fn set_spec(&self, kind: &str, namespace: &str, name: &str, spec: SpecGauges) {
        let labels = spec_labels(kind, namespace, name);
        self.spec_ready
            .get_or_create(&labels)
            .set(i64::from(spec.ready));
        self.spec_suspended
            .get_or_create(&labels)
            .set(i64::from(spec.suspended));
        self.drifted_objects
            .get_or_create(&labels)
            .set(i64::try_from(spec.drifted).unwrap_or(i64::MAX));
    }

    /// A spec left the tree: its series go, rather than reading "not ready" forever.
    pub(crate) fn forget_spec(&self, kind: &str, namespace: &str, name: &str) {
        let labels = spec_labels(kind, namespace, name);
        self.spec_ready.remove(&labels);
        self.spec_suspended.remove(&labels);
        self.drifted_objects.remove(&labels);
    }

    pub fn add_api_writes(&self, verb: &str, n: u64) {
        self.api_writes_total
            .get_or_create(&VerbLabels {
                verb: verb.to_string(),
            })
            .inc_by(n);
    }

    pub(crate) fn drift_recorded(&self) {
        self.drift_recorded_total.inc();
    }

    pub fn add_drift_corrections(&self, n: u64) {
        self.drift_corrections_total.inc_by(n);
    }

    pub fn add_pruned(&self, n: u64) {
        self.pruned_objects_total.inc_by(n);
    }

    /// Only the current revision's series exists afterwards: a stale one would read as
    /// "still running that revision".
    pub fn set_revision(&self, revision: &str) {
        self.source_revision_info.clear();
        self.source_revision_info
            .get_or_create(&RevisionLabels {
                revision: revision.to_string(),
            })
            .set(1);
    }

    pub fn set_real_qps(&self, namespace: &str, name: &str, qps: f64) {
        self.elasticweb_real_qps
            .get_or_create(&object_labels(namespace, name))
            .set(qps);
    }

    pub(crate) fn forget_real_qps(&self, namespace: &str, name: &str) {
        self.elasticweb_real_qps
            .remove(&object_labels(namespace, name));
    }

    pub(crate) fn source_failed(&self, source: &str, reason: &str) {
        self.source_errors_total
            .get_or_create(&SourceErrorLabels {
                source: source.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// A series at 0 for a way the source can fail, before it does.
    pub(crate) fn source_may_fail(&self, source: &str, reason: &str) {
        let _ = self.source_errors_total.get_or_create(&SourceErrorLabels {
            source: source.to_string(),
            reason: reason.to_string(),
        });
    }

    pub(crate) fn status_write_failed(&self) {
        self.status_write_errors_total.inc();
    }

    pub fn observe_change_to_ready(&self, seconds: f64) {
        self.change_to_ready_seconds.observe(seconds);
    }

    pub fn notification(&self, result: &str) {
        self.notifications_total
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }
}

/// One metric as a reader of `/metrics` sees it, for the generated reference: what to
/// query (a counter's `_total` sample; a histogram's family, stored as `_bucket`, `_sum`
/// and `_count`), its type, its label names and its help text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricDoc {
    pub name: String,
    pub kind: String,
    pub labels: Vec<String>,
    pub help: String,
}

/// Every metric of the registry, in the order `/metrics` exposes them. Read back from the
/// encoded registry itself (with one series of each labelled family made up), so the
/// reference cannot list a metric, a type or a label the daemon does not have.
pub fn documented() -> Vec<MetricDoc> {
    let m = Metrics::new();
    // A labelled family shows its label names only once it has a series.
    m.set_spec("kind", "namespace", "name", SpecGauges::default());
    m.add_api_writes("patch", 0);
    m.set_revision("revision");
    m.set_real_qps("namespace", "name", 0.0);
    m.source_may_fail("source", "reason");
    read_families(&m.encode())
}

/// The families of an OpenMetrics page, each with the label names of its first sample.
fn read_families(text: &str) -> Vec<MetricDoc> {
    let mut docs: Vec<MetricDoc> = Vec::new();
    let mut help = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest
                .split_once(' ')
                .map(|(_, h)| h)
                .unwrap_or_default()
                .to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = match kind {
                "counter" => format!("{family}_total"),
                _ => family.to_string(),
            };
            docs.push(MetricDoc {
                name,
                kind: kind.to_string(),
                labels: Vec::new(),
                help: std::mem::take(&mut help),
            });
        } else if !line.starts_with('#')
            && let Some(doc) = docs.last_mut()
            && doc.labels.is_empty()
            && let Some((_, labels)) = line.split_once('{')
        {
            doc.labels = labels
                .split_once('}')
                .map(|(inside, _)| inside)
                .unwrap_or_default()
                .split(',')
                .filter_map(|pair| pair.split_once('=').map(|(k, _)| k.to_string()))
                .filter(|k| k != "le")
                .collect();
        }
    }
    docs
}

/// A counter by result whose series all exist from the start, so that `rate()` and
/// `increase()` see the first of each.
fn results_family(results: &[&str]) -> Family<ResultLabels, Counter> {
    let family = Family::<ResultLabels, Counter>::default();
    for result in results {
        // Creating the series is the point; the guard is dropped at once.
        drop(family.get_or_create(&ResultLabels {
            result: result.to_string(),
        }));
    }
    family
}

/// What the per-spec gauges say of one spec.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpecGauges {
    pub ready: bool,
    pub suspended: bool,
    pub drifted: usize,
}

fn spec_labels(kind: &str, namespace: &str, name: &str) -> SpecLabels {
    SpecLabels {
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

fn object_labels(namespace: &str, name: &str) -> ObjectLabels {
    ObjectLabels {
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// `Registry` has one method for a family without a unit and one for a family with one.
fn register(
    registry: &mut Registry,
    name: &str,
    unit: Option<Unit>,
    help: &str,
    metric: impl Metric,
) {
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, metric),
        None => registry.register(name, help, metric),
    }
}

/// A page (`encode`) with only the samples of the specs in `seen` (kind, namespace,
/// name, as the spec families label them), for a reader who may see only those; a
/// sample of no spec stays.
pub(crate) fn only_specs(page: &str, seen: &HashSet<(String, String, String)>) -> String {
    let mut kept = String::with_capacity(page.len());
    for line in page.split_inclusive('\n') {
        let labels = sample_labels(line);
        let label = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let spec = match (label("kind"), label("name")) {
            (Some(kind), Some(name)) => Some((kind, label("namespace").unwrap_or_default(), name)),
            _ => None,
        };
        if spec.is_none_or(|s| seen.contains(&s)) {
            kept.push_str(line);
        }
    }
    kept
}

/// A sample line's labels (`name{k="v",...} value`), their values unescaped.
fn sample_labels(line: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    if line.starts_with('#') {
        return labels;
    }
    let Some((_, mut rest)) = line.split_once('{') else {
        return labels;
    };
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.push((key.trim_start_matches([',', ' ']).to_string(), value));
        rest = &after[end..];
        if rest.starts_with('}') {
            break;
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_s_labels_are_read_with_their_escapes() {
        let line =
            "driftless_spec_ready{kind=\"app\",namespace=\"team-a\",name=\"we\\\"b\\\\1\"} 1\n";
        assert_eq!(
            sample_labels(line),
            [
                ("kind".to_string(), "app".to_string()),
                ("namespace".to_string(), "team-a".to_string()),
                ("name".to_string(), "we\"b\\1".to_string()),
            ]
        );
        assert!(sample_labels("# HELP driftless_spec_ready x{y=\"z\"}\n").is_empty());
        assert!(sample_labels("driftless_syncs_total 3\n").is_empty());
    }

    fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .collect()
    }

    /// One daemon serving two clusters says each family once, with both clusters'
    /// samples under it, and ends once.
    #[test]
    fn a_fleet_s_pages_merge_into_one_family_each() {
        let (a, b) = (
            Metrics::of_cluster(Some("a")),
            Metrics::of_cluster(Some("b")),
        );
        a.sync_finished("success", std::time::Duration::from_millis(20), 1.0);
        b.sync_finished("failure", std::time::Duration::from_millis(30), 2.0);
        let merged = Metrics::merge(&[a.encode(), b.encode()]);
        let types: Vec<&str> = merged
            .lines()
            .filter(|l| l.starts_with("# TYPE "))
            .collect();
        let mut unique = types.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(types.len(), unique.len(), "{merged}");
        assert_eq!(
            types.len(),
            a.encode()
                .lines()
                .filter(|l| l.starts_with("# TYPE "))
                .count()
        );
        let syncs = samples(&merged, "driftless_sync_total");
        assert!(
            syncs
                .iter()
                .any(|l| l.contains("cluster=\"a\"") && l.contains("success")),
            "{merged}"
        );
        assert!(
            syncs
                .iter()
                .any(|l| l.contains("cluster=\"b\"") && l.contains("failure")),
            "{merged}"
        );
        // The samples of a family follow its header, none elsewhere.
        let header = merged.find("# TYPE driftless_sync counter").unwrap();
        let next = merged[header + 1..]
            .find("# HELP")
            .map_or(merged.len(), |n| header + 1 + n);
        assert_eq!(
            samples(&merged[header..next], "driftless_sync_total").len(),
            syncs.len()
        );
        assert_eq!(merged.matches("# EOF").count(), 1);
        assert!(merged.ends_with("# EOF\n"));
    }

    /// A fleet daemon's samples each name its cluster, the families' labels kept; a
    /// daemon alone names none.
    #[test]
    fn a_fleet_daemon_s_samples_name_its_cluster() {
        let m = Metrics::of_cluster(Some("prod-eu"));
        m.add_api_writes("apply", 3);
        m.sync_finished("success", std::time::Duration::from_millis(1500), 1.7e9);
        let text = m.encode();
        let all: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert!(all.len() > 5, "{text}");
        for line in &all {
            assert!(line.contains("cluster=\"prod-eu\""), "{line}");
        }
        assert!(
            text.contains("driftless_api_writes_total{verb=\"apply\",cluster=\"prod-eu\"} 3")
                || text
                    .contains("driftless_api_writes_total{cluster=\"prod-eu\",verb=\"apply\"} 3"),
            "{text}"
        );
        assert!(!Metrics::new().encode().contains("cluster="));
    }

    fn populated() -> Metrics {
        let m = Metrics::new();
        m.sync_finished("success", std::time::Duration::from_millis(1500), 1.7e9);
        m.set_spec(
            "elasticweb",
            "shop",
            "web",
            SpecGauges {
                ready: true,
                suspended: true,
                drifted: 2,
            },
        );
        m.add_api_writes("apply", 3);
        m.add_drift_corrections(2);
        m.add_pruned(1);
        m.set_revision("0123abcd");
        m.set_real_qps("shop", "web", 2400.0);
        m.observe_change_to_ready(4.2);
        m.source_failed("git", "fetch");
        m.status_write_failed();
        m.status_write_failed();
        m.notification("sent");
        m
    }

    #[test]
    fn every_family_with_its_type() {
        let text = populated().encode();
        for (family, kind) in [
            ("driftless_sync", "counter"),
            ("driftless_sync_duration_seconds", "histogram"),
            ("driftless_last_sync_timestamp_seconds", "gauge"),
            ("driftless_spec_ready", "gauge"),
            ("driftless_spec_suspended", "gauge"),
            ("driftless_drifted_objects", "gauge"),
            ("driftless_api_writes", "counter"),
            ("driftless_drift_corrections", "counter"),
            ("driftless_drift_recorded", "counter"),
            ("driftless_pruned_objects", "counter"),
            ("driftless_source_revision_info", "gauge"),
            ("driftless_elasticweb_real_qps", "gauge"),
            ("driftless_change_to_ready_seconds", "histogram"),
            ("driftless_source_errors", "counter"),
            ("driftless_status_write_errors", "counter"),
            ("driftless_notifications", "counter"),
        ] {
            assert!(
                text.contains(&format!("\n# TYPE {family} {kind}\n")),
                "{family} {kind}:\n{text}"
            );
            assert!(text.contains(&format!("# HELP {family} ")), "{family}");
        }
        assert!(text.contains("# UNIT driftless_sync_duration_seconds seconds\n"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn samples_carry_the_specified_labels() {
        let text = populated().encode();
        // success was counted once; the others exist at zero from the start.
        assert_eq!(samples(&text, "driftless_sync_total").len(), 4, "{text}");
        assert!(text.contains("driftless_sync_total{result=\"success\"} 1\n"));
        assert!(text.contains("driftless_sync_total{result=\"failed\"} 0\n"));
        assert!(text.contains("driftless_sync_total{result=\"refused\"} 0\n"));
        assert!(text.contains("driftless_sync_total{result=\"invalid\"} 0\n"));
        assert!(
            text.contains("driftless_sync_duration_seconds_count 1\n"),
            "{text}"
        );
        assert!(
            text.contains("driftless_sync_duration_seconds_sum 1.5\n"),
            "{text}"
        );
        assert!(
            text.contains("driftless_last_sync_timestamp_seconds 1700000000.0\n"),
            "{text}"
        );
        assert!(text.contains(
            "driftless_spec_ready{kind=\"elasticweb\",namespace=\"shop\",name=\"web\"} 1\n"
        ));
        assert!(text.contains(
            "driftless_spec_suspended{kind=\"elasticweb\",namespace=\"shop\",name=\"web\"} 1\n"
        ));
        assert!(text.contains(
            "driftless_drifted_objects{kind=\"elasticweb\",namespace=\"shop\",name=\"web\"} 2\n"
        ));
        assert!(text.contains("driftless_api_writes_total{verb=\"apply\"} 3\n"));
        assert!(text.contains("driftless_drift_corrections_total 2\n"));
        assert!(text.contains("driftless_pruned_objects_total 1\n"));
        assert!(
            text.contains("driftless_source_errors_total{source=\"git\",reason=\"fetch\"} 1\n")
        );
        assert!(text.contains("driftless_status_write_errors_total 2\n"));
        assert_eq!(samples(&text, "driftless_notifications_total").len(), 3);
        assert!(text.contains("driftless_notifications_total{result=\"sent\"} 1\n"));
        assert!(text.contains("driftless_notifications_total{result=\"dropped\"} 0\n"));
        assert!(text.contains("driftless_source_revision_info{revision=\"0123abcd\"} 1\n"));
        assert!(
            text.contains(
                "driftless_elasticweb_real_qps{namespace=\"shop\",name=\"web\"} 2400.0\n"
            )
        );
        assert!(
            text.contains("driftless_change_to_ready_seconds_bucket{le=\"5.0\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn one_revision_series_at_a_time() {
        let m = Metrics::new();
        assert!(samples(&m.encode(), "driftless_source_revision_info").is_empty());
        m.set_revision("aaa");
        m.set_revision("bbb");
        let text = m.encode();
        assert_eq!(
            samples(&text, "driftless_source_revision_info"),
            ["driftless_source_revision_info{revision=\"bbb\"} 1"]
        );
    }

    #[test]
    fn forgotten_series_go() {
        let m = populated();
        m.set_spec(
            "workspace",
            "dev",
            "alice",
            SpecGauges {
                ready: false,
                ..SpecGauges::default()
            },
        );
        let text = m.encode();
        assert_eq!(samples(&text, "driftless_spec_ready").len(), 2, "{text}");
        assert!(text.contains(
            "driftless_spec_ready{kind=\"workspace\",namespace=\"dev\",name=\"alice\"} 0\n"
        ));
        m.forget_spec("elasticweb", "shop", "web");
        m.forget_real_qps("shop", "web");
        let text = m.encode();
        assert_eq!(
            samples(&text, "driftless_spec_ready"),
            ["driftless_spec_ready{kind=\"workspace\",namespace=\"dev\",name=\"alice\"} 0"]
        );
        assert!(
            samples(&text, "driftless_elasticweb_real_qps").is_empty(),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        m.set_revision("a\"b\\c\nd");
        assert!(
            m.encode()
                .contains(r#"driftless_source_revision_info{revision="a\"b\\c\nd"} 1"#)
        );
    }

    #[test]
    fn documented_lists_every_family_with_its_labels() {
        let docs = documented();
        let text = populated().encode();
        assert_eq!(docs.len(), text.matches("# TYPE ").count(), "{docs:#?}");
        let find = |name: &str| {
            docs.iter()
                .find(|d| d.name == name)
                .unwrap_or_else(|| panic!("{name}: {docs:#?}"))
        };
        assert_eq!(find("driftless_sync_total").labels, ["result"]);
        assert_eq!(find("driftless_sync_total").kind, "counter");
        assert_eq!(
            find("driftless_spec_ready").labels,
            ["kind", "namespace", "name"]
        );
        assert_eq!(
            find("driftless_elasticweb_real_qps").labels,
            ["namespace", "name"]
        );
        assert_eq!(find("driftless_source_revision_info").labels, ["revision"]);
        assert_eq!(find("driftless_api_writes_total").labels, ["verb"]);
        assert_eq!(
            find("driftless_source_errors_total").labels,
            ["source", "reason"]
        );
        let duration = find("driftless_sync_duration_seconds");
        assert_eq!(
            (duration.kind.as_str(), duration.labels.len()),
            ("histogram", 0)
        );
        assert_eq!(duration.help, "How long a sync took.");
        // A labelled family that `documented` leaves without a series would be listed
        // without its labels: every family of the populated page has them there too.
        for doc in docs.iter().filter(|d| d.kind != "histogram") {
            let sample = samples(&text, &doc.name);
            let first = sample
                .first()
                .unwrap_or_else(|| panic!("{}: no sample", doc.name));
            assert_eq!(
                first.contains('{'),
                !doc.labels.is_empty(),
                "{}: {first}",
                doc.name
            );
        }
    }
}
