//! What an Application says of its objects, put on them once rendered (whichever tool
//! rendered them): `destination.namespace` where they name none, and driftless's marks for
//! its sync wave, `prune`, `selfHeal`, `Replace=true` and `ignoreDifferences`; `CreateNamespace=true`
//! adds its namespace.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::App;
use crate::hydrate::stage::{cluster_scoped_crds, error_at, is_cluster_scoped, to_yaml};
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
        let docs: Vec<Value> = match serde_saphyr::from_multiple(&text) {
            Ok(d) => d,
            Err(e) => {
                let first = e.to_string();
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
        let mut out: Vec<Value> = docs
            .into_iter()
            .filter(|d| d.is_object())
            .map(|d| marked(d, app, &crds))
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

fn marked(mut d: Value, app: &App, crds: &[(String, String)]) -> Value {
    let cluster_scoped = is_cluster_scoped(&d, crds);
    let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) else {
        return d;
    };
    if let (false, Some(ns)) = (cluster_scoped, &app.namespace)
        && meta.get("namespace").is_none_or(Value::is_null)
    {
        meta.insert("namespace".into(), json!(ns));
    }
    // Selected once its namespace is set, as Argo CD matches the object it applies.
    let pointers: Vec<String> = app
        .ignore
        .iter()
        .filter(|i| i.select.selects(&d))
        .flat_map(|i| i.pointers.iter().cloned())
        .collect();
    let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) else {
        return d;
    };
    let Some(a) = meta
        .entry("annotations")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    else {
        return d;
    };
    // An object's own wave orders it within its app; the app's orders the rest.
    if app.wave != 0 && !a.contains_key(ARGO_WAVE) && !a.contains_key(WAVE) {
        a.insert(WAVE.into(), json!(app.wave.to_string()));
    }
    if !app.prune {
        a.entry(PRUNE).or_insert_with(|| json!("disabled"));
    }
    if app.replace {
        a.entry(REPLACE).or_insert_with(|| json!("on-immutable"));
    }
    if !app.self_heal {
        a.entry(DRIFT).or_insert_with(|| json!("report"));
    }
    crate::hydrate::stage::ignore_fields(a, &pointers);
    if a.is_empty() {
        meta.remove("annotations");
    }
    d
}
