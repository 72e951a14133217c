//! Diff: what `apply` would change, object by object. The desired side is the
//! apiserver's own answer to a server-side dry-run apply with our field manager, so
//! defaults and normalisation appear on both sides and only real changes show
//! (`dry_run`: one object's read, its dry run, the two compared).
//! How a diff is shown (text, markdown for a pull request, JSON) is `present` and
//! `markdown`: pure functions of the `ObjectDiff`s found here. `preview` finds them with no
//! cluster, between two revisions' renders (`diff --base`).

mod dry_run;
mod markdown;
mod present;
pub mod preview;

pub use markdown::markdown;
pub(crate) use present::mask_secrets;
pub use present::{DiffAction, Sides, Summary, json, render_change, shown, text, unified};

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt;
use serde_json::Value;

use super::live::Listed;
use super::plan::Planned;
use super::prune::{self, Prunable};
use super::{ApplyError, Engine, Entry, ObjKey};
use crate::render::Object;
use crate::spec::{SpecId, TreeFacts};
use dry_run::Shared;

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Unchanged,
    Create {
        desired: Value,
    },
    Update {
        live: Value,
        desired: Value,
    },
    /// The change cannot be made in place: apply deletes and recreates the object.
    Replace {
        live: Value,
        desired: Value,
        /// The immutable fields the apiserver named (none for a Pod's changed shape).
        immutable: Vec<String>,
    },
    /// Prune would delete it.
    Delete {
        live: Value,
    },
    Error(String),
}

#[derive(Debug, Clone)]
pub struct ObjectDiff {
    pub key: ObjKey,
    pub spec: String,
    pub change: Change,
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what the server owns or changes on every write, so equal objects compare equal.
pub fn clean(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "managedFields",
                "resourceVersion",
                "generation",
                "uid",
                "creationTimestamp",
                "selfLink",
            ] {
                meta.remove(k);
            }
            let empty = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
                Some(a) => {
                    a.remove(LAST_APPLIED);
                    a.is_empty()
                }
                None => false,
            };
            if empty {
                meta.remove("annotations");
            }
        }
    }
    v
}

impl Engine {
    /// The change apply would make to every object, and what prune would delete; an
    /// object decrypted from a SOPS file (now, or when it was recorded) sealed.
    pub async fn diff(
        &self,
        objects: &[Object],
        facts: &TreeFacts,
    ) -> Result<Vec<ObjectDiff>, ApplyError> {
        let prune = self.opts.prune.enabled.then_some(facts);
        self.diff_with(objects, &facts.adopt, prune, true).await
    }

    /// The change apply would make to these objects only, none pruned: what a person
    /// looking at one object (the web UI's object view) asks.
    pub(crate) async fn diff_objects(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
    ) -> Result<Vec<ObjectDiff>, ApplyError> {
        self.diff_with(objects, adopt_specs, None, false).await
    }

