//! The hashes the no-write rule compares: of what was sent, and of the fields our manager
//! owned right after. Stored in the inventory across releases, so they never change.

use kube::api::ObjectMeta;
use serde_json::Value;

/// A stable 64-bit FNV-1a hash, hex: stored in the inventory across releases. It is
/// the hash of `v`'s compact JSON, fed to the hash as it is written (not built first).
pub fn hash_value(v: &Value) -> String {
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

/// The hash of the fields `manager` owns through apply, as the server recorded them in
/// a typed object's metadata.
pub fn owned_fields_hash_of(meta: &ObjectMeta, manager: &str) -> String {
    let owned: Vec<&Value> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(manager) && m.operation.as_deref() == Some("Apply")
        })
        .map(|m| m.fields_v1.as_ref().map_or(&Value::Null, |f| &f.0))
        .collect();
    hash_serialized(&owned)
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
