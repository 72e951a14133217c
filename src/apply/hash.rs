//! The hashes the no-write rule compares: of what was sent, and of the fields our manager
//! owned right after. Stored in the inventory across releases, so they never change.
//!
//! A Secret's are keyed: the inventory is a ConfigMap, readable by more people than the
//! Secrets are, and a plain hash of a body whose every byte but the secret value is
//! known lets anyone who reads it test guesses of a weak value offline. Its hashes are
//! HMAC-SHA256 under the instance's key (`secret_key`), which is kept in a Secret. So are
//! those of any object decrypted from a SOPS file, whatever its kind.

use hmac::{Hmac, KeyInit, Mac};
use kube::api::ObjectMeta;
use serde_json::Value;
use sha2::Sha256;

/// A stable 64-bit FNV-1a hash, hex: stored in the inventory across releases. It is
/// the hash of `v`'s compact JSON, fed to the hash as it is written (not built first).
pub(crate) fn hash_value(v: &Value) -> String {
    hash_serialized(v)
}

/// FNV-1a over whatever is written to it.
struct Fnv(u64);

impl std::io::Write for Fnv {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for b in buf {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hash_serialized(v: &impl serde::Serialize) -> String {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    // Writing to a hasher cannot fail, and a Value always serialises.
    let _ = serde_json::to_writer(&mut h, v);
    format!("{:016x}", h.0)
}

/// The body without `metadata`, serialised as that map would be (keys in order).
struct Shape<'a>(&'a Value);

impl serde::Serialize for Shape<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_object() {
            Some(map) => s.collect_map(map.iter().filter(|(k, _)| k.as_str() != "metadata")),
            None => self.0.serialize(s),
        }
    }
}

/// The hash of everything but metadata (a Pod whose shape changed is replaced).
pub(super) fn shape_hash(body: &Value) -> String {
    hash_serialized(&Shape(body))
}

/// The secret key a Secret's hashes are keyed with (at least 16 random bytes).
pub(super) struct HashKey(Vec<u8>);

impl HashKey {
    pub(super) fn new(bytes: Vec<u8>) -> Option<HashKey> {
        (bytes.len() >= 16).then_some(HashKey(bytes))
    }
}

/// The two hashes an inventory entry records of a body.
pub(super) struct BodyHashes {
    /// Of the whole body (`Entry::applied`).
    pub(super) applied: String,
    /// Of all but metadata (`Entry::shape`).
    pub(super) shape: String,
}

/// The hashes of `body`: keyed with `key` (a Secret's), else plain FNV.
pub(super) fn body_hashes(body: &Value, key: Option<&HashKey>) -> BodyHashes {
    match key {
        None => BodyHashes {
            applied: hash_value(body),
            shape: shape_hash(body),
        },
        Some(key) => BodyHashes {
            applied: keyed(key, body),
            shape: keyed(key, &Shape(body)),
        },
    }
}

/// HMAC-SHA256 over whatever is written to it.
struct MacWriter(Hmac<Sha256>);

