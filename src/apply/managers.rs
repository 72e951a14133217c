//! `[[ignore]]` rules' `managers` (`.driftless.toml`): fields another field manager owns
//! in the live object are left to it, as `ignore-fields` leaves the fields it names.
//! Its managedFields (`fieldsV1`) are read against our body into JSON pointers, which
//! are then left out as ignored pointers are: server-side apply drops our claim to a
//! field we stop sending and keeps the field while its other manager owns it.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::object::pointer;

/// Pointers into `body` of the fields that one of `managers` owns in `live` (a whole
/// object, with its `metadata.managedFields`). A list item is found by its key
/// (`k:{"name":"app"}`); its key fields are never among them, so what is left of the
/// item still names it. Set members (`v:`) and atomic list positions (`i:`) are left
/// alone.
pub(super) fn owned_by(live: &Value, managers: &[String], body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return out;
    };
    for e in entries {
        let owner = e["manager"].as_str().unwrap_or_default();
        if !managers.iter().any(|m| m == owner) {
            continue;
        }
        if let Some(fields) = e["fieldsV1"].as_object() {
            walk(fields, body, String::new(), &[], &mut out);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn walk(
    fields: &Map<String, Value>,
    body: &Value,
    at: String,
    keys: &[&str],
    out: &mut Vec<String>,
) {
    for (step, sub) in fields {
        let leaf = sub.as_object().is_none_or(Map::is_empty);
        if let Some(name) = step.strip_prefix("f:") {
            if keys.contains(&name) {
                continue;
            }
            let Some(child) = body.get(name) else {
                continue;
            };
            let here = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
            match (leaf, sub.as_object()) {
                (false, Some(sub)) => walk(sub, child, here, &[], out),
                _ => out.push(here),
            }
        } else if let Some(key) = step.strip_prefix("k:") {
            let (Ok(Value::Object(key)), Some(items), Some(sub)) = (
                serde_json::from_str::<Value>(key),
                body.as_array(),
                sub.as_object(),
            ) else {
                continue;
            };
            let found = items
                .iter()
                .position(|item| key.iter().all(|(k, v)| item.get(k) == Some(v)));
            if let Some(i) = found {
                let names: Vec<&str> = key.keys().map(String::as_str).collect();
                walk(sub, &items[i], format!("{at}/{i}"), &names, out);
            }
        }
    }
}

/// `body` without what `pointers` name; borrowed when they name nothing in it.
pub(super) fn without<'a>(body: &'a Value, pointers: &[String]) -> Cow<'a, Value> {
    if !pointers.iter().any(|p| body.pointer(p).is_some()) {
        return Cow::Borrowed(body);
    }
    let mut sent = body.clone();
    for p in pointers {
        pointer::remove(&mut sent, p);
    }
    Cow::Owned(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live() -> Value {
        json!({"metadata": {"managedFields": [
            {"manager": "driftless", "operation": "Apply",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}},
            {"manager": "vpa-recommender", "operation": "Update",
             "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                 "k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:resources": {"f:requests": {"f:cpu": {}}}}
             }}}}}},
            {"manager": "hpa", "operation": "Update",
             "fieldsV1": {"f:spec": {"f:replicas": {}}, "f:metadata": {"f:annotations": {"f:x~y/z": {}}}}}
        ]}})
    }

    fn body() -> Value {
        json!({"metadata": {"name": "web", "annotations": {"x~y/z": "1"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "side", "image": "s"},
            {"name": "app", "image": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ]}}}})
    }

    #[test]
    fn fields_of_the_named_managers_become_pointers_into_our_body() {
        let vpa = owned_by(&live(), &["vpa-recommender".into()], &body());
        assert_eq!(
            vpa,
            ["/spec/template/spec/containers/1/resources/requests/cpu"]
        );
        let hpa = owned_by(&live(), &["hpa".into()], &body());
        assert_eq!(hpa, ["/metadata/annotations/x~0y~1z", "/spec/replicas"]);
        assert!(owned_by(&live(), &["nobody".into()], &body()).is_empty());
    }

    #[test]
    fn a_list_item_keeps_its_key_and_the_rest_of_our_body_stays() {
        let b = body();
        let ptrs = owned_by(&live(), &["vpa-recommender".into(), "hpa".into()], &b);
        let sent = without(&b, &ptrs);
        assert_eq!(sent["spec"].get("replicas"), None);
        let app = &sent["spec"]["template"]["spec"]["containers"][1];
        assert_eq!(app["name"], "app");
        assert_eq!(app["resources"]["requests"], json!({"memory": "1Gi"}));
        assert!(matches!(without(&b, &[]), Cow::Borrowed(_)));
    }
}