    async fn diff_with(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
        // The revision's apps when prune is on (`prune::plan`).
        prune: Option<&TreeFacts>,
        // Whether to list ours kind by kind first (`listed`): a whole tree's diff. A
        // list would read every object of this instance of the kind, more than the one
        // object the web UI's view asks about.
        whole: bool,
    ) -> Result<Vec<ObjectDiff>, ApplyError> {
        let inventory = self.store().load(&self.client).await?;
        let mut planned = self.plan(objects, adopt_specs).await;
        let mut desired: BTreeSet<ObjKey> = planned.iter().map(|p| p.key.clone()).collect();
        // What a held app applied stays as it is: no prune to show.
        if let Some(facts) = prune.filter(|f| !f.held_apps.is_empty() || f.hold_departed) {
            let present: BTreeSet<String> = objects.iter().map(|o| o.spec.to_string()).collect();
            desired.extend(
                inventory
                    .entries
                    .values()
                    .filter(|e| facts.holds(e.app.as_deref()) && !present.contains(&e.spec))
                    .map(|e| e.key.clone()),
            );
        }
        // A hook is a run: shown as created when the revision runs hooks, else not at all
        // (its last run may be gone, deleted once it succeeded); a hook driftless does
        // not run never.
        planned.retain(|p| !p.obj.policy.never_applied());
        let hooks_due = self.hooks_due(&planned, &inventory).await;
        let in_revision_crds: Vec<&Object> = objects
            .iter()
            .filter(|o| o.kind == "CustomResourceDefinition")
            .collect();
        let mut listed = match whole {
            true => self.listed(&planned).await,
            false => HashMap::new(),
        };
        let replicas_unseen = super::patch::scale_moves_no_fields(self.server_version().await);

        // The futures are made before the stream: a closure returning an async block
        // over borrowed plans is not provably `Send` for every lifetime, and the web UI's
        // object view runs a diff inside a boxed `Send` future.
        let futures: Vec<_> = planned
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let listed = listed.remove(&p.key).map(Listed::unpack);
                let shared = Shared {
                    inventory: &inventory,
                    crds: &in_revision_crds,
                    replicas_unseen,
                };
                self.diff_planned(i, p, listed, shared, hooks_due)
            })
            .collect();
        let mut out: Vec<(usize, ObjectDiff)> = futures::stream::iter(futures)
            .buffer_unordered(self.opts.concurrency.max(1))
            .collect()
            .await;
        out.sort_by_key(|(i, _)| *i);
        let mut diffs: Vec<ObjectDiff> = out.into_iter().map(|(_, d)| d).collect();

        if let Some(facts) = prune {
            let plan = prune::plan(&inventory, &desired, &self.opts.prune, &facts.apps);
            if let Some(why) = &plan.refused {
                diffs.push(ObjectDiff {
                    key: ObjKey {
                        group: String::new(),
                        kind: "Prune".into(),
                        namespace: String::new(),
                        name: "guard".into(),
                    },
                    spec: String::new(),
                    change: Change::Error(format!(
                        "prune refused for instance {:?}: {why}; it would prune {}",
                        self.opts.instance,
                        prune::listed(&plan.candidates)
                    )),
                });
            } else {
                for entry in &plan.candidates {
                    if let Some(live) = self.live_if_prunable(entry).await {
                        let mut diff = ObjectDiff {
                            key: entry.key.clone(),
                            spec: entry.spec.clone(),
                            change: Change::Delete { live: clean(&live) },
                        };
                        if entry.sealed {
                            diff.seal(&Value::Null);
                        }
                        diffs.push(diff);
                    }
                }
            }
        }
        Ok(diffs)
    }

    /// Ours among the kinds of `planned`, by key: one list per kind, metadata only, as a
    /// no-op sync reads them. A diff of an unchanged tree that read each object instead
    /// took 24 times the no-op apply's time at 1,000 specs (bench/results/
    /// 2026-12-02-n1000-k8s-1.37-diff.md). What is not listed (a kind this identity may
    /// not list, or whose list failed; an object not ours) is read one by one, as before.
    async fn listed(&self, planned: &[Planned<'_>]) -> HashMap<ObjKey, Listed> {
        match self.list_owned(planned, false, 1, &BTreeSet::new()).await {
            Ok((listed, forbidden)) => {
                for what in forbidden.keys() {
                    tracing::debug!(kind = %what, "may not list this kind: its objects are read one by one");
                }
                listed
            }
            Err(e) => {
                tracing::debug!(error = %e, "listing ours failed: every object is read one by one");
                HashMap::new()
            }
        }
    }

    /// The live object prune would delete for `entry`, if it would delete one.
    async fn live_if_prunable(&self, entry: &Entry) -> Option<Value> {
        match self.prunable(entry).await {
            Ok(Prunable::Delete { live, .. }) => Some(live),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clean_drops_server_fields_and_last_applied() {
        let v = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "uid": "u", "resourceVersion": "5", "generation": 2, "creationTimestamp": "t",
                         "managedFields": [{}], "annotations": {LAST_APPLIED: "{}"}, "labels": {"a": "b"}},
            "data": {"k": "v"}, "status": {"x": 1},
        });
        assert_eq!(
            clean(&v),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v"}})
        );
    }
}
