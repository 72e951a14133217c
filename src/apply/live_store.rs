//! One cluster's live objects, in the shape of kube-runtime's reflector store: the
//! watches fill it (`observe`, `listing`, `listed`), a sync's writes stand in until
//! their watch reports them (`offer`, `written`), and the sync, readiness, the status and
//! the object view read it (`observed`, `known`). It keeps per object what readiness
//! needs (the packed view) and the hash of the fields driftless owns, nothing more: at
//! 10,000 specs it is most of what the daemon holds.
//!
//! It is a value of the daemon's pure state, not a task of its own: the watches' events
//! reach it in the order the loop takes them, and a sync takes what it holds as a
//! shared snapshot (`Known`), so neither waits for a lock.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::Known;
use crate::object::{GroupKind, ObjKey, Observed, Packed, Seen};

/// Every this many whole syncs that could take the store's objects, one lists every kind
/// itself: were a watch ever to miss an event, what it holds is put right within a
/// bounded number of resyncs.
pub(crate) const LIST_EVERY: u32 = 10;

/// What the watches of one cluster have seen of the objects driftless owns, and which
/// kinds of them it knows whole.
#[derive(Debug, Default)]
pub(crate) struct LiveStore {
    /// The objects, Endpoints and (while readiness is judged) failing Pods.
    pub observed: Observed,
    /// Kinds a watch has listed whole and follows since (`known`).
    listed: BTreeSet<GroupKind>,
    /// Kinds being listed, with the objects held of them the list has not brought yet.
    relisting: HashMap<GroupKind, HashSet<ObjKey>>,
    /// Whole syncs since one listed every kind itself (`LIST_EVERY`).
    known_syncs: u32,
    /// The kinds watched now; `None` before the watches are first set.
    watched: Option<BTreeSet<GroupKind>>,
    /// A restart's watches were set before its first sync (`watching_first`): that sync
    /// waits for their lists, until they are in, one fails, or the loop's bound passes.
    first_lists: bool,
    /// Objects of watched kinds a sync wrote whose watch has not reported the write yet,
    /// with the fields written: a whole sync reads them itself.
    unconfirmed: HashMap<ObjKey, String>,
}

impl LiveStore {
    /// The object as last seen (by its watch, or a write's answer standing in).
    pub fn get(&self, key: &ObjKey) -> Option<&Seen> {
        self.observed.objects.get(key)
    }

    /// A watch reported `key` (`None`: gone), with its view and the fields our manager
    /// owns.
    pub fn observe(&mut self, key: ObjKey, live: Option<(Packed, String)>) {
        self.seen_in_list(&key);
        self.confirm(&key, live.as_ref().map(|(_, fields)| fields.as_str()));
        if key.group.is_empty() && key.kind == "Endpoints" {
            let k = (key.namespace, key.name);
            match live {
                Some((view, _)) => self.observed.endpoints.insert(k, view),
                None => self.observed.endpoints.remove(&k),
            };
            return;
        }
        match live {
            Some((view, fields)) => self
                .observed
                .objects_mut()
                .insert(key, Seen { view, fields }),
            None => self.observed.objects_mut().remove(&key),
        };
    }

    /// What a write returned stands in until the watch reports it, never over a newer
    /// event. It does replace an older one: readiness right after the sync must be the
    /// written object's (a new generation, a new Pod), not the one it replaced.
    pub(crate) fn offer(&mut self, key: &ObjKey, view: Packed, fields: String) {
        let newer = self
            .get(key)
            .is_none_or(|cached| written_after(&view, &cached.view));
        if newer {
            self.observed
                .objects_mut()
                .insert(key.clone(), Seen { view, fields });
        }
    }

    /// A sync pruned `key`: nothing of it is held, nor waited for.
    pub fn forget(&mut self, key: &ObjKey) {
        self.observed.objects_mut().remove(key);
        self.unconfirmed.remove(key);
    }

