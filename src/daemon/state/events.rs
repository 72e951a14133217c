//! How a watch event changes the state: drift of an owned object (corrected, reported or
//! left to a scaler), a node change, the cluster's reachability; and the drift the status
//! shows.

use std::collections::HashMap;

use super::State;
use crate::daemon::queue::Key;
use crate::daemon::watch;
use crate::object::{ObjKey, Packed};
use crate::spec::{SpecBody, SpecId};

impl State {
    /// Folds a watch event into the state; returns a key to sync when it is drift or a
    /// node change that matters.
    pub(crate) fn on_event(&mut self, ev: watch::Event) -> Option<Key> {
        match ev {
            watch::Event::Cluster(error) => {
                self.cluster_error = error;
                // Written with the next refresh.
                self.health_dirty = true;
                None
            }
            watch::Event::Nodes(nodes) => {
                if self.nodes != nodes {
                    self.render_dirty = true;
                    self.render_epoch += 1;
                    self.health_dirty = true;
                }
                self.nodes = nodes;
                self.nodes_known = true;
                let has_local = self
                    .specs()
                    .iter()
                    .any(|s| matches!(s.body, SpecBody::LocalService(_)));
                has_local.then_some(Key::Full)
            }
            watch::Event::Object(key, live) => self.on_object(key, live),
            watch::Event::Listing(kind) => {
                self.live.listing(kind);
                None
            }
            watch::Event::ListFailed => {
                self.live.lists_not_awaited();
                None
            }
            watch::Event::Listed(kind) => {
                self.health_dirty = true;
                self.on_listed(kind)
            }
            watch::Event::Suspensions(now) => {
                self.suspensions_known = true;
                if self.asked != now {
                    tracing::info!(suspended = now.len(), "suspensions changed");
                }
                let before: Vec<String> = self.suspensions.keys().cloned().collect();
                self.on_asked(now);
                let resumed = before.iter().any(|id| !self.suspensions.contains_key(id));
                // What a resumed spec held back goes through now.
                resumed.then_some(Key::Full)
            }
        }
    }

    /// An owned object changed (`Some`) or went away (`None`), as a watch saw it.
    pub(super) fn on_object(&mut self, key: ObjKey, live: Option<watch::Watched>) -> Option<Key> {
        self.health_dirty = true;
        if key.group.is_empty() && key.kind == "Endpoints" {
            self.live.observe(key, live.map(|w| (w.value, w.fields)));
            return None;
        }
        let recorded = self.recorded.get(&key).cloned();
        // Nothing recorded (a sync that found it drifted records nothing of it):
        // the event cannot say it is as we want, so a drift reported stays,
        // unless the object is gone.
        let judged = recorded.is_some() || live.is_none();
        let drift = match (&live, &recorded) {
            (None, Some(_)) => true,
            (Some(w), Some((_, fields))) => &w.fields != fields || self.scaled(&key, &w.value),
            _ => false,
        };
        let spec = recorded
            .map(|(s, _)| s)
            .or_else(|| live.as_ref().and_then(|w| w.spec.clone()));
        let fields = live.as_ref().map(|w| w.fields.clone());
        self.live
            .observe(key.clone(), live.map(|w| (w.value, w.fields)));
        if !drift {
            if judged {
                self.drifted.remove(&key);
            }
            return None;
        }
        if self.running.is_some() {
            // The running sync may be the writer (its own apply, its prune): what
            // it recorded is known only once it ends, and the change is judged
            // then (`judge_seen_in_sync`).
            self.seen_in_sync.insert(key, (fields, spec));
            return None;
        }
        self.on_drift(key, spec)
    }

    /// A kind's list is in: its objects the list did not bring are gone, each as a
    /// watch's delete of it would say.
    fn on_listed(&mut self, kind: crate::object::GroupKind) -> Option<Key> {
        let gone = self.live.listed(kind)?;
        let mut keys: std::collections::BTreeSet<Key> = std::collections::BTreeSet::new();
        for key in gone {
            keys.extend(self.on_object(key, None));
        }
        match keys.len() {
            0 | 1 => keys.pop_first(),
            _ => Some(Key::Full),
        }
    }

    /// Drift on `key` of `spec`: the key to sync, or for a suspended spec none, the
    /// object left drifted. Reporting only, its spec is synced too: that sync writes
    /// nothing to a drifted object, and reads it whole for the drift ledger.
    pub(super) fn on_drift(&mut self, key: ObjKey, spec: Option<SpecId>) -> Option<Key> {
        let suspended = spec
            .as_ref()
            .is_some_and(|s| self.suspensions.contains_key(&s.to_string()));
        let held = spec.as_ref().filter(|_| !self.correct_drift || suspended);
        if let Some(spec) = held {
            tracing::info!(object = %key, "drift detected; left as it is");
            self.drifted.insert(key, spec.clone());
            return (!suspended).then(|| Key::Spec(spec.clone()));
        }
        tracing::info!(object = %key, "drift detected");
        Some(spec.map(Key::Spec).unwrap_or(Key::Full))
    }

    /// Judges the changes the watches reported while the sync that just ended ran, now
    /// that what it recorded is known: its own writes and prunes are no drift; anyone
    /// else's are, and their keys are synced at once.
    pub(super) fn judge_seen_in_sync(&mut self) {
        for (key, (fields, spec)) in std::mem::take(&mut self.seen_in_sync) {
            let drift = match (&fields, self.recorded.get(&key)) {
                (None, Some(_)) => true,
                (Some(seen), Some((_, recorded))) => {
                    seen != recorded
                        || self
                            .live
                            .get(&key)
                            .is_some_and(|live| self.scaled(&key, &live.view))
                }
                _ => false,
            };
            if !drift {
                continue;
            }
            let spec = self.recorded.get(&key).map(|(s, _)| s.clone()).or(spec);
            if let Some(k) = self.on_drift(key, spec) {
                self.requeue.push(k);
            }
        }
    }

    /// The objects left drifted, as the status names them.
    pub(crate) fn drifted_objects(&self) -> std::collections::HashSet<String> {
        self.drifted.keys().map(ObjKey::to_string).collect()
    }

    /// Whether the object runs other replicas than the tree asks for: scaled through
    /// the scale subresource, which before Kubernetes 1.22 moves no field ownership.
    pub(super) fn scaled(&self, key: &ObjKey, live: &Packed) -> bool {
        let Some(want) = self.replicas_wanted.get(key) else {
            return false;
        };
        live.value()
            .pointer("/spec/replicas")
            .and_then(serde_json::Value::as_i64)
            .is_some_and(|have| have != *want)
    }

    /// The specs to sync again at once, taken (see `on_sync_done`).
    pub(crate) fn take_rechecks(&mut self) -> Vec<Key> {
        let mut keys: Vec<Key> = std::mem::take(&mut self.recheck)
            .into_iter()
            .map(Key::Spec)
            .collect();
        keys.append(&mut self.requeue);
        keys
    }

    /// How many objects of each spec were left drifted.
    pub(crate) fn drifted_by_spec(&self) -> HashMap<&SpecId, usize> {
        let mut out: HashMap<&SpecId, usize> = HashMap::new();
        for spec in self.drifted.values() {
            *out.entry(spec).or_default() += 1;
        }
        out
    }
}
