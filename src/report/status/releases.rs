//! Chart releases as units (DESIGN 1.10): the specs a release rendered, grouped under it,
//! with its figures (chart, version, app version) and one state: ready when all its
//! objects are, failed when any is.

use serde::{Deserialize, Serialize};

use super::{SpecStatus, Tally};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseStatus {
    #[serde(flatten)]
    pub release: crate::spec::Release,
    #[serde(flatten)]
    pub tally: Tally,
}

impl ReleaseStatus {
    /// One line: `web/podinfo: chart podinfo 6.2.3 (app 6.2.3), 5/5 specs ready`.
    pub fn describe(&self) -> String {
        format!("{}, {}", self.release.title(), self.tally.said())
    }
}

/// The releases of `specs`, in the order their first spec appears. Owned or borrowed:
/// the daemon makes each spec's status only while it is counted.
pub fn of<S: std::borrow::Borrow<SpecStatus>>(
    specs: impl IntoIterator<Item = S>,
) -> Vec<ReleaseStatus> {
    let mut out: Vec<ReleaseStatus> = Vec::new();
    for s in specs {
        let s = s.borrow();
        let Some(r) = s.rendered_by.as_ref().and_then(|b| b.release.as_ref()) else {
            continue;
        };
        let i = match out.iter().position(|o| o.release == *r) {
            Some(i) => i,
            None => {
                out.push(ReleaseStatus {
                    release: r.clone(),
                    tally: Tally::default(),
                });
                out.len() - 1
            }
        };
        out[i].tally.add(s);
    }
    out
}

/// The text diff, each chart release's objects under a line naming the release.
pub fn diff_text(
    tree: &crate::spec::SpecTree,
    diffs: &[crate::apply::diff::ObjectDiff],
    color: bool,
) -> String {
    let release_of: std::collections::HashMap<String, String> = tree
        .specs
        .iter()
        .filter_map(|s| {
            let r = tree.rendered.get(&s.at.file)?.release.as_ref()?;
            Some((s.id.to_string(), format!("# release {}\n", r.title())))
        })
        .collect();
    let mut out = String::new();
    let mut under: Option<&String> = None;
    for d in diffs {
        let change = crate::apply::diff::render_change(d, color);
        if change.is_empty() {
            continue;
        }
        let release = release_of.get(&d.spec);
        if release.is_some() && release != under {
            out.push_str(release.map_or("", String::as_str));
        }
        under = release;
        out.push_str(&change);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, release: Option<&str>, ready: bool, status: &str) -> SpecStatus {
        SpecStatus {
            id: id.into(),
            kind: "manifest".into(),
            namespace: "web".into(),
            name: id.into(),
            file: "apps.helm-x.yaml".into(),
            line: 1,
            ready,
            status: status.into(),
            rendered_by: release.map(|name| crate::spec::RenderedBy {
                tool: "helm".into(),
                version: "v4.1.4".into(),
                command: "helm template".into(),
                release: Some(crate::spec::Release {
                    name: name.into(),
                    release_name: name.into(),
                    namespace: "web".into(),
                    chart: "charts/x".into(),
                    version: "1.0.0".into(),
                    app_version: Some("2.0".into()),
                    file: "apps.toml".into(),
                    line: 1,
                }),
            }),
            ..SpecStatus::default()
        }
    }

    #[test]
    fn a_release_is_ready_when_all_its_specs_are_and_failed_when_one_is() {
        let r = of(&[
            spec("a1", Some("a"), true, "Current"),
            spec("plain", None, false, "InProgress"),
            spec("b1", Some("b"), true, "Current"),
            spec("a2", Some("a"), false, "InProgress"),
            spec("b2", Some("b"), false, "Failed"),
            spec("b3", Some("b"), false, "InProgress"),
        ]);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (
                r[0].release.name.as_str(),
                r[0].tally.status.as_str(),
                r[0].tally.ready_specs
            ),
            ("a", "InProgress", 1)
        );
        assert_eq!(r[0].tally.specs, ["a1", "a2"]);
        assert_eq!(
            (r[1].tally.status.as_str(), r[1].tally.specs.len()),
            ("Failed", 3)
        );
        assert_eq!(
            r[1].describe(),
            "web/b: chart charts/x 1.0.0 (app 2.0), 1/3 specs ready, Failed"
        );
        let all_ready = of(&[spec("a1", Some("a"), true, "Current")]);
        assert!(all_ready[0].tally.ready);
        assert_eq!(
            all_ready[0].describe(),
            "web/a: chart charts/x 1.0.0 (app 2.0), 1/1 specs ready"
        );
    }
}
