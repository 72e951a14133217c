//! A SOPS file's `sops` block: who the data key is encrypted for, which values are
//! encrypted, and the MAC. The data key is opened here with the age identities given.

use std::io::Read as _;

use regex::Regex;
use zeroize::Zeroizing;

use super::Failure;
use super::keys::AgeKeys;
use super::walk::Node;

/// Which values sops encrypted: at most one rule per file, `unencrypted_suffix:
/// _unencrypted` when the file names none (sops's default). A value is judged by every
/// map key on its path.
#[derive(Debug, Clone)]
pub(super) enum Rule {
    UnencryptedSuffix(String),
    EncryptedSuffix(String),
    UnencryptedRegex(Regex),
    EncryptedRegex(Regex),
}

impl Rule {
    pub fn encrypts(&self, path: &[String]) -> bool {
        match self {
            Rule::UnencryptedSuffix(s) => !path.iter().any(|k| k.ends_with(s.as_str())),
            Rule::EncryptedSuffix(s) => path.iter().any(|k| k.ends_with(s.as_str())),
            Rule::UnencryptedRegex(r) => !path.iter().any(|k| r.is_match(k)),
            Rule::EncryptedRegex(r) => path.iter().any(|k| r.is_match(k)),
        }
    }
}

/// One recipient the data key is encrypted for.
struct AgeStanza {
    recipient: String,
    enc: String,
}

/// What driftless needs of the `sops` block.
pub(super) struct Metadata {
    age: Vec<AgeStanza>,
    /// Key services other than age the file is also (or only) encrypted for.
    others: Vec<&'static str>,
    pub rule: Rule,
    pub mac_only_encrypted: bool,
    pub lastmodified: String,
    /// The encrypted MAC, and where its key is.
    pub mac: Option<(String, usize)>,
}

const OTHER_SERVICES: [(&str, &str); 6] = [
    ("pgp", "PGP"),
    ("kms", "AWS KMS"),
    ("gcp_kms", "GCP KMS"),
    ("azure_kv", "Azure Key Vault"),
    ("hc_vault", "HashiCorp Vault"),
    ("hckms", "HuaweiCloud KMS"),
];

