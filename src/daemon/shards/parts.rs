//! The status every member shows of the whole tree: each publishes its own specs' status
//! (gzipped JSON in a ConfigMap of its own, `report::status::part`) when it changed,
//! and reads the others' whose version moved; the loop shows each of their specs in the
//! buckets the holders' table gives them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, Preconditions};
use tokio::sync::watch;

use super::division::Members;
use super::{Peers, ShardConfig};
use crate::apply::buckets::bucket_of;
use crate::cluster::error_text;
use crate::report::status::{SpecStatus, part};

/// Label on members' published parts of the status: the instance whose tree they share.
/// (Not the instance's own label: the daemon's watches must not carry every part.)
const STATUS_OF: &str = "driftless.dev/status-of";
/// Annotation on a part: the member that published it.
const PART_BY: &str = "driftless.dev/member";
const PART_KEY: &str = "specs.json.gz";
const FIELD_MANAGER: &str = "driftless-shards";

/// Why an exchange of parts failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ExchangeError {
    #[error("listing the replicas' parts of the status: {}", error_text(source))]
    List { source: kube::Error },
    #[error("reading {name}: {}", error_text(source))]
    Read { name: String, source: kube::Error },
    #[error("this replica's part of the status ({name}): {source}")]
    Encode {
        name: String,
        source: part::PartError,
    },
    #[error("writing {name}: {}", error_text(source))]
    Write { name: String, source: kube::Error },
}

/// This member's side of the exchange: its own part as last written, the others' as
/// last read, and what the loop was last told of them.
pub(super) struct Parts {
    cfg: ShardConfig,
    maps: Api<ConfigMap>,
    /// This replica's own specs, from the loop.
    part: watch::Receiver<Arc<Vec<SpecStatus>>>,
    /// The part as last written.
    published: Option<Arc<Vec<SpecStatus>>>,
    /// The others' parts as last read: member → (resourceVersion, specs).
    read: HashMap<String, (String, Vec<Arc<SpecStatus>>)>,
    /// The others' specs the table gives them, for the loop to show.
    peers: watch::Sender<Peers>,
    /// The table and the parts' versions `peers` was built from.
    peers_from: Option<(BTreeMap<u16, String>, BTreeMap<String, String>)>,
    /// An exchange found a member's part gone: it left (or was forgotten), and a round
    /// now takes its buckets over, rather than up to a round later.
    someone_left: bool,
}

impl Parts {
    pub(super) fn new(
        cfg: ShardConfig,
        maps: Api<ConfigMap>,
        part: watch::Receiver<Arc<Vec<SpecStatus>>>,
        peers: watch::Sender<Peers>,
    ) -> Parts {
        Parts {
            cfg,
            maps,
            part,
            published: None,
            read: HashMap::new(),
            peers,
            peers_from: None,
            someone_left: false,
        }
    }

    /// Publishes this member's part if it changed (or is gone), reads the others' that
    /// changed, and tells the loop the specs `holders` gives each of the `live`.
    pub(super) async fn exchange(
        &mut self,
        live: &BTreeSet<String>,
        members: &Members,
        holders: &BTreeMap<u16, String>,
    ) -> Result<(), ExchangeError> {
        let selector = format!("{STATUS_OF}={}", self.cfg.instance);
        let listed = self
            .maps
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| ExchangeError::List { source })?;
        let me = self.cfg.identity.clone();
        let first = live.first() == Some(&me);
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
            if !live.contains(&by) {
                // Its Lease is gone (it left, or was forgotten): nobody reads it again.
                if first && !members.listed(&by) {
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
            if self.read.get(&by).is_none_or(|(v, _)| *v != version) {
                let cm = self
                    .maps
                    .get(&name)
                    .await
                    .map_err(|source| ExchangeError::Read {
                        name: name.clone(),
                        source,
                    })?;
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
                self.read.insert(by.clone(), (read_at, specs));
            }
            if let Some((v, _)) = self.read.get(&by) {
                versions.insert(by, v.clone());
            }
        }
        // A part that was read before and is gone now: its member left (a leaver
        // deletes its part last, after its Lease and its rows of the table).
        self.someone_left |= self.read.keys().any(|m| !versions.contains_key(m));
        self.read.retain(|m, _| versions.contains_key(m));
        let from = (holders.clone(), versions);
        if self.peers_from.as_ref() != Some(&from) {
            let mut peers = HashMap::new();
            for (m, (_, specs)) in &self.read {
                for s in specs {
                    if holders.get(&bucket_of(&s.id)) == Some(m) {
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
            self.publish(&part).await?;
            self.published = Some(part);
        }
        Ok(())
    }

    /// Whether an exchange since the last asking found a member gone.
    pub(super) fn someone_left(&mut self) -> bool {
        std::mem::take(&mut self.someone_left)
    }

    async fn publish(&self, specs: &[SpecStatus]) -> Result<(), ExchangeError> {
        let name = self.cfg.part_name();
        let bytes = part::encode(specs).map_err(|source| ExchangeError::Encode {
            name: name.clone(),
            source,
        })?;
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
            .map_err(|source| ExchangeError::Write { name, source })?;
        Ok(())
    }

    /// Deletes this member's part, last of what it leaves behind: the others take a part
    /// gone as the sign that its member left.
    pub(super) async fn withdraw(&self) {
        let _ = self
            .maps
            .delete(&self.cfg.part_name(), &DeleteParams::default())
            .await;
    }
}
