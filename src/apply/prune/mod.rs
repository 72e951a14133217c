//! Prune: delete what left the specs, only while it is provably ours.
//!
//! `plan` is pure (`plan.rs`: inventory + desired set → candidates, or a refusal); the
//! engine's `prune` does the I/O. An object is deleted only if it still carries this
//! instance's ownership labels and its UID is the one recorded (a pending record matches
//! by labels alone); the delete itself is preconditioned on that UID.
//!
//! A Namespace is pruned only when the tree declared it (a manifest: bundles ship their
//! own, and uninstalling one leaves nothing of it, as Flux, Argo CD and kapp do it),
//! after everything else; the namespaces driftless creates for specs that need one never
//! enter the inventory, so they are never pruned (`namespaces`).
//!
//! A DELETE is not the end of an object: one with a finalizer (or a grace period) stays,
//! with a deletionTimestamp, until its controller lets go, and a CRD stays until its
//! custom resources are gone. Such an object is "being deleted": its entry stays in the
//! inventory, marked (`Entry::deleting`), so it is never forgotten while it exists; it is
//! not deleted again, not counted against a later prune's share, and every sync (refused
//! or not) reads it again until the apiserver says it is gone (404), then drops it.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde_json::Value;

use super::{Engine, Entry, Inventory, ObjKey, Verb, resolve};
use crate::cluster::error_text;
use crate::object::{Refusal, claim};

mod plan;

pub(crate) use plan::Plan;
pub use plan::{listed, plan};

#[derive(Debug, Clone)]
pub struct Options {
    pub enabled: bool,
    /// Refuse a revision that would delete more than this share of the inventory.
    pub max_ratio: f64,
    /// Lift both guards (`--allow-mass-prune`).
    pub allow_mass: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            enabled: true,
            max_ratio: 0.5,
            allow_mass: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PruneAction {
    /// Deleted by this sync (the apiserver accepted the DELETE). It may still be there,
    /// being deleted: see `Outcome::waiting`.
    Pruned,
    /// Found being deleted (by an earlier prune, or by someone else): not deleted again,
    /// waited for (`Outcome::waiting` says on what).
    Deleting,
    AlreadyGone,
    /// Its spec said `prune: disabled`: left in the cluster, dropped from the inventory.
    Kept,
    /// No longer ours (labels or UID changed): forgotten, not deleted.
    LeftAlone(String),
    Failed(String),
}

/// As the CLI, the status and the logs say it.
impl std::fmt::Display for PruneAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PruneAction::Pruned => f.write_str("pruned"),
            PruneAction::Deleting => f.write_str("not deleted again"),
            PruneAction::AlreadyGone => f.write_str("already gone"),
            PruneAction::Kept => f.write_str("kept (prune: disabled), no longer tracked"),
            PruneAction::LeftAlone(why) => write!(f, "left alone: {why}"),
            PruneAction::Failed(e) => write!(f, "prune failed: {e}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub key: ObjKey,
    pub spec: String,
    pub action: PruneAction,
    /// Still there after this sync, being deleted: what it waits for (its finalizers, or
    /// a grace period). Its entry stays in the inventory and the next sync checks again;
    /// not an error.
    pub waiting: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub refused: Option<String>,
    pub objects: Vec<Outcome>,
    /// `--no-prune`.
    pub disabled: bool,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.refused.is_none()
            && !self
                .objects
                .iter()
                .any(|o| matches!(o.action, PruneAction::Failed(_)))
    }

    pub fn pruned(&self) -> usize {
        self.objects
            .iter()
            .filter(|o| o.action == PruneAction::Pruned)
            .count()
    }

    /// The objects still being deleted after this sync: a later sync must look again.
    pub fn waiting(&self) -> impl Iterator<Item = &Outcome> {
        self.objects.iter().filter(|o| o.waiting.is_some())
    }
}

/// What an inventoried object that left the specs is, to prune (and to `diff`).
pub(super) enum Prunable {
    /// Still ours, with the recorded UID: delete it through `api`.
    Delete {
        api: Box<Api<DynamicObject>>,
        live: Value,
    },
    /// Gone already (or its kind is: the CRD was deleted, and every object with it).
    Gone,
    /// Ours, and being deleted already: what it waits for; and, for a CRD whose cleanup
    /// stalled ([`stalled_cleanup`]), where to nudge it.
    Deleting {
        on: String,
        stalled: Option<Box<Api<DynamicObject>>>,
    },
    /// Never pruned, or no longer ours: forgotten, not deleted.
    Keep(PruneAction),
}

