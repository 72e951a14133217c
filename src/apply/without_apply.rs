//! What a Kubernetes 1.20 apiserver cannot server-side apply: APIService objects. Its
//! aggregator serves them without a field manager, so an apply (a dry-run too) panics in
//! the apiserver ("FieldManager must be installed to run apply", fixed in 1.21) and the
//! client sees only a dropped connection. On such an apiserver they are written with a
//! create or a merge patch instead, carrying the same body and marks; from 1.21 on
//! nothing changes.
//!
//! Such a write is an update, not an apply: the fields driftless owns are not recorded
//! as applied, so a change someone else makes to them is not seen as drift, and a field
//! dropped from the spec stays on the object until it is deleted.
//!
//! No apiserver can apply a map emptied: an apply that sets to `{}` a map it had filled
//! (kube-prometheus 0.9's `ruleSelector: {}` after 0.8's `matchLabels`) leaves it null,
//! which the apiserver's own validation of a custom resource then refuses (`Invalid
//! value: "null"`; seen on 1.20, and still on 1.34 and 1.37). On that refusal the maps
//! are emptied with a merge patch first, and the apply sent again.

use std::sync::atomic::Ordering;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::{Engine, Verb};
use crate::object::ObjKey;

/// Whether an apiserver reporting `major`.`minor` (as `/version` does: `"20+"` on some
/// distributions) predates 1.`at`.
pub(super) fn before(major: &str, minor: &str, at: u32) -> bool {
    let number = |s: &str| {
        s.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse::<u32>()
            .ok()
    };
    matches!((number(major), number(minor)), (Some(1), Some(m)) if m < at)
}

/// A merge patch that empties, in `live`, every map `body` sets to `{}` where `live` holds
/// one with keys (each key set to null); `None` when there is none.
pub(super) fn emptying_patch(body: &Value, live: &Value) -> Option<Value> {
    let (Value::Object(want), Value::Object(have)) = (body, live) else {
        return None;
    };
    let mut patch = serde_json::Map::new();
    for (k, w) in want {
        let Some(Value::Object(h)) = have.get(k) else {
            continue;
        };
        match w {
            Value::Object(m) if m.is_empty() && !h.is_empty() => {
                let nulls = h.keys().map(|k| (k.clone(), Value::Null)).collect();
                patch.insert(k.clone(), Value::Object(nulls));
            }
            Value::Object(_) => {
                if let Some(inner) = emptying_patch(w, &have[k]) {
                    patch.insert(k.clone(), inner);
                }
            }
            _ => {}
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// `body` with `patch` laid over it: a merge patch that writes the body and empties
/// the maps `patch` empties (what `diff` dry-runs on an apiserver before 1.21).
pub(super) fn merged(body: &Value, patch: &Value) -> Value {
    match (body, patch) {
        (Value::Object(b), Value::Object(p)) => {
            let mut out = b.clone();
            for (k, v) in p {
                let next = match out.get(k) {
                    Some(Value::Object(m)) if m.is_empty() => v.clone(),
                    Some(inner) => merged(inner, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), next);
            }
            Value::Object(out)
        }
        _ => body.clone(),
    }
}

impl Engine {
    /// Whether the apiserver predates 1.21. Read once; an apiserver that does not say is
    /// taken as a current one.
    async fn old_apiserver(&self) -> bool {
        self.server_version()
            .await
            .is_some_and(|(major, minor, _)| before(major, minor, 21))
    }

    /// Whether `e` is the apiserver refusing what its own apply made of an emptied map
    /// (see the module doc).
    pub(super) fn emptied_map_refused(&self, e: &kube::Error) -> bool {
        matches!(e, kube::Error::Api(s) if s.code == 422 && s.message.contains("Invalid value: \"null\""))
    }

    /// After `refusal` (`emptied_map_refused`): empties the maps with a merge patch, then
    /// applies `body` again. Both are counted writes. The refusal stands when no map
    /// needs emptying.
    pub(super) async fn apply_after_emptying(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        body: &Value,
        pp: &PatchParams,
        refusal: kube::Error,
    ) -> Result<DynamicObject, kube::Error> {
        let live = serde_json::to_value(api.get(name).await?).map_err(kube::Error::SerdeError)?;
        let Some(patch) = emptying_patch(body, &live) else {
            return Err(refusal);
        };
        tracing::info!(
            "the apiserver cannot apply an emptied map: emptying it with a merge patch first"
        );
        let mp = PatchParams {
            field_manager: Some(self.opts.field_manager.clone()),
            ..PatchParams::default()
        };
        self.writes.count(Verb::Patch);
        api.patch(name, &mp, &Patch::Merge(&patch)).await?;
        self.writes.count(Verb::Patch);
        api.patch(name, pp, &Patch::Apply(body)).await
    }

    /// Whether `key` is written without server-side apply on this apiserver.
    pub(super) async fn without_apply(&self, key: &ObjKey) -> bool {
        if !key.is("apiregistration.k8s.io", "APIService") {
            return false;
        }
        let old = self.old_apiserver().await;
        if old && !self.said_without_apply.swap(true, Ordering::Relaxed) {
            tracing::info!(
                "this apiserver (Kubernetes before 1.21) cannot server-side apply APIService objects: they are written with create and merge patch"
            );
        }
        old
    }

    /// Writes `body` as a create (nothing `live`) or a merge patch, as field manager
    /// driftless; `dry_run` for diff. Counted as the write it is.
    pub(super) async fn write_without_apply(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        body: &Value,
        live: bool,
        dry_run: bool,
    ) -> Result<DynamicObject, kube::Error> {
        let manager = Some(self.opts.field_manager.clone());
        if live {
            if !dry_run {
                self.writes.count(Verb::Patch);
            }
            let pp = PatchParams {
                field_manager: manager,
                dry_run,
                ..PatchParams::default()
            };
            api.patch(name, &pp, &Patch::Merge(body)).await
        } else {
            let obj: DynamicObject =
                serde_json::from_value(body.clone()).map_err(kube::Error::SerdeError)?;
            if !dry_run {
                self.writes.count(Verb::Create);
            }
            let pp = PostParams {
                dry_run,
                field_manager: manager,
            };
            api.create(&pp, &obj).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{before, emptying_patch, merged};
    use serde_json::json;

    #[test]
    fn maps_the_body_empties_are_emptied_key_by_key() {
        let body =
            json!({"spec": {"ruleSelector": {}, "podSelector": {}, "other": {"a": {}}, "n": 1}});
        let live = json!({"spec": {"ruleSelector": {"matchLabels": {"a": "b"}}, "podSelector": {},
                                    "other": {"a": {"x": 1}}, "n": 2}});
        let patch = emptying_patch(&body, &live).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"ruleSelector": {"matchLabels": null}, "other": {"a": {"x": null}}}})
        );
        assert_eq!(emptying_patch(&live, &live), None);
        assert_eq!(
            merged(&body, &patch),
            json!({"spec": {"ruleSelector": {"matchLabels": null}, "podSelector": {},
                            "other": {"a": {"x": null}}, "n": 1}})
        );
    }

    #[test]
    fn versions_before_1_21_are_told_apart() {
        assert!(before("1", "20", 21));
        assert!(before("1", "20+", 21));
        assert!(!before("1", "21", 21));
        assert!(!before("1", "33", 21));
        assert!(!before("2", "0", 21));
        assert!(!before("", "", 21));
    }
}
