//! OpenPGP signatures of commits and tags (git's default `gpg.format`), checked against
//! the operator's keyring (`gpg --export [--armor]`, one or more keys) as Flux's
//! `verify` checks them: in process, never with a `gpg` of the host and never against a
//! key the repository holds.
//!
//! A signature passes when it is a detached binary or text signature over the object's
//! content, by the keyring's primary key or one of its bound subkeys that may sign, which
//! was neither revoked nor expired when the signature was made. Every key's own binding
//! signatures are checked when the keyring is read, so a subkey a third party attached
//! to a trusted key is refused there, not trusted later.

use pgp::composed::{Deserializable, DetachedSignature, PublicOrSecret, SignedPublicKey};
use pgp::packet::{PublicKey, PublicSubkey, Signature, SignatureType};
use pgp::types::KeyDetails;

use super::signature::{Signer, Unverified};

/// The keys of an OpenPGP keyring, each checked for its own bindings.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    keys: Vec<SignedPublicKey>,
}

/// Whether `bytes` are OpenPGP data (armored, or a binary packet) rather than text.
pub(crate) fn is_keyring(bytes: &[u8]) -> bool {
    let start = bytes.trim_ascii_start();
    start.starts_with(b"-----BEGIN PGP") || start.first().is_some_and(|b| b & 0x80 != 0)
}

/// Why a file of OpenPGP keys is refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    #[error("it cannot be read as OpenPGP keys: {0}")]
    Unreadable(String),
    #[error("it holds the secret key {0}: give the public keys only (gpg --export)")]
    SecretKey(String),
    #[error("a key cannot be read: {0}")]
    Key(String),
    #[error("key {0}: its own binding signatures do not verify")]
    Bindings(String),
}

impl Keyring {
    /// Reads every key of `bytes`: binary, or one or more armored blocks one after the
    /// other (`cat alice.asc bob.asc`). A secret key is refused (the daemon needs public
    /// keys only, and a mounted secret key is one more thing to leak), as is a key whose
    /// self-signatures do not verify.
    pub fn parse(bytes: &[u8]) -> Result<Keyring, KeyringError> {
        let mut keys = Vec::new();
        for block in blocks(bytes) {
            let (found, _) = PublicOrSecret::from_reader_many(block)
                .map_err(|e| KeyringError::Unreadable(e.to_string()))?;
            for key in found {
                let key = match key {
                    Ok(PublicOrSecret::Public(key)) => key,
                    Ok(PublicOrSecret::Secret(key)) => {
                        return Err(KeyringError::SecretKey(fingerprint(&key.primary_key)));
                    }
                    Err(e) => return Err(KeyringError::Key(e.to_string())),
                };
                key.verify_bindings()
                    .map_err(|_| KeyringError::Bindings(fingerprint(&key.primary_key)))?;
                keys.push(key);
            }
        }
        Ok(Keyring { keys })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn extend(&mut self, other: Keyring) {
        self.keys.extend(other.keys);
    }
}

/// Armored blocks one by one (the parser reads the first only), or the binary whole.
fn blocks(bytes: &[u8]) -> Vec<&[u8]> {
    const BEGIN: &[u8] = b"-----BEGIN PGP";
    if !bytes.trim_ascii_start().starts_with(BEGIN) {
        return vec![bytes];
    }
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i..].starts_with(BEGIN) && (i == 0 || bytes[i - 1] == b'\n'))
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(n, &s)| &bytes[s..starts.get(n + 1).copied().unwrap_or(bytes.len())])
        .collect()
}

fn fingerprint(key: &impl KeyDetails) -> String {
    format!("{:X}", key.fingerprint())
}

/// Checks one armored OpenPGP signature over `signed`; `what` names the commit or tag.
pub fn verify(
    what: &str,
    signature: &[u8],
    signed: &[u8],
    keyring: &Keyring,
) -> Result<Signer, Unverified> {
    let unreadable = |message: String| Unverified::Unreadable {
        what: what.to_string(),
        message,
    };
    let (detached, _) =
        DetachedSignature::from_armor_single(signature).map_err(|e| unreadable(e.to_string()))?;
    let sig = &detached.signature;
    if !matches!(sig.typ(), Some(SignatureType::Binary | SignatureType::Text)) {
        return Err(unreadable(
            "it is no signature of data (a key or certification signature)".to_string(),
        ));
    }
    let issuer = issuer_of(sig);
    let Some((cert, signing)) = find(keyring, sig) else {
        return Err(Unverified::UnknownKey {
            what: what.to_string(),
            key: issuer,
        });
    };
    let signer = || Signer {
        principals: user_of(cert),
        key: signing.fingerprint.clone(),
    };
    let when = sig.created().map_or(0, |t| i64::from(t.as_secs()));
    if let Some(why) = signing.refused_at(when) {
        return Err(Unverified::Refused {
            what: what.to_string(),
            key: signing.fingerprint.clone(),
            principals: signer().principals,
            why,
        });
    }
    let checked = match signing.key {
        Key::Primary(k) => detached.verify(k, signed),
        Key::Sub(k) => detached.verify(k, signed),
    };
    checked.map_err(|_| Unverified::BadSignature {
        what: what.to_string(),
        key: signing.fingerprint.clone(),
    })?;
    Ok(signer())
}

