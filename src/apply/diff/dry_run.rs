//! One object's diff: what its live view decides before any dry run, the dry-run apply
//! pinned to the object as read, and the two compared as apply would meet them.

use std::ops::ControlFlow;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::{Change, ObjectDiff, clean};
use crate::apply::hash::{body_hashes, owned_fields_hash_of, shape_hash};
use crate::apply::live::Live;
use crate::apply::plan::{Planned, Shaped, pinned};
use crate::apply::{Engine, Inventory, ObjKey, managers, patch, replace, validate, without_apply};
use crate::cluster::error_text;
use crate::object::{Claim, claim, pointer};
use crate::render::Object;

/// What every object's diff reads beside its own plan and live view.
#[derive(Clone, Copy)]
pub(super) struct Shared<'a> {
    pub(super) inventory: &'a Inventory,
    /// The CRDs of this revision: what a kind not served yet may be defined by.
    pub(super) crds: &'a [&'a Object],
    /// The apiserver moves no field ownership on a scale (`patch::scale_moves_no_fields`).
    pub(super) replicas_unseen: bool,
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

/// One read of the object, and the dry run pinned to it.
struct Attempt {
    /// The object as read; `None` when it does not exist.
    live: Option<Value>,
    /// The apiserver's answer to the dry run.
    dry: Result<DynamicObject, kube::Error>,
    /// The fields other managers own (`[[ignore]]` managers), left out of the dry run.
    owned: Vec<String>,
}

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

impl Engine {
    pub(super) async fn diff_planned(
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
                        // What a create would send: the ignored fields too.
                        desired: clean(p.full.as_ref().unwrap_or(&p.body)),
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
        let tried = loop {
            attempt += 1;
            let tried = match self.read_and_dry_run(p, adopt, &api, inventory).await {
                ControlFlow::Continue(tried) => tried,
                ControlFlow::Break(change) => return change,
            };
            let moved = matches!(&tried.dry, Err(kube::Error::Api(e)) if e.code == 409 && e.message.contains("has been modified"));
            if !moved || attempt >= 5 {
                break tried;
            }
        };
        self.compared(p, tried, inventory)
    }

    /// Reads the object and dry-runs its apply pinned to the resourceVersion read; or
    /// decides its diff from the read alone (`Break`).
    async fn read_and_dry_run(
        &self,
        p: &Shaped<'_, '_>,
        adopt: bool,
        api: &Api<DynamicObject>,
        inventory: &Inventory,
    ) -> ControlFlow<Change, Attempt> {
        let key = &p.key;
        // With the hash of the fields our manager owns, as the no-op apply compares it.
        let (live, live_fields) = match api.get_opt(&key.name).await {
            Ok(o) => o
                .map(|o| {
                    let fields = owned_fields_hash_of(&o.metadata, &self.opts.field_manager);
                    (serde_json::to_value(o).unwrap_or(Value::Null), fields)
                })
                .unzip(),
            Err(e) => {
                return ControlFlow::Break(Change::Error(format!(
                    "reading it: {}",
                    error_text(&e)
                )));
            }
        };
        // A Job its TTL removed after it ran this intent: apply leaves it gone.
        if live.is_none()
            && !p.obj.policy.sealed
            && inventory.entries.get(key).is_some_and(|e| {
                crate::apply::removed_by_its_ttl(p, e)
                    && e.applied.as_deref() == Some(body_hashes(&p.body, None).applied.as_str())
            })
        {
            return ControlFlow::Break(Change::Unchanged);
        }
        // Fields another manager owns (`[[ignore]]` managers) are left out, as apply
        // leaves them.
        let owned = match (&live, p.obj.policy.ignore_managers.is_empty()) {
            (Some(l), false) => managers::owned_by(l, &p.obj.policy.ignore_managers, &p.body),
            _ => Vec::new(),
        };
        let stripped = managers::without(&p.body, &owned);
        let (body, claimed, drifted): (&Value, _, _) = match (&live, live_fields.as_deref()) {
            (Some(l), Some(fields)) => {
                let stripped = stripped.as_ref();
                match self
                    .before_dry_run(p, adopt, stripped, l, fields, inventory)
                    .await
                {
                    Before::Decided(change) => return ControlFlow::Break(change),
                    Before::DryRun { claimed, drifted } => (stripped, Some(claimed), drifted),
                }
            }
            // What a create would send: the ignored fields too.
            _ => (p.full.as_ref().unwrap_or(&p.body), None, false),
        };
        // A new revision of an object whose drift is only reported takes its fields
        // back, as apply does.
        let retaken = claimed == Some(Claim::Ours) && p.obj.policy.report_drift;
        let force =
            self.opts.force_conflicts || claimed == Some(Claim::Adopt) || drifted || retaken;
        let version = live
            .as_ref()
            .and_then(|l| l["metadata"]["resourceVersion"].as_str());
        let pinned = pinned(body, version);
        let dry = self
            .dry_apply(api, key, &pinned, live.as_ref(), force)
            .await;
        ControlFlow::Continue(Attempt { live, dry, owned })
    }