impl std::io::Write for MacWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// HMAC-SHA256 of `v`'s compact JSON under `key`, its first 128 bits in hex: as hard to
/// forge or invert without the key as the whole, at twice the size of the plain hash.
pub(super) fn keyed(key: &HashKey, v: &impl serde::Serialize) -> String {
    // HMAC takes a key of any length; `HashKey` holds at least 16 bytes.
    let Ok(mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(&key.0) else {
        return String::new();
    };
    let mut w = MacWriter(mac);
    // Writing to a MAC cannot fail, and a Value always serialises.
    let _ = serde_json::to_writer(&mut w, v);
    w.0.finalize().into_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a managedFields entry is `manager`'s server-side apply (its owned fields).
fn applied_by(entry_manager: Option<&str>, operation: Option<&str>, manager: &str) -> bool {
    entry_manager == Some(manager) && operation == Some("Apply")
}

/// The hash of the fields `manager` owns through apply, as the server recorded them in
/// a typed object's metadata.
pub(crate) fn owned_fields_hash_of(meta: &ObjectMeta, manager: &str) -> String {
    let owned: Vec<&Value> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| applied_by(m.manager.as_deref(), m.operation.as_deref(), manager))
        .map(|m| m.fields_v1.as_ref().map_or(&Value::Null, |f| &f.0))
        .collect();
    hash_serialized(&owned)
}

/// `owned_fields_hash_of` from managedFields as their text (a watched object read as
/// text, `health::readiness_view_of_text`): only `manager`'s apply entries are built into
/// values; the controllers' entries are read past.
pub(crate) fn owned_fields_hash_in(
    managed: Option<&serde_json::value::RawValue>,
    manager: &str,
) -> serde_json::Result<String> {
    #[derive(serde::Deserialize)]
    struct Entry<'a> {
        manager: Option<String>,
        operation: Option<String>,
        #[serde(rename = "fieldsV1", borrow)]
        fields_v1: Option<&'a serde_json::value::RawValue>,
    }
    let entries: Vec<Entry> = match managed {
        Some(text) => serde_json::from_str(text.get())?,
        None => Vec::new(),
    };
    let mut owned = Vec::new();
    for e in entries {
        if applied_by(e.manager.as_deref(), e.operation.as_deref(), manager) {
            owned.push(match e.fields_v1 {
                Some(f) => serde_json::from_str::<Value>(f.get())?,
                None => Value::Null,
            });
        }
    }
    Ok(hash_serialized(&owned))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// The same hash from an object's JSON: what `owned_fields_hash_of` must agree with.
    pub(in crate::apply) fn owned_fields_hash(live: &Value, manager: &str) -> String {
        let owned: Vec<&Value> = live["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| {
                m["manager"].as_str() == Some(manager) && m["operation"].as_str() == Some("Apply")
            })
            .map(|m| &m["fieldsV1"])
            .collect();
        hash_value(&Value::from(owned.into_iter().cloned().collect::<Vec<_>>()))
    }

    #[test]
    fn owned_fields_hash_sees_only_our_apply_entries() {
        let live = |ours: Value, theirs: Value| {
            json!({"metadata": {"managedFields": [
                {"manager": "driftless", "operation": "Apply", "fieldsV1": ours},
                {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": theirs},
                {"manager": "driftless", "operation": "Update", "fieldsV1": {"f:x": {}}},
            ]}})
        };
        let base = owned_fields_hash(
            &live(json!({"f:spec": {"f:replicas": {}}}), json!({})),
            "driftless",
        );
        // Someone else's fields changing is not our drift...
        assert_eq!(
            base,
            owned_fields_hash(
                &live(json!({"f:spec": {"f:replicas": {}}}), json!({"f:a": {}})),
                "driftless"
            )
        );
        // ...losing one of ours is.
        assert_ne!(
            base,
            owned_fields_hash(
                &live(json!({"f:spec": {}}), json!({"f:spec": {"f:replicas": {}}})),
                "driftless"
            )
        );
    }

    #[test]
    fn hashes_are_stable_and_shape_ignores_metadata() {
        let a = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"image": "a"}});
        let b = json!({"metadata": {"labels": {"x": "2"}}, "spec": {"image": "a"}});
        assert_eq!(hash_value(&a), hash_value(&a.clone()));
        assert_ne!(hash_value(&a), hash_value(&b));
        assert_eq!(shape_hash(&a), shape_hash(&b));
        // Fixed across releases: the inventory stores it (FNV-1a 64 of `{"a":1}`).
        assert_eq!(hash_value(&json!({"a": 1})), "9c3e82dd6fcae8b1");
    }

    #[test]
    fn keyed_hashes_depend_on_the_key_and_are_not_the_plain_ones() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db"}, "data": {"password": "aHVudGVyMg=="}});
        let k1 = HashKey::new(vec![1; 32]).unwrap();
        let k2 = HashKey::new(vec![2; 32]).unwrap();
        let plain = body_hashes(&secret, None);
        let a = body_hashes(&secret, Some(&k1));
        assert_eq!((plain.applied.len(), a.applied.len()), (16, 32));
        assert_ne!(a.applied, plain.applied);
        assert_ne!(a.shape, plain.shape);
        assert_ne!(a.applied, body_hashes(&secret, Some(&k2)).applied);
        // Stable under one key, and still sensitive to the value.
        assert_eq!(a.applied, body_hashes(&secret, Some(&k1)).applied);
        let mut other = secret.clone();
        other["data"]["password"] = json!("aHVudGVyMw==");
        assert_ne!(a.applied, body_hashes(&other, Some(&k1)).applied);
        // Shape leaves metadata out, keyed as well.
        let mut renamed = secret.clone();
        renamed["metadata"]["name"] = json!("db2");
        assert_eq!(a.shape, body_hashes(&renamed, Some(&k1)).shape);
        assert!(HashKey::new(vec![7; 15]).is_none());
        // Streamed, it is the HMAC of the compact JSON text, cut to 128 bits.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(secret.to_string().as_bytes());
        let whole: String = mac.finalize().into_bytes()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(a.applied, whole);
    }

    #[test]
    fn streamed_hashes_equal_the_hash_of_the_built_text() {
        let fnv = |text: String| format!("{:016x}", crate::spec::names::fnv1a64(text.bytes()));
        let v = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "labels": {"a": "é \"q\" \n"}},
            "spec": {"replicas": 2, "ratio": 0.5, "list": [null, true, {"z": [], "a": {}}]},
            "zzz": "after metadata"
        });
        assert_eq!(hash_value(&v), fnv(v.to_string()));
        let mut shape = v.clone();
        shape.as_object_mut().map(|o| o.remove("metadata"));
        assert_eq!(shape_hash(&v), fnv(shape.to_string()));
        assert_eq!(shape_hash(&json!("scalar")), fnv("\"scalar\"".to_string()));
    }
}
