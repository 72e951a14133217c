//! SOPS-encrypted YAML (getsops/sops's format, age recipients), decrypted in memory before
//! anything else reads the file (docs/src/sops.md).
//!
//! A YAML file whose document has a top-level `sops` map is one. Its data key is opened
//! with the age identities given ([`AgeKeys`]), each `ENC[AES256_GCM,...]` value is
//! decrypted and authenticated with its path, and sops's MAC over every value is checked,
//! so a value changed, moved, added or removed since sops wrote the file is refused. The
//! file is then read as plain YAML from a text that keeps every line where it was: each
//! encrypted value replaced in place by its plaintext (a double-quoted string, a number or
//! a boolean, on the same line), the `sops` block blanked out. Errors of the decrypted
//! documents therefore point at the encrypted file's own lines.
//!
//! Nothing decrypted is written anywhere: the file's specs are marked sealed (`render` and
//! `diff` mask their values with [`mask_sealed`]; the daemon's reports never carry object
//! values), and the plaintexts are cut out of the file's error messages.

mod keys;
mod metadata;
mod values;
mod walk;

pub use keys::AgeKeys;

use std::ops::Range;

use serde_json::Value;
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

use super::SpecError;
use super::extract::{FileCtx, Found};
use super::vars::Vars;
use walk::Node;

/// A problem of a SOPS file, at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    at: usize,
    message: String,
}

/// A decrypted file: its text for the YAML reader, and the plaintexts to keep out of
/// messages.
struct Decrypted {
    text: Zeroizing<String>,
    secrets: Vec<Zeroizing<String>>,
}

/// Reads one YAML spec file, decrypting it first when it is a SOPS file (its specs then
/// come back sealed).
/// Variables are substituted in a file read as written, never in a decrypted one: a
/// secret's value is exactly what was encrypted.
pub(super) fn file(
    path: &str,
    text: &str,
    keys: &AgeKeys,
    vars: Option<&Vars>,
) -> (Vec<Found>, Vec<SpecError>) {
    // Most files are not SOPS files, nor parts of one: they skip the second parse.
    if !text.contains("sops") && !text.contains("ENC[") {
        return super::yaml::file(path, text, vars);
    }
    match decrypt(text, keys) {
        Ok(None) => refuse_unread_metadata(super::yaml::file(path, text, vars)),
        Err(failures) => {
            let ctx = FileCtx::new(path, text);
            let errors = failures
                .into_iter()
                .map(|f| SpecError {
                    at: ctx.loc(f.at),
                    message: f.message,
                })
                .collect();
            (Vec::new(), errors)
        }
        Ok(Some(plain)) => {
            let (mut found, mut errors) = super::yaml::file(path, &plain.text, None);
            for f in &mut found {
                f.policy.sealed = true;
            }
            for e in &mut errors {
                e.message = redact(&e.message, &plain.secrets);
            }
            (found, errors)
        }
    }
}

/// A document that was not read as part of a SOPS file but still has a `sops` map (one
/// the YAML reader takes in a form the SOPS reader does not), or a value sops encrypted
/// (its `sops` block cut off or deleted), is an error: never an object sent to the cluster
/// with its values still encrypted.
fn refuse_unread_metadata(
    (found, mut errors): (Vec<Found>, Vec<SpecError>),
) -> (Vec<Found>, Vec<SpecError>) {
    let mut kept = Vec::with_capacity(found.len());
    for f in found {
        let problem = match &f.body {
            super::SpecBody::Manifest(m) if m.rest.get("sops").is_some_and(Value::is_object) => {
                Some("this document has a `sops` block that cannot be read as SOPS metadata")
            }
            super::SpecBody::Manifest(m)
                if m.rest
                    .values()
                    .chain(m.metadata.rest.values())
                    .any(encrypted_inside) =>
            {
                Some(
                    "this document holds values sops encrypted, but no `sops` block to decrypt them with",
                )
            }
            _ => None,
        };
        match problem {
            Some(p) => errors.push(SpecError {
                at: f.at,
                message: format!("{p}; re-encrypt the file with sops"),
            }),
            None => kept.push(f),
        }
    }
    (kept, errors)
}

/// Whether a value holds a string in sops's encrypted form.
fn encrypted_inside(v: &Value) -> bool {
    match v {
        Value::String(s) => s.starts_with("ENC[AES256_GCM,"),
        Value::Array(items) => items.iter().any(encrypted_inside),
        Value::Object(map) => map.values().any(encrypted_inside),
        _ => false,
    }
}

/// `message` with every decrypted value cut out, as written and as messages quote it
/// (escaped, and cut after 64 characters).
fn redact<S: AsRef<str>>(message: &str, secrets: &[S]) -> String {
    let mut forms: Vec<String> = Vec::new();
    for s in secrets.iter().map(AsRef::as_ref).filter(|s| !s.is_empty()) {
        let escaped = format!("{:?}", s);
        let head: String = s.chars().take(64).collect();
        let head = format!("{head:?}");
        for form in [
            s.to_string(),
            escaped[1..escaped.len() - 1].to_string(),
            head[1..head.len() - 1].to_string(),
        ] {
            if !form.is_empty() {
                forms.push(form);
            }
        }
    }
    // Longest first, so no part of a longer value is left behind a shorter one's mask.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let mut out = message.to_string();
    for form in &forms {
        if out.contains(form.as_str()) {
            out = out.replace(form.as_str(), "***");
        }
    }
    out
}

