//! The views of live objects readiness is computed from, kept compact: the daemon holds
//! one for every owned object for as long as it runs. Rendered bodies are kept the same
//! way (`Packed`) while a sync holds them.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::ObjKey;

/// Live objects by key, Endpoints by (namespace, name), and the Pods of each Deployment
/// (a Deployment never says why its Pods fail; they do).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Shared with the whole sync that takes them (`apply::Known`), not copied for it:
    /// the copy was 5 MiB of a 10,000-spec no-op's peak. A change while a sync holds
    /// them copies them once (`objects_mut`).
    pub objects: Arc<HashMap<ObjKey, Seen>>,
    pub endpoints: HashMap<(String, String), Packed>,
    pub pods: HashMap<ObjKey, Vec<Value>>,
    /// Runs followed from their creation (a hook's, a wave's Job the TTL controller
    /// deletes) whose deletion was seen: each is in `objects` as it was last seen before
    /// it, if it was seen at all. One that had not ended then never will.
    pub deleted: std::collections::BTreeSet<ObjKey>,
}

impl Observed {
    pub fn objects_mut(&mut self) -> &mut HashMap<ObjKey, Seen> {
        Arc::make_mut(&mut self.objects)
    }
}

/// One live object as last seen: its view, and the hash of the fields our manager owns
/// (taken from its managedFields before they were dropped). With both, the daemon's
/// watches hold what a sync's list of the object would tell it (`apply::Known`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub view: Packed,
    pub fields: String,
}

/// A JSON value kept as its compact text, parsed again where it is read. As a `Value` (a
/// map node is about 600 bytes, however few keys it has) a Deployment's view is about
/// 6 KiB, as text well under 1 KiB. Reading one back costs a few microseconds. Shared,
/// not copied, when cloned: a whole sync takes every view the watches hold (`Seen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed(Arc<str>);

impl Packed {
    pub fn new(value: &Value) -> Packed {
        Packed::of(value)
    }

    /// Anything serialisable, packed without building a `Value` first. A type that fails
    /// to serialise (a map with non-string keys: none of ours) packs as `null`.
    pub fn of(value: &impl serde::Serialize) -> Packed {
        let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
        Packed(text.into())
    }

    /// The compact text: what two views are compared by without reading them back.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// Changes the value: read back, changed by `change`, packed again.
    pub fn edit(&mut self, change: impl FnOnce(&mut Value)) {
        let mut value = self.value();
        change(&mut value);
        *self = Packed::new(&value);
    }

    /// The value again (`Null` if the text were not JSON, which `new` never makes).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl Default for Packed {
    fn default() -> Packed {
        Packed::new(&Value::Null)
    }
}

/// Written and read as the JSON value it holds (a spec's figures in the status file):
/// parsed for the moment it is written, one value at a time.
impl serde::Serialize for Packed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Packed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Packed, D::Error> {
        Ok(Packed::new(&Value::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_value_reads_back_as_the_same_value() {
        let v = serde_json::json!({
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"a": "é \" \\ 1"}},
            "status": {"replicas": 3, "ratio": 0.5, "conditions": [{"type": "Available"}], "none": null}
        });
        let packed = Packed::new(&v);
        assert_eq!(packed.value(), v);
        assert_eq!(Packed::new(&packed.value()), packed);
    }
}
