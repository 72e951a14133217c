//! Variables (`.driftless.toml` `[vars]`, `--var`, `--vars-file`): `${name}` in a spec
//! value is replaced by the variable's value, strictly. An unset variable is an error at
//! its place, never an empty string (Flux's `postBuild.substitute` made it empty, and a
//! typo deployed `image: :latest`); `$${name}` writes a literal `${name}`; anything that
//! is not `${` + a name + `}` (`$HOME`, `${HOME:-x}`, `$(date)`) is left as written, so
//! most shell in a ConfigMap needs no escaping. An object annotated
//! `driftless.dev/substitute: disabled` is not read for variables at all.
//!
//! Only values are substituted, never keys, and only in files read as text: a SOPS
//! file's values are secret and stay exactly as decrypted.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// The variables of a tree: its `[vars]`, overridden by the command line's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Vars(pub BTreeMap<String, String>);

/// A `${name}` that no variable sets: the byte offset of its `$` in the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unset {
    pub offset: usize,
    pub name: String,
}

impl Unset {
    pub fn message(&self) -> String {
        let n = &self.name;
        if n.starts_with("cluster.") {
            return format!(
                "variable `{n}` is not set: the cluster served (--cluster, declared in --clusters FILE) has no such {}",
                match n.as_str() {
                    "cluster.name" => "name",
                    _ => "label",
                }
            );
        }
        format!(
            "variable `{n}` is not set: give it in .driftless.toml [vars], with --var {n}=VALUE or --vars-file (`$${{{n}}}` writes a literal `${{{n}}}`)"
        )
    }
}

/// Whether `name` can be a variable: a letter or `_`, then letters, digits and `_`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` can be referred to: a variable's name, or one of the served cluster's
/// (`cluster.name`, `cluster.labels.KEY`, KEY a label key).
fn is_reference(name: &str) -> bool {
    is_name(name)
        || name == "cluster.name"
        || name.strip_prefix("cluster.labels.").is_some_and(|key| {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        })
}

/// The reference starting at `text[i..]` (which starts with `${`): its name and the byte
/// length of the whole `${name}`.
fn reference(text: &str, i: usize) -> Option<(&str, usize)> {
    let rest = text.get(i + 2..)?;
    let end = rest.find('}')?;
    let name = &rest[..end];
    is_reference(name).then_some((name, end + 3))
}

impl Vars {
    /// `text` with its references replaced; borrowed when it has none (most values).
    pub(crate) fn expand<'t>(&self, text: &'t str) -> Result<Cow<'t, str>, Vec<Unset>> {
        if !text.contains("${") {
            return Ok(Cow::Borrowed(text));
        }
        let mut out = String::with_capacity(text.len());
        let mut unset = Vec::new();
        let mut i = 0;
        while let Some(found) = text[i..].find('$') {
            let at = i + found;
            out.push_str(&text[i..at]);
            let rest = &text[at..];
            if rest.starts_with("$${") {
                // The escape: `$${` is a literal `${`.
                out.push_str("${");
                i = at + 3;
            } else if let Some((name, len)) = rest
                .starts_with("${")
                .then(|| reference(text, at))
                .flatten()
            {
                match self.0.get(name) {
                    Some(v) => out.push_str(v),
                    None => unset.push(Unset {
                        offset: at,
                        name: name.to_string(),
                    }),
                }
                i = at + len;
            } else {
                out.push('$');
                i = at + 1;
            }
        }
        out.push_str(&text[i..]);
        match unset.is_empty() {
            true => Ok(Cow::Owned(out)),
            false => Err(unset),
        }
    }

    /// Whether `text` is one reference and nothing else (`${replicas}`): in plain YAML
    /// its value is then read as YAML reads a plain scalar, a number a number.
    pub(crate) fn whole_reference(text: &str) -> bool {
        text.starts_with("${") && reference(text, 0).is_some_and(|(_, len)| len == text.len())
    }
}

/// A `--vars-file` that cannot be used, in our words.
#[derive(Debug, thiserror::Error)]
pub enum VarsFileError {
    #[error("vars file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
}

/// The variables of a `--vars-file`: a TOML table of `NAME = "value"`.
pub fn read_file(path: &std::path::Path) -> Result<BTreeMap<String, String>, VarsFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| VarsFileError::Read {
        path: shown.clone(),
        source,
    })?;
    let at = |offset: usize, message: String| {
        let (line, column) = super::line_column(&text, offset);
        VarsFileError::Invalid {
            path: shown.clone(),
            line,
            column,
            message,
        }
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        at(offset, e.message().trim().to_string())
    })?;
    let mut out = BTreeMap::new();
    for (name, value) in table {
        let offset = text.find(name.as_str()).unwrap_or(0);
        if !is_name(&name) {
            return Err(at(
                offset,
                format!(
                    "`{name}` is not a variable name: a letter or `_`, then letters, digits and `_`"
                ),
            ));
        }
        match value {
            toml::Value::String(v) => {
                out.insert(name, v);
            }
            other => {
                return Err(at(
                    offset,
                    format!(
                        "variable `{name}` must be a string (quote numbers: \"3\"), found {}",
                        other.type_str()
                    ),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars(
            [("cluster", "staging"), ("n", "3")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        )
    }

    #[test]
    fn references_are_replaced_and_escapes_kept_literal() {
        let v = vars();
        assert_eq!(v.expand("web-${cluster}").unwrap(), "web-staging");
        assert_eq!(v.expand("${cluster}/${n}").unwrap(), "staging/3");
        assert_eq!(v.expand("$${cluster}").unwrap(), "${cluster}");
        // Read left to right: a lone `$`, then the escape.
        assert_eq!(v.expand("$$${cluster}").unwrap(), "$${cluster}");
        assert!(matches!(v.expand("no refs"), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn what_is_not_a_reference_is_left_as_written() {
        let v = vars();
        for text in [
            "$HOME",
            "${HOME:-/root}",
            "$(date)",
            "${ spaced }",
            "${1x}",
            "${unclosed",
            "cost: 5$",
            "$$",
        ] {
            assert_eq!(v.expand(text).unwrap(), text, "{text}");
        }
    }

    #[test]
    fn an_unset_variable_is_an_error_at_its_dollar() {
        let errs = vars()
            .expand("a ${cluster} ${missing} ${also}")
            .unwrap_err();
        assert_eq!(
            errs,
            vec![
                Unset {
                    offset: 13,
                    name: "missing".into()
                },
                Unset {
                    offset: 24,
                    name: "also".into()
                }
            ]
        );
        assert!(errs[0].message().contains("--var missing=VALUE"));
    }

    #[test]
    fn a_whole_reference_is_told_apart() {
        assert!(Vars::whole_reference("${n}"));
        assert!(!Vars::whole_reference("${n}x"));
        assert!(!Vars::whole_reference("x${n}"));
        assert!(!Vars::whole_reference("${n}${n}"));
    }
}