impl Engine {
    /// Deletes the plan's candidates, removing from `inv` every entry that is settled
    /// (gone, or forgotten); one still being deleted stays, marked `deleting`. What an
    /// earlier prune left being deleted is read again even when this one is refused.
    pub(super) async fn prune(&self, plan: &Plan, inv: &mut Inventory) -> Report {
        let mut objects = Vec::with_capacity(plan.candidates.len() + plan.deleting.len());
        let deletes = match &plan.refused {
            Some(why) => {
                tracing::warn!(reason = %why, "prune refused");
                &[][..]
            }
            None => &plan.candidates[..],
        };
        for entry in deletes.iter().chain(&plan.deleting) {
            let (action, waiting) = self.prune_one(entry).await;
            match (&action, &waiting) {
                (PruneAction::Failed(e), _) => {
                    tracing::warn!(object = %entry.key, error = %e, "prune failed")
                }
                (_, Some(on)) => {
                    tracing::info!(object = %entry.key, outcome = %action, waiting = %on, "being deleted");
                    if let Some(e) = inv.entries.get_mut(&entry.key) {
                        e.deleting = true;
                    }
                }
                (PruneAction::Pruned, None) => {
                    tracing::info!(object = %entry.key, spec = %entry.spec, "pruned")
                }
                (other, None) => {
                    tracing::info!(object = %entry.key, outcome = %other, "not pruned")
                }
            }
            if waiting.is_none() && !matches!(action, PruneAction::Failed(_)) {
                inv.entries.remove(&entry.key);
            }
            objects.push(Outcome {
                key: entry.key.clone(),
                spec: entry.spec.clone(),
                action,
                waiting,
            });
        }
        Report {
            refused: plan.refused.clone(),
            objects,
            disabled: false,
        }
    }

    /// The one decision whether an inventoried object may be deleted, shared by prune and
    /// `diff`'s preview of it.
    pub(super) async fn prunable(&self, entry: &Entry) -> Result<Prunable, String> {
        if entry.keep {
            return Ok(Prunable::Keep(PruneAction::Kept));
        }
        let resolved = match self
            .resolver
            .resolve(&entry.api_version(), &entry.key.kind)
            .await
        {
            Ok(r) => r,
            Err(e) if resolve::is_not_served(&e) => return Ok(Prunable::Gone),
            Err(e) => return Err(error_text(&e)),
        };
        let ns = (!entry.key.namespace.is_empty()).then_some(entry.key.namespace.as_str());
        let api = resolved.api(&self.client, ns);
        let live = match api.get_opt(&entry.key.name).await {
            Ok(Some(o)) => serde_json::to_value(o).unwrap_or(Value::Null),
            Ok(None) => return Ok(Prunable::Gone),
            // kube maps only a Status of reason NotFound to `None`; when the CRD went after
            // discovery was cached, the path itself is unknown ("404 page not found"), and
            // so is every object of that kind.
            Err(e) if resolve::is_not_served(&e) => return Ok(Prunable::Gone),
            Err(e) => return Err(error_text(&e)),
        };
        Ok(match not_ours(entry, &live, &self.opts.instance) {
            Some(why) => Prunable::Keep(PruneAction::LeftAlone(why)),
            None => match waiting_on(&live) {
                Some(on) => Prunable::Deleting {
                    on,
                    stalled: stalled_cleanup(&live, k8s_openapi::jiff::Timestamp::now())
                        .then(|| Box::new(api)),
                },
                // Ours, not being deleted, though a DELETE was accepted for this entry
                // (its UID was unknown: a pending record): a new object of that name,
                // which this entry never stood for.
                None if entry.deleting => Prunable::Keep(PruneAction::LeftAlone(
                    "a new object of that name, not the one being deleted".into(),
                )),
                None => Prunable::Delete {
                    api: Box::new(api),
                    live,
                },
            },
        })
    }

