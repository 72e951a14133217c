//! Flux's and Argo CD's apps as units (docs/src/argocd.md, flux.md): the specs an app
//! rendered (a Flux Kustomization's, an Argo CD Application's), grouped under its name
//! (`flux/NS/NAME`, `argo/NAME`) with one state: ready when all its specs are, failed when
//! any is, and the revision all of them reflect.

use serde::{Deserialize, Serialize};

use super::{SpecStatus, Tally};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppStatus {
    /// `flux/NS/NAME` or `argo/NAME`.
    pub name: String,
    #[serde(flatten)]
    pub tally: Tally,
    /// The revision every one of its specs reflects; none while any lags (its change
    /// pending) or when they differ.
    pub revision: Option<String>,
}

impl AppStatus {
    /// One line: `argo/shop: 4/5 specs ready, InProgress`.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.name, self.tally.said())
    }
}

/// The apps of `specs`: trouble first (failed, then in progress), then by name.
pub fn of<S: std::borrow::Borrow<SpecStatus>>(
    specs: impl IntoIterator<Item = S>,
) -> Vec<AppStatus> {
    let mut out: Vec<AppStatus> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for s in specs {
        let s = s.borrow();
        let Some(app) = s.app.as_ref() else {
            continue;
        };
        let i = *index.entry(app.clone()).or_insert_with(|| {
            out.push(AppStatus {
                name: app.clone(),
                tally: Tally::default(),
                revision: s.revision.clone(),
            });
            out.len() - 1
        });
        let o = &mut out[i];
        o.tally.add(s);
        if o.revision != s.revision {
            o.revision = None;
        }
    }
    let rank = |a: &AppStatus| match a.tally.status.as_str() {
        "Failed" => 0,
        "InProgress" => 1,
        _ => 2,
    };
    out.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, app: Option<&str>, ready: bool, status: &str, rev: &str) -> SpecStatus {
        SpecStatus {
            id: id.into(),
            app: app.map(str::to_string),
            ready,
            status: status.into(),
            revision: Some(rev.into()),
            ..SpecStatus::default()
        }
    }

    #[test]
    fn apps_group_their_specs_trouble_first() {
        let specs = [
            spec("a", Some("argo/web"), true, "Ready", "r1"),
            spec("b", Some("argo/shop"), true, "Ready", "r1"),
            spec("c", Some("argo/shop"), false, "Failed", "r1"),
            spec("d", None, false, "Failed", "r1"),
            spec("e", Some("argo/web"), true, "Ready", "r2"),
        ];
        let apps = of(&specs);
        let got: Vec<(&str, &str, usize, usize, Option<&str>)> = apps
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.tally.status.as_str(),
                    a.tally.ready_specs,
                    a.tally.specs.len(),
                    a.revision.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("argo/shop", "Failed", 1, 2, Some("r1")),
                ("argo/web", "Ready", 2, 2, None),
            ]
        );
        assert_eq!(apps[0].describe(), "argo/shop: 1/2 specs ready, Failed");
    }
}
