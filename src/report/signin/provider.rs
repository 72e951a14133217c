//! The identity provider as the daemon meets it: its discovery document, its keys
//! (fetched again when a token names a key not seen yet, as providers rotate them), and
//! the exchange of an authorization code for an ID token.

use std::time::{Duration, Instant};

use hyper::Method;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use super::jwt::{self, Expect, KeySet, TokenError};
use super::session::{Asked, challenge};
use crate::report::outbound::{self, HttpClient};

/// How long a provider's answer may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// A key set is fetched again at most this often for an unknown key id (so a flood of
/// tokens naming made-up keys is not a flood of requests to the provider)...
const REFETCH_AT_MOST: Duration = Duration::from_secs(10);
/// ...and at least this often, so a key the provider withdrew stops being trusted.
const KEYS_KEPT: Duration = Duration::from_secs(3600);

/// What the provider's discovery document says (OpenID Connect Discovery 1.0).
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("the identity provider cannot be reached at {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("the identity provider answered {status} at {url}: {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the identity provider's {what} at {url} is not what OpenID Connect says: {message}")]
    Unreadable {
        what: &'static str,
        url: String,
        message: String,
    },
    #[error("the discovery document names issuer {0:?}, not the configured one")]
    OtherIssuer(String),
    #[error("the provider's answer carries no ID token")]
    NoIdToken,
    #[error("the ID token: {0}")]
    Token(#[from] TokenError),
    #[error("the ID token's nonce is not this sign-in's")]
    Nonce,
}

/// The provider, read lazily: a provider that is down when the daemon starts must not
/// keep it from syncing; sign-ins fail until it answers.
pub struct Provider {
    pub issuer: String,
    pub client_id: String,
    client_secret: Option<String>,
    pub skew: Duration,
    http: HttpClient,
    metadata: Mutex<Option<Metadata>>,
    keys: Mutex<Option<(KeySet, Instant)>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl Provider {
    pub fn new(
        issuer: String,
        client_id: String,
        client_secret: Option<String>,
        skew: Duration,
        http: HttpClient,
    ) -> Provider {
        Provider {
            issuer: issuer.trim_end_matches('/').to_string(),
            client_id,
            client_secret,
            skew,
            http,
            metadata: Mutex::new(None),
            keys: Mutex::new(None),
        }
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        what: &'static str,
    ) -> Result<T, ProviderError> {
        let headers = [("accept", "application/json".to_string())];
        let (status, body) =
            outbound::request(&self.http, Method::GET, url, &headers, Vec::new(), TIMEOUT)
                .await
                .map_err(|e| ProviderError::Unreachable {
                    url: url.to_string(),
                    message: e.to_string(),
                })?;
        if !status.is_success() {
            return Err(refused(url, status.as_u16(), &body));
        }
        serde_json::from_slice(&body).map_err(|e| ProviderError::Unreadable {
            what,
            url: url.to_string(),
            message: e.to_string(),
        })
    }

    /// The discovery document, read once it is first needed (again after a failure).
    pub async fn metadata(&self) -> Result<Metadata, ProviderError> {
        let mut kept = self.metadata.lock().await;
        if let Some(m) = kept.as_ref() {
            return Ok(m.clone());
        }
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let found: Metadata = self.get_json(&url, "discovery document").await?;
        // OpenID Connect Discovery 1.0 §4.3: the document must name the issuer asked.
        if found.issuer.trim_end_matches('/') != self.issuer {
            return Err(ProviderError::OtherIssuer(found.issuer));
        }
        *kept = Some(found.clone());
        Ok(found)
    }

    /// The key set, fetched again when `kid` is not in it (and the last fetch is not
    /// too recent) or when it is old.
    async fn keys(&self, kid: Option<&str>) -> Result<KeySet, ProviderError> {
        let mut kept = self.keys.lock().await;
        if let Some((keys, at)) = kept.as_ref() {
            let fresh = at.elapsed() < KEYS_KEPT;
            if fresh && (keys.has(kid) || at.elapsed() < REFETCH_AT_MOST) {
                return Ok(keys.clone());
            }
        }
        let metadata = self.metadata().await?;
        let keys: KeySet = self.get_json(&metadata.jwks_uri, "key set").await?;
        *kept = Some((keys.clone(), Instant::now()));
        Ok(keys)
    }

    /// An ID token's claims once verified: signature, issuer, audience (this client),
    /// expiry.
    pub async fn verify(&self, token: &str) -> Result<Map<String, Value>, ProviderError> {
        let kid = jwt::key_id(token);
        let keys = self.keys(kid.as_deref()).await?;
        let audiences = [self.client_id.clone()];
        let expect = Expect {
            issuer: &self.issuer,
            audiences: &audiences,
            skew: i64::try_from(self.skew.as_secs()).unwrap_or(i64::MAX),
            now: now(),
        };
        Ok(jwt::verify(token, &keys, &expect)?)
    }

    /// Where to send a browser to sign in: the authorization code flow, with `asked`'s
    /// state, nonce and PKCE challenge (S256).
    pub async fn authorization_url(
        &self,
        redirect_uri: &str,
        scopes: &[String],
        asked: &Asked,
    ) -> Result<String, ProviderError> {
        let metadata = self.metadata().await?;
        let scope = scopes.join(" ");
        let challenge = challenge(&asked.verifier);
        let query = form_encode(&[
            ("response_type", "code"),
            ("client_id", &self.client_id),
            ("redirect_uri", redirect_uri),
            ("scope", &scope),
            ("state", &asked.state),
            ("nonce", &asked.nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ]);
        let endpoint = &metadata.authorization_endpoint;
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        Ok(format!("{endpoint}{sep}{query}"))
    }

    /// Trades an authorization code for the ID token and its verified claims (PKCE: the
    /// verifier whose challenge the redirect carried; the nonce it carried must come back).
    pub async fn redeem(
        &self,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
        nonce: &str,
    ) -> Result<(String, Map<String, Value>), ProviderError> {
        let metadata = self.metadata().await?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", &self.client_id),
            ("code_verifier", verifier),
        ];
        if let Some(secret) = &self.client_secret {
            form.push(("client_secret", secret));
        }
        let body = form_encode(&form);
        let headers = [
            (
                "content-type",
                "application/x-www-form-urlencoded".to_string(),
            ),
            ("accept", "application/json".to_string()),
        ];
        let url = &metadata.token_endpoint;
        let (status, answer) = outbound::request(
            &self.http,
            Method::POST,
            url,
            &headers,
            body.into_bytes(),
            TIMEOUT,
        )
        .await
        .map_err(|e| ProviderError::Unreachable {
            url: url.clone(),
            message: e.to_string(),
        })?;
        if !status.is_success() {
            return Err(refused(url, status.as_u16(), &answer));
        }
        let answer: Value =
            serde_json::from_slice(&answer).map_err(|e| ProviderError::Unreadable {
                what: "token answer",
                url: url.clone(),
                message: e.to_string(),
            })?;
        let token = answer["id_token"]
            .as_str()
            .ok_or(ProviderError::NoIdToken)?;
        let claims = self.verify(token).await?;
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err(ProviderError::Nonce);
        }
        Ok((token.to_string(), claims))
    }
}

fn refused(url: &str, status: u16, body: &[u8]) -> ProviderError {
    let text = String::from_utf8_lossy(body);
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    ProviderError::Refused {
        url: url.to_string(),
        status,
        body: text.chars().take(300).collect(),
    }
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// `application/x-www-form-urlencoded` (and a URL's query): every byte but the
/// unreserved ones escaped.
pub(crate) fn form_encode(pairs: &[(&str, &str)]) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const SET: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, SET),
                utf8_percent_encode(v, SET)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}
