//! What an Application says of its objects, put on them once rendered (whichever tool
//! rendered them): `destination.namespace` where they name none, and driftless's marks for
//! its sync wave, `prune`, `selfHeal`, `Replace=true` and `ignoreDifferences`; `CreateNamespace=true`
//! adds its namespace.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::App;
use crate::hydrate::stage::{AppMarks, cluster_scoped_crds, error_at, to_yaml};
use crate::spec::order::{ARGO_WAVE, WAVE};
use crate::spec::policy::{APPLY, DRIFT, PRUNE, REPLACE};
use crate::spec::{SourceFile, SpecError};

/// Marks the output files of `apps` (by output file, [`super::by_output`]) among `files`.
pub fn mark(files: &mut [SourceFile], apps: &BTreeMap<&str, &App>, errors: &mut Vec<SpecError>) {
    let mut namespace_added = std::collections::BTreeSet::new();
    for f in files.iter_mut() {
        let Some(app) = apps.get(f.path.as_str()) else {
            continue;
        };
        let text = String::from_utf8_lossy(&f.contents);
        let docs: Vec<Value> = match crate::spec::yaml::read_all(&text) {
            Ok(d) => d,
            Err(e) => {
                let first = crate::spec::yaml::said(&e);
                let first = first.lines().next().unwrap_or_default();
                errors.push(error_at(
                    &f.path,
                    1,
                    1,
                    format!(
                        "Application {}: what it renders is not YAML: {first}",
                        app.name
                    ),
                ));
                continue;
            }
        };
        let crds = cluster_scoped_crds(&docs);
        let marks = marks_of(app);
        let mut out: Vec<Value> = docs
            .into_iter()
            .filter(|d| d.is_object())
            .map(|mut d| {
                marks.put_on(&mut d, &crds);
                d
            })
            .collect();
        if let Some(ns) = app.namespace.as_deref().filter(|_| app.create_namespace)
            && namespace_added.insert(app.name.clone())
            && !out
                .iter()
                .any(|d| d["kind"] == "Namespace" && d["metadata"]["name"] == ns)
        {
            // Argo CD creates it when missing and never deletes it.
            out.insert(
                0,
                json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "annotations": {APPLY: "create-only", PRUNE: "disabled"}},
                }),
            );
        }
        f.contents = to_yaml(&out);
    }
}

/// What `app` puts on each object it renders.
fn marks_of(app: &App) -> AppMarks<'_> {
    let mut annotations = Vec::new();
    // An object's own wave orders it within its app; the app's orders the rest.
    if app.wave != 0 {
        annotations.push((WAVE, app.wave.to_string()));
    }
    if !app.prune {
        annotations.push((PRUNE, "disabled".to_string()));
    }
    if app.replace {
        annotations.push((REPLACE, "on-immutable".to_string()));
    }
    if !app.self_heal {
        annotations.push((DRIFT, "report".to_string()));
    }
    AppMarks {
        namespace: app.namespace.as_deref(),
        ignore: &app.ignore,
        annotations,
        labels: Vec::new(),
        put: crate::hydrate::stage::Put::WhereMissing,
        own_waves: &[ARGO_WAVE],
    }
}