/// The plaintext of a SOPS file; `Ok(None)` when `text` is not one (or is not YAML the
/// parser takes: the YAML reader says why).
fn decrypt(text: &str, keys: &AgeKeys) -> Result<Option<Decrypted>, Vec<Failure>> {
    let Some(docs) = walk::documents(text) else {
        return Ok(None);
    };
    // sops reads its metadata from the first document and writes it into every one.
    let Some((at, block)) = docs.iter().flatten().find_map(|d| match d.get("sops") {
        Some((k, v @ Node::Map(..))) => Some((k.start(), v)),
        _ => None,
    }) else {
        return Ok(None);
    };
    let meta = metadata::read(block, at).map_err(|f| vec![f])?;
    let data_key = meta.data_key(keys, at).map_err(|f| vec![f])?;
    let mut pass = Pass {
        key: &data_key,
        meta: &meta,
        mac: Sha512::new(),
        path: Vec::new(),
        edits: Vec::new(),
        secrets: Vec::new(),
        failures: Vec::new(),
    };
    if meta.mac_only_encrypted {
        pass.mac.update(MAC_ONLY_ENCRYPTED_INIT);
    }
    for doc in docs.iter().flatten() {
        match doc {
            Node::Map(entries, _) => {
                for (k, v) in entries {
                    if k.as_str() == Some("sops") && matches!(v, Node::Map(..)) {
                        pass.edits.push((k.start()..v.end(), Edit::Blank));
                    } else {
                        pass.entry(k, v);
                    }
                }
            }
            other => pass.fail(
                other.start(),
                "a SOPS file's documents must be maps (sops refuses others)",
            ),
        }
    }
    if !pass.failures.is_empty() {
        return Err(pass.failures);
    }
    let computed: String = pass
        .mac
        .clone()
        .finalize()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let Some((mac, mac_at)) = &meta.mac else {
        return Err(vec![Failure {
            at,
            message: "SOPS metadata has no `mac`; is this a file sops wrote?".into(),
        }]);
    };
    match values::open_mac(mac, &data_key, &meta.lastmodified) {
        Ok(stored) if stored == computed => {}
        Ok(_) => {
            return Err(vec![Failure {
                at: *mac_at,
                message: "SOPS MAC mismatch: the file's values were changed, added, removed or \
                          reordered after sops encrypted it (edit it with `sops FILE`)"
                    .into(),
            }]);
        }
        Err(e) => {
            return Err(vec![Failure {
                at: *mac_at,
                message: format!("SOPS `mac`: {e}"),
            }]);
        }
    }
    Ok(Some(Decrypted {
        text: rebuild(text, pass.edits),
        secrets: pass.secrets,
    }))
}

/// sops's 32 bytes that start the MAC of a file with `mac_only_encrypted`, so that its MAC
/// never equals one over every value (`MACOnlyEncryptedInitialization` in sops.go).
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// A change to the file's text.
enum Edit {
    /// The plaintext in place of an encrypted value.
    Value(Zeroizing<String>),
    /// The `sops` block, turned to blank lines.
    Blank,
}

/// One walk over the data, in document order, as sops walks it.
struct Pass<'a> {
    key: &'a [u8; 32],
    meta: &'a metadata::Metadata,
    mac: Sha512,
    /// The map keys to the value at hand (a list's items share their list's).
    path: Vec<String>,
    edits: Vec<(Range<usize>, Edit)>,
    secrets: Vec<Zeroizing<String>>,
    failures: Vec<Failure>,
}

