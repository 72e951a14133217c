//! The instance's hash key: what a Secret's inventory hashes are keyed with (see `hash`).
//!
//! Kept in Secret `driftless-hash-key-<instance>` in the inventory namespace, beside the
//! inventory but readable only by who may read that Secret. It is made (32 random bytes)
//! by the first process that applies a Secret, and read once per engine after that: a
//! restart, a second replica or a one-shot `apply` reads the same key, so their hashes
//! agree and an unchanged Secret is not written again. Only a sync that applies a
//! Secret needs it, so an identity that manages no Secrets needs no access to it.
//!
//! If the key Secret is deleted, the next process makes a new one; what it costs is one
//! re-apply of each Secret (its recorded hash no longer matches), nothing else.

use std::collections::BTreeMap;
use std::io::Read as _;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use super::hash::HashKey;
use super::{Engine, Verb};
use crate::object::ownership;

/// The data key the key is stored under.
const DATA_KEY: &str = "key";
/// Label on the key Secret: the instance it belongs to.
const KEY_OF: &str = "driftless.dev/hash-key-of";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "reading Secret {namespace}/{name}, the key Secrets' inventory hashes are keyed with: {} \
         (grant get on that Secret, and create on secrets in {namespace})",
        crate::cluster::error_text(source)
    )]
    Read {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "creating Secret {namespace}/{name}, the key Secrets' inventory hashes are keyed with: {} \
         (grant create on secrets in {namespace}, or create it: 32 random bytes under data.{DATA_KEY})",
        crate::cluster::error_text(source)
    )]
    Create {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("Secret {namespace}/{name} holds no usable key (data.{DATA_KEY}, at least 16 bytes)")]
    Malformed { namespace: String, name: String },
    #[error("reading random bytes for a new hash key: {0}")]
    Random(std::io::Error),
    #[error("the inventory namespace: {0}")]
    Namespace(String),
}

/// The key Secret's name for `instance`.
pub fn secret_name(instance: &str) -> String {
    format!("driftless-hash-key-{instance}")
}

impl Engine {
    /// The instance's hash key: read (or made) once, then kept for the engine's life.
    /// An error is not kept: the next Secret's apply tries again.
    pub(super) async fn hash_key(&self) -> Result<&HashKey, KeyError> {
        self.hash_key.get_or_try_init(|| self.load_hash_key()).await
    }

    async fn load_hash_key(&self) -> Result<HashKey, KeyError> {
        let namespace = self.opts.inventory_namespace.clone();
        let name = secret_name(&self.opts.instance);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        // Twice at most: a create that loses a race with another process (409) reads
        // the winner's key.
        for _ in 0..2 {
            match api.get_opt(&name).await {
                Ok(Some(secret)) => return key_of(&secret, &namespace, &name),
                Ok(None) => {}
                Err(source) => {
                    return Err(KeyError::Read {
                        namespace,
                        name,
                        source,
                    });
                }
            }
            self.store()
                .ensure_namespace(&self.client, &self.writes)
                .await
                .map_err(|e| KeyError::Namespace(e.to_string()))?;
            let bytes = random_key()?;
            self.writes.count(Verb::Create);
            match api
                .create(
                    &PostParams::default(),
                    &key_secret(&namespace, &name, &self.opts.instance, &bytes),
                )
                .await
            {
                Ok(_) => {
                    tracing::info!(secret = %format!("{namespace}/{name}"), "made the hash key for Secrets' inventory hashes");
                    return HashKey::new(bytes).ok_or(KeyError::Malformed { namespace, name });
                }
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(source) => {
                    return Err(KeyError::Create {
                        namespace,
                        name,
                        source,
                    });
                }
            }
        }
        Err(KeyError::Malformed { namespace, name })
    }

    /// The key if one exists, never made: what a read-only command (`diff`) compares
    /// keyed hashes with. None when there is none yet, or it cannot be read.
    pub(super) async fn existing_hash_key(&self) -> Option<&HashKey> {
        if let Some(k) = self.hash_key.get() {
            return Some(k);
        }
        let namespace = &self.opts.inventory_namespace;
        let name = secret_name(&self.opts.instance);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api.get_opt(&name).await.ok()??;
        let key = key_of(&secret, namespace, &name).ok()?;
        // Another task may have set it meanwhile: either is the same Secret's key.
        let _ = self.hash_key.set(key);
        self.hash_key.get()
    }

    /// Whether `entry` records `body` as the intent last applied to `key`: its plain hash,
    /// or for a Secret or a sealed object its keyed one. The key is only read, never made
    /// (a write): a reader (`diff`, the dry-run ahead of a sync) takes an object whose key
    /// is not there yet as changed.
    pub(super) async fn applied_as(
        &self,
        entry: &super::inventory::Entry,
        key: &crate::object::ObjKey,
        sealed: bool,
        body: &serde_json::Value,
    ) -> bool {
        let plain = super::hash::body_hashes(body, None).applied;
        if entry.applied.as_deref() == Some(plain.as_str()) {
            return true;
        }
        if !(key.is("", "Secret") || sealed) {
            return false;
        }
        match self.existing_hash_key().await {
            Some(k) => {
                let keyed = super::hash::body_hashes(body, Some(k)).applied;
                entry.applied.as_deref() == Some(keyed.as_str())
            }
            None => false,
        }
    }
}

fn key_of(secret: &Secret, namespace: &str, name: &str) -> Result<HashKey, KeyError> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .and_then(|b| HashKey::new(b.0.clone()))
        .ok_or_else(|| KeyError::Malformed {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
}

fn key_secret(namespace: &str, name: &str, instance: &str, key: &[u8]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            // Not `driftless.dev/instance`: this is not one of the instance's applied
            // objects, and no list or watch of them should see it.
            labels: Some(BTreeMap::from([
                (ownership::SYSTEM.to_string(), "true".to_string()),
                (KEY_OF.to_string(), instance.to_string()),
            ])),
            ..ObjectMeta::default()
        },
        // A key that changed under running processes would only cost re-applies, but
        // nothing ever needs to change it in place.
        immutable: Some(true),
        data: Some(BTreeMap::from([(
            DATA_KEY.to_string(),
            ByteString(key.to_vec()),
        )])),
        ..Secret::default()
    }
}

/// 32 bytes from the kernel's CSPRNG. driftless runs on Linux (and macOS), where
/// `/dev/urandom` never blocks once seeded; no crate is needed for it.
fn random_key() -> Result<Vec<u8>, KeyError> {
    let mut bytes = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(KeyError::Random)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_secret_round_trips_and_a_short_key_is_refused() {
        let bytes = random_key().unwrap();
        assert_ne!(bytes, random_key().unwrap());
        let s = key_secret("ns", "k", "default", &bytes);
        assert_eq!(s.immutable, Some(true));
        assert!(
            !s.metadata
                .labels
                .as_ref()
                .unwrap()
                .contains_key(ownership::INSTANCE)
        );
        assert!(key_of(&s, "ns", "k").is_ok());
        let short = key_secret("ns", "k", "default", &bytes[..8]);
        assert!(matches!(
            key_of(&short, "ns", "k"),
            Err(KeyError::Malformed { .. })
        ));
        assert!(matches!(
            key_of(&Secret::default(), "ns", "k"),
            Err(KeyError::Malformed { .. })
        ));
    }
}
