//! Diff: what `apply` would change, object by object. The desired side is the
//! apiserver's own answer to a server-side dry-run apply with our field manager, so
//! defaults and normalisation appear on both sides and only real changes show.
//! How a diff is shown (text, markdown for a pull request, JSON) is `present` and
//! `markdown`: pure functions of the `ObjectDiff`s found here. `preview` finds them with no
//! cluster, between two revisions' renders (`diff --base`).

mod markdown;
mod present;
pub mod preview;

pub use markdown::{MARKDOWN_LIMIT, markdown};
pub use present::{
    DiffAction, Shown, Sides, Summary, json, mask_secrets, render_change, render_change_between,
    shown, shown_between, text, unified, unified_between,
};

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::hash::shape_hash;
use super::live::{Listed, Live};
use super::plan::{Planned, Shaped};
use super::prune::{self, Prunable};
use super::{ApplyError, Engine, Entry, Inventory, ObjKey};
use crate::cluster::error_text;
use crate::object::{Claim, claim, pointer};
use crate::render::Object;
use crate::spec::{SpecId, TreeFacts};

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

/// What every object's diff reads beside its own plan and live view.
#[derive(Clone, Copy)]
struct Shared<'a> {
    inventory: &'a Inventory,
    /// The CRDs of this revision: what a kind not served yet may be defined by.
    crds: &'a [&'a Object],
    /// The apiserver moves no field ownership on a scale (`patch::scale_moves_no_fields`).
    replicas_unseen: bool,
}

/// What an existing object's live view decides of its diff before a dry run.
enum Before {
    /// Decided: no dry run.
    Decided(Change),
    /// To be dry-run, as `claimed`; `drifted`: our intent is the one last applied to this
    /// very object, so only someone else's edit can have moved our fields (and apply
    /// takes them back, forcing).
    DryRun { claimed: Claim, drifted: bool },
}