/// The issuer a signature names: its fingerprint, or else its 64-bit key id.
fn issuer_of(sig: &Signature) -> String {
    if let Some(fp) = sig.issuer_fingerprint().first() {
        return format!("{fp:X}");
    }
    sig.issuer_key_id()
        .first()
        .map(|id| {
            id.as_ref()
                .iter()
                .map(|b| format!("{b:02X}"))
                .collect::<String>()
        })
        .unwrap_or_else(|| "(the signature names no key)".to_string())
}

/// A key of the keyring that may have made a signature, with what limits it.
struct Signing<'a> {
    key: Key<'a>,
    fingerprint: String,
    created: i64,
    /// Seconds after `created` the key expires (none: it does not).
    expires: Option<i64>,
    revoked: bool,
    may_sign: bool,
}

enum Key<'a> {
    Primary(&'a PublicKey),
    Sub(&'a PublicSubkey),
}

impl Signing<'_> {
    /// Why the key could not sign at `when` (Unix seconds), if it could not, as what
    /// follows "which" in the refusal.
    fn refused_at(&self, when: i64) -> Option<String> {
        if self.revoked {
            return Some("is revoked".to_string());
        }
        if !self.may_sign {
            return Some("is not a signing key (its flags do not allow signing)".to_string());
        }
        match self.expires {
            Some(after) if when >= self.created + after => {
                Some("had expired when the signature was made".to_string())
            }
            _ => None,
        }
    }
}

/// The key (primary or subkey) whose fingerprint or key id the signature names.
fn find<'a>(keyring: &'a Keyring, sig: &Signature) -> Option<(&'a SignedPublicKey, Signing<'a>)> {
    let names = |key: &dyn KeyDetails| {
        let fp = key.fingerprint();
        let id = key.legacy_key_id();
        sig.issuer_fingerprint().iter().any(|f| **f == fp)
            || sig.issuer_key_id().iter().any(|k| **k == id)
    };
    for cert in &keyring.keys {
        let primary = &cert.primary_key;
        if names(primary) {
            let newest = own_signatures(cert).max_by_key(|s| s.created().map(|t| t.as_secs()));
            return Some((
                cert,
                Signing {
                    key: Key::Primary(primary),
                    fingerprint: fingerprint(primary),
                    created: i64::from(primary.created_at().as_secs()),
                    expires: newest.and_then(expiry),
                    revoked: !cert.details.revocation_signatures.is_empty(),
                    // A primary key without flags is taken to sign, as gpg takes it.
                    may_sign: newest.is_none_or(|s| flagless(s) || s.key_flags().sign()),
                },
            ));
        }
        for sub in &cert.public_subkeys {
            if !names(&sub.key) {
                continue;
            }
            let binding = sub
                .signatures
                .iter()
                .filter(|s| s.typ() == Some(SignatureType::SubkeyBinding))
                .max_by_key(|s| s.created().map(|t| t.as_secs()));
            return Some((
                cert,
                Signing {
                    key: Key::Sub(&sub.key),
                    fingerprint: fingerprint(&sub.key),
                    created: i64::from(sub.key.created_at().as_secs()),
                    expires: binding.and_then(expiry),
                    revoked: !cert.details.revocation_signatures.is_empty()
                        || sub
                            .signatures
                            .iter()
                            .any(|s| s.typ() == Some(SignatureType::SubkeyRevocation)),
                    // A subkey signs only when its binding says so.
                    may_sign: binding.is_some_and(|s| s.key_flags().sign()),
                },
            ));
        }
    }
    None
}

/// The primary key's self-signatures that carry its flags and expiry.
fn own_signatures(cert: &SignedPublicKey) -> impl Iterator<Item = &Signature> {
    cert.details
        .direct_signatures
        .iter()
        .chain(cert.details.users.iter().flat_map(|u| u.signatures.iter()))
}

fn expiry(sig: &Signature) -> Option<i64> {
    sig.key_expiration_time()
        .map(|d| i64::from(d.as_secs()))
        .filter(|&s| s > 0)
}

fn flagless(sig: &Signature) -> bool {
    let flags = sig.key_flags();
    !(flags.sign() || flags.certify() || flags.encrypt_comms() || flags.encrypt_storage())
}

/// The key's first user id (`Alice <alice@example.com>`), or its fingerprint.
fn user_of(cert: &SignedPublicKey) -> String {
    cert.details
        .users
        .first()
        .map(|u| String::from_utf8_lossy(u.id.id()).to_string())
        .unwrap_or_else(|| fingerprint(&cert.primary_key))
}
