//! What a whole sync takes from the state instead of reading or rendering it again: the
//! objects the watches hold, for its lists of the kinds they have listed whole
//! (`apply::Known`), and the tree's render, kept until the tree or the nodes change.
//! Also the objects a watch's list made again no longer finds.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use super::State;
use crate::apply::Known;
use crate::daemon::queue::Key;
use crate::daemon::watch::GroupKind;
use crate::object::ObjKey;
use crate::render::Object;

/// Every this many whole syncs that could take the watches' objects, one lists every
/// kind itself: were a watch ever to miss an event, what it holds is put right within a
/// bounded number of resyncs.
pub(super) const LIST_EVERY: u32 = 10;

impl State {
    /// The whole tree's objects, if rendered since the tree or the nodes last changed.
    /// A stale render is dropped here, before the next is made: two at once would be a
    /// new revision's peak.
    pub fn rendered(&mut self) -> Option<Arc<[Object]>> {
        match &self.rendered {
            Some((epoch, objects)) if *epoch == self.render_epoch => Some(objects.clone()),
            _ => {
                self.rendered = None;
                None
            }
        }
    }

    /// The whole tree's objects as rendered now, for the syncs until it or the nodes
    /// change. Not before every watched kind is listed: a restart's sync and the
    /// watches' first lists after it are the daemon's peak, and holding the render
    /// through them raised it by 23 MiB at 10,000 specs (the next resync keeps it).
    pub fn keep_rendered(&mut self, objects: Arc<[Object]>) {
        if self.watches_listed() {
            self.rendered = Some((self.render_epoch, objects));
        }
    }

    /// The objects of every kind a watch has listed whole, for a whole sync to take
    /// instead of listing them; `None` when it lists them itself.
    pub fn known_live(&mut self) -> Option<Known> {
        if self.listed_kinds.is_empty() {
            return None;
        }
        self.known_syncs += 1;
        if self.known_syncs >= LIST_EVERY {
            self.known_syncs = 0;
            return None;
        }
        // What a sync wrote that its watch has not reported yet is read again: the watch
        // may still hold what was there before the write (a ServiceAccount has no
        // generation to tell the write's answer from an older event by).
        Some(Known {
            kinds: self.listed_kinds.clone(),
            objects: self.live.objects.clone(),
            unconfirmed: self.unconfirmed.keys().cloned().collect(),
        })
    }

    /// The kinds watched from now on: no other is known whole.
    pub fn watching(&mut self, kinds: impl IntoIterator<Item = GroupKind>) {
        let kinds: BTreeSet<GroupKind> = kinds.into_iter().collect();
        self.listed_kinds.retain(|k| kinds.contains(k));
        self.relisting.retain(|k, _| kinds.contains(k));
        self.unconfirmed.retain(|key, _| key.of_any(&kinds));
        self.watched_kinds = Some(kinds);
    }

    /// The kinds a restart's inventory records, watched before its first sync: their
    /// lists run while the tree is read and rendered, and the first sync waits for them
    /// and takes what they hold (`known_live`) instead of listing every kind itself
    /// beside them. At 10,000 specs the two rounds of lists were most of a restart.
    pub fn watching_first(&mut self, kinds: impl IntoIterator<Item = GroupKind>) {
        self.watching(kinds);
        self.first_lists = true;
    }

    /// The first sync waits for the watches' lists no longer: they took longer than the
    /// loop's bound, or one failed (the sync lists what is not in, and says why it cannot).
    pub fn lists_not_awaited(&mut self) {
        self.first_lists = false;
    }

    /// A restart's first sync waits for the watches' lists.
    pub(super) fn awaiting_first_lists(&self) -> bool {
        self.first_lists && !self.watches_listed()
    }

    /// Readiness is judged once a restart's first sync has ended: before, with its kinds
    /// half listed, every spec would be judged again each second on the loop the lists'
    /// events wait for (a fifth of a core at 10,000 specs); once they are in, a
    /// judgement (0.6 s and 20 MiB) came before or beside the sync the status waits for
    /// too, and made the restart's peak.
    pub fn judging_held(&self) -> bool {
        self.first_lists
    }

    /// Every watched kind is listed whole (the watches have been set).
    pub fn watches_listed(&self) -> bool {
        self.watched_kinds
            .as_ref()
            .is_some_and(|kinds| kinds.is_subset(&self.listed_kinds))
    }

    /// A sync wrote `key`, leaving `fields` ours: unconfirmed until its watch reports
    /// them (unless it already has, while the sync ran).
    pub(super) fn written(&mut self, key: &ObjKey, fields: &str) {
        let seen = self.live.objects.get(key).map(|s| s.fields.as_str());
        let watched = self
            .watched_kinds
            .as_ref()
            .is_some_and(|kinds| key.of_any(kinds));
        if watched && seen != Some(fields) {
            self.unconfirmed.insert(key.clone(), fields.to_string());
        }
    }

    /// A watch reported `key` with `fields` (`None`: gone): a write it confirms.
    pub(super) fn confirm(&mut self, key: &ObjKey, fields: Option<&str>) {
        if let Some(written) = self.unconfirmed.get(key)
            && fields.is_none_or(|f| f == written)
        {
            self.unconfirmed.remove(key);
        }
    }

    /// A kind's list began: until it is in, its objects are not all known. Those held of
    /// it now are gone unless the list brings them again (a list made again after the
    /// watch lost its place reports only what exists).
    pub(super) fn on_listing(&mut self, kind: GroupKind) {
        self.listed_kinds.remove(&kind);
        let (group, name) = (kind.0.as_str(), kind.1.as_str());
        let held: HashSet<ObjKey> = if group.is_empty() && name == "Endpoints" {
            self.live
                .endpoints
                .keys()
                .map(|(namespace, n)| endpoints(namespace, n))
                .collect()
        } else {
            self.live
                .objects
                .keys()
                .filter(|k| k.group == group && k.kind == name)
                .cloned()
                .collect()
        };
        self.relisting.insert(kind, held);
    }

    /// An object the watch reported: not gone, if its kind is being listed.
    pub(super) fn seen_in_list(&mut self, key: &ObjKey) {
        if self.relisting.is_empty() {
            return;
        }
        for (kind, held) in self.relisting.iter_mut() {
            if kind.0 == key.group && kind.1 == key.kind {
                held.remove(key);
            }
        }
    }

    /// A kind's list is in: its objects the list did not bring are gone (as a watch's
    /// delete of each would say), and it is known whole from now on.
    /// A list whose beginning was not seen (a watch replaced since, whose last events
    /// were still queued) makes nothing known.
    pub(super) fn on_listed(&mut self, kind: GroupKind) -> Option<Key> {
        let gone = self.relisting.remove(&kind)?;
        self.listed_kinds.insert(kind);
        let mut keys: BTreeSet<Key> = BTreeSet::new();
        for key in gone {
            keys.extend(self.on_object(key, None));
        }
        match keys.len() {
            0 | 1 => keys.pop_first(),
            _ => Some(Key::Full),
        }
    }
}

fn endpoints(namespace: &str, name: &str) -> ObjKey {
    ObjKey {
        group: String::new(),
        kind: "Endpoints".into(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}
