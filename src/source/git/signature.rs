//! What a signature check concludes, for SSH (`verify.rs`) and OpenPGP (`openpgp.rs`)
//! alike: who signed, or why the commit or tag is not applied.

/// Why a commit (or a tag) is not applied, in one line that names it (`commit
/// 0123456789ab`, `tag v1.2.0`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    #[error("{what} is not signed")]
    Unsigned { what: String },
    #[error("{what} is signed with {kind}, and --verify-commits was given no {file}")]
    NoKeys {
        what: String,
        kind: &'static str,
        file: &'static str,
    },
    #[error("{what}: its signature cannot be read: {message}")]
    Unreadable { what: String, message: String },
    #[error("{what} is signed for {namespace:?}, not for git")]
    Namespace { what: String, namespace: String },
    #[error("{what} is signed by key {key}, which no --verify-commits file trusts")]
    UnknownKey { what: String, key: String },
    #[error("{what} is signed by key {key} ({principals}) outside the time it is allowed")]
    Expired {
        what: String,
        key: String,
        principals: String,
    },
    #[error("{what} is signed by key {key} ({principals}), which {why}")]
    Refused {
        what: String,
        key: String,
        principals: String,
        why: String,
    },
    #[error("{what}: the signature by key {key} does not match its content")]
    BadSignature { what: String, key: String },
}

/// Who signed a verified commit: the allowed signer's principals (an OpenPGP key's user
/// id) and key fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    pub principals: String,
    pub key: String,
}
