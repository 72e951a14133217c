//! Field access. kstatus's GetIntField/GetStringField fall back to a default on a missing or
//! wrongly typed field; its NestedInt64/NestedString (used for the generation and deletion
//! fields) and its condition decoding fail instead. Both flavours are here. JSON null counts
//! as absent.

use serde_json::{Map, Value};

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Ok(None)` when the field (or an ancestor) is absent or null; `Err` when an ancestor is
/// not an object.
pub(super) fn lookup<'a>(obj: &'a Value, path: &[&str]) -> Result<Option<&'a Value>, String> {
    let mut current = obj;
    for (depth, key) in path.iter().enumerate() {
        match current {
            Value::Object(map) => match map.get(*key) {
                None | Some(Value::Null) => return Ok(None),
                Some(next) => current = next,
            },
            other => {
                return Err(format!(
                    "{} is {}, expected an object",
                    path[..depth].join("."),
                    type_name(other)
                ));
            }
        }
    }
    Ok(Some(current))
}

/// The field, or `None` however it is missing (an ancestor of the wrong type included).
pub(super) fn lenient<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    lookup(obj, path).ok().flatten()
}

pub(super) fn lenient_int(obj: &Value, path: &[&str], default: i64) -> i64 {
    lenient(obj, path)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

pub(super) fn lenient_str<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    lenient(obj, path).and_then(Value::as_str)
}

pub(super) fn strict_int(obj: &Value, path: &[&str]) -> Result<Option<i64>, String> {
    match lookup(obj, path)? {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            format!(
                "{} is {}, expected an integer",
                path.join("."),
                type_name(v)
            )
        }),
    }
}

pub(super) fn strict_str<'a>(obj: &'a Value, path: &[&str]) -> Result<Option<&'a str>, String> {
    match lookup(obj, path)? {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .map(Some)
            .ok_or_else(|| format!("{} is {}, expected a string", path.join("."), type_name(v))),
    }
}

/// One entry of `status.conditions`; absent string fields are "".
#[derive(Debug, Clone, Copy)]
pub(super) struct Condition<'a> {
    pub type_: &'a str,
    pub status: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    pub last_transition_time: Option<&'a str>,
}

/// Decodes `status.conditions` the way kstatus does (it fails on a malformed list).
pub(super) fn conditions(obj: &Value) -> Result<Vec<Condition<'_>>, String> {
    let Some(list) = lookup(obj, &["status", "conditions"])? else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = list else {
        return Err(format!(
            "status.conditions is {}, expected an array",
            type_name(list)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(map) = item else {
                return Err(format!(
                    "status.conditions[{i}] is {}, expected an object",
                    type_name(item)
                ));
            };
            Ok(Condition {
                type_: condition_field(map, i, "type")?,
                status: condition_field(map, i, "status")?,
                reason: condition_field(map, i, "reason")?,
                message: condition_field(map, i, "message")?,
                last_transition_time: map.get("lastTransitionTime").and_then(Value::as_str),
            })
        })
        .collect()
}

pub(super) fn condition_field<'a>(
    map: &'a Map<String, Value>,
    i: usize,
    key: &str,
) -> Result<&'a str, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "status.conditions[{i}].{key} is {}, expected a string",
            type_name(other)
        )),
    }
}

pub(super) fn find_condition<'c, 'a>(
    conditions: &'c [Condition<'a>],
    type_: &str,
    status: &str,
) -> Option<&'c Condition<'a>> {
    conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
}

pub(super) fn non_empty<'a>(s: &'a str, fallback: &'a str) -> &'a str {
    if s.is_empty() { fallback } else { s }
}

/// `base` followed by `": detail"` when there is a detail.
pub(super) fn with_detail(base: impl Into<String>, detail: &str) -> String {
    let mut message = base.into();
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(detail);
    }
    message
}
