//! `depends-on` across a tree: every id it names is a spec of the tree, and no spec waits
//! on itself, directly or through others. The same order gives one-shot `apply` its
//! waves.

use std::collections::{BTreeMap, BTreeSet};

use super::{Location, Spec, SpecError, SpecId, SpecTree};

/// Resolves each spec's written dependencies (`written[i]` belongs to `specs[i]`) into
/// `Spec::depends_on`, or gives the errors: unknown ids where they are written, and each
/// cycle once, where its first member (in file order) names the next.
pub(super) fn resolve(specs: &mut [Spec], written: Vec<Vec<(String, Location)>>) -> Vec<SpecError> {
    let known: BTreeSet<SpecId> = specs.iter().map(|s| s.id.clone()).collect();
    let mut errors = Vec::new();
    let mut places: BTreeMap<(SpecId, SpecId), Location> = BTreeMap::new();
    for (spec, deps) in specs.iter_mut().zip(written) {
        for (text, at) in deps {
            // Written ids were checked when read: only a spec that is not there is left.
            let Ok(id) = text.parse::<SpecId>() else {
                continue;
            };
            if !known.contains(&id) {
                errors.push(SpecError {
                    at,
                    message: format!(
                        "depends on {id}, which is not a spec of this tree (spec ids are kind/namespace/name, as `driftless status` lists them)"
                    ),
                });
                continue;
            }
            if !spec.depends_on.contains(&id) {
                places.entry((spec.id.clone(), id.clone())).or_insert(at);
                spec.depends_on.push(id);
            }
        }
    }
    let order: BTreeMap<&SpecId, usize> =
        specs.iter().enumerate().map(|(i, s)| (&s.id, i)).collect();
    let edges: BTreeMap<&SpecId, &[SpecId]> = specs
        .iter()
        .map(|s| (&s.id, s.depends_on.as_slice()))
        .collect();
    let stuck = levels(specs).1;
    let mut reported: BTreeSet<BTreeSet<&SpecId>> = BTreeSet::new();
    for start in specs.iter().map(|s| &s.id).filter(|id| stuck.contains(*id)) {
        // Every stuck spec waits on a stuck one: walking those edges must come back.
        let mut path: Vec<&SpecId> = vec![start];
        let cycle = loop {
            let here = path[path.len() - 1];
            let Some(next) = edges[here].iter().find(|d| stuck.contains(*d)) else {
                break None;
            };
            if let Some(i) = path.iter().position(|p| *p == next) {
                break Some(path.split_off(i));
            }
            path.push(next);
        };
        let Some(mut cycle) = cycle else { continue };
        let members: BTreeSet<&SpecId> = cycle.iter().copied().collect();
        if !reported.insert(members) {
            continue;
        }
        // Told from the member written first, so the same cycle reads the same way.
        let first = (0..cycle.len())
            .min_by_key(|i| order[cycle[*i]])
            .unwrap_or(0);
        cycle.rotate_left(first);
        let at = places[&(cycle[0].clone(), cycle[1 % cycle.len()].clone())].clone();
        let mut names: Vec<String> = cycle.iter().map(|id| id.to_string()).collect();
        names.push(cycle[0].to_string());
        errors.push(SpecError {
            at,
            message: format!("depends-on cycle: {}", names.join(" → ")),
        });
    }
    errors
}

/// Each spec's wave (0: depends on nothing; n: on specs of waves below n), and the specs
/// that have none (they wait on a cycle, or are in one).
fn levels(specs: &[Spec]) -> (BTreeMap<SpecId, usize>, BTreeSet<SpecId>) {
    let mut level: BTreeMap<SpecId, usize> = BTreeMap::new();
    let mut left: Vec<&Spec> = specs.iter().collect();
    loop {
        let before = left.len();
        left.retain(|s| {
            let deps: Option<Vec<usize>> =
                s.depends_on.iter().map(|d| level.get(d).copied()).collect();
            match deps {
                Some(deps) => {
                    level.insert(
                        s.id.clone(),
                        deps.into_iter().map(|l| l + 1).max().unwrap_or(0),
                    );
                    false
                }
                None => true,
            }
        });
        if left.len() == before {
            break;
        }
    }
    (level, left.into_iter().map(|s| s.id.clone()).collect())
}

impl SpecTree {
    /// Whether a spec is a hook that runs (`spec::order`).
    pub(crate) fn has_hooks(&self) -> bool {
        self.specs
            .iter()
            .any(|s| s.policy.hook.is_some() && !s.policy.never_applied())
    }

    /// The tree's specs in waves: each wave's specs depend only on earlier waves' (one
    /// wave when nothing depends on anything). A valid tree has no cycles, so every spec
    /// is in one.
    pub fn waves(&self) -> Vec<BTreeSet<SpecId>> {
        let (level, _) = levels(&self.specs);
        let mut waves: Vec<BTreeSet<SpecId>> = Vec::new();
        for (id, l) in level {
            if waves.len() <= l {
                waves.resize_with(l + 1, BTreeSet::new);
            }
            waves[l].insert(id);
        }
        waves
    }

    /// Whether any spec depends on another.
    pub fn has_dependencies(&self) -> bool {
        self.specs.iter().any(|s| !s.depends_on.is_empty())
    }
}
