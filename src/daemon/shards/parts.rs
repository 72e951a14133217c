//! The status every member shows of the whole tree: each publishes its own specs' status
//! (gzipped JSON in a ConfigMap of its own, `report::status::part`) when it changed,
//! and reads the others' whose version moved; the loop shows each of their specs in the
//! buckets the holders' table gives them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, Preconditions};

use super::{FIELD_MANAGER, Member, say_once};
use crate::apply::buckets::bucket_of;
use crate::cluster::error_text;
use crate::report::status::{SpecStatus, part};

/// Label on members' published parts of the status: the instance whose tree they share.
/// (Not the instance's own label: the daemon's watches must not carry every part.)
const STATUS_OF: &str = "driftless.dev/status-of";
/// Annotation on a part: the member that published it.
const PART_BY: &str = "driftless.dev/member";
const PART_KEY: &str = "specs.json.gz";

impl Member {
    /// Exchanges the status with the others; a failure is said once, until one succeeds.
    pub(super) async fn swap(&mut self) {
        let exchanged = self.exchange().await;
        say_once(
            &mut self.exchange_trouble,
            exchanged,
            "the other replicas' specs show as last read",
        );
    }

    /// Publishes this member's part if it changed (or is gone), reads the others' that
    /// changed, and tells the loop the specs the table gives each of them.
    async fn exchange(&mut self) -> Result<(), String> {
        let selector = format!("{STATUS_OF}={}", self.cfg.instance);
        let listed = self
            .maps
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| {
                format!(
                    "listing the replicas' parts of the status: {}",
                    error_text(&e)
                )
            })?;
        let me = self.cfg.identity.clone();
        let first = self.live.first() == Some(&me);
        let mut versions: BTreeMap<String, String> = BTreeMap::new();
        let mut own_listed = false;
        for meta in &listed.items {
            let (Some(name), Some(version)) = (meta.metadata.name.clone(), meta.resource_version())
            else {
                continue;
            };
            let Some(by) = meta.annotations().get(PART_BY).cloned() else {
                continue;
            };
            if by == me {
                own_listed = true;
                continue;
            }
            if !self.live.contains(&by) {
                // Its Lease is gone (it left, or was forgotten): nobody reads it again.
                if first && !self.members.seen.contains_key(&by) {
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            resource_version: Some(version),
                            uid: None,
                        }),
                        ..DeleteParams::default()
                    };
                    let _ = self.maps.delete(&name, &dp).await;
                }
                continue;
            }
            if self.parts.get(&by).is_none_or(|(v, _)| *v != version) {
                let cm = self
                    .maps
                    .get(&name)
                    .await
                    .map_err(|e| format!("reading {name}: {}", error_text(&e)))?;
                let bytes = cm
                    .binary_data
                    .as_ref()
                    .and_then(|d| d.get(PART_KEY))
                    .map_or(&[][..], |b| b.0.as_slice());
                let specs = part::decode(bytes).unwrap_or_else(|e| {
                    tracing::warn!(member = %by, "{}/{name} {e}", self.cfg.namespace);
                    Vec::new()
                });
                let specs = specs.into_iter().map(Arc::new).collect();
                let read_at = cm.resource_version().unwrap_or(version);
                self.parts.insert(by.clone(), (read_at, specs));
            }
            if let Some((v, _)) = self.parts.get(&by) {
                versions.insert(by, v.clone());
            }
        }
        // A part that was read before and is gone now: its member left (a leaver
        // deletes its part last, after its Lease and its rows of the table).
        self.someone_left |= self.parts.keys().any(|m| !versions.contains_key(m));
        self.parts.retain(|m, _| versions.contains_key(m));
        let from = (self.holders.clone(), versions);
        if self.peers_from.as_ref() != Some(&from) {
            let mut peers = HashMap::new();
            for (m, (_, specs)) in &self.parts {
                for s in specs {
                    if self.holders.get(&bucket_of(&s.id)) == Some(m) {
                        peers.insert(s.id.clone(), Arc::clone(s));
                    }
                }
            }
            self.peers.send_replace(Arc::new(peers));
            self.peers_from = Some(from);
        }
        let part = self.part.borrow().clone();
        if !own_listed
            || self
                .published
                .as_ref()
                .is_none_or(|p| !Arc::ptr_eq(p, &part))
        {
            self.publish_part(&part).await?;
            self.published = Some(part);
        }
        Ok(())
    }

    async fn publish_part(&self, specs: &[SpecStatus]) -> Result<(), String> {
        let name = self.cfg.part_name();
        let bytes = part::encode(specs)
            .map_err(|e| format!("this replica's part of the status ({name}): {e}"))?;
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    STATUS_OF.to_string(),
                    self.cfg.instance.clone(),
                )])),
                annotations: Some(BTreeMap::from([(
                    PART_BY.to_string(),
                    self.cfg.identity.clone(),
                )])),
                ..ObjectMeta::default()
            },
            binary_data: Some(BTreeMap::from([(PART_KEY.to_string(), ByteString(bytes))])),
            ..ConfigMap::default()
        };
        self.maps
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&cm),
            )
            .await
            .map_err(|e| format!("writing {name}: {}", error_text(&e)))?;
        Ok(())
    }
}
