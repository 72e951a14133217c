//! Kubernetes name and label rules, as the apiserver applies them (apimachinery
//! `validation.IsDNS1123Label` and friends), so a bad name fails at validate time with a
//! position instead of at apply time without one.

const MAX_LABEL: usize = 63;
const MAX_SUBDOMAIN: usize = 253;

fn lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Not empty and at most `max` characters: both DNS forms check this first, each with
/// its own limit.
fn length(s: &str, max: usize) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > max {
        return Err(format!("must be at most {max} characters (is {})", s.len()));
    }
    Ok(())
}

/// RFC 1123 label: namespaces, most names. Returns why not, if not.
pub fn dns1123_label(s: &str) -> Result<(), String> {
    length(s, MAX_LABEL)?;
    if !s.chars().all(|c| lower_alnum(c) || c == '-') {
        return Err("must consist of lowercase letters, digits and '-'".into());
    }
    if !s.starts_with(lower_alnum) || !s.ends_with(lower_alnum) {
        return Err("must start and end with a lowercase letter or digit".into());
    }
    Ok(())
}

/// RFC 1035 label: Service names (a DNS-1123 label that starts with a letter).
pub fn dns1035_label(s: &str) -> Result<(), String> {
    dns1123_label(s)?;
    if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err("must start with a lowercase letter".into());
    }
    Ok(())
}

/// RFC 1123 subdomain: names of most other objects.
pub(crate) fn dns1123_subdomain(s: &str) -> Result<(), String> {
    length(s, MAX_SUBDOMAIN)?;
    for part in s.split('.') {
        if part.is_empty() || !part.chars().all(|c| lower_alnum(c) || c == '-') {
            return Err("must consist of lowercase letters, digits, '-' and '.'".into());
        }
        if !part.starts_with(lower_alnum) || !part.ends_with(lower_alnum) {
            return Err(
                "each '.'-separated part must start and end with a lowercase letter or digit"
                    .into(),
            );
        }
    }
    Ok(())
}

/// How the apiserver checks an object's `metadata.name`, which depends on its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// An RFC 1123 subdomain: most kinds.
    Subdomain,
    /// Any path segment: RBAC's Roles, ClusterRoles and their bindings, whose names are
    /// often `system:...` or `<namespace>:<name>`.
    PathSegment,
}

impl NameRule {
    /// The rule for objects of `kind` in `api_version` (`GROUP/VERSION` or `VERSION`).
    pub fn of(api_version: &str, kind: &str) -> NameRule {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if group == "rbac.authorization.k8s.io"
            && matches!(
                kind,
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"
            )
        {
            NameRule::PathSegment
        } else {
            NameRule::Subdomain
        }
    }

    pub fn check(self, name: &str) -> Result<(), String> {
        match self {
            NameRule::Subdomain => dns1123_subdomain(name),
            NameRule::PathSegment => path_segment(name),
        }
    }
}

/// A name that can stand as one segment of a URL path, as the apiserver requires of RBAC
/// names: not empty, not `.` or `..`, no `/` or `%`. Control characters are refused too
/// (no apiserver check allows them through a real client).
pub(crate) fn path_segment(s: &str) -> Result<(), String> {
    length(s, MAX_SUBDOMAIN)?;
    if s == "." || s == ".." {
        return Err("may not be '.' or '..'".into());
    }
    if s.contains(['/', '%']) {
        return Err("may not contain '/' or '%'".into());
    }
    if s.chars().any(char::is_control) {
        return Err("may not contain control characters".into());
    }
    Ok(())
}

fn label_name_part(s: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if s.is_empty() || s.len() > MAX_LABEL {
        return Err(format!("name part must be 1-{MAX_LABEL} characters"));
    }
    if !s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        || !s.starts_with(alnum)
        || !s.ends_with(alnum)
    {
        return Err("name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric".into());
    }
    Ok(())
}

/// A label key: `[prefix/]name`, prefix a DNS-1123 subdomain.
pub fn label_key(s: &str) -> Result<(), String> {
    match s.split_once('/') {
        Some((prefix, name)) => {
            dns1123_subdomain(prefix).map_err(|e| format!("prefix {e}"))?;
            label_name_part(name)
        }
        None => label_name_part(s),
    }
}

/// The domain of driftless's own label and annotation keys (`driftless.dev/instance`,
/// `localservice.driftless.dev/node`, ...).
pub(crate) const DRIFTLESS_DOMAIN: &str = "driftless.dev";

/// Whether a label or annotation key is one driftless sets itself: every key under
/// `driftless.dev` or a subdomain of it. A spec that set one could claim another
/// instance's objects, or make driftless's own selection wrong. `app.kubernetes.io/*`
/// keys are the manifest author's, never ours.
pub(crate) fn is_driftless_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, _)) => {
            prefix == DRIFTLESS_DOMAIN
                || prefix
                    .strip_suffix(DRIFTLESS_DOMAIN)
                    .is_some_and(|sub| sub.ends_with('.'))
        }
        None => false,
    }
}

