//! `dependsOn` as waves: one past the highest wave an object depends on; a cycle or a
//! missing dependency is an error at its place.

use std::collections::{BTreeMap, BTreeSet};

use super::model::*;
use crate::spec::{AppId, Location, SpecError};

/// Each Kustomization's wave: one past the highest it depends on; a cycle or an unknown
/// dependency is an error, and that Kustomization is not carried out.
pub(super) fn order(
    items: &mut Vec<Kustomization>,
    apps: &crate::spec::RenderedApps,
    waves: &mut BTreeMap<String, i32>,
    errors: &mut Vec<SpecError>,
) {
    // A Kustomization another one renders comes after it, as in Flux, where it exists
    // (and runs) only once its parent has applied it: a tenant's objects are written
    // once the platform's RBAC for them is in place.
    let after_parent = |k: &Kustomization| match apps.app_of(&k.at.file) {
        Some(AppId::Flux { namespace, name }) => waves
            .get(&format!("kustomization/{namespace}/{name}"))
            .map_or(0, |w| w + 1),
        _ => 0,
    };
    let nodes: Vec<Node> = items
        .iter()
        .map(|k| Node {
            key: format!("kustomization/{}/{}", k.namespace, k.name),
            deps: depends_on(&k.spec.depends_on, &k.namespace)
                .into_iter()
                .map(|d| format!("kustomization/{d}"))
                .collect(),
            at: k.at.clone(),
            base: after_parent(k),
        })
        .collect();
    let ws = waves_of(&nodes, waves, errors);
    let mut kept = Vec::new();
    for (mut k, w) in items.drain(..).zip(ws) {
        if let Some(w) = w {
            k.wave = w;
            kept.push(k);
        }
    }
    *items = kept;
}

/// `dependsOn` entries as `namespace/name` (the namespace defaults to the object's).
pub(super) fn depends_on(list: &[NamedRef], ns: &str) -> Vec<String> {
    list.iter()
        .filter_map(|d| {
            let name = d.name.as_deref()?;
            Some(format!("{}/{name}", d.namespace.as_deref().unwrap_or(ns)))
        })
        .collect()
}

/// One object of a `dependsOn` graph.
pub(super) struct Node {
    pub(super) key: String,
    pub(super) deps: Vec<String>,
    pub(super) at: Location,
    /// The lowest wave it may take.
    pub(super) base: i32,
}

/// Each node's wave (one past the highest it depends on, at least its base), recorded in
/// `waves`; `None` for one in a cycle or depending on what is not there (an error each).
pub(super) fn waves_of(
    nodes: &[Node],
    waves: &mut BTreeMap<String, i32>,
    errors: &mut Vec<SpecError>,
) -> Vec<Option<i32>> {
    let mut out = vec![None; nodes.len()];
    let mut pending: Vec<usize> = (0..nodes.len()).collect();
    loop {
        let before = pending.len();
        pending.retain(|&i| {
            let known: Option<Vec<i32>> = nodes[i]
                .deps
                .iter()
                .map(|d| waves.get(d).copied())
                .collect();
            match known {
                Some(ws) => {
                    let wave = ws
                        .into_iter()
                        .map(|w| w + 1)
                        .max()
                        .unwrap_or(0)
                        .max(nodes[i].base);
                    waves.insert(nodes[i].key.clone(), wave);
                    out[i] = Some(wave);
                    false
                }
                None => true,
            }
        });
        if pending.is_empty() {
            return out;
        }
        if pending.len() == before {
            let here: BTreeSet<&str> = pending.iter().map(|&i| nodes[i].key.as_str()).collect();
            for &i in &pending {
                let n = &nodes[i];
                let (kind, key) = n.key.split_once('/').unwrap_or(("", &n.key));
                let missing: Vec<&str> = n
                    .deps
                    .iter()
                    .filter(|d| !waves.contains_key(*d))
                    .map(|d| d.split_once('/').map_or(d.as_str(), |(_, k)| k))
                    .collect();
                let what = if kind == "helmrelease" {
                    "HelmRelease"
                } else {
                    "Kustomization"
                };
                let why = match n
                    .deps
                    .iter()
                    .find(|d| !waves.contains_key(*d) && !here.contains(d.as_str()))
                {
                    Some(d) => format!(
                        "depends on {what} {}, which the tree does not hold",
                        d.split_once('/').map_or(d.as_str(), |(_, k)| k)
                    ),
                    None => format!("is in a dependsOn cycle ({})", missing.join(", ")),
                };
                errors.push(err(n.at.clone(), format!("{what} {key}: {why}")));
            }
            return out;
        }
    }
}
