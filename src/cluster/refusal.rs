//! An apiserver's refusal in a line a person reads: the object, the field paths and the
//! reasons, without the Go values it dumps along with them. A 422 on a Job prints its
//! whole pod template (`Invalid value: core.PodTemplateSpec{ObjectMeta:...}`, 3 KB) and a
//! 1.20 apiserver's type error prints `&value.valueUnstructured{Value:true}`; what the
//! user needs is `spec.template: field is immutable` and `expected string, got boolean`.
//! The apiserver's own text stays at debug level.

/// Longer values than this are left out of a message: they are dumps, not values a
/// person wrote and would recognise.
const SHOWN_VALUE: usize = 64;
/// The most a refusal says: a message listing many causes is cut here.
const MAX_MESSAGE: usize = 600;

/// `message` with Go dumps taken out (see the module doc), cut to a readable length.
pub fn plain(message: &str) -> String {
    // Further lines are a Go diff of the object (a PVC's "spec is immutable"): the first
    // says what is wrong.
    let first = message.trim().lines().next().unwrap_or_default().trim_end();
    let mut text = without_long_values(without_patch_jargon(first));
    text = unstructured_types(&text);
    if text.chars().count() > MAX_MESSAGE {
        text = text.chars().take(MAX_MESSAGE).collect::<String>() + "…";
    }
    if text != message.trim() {
        tracing::debug!(apiserver = message, "refusal as the apiserver said it");
    }
    text
}

/// A server-side apply the apiserver cannot even type ("failed to create typed patch
/// object (/v1, Kind=ConfigMap) ns/x: .data.a: expected string, got ...") is about the
/// field it names: the field and what is wrong with it.
fn without_patch_jargon(message: &str) -> &str {
    match message.strip_prefix("failed to create typed patch object") {
        Some(rest) => rest.find(": .").map_or(message, |at| &rest[at + 2..]),
        None => message,
    }
}

/// `Invalid value: <value>: <reason>` keeps the value only when it is short; a long one
/// is a Go dump of the object (`core.PodTemplateSpec{...}`), and the reason alone says
/// what is wrong.
fn without_long_values(message: &str) -> String {
    const MARKERS: [&str; 2] = ["Invalid value: ", "Unsupported value: "];
    let mut out = String::with_capacity(message.len().min(1024));
    let mut rest = message;
    loop {
        let next = MARKERS
            .iter()
            .filter_map(|m| rest.find(m).map(|at| (at, m.len())))
            .min();
        let Some((at, marker_len)) = next else {
            out.push_str(rest);
            return out;
        };
        let value_start = at + marker_len;
        let value_len = value_end(&rest[value_start..]);
        let value = &rest[value_start..value_start + value_len];
        if value.chars().count() <= SHOWN_VALUE {
            out.push_str(&rest[..value_start + value_len]);
        } else {
            out.push_str(&rest[..at]);
            // The ": " after the value goes with it.
            let after = &rest[value_start + value_len..];
            rest = after.strip_prefix(": ").unwrap_or(after);
            continue;
        }
        rest = &rest[value_start + value_len..];
    }
}

/// Where a Go value printed with `%#v` or `%q` ends: at the first `: ` outside brackets
/// and quotes, or at the end of the text.
fn value_end(text: &str) -> usize {
    let mut depth = 0usize;
    let mut quoted = false;
    let mut escaped = false;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if quoted {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => quoted = true,
            b'{' | b'[' | b'(' => depth += 1,
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b' ') => return i,
            b',' if depth == 0 => return i,
            _ => {}
        }
    }
    text.len()
}