    /// The objects of every kind a watch has listed whole, for a whole sync to take
    /// instead of listing them; `None` when it lists them itself.
    pub fn known(&mut self) -> Option<Known> {
        if self.listed.is_empty() {
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
            kinds: self.listed.clone(),
            objects: self.observed.objects.clone(),
            unconfirmed: self.unconfirmed.keys().cloned().collect(),
        })
    }

    /// The kinds watched from now on: no other is known whole.
    pub(crate) fn watching(&mut self, kinds: impl IntoIterator<Item = GroupKind>) {
        let kinds: BTreeSet<GroupKind> = kinds.into_iter().collect();
        self.listed.retain(|k| kinds.contains(k));
        self.relisting.retain(|k, _| kinds.contains(k));
        self.unconfirmed.retain(|key, _| key.of_any(&kinds));
        self.watched = Some(kinds);
    }

    /// The kinds a restart's inventory records, watched before its first sync: their
    /// lists run while the tree is read and rendered, and the first sync waits for them
    /// and takes what they hold (`known`) instead of listing every kind itself beside
    /// them. At 10,000 specs the two rounds of lists were most of a restart.
    pub(crate) fn watching_first(&mut self, kinds: impl IntoIterator<Item = GroupKind>) {
        self.watching(kinds);
        self.first_lists = true;
    }

    /// The first sync waits for the watches' lists no longer: they took longer than the
    /// loop's bound, or one failed (the sync lists what is not in, and says why it cannot).
    pub(crate) fn lists_not_awaited(&mut self) {
        self.first_lists = false;
    }

    /// A restart's first sync waits for the watches' lists.
    pub(crate) fn awaiting_first_lists(&self) -> bool {
        self.first_lists && !self.watches_listed()
    }

    /// Whether a restart's first sync is still to end (`judging_held`).
    pub(crate) fn first_lists(&self) -> bool {
        self.first_lists
    }

    /// Every watched kind is listed whole (the watches have been set).
    pub(crate) fn watches_listed(&self) -> bool {
        self.watched
            .as_ref()
            .is_some_and(|kinds| kinds.is_subset(&self.listed))
    }

    /// A sync wrote `key`, leaving `fields` ours: unconfirmed until its watch reports
    /// them (unless it already has, while the sync ran).
    pub fn written(&mut self, key: &ObjKey, fields: &str) {
        let seen = self.get(key).map(|s| s.fields.as_str());
        let watched = self.watched.as_ref().is_some_and(|kinds| key.of_any(kinds));
        if watched && seen != Some(fields) {
            self.unconfirmed.insert(key.clone(), fields.to_string());
        }
    }

    /// A watch reported `key` with `fields` (`None`: gone): a write it confirms.
    fn confirm(&mut self, key: &ObjKey, fields: Option<&str>) {
        if let Some(written) = self.unconfirmed.get(key)
            && fields.is_none_or(|f| f == written)
        {
            self.unconfirmed.remove(key);
        }
    }

    /// A kind's list began: until it is in, its objects are not all known. Those held of
    /// it now are gone unless the list brings them again (a list made again after the
    /// watch lost its place reports only what exists).
    pub fn listing(&mut self, kind: GroupKind) {
        self.listed.remove(&kind);
        let (group, name) = (kind.0.as_str(), kind.1.as_str());
        let held: HashSet<ObjKey> = if group.is_empty() && name == "Endpoints" {
            self.observed
                .endpoints
                .keys()
                .map(|(namespace, n)| endpoints(namespace, n))
                .collect()
        } else {
            self.observed
                .objects
                .keys()
                .filter(|k| k.group == group && k.kind == name)
                .cloned()
                .collect()
        };
        self.relisting.insert(kind, held);
    }

    /// An object the watch reported: not gone, if its kind is being listed.
    fn seen_in_list(&mut self, key: &ObjKey) {
        if self.relisting.is_empty() {
            return;
        }
        for (kind, held) in self.relisting.iter_mut() {
            if kind.0 == key.group && kind.1 == key.kind {
                held.remove(key);
            }
        }
    }

    /// A kind's list is in, and it is known whole from now on; returns its objects the
    /// list did not bring, which are gone (the caller observes each gone, as a watch's
    /// delete would say). A list whose beginning was not seen (a watch replaced since,
    /// whose last events were still queued) makes nothing known: `None`.
    pub fn listed(&mut self, kind: GroupKind) -> Option<HashSet<ObjKey>> {
        let gone = self.relisting.remove(&kind)?;
        self.listed.insert(kind);
        Some(gone)
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

/// Whether `written` is a newer state of the object than `cached` as readiness reads it:
/// another object (a new UID, as after a replace) or a later generation (a changed spec,
/// which a controller has yet to observe). The readiness view keeps no resourceVersion.
fn written_after(written: &Packed, cached: &Packed) -> bool {
    let (w, c) = (written.value(), cached.value());
    let uid = |v: &serde_json::Value| v["metadata"]["uid"].as_str().map(str::to_string);
    let generation = |v: &serde_json::Value| v["metadata"]["generation"].as_i64();
    match (generation(&w), generation(&c)) {
        _ if uid(&w) != uid(&c) => true,
        (Some(w), Some(c)) => w > c,
        _ => false,
    }
}
