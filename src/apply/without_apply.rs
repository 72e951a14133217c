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

use std::sync::atomic::Ordering;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::{Engine, Verb};
use crate::object::ObjKey;

/// Whether an apiserver reporting `major`.`minor` (as `/version` does: `"20+"` on some
/// distributions) predates 1.21.
fn before_1_21(major: &str, minor: &str) -> bool {
    let number = |s: &str| {
        s.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse::<u32>()
            .ok()
    };
    matches!((number(major), number(minor)), (Some(1), Some(m)) if m < 21)
}

impl Engine {
    /// Whether `key` is written without server-side apply on this apiserver. The version
    /// is read once; an apiserver that does not say is taken as a current one.
    pub(super) async fn without_apply(&self, key: &ObjKey) -> bool {
        if !key.is("apiregistration.k8s.io", "APIService") {
            return false;
        }
        let old = *self
            .old_apiserver
            .get_or_init(|| async {
                match self.client.apiserver_version().await {
                    Ok(v) => before_1_21(&v.major, &v.minor),
                    Err(_) => false,
                }
            })
            .await;
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
    use super::before_1_21;

    #[test]
    fn versions_before_1_21_are_told_apart() {
        assert!(before_1_21("1", "20"));
        assert!(before_1_21("1", "20+"));
        assert!(!before_1_21("1", "21"));
        assert!(!before_1_21("1", "33"));
        assert!(!before_1_21("2", "0"));
        assert!(!before_1_21("", ""));
    }
}
