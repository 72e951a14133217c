//! JSON pointers (RFC 6901) into objects: what `ignore-fields` names. Written pointers
//! were checked by `spec::policy::check_pointer`; here any text is taken as it comes.

use serde_json::Value;

/// The unescaped steps of `pointer` (`/a~1b/0` → `["a/b", "0"]`); empty for "".
pub fn steps(pointer: &str) -> Vec<String> {
    match pointer.strip_prefix('/') {
        None => Vec::new(),
        Some(rest) => rest
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect(),
    }
}

/// The value under `parent` at `step`: a map's key, or a list's index.
fn child_mut<'v>(parent: &'v mut Value, step: &str) -> Option<&'v mut Value> {
    match parent {
        Value::Object(m) => m.get_mut(step),
        Value::Array(a) => a.get_mut(step.parse::<usize>().ok()?),
        _ => None,
    }
}

/// Removes what `pointer` names from `body` (a list item is taken out of its list), and
/// returns it; `None` when there is nothing there.
pub fn remove(body: &mut Value, pointer: &str) -> Option<Value> {
    let steps = steps(pointer);
    let (last, parents) = steps.split_last()?;
    let mut here = body;
    for step in parents {
        here = child_mut(here, step)?;
    }
    match here {
        Value::Object(m) => m.remove(last.as_str()),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok().filter(|i| *i < a.len())?;
            Some(a.remove(i))
        }
        _ => None,
    }
}

/// Sets what `pointer` names in `body` to `value`, creating the maps on the way; `false`
/// when the way passes through something else (a list without that item, a scalar).
pub fn set(body: &mut Value, pointer: &str, value: Value) -> bool {
    let steps = steps(pointer);
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut here = body;
    for step in parents {
        if let Value::Object(m) = here {
            here = m
                .entry(step.as_str())
                .or_insert_with(|| Value::Object(Default::default()));
        } else {
            match child_mut(here, step) {
                Some(next) => here = next,
                None => return false,
            }
        }
    }
    match here {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            true
        }
        Value::Array(a) => match last.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
            Some(slot) => {
                *slot = value;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// Whether `pointer` is `under` or lies below it (`/spec/replicas` is under `/spec`).
pub(crate) fn is_under(pointer: &str, under: &str) -> bool {
    pointer == under
        || pointer
            .strip_prefix(under)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_remove_and_set_maps_and_list_items() {
        let mut body = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}},
            "metadata": {"annotations": {"a/b": "1"}}});
        assert_eq!(remove(&mut body, "/spec/replicas"), Some(json!(3)));
        assert_eq!(remove(&mut body, "/spec/replicas"), None);
        assert_eq!(
            remove(&mut body, "/spec/template/spec/containers/1/image"),
            Some(json!("y"))
        );
        assert_eq!(
            remove(&mut body, "/metadata/annotations/a~1b"),
            Some(json!("1"))
        );
        assert_eq!(remove(&mut body, "/spec/template/spec/containers/7"), None);
        assert_eq!(remove(&mut body, "/nothing/here"), None);
        assert_eq!(
            body,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a", "image": "x"}, {"name": "b"}]}}},
                "metadata": {"annotations": {}}})
        );
        assert!(set(&mut body, "/spec/replicas", json!(5)));
        assert!(set(&mut body, "/data/new", json!("v")));
        assert!(set(
            &mut body,
            "/spec/template/spec/containers/1/image",
            json!("z")
        ));
        assert!(!set(
            &mut body,
            "/spec/template/spec/containers/9/image",
            json!("z")
        ));
        assert_eq!(body["spec"]["replicas"], 5);
        assert_eq!(body["data"]["new"], "v");
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"][1]["image"],
            "z"
        );
    }

    #[test]
    fn under_means_the_same_field_or_below_it() {
        assert!(is_under("/spec/replicas", "/spec"));
        assert!(is_under("/spec", "/spec"));
        assert!(!is_under("/specs", "/spec"));
        assert!(!is_under("/spec", "/spec/replicas"));
    }
}