impl Pass<'_> {
    fn fail(&mut self, at: usize, message: impl Into<String>) {
        self.failures.push(Failure {
            at,
            message: message.into(),
        });
    }

    fn entry(&mut self, key: &Node, value: &Node) {
        let Node::Scalar(k) = key else {
            return self.fail(key.start(), "a SOPS file's map keys must be strings");
        };
        self.path.push(k.value.clone());
        self.value(value);
        self.path.pop();
    }

    fn value(&mut self, node: &Node) {
        match node {
            Node::Map(entries, _) => entries.iter().for_each(|(k, v)| self.entry(k, v)),
            Node::Seq(items, _) => items.iter().for_each(|i| self.value(i)),
            Node::Alias(at) => self.fail(
                *at,
                "aliases (*name) are not allowed in a SOPS file: sops writes none, and \
                 one would share a value between paths",
            ),
            Node::Scalar(s) => self.scalar(s),
        }
    }

    fn scalar(&mut self, s: &walk::Scalar) {
        let typed = values::typed(s);
        if typed == values::Typed::Null {
            return;
        }
        let encrypted = self.meta.rule.encrypts(&self.path);
        if !encrypted {
            if !self.meta.mac_only_encrypted
                && let Some(bytes) = values::mac_of_plain(s)
            {
                self.mac.update(&bytes);
            }
            return;
        }
        if typed != values::Typed::Str || !(s.value.is_empty() || values::is_encrypted(&s.value)) {
            return self.fail(
                s.range.start,
                format!(
                    "this value is not encrypted, but the file's SOPS rule ({}) says it must be: \
                     encrypt the file with sops",
                    self.rule_text()
                ),
            );
        }
        if s.value.is_empty() {
            // sops leaves empty strings as they are.
            return;
        }
        match values::decrypt(&s.value, self.key, &self.path) {
            Ok(plain) => {
                self.mac.update(&*plain.mac);
                if !plain.text.is_empty() {
                    self.secrets.push(plain.text);
                }
                self.edits.push((s.range.clone(), Edit::Value(plain.yaml)));
            }
            Err(e) => self.fail(s.range.start, e.to_string()),
        }
    }

    fn rule_text(&self) -> String {
        match &self.meta.rule {
            metadata::Rule::UnencryptedSuffix(x) => format!("unencrypted_suffix {x}"),
            metadata::Rule::EncryptedSuffix(x) => format!("encrypted_suffix {x}"),
            metadata::Rule::UnencryptedRegex(r) => format!("unencrypted_regex {}", r.as_str()),
            metadata::Rule::EncryptedRegex(r) => format!("encrypted_regex {}", r.as_str()),
        }
    }
}

/// `text` with the edits made, every line kept where it was: a value's plaintext takes its
/// place on its line (a multi-line value's other lines become blank), a blanked range keeps
/// only its line breaks.
fn rebuild(text: &str, mut edits: Vec<(Range<usize>, Edit)>) -> Zeroizing<String> {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Zeroizing::new(String::with_capacity(text.len()));
    let mut done = 0;
    for (range, edit) in &edits {
        let fits = range.start >= done
            && text.is_char_boundary(range.start)
            && text.is_char_boundary(range.end);
        if !fits {
            continue;
        }
        out.push_str(&text[done..range.start]);
        let replaced = &text[range.clone()];
        let breaks = replaced.matches('\n').count();
        match edit {
            Edit::Value(yaml) => {
                out.push_str(yaml);
                out.extend(std::iter::repeat_n('\n', breaks));
            }
            Edit::Blank => {
                for c in replaced.chars() {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                }
            }
        }
        done = range.end;
    }
    out.push_str(&text[done..]);
    out
}

/// Masks a sealed object's values for showing it: every scalar becomes `***` but the
/// object's identity (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`, which
/// driftless shows wherever it names the object) and driftless's own ownership marks
/// (which no file may set). With `other` (the same object's other side in a diff), a value
/// that differs from it becomes `*** (tag)` instead, so a diff still shows which fields
/// change, never to what.
pub fn mask_sealed(value: &mut Value, other: Option<&Value>, tag: &str) {
    mask_at(value, other, tag, &mut Vec::new());
}

/// `message` (an apiserver's answer about a sealed object, which may quote the object)
/// with every value [`mask_sealed`] would mask cut out, a Secret's `data` also as decoded.
pub(crate) fn redact_sealed(message: &str, body: &Value) -> String {
    fn leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    path.push(k.clone());
                    leaves(v, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => items.iter().for_each(|v| leaves(v, path, out)),
            Value::Null => {}
            _ if shown(path) => {}
            Value::String(s) => out.push(s.clone()),
            v => out.push(v.to_string()),
        }
    }
    let mut values = Vec::new();
    leaves(body, &mut Vec::new(), &mut values);
    if let Some(data) = body["data"]
        .as_object()
        .filter(|_| body["kind"] == "Secret")
    {
        use base64::Engine as _;
        for v in data.values().filter_map(Value::as_str) {
            if let Ok(plain) = base64::engine::general_purpose::STANDARD.decode(v) {
                values.push(String::from_utf8_lossy(&plain).into_owned());
            }
        }
    }
    // A number or a word like `true` would take the same characters out of the rest of
    // the message; such short values say little about a secret.
    values.retain(|v| v.chars().count() >= 4);
    redact(message, &values)
}

/// What [`mask_sealed`] leaves as it is, by path.
fn shown(path: &[String]) -> bool {
    use crate::object::ownership::{INSTANCE, SPEC};
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    matches!(
        path.as_slice(),
        ["apiVersion"] | ["kind"] | ["metadata", "name" | "namespace"]
    ) || matches!(path.as_slice(), ["metadata", "labels", k] if *k == INSTANCE)
        || matches!(path.as_slice(), ["metadata", "annotations", k] if *k == SPEC)
}

fn mask_at(value: &mut Value, other: Option<&Value>, tag: &str, path: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                path.push(k.clone());
                mask_at(v, other.and_then(|o| o.get(k)), tag, path);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                mask_at(v, other.and_then(|o| o.get(i)), tag, path);
            }
        }
        Value::Null => {}
        _ if shown(path) => {}
        v => {
            let same = other == Some(&*v);
            *v = Value::String(if same || other.is_none() && tag.is_empty() {
                "***".into()
            } else {
                format!("*** ({tag})")
            });
        }
    }
}

#[cfg(test)]
mod tests;
