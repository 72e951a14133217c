//! What a drift is, field by field: the fields of our body whose live value someone else
//! changed, the value we applied and the one found, and the field managers that wrote
//! them (from `metadata.managedFields`). What the drift ledger records (`daemon::ledger`).
//!
//! A Secret's values, and those of an object decrypted from a SOPS file, are never
//! recorded: only a hash of each, keyed as the inventory's hashes are (`hash`), which
//! says that a value changed without the ledger holding the secret or a hash anyone
//! reading it could test guesses on.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hash::{HashKey, keyed};

/// One field that drifted: `applied` is what driftless last applied, `found` what the
/// other writer left (`null`: removed). Keyed hashes (`hmac:…`) for hidden values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldDrift {
    pub pointer: String,
    pub applied: Value,
    pub found: Value,
}

/// A drift as apply found it, before taking it back (or, reporting only, leaving it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DriftSeen {
    pub fields: Vec<FieldDrift>,
    /// The field managers other than ours that own a drifted field, in the order
    /// managedFields lists them.
    pub managers: Vec<String>,
    /// When the newest of them wrote (managedFields' `time`, RFC 3339), if it says.
    pub written: Option<String>,
}

/// Fields of the object's identity: never drift (a change is another object).
const IDENTITY: &[&str] = &[
    "/apiVersion",
    "/kind",
    "/metadata/name",
    "/metadata/namespace",
];

/// The drift of `live` (the whole object, with managedFields) from `body` (what we
/// applied), with `ours` our field manager; values hashed with `hidden`'s key if given.
pub(super) fn drift_of(
    body: &Value,
    live: &Value,
    ours: &str,
    hidden: Option<&HashKey>,
) -> DriftSeen {
    let body = secret_as_data(body);
    let mut fields = Vec::new();
    leaves(&body, String::new(), &mut |pointer, applied| {
        if IDENTITY.contains(&pointer) {
            return;
        }
        let found = live.pointer(pointer).cloned().unwrap_or(Value::Null);
        if &found != applied {
            fields.push(FieldDrift {
                pointer: pointer.to_string(),
                applied: shown(applied, hidden),
                found: shown(&found, hidden),
            });
        }
    });
    let drifted: Vec<&str> = fields.iter().map(|f| f.pointer.as_str()).collect();
    let mut managers = Vec::new();
    let mut written: Option<String> = None;
    for entry in live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(manager) = entry["manager"].as_str().filter(|m| *m != ours) else {
            continue;
        };
        let owned = super::managers::owned_by(live, &[manager.to_string()], &body);
        let touches = owned.iter().any(|o| {
            drifted
                .iter()
                .any(|d| d == o || d.starts_with(&format!("{o}/")))
        });
        if touches && !managers.iter().any(|m| m == manager) {
            managers.push(manager.to_string());
            if let Some(t) = entry["time"].as_str()
                && written.as_deref().is_none_or(|w| t > w)
            {
                written = Some(t.to_string());
            }
        }
    }
    DriftSeen {
        fields,
        managers,
        written,
    }
}

/// A Secret's `stringData` as the apiserver stores it (base64 under `data`), so it
/// compares with the live object.
fn secret_as_data(body: &Value) -> std::borrow::Cow<'_, Value> {
    let Some(strings) = body.get("stringData").and_then(Value::as_object) else {
        return std::borrow::Cow::Borrowed(body);
    };
    let mut body = body.clone();
    let strings = strings.clone();
    if let Some(obj) = body.as_object_mut() {
        obj.remove("stringData");
        let data = obj
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(data) = data.as_object_mut() {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default();
                data.insert(
                    k,
                    base64::engine::general_purpose::STANDARD
                        .encode(text)
                        .into(),
                );
            }
        }
    }
    std::borrow::Cow::Owned(body)
}

fn shown(v: &Value, hidden: Option<&HashKey>) -> Value {
    match hidden {
        Some(key) if !v.is_null() => Value::String(format!("hmac:{}", keyed(key, v))),
        _ => v.clone(),
    }
}

/// Calls `each` with the JSON pointer and value of every leaf of `v` (an empty map or
/// list counts as a leaf: emptying it is a change).
fn leaves(v: &Value, at: String, each: &mut dyn FnMut(&str, &Value)) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                leaves(v, format!("{at}/{k}"), each);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                leaves(v, format!("{at}/{i}"), each);
            }
        }
        _ => each(&at, v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_changed_image_names_its_field_values_and_writer() {
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "x"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}});
        let mut live = body.clone();
        live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        live["metadata"]["managedFields"] = json!([
            {"manager": "driftless", "time": "2026-01-01T00:00:00Z", "fieldsV1": {"f:spec": {}}},
            {"manager": "kubectl-set", "time": "2026-01-02T00:00:00Z", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"web\"}": {"f:image": {}}}}}}}},
        ]);
        let seen = drift_of(&body, &live, "driftless", None);
        assert_eq!(
            seen,
            DriftSeen {
                fields: vec![FieldDrift {
                    pointer: "/spec/template/spec/containers/0/image".into(),
                    applied: json!("nginx:1"),
                    found: json!("nginx:2"),
                }],
                managers: vec!["kubectl-set".into()],
                written: Some("2026-01-02T00:00:00Z".into()),
            }
        );
    }

    #[test]
    fn a_secrets_values_are_hashed_and_its_string_data_compares_as_data() {
        let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"password": "hunter2", "same": "x"}});
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"password": "b3RoZXI=", "same": "eA=="}});
        let key = HashKey::new(vec![7; 32]).unwrap();
        let seen = drift_of(&body, &live, "driftless", Some(&key));
        assert_eq!(seen.fields.len(), 1, "{seen:?}");
        let f = &seen.fields[0];
        assert_eq!(f.pointer, "/data/password");
        let text = serde_json::to_string(&seen).unwrap();
        assert!(
            !text.contains("hunter2") && !text.contains("b3RoZXI="),
            "{text}"
        );
        assert!(f.applied.as_str().unwrap().starts_with("hmac:"));
        assert_ne!(f.applied, f.found);
    }
}