    /// The dry run of `pinned`'s apply, as apply would write it.
    pub(in crate::apply) async fn dry_apply(
        &self,
        api: &Api<DynamicObject>,
        key: &ObjKey,
        pinned: &Value,
        live: Option<&Value>,
        force: bool,
    ) -> Result<DynamicObject, kube::Error> {
        let pp = PatchParams {
            force,
            ..crate::apply::apply_params(&self.opts.field_manager).dry_run()
        };
        let dry = if self.without_apply(key).await {
            self.write_without_apply(api, &key.name, pinned, live.is_some(), true)
                .await
        } else {
            api.patch(&key.name, &pp, &Patch::Apply(pinned)).await
        };
        // What apply does where the apiserver cannot apply an emptied map
        // (`without_apply`): empty it, then apply; dry-run as one merge patch.
        match (live, dry) {
            (Some(l), Err(e)) if self.emptied_map_refused(&e) => {
                match without_apply::emptying_patch(pinned, l) {
                    Some(patch) => {
                        let mp = PatchParams {
                            field_manager: Some(self.opts.field_manager.clone()),
                            dry_run: true,
                            ..PatchParams::default()
                        };
                        let merge = without_apply::merged(pinned, &patch);
                        api.patch(&key.name, &mp, &Patch::Merge(&merge)).await
                    }
                    None => Err(e),
                }
            }
            (_, dry) => dry,
        }
    }

    /// The change the read and the dry run show: what apply would do, or the refusal it
    /// would meet.
    fn compared(&self, p: &Shaped<'_, '_>, tried: Attempt, inventory: &Inventory) -> Change {
        let Attempt { live, dry, owned } = tried;
        let key = &p.key;
        // What a create would send: the ignored fields too.
        let body: &Value = p.full.as_ref().unwrap_or(&p.body);
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
            (None, Err(e)) => Change::Error(validate::refusal_text(p, &e)),
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
            (Some(l), Err(e)) if replace::immutable_fields(&e).is_some() => {
                let fields = replace::immutable_fields(&e).unwrap_or_default();
                match replace::allowed(key, &p.obj.policy, &self.opts) {
                    true => Change::Replace {
                        live: clean(&l),
                        desired: clean(body),
                        immutable: fields,
                    },
                    false => Change::Error(replace::refusal(key, &fields, &error_text(&e))),
                }
            }
            (Some(_), Err(kube::Error::Api(e))) if e.code == 409 => Change::Error(format!(
                "conflict with another field manager (--force-conflicts takes the fields): {}",
                e.message
            )),
            (Some(_), Err(e)) => Change::Error(validate::refusal_text(p, &e)),
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
            .filter(|e| claimed == Claim::Ours && patch::is_recorded(e, live));
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
            && patch::left_as_applied(e, drifted, body, live, fields)
        {
            return Before::Decided(Change::Unchanged);
        }
        Before::DryRun { claimed, drifted }
    }
}
