//! The prune's plan, pure: the inventoried objects that left the specs, in delete order,
//! and the guards that refuse a prune taking too much of the tree or of an app.

use std::collections::{BTreeMap, BTreeSet};

use super::Options;
use crate::apply::{Entry, Inventory, ObjKey};

#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Inventory entries no longer desired, in delete order (reverse apply order).
    pub candidates: Vec<Entry>,
    /// Entries no longer desired whose objects an earlier prune left being deleted: read
    /// again (even when `refused`), never deleted again.
    pub deleting: Vec<Entry>,
    /// Why nothing will be pruned, when a guard trips.
    pub refused: Option<String>,
}

/// `apps`: the Flux and Argo CD apps in the revision (those rendering nothing included),
/// each judged by its own share as well as the tree by its.
pub fn plan(
    inventory: &Inventory,
    desired: &BTreeSet<ObjKey>,
    opts: &Options,
    apps: &BTreeSet<String>,
) -> Plan {
    let (deleting, mut candidates): (Vec<Entry>, Vec<Entry>) = inventory
        .entries
        .values()
        .filter(|e| !desired.contains(&e.key))
        .map(|e| Entry::clone(e))
        .partition(|e| e.deleting);
    // A Namespace the tree no longer declares but still has objects in stays, and stays
    // inventoried, until nothing of the tree is left in it: deleting it would delete them.
    // A protected one (kube-system, ..., adopted with --allow-namespace) never goes.
    let in_use: BTreeSet<&str> = desired.iter().map(|k| k.namespace.as_str()).collect();
    candidates.retain(|e| {
        let name = e.key.name.as_str();
        !(e.key.is("", "Namespace")
            && (in_use.contains(name)
                || name == "default"
                || crate::spec::PROTECTED_NAMESPACES.contains(&name)))
    });
    // Custom resources before their CRDs, everything before namespaces; within those,
    // higher waves first (the reverse of their apply order).
    candidates.sort_by_key(|e| {
        (
            std::cmp::Reverse(e.key.apply_phase()),
            std::cmp::Reverse(e.wave),
        )
    });
    // Entries held by an earlier refusal count only where this revision would prune them;
    // objects already being deleted not at all (that prune went ahead).
    let counted = || {
        inventory
            .entries
            .values()
            .map(Box::as_ref)
            .filter(|e| !e.held || !desired.contains(&e.key))
            .filter(|e| !e.deleting || desired.contains(&e.key))
    };
    let total = counted().count();
    // What a prune would delete: objects kept on prune only leave the inventory.
    let deleted: Vec<&Entry> = candidates.iter().filter(|e| !e.keep).collect();
    let renamed = renames(inventory, desired, &deleted);
    let deletions = deleted.len() - renamed;
    let refused = if opts.allow_mass || deletions == 0 {
        None
    } else if desired.is_empty() {
        Some(format!(
            "the revision has no objects while the inventory lists {total}: refusing to prune everything \
             (an emptied or mis-pointed source?); pass --allow-mass-prune if this is intended"
        ))
    } else if deletions as f64 > opts.max_ratio * total as f64 {
        let held = inventory.len() - total - deleting.len();
        let mut not_counted = Vec::new();
        if held > 0 {
            not_counted.push(format!(
                "{held} more, recorded since a prune was refused, are not counted"
            ));
        }
        if renamed > 0 {
            not_counted.push(format!(
                "{renamed} more, replaced by new objects of their kind, count as renamed"
            ));
        }
        let not_counted = match not_counted.is_empty() {
            true => String::new(),
            false => format!(" ({})", not_counted.join("; ")),
        };
        Some(format!(
            "the revision would prune {deletions} of {total} inventoried objects{not_counted}, more than \
             {:.0}%; pass --allow-mass-prune (or raise --max-prune-ratio) if this is intended",
            opts.max_ratio * 100.0
        ))
    } else {
        app_refusal(
            counted(),
            inventory,
            desired,
            &deleted,
            apps,
            opts.max_ratio,
        )
    };
    Plan {
        candidates,
        deleting,
        refused,
    }
}

/// The refusal of a prune that would take all, or more than `ratio`, of an app's own
/// objects while the app is still in the revision: a Flux Kustomization or an Argo CD
/// Application pointed at an emptied or wrong path looks so, however small a part of the
/// tree it is. An app that left the revision is judged with the tree alone (Flux prunes
/// a removed Kustomization's objects).
fn app_refusal<'e>(
    counted: impl Iterator<Item = &'e Entry>,
    inventory: &Inventory,
    desired: &BTreeSet<ObjKey>,
    deleted: &[&'e Entry],
    apps: &BTreeSet<String>,
    ratio: f64,
) -> Option<String> {
    let of_app = |e: &'e Entry| {
        e.app
            .as_deref()
            .filter(|a| apps.contains(*a) && crate::spec::guards_own_prune(a))
    };
    let mut totals: BTreeMap<&str, usize> = BTreeMap::new();
    for app in counted.filter_map(of_app) {
        *totals.entry(app).or_default() += 1;
    }
    let mut lost: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in deleted {
        if let Some(app) = of_app(e) {
            lost.entry(app).or_default().push(e);
        }
    }
    lost.into_iter().find_map(|(app, gone)| {
        let total = totals.get(app).copied().unwrap_or_default();
        let deletions = gone.len() - renames(inventory, desired, &gone);
        if deletions == 0 {
            None
        } else if deletions >= total {
            Some(format!(
                "app {app} would prune all {total} of its inventoried objects: refusing to empty an app \
                 still in the revision (an emptied or mis-pointed path?); pass --allow-mass-prune if this is intended"
            ))
        } else if deletions as f64 > ratio * total as f64 {
            Some(format!(
                "app {app} would prune {deletions} of its {total} inventoried objects, more than {:.0}%; \
                 pass --allow-mass-prune (or raise --max-prune-ratio) if this is intended",
                ratio * 100.0
            ))
        } else {
            None
        }
    })
}

/// How many of the `deleted` entries the revision renames: it brings in, one for one, a
/// new object of the same group, kind and namespace (a Helm release renamed between two
/// chart versions renames every object). A rename is not a loss, so it does not count
/// toward the share a prune may take; a revision that shrinks the tree still does. New
/// here means not in the inventory, or recorded only by a refused attempt (`held`).
fn renames(inventory: &Inventory, desired: &BTreeSet<ObjKey>, deleted: &[&Entry]) -> usize {
    let mut added: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    for k in desired {
        if inventory.entries.get(k).is_none_or(|e| e.held) {
            *added.entry((&k.group, &k.kind, &k.namespace)).or_default() += 1;
        }
    }
    deleted
        .iter()
        .filter(|e| {
            let slot = (
                e.key.group.as_str(),
                e.key.kind.as_str(),
                e.key.namespace.as_str(),
            );
            match added.get_mut(&slot) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            }
        })
        .count()
}

/// What a prune would delete, for a refusal: the first few objects, and how many more.
pub fn listed(candidates: &[Entry]) -> String {
    const SHOWN: usize = 10;
    let names: Vec<String> = candidates
        .iter()
        .filter(|e| !e.keep)
        .take(SHOWN)
        .map(|e| e.key.to_string())
        .collect();
    let total = candidates.iter().filter(|e| !e.keep).count();
    match total.saturating_sub(SHOWN) {
        0 => names.join(", "),
        more => format!("{}, and {more} more", names.join(", ")),
    }
}