    /// Touches a CRD whose cleanup stalled, so the apiserver's finalizer takes it up again
    /// now rather than at its next resync (up to five minutes on).
    async fn nudge(&self, api: &Api<DynamicObject>, name: &str) {
        let patch = serde_json::json!({"metadata": {"annotations": {
            CLEANUP_RETRY: k8s_openapi::jiff::Timestamp::now().to_string(),
        }}});
        self.writes.count(Verb::Patch);
        let result = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match result {
            Ok(_) => tracing::info!(object = %name, "nudged the apiserver's stalled CRD cleanup"),
            // The cleanup finished between the read and the touch: what the nudge was for.
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::debug!(object = %name, "a stalled CRD's cleanup ended before its nudge")
            }
            Err(e) => {
                tracing::warn!(object = %name, error = %error_text(&e), "nudging a stalled CRD cleanup failed")
            }
        }
    }

    /// One entry's prune, and what the object still waits for if it is still there.
    async fn prune_one(&self, entry: &Entry) -> (PruneAction, Option<String>) {
        let (api, live) = match self.prunable(entry).await {
            Ok(Prunable::Delete { api, live }) => (api, live),
            Ok(Prunable::Gone) => return (PruneAction::AlreadyGone, None),
            Ok(Prunable::Deleting { on, stalled }) => {
                if let Some(api) = stalled {
                    self.nudge(&api, &entry.key.name).await;
                }
                return (PruneAction::Deleting, Some(on));
            }
            Ok(Prunable::Keep(action)) => return (action, None),
            Err(e) => return (PruneAction::Failed(e), None),
        };
        if let Some(account) = &entry.account
            && let Err(why) = self.may_delete(account, entry).await
        {
            return (PruneAction::Failed(why), None);
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: live["metadata"]["uid"].as_str().map(str::to_string),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.writes.count(Verb::Delete);
        match api.delete(&entry.key.name, &dp).await {
            // The object comes back when it is not gone yet (a finalizer, a grace
            // period); some kinds also return what they deleted at once, without a
            // deletionTimestamp.
            Ok(answer) => {
                let after = answer.left().map(serde_json::to_value);
                (
                    PruneAction::Pruned,
                    after.and_then(Result::ok).as_ref().and_then(waiting_on),
                )
            }
            Err(kube::Error::Api(e)) if e.code == 404 => (PruneAction::AlreadyGone, None),
            // The UID precondition failed: it was replaced by someone else's object.
            Err(kube::Error::Api(e)) if e.code == 409 => (
                PruneAction::LeftAlone(format!("replaced meanwhile: {}", e.message)),
                None,
            ),
            Err(e) => (PruneAction::Failed(error_text(&e)), None),
        }
    }
}

/// When driftless last nudged a CRD's stalled cleanup (RFC 3339).
const CLEANUP_RETRY: &str = "driftless.dev/cleanup-retry";

/// Whether `live` is a CRD being deleted whose cleanup finalizer failed its last try and
/// was not nudged in the last 5 seconds. The apiserver's finalizer can list the custom
/// resources while their storage is still starting ("storage is (re)initializing"); it
/// then leaves the CRD Terminating until its informer's next resync, up to five minutes
/// on (seen on 1.34 and 1.37), while any other change to the CRD takes it up at once.
fn stalled_cleanup(live: &Value, now: k8s_openapi::jiff::Timestamp) -> bool {
    let failed = live["kind"] == "CustomResourceDefinition"
        && live["metadata"]["deletionTimestamp"].is_string()
        && live["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Terminating" && c["reason"] == "InstanceDeletionFailed");
    let last = live["metadata"]["annotations"][CLEANUP_RETRY]
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
    failed
        && last.is_none_or(|t| {
            now.duration_since(t) >= k8s_openapi::jiff::SignedDuration::from_secs(5)
        })
}

