//! The labels and annotations that mark an object as driftless's, and the one decision
//! apply, diff and prune make from them. Prune and adoption read these keys: changing
//! one orphans every object in the field.
//!
//! Every mark is under `driftless.dev/`: the `app.kubernetes.io/*` labels belong to the
//! manifests' authors (Helm and Kustomize render `app.kubernetes.io/managed-by: Helm`).
//! Earlier driftless also set `app.kubernetes.io/managed-by: driftless`; such objects
//! carry the instance label too, which is all ownership reads, and lose the old label at
//! their next apply (server-side apply drops a field its manager no longer sends).

use serde_json::Value;

pub const MANAGER: &str = "driftless";
pub const DEFAULT_INSTANCE: &str = "default";

/// Which driftless instance owns the object: instances sharing a cluster never touch
/// each other's objects. The one label ownership is read from.
pub const INSTANCE: &str = "driftless.dev/instance";
/// On what driftless keeps for itself rather than applies from a spec (the inventory's
/// namespace, the hash key): never an instance's object, never pruned.
pub(crate) const SYSTEM: &str = "driftless.dev/system";
/// Annotation: the spec identity `kind/namespace/name` the object was rendered from.
pub(crate) const SPEC: &str = "driftless.dev/spec";
/// Label on each run of a hook created from `generateName`: which instance's hook spec it
/// is a run of (a short hash of both), so that later runs find earlier ones to delete.
pub(crate) const HOOK_RUN: &str = "driftless.dev/hook-run";
/// The selector labels of the workloads driftless's own kinds render (a Deployment's
/// selector is immutable, so they stay as first released). Never read as ownership.
pub(crate) const APP_NAME: &str = "app.kubernetes.io/name";
pub(crate) const APP_INSTANCE: &str = "app.kubernetes.io/instance";
/// On the Pods a `localservice` selects: the node they run on (as a label value), which
/// the per-node Services select on. Kept up to date by the daemon.
pub const NODE: &str = "localservice.driftless.dev/node";
/// Annotation on a per-node Service: the node's real name.
pub(crate) const NODE_NAME: &str = "localservice.driftless.dev/node-name";

/// Whose an object is, by its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    Us,
    OtherInstance(String),
    Foreign,
}

pub(crate) fn owner_of(obj: &Value, instance: &str) -> Owner {
    match obj["metadata"]["labels"][INSTANCE].as_str() {
        Some(i) if i == instance => Owner::Us,
        Some(i) => Owner::OtherInstance(i.to_string()),
        None => Owner::Foreign,
    }
}

/// How driftless may write an existing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// It is this instance's.
    Ours,
    /// Someone else made it and the spec (or `--adopt`) says to take it over: the apply
    /// must force, since every field it sets belongs to another manager.
    Adopt,
}

/// Why driftless must leave an existing object alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("owned by driftless instance {0:?}; instances never touch each other's objects")]
    OtherInstance(String),
    #[error(
        "exists and was not created by driftless; set `adopt = true` on the spec or pass --adopt to take it over"
    )]
    Foreign,
}

/// The ownership decision apply, diff and prune share: whether an existing `live` object
/// may be written (or, with `adopt = false`, deleted) by `instance`. Another instance's
/// object is never touched, not even when adopting.
pub fn claim(live: &Value, instance: &str, adopt: bool) -> Result<Claim, Refusal> {
    match owner_of(live, instance) {
        Owner::Us => Ok(Claim::Ours),
        Owner::OtherInstance(other) => Err(Refusal::OtherInstance(other)),
        Owner::Foreign if adopt => Ok(Claim::Adopt),
        Owner::Foreign => Err(Refusal::Foreign),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(managed_by: Option<&str>, instance: Option<&str>) -> Value {
        let mut labels = serde_json::Map::new();
        if let Some(m) = managed_by {
            labels.insert("app.kubernetes.io/managed-by".into(), m.into());
        }
        if let Some(i) = instance {
            labels.insert(INSTANCE.into(), i.into());
        }
        serde_json::json!({ "metadata": { "labels": labels } })
    }

    #[test]
    fn ownership_is_read_from_labels() {
        assert_eq!(
            owner_of(&labelled(Some(MANAGER), Some("a")), "a"),
            Owner::Us
        );
        assert_eq!(
            owner_of(&labelled(Some(MANAGER), Some("b")), "a"),
            Owner::OtherInstance("b".into())
        );
        assert_eq!(
            owner_of(&labelled(Some(MANAGER), None), "a"),
            Owner::Foreign
        );
        // The instance label alone decides: what earlier driftless marked (with
        // `app.kubernetes.io/managed-by: driftless` beside it) stays ours, and a
        // manifest's own `managed-by: Helm` is the author's, not a claim.
        assert_eq!(owner_of(&labelled(None, Some("a")), "a"), Owner::Us);
        assert_eq!(owner_of(&labelled(Some("Helm"), Some("a")), "a"), Owner::Us);
        assert_eq!(owner_of(&labelled(Some("Helm"), None), "a"), Owner::Foreign);
        assert_eq!(owner_of(&serde_json::json!({}), "a"), Owner::Foreign);
    }

    #[test]
    fn only_ours_or_adopted_foreign_objects_may_be_written() {
        let ours = labelled(Some(MANAGER), Some("a"));
        let other = labelled(Some(MANAGER), Some("b"));
        let foreign = labelled(None, None);
        assert_eq!(claim(&ours, "a", false), Ok(Claim::Ours));
        assert_eq!(claim(&foreign, "a", true), Ok(Claim::Adopt));
        assert_eq!(claim(&foreign, "a", false), Err(Refusal::Foreign));
        for adopt in [false, true] {
            assert_eq!(
                claim(&other, "a", adopt),
                Err(Refusal::OtherInstance("b".into()))
            );
        }
        assert!(Refusal::Foreign.to_string().contains("--adopt"));
    }
}