#[derive(Debug, Clone)]
pub struct ObjectDiff {
    pub key: ObjKey,
    pub spec: String,
    pub change: Change,
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether a dry-run create refused with `e` still shows as a create: the namespace is
/// missing (apply creates namespaces first), or RBAC forbids the diff identity to create,
/// not an admission check.
fn creatable_anyway(e: &kube::Error) -> bool {
    let kube::Error::Api(s) = e else {
        return false;
    };
    let missing_namespace =
        s.code == 404 && s.details.as_ref().is_some_and(|d| d.kind == "namespaces");
    // RBAC says `User "ci" cannot create resource ...`; the check a server-side apply that
    // would create makes says nothing after `is forbidden:`. An admission refusal (a
    // webhook's denial, PodSecurity's `violates ...`) says why, and is an error.
    let rbac = s.code == 403
        && ((s.message.contains(" cannot ") && s.message.contains(" resource "))
            || s.message.trim_end().ends_with("is forbidden:"));
    missing_namespace || rbac
}

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
    pub async fn diff_objects(
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

    async fn diff_planned(
        &self,
        i: usize,
        p: &Planned<'_>,
        listed: Option<Live>,
        shared: Shared<'_>,
        hooks_due: bool,
    ) -> (usize, ObjectDiff) {
        let change = match (&p.obj.policy.hook, hooks_due) {
            (None, _) => self.diff_one(p, listed, shared).await,
            // Runs only if the sync fails: not what apply is expected to do.
            (Some(h), _) if h.phases == [crate::spec::order::Phase::Fail] => Change::Unchanged,
            (Some(_), true) => {
                let p = p.shaped();
                Change::Create {
                    desired: clean(p.full.as_ref().unwrap_or(&p.body)),
                }
            }
            (Some(_), false) => Change::Unchanged,
        };
        let mut diff = ObjectDiff {
            key: p.key.clone(),
            spec: p.obj.spec.to_string(),
            change,
        };
        if p.obj.policy.sealed {
            diff.seal(&p.obj.body.value());
        }
        (i, diff)
    }

    async fn diff_one(&self, p: &Planned<'_>, listed: Option<Live>, shared: Shared<'_>) -> Change {
        let Shared {
            inventory, crds, ..
        } = shared;
        let (key, adopt) = (&p.key, p.adopt);
        let p = &p.shaped();
        // What a create would send: the ignored fields too.
        let body: &Value = p.full.as_ref().unwrap_or(&p.body);
        let resolved = match &p.resolved {
            Ok(r) => r,
            Err(e) => {
                // Its CRD is in this revision: it will be created after the CRD.
                let defined_here = crds.iter().any(|c| {
                    let c = c.body.value();
                    c["spec"]["group"].as_str() == Some(key.group.as_str())
                        && c["spec"]["names"]["kind"].as_str() == Some(key.kind.as_str())
                });
                return if defined_here {
                    Change::Create {
                        desired: clean(body),
                    }
                } else {
                    Change::Error(e.clone())
                };
            }
        };
        // Listed, as the no-op apply reads it: what that apply leaves alone is unchanged,
        // decided by the same rule from the same metadata, with no read and no dry run.
        // Anything else is read and dry-run below, as if it had not been listed. Fields
        // other managers own (`[[ignore]]` managers) are named only by the whole object,
        // which apply reads too; and where a scale moves no field ownership (before
        // Kubernetes 1.22) only the whole object shows replicas changed, which apply's
        // watches see but a diff has none of.
        if let Some(listed) = &listed
            && p.obj.policy.ignore_managers.is_empty()
            && !(shared.replicas_unseen && p.body.pointer("/spec/replicas").is_some())
            && let Before::Decided(Change::Unchanged) = self
                .before_dry_run(p, adopt, &p.body, &listed.value, &listed.fields, inventory)
                .await
        {
            return Change::Unchanged;
        }
        let api = resolved.api(
            &self.client,
            (!key.namespace.is_empty()).then_some(key.namespace.as_str()),
        );
        // Live and dry-run must describe the same moment: the dry-run is pinned to the
        // resourceVersion read, and a controller's update in between (a Deployment's
        // revision annotation, say) means reading again, not a spurious difference.
        let mut attempt = 0;
        let mut owned: Vec<String>;
        let mut stripped: std::borrow::Cow<'_, Value>;
        let (live, dry) = loop {
            attempt += 1;
            // With the hash of the fields our manager owns, as the no-op apply compares it.
            let (live, live_fields) = match api.get_opt(&key.name).await {
                Ok(o) => o
                    .map(|o| {
                        let fields = super::hash::owned_fields_hash_of(
                            &o.metadata,
                            &self.opts.field_manager,
                        );
                        (serde_json::to_value(o).unwrap_or(Value::Null), fields)
                    })
                    .unzip(),
                Err(e) => return Change::Error(format!("reading it: {}", error_text(&e))),
            };
            // A Job its TTL removed after it ran this intent: apply leaves it gone.
            if live.is_none()
                && !p.obj.policy.sealed
                && inventory.entries.get(key).is_some_and(|e| {
                    super::removed_by_its_ttl(p, e)
                        && e.applied.as_deref()
                            == Some(super::hash::body_hashes(&p.body, None).applied.as_str())
                })
            {
                return Change::Unchanged;
            }
            // Fields another manager owns (`[[ignore]]` managers) are left out, as apply
            // leaves them.
            owned = match (&live, p.obj.policy.ignore_managers.is_empty()) {
                (Some(l), false) => {
                    super::managers::owned_by(l, &p.obj.policy.ignore_managers, &p.body)
                }
                _ => Vec::new(),
            };
            stripped = super::managers::without(&p.body, &owned);
            let (body, claimed, drifted): (&Value, _, _) = match (&live, live_fields.as_deref()) {
                (Some(l), Some(fields)) => {
                    let stripped = stripped.as_ref();
                    match self
                        .before_dry_run(p, adopt, stripped, l, fields, inventory)
                        .await
                    {
                        Before::Decided(change) => return change,
                        Before::DryRun { claimed, drifted } => (stripped, Some(claimed), drifted),
                    }
                }
                _ => (body, None, false),
            };
            // A new revision of an object whose drift is only reported takes its fields
            // back, as apply does.
            let retaken = claimed == Some(Claim::Ours) && p.obj.policy.report_drift;
            let force =
                self.opts.force_conflicts || claimed == Some(Claim::Adopt) || drifted || retaken;
            let pp = PatchParams {
                force,
                ..crate::apply::apply_params(&self.opts.field_manager).dry_run()
            };
            let mut pinned = body.clone();
            if let Some(rv) = live
                .as_ref()
                .and_then(|l| l["metadata"]["resourceVersion"].as_str())
                && let Some(meta) = pinned.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.insert("resourceVersion".into(), rv.into());
            }
            let dry = if self.without_apply(key).await {
                self.write_without_apply(&api, &key.name, &pinned, live.is_some(), true)
                    .await
            } else {
                api.patch(&key.name, &pp, &Patch::Apply(&pinned)).await
            };
            // What apply does where the apiserver cannot apply an emptied map
            // (`without_apply`): empty it, then apply; dry-run as one merge patch.
            let dry = match (&live, dry) {
                (Some(l), Err(e)) if self.emptied_map_refused(&e) => {
                    match super::without_apply::emptying_patch(&pinned, l) {
                        Some(patch) => {
                            let mp = PatchParams {
                                field_manager: Some(self.opts.field_manager.clone()),
                                dry_run: true,
                                ..PatchParams::default()
                            };
                            let merge = super::without_apply::merged(&pinned, &patch);
                            api.patch(&key.name, &mp, &Patch::Merge(&merge)).await
                        }
                        None => Err(e),
                    }
                }
                (_, dry) => dry,
            };
            let moved = matches!(&dry, Err(kube::Error::Api(e)) if e.code == 409 && e.message.contains("has been modified"));
            if !moved || attempt >= 5 {
                break (live, dry);
            }
        };
        let is_pod = key.is("", "Pod");
        match (live, dry) {
            (None, Ok(d)) => Change::Create {
                desired: clean(&serde_json::to_value(d).unwrap_or(Value::Null)),
            },
            // Its namespace does not exist yet: apply creates it first. RBAC's 403: a diff
            // identity without `create` (the CI role in examples/kubernetes/addons/
            // rbac-ci-diff.yaml) is shown what apply would create.
            (None, Err(e)) if creatable_anyway(&e) => Change::Create {
                desired: clean(body),
            },
            // Any other refusal (a 400, a 422, a 1.20 apiserver's 500 on a type error, a
            // webhook's denial) is what apply would meet: an error here, so that a CI
            // gate on `diff` fails where apply would.
            (None, Err(e)) => Change::Error(super::validate::refusal_text(p, &e)),
            (Some(l), Ok(d)) => {
                let mut d = serde_json::to_value(d).unwrap_or(Value::Null);
                // Apply lets go of ignored fields before it leaves them out: they stay as
                // they are, though a dry-run of the body without them removes what our
                // manager still owns.
                for ptr in p.obj.policy.ignore_fields.iter().chain(&owned) {
                    match l.pointer(ptr) {
                        Some(v) => drop(pointer::set(&mut d, ptr, v.clone())),
                        None => drop(pointer::remove(&mut d, ptr)),
                    }
                }
                let (l, d) = (clean(&l), clean(&d));
                let shape_changed = is_pod
                    && inventory
                        .entries
                        .get(key)
                        .and_then(|e| e.shape.clone())
                        .is_some_and(|s| s != shape_hash(&p.body));
                if shape_changed {
                    Change::Replace {
                        live: l,
                        desired: clean(body),
                        immutable: Vec::new(),
                    }
                } else if l == d {
                    Change::Unchanged
                } else {
                    Change::Update {
                        live: l,
                        desired: d,
                    }
                }
            }
            (Some(l), Err(kube::Error::Api(e))) if e.code == 422 && is_pod => Change::Replace {
                live: clean(&l),
                desired: clean(body),
                immutable: Vec::new(),
            },
            // Refused only for immutable fields: apply replaces it where its policy says
            // so, and fails as the apiserver says otherwise.
            (Some(l), Err(e)) if super::replace::immutable_fields(&e).is_some() => {
                let fields = super::replace::immutable_fields(&e).unwrap_or_default();
                match super::replace::allowed(key, &p.obj.policy, &self.opts) {
                    true => Change::Replace {
                        live: clean(&l),
                        desired: clean(body),
                        immutable: fields,
                    },
                    false => Change::Error(super::replace::refusal(key, &fields, &error_text(&e))),
                }
            }
            (Some(_), Err(kube::Error::Api(e))) if e.code == 409 => Change::Error(format!(
                "conflict with another field manager (--force-conflicts takes the fields): {}",
                e.message
            )),
            (Some(_), Err(e)) => Change::Error(super::validate::refusal_text(p, &e)),
        }
    }