/// What an object being deleted (deletionTimestamp set) still waits for; `None` when it
/// is not being deleted.
fn waiting_on(live: &Value) -> Option<String> {
    let meta = &live["metadata"];
    let since = meta["deletionTimestamp"].as_str()?;
    let finalizers: Vec<&str> = meta["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    // deletionTimestamp is when the object goes: the request's time plus its grace
    // period, so for a Pod in its grace period a time still to come, never a "since".
    let ahead = since
        .parse::<k8s_openapi::jiff::Timestamp>()
        .is_ok_and(|t| t > k8s_openapi::jiff::Timestamp::now());
    let when = match ahead {
        true => format!("its grace period ends at {since}"),
        false => format!("since {since}"),
    };
    let mut said = if finalizers.is_empty() {
        format!("being deleted, {when}")
    } else {
        format!(
            "being deleted {when}, waiting for finalizers {}",
            finalizers.join(", ")
        )
    };
    // A namespace's or a CRD's own word on what its deletion waits for (content left, a
    // group the namespace controller cannot discover, instances still being deleted).
    for c in live["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let kind = c["type"].as_str().unwrap_or_default();
        if c["status"] == "True"
            && (kind.starts_with("NamespaceDeletion")
                || kind.starts_with("NamespaceContent")
                || kind.starts_with("NamespaceFinalizers")
                || kind == "Terminating")
        {
            let message = c["message"].as_str().unwrap_or_default();
            said.push_str(&format!("; {kind}: {message}"));
        }
    }
    Some(said)
}

/// Why `live` must not be deleted on the strength of `entry`, if so.
pub(crate) fn not_ours(entry: &Entry, live: &Value, instance: &str) -> Option<String> {
    match claim(live, instance, false) {
        Ok(_) => {}
        Err(Refusal::OtherInstance(i)) => {
            return Some(format!("now owned by driftless instance {i:?}"));
        }
        Err(Refusal::Foreign) => {
            return Some("no longer carries driftless's ownership labels".into());
        }
    }
    let uid = live["metadata"]["uid"].as_str();
    match (&entry.uid, uid) {
        (Some(recorded), Some(live_uid)) if recorded != live_uid => Some(format!(
            "UID {live_uid} is not the recorded {recorded}: a different object of the same name"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// The plan of a tree without apps.
    fn plan(inventory: &Inventory, desired: &BTreeSet<ObjKey>, opts: &Options) -> Plan {
        super::plan(inventory, desired, opts, &BTreeSet::new())
    }

    #[test]
    fn an_app_still_in_the_revision_is_not_emptied_however_small() {
        // 20 objects of the tree's own, 4 of argo/web.
        let mut inv = Inventory::default();
        let mut desired = BTreeSet::new();
        for i in 0..20 {
            let k = key("Service", &format!("tree{i}"));
            inv.entries
                .insert(k.clone(), Box::new(Entry::recorded(k.clone(), "s")));
            desired.insert(k);
        }
        let web: Vec<ObjKey> = (0..4)
            .map(|i| key("ConfigMap", &format!("web{i}")))
            .collect();
        for k in &web {
            let e = Entry {
                app: Some("argo/web".into()),
                ..Entry::recorded(k.clone(), "w")
            };
            inv.entries.insert(k.clone(), Box::new(e));
        }
        let apps: BTreeSet<String> = ["argo/web".to_string()].into();
        let opts = Options::default();
        // The app renders nothing: 4 of 24 for the tree, all 4 of the app's.
        let p = super::plan(&inv, &desired, &opts, &apps);
        let why = p.refused.unwrap_or_default();
        assert!(why.contains("app argo/web would prune all 4"), "{why}");
        // 3 of its 4: more than half.
        let mut one = desired.clone();
        one.insert(web[0].clone());
        let why = super::plan(&inv, &one, &opts, &apps)
            .refused
            .unwrap_or_default();
        assert!(why.contains("app argo/web would prune 3 of its 4"), "{why}");
        // 2 of its 4: allowed, as for the tree.
        one.insert(web[1].clone());
        assert_eq!(super::plan(&inv, &one, &opts, &apps).refused, None);
        // The app left the revision: judged with the tree alone (4 of 24).
        let p = super::plan(&inv, &desired, &opts, &BTreeSet::new());
        assert_eq!((p.refused, p.candidates.len()), (None, 4));
        // And lifted as the tree's guard is.
        let lifted = Options {
            allow_mass: true,
            ..Options::default()
        };
        assert_eq!(super::plan(&inv, &desired, &lifted, &apps).refused, None);
    }

    #[test]
    fn a_crd_whose_cleanup_failed_is_nudged_every_5_seconds_at_most() {
        let now: k8s_openapi::jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let crd = |annotations: Value, reason: &str| {
            json!({
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "kafkatopics.kafka.strimzi.io", "deletionTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
                "status": {"conditions": [{"type": "Terminating", "status": "True", "reason": reason, "message": "could not list instances: storage is (re)initializing"}]},
            })
        };
        assert!(stalled_cleanup(
            &crd(json!({}), "InstanceDeletionFailed"),
            now
        ));
        assert!(!stalled_cleanup(
            &crd(json!({}), "InstanceDeletionInProgress"),
            now
        ));
        let recent = json!({CLEANUP_RETRY: "2026-01-01T00:00:57Z"});
        assert!(!stalled_cleanup(
            &crd(recent, "InstanceDeletionFailed"),
            now
        ));
        let earlier = json!({CLEANUP_RETRY: "2026-01-01T00:00:50Z"});
        assert!(stalled_cleanup(
            &crd(earlier, "InstanceDeletionFailed"),
            now
        ));
    }

    #[test]
    fn a_namespace_being_deleted_says_what_it_waits_for() {
        let live = json!({
            "metadata": {"name": "cnpg-system", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Terminating", "conditions": [
                {"type": "NamespaceDeletionDiscoveryFailure", "status": "True", "message": "unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: stale GroupVersion discovery"},
                {"type": "NamespaceContentRemaining", "status": "False", "message": ""},
            ]},
        });
        assert_eq!(
            waiting_on(&live).unwrap(),
            "being deleted, since 2026-01-01T00:00:00Z; NamespaceDeletionDiscoveryFailure: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: stale GroupVersion discovery"
        );
    }

    fn key(kind: &str, name: &str) -> ObjKey {
        let group = if kind == "CustomResourceDefinition" {
            "apiextensions.k8s.io"
        } else {
            ""
        };
        ObjKey {
            group: group.into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn inventory(keys: &[ObjKey]) -> Inventory {
        let mut inv = Inventory::default();
        for k in keys {
            inv.entries
                .insert(k.clone(), Box::new(Entry::recorded(k.clone(), "s")));
        }
        inv
    }

    #[test]
    fn candidates_are_what_left_the_specs_in_reverse_apply_order() {
        let all = [
            key("Namespace", "a"),
            key("CustomResourceDefinition", "b"),
            key("Service", "c"),
            key("Pod", "d"),
        ];
        let inv = inventory(&all);
        let desired: BTreeSet<ObjKey> = [key("Pod", "d")].into_iter().collect();
        let p = plan(
            &inv,
            &desired,
            &Options {
                max_ratio: 1.0,
                ..Options::default()
            },
        );
        assert!(p.refused.is_none());
        let order: Vec<&str> = p.candidates.iter().map(|e| e.key.kind.as_str()).collect();
        assert_eq!(order, ["Service", "CustomResourceDefinition", "Namespace"]);
    }

    #[test]
    fn a_declared_namespace_goes_only_once_nothing_of_the_tree_is_in_it() {
        let namespace = ObjKey {
            group: String::new(),
            kind: "Namespace".into(),
            namespace: String::new(),
            name: "ns".into(),
        };
        let inv = inventory(&[namespace.clone(), key("Service", "a")]);
        let all = Options {
            max_ratio: 1.0,
            ..Options::default()
        };
        // The Namespace left the tree; its Service did not: the Namespace stays.
        let service: BTreeSet<ObjKey> = [key("Service", "a")].into_iter().collect();
        let p = plan(&inv, &service, &all);
        assert!(p.candidates.is_empty(), "{:?}", p.candidates);
        // Both left: the Service goes first, then the Namespace.
        let other: BTreeSet<ObjKey> = [ObjKey {
            namespace: "elsewhere".into(),
            ..key("Service", "b")
        }]
        .into_iter()
        .collect();
        let p = plan(&inv, &other, &all);
        let order: Vec<&str> = p.candidates.iter().map(|e| e.key.kind.as_str()).collect();
        assert_eq!(order, ["Service", "Namespace"]);
        // kube-system and its like never go, however they came to be inventoried.
        for name in ["kube-system", "default"] {
            let inv = inventory(&[ObjKey {
                name: name.into(),
                ..namespace.clone()
            }]);
            let p = plan(&inv, &other, &all);
            assert!(p.candidates.is_empty(), "{name}: {:?}", p.candidates);
        }
    }

    #[test]
    fn empty_revision_is_refused_unless_allowed() {
        let inv = inventory(&[key("Service", "a")]);
        let p = plan(&inv, &BTreeSet::new(), &Options::default());
        assert!(
            p.refused
                .as_deref()
                .is_some_and(|r| r.contains("no objects")),
            "{:?}",
            p.refused
        );
        let p = plan(
            &inv,
            &BTreeSet::new(),
            &Options {
                allow_mass: true,
                ..Options::default()
            },
        );
        assert!(p.refused.is_none());
        assert_eq!(p.candidates.len(), 1);
    }

    #[test]
    fn pruning_more_than_the_ratio_is_refused() {
        let keys: Vec<ObjKey> = (0..10).map(|i| key("Service", &format!("s{i}"))).collect();
        let inv = inventory(&keys);
        let keep = |n: usize| keys[..n].iter().cloned().collect::<BTreeSet<_>>();
        // 5 of 10 = 50%: allowed at the default 0.5.
        assert!(plan(&inv, &keep(5), &Options::default()).refused.is_none());
        // 6 of 10: refused.
        let p = plan(&inv, &keep(4), &Options::default());
        assert!(
            p.refused.as_deref().is_some_and(|r| r.contains("6 of 10")),
            "{:?}",
            p.refused
        );
        assert!(
            plan(
                &inv,
                &keep(4),
                &Options {
                    max_ratio: 0.7,
                    ..Options::default()
                }
            )
            .refused
            .is_none()
        );
    }

    #[test]
    fn a_revision_that_renames_its_objects_is_no_mass_prune() {
        // 4 inventoried (a ServiceAccount, a Role, a Deployment, a Service), all renamed
        // by the new revision: 0 of 4 lost.
        let kinds = ["ServiceAccount", "Role", "Deployment", "Service"];
        let old: Vec<ObjKey> = kinds.iter().map(|k| key(k, "old")).collect();
        let inv = inventory(&old);
        let renamed: BTreeSet<ObjKey> = kinds.iter().map(|k| key(k, "new")).collect();
        let p = plan(&inv, &renamed, &Options::default());
        assert!(p.refused.is_none(), "{:?}", p.refused);
        assert_eq!(p.candidates.len(), 4);
        // Renamed one for one: two old Services for one new one leave one lost, and a
        // new object of another kind or namespace renames nothing.
        let mut inv = inventory(&[key("Service", "a"), key("Service", "b")]);
        let one: BTreeSet<ObjKey> = [key("Service", "c")].into_iter().collect();
        let p = plan(&inv, &one, &Options::default());
        assert!(p.refused.is_none(), "1 of 2 lost: {:?}", p.refused);
        let other_ns = ObjKey {
            namespace: "elsewhere".into(),
            ..key("Service", "c")
        };
        let p = plan(&inv, &[other_ns].into_iter().collect(), &Options::default());
        assert!(
            p.refused.as_deref().is_some_and(|r| r.contains("2 of 2")),
            "{:?}",
            p.refused
        );
        // Kept objects are no renames either: 3 kept, 3 of 6 others lost is not over 50%,
        // 4 of 7 is.
        inv = inventory(
            &(0..7)
                .map(|i| key("Service", &format!("s{i}")))
                .collect::<Vec<_>>(),
        );
        let keep3: BTreeSet<ObjKey> = (0..3).map(|i| key("Service", &format!("s{i}"))).collect();
        let p = plan(&inv, &keep3, &Options::default());
        assert!(
            p.refused.as_deref().is_some_and(|r| r.contains("4 of 7")),
            "{:?}",
            p.refused
        );
        // With two of the four brought back under new names, 2 of 7 are lost.
        let with_new: BTreeSet<ObjKey> = keep3
            .iter()
            .cloned()
            .chain([key("Service", "n1"), key("Service", "n2")])
            .collect();
        let p = plan(&inv, &with_new, &Options::default());
        assert!(p.refused.is_none(), "{:?}", p.refused);
    }

    #[test]
    fn objects_recorded_while_refused_do_not_dilute_the_share() {
        // 6 inventoried; a revision keeps 2 and adds 4 (recorded, held, by its refused
        // first sync): on a retry it still prunes 4 of the 6, not 4 of 10. (The 4 added
        // are ConfigMaps: Services would make the 4 pruned renames.)
        let keys: Vec<ObjKey> = (0..10)
            .map(|i| match i {
                0..6 => key("Service", &format!("s{i}")),
                _ => key("ConfigMap", &format!("s{i}")),
            })
            .collect();
        let mut inv = inventory(&keys);
        for k in &keys[6..] {
            inv.entries.get_mut(k).unwrap().held = true;
        }
        let desired: BTreeSet<ObjKey> = keys[..2].iter().chain(&keys[6..]).cloned().collect();
        let p = plan(&inv, &desired, &Options::default());
        assert!(
            p.refused.as_deref().is_some_and(|r| r.contains("4 of 6")),
            "{:?}",
            p.refused
        );
        // Without the hold the same plan passes: 4 of 10.
        for e in inv.entries.values_mut() {
            e.held = false;
        }
        assert!(plan(&inv, &desired, &Options::default()).refused.is_none());
        // A held entry this revision would prune counts: going back to the 6 prunes the
        // 4 added, 4 of 10 (not 4 of 6).
        for k in &keys[6..] {
            inv.entries.get_mut(k).unwrap().held = true;
        }
        let back: BTreeSet<ObjKey> = keys[..6].iter().cloned().collect();
        let p = plan(&inv, &back, &Options::default());
        assert!(p.refused.is_none(), "{:?}", p.refused);
        assert_eq!(p.candidates.len(), 4);
    }

    #[test]
    fn objects_being_deleted_are_checked_apart_and_not_counted_again() {
        // 10 inventoried; an earlier prune left 5 being deleted (a finalizer). This
        // revision removes one more: 1 of the 5 that are still there, not 6 of 10.
        let keys: Vec<ObjKey> = (0..10).map(|i| key("Service", &format!("s{i}"))).collect();
        let mut inv = inventory(&keys);
        // s5 to s9, in key order.
        inv.entries
            .values_mut()
            .skip(5)
            .for_each(|e| e.deleting = true);
        let desired: BTreeSet<ObjKey> = keys[1..5].iter().cloned().collect();
        let p = plan(&inv, &desired, &Options::default());
        assert!(p.refused.is_none(), "{:?}", p.refused);
        let names = |v: &[Entry]| v.iter().map(|e| e.key.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&p.candidates), ["s0"]);
        assert_eq!(names(&p.deleting), ["s5", "s6", "s7", "s8", "s9"]);
        // A refused revision still lists them, to be read again.
        let p = plan(&inv, &BTreeSet::new(), &Options::default());
        assert!(
            p.refused.as_deref().is_some_and(|r| r.contains("lists 5")),
            "{:?}",
            p.refused
        );
        assert_eq!(p.deleting.len(), 5);
        // Only being deleted: nothing to refuse.
        let p = plan(
            &inv,
            &keys[..5].iter().cloned().collect(),
            &Options::default(),
        );
        assert!(p.refused.is_none() && p.candidates.is_empty());
    }

    #[test]
    fn waiting_on_names_the_finalizers_of_an_object_being_deleted() {
        assert_eq!(
            waiting_on(&json!({"metadata": {"finalizers": ["a/b"]}})),
            None
        );
        let held = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["a/b", "customresourcecleanup.apiextensions.k8s.io"]}});
        assert_eq!(
            waiting_on(&held).as_deref(),
            Some(
                "being deleted since 2026-01-01T00:00:00Z, waiting for finalizers a/b, \
                 customresourcecleanup.apiextensions.k8s.io"
            )
        );
        // A Pod in its grace period: its deletionTimestamp is still to come.
        let graceful = json!({"metadata": {"deletionTimestamp": "2999-01-01T00:00:00Z"}});
        assert_eq!(
            waiting_on(&graceful).as_deref(),
            Some("being deleted, its grace period ends at 2999-01-01T00:00:00Z")
        );
    }

    #[test]
    fn nothing_to_prune_is_never_refused() {
        let inv = Inventory::default();
        assert!(
            plan(&inv, &BTreeSet::new(), &Options::default())
                .refused
                .is_none()
        );
    }

    #[test]
    fn only_objects_still_ours_with_the_recorded_uid_may_go() {
        let entry = inventory(&[key("Service", "a")])
            .entries
            .into_values()
            .next()
            .map(|e| *e)
            .unwrap();
        let live = |labels: serde_json::Value, uid: &str| json!({"metadata": {"labels": labels, "uid": uid}});
        let ours =
            json!({"app.kubernetes.io/managed-by": "Helm", "driftless.dev/instance": "default"});
        assert_eq!(
            not_ours(&entry, &live(ours.clone(), "uid-a"), "default"),
            None
        );
        assert!(not_ours(&entry, &live(ours.clone(), "uid-other"), "default").is_some());
        assert!(not_ours(&entry, &live(json!({}), "uid-a"), "default").is_some());
        assert!(not_ours(&entry, &live(ours.clone(), "uid-a"), "other").is_some());
        // A pending record (crash between apply and confirm) matches by labels alone.
        let pending = Entry { uid: None, ..entry };
        assert_eq!(not_ours(&pending, &live(ours, "anything"), "default"), None);
    }
}
