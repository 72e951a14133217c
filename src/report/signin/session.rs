//! What the listener keeps in the browser between requests: the session of a person who
//! signed in, and the state of a sign-in under way (the OAuth `state`, the OIDC `nonce`
//! and the PKCE verifier). Both are cookies the daemon signs with a key of its own
//! (HMAC-SHA256) and reads back only when the signature and the expiry hold, so nothing
//! is kept on the daemon's side and a person's session reaches every replica that has
//! the same key.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The session's cookie.
pub(crate) const SESSION_COOKIE: &str = "driftless_session";
/// The sign-in under way's cookie.
pub(crate) const SIGNIN_COOKIE: &str = "driftless_signin";

/// A signed-in person, as the session cookie carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Session {
    #[serde(rename = "u")]
    pub user: String,
    #[serde(rename = "g", default)]
    pub groups: Vec<String>,
    /// Unix seconds after which the session is over.
    #[serde(rename = "e")]
    pub expires: i64,
}

/// What one sign-in asks the provider, and keeps to check its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    pub state: String,
    pub nonce: String,
    /// PKCE's verifier; the challenge sent is its SHA-256.
    pub verifier: String,
}

impl Asked {
    pub fn new() -> Asked {
        Asked {
            state: random_text(24),
            nonce: random_text(24),
            verifier: random_text(48),
        }
    }
}

impl Default for Asked {
    fn default() -> Asked {
        Asked::new()
    }
}

/// A sign-in under way, between the redirect to the provider and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    #[serde(flatten)]
    pub asked: Asked,
    /// The page to return to (a path of this listener).
    pub then: String,
    #[serde(rename = "e")]
    pub expires: i64,
}

/// Something with an expiry that a cookie carries.
pub(crate) trait Expiring {
    fn expires(&self) -> i64;
}

impl Expiring for Session {
    fn expires(&self) -> i64 {
        self.expires
    }
}

impl Expiring for Pending {
    fn expires(&self) -> i64 {
        self.expires
    }
}

/// The key cookies are signed with.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: [u8; 32],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<redacted>)")
    }
}

impl Sealer {
    pub fn new(key: [u8; 32]) -> Sealer {
        Sealer { key }
    }

    fn mac(&self, text: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(b"driftless cookie v1\0");
        mac.update(text.as_bytes());
        mac
    }

    /// `v1.<payload>.<mac>`, base64url.
    pub(crate) fn seal(&self, value: &impl Serialize) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default());
        let tag = self.mac(&payload).finalize().into_bytes();
        format!("v1.{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// The value, when the cookie is one this key sealed and its time is not over.
    pub fn open<T: DeserializeOwned + Expiring>(&self, cookie: &str, now: i64) -> Option<T> {
        let rest = cookie.strip_prefix("v1.")?;
        let (payload, tag) = rest.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(payload).verify_slice(&tag).ok()?;
        let value: T = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        (value.expires() > now).then_some(value)
    }
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value: `HttpOnly` and `Secure` always; `SameSite=Strict` for the
/// session, so no other site's page can make the browser send it; `Lax` for the
/// sign-in under way, whose answer arrives as a navigation from the provider's site.
pub(crate) fn set_cookie(name: &str, value: &str, max_age: i64, strict: bool) -> String {
    let same_site = if strict { "Strict" } else { "Lax" };
    format!("{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; Secure; SameSite={same_site}")
}

/// Random bytes, base64url: states, nonces, PKCE verifiers and keys.
pub(crate) fn random_text(bytes: usize) -> String {
    URL_SAFE_NO_PAD.encode(random_bytes(bytes))
}

pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; n];
    // The system's generator fails only where there is no entropy source at all; a
    // zeroed buffer would then be a predictable state, so that is not allowed to pass.
    if ring::rand::SystemRandom::new().fill(&mut buf).is_err() {
        std::process::abort();
    }
    buf
}

/// PKCE's S256 challenge of a verifier (RFC 7636).
pub fn challenge(verifier: &str) -> String {
    use sha2::Digest;
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_opens_only_with_its_key_unaltered_and_in_time() {
        let sealer = Sealer::new([7; 32]);
        let session = Session {
            user: "alice".into(),
            groups: vec!["team-a".into()],
            expires: 100,
        };
        let cookie = sealer.seal(&session);
        assert_eq!(sealer.open::<Session>(&cookie, 99), Some(session.clone()));
        assert_eq!(sealer.open::<Session>(&cookie, 100), None, "over");
        assert_eq!(Sealer::new([8; 32]).open::<Session>(&cookie, 1), None);
        let forged = sealer.seal(&Session {
            user: "admin".into(),
            ..session
        });
        let (_, tag) = cookie.rsplit_once('.').unwrap();
        let (body, _) = forged.rsplit_once('.').unwrap();
        assert_eq!(sealer.open::<Session>(&format!("{body}.{tag}"), 1), None);
        assert_eq!(sealer.open::<Session>("v1.e30.", 1), None);
        assert_eq!(sealer.open::<Pending>(&cookie, 1), None, "another shape");
    }

    #[test]
    fn cookies_are_read_from_every_header() {
        let mut headers = axum::http::HeaderMap::new();
        headers.append("cookie", "a=1; driftless_session=v1.x.y".parse().unwrap());
        headers.append("cookie", "b=2".parse().unwrap());
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("v1.x.y"));
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, "c"), None);
    }

    #[test]
    fn the_challenge_is_s256_of_the_verifier() {
        // base64url(SHA-256(verifier)) without padding, as Python's hashlib makes it.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mJ0kmJdFCdYHNvr2GaMJoFakpTpzEw"),
            "VPzKMH_rr5_gjYdkXs0Y1dwDlwzg_rXgymvoNm9xnto"
        );
    }
}