/// A label value: empty, or up to 63 alphanumerics, '-', '_', '.' starting and ending
/// with an alphanumeric.
pub fn label_value(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    label_name_part(s).map_err(|e| e.replacen("name part", "value", 1))
}

/// A stable 32-bit FNV-1a hash, hex: names derived from it must not change between
/// releases, so no std hasher (whose algorithm may change) is used.
pub(crate) fn short_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// 64-bit FNV-1a, for content hashes that are stored (inventory, revision ids) and so
/// must be the same in every release.
pub(crate) fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Turns `base-suffix` into a valid DNS-1035 label of at most `max` characters, stable
/// and unique per input: used unchanged when already valid; otherwise sanitised
/// (lowercased, invalid characters to '-'), cut to fit, and given a hash of the
/// original suffix so two inputs that sanitise alike stay apart.
pub(crate) fn joined_label(base: &str, suffix: &str, max: usize) -> String {
    let joined = format!("{base}-{suffix}");
    if joined.len() <= max && dns1035_label(&joined).is_ok() {
        return joined;
    }
    let hash = short_hash(suffix);
    let mut clean: String = suffix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if lower_alnum(c) { c } else { '-' })
        .collect();
    while clean.contains("--") {
        clean = clean.replace("--", "-");
    }
    let clean = clean.trim_matches('-');
    // base + '-' + clean + '-' + hash
    let room = max.saturating_sub(base.len() + 2 + hash.len());
    let clean: String = clean.chars().take(room).collect();
    let clean = clean.trim_end_matches('-');
    if clean.is_empty() {
        format!("{base}-{hash}")
    } else {
        format!("{base}-{clean}-{hash}")
    }
}

/// A label value standing for `s`: `s` itself when valid, else a sanitised, hashed form.
pub(crate) fn as_label_value(s: &str) -> String {
    if label_value(s).is_ok() {
        return s.to_string();
    }
    let hash = short_hash(s);
    let clean: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let clean: String = clean.chars().take(MAX_LABEL - 1 - hash.len()).collect();
    let clean = clean.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if clean.is_empty() {
        hash
    } else {
        format!("{clean}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(dns1123_label("cloud-ide").is_ok());
        assert!(dns1123_label("1abc").is_ok());
        assert!(dns1035_label("1abc").is_err());
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns1123_label(bad).is_err(), "{bad:?}");
        }
        assert!(dns1123_subdomain("infra.sealyun.com").is_ok());
        assert!(dns1123_subdomain("a..b").is_err());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(label_key("app").is_ok());
        assert!(label_key("topology.kubernetes.io/zone").is_ok());
        assert!(label_key("Bad Key").is_err());
        assert!(label_key("/x").is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("my_app.v1").is_ok());
        assert!(label_value("-x").is_err());
        assert!(label_value(&"x".repeat(64)).is_err());
    }

    #[test]
    fn driftless_keys() {
        use crate::object::ownership;
        for key in [
            ownership::INSTANCE,
            ownership::SPEC,
            ownership::NODE,
            ownership::NODE_NAME,
        ] {
            assert!(is_driftless_key(key), "{key}");
        }
        for key in [
            "app",
            "app.kubernetes.io/name",
            "app.kubernetes.io/managed-by",
            "app.kubernetes.io/instance",
            "notdriftless.dev/x",
            "driftless.dev.example.com/x",
        ] {
            assert!(!is_driftless_key(key), "{key}");
        }
    }

    #[test]
    fn joined_label_keeps_valid_names_and_fixes_the_rest() {
        assert_eq!(joined_label("demo", "node-1", 63), "demo-node-1");
        let dotted = joined_label("demo", "ip-10-0-0-1.ec2.internal", 63);
        assert!(dns1035_label(&dotted).is_ok(), "{dotted}");
        assert!(
            dotted.starts_with("demo-ip-10-0-0-1-ec2-internal-"),
            "{dotted}"
        );
        // Stable.
        assert_eq!(dotted, joined_label("demo", "ip-10-0-0-1.ec2.internal", 63));
        // Unique where sanitising alone would collide.
        assert_ne!(
            joined_label("demo", "a.b", 63),
            joined_label("demo", "a_b", 63)
        );
        let long = joined_label("demo", &"n".repeat(200), 63);
        assert!(long.len() <= 63 && dns1035_label(&long).is_ok(), "{long}");
        assert_ne!(long, joined_label("demo", &"n".repeat(201), 63));
    }

    #[test]
    fn label_values_for_any_node_name() {
        assert_eq!(as_label_value("node-1"), "node-1");
        for name in [
            "a.very.long.node.name.".repeat(10),
            "ünïcode".to_string(),
            "-".to_string(),
        ] {
            let v = as_label_value(&name);
            assert!(label_value(&v).is_ok(), "{name} -> {v}");
            assert!(!v.is_empty());
        }
    }
}
