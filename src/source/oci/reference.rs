//! `oci://HOST/REPO[:TAG][@sha256:…]` references, and which tag or digest a source follows.

use std::fmt;

use super::OciError;

/// A repository in a registry, as `oci://HOST/REPO` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// `host[:port]`.
    pub registry: String,
    pub repository: String,
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)
    }
}

/// What a source follows in its repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Tag(String),
    /// The newest tag that is a semantic version within the range.
    Semver(semver::VersionReq),
    /// Pinned: never moves.
    Digest(String),
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Tag(t) => write!(f, "tag {t}"),
            Selector::Semver(r) => write!(f, "semver {r}"),
            Selector::Digest(d) => write!(f, "digest {d}"),
        }
    }
}

/// `oci://HOST/REPO[:TAG][@DIGEST]`: the repository, and the tag or digest when one is
/// given.
pub fn parse(text: &str) -> Result<(Repository, Option<Selector>), OciError> {
    let bad = |why: &str| OciError::Reference(format!("{text:?}: {why}"));
    let rest = text
        .strip_prefix("oci://")
        .ok_or_else(|| bad("an OCI reference starts with oci://"))?;
    let (rest, digest) = match rest.split_once('@') {
        Some((r, d)) => (r, Some(check_digest(d).map_err(|e| bad(&e.to_string()))?)),
        None => (rest, None),
    };
    let (registry, path) = rest
        .split_once('/')
        .ok_or_else(|| bad("expected oci://HOST/REPO"))?;
    if registry.is_empty() || registry.contains(|c: char| c.is_whitespace() || c == '@') {
        return Err(bad("the registry host is missing or not valid"));
    }
    // A ':' after the last '/' is a tag; one before it belongs to the host's port.
    let (repository, tag) = match path.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (path, None),
    };
    let repo_ok = !repository.is_empty()
        && repository.split('/').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        });
    if !repo_ok {
        return Err(bad(
            "the repository is lowercase letters, digits, '.', '_', '-' and '/'",
        ));
    }
    if let Some(t) = tag {
        check_tag(t).map_err(|e| bad(&e.to_string()))?;
    }
    let selector = match (tag, digest) {
        (_, Some(d)) => Some(Selector::Digest(d)),
        (Some(t), None) => Some(Selector::Tag(t.to_string())),
        (None, None) => None,
    };
    Ok((
        Repository {
            registry: registry.to_string(),
            repository: repository.to_string(),
        },
        selector,
    ))
}

/// A tag or a digest that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{0:?} is not a tag")]
    Tag(String),
    #[error("{0:?} is not a digest (sha256: and 64 hex digits)")]
    Digest(String),
}

/// A tag as the distribution spec allows it: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn check_tag(tag: &str) -> Result<(), NameError> {
    let ok = (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    match ok {
        true => Ok(()),
        false => Err(NameError::Tag(tag.to_string())),
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn check_digest(digest: &str) -> Result<String, NameError> {
    let digest = digest.to_ascii_lowercase();
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(digest),
        _ => Err(NameError::Digest(digest)),
    }
}

/// The newest tag that is a version within `range`; a leading `v` is allowed, as Flux
/// allows it. Pre-releases count only when the range names one, as semver ranges mean.
pub(crate) fn newest_matching<'t>(
    tags: &'t [String],
    range: &semver::VersionReq,
) -> Option<&'t str> {
    tags.iter()
        .filter_map(|t| {
            let v = semver::Version::parse(t.strip_prefix('v').unwrap_or(t)).ok()?;
            range.matches(&v).then_some((v, t.as_str()))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_with_ports_tags_and_digests() {
        let (repo, sel) = parse("oci://127.0.0.1:5000/team/app:v1.2.0").unwrap();
        assert_eq!(repo.registry, "127.0.0.1:5000");
        assert_eq!(repo.repository, "team/app");
        assert_eq!(sel, Some(Selector::Tag("v1.2.0".into())));
        assert_eq!(repo.to_string(), "oci://127.0.0.1:5000/team/app");

        let (repo, sel) = parse("oci://localhost:5000/app").unwrap();
        assert_eq!(repo.repository, "app");
        assert_eq!(sel, None);

        let d = format!("sha256:{}", "a".repeat(64));
        let (_, sel) = parse(&format!("oci://r.example/app:latest@{d}")).unwrap();
        assert_eq!(sel, Some(Selector::Digest(d)));

        for bad in [
            "https://r.example/app",
            "oci://r.example",
            "oci:///app",
            "oci://r.example/App",
            "oci://r.example/app:",
            "oci://r.example/app:-x",
            "oci://r.example//app",
            "oci://r.example/app@sha256:abc",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn semver_picks_the_newest_tag_in_range() {
        let tags: Vec<String> = [
            "latest",
            "1.0.0",
            "v1.4.2",
            "1.10.0",
            "2.0.0",
            "1.11.0-rc.1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let req = |r: &str| semver::VersionReq::parse(r).unwrap();
        assert_eq!(
            newest_matching(&tags, &req(">=1.0.0, <2.0.0")),
            Some("1.10.0")
        );
        assert_eq!(newest_matching(&tags, &req("~1.4")), Some("v1.4.2"));
        assert_eq!(newest_matching(&tags, &req("*")), Some("2.0.0"));
        assert_eq!(newest_matching(&tags, &req(">=3")), None);
    }
}
