//! ID tokens (JSON Web Tokens signed by the identity provider): the signature checked
//! against the provider's published keys (JWKS), then the claims a relying party must
//! check (issuer, audience, expiry, not-before). Only asymmetric algorithms are taken: a
//! token's `alg` is the sender's word, so `none` and the HMAC family (which would make
//! the public key a shared secret) are refused before any key is looked at.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The provider's keys, as its `jwks_uri` serves them.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct KeySet {
    #[serde(default)]
    pub keys: Vec<Jwk>,
}

/// One key of a JWKS (RFC 7517), with the members the algorithms below use.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Jwk {
    #[serde(default)]
    pub kid: Option<String>,
    pub kty: String,
    #[serde(default)]
    pub alg: Option<String>,
    #[serde(default, rename = "use")]
    pub use_: Option<String>,
    #[serde(default)]
    pub n: Option<String>,
    #[serde(default)]
    pub e: Option<String>,
    #[serde(default)]
    pub crv: Option<String>,
    #[serde(default)]
    pub x: Option<String>,
    #[serde(default)]
    pub y: Option<String>,
}

impl KeySet {
    pub fn has(&self, kid: Option<&str>) -> bool {
        kid.is_none_or(|kid| self.keys.iter().any(|k| k.kid.as_deref() == Some(kid)))
    }
}

/// What a token must say to be taken.
#[derive(Debug, Clone)]
pub struct Expect<'a> {
    pub issuer: &'a str,
    /// The token's `aud` must name one of these.
    pub audiences: &'a [String],
    /// Seconds of difference between the provider's clock and ours that are forgiven.
    pub skew: i64,
    /// Seconds since the epoch, now.
    pub now: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("not a signed JWT (three base64url parts of JSON)")]
    Malformed,
    #[error(
        "tokens signed with {0:?} are not accepted (RS256, RS384, RS512, PS256, PS384, PS512, ES256 or ES384)"
    )]
    Algorithm(String),
    #[error("the token's key ({}) is not one of the identity provider's", .0.as_deref().unwrap_or("no kid"))]
    UnknownKey(Option<String>),
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token was issued by {0:?}, not by the configured issuer")]
    Issuer(String),
    #[error("the token is not for this daemon (its audience is {0})")]
    Audience(String),
    #[error("the token expired at {0} (unix time)")]
    Expired(i64),
    #[error("the token is not valid before {0} (unix time)")]
    NotYet(i64),
    #[error("the token has no {0:?} claim")]
    Missing(String),
}

/// A token's header: what it says it is signed with.
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

/// The key id a token names, read without verifying anything (to know whether the key
/// set must be fetched again first).
pub(crate) fn key_id(token: &str) -> Option<String> {
    let header = token.split('.').next()?;
    let bytes = URL_SAFE_NO_PAD.decode(header).ok()?;
    serde_json::from_slice::<Header>(&bytes).ok()?.kid
}

/// The token's claims once its signature and the claims `expect` names are verified.
pub fn verify(
    token: &str,
    keys: &KeySet,
    expect: &Expect<'_>,
) -> Result<Map<String, Value>, TokenError> {
    let mut parts = token.split('.');
    let (Some(head), Some(body), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let decode = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| TokenError::Malformed)
    };
    let header: Header =
        serde_json::from_slice(&decode(head)?).map_err(|_| TokenError::Malformed)?;
    let algorithm = Algorithm::of(&header.alg)?;
    let signature = decode(sig)?;
    let key = keys
        .keys
        .iter()
        .filter(|k| k.use_.as_deref().is_none_or(|u| u == "sig"))
        .filter(|k| k.alg.as_deref().is_none_or(|a| a == header.alg))
        .filter(|k| k.kty == algorithm.kty())
        .find(|k| header.kid.is_none() || k.kid == header.kid)
        .ok_or_else(|| TokenError::UnknownKey(header.kid.clone()))?;
    let signed = &token.as_bytes()[..head.len() + 1 + body.len()];
    algorithm.verify(key, signed, &signature)?;
    let claims: Map<String, Value> =
        serde_json::from_slice(&decode(body)?).map_err(|_| TokenError::Malformed)?;
    check_claims(&claims, expect)?;
    Ok(claims)
}

