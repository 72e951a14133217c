//! What changed between two status documents, for `GET /api/v1/events?deltas=1`: the
//! whole document once, then only the top-level fields and the spec entries that
//! changed. A quiet tree then sends (almost) nothing, where each rewrite of the whole
//! document (every 10 s at least) sent all of it to every open page.
//!
//! A delta (`event: delta`) is `{"set": {field: value…}, "specs": [entry…],
//! "removed": [id…], "order": [id…]}`: `set` the top-level fields that changed (never
//! `specs`), `specs` each spec entry that is new or changed (whole), `removed` the ids
//! gone, and `order` every id in the document's order, only when that order changed.
//! Empty parts are left out.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

/// What to send a stream for a newer document.
#[derive(Debug, PartialEq, Eq)]
pub enum Delta {
    /// Nothing it was not sent already.
    Same,
    /// This delta.
    Changed(String),
    /// The document cannot be compared (not what it should be): send it whole.
    Whole,
}

/// What a stream last sent, to compare the next document with: compact JSON per spec
/// (by id) and per top-level field, and the ids' order.
#[derive(Default)]
pub struct Sent {
    fields: HashMap<String, String>,
    specs: HashMap<String, String>,
    order: Vec<String>,
}

impl Sent {
    /// The delta from what was sent to `doc` (a status document as JSON text), and
    /// remembers `doc` as sent.
    pub fn delta(&mut self, doc: &str) -> Delta {
        let Ok(Value::Object(mut top)) = serde_json::from_str::<Value>(doc) else {
            return Delta::Whole;
        };
        let specs = match top.remove("specs") {
            Some(Value::Array(s)) => s,
            _ => Vec::new(),
        };
        let mut set = Map::new();
        let mut fields = HashMap::with_capacity(top.len());
        for (k, v) in top {
            let text = v.to_string();
            if self.fields.get(&k) != Some(&text) {
                set.insert(k.clone(), v);
            }
            fields.insert(k, text);
        }
        // A field left out now (an empty list the status omits, as `releases`) is
        // cleared: a page keeping the old value would show what is gone.
        for gone in self.fields.keys().filter(|k| !fields.contains_key(*k)) {
            set.insert(gone.clone(), Value::Null);
        }
        let mut changed = Vec::new();
        let mut order = Vec::with_capacity(specs.len());
        let mut now = HashMap::with_capacity(specs.len());
        for s in specs {
            let Some(id) = s["id"].as_str().map(str::to_string) else {
                return Delta::Whole;
            };
            let text = s.to_string();
            if self.specs.get(&id) != Some(&text) {
                changed.push(s);
            }
            order.push(id.clone());
            now.insert(id, text);
        }
        let present: HashSet<&String> = now.keys().collect();
        let removed: Vec<&String> = self
            .specs
            .keys()
            .filter(|id| !present.contains(id))
            .collect();
        let mut out = Map::new();
        if !set.is_empty() {
            out.insert("set".into(), Value::Object(set));
        }
        if !changed.is_empty() {
            out.insert("specs".into(), Value::Array(changed));
        }
        if !removed.is_empty() {
            out.insert("removed".into(), json!(removed));
        }
        if order != self.order {
            out.insert("order".into(), json!(order));
        }
        *self = Sent {
            fields,
            specs: now,
            order,
        };
        match out.is_empty() {
            true => Delta::Same,
            false => Delta::Changed(Value::Object(out).to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(written: &str, specs: Value) -> String {
        json!({"version": 1, "written": written, "specs": specs}).to_string()
    }

    #[test]
    fn only_what_changed_is_sent() {
        let mut sent = Sent::default();
        let a = json!({"id": "a", "ready": true});
        let b = json!({"id": "b", "ready": false});
        let changed = |d: Delta| match d {
            Delta::Changed(text) => text,
            other => panic!("{other:?}"),
        };
        let first = changed(sent.delta(&doc("t1", json!([a, b]))));
        let first: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(first["order"], json!(["a", "b"]));
        // Only the time it was written: a few bytes.
        let quiet = changed(sent.delta(&doc("t2", json!([a, b]))));
        assert_eq!(quiet, r#"{"set":{"written":"t2"}}"#);
        assert_eq!(sent.delta(&doc("t2", json!([a, b]))), Delta::Same);
        // One spec changes, one goes, one comes.
        let b2 = json!({"id": "b", "ready": true});
        let c = json!({"id": "c", "ready": true});
        let d = changed(sent.delta(&doc("t2", json!([b2, c]))));
        let d: Value = serde_json::from_str(&d).unwrap();
        assert_eq!(d["specs"], json!([b2, c]));
        assert_eq!(d["removed"], json!(["a"]));
        assert_eq!(d["order"], json!(["b", "c"]));
        assert!(d.get("set").is_none());
        assert_eq!(sent.delta("not json"), Delta::Whole);
    }

    #[test]
    fn a_field_left_out_is_cleared() {
        let mut sent = Sent::default();
        let with = json!({"written": "t1", "releases": [{"name": "shop"}], "specs": []});
        let without = json!({"written": "t1", "specs": []});
        sent.delta(&with.to_string());
        assert_eq!(
            sent.delta(&without.to_string()),
            Delta::Changed(r#"{"set":{"releases":null}}"#.into())
        );
        assert_eq!(sent.delta(&without.to_string()), Delta::Same);
    }
}
