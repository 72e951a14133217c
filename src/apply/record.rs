//! The inventory's side of a sync: what counts as desired, what is recorded before the
//! writes (so an interrupted sync never orphans an object), and what after each one.

use std::collections::BTreeSet;

use super::list::Existing;
use super::live::Live;
use super::plan::Planned;
use super::prune::Plan;
use super::{Entry, Inventory, ObjKey, Options, Scope};
use crate::object::{claim, split_api_version};
use crate::spec::SpecId;

/// The specs a sync stands for, by identity text (as the inventory names them).
pub(super) enum Covered {
    All,
    Only(BTreeSet<String>),
    Except(BTreeSet<String>),
}

impl Covered {
    pub(super) fn of(scope: Scope<'_>) -> Covered {
        let text = |specs: &BTreeSet<SpecId>| specs.iter().map(SpecId::to_string).collect();
        match scope {
            Scope::All => Covered::All,
            Scope::Only(specs) => Covered::Only(text(specs)),
            Scope::Except(specs) => Covered::Except(text(specs)),
        }
    }

    pub(super) fn covers(&self, spec: &str) -> bool {
        match self {
            Covered::All => true,
            Covered::Only(specs) => specs.contains(spec),
            Covered::Except(specs) => !specs.contains(spec),
        }
    }
}

/// What a sync wants to exist: the planned objects, and everything the inventory lists
/// for specs the sync does not stand for (they are as last applied).
pub(super) fn desired(
    planned: &[Planned<'_>],
    loaded: &Inventory,
    covered: &Covered,
) -> BTreeSet<ObjKey> {
    let mut desired: BTreeSet<ObjKey> = planned.iter().map(|p| p.key.clone()).collect();
    desired.extend(
        loaded
            .entries
            .values()
            .filter(|e| !covered.covers(&e.spec))
            .map(|e| e.key.clone()),
    );
    desired
}

/// The inventory to save before any write: `loaded` with a pending entry (no UID yet) for
/// every object this sync may take, and holds released or set.
///
/// What a refused revision adds is held out of the share later prunes are judged
/// against (`Entry::held`), until a whole sync's prune goes ahead or a prune of those
/// specs deletes something. A sync of specs that prunes nothing proves nothing: a sync
/// of only the spec that added objects (after drift, say) would otherwise release them
/// while the refusal stands.
pub(super) fn pending(
    loaded: Inventory,
    planned: &[Planned<'_>],
    existing: &Existing,
    covered: &Covered,
    prune_plan: &Plan,
    opts: &Options,
) -> Inventory {
    let mut inv = loaded;
    let prune_on = opts.prune.enabled;
    let hold = prune_on && prune_plan.refused.is_some();
    let whole = !matches!(covered, Covered::Only(_));
    if prune_on && !hold && (whole || !prune_plan.candidates.is_empty()) {
        for e in inv.entries.values_mut() {
            if covered.covers(&e.spec) {
                e.held = false;
            }
        }
    }
    for p in planned
        .iter()
        .filter(|p| !existing.skipped.contains(&p.key) && !p.obj.policy.never_applied())
    {
        let takeable = existing
            .value_of(&p.key)
            .is_none_or(|v| claim(&v, &opts.instance, p.adopt).is_ok());
        if !takeable {
            continue;
        }
        inv.entries
            .entry(p.key.clone())
            .or_insert_with(|| Box::new(unconfirmed(p, hold)));
    }
    inv
}

/// The entry recorded for an object before its first apply: no UID or hashes yet.
fn unconfirmed(p: &Planned<'_>, held: bool) -> Entry {
    Entry {
        key: p.key.clone(),
        version: split_api_version(&p.obj.api_version).1.to_string(),
        spec: p.obj.spec.to_string(),
        uid: None,
        applied: None,
        shape: None,
        fields: None,
        held,
        deleting: false,
        keep: p.obj.policy.keep,
        sealed: p.obj.policy.sealed,
        wave: p.obj.policy.wave,
        hook: p.obj.policy.hook.is_some(),
        app: app(p),
        account: p.obj.policy.service_account.clone(),
    }
}

/// The entry for an object just written: confirmed with its UID and hashes.
pub(super) fn confirmed(p: &Planned<'_>, live: &Live, applied: String, shape: String) -> Entry {
    Entry {
        uid: live.value["metadata"]["uid"].as_str().map(str::to_string),
        applied: Some(applied),
        shape: Some(shape),
        fields: Some(live.fields.clone()),
        ..unconfirmed(p, false)
    }
}

/// The app an object's spec was rendered by, as its entry records it.
pub(super) fn app(p: &Planned<'_>) -> Option<String> {
    p.app.clone()
}

/// Records one object's outcome: its entry as the apply left it (keeping a hold), or,
/// for an object that was never ours, no pending record that could make it look
/// prunable later.
pub(super) fn settle(inv: &mut Inventory, key: &ObjKey, entry: Option<Entry>) {
    match entry {
        Some(e) => {
            let held = inv.entries.get(&e.key).is_some_and(|old| old.held);
            inv.entries
                .insert(e.key.clone(), Box::new(Entry { held, ..e }));
        }
        None => {
            if inv.entries.get(key).is_some_and(|e| e.uid.is_none()) {
                inv.entries.remove(key);
            }
        }
    }
}
