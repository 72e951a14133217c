//! The one YAML merge the rendering stage does as its peers do: maps merged key by key,
//! anything else (a list too) replaced by the overlay's. The peers differ only in what a
//! `null` in the overlay does, so that is the caller's to say.

use serde_json::Value;

/// What a `null` in the overlay does to what it lies over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// It replaces it, as any other value does (source-watcher's `Merge` strategy, an
    /// ApplicationSet generator's template over the set's).
    Replace,
    /// It leaves it as it is; a key the base does not hold is added, as null (Flux's
    /// `valuesFrom` under a HelmRelease's `values`, as driftless has merged them).
    Keep,
}

/// `from` merged over `into`: maps key by key, anything else replaced, `null` by `nulls`.
pub fn merge(into: &mut Value, from: Value, nulls: Nulls) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(slot) => merge(slot, v, nulls),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (_, Value::Null) if nulls == Nulls::Keep => {}
        (slot, v) => *slot = v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(base: Value, over: Value, nulls: Nulls) -> Value {
        let mut out = base;
        merge(&mut out, over, nulls);
        out
    }

    #[test]
    fn maps_merge_key_by_key_and_lists_are_replaced() {
        let base = json!({"a": {"x": 1, "y": [1, 2]}, "b": "keep"});
        let over = json!({"a": {"y": [3], "z": {"deep": true}}, "c": 4});
        let want = json!({"a": {"x": 1, "y": [3], "z": {"deep": true}}, "b": "keep", "c": 4});
        assert_eq!(merged(base.clone(), over.clone(), Nulls::Replace), want);
        assert_eq!(merged(base, over, Nulls::Keep), want);
        // A map over a scalar replaces it, and a scalar over a map.
        assert_eq!(
            merged(json!({"a": 1}), json!({"a": {"b": 2}}), Nulls::Replace),
            json!({"a": {"b": 2}})
        );
        assert_eq!(
            merged(json!({"a": {"b": 2}}), json!({"a": 1}), Nulls::Keep),
            json!({"a": 1})
        );
    }

    #[test]
    fn a_null_replaces_or_keeps_by_the_rule() {
        let base = json!({"a": {"x": 1}, "b": 2});
        let over = json!({"a": null, "b": {"c": null}, "new": null});
        assert_eq!(
            merged(base.clone(), over.clone(), Nulls::Replace),
            json!({"a": null, "b": {"c": null}, "new": null})
        );
        // Kept where the base holds the key, added as null where it does not.
        assert_eq!(
            merged(base.clone(), over, Nulls::Keep),
            json!({"a": {"x": 1}, "b": {"c": null}, "new": null})
        );
        assert_eq!(merged(base.clone(), Value::Null, Nulls::Keep), base);
        assert_eq!(merged(base, Value::Null, Nulls::Replace), Value::Null);
    }
}