    /// What an existing object's live view (`live`, whose fields our manager owns hash to
    /// `fields`) decides of its diff before any dry run: the listed metadata's, or the
    /// object read whole. `body` is our intent less what other managers own.
    async fn before_dry_run(
        &self,
        p: &Shaped<'_, '_>,
        adopt: bool,
        body: &Value,
        live: &Value,
        fields: &str,
        inventory: &Inventory,
    ) -> Before {
        let claimed = match claim(live, &self.opts.instance, adopt) {
            Err(refusal) => return Before::Decided(Change::Error(format!("conflict: {refusal}"))),
            // Created once, never updated: nothing apply would change.
            Ok(_) if p.obj.policy.create_only => return Before::Decided(Change::Unchanged),
            Ok(c) => c,
        };
        // Our last applied intent, unchanged, on the object we applied it to: only
        // someone else's edit moved our fields, and apply takes them back (forcing), so
        // it shows as the change it is, not as a conflict with that writer.
        let recorded = inventory
            .entries
            .get(&p.key)
            .filter(|e| claimed == Claim::Ours && super::patch::is_recorded(e, live));
        let drifted = match recorded {
            Some(e) => self.applied_as(e, &p.key, p.obj.policy.sealed, body).await,
            None => false,
        };
        // Left drifted by apply: nothing it would change.
        if drifted && p.obj.policy.report_drift {
            return Before::Decided(Change::Unchanged);
        }
        // What the no-op apply writes nothing for (its own rule) has nothing to dry-run:
        // only what may have changed costs the apiserver a dry run.
        if let Some(e) = recorded
            && super::patch::left_as_applied(e, drifted, body, live, fields)
        {
            return Before::Decided(Change::Unchanged);
        }
        Before::DryRun { claimed, drifted }
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