fn check_claims(claims: &Map<String, Value>, expect: &Expect<'_>) -> Result<(), TokenError> {
    let issuer = claims
        .get("iss")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if issuer != expect.issuer {
        return Err(TokenError::Issuer(issuer.to_string()));
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences
        .iter()
        .any(|a| expect.audiences.iter().any(|e| e == a))
    {
        return Err(TokenError::Audience(match audiences.as_slice() {
            [] => "missing".to_string(),
            some => some.join(", "),
        }));
    }
    let time = |name: &str| claims.get(name).and_then(Value::as_i64);
    let Some(exp) = time("exp") else {
        return Err(TokenError::Missing("exp".into()));
    };
    if expect.now > exp.saturating_add(expect.skew) {
        return Err(TokenError::Expired(exp));
    }
    if let Some(nbf) = time("nbf")
        && expect.now.saturating_add(expect.skew) < nbf
    {
        return Err(TokenError::NotYet(nbf));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Algorithm {
    Rsa(&'static signature::RsaParameters),
    Ec(&'static signature::EcdsaVerificationAlgorithm, &'static str),
}

impl Algorithm {
    fn of(alg: &str) -> Result<Algorithm, TokenError> {
        Ok(match alg {
            "RS256" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
            "RS384" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
            "RS512" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
            "PS256" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA256),
            "PS384" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA384),
            "PS512" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA512),
            "ES256" => Algorithm::Ec(&signature::ECDSA_P256_SHA256_FIXED, "P-256"),
            "ES384" => Algorithm::Ec(&signature::ECDSA_P384_SHA384_FIXED, "P-384"),
            other => return Err(TokenError::Algorithm(other.to_string())),
        })
    }

    fn kty(self) -> &'static str {
        match self {
            Algorithm::Rsa(_) => "RSA",
            Algorithm::Ec(..) => "EC",
        }
    }

    fn verify(self, key: &Jwk, signed: &[u8], sig: &[u8]) -> Result<(), TokenError> {
        let member = |m: &Option<String>| {
            m.as_deref()
                .and_then(|v| URL_SAFE_NO_PAD.decode(v).ok())
                .ok_or(TokenError::UnknownKey(key.kid.clone()))
        };
        let verified = match self {
            Algorithm::Rsa(params) => {
                let (n, e) = (member(&key.n)?, member(&key.e)?);
                signature::RsaPublicKeyComponents { n: &n, e: &e }.verify(params, signed, sig)
            }
            Algorithm::Ec(params, curve) => {
                if key.crv.as_deref() != Some(curve) {
                    return Err(TokenError::UnknownKey(key.kid.clone()));
                }
                let mut point = vec![4u8];
                point.extend(member(&key.x)?);
                point.extend(member(&key.y)?);
                signature::UnparsedPublicKey::new(params, &point).verify(signed, sig)
            }
        };
        verified.map_err(|_| TokenError::Signature)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use serde_json::json;

    /// A P-256 key and its JWK, for tokens made in tests.
    pub(crate) struct TestKey {
        pair: EcdsaKeyPair,
        pub kid: String,
    }

    impl TestKey {
        pub(crate) fn new(kid: &str) -> TestKey {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            let pair =
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap();
            TestKey {
                pair,
                kid: kid.into(),
            }
        }

        pub(crate) fn jwk(&self) -> Jwk {
            let point = self.pair.public_key().as_ref();
            Jwk {
                kid: Some(self.kid.clone()),
                kty: "EC".into(),
                alg: Some("ES256".into()),
                use_: Some("sig".into()),
                n: None,
                e: None,
                crv: Some("P-256".into()),
                x: Some(URL_SAFE_NO_PAD.encode(&point[1..33])),
                y: Some(URL_SAFE_NO_PAD.encode(&point[33..65])),
            }
        }

        pub(crate) fn sign(&self, header: Value, claims: Value) -> String {
            let signed = format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(header.to_string()),
                URL_SAFE_NO_PAD.encode(claims.to_string())
            );
            let sig = self
                .pair
                .sign(&SystemRandom::new(), signed.as_bytes())
                .unwrap();
            format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
        }

        pub(crate) fn token(&self, claims: Value) -> String {
            self.sign(json!({"alg": "ES256", "kid": self.kid}), claims)
        }
    }

    const NOW: i64 = 1_800_000_000;

    fn expect(audiences: &[String]) -> Expect<'_> {
        Expect {
            issuer: "https://idp.example/realms/r",
            audiences,
            skew: 30,
            now: NOW,
        }
    }

    fn claims() -> Value {
        json!({"iss": "https://idp.example/realms/r", "aud": "driftless", "exp": NOW + 300,
               "iat": NOW, "sub": "u1", "groups": ["team-a"]})
    }

    #[test]
    fn a_token_is_taken_only_when_signed_by_a_provider_key_for_this_daemon_in_time() {
        let key = TestKey::new("k1");
        let keys = KeySet {
            keys: vec![key.jwk()],
        };
        let aud = vec!["driftless".to_string()];
        let good = key.token(claims());
        assert_eq!(verify(&good, &keys, &expect(&aud)).unwrap()["sub"], "u1");

        let other = TestKey::new("k1");
        assert_eq!(
            verify(&other.token(claims()), &keys, &expect(&aud)),
            Err(TokenError::Signature),
            "same kid, another key"
        );
        let mut forged: Vec<&str> = good.split('.').collect();
        let body = URL_SAFE_NO_PAD.encode(json!({"iss": "https://idp.example/realms/r", "aud": "driftless", "exp": NOW + 300, "sub": "admin"}).to_string());
        forged[1] = &body;
        assert_eq!(
            verify(&forged.join("."), &keys, &expect(&aud)),
            Err(TokenError::Signature)
        );
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(json!({"alg": "none"}).to_string()),
            URL_SAFE_NO_PAD.encode(claims().to_string())
        );
        assert_eq!(
            verify(&none, &keys, &expect(&aud)),
            Err(TokenError::Algorithm("none".into()))
        );
        let hmac = key.sign(json!({"alg": "HS256", "kid": "k1"}), claims());
        assert_eq!(
            verify(&hmac, &keys, &expect(&aud)),
            Err(TokenError::Algorithm("HS256".into()))
        );
        assert_eq!(
            verify(
                &key.sign(json!({"alg": "ES256", "kid": "k2"}), claims()),
                &keys,
                &expect(&aud)
            ),
            Err(TokenError::UnknownKey(Some("k2".into())))
        );
        let mut c = claims();
        c["iss"] = json!("https://elsewhere.example");
        assert!(matches!(
            verify(&key.token(c), &keys, &expect(&aud)),
            Err(TokenError::Issuer(_))
        ));
        let mut c = claims();
        c["aud"] = json!(["other", "more"]);
        assert_eq!(
            verify(&key.token(c), &keys, &expect(&aud)),
            Err(TokenError::Audience("other, more".into()))
        );
        let mut c = claims();
        c["exp"] = json!(NOW - 31);
        assert_eq!(
            verify(&key.token(c), &keys, &expect(&aud)),
            Err(TokenError::Expired(NOW - 31))
        );
        let mut c = claims();
        c["exp"] = json!(NOW - 29);
        assert!(
            verify(&key.token(c), &keys, &expect(&aud)).is_ok(),
            "within the skew"
        );
        let mut c = claims();
        c["nbf"] = json!(NOW + 60);
        assert_eq!(
            verify(&key.token(c), &keys, &expect(&aud)),
            Err(TokenError::NotYet(NOW + 60))
        );
        for junk in ["", "a.b", "a.b.c.d", "!!.??.**"] {
            assert_eq!(
                verify(junk, &keys, &expect(&aud)),
                Err(TokenError::Malformed),
                "{junk}"
            );
        }
        assert_eq!(key_id(&good).as_deref(), Some("k1"));
    }
}
