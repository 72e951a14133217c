//! How an error message shows what the user wrote: bounded, whatever its size.

use toml::de::DeValue;

/// How much of a user's string a message shows: a multi-megabyte value must still give a
/// one-line error.
const SHOWN_CHARS: usize = 64;

pub(super) fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A user's string in a message: quoted (escapes as Rust's `{:?}`), and cut after
/// [`SHOWN_CHARS`] characters with its full length in bytes.
pub(super) fn q(s: &str) -> String {
    match head(s) {
        None => format!("{s:?}"),
        Some(head) => format!("{head:?}… ({} bytes)", s.len()),
    }
}

/// A user's key in a message (between backticks, unquoted), cut like [`q`].
pub(super) fn short(s: &str) -> String {
    match head(s) {
        None => s.to_string(),
        Some(head) => format!("{head}… ({} bytes)", s.len()),
    }
}

/// The first [`SHOWN_CHARS`] characters of a longer `s`; `None` when `s` is shown whole.
fn head(s: &str) -> Option<String> {
    s.chars().nth(SHOWN_CHARS)?;
    Some(s.chars().take(SHOWN_CHARS).collect())
}

/// The known word `key` is a near miss of, if any.
pub(super) fn suggest<'k>(key: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    // Known keys are short: a long key is no near miss (and similarity is quadratic).
    if key.len() > SHOWN_CHARS {
        return None;
    }
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(key, k), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}