/// `&value.valueUnstructured{Value:true}` as the JSON type it holds (`boolean`): the
/// structured-merge-diff library's words for a value of the wrong type.
fn unstructured_types(message: &str) -> String {
    const MARKER: &str = "&value.valueUnstructured{Value:";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(MARKER) {
        out.push_str(&rest[..at]);
        let inner = &rest[at + MARKER.len()..];
        // The value, up to the `}` that closes the struct.
        let mut depth = 0usize;
        let mut end = inner.len();
        for (i, c) in inner.char_indices() {
            match c {
                '{' | '[' => depth += 1,
                '}' if depth == 0 => {
                    end = i;
                    break;
                }
                '}' | ']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        out.push_str(type_of_go_value(&inner[..end]));
        rest = inner.get(end + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

fn type_of_go_value(v: &str) -> &'static str {
    let v = v.trim();
    if v == "true" || v == "false" {
        "boolean"
    } else if v == "<nil>" {
        "null"
    } else if v.starts_with("map[") {
        "map"
    } else if v.starts_with("[]") {
        "list"
    } else if v.starts_with('"') {
        "string"
    } else if v.parse::<f64>().is_ok() {
        "number"
    } else {
        "a value of another type"
    }
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn a_go_dump_of_an_immutable_template_is_left_out() {
        let dump = format!(
            "core.PodTemplateSpec{{ObjectMeta:v1.ObjectMeta{{Name:\"\", Labels:map[string]string{{\"app\":\"x\"}}, Annotations:map[string]string(nil)}}, Spec:core.PodSpec{{Containers:[]core.Container{{core.Container{{Name:\"c\", Image:\"i:2\", Args:[]string{{\"--a=b: c\"}}}}}}{}}}}}",
            " ".repeat(40)
        );
        let m = format!(
            "Job.batch \"descheduler-job\" is invalid: spec.template: Invalid value: {dump}: field is immutable"
        );
        assert_eq!(
            plain(&m),
            "Job.batch \"descheduler-job\" is invalid: spec.template: field is immutable"
        );
        let two = format!(
            "Job.batch \"j\" is invalid: [spec.selector: Invalid value: {dump}: field is immutable, spec.template: Invalid value: {dump}: field is immutable]"
        );
        assert_eq!(
            plain(&two),
            "Job.batch \"j\" is invalid: [spec.selector: field is immutable, spec.template: field is immutable]"
        );
    }

    #[test]
    fn a_diff_on_further_lines_and_patch_jargon_are_left_out() {
        let pvc = "PersistentVolumeClaim \"files\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests for bound claims\n  core.PersistentVolumeClaimSpec{\n- \tAccessModes: []core.PersistentVolumeAccessMode{\"ReadWriteMany\"},\n  }\n";
        assert_eq!(
            plain(pvc),
            "PersistentVolumeClaim \"files\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests for bound claims"
        );
        assert_eq!(
            plain(
                "failed to create typed patch object: .spec.replica: field not declared in schema"
            ),
            ".spec.replica: field not declared in schema"
        );
        assert_eq!(
            plain(
                "failed to create typed patch object (/v1, Kind=ConfigMap) ns/prefs: .data.dark-mode: expected string, got &value.valueUnstructured{Value:true}"
            ),
            ".data.dark-mode: expected string, got boolean"
        );
    }

    #[test]
    fn short_values_a_person_wrote_stay() {
        let m = "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0";
        assert_eq!(plain(m), m);
        let m = "Service \"s\" is invalid: spec.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\"";
        assert_eq!(plain(m), m);
    }

    #[test]
    fn a_type_error_names_the_type() {
        assert_eq!(
            plain(
                "failed to create typed patch object: .data.dark-mode: expected string, got &value.valueUnstructured{Value:true}"
            ),
            ".data.dark-mode: expected string, got boolean"
        );
        assert_eq!(
            plain(
                ".spec.x: expected map, got &value.valueUnstructured{Value:[]interface {}{1, 2}}; .a: expected string, got &value.valueUnstructured{Value:3}"
            ),
            ".spec.x: expected map, got list; .a: expected string, got number"
        );
    }

    #[test]
    fn whatever_it_says_stays_one_readable_line() {
        let m = "x".repeat(5000);
        assert!(plain(&m).chars().count() <= 601);
        assert_eq!(plain("  plain words \n"), "plain words");
    }
}
