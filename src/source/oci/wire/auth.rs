//! Who the registry is asked as: the credentials given, and the answer to its challenge
//! (Basic as it is, Bearer traded at the token service it names), kept per scope so the
//! next request carries it up front.

use std::collections::BTreeMap;

use base64::Engine as _;
use hyper::body::{Bytes, Incoming};
use hyper::header;
use hyper::{Method, Response, StatusCode};

use super::{MAX_SMALL_BYTES, Registry, WireError, header_str, one_line, query, read};

/// The credentials a registry is asked with.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    Anonymous,
    Basic(String, String),
    /// A registry token (`registrytoken` of a Docker config.json), sent as it is.
    Bearer(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic(user, _) => write!(f, "Basic({user}, <redacted>)"),
            Credentials::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

impl Registry {
    /// A request to the registry, authorised: with what it took last for the scope, else
    /// anonymously, then once more as its challenge asks.
    pub(super) async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(header::HeaderName, &str)],
        body: Bytes,
        scope: &str,
    ) -> Result<Response<Incoming>, WireError> {
        let known = self
            .authorized
            .lock()
            .ok()
            .and_then(|a| a.get(scope).cloned());
        let first = known.clone().or_else(|| match &self.credentials {
            Credentials::Bearer(t) => Some(format!("Bearer {t}")),
            _ => None,
        });
        let resp = self
            .exchange(method.clone(), url, headers, body.clone(), first.as_deref())
            .await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = header_str(resp.headers(), "www-authenticate")
            .unwrap_or_default()
            .to_string();
        let authorization = self.answer(&challenge, scope).await?;
        if Some(&authorization) == first.as_ref() {
            return Ok(resp);
        }
        let resp = self
            .exchange(method, url, headers, body, Some(&authorization))
            .await?;
        if resp.status() != StatusCode::UNAUTHORIZED
            && let Ok(mut a) = self.authorized.lock()
        {
            a.insert(scope.to_string(), authorization);
        }
        Ok(resp)
    }

    /// The `Authorization` a challenge asks for: Basic as it is, Bearer traded at the
    /// token service it names (Docker Hub, GHCR, Harbor: anonymous pulls too).
    async fn answer(&self, challenge: &str, scope: &str) -> Result<String, WireError> {
        let (scheme, params) = parse_challenge(challenge);
        let basic = match &self.credentials {
            Credentials::Basic(u, p) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )),
            _ => None,
        };
        if scheme.eq_ignore_ascii_case("basic") {
            return basic.ok_or(WireError::Unauthorized);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(WireError::Unauthorized);
        }
        let realm = params
            .get("realm")
            .ok_or_else(|| WireError::Token("its challenge names no token service".into()))?;
        let mut url = realm.clone();
        let mut sep = if url.contains('?') { '&' } else { '?' };
        if let Some(service) = params.get("service") {
            url.push(sep);
            url.push_str("service=");
            url.push_str(&query(service));
            sep = '&';
        }
        url.push(sep);
        url.push_str("scope=");
        url.push_str(&query(
            params.get("scope").map(String::as_str).unwrap_or(scope),
        ));
        let resp = self
            .exchange(Method::GET, &url, &[], Bytes::new(), basic.as_deref())
            .await?;
        let status = resp.status();
        let body = read(resp, MAX_SMALL_BYTES).await?;
        if !status.is_success() {
            return Err(WireError::Token(format!(
                "{} {}",
                status.as_u16(),
                one_line(&String::from_utf8_lossy(&body))
            )));
        }
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body)
            .map_err(|_| WireError::Token("its answer holds no token".into()))?;
        token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}"))
            .ok_or_else(|| WireError::Token("its answer holds no token".into()))
    }
}

/// `Bearer realm="…",service="…",scope="…"`: the scheme and its parameters.
fn parse_challenge(challenge: &str) -> (String, BTreeMap<String, String>) {
    let challenge = challenge.trim();
    let (scheme, rest) = challenge.split_once(' ').unwrap_or((challenge, ""));
    let mut params = BTreeMap::new();
    let mut rest = rest.trim();
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq]
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = &rest[eq + 1..];
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            },
        };
        params.insert(key, value.to_string());
        rest = next.trim_start_matches([',', ' ']);
    }
    (scheme.to_string(), params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_as_registries_write_them() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:team/app:pull""#,
        );
        assert_eq!(s, "Bearer");
        assert_eq!(p["realm"], "https://auth.example/token");
        assert_eq!(p["service"], "registry.example");
        assert_eq!(p["scope"], "repository:team/app:pull");
        let (s, p) = parse_challenge(r#"Basic realm="driftless-test""#);
        assert_eq!(
            (s.as_str(), p["realm"].as_str()),
            ("Basic", "driftless-test")
        );
        let (_, p) = parse_challenge("Bearer realm=https://a/t, service=r");
        assert_eq!(
            (p["realm"].as_str(), p["service"].as_str()),
            ("https://a/t", "r")
        );
    }
}
