//! Whether a held spec (suspended) holds anything back: after a restart every spec is
//! unsettled until a sync applies it, and a suspended spec is never synced; one whose
//! objects the inventory records as applied with these very bodies holds nothing back,
//! and its state is the current revision's.

use std::collections::{BTreeMap, BTreeSet};

use super::Engine;
use super::hash::body_hashes;
use crate::render::Object;
use crate::spec::SpecId;

impl Engine {
    /// The specs of `objects` whose every object the inventory records as applied with
    /// the same body (the hashes apply compares before it writes), and whose recorded
    /// objects are all still in it (nothing to prune). Reads only: the inventory, and
    /// for a Secret the hash key if one exists.
    pub(crate) async fn applied_as_is(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
    ) -> BTreeSet<SpecId> {
        let Ok(inventory) = self.store().load(&self.client).await else {
            return BTreeSet::new();
        };
        let mut same: BTreeMap<String, bool> = BTreeMap::new();
        let planned = self.plan(objects, adopt_specs).await;
        for p in &planned {
            // A hook is a run, not state: it is not what a suspension holds.
            if p.obj.policy.hook.is_some() {
                continue;
            }
            let keyed = p.key.is("", "Secret") || p.obj.policy.sealed;
            let p = p.shaped();
            let plain = body_hashes(&p.body, None).applied;
            let key = match keyed {
                true => self.existing_hash_key().await,
                false => None,
            };
            let hashed = key.map(|k| body_hashes(&p.body, Some(k)).applied);
            let recorded = inventory
                .entries
                .get(&p.key)
                .and_then(|e| e.applied.as_deref());
            let as_is = recorded.is_some_and(|r| r == plain || hashed.as_deref() == Some(r));
            let spec = p.obj.spec.to_string();
            let was = same.get(&spec).copied().unwrap_or(true);
            same.insert(spec, was && as_is);
        }
        let desired: BTreeSet<_> = planned.iter().map(|p| &p.key).collect();
        for entry in inventory.entries.values() {
            if !desired.contains(&entry.key)
                && let Some(s) = same.get_mut(&entry.spec)
            {
                *s = false;
            }
        }
        objects
            .iter()
            .map(|o| o.spec.clone())
            .filter(|s| same.get(&s.to_string()) == Some(&true))
            .collect()
    }
}