/// What is wrong with a regex, on one line: the regex crate draws a caret under the
/// pattern over several lines, and a spec error is one line.
fn regex_problem(e: &regex::Error) -> String {
    let text = e.to_string();
    let reason = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .or_else(|| text.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("not a valid regular expression");
    format!("not a valid regular expression ({reason})")
}

/// The `sops` block at `at`, or why it cannot be used.
pub(super) fn read(block: &Node, at: usize) -> Result<Metadata, Failure> {
    let fail = |message: String| Failure { at, message };
    let text = |key: &str| -> Result<Option<String>, Failure> {
        match block.get(key) {
            None => Ok(None),
            Some((_, Node::Scalar(s))) => Ok(Some(s.value.clone()).filter(|v| !v.is_empty())),
            Some((k, _)) => Err(Failure {
                at: k.start(),
                message: format!("SOPS metadata `{key}` must be a single value"),
            }),
        }
    };
    if block.get("key_groups").is_some() {
        return Err(fail(
            "this SOPS file splits its data key between key groups (Shamir's secret sharing); \
             driftless decrypts files encrypted for age recipients directly, without key groups"
                .into(),
        ));
    }
    for key in ["encrypted_comment_regex", "unencrypted_comment_regex"] {
        if text(key)?.is_some() {
            return Err(fail(format!(
                "SOPS metadata `{key}` is not supported: choose encrypted values by key \
                 (`--encrypted-regex '^(data|stringData)$'`)"
            )));
        }
    }
    let mut rules = Vec::new();
    if let Some(s) = text("unencrypted_suffix")? {
        rules.push(Rule::UnencryptedSuffix(s));
    }
    if let Some(s) = text("encrypted_suffix")? {
        rules.push(Rule::EncryptedSuffix(s));
    }
    for (key, encrypted) in [("unencrypted_regex", false), ("encrypted_regex", true)] {
        if let Some(s) = text(key)? {
            let r = Regex::new(&s)
                .map_err(|e| fail(format!("SOPS metadata `{key}`: {}", regex_problem(&e))))?;
            rules.push(if encrypted {
                Rule::EncryptedRegex(r)
            } else {
                Rule::UnencryptedRegex(r)
            });
        }
    }
    if rules.len() > 1 {
        return Err(fail(
            "SOPS metadata names more than one of encrypted_suffix, unencrypted_suffix, \
             encrypted_regex and unencrypted_regex; sops itself refuses such a file"
                .into(),
        ));
    }
    let rule = rules
        .pop()
        .unwrap_or_else(|| Rule::UnencryptedSuffix("_unencrypted".into()));
    let mut age = Vec::new();
    match block.get("age") {
        None => {}
        Some((_, Node::Seq(items, _))) => {
            for item in items {
                let field = |k: &str| item.get(k).and_then(|(_, v)| v.as_str());
                match (field("recipient"), field("enc")) {
                    (Some(recipient), Some(enc)) => age.push(AgeStanza {
                        recipient: recipient.to_string(),
                        enc: enc.to_string(),
                    }),
                    _ => {
                        return Err(Failure {
                            at: item.start(),
                            message: "SOPS age entry needs `recipient` and `enc`".into(),
                        });
                    }
                }
            }
        }
        Some((k, _)) => {
            return Err(Failure {
                at: k.start(),
                message: "SOPS metadata `age` must be a list".into(),
            });
        }
    }
    let others = OTHER_SERVICES
        .iter()
        .filter(|(key, _)| matches!(block.get(key), Some((_, Node::Seq(items, _))) if !items.is_empty()))
        .map(|(_, name)| *name)
        .collect();
    let lastmodified = text("lastmodified")?.ok_or_else(|| {
        fail("SOPS metadata has no `lastmodified`; is this a file sops wrote?".into())
    })?;
    let lastmodified = rfc3339(&lastmodified);
    let mac = match block.get("mac") {
        Some((k, Node::Scalar(s))) if !s.value.is_empty() => Some((s.value.clone(), k.start())),
        _ => None,
    };
    let mac_only_encrypted = matches!(
        block.get("mac_only_encrypted"),
        Some((_, Node::Scalar(s))) if s.value == "true"
    );
    Ok(Metadata {
        age,
        others,
        rule,
        mac_only_encrypted,
        lastmodified,
        mac,
    })
}

/// A time as Go's `Format(time.RFC3339)` writes the one it parsed: sops authenticates its
/// MAC with that text, not with the text in the file. Fractional seconds go, and a zero
/// offset is `Z`.
fn rfc3339(text: &str) -> String {
    let (time, zone) = match text
        .char_indices()
        .skip(19)
        .find(|(_, c)| matches!(c, 'Z' | 'z' | '+' | '-'))
    {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let time = time.split_once('.').map_or(time, |(whole, _)| whole);
    let zone = match zone {
        "z" | "+00:00" | "-00:00" => "Z",
        z => z,
    };
    format!("{time}{zone}")
}

impl Metadata {
    /// The file's data key, opened with one of `keys`; the failure says whom the file is
    /// encrypted for and how to give a key.
    pub(crate) fn data_key(
        &self,
        keys: &AgeKeys,
        at: usize,
    ) -> Result<Zeroizing<[u8; 32]>, Failure> {
        let fail = |message: String| Failure { at, message };
        let recipients = self
            .age
            .iter()
            .map(|a| a.recipient.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if self.age.is_empty() {
            let others = match self.others.as_slice() {
                [] => "no key service".to_string(),
                names => names.join(", "),
            };
            return Err(fail(format!(
                "cannot decrypt: this SOPS file has no age recipient (it is encrypted for {others}); \
                 driftless decrypts with age keys only: add one with `sops updatekeys` or \
                 `sops --rotate --add-age age1…`"
            )));
        }
        if keys.is_empty() {
            return Err(fail(format!(
                "cannot decrypt: this SOPS file is encrypted for the age recipient(s) {recipients}, \
                 and no age key was given: pass --sops-age-key-file FILE, or set \
                 SOPS_AGE_KEY_FILE or SOPS_AGE_KEY"
            )));
        }
        let mut malformed = None;
        for stanza in &self.age {
            let armored = age::armor::ArmoredReader::new(stanza.enc.as_bytes());
            let opened = age::Decryptor::new(armored).and_then(|d| d.decrypt(keys.identities()));
            match opened {
                Ok(mut reader) => {
                    let mut key = Zeroizing::new(Vec::new());
                    let read = reader.read_to_end(&mut key);
                    match <[u8; 32]>::try_from(key.as_slice()) {
                        Ok(k) if read.is_ok() => return Ok(Zeroizing::new(k)),
                        _ => malformed = Some(stanza.recipient.as_str()),
                    }
                }
                Err(age::DecryptError::NoMatchingKeys) => {}
                Err(_) => malformed = Some(stanza.recipient.as_str()),
            }
        }
        if let Some(recipient) = malformed {
            return Err(fail(format!(
                "cannot decrypt: the data key this SOPS file holds for {recipient} is damaged \
                 (not an age file, or not a 32-byte key)"
            )));
        }
        Err(fail(format!(
            "cannot decrypt: none of the age keys from {} ({}) is a recipient of this SOPS file, \
             which is encrypted for {recipients}",
            keys.origin(),
            keys.recipients().join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn lastmodified_is_read_back_as_go_writes_it() {
        for (text, want) in [
            ("2026-11-23T19:39:03Z", "2026-11-23T19:39:03Z"),
            ("2026-11-23T19:39:03.123456Z", "2026-11-23T19:39:03Z"),
            ("2026-11-23T19:39:03+00:00", "2026-11-23T19:39:03Z"),
            ("2026-11-23T19:39:03.5+02:00", "2026-11-23T19:39:03+02:00"),
        ] {
            assert_eq!(rfc3339(text), want, "{text}");
        }
    }
}
