//! The holders' table: which member holds each bucket, one ConfigMap for all the members,
//! written only over the version it was read at so that two members never both take a
//! bucket.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};

use super::ShardConfig;
use crate::cluster::error_text;
use crate::object::ownership;

const HOLDERS_KEY: &str = "holders.json";

/// Why the table could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(super) enum TableError {
    #[error("reading {name}: {}", error_text(source))]
    Read { name: String, source: kube::Error },
    #[error("{namespace}/{name} is corrupt: {source}")]
    Corrupt {
        namespace: String,
        name: String,
        source: serde_json::Error,
    },
    #[error("writing {name}: {}", error_text(source))]
    Write { name: String, source: kube::Error },
}

/// The holders' table as read, with the version a write must name.
pub(super) struct Table {
    pub(super) holders: BTreeMap<u16, String>,
    /// None while there is no table yet: the first write creates it.
    version: Option<String>,
}

impl Table {
    pub(super) async fn read(
        maps: &Api<ConfigMap>,
        cfg: &ShardConfig,
    ) -> Result<Table, TableError> {
        let name = cfg.table();
        let found = maps
            .get_opt(&name)
            .await
            .map_err(|source| TableError::Read {
                name: name.clone(),
                source,
            })?;
        let Some(cm) = found else {
            return Ok(Table {
                holders: BTreeMap::new(),
                version: None,
            });
        };
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(HOLDERS_KEY))
            .map_or("{}", String::as_str);
        let holders: BTreeMap<u16, String> =
            serde_json::from_str(text).map_err(|source| TableError::Corrupt {
                namespace: cfg.namespace.clone(),
                name: name.clone(),
                source,
            })?;
        Ok(Table {
            holders,
            version: cm.resource_version(),
        })
    }

    /// Writes `holders` over the table as it was read: `None` when someone wrote it since
    /// (the next round reads it again).
    pub(super) async fn write(
        &self,
        maps: &Api<ConfigMap>,
        cfg: &ShardConfig,
        holders: BTreeMap<u16, String>,
    ) -> Result<Option<Table>, TableError> {
        let name = cfg.table();
        let data = serde_json::to_string(&holders).unwrap_or_else(|_| "{}".to_string());
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(cfg.namespace.clone()),
                resource_version: self.version.clone(),
                labels: Some(BTreeMap::from([(
                    ownership::INSTANCE.to_string(),
                    cfg.instance.clone(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(HOLDERS_KEY.to_string(), data)])),
            ..ConfigMap::default()
        };
        let pp = PostParams::default();
        let written = match &self.version {
            Some(_) => maps.replace(&name, &pp, &cm).await,
            None => maps.create(&pp, &cm).await,
        };
        match written {
            Ok(cm) => Ok(Some(Table {
                holders,
                version: cm.resource_version(),
            })),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
            Err(source) => Err(TableError::Write { name, source }),
        }
    }

    /// The buckets the table gives `me`.
    pub(super) fn held_by(&self, me: &str) -> BTreeSet<u16> {
        self.holders
            .iter()
            .filter(|(_, h)| *h == me)
            .map(|(b, _)| *b)
            .collect()
    }
}
