//! Sign-in with the organisation's identity provider (OpenID Connect) on the listener:
//! the web UI's authorization code flow with PKCE and a signed session cookie, the
//! provider's ID tokens as bearer tokens for the API, and who a request comes from
//! (`Identity`) for the audit line and for the cluster's RBAC (`rbac`), which decides
//! what a person sees and steers.
//!
//! Once sign-in is configured, every read but the probes, the hooks and the UI's static
//! files needs an identity: a person signed in, the API token (a named service), or a
//! client certificate.

mod jwt;
mod provider;
pub mod rbac;
mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub(crate) use provider::form_encode;
pub use provider::{Provider, now};
pub use rbac::Ask;
pub(crate) use rbac::{Access, Person, Rbac};
pub use session::Asked;
use session::{Pending, SESSION_COOKIE, SIGNIN_COOKIE, Sealer, Session};

use super::tls::Peer;

/// How long a sign-in may take between the redirect and the provider's answer.
const SIGNIN_TIME: i64 = 600;

/// The operator's sign-in settings (`--oidc-*`, `--external-url`).
pub struct SignIn {
    pub provider: Provider,
    /// Where people reach the listener (`--external-url`), without a closing slash; the
    /// provider sends them back to its `/auth/callback`.
    pub external_url: String,
    pub username_claim: String,
    pub groups_claim: String,
    pub username_prefix: String,
    pub groups_prefix: String,
    pub scopes: Vec<String>,
    pub session: Duration,
    sealer: Sealer,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("provider", &self.provider)
            .field("external_url", &self.external_url)
            .finish_non_exhaustive()
    }
}

/// Who a request comes from, as the listener found out (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Signed in (session cookie) or bearing the provider's ID token.
    Person { person: Person, by_cookie: bool },
    /// The API token's holder (automation).
    Service,
    /// A client certificate the listener verified, by its holder's name.
    Certificate(String),
    /// Nobody known; a credential presented and refused says why.
    Anonymous(Option<String>),
}

impl Identity {
    /// As the audit line and the UI name it.
    pub fn name(&self) -> String {
        match self {
            Identity::Person { person, .. } => format!("user {}", person.user),
            Identity::Service => "api-token".into(),
            Identity::Certificate(name) => format!("certificate {name}"),
            Identity::Anonymous(None) => "anonymous".into(),
            Identity::Anonymous(Some(why)) => format!("anonymous ({why})"),
        }
    }

    pub fn person(&self) -> Option<&Person> {
        match self {
            Identity::Person { person, .. } => Some(person),
            _ => None,
        }
    }
}

impl SignIn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        provider: Provider,
        external_url: &str,
        username_claim: String,
        groups_claim: String,
        username_prefix: String,
        groups_prefix: String,
        scopes: Vec<String>,
        session: Duration,
        key: Option<&[u8]>,
    ) -> SignIn {
        // A key derived from the client's secret is the same on every replica, so a
        // session opened on one is good on all; without a secret it is this process's.
        let key: [u8; 32] = match key {
            Some(secret) => {
                use hmac::{Hmac, KeyInit, Mac};
                let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret)
                    .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
                mac.update(b"driftless session key");
                mac.finalize().into_bytes().into()
            }
            None => {
                let mut key = [0u8; 32];
                key.copy_from_slice(&session::random_bytes(32));
                key
            }
        };
        SignIn {
            provider,
            external_url: external_url.trim_end_matches('/').to_string(),
            username_claim,
            groups_claim,
            username_prefix,
            groups_prefix,
            scopes,
            session,
            sealer: Sealer::new(key),
        }
    }

    fn redirect_uri(&self) -> String {
        format!("{}/auth/callback", self.external_url)
    }

    /// The person a verified token's claims name.
    fn person(&self, claims: &serde_json::Map<String, Value>) -> Result<Person, NoUser> {
        let user = match claims.get(&self.username_claim) {
            Some(Value::String(u)) if !u.is_empty() => u,
            _ => return Err(NoUser(self.username_claim.clone())),
        };
        let groups = match claims.get(&self.groups_claim) {
            Some(Value::Array(g)) => g
                .iter()
                .filter_map(Value::as_str)
                .map(|g| format!("{}{g}", self.groups_prefix))
                .collect(),
            Some(Value::String(g)) => vec![format!("{}{g}", self.groups_prefix)],
            _ => Vec::new(),
        };
        Ok(Person {
            user: format!("{}{user}", self.username_prefix),
            groups,
        })
    }
}

/// A verified token without the user's name where the operator said it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the token has no {0:?} claim (--oidc-username-claim)")]
pub(crate) struct NoUser(String);

/// What the gate knows besides sign-in: the API token and whether client certificates
/// are verified.
pub struct Gate {
    pub signin: Arc<SignIn>,
    pub token: Option<Vec<u8>>,
}

/// Paths anyone may reach: the probes, the hooks (signed apart), sign-in itself and the
/// UI's static files (the page's code, no data).
fn open(path: &str) -> bool {
    // A cluster's own under a fleet's listener.
    let local = path
        .strip_prefix("/clusters/")
        .and_then(|rest| rest.split_once('/'))
        .map_or(path, |(_, rest)| rest);
    let local = local.strip_prefix('/').unwrap_or(local);
    matches!(local, "healthz" | "readyz")
        || local.starts_with("ui/")
        || path.starts_with("/hooks/")
        || path.starts_with("/auth/")
}

/// The middleware: finds who the request comes from, answers sign-in's own paths,
/// refuses reads without an identity and cross-site requests made with the cookie.
pub async fn gate(gate: Arc<Gate>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if path.starts_with("/auth/") {
        return auth(&gate.signin, request).await;
    }
    let certificate = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .and_then(|ConnectInfo(peer)| peer.client.clone());
    let identity = identify(&gate, certificate, request.headers().clone()).await;
    if path.ends_with("/api/v1/whoami") {
        return whoami(&identity);
    }
    let mutating = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if let Identity::Person {
        by_cookie: true, ..
    } = &identity
        && mutating
        && !same_origin(request.headers(), &gate.signin.external_url)
    {
        let mut response = refuse(
            StatusCode::FORBIDDEN,
            "a request from another site's page is refused (the session cookie alone does not steer)",
        );
        response.extensions_mut().insert(identity);
        return response;
    }
    if !open(&path) && matches!(identity, Identity::Anonymous(_)) && !mutating {
        let why = match &identity {
            Identity::Anonymous(Some(why)) => format!("sign in first ({why})"),
            _ => "sign in first".to_string(),
        };
        let page = path == "/" || path.ends_with('/');
        let wants_html = request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"));
        if page && wants_html {
            let then = form_encode(&[("then", &path)]);
            return (
                StatusCode::FOUND,
                [(header::LOCATION, format!("/auth/login?{then}"))],
            )
                .into_response();
        }
        let mut response = refuse(StatusCode::UNAUTHORIZED, &why);
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    request.extensions_mut().insert(identity.clone());
    let mut response = next.run(request).await;
    // For the audit line, which a single cluster's listener runs around this.
    response.extensions_mut().insert(identity);
    response
}

/// Compares in constant time, lengths included (both are hashed first).
pub(crate) fn same_token(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (
        <sha2::Sha256 as sha2::Digest>::digest(a),
        <sha2::Sha256 as sha2::Digest>::digest(b),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn refuse(code: StatusCode, why: &str) -> Response {
    (code, axum::Json(json!({ "error": why }))).into_response()
}

/// A request a page of this listener made: the browser says so (`Sec-Fetch-Site`), or
/// its `Origin` is the listener's.
fn same_origin(headers: &HeaderMap, external_url: &str) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin";
    }
    let origin = external_url
        .split_once("://")
        .map(|(scheme, rest)| format!("{scheme}://{}", rest.split('/').next().unwrap_or("")));
    matches!((text("origin"), origin), (Some(o), Some(ours)) if o == ours)
}

/// Who the request comes from: a verified client certificate, the API token, the
/// provider's ID token as a bearer token, or the session cookie.
async fn identify(gate: &Gate, certificate: Option<Arc<str>>, headers: HeaderMap) -> Identity {
    if let Some(name) = certificate {
        return Identity::Certificate(name.to_string());
    }
    let headers = &headers;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(given) = bearer {
        if gate
            .token
            .as_ref()
            .is_some_and(|t| same_token(given.as_bytes(), t))
        {
            return Identity::Service;
        }
        if given.matches('.').count() != 2 {
            return Identity::Anonymous(Some("a wrong token".into()));
        }
        let signin = &gate.signin;
        return match signin.provider.verify(given).await {
            Ok(claims) => match signin.person(&claims) {
                Ok(person) => Identity::Person {
                    person,
                    by_cookie: false,
                },
                Err(why) => Identity::Anonymous(Some(why.to_string())),
            },
            Err(e) => Identity::Anonymous(Some(e.to_string())),
        };
    }
    if let Some(cookie) = session::cookie(headers, SESSION_COOKIE) {
        return match gate.signin.sealer.open::<Session>(cookie, now()) {
            Some(s) => Identity::Person {
                person: Person {
                    user: s.user,
                    groups: s.groups,
                },
                by_cookie: true,
            },
            None => Identity::Anonymous(Some("the session is over".into())),
        };
    }
    Identity::Anonymous(None)
}

fn whoami(identity: &Identity) -> Response {
    let (kind, user, groups) = match identity {
        Identity::Person { person, .. } => {
            ("person", Some(person.user.clone()), person.groups.clone())
        }
        Identity::Service => ("service", Some("api-token".into()), Vec::new()),
        Identity::Certificate(name) => ("certificate", Some(name.clone()), Vec::new()),
        Identity::Anonymous(_) => ("anonymous", None, Vec::new()),
    };
    axum::Json(json!({"sign_in": true, "kind": kind, "user": user, "groups": groups}))
        .into_response()
}

/// `/auth/login`, `/auth/callback`, `/auth/logout`.
async fn auth(signin: &SignIn, request: Request) -> Response {
    let (request, _) = request.into_parts();
    let query = request.uri.query().unwrap_or("").to_string();
    let params: Vec<(String, String)> = query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect();
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    match (request.method.clone(), request.uri.path()) {
        (Method::GET, "/auth/login") => login(signin, param("then")).await,
        (Method::GET, "/auth/callback") => {
            let pending = session::cookie(&request.headers, SIGNIN_COOKIE)
                .and_then(|c| signin.sealer.open::<Pending>(c, now()));
            callback(
                signin,
                pending,
                param("code"),
                param("state"),
                param("error"),
                param("error_description"),
            )
            .await
        }
        (Method::POST, "/auth/logout") => {
            if !same_origin(&request.headers, &signin.external_url) {
                return refuse(
                    StatusCode::FORBIDDEN,
                    "a request from another site's page is refused",
                );
            }
            logout(signin).await
        }
        _ => refuse(
            StatusCode::NOT_FOUND,
            "sign-in's paths are GET /auth/login, GET /auth/callback and POST /auth/logout",
        ),
    }
}

fn decode(text: &str) -> String {
    let text = text.replace('+', " ");
    percent_encoding::percent_decode_str(&text)
        .decode_utf8_lossy()
        .into_owned()
}

/// A path of this listener to return to; anything else (another site) is `/`.
fn local_path(then: Option<&str>) -> String {
    match then {
        Some(p) if p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') => p.to_string(),
        _ => "/".to_string(),
    }
}

async fn login(signin: &SignIn, then: Option<&str>) -> Response {
    let pending = Pending {
        asked: Asked::new(),
        then: local_path(then),
        expires: now() + SIGNIN_TIME,
    };
    let url = match signin
        .provider
        .authorization_url(&signin.redirect_uri(), &signin.scopes, &pending.asked)
        .await
    {
        Ok(url) => url,
        Err(e) => return refuse(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let cookie = session::set_cookie(
        SIGNIN_COOKIE,
        &signin.sealer.seal(&pending),
        SIGNIN_TIME,
        false,
    );
    (
        StatusCode::FOUND,
        [
            (header::LOCATION, url),
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
    )
        .into_response()
}

async fn callback(
    signin: &SignIn,
    pending: Option<Pending>,
    code: Option<&str>,
    state: Option<&str>,
    error: Option<&str>,
    description: Option<&str>,
) -> Response {
    let refused = |why: String| {
        let mut response = refuse(StatusCode::UNAUTHORIZED, &format!("sign-in failed: {why}"));
        response
            .extensions_mut()
            .insert(Identity::Anonymous(Some(why)));
        response
    };
    if let Some(error) = error {
        return refused(format!(
            "the identity provider said {error}{}",
            description.map(|d| format!(": {d}")).unwrap_or_default()
        ));
    }
    let Some(pending) = pending else {
        return refused("no sign-in under way in this browser (or it took over 10 minutes)".into());
    };
    if state != Some(pending.asked.state.as_str()) {
        return refused("the answer is not for this browser's sign-in (state)".into());
    }
    let Some(code) = code else {
        return refused("the answer carries no code".into());
    };
    let asked = &pending.asked;
    let claims = match signin
        .provider
        .redeem(code, &signin.redirect_uri(), &asked.verifier, &asked.nonce)
        .await
    {
        Ok((_, claims)) => claims,
        Err(e) => return refused(e.to_string()),
    };
    let person = match signin.person(&claims) {
        Ok(p) => p,
        Err(why) => return refused(why.to_string()),
    };
    let ttl = i64::try_from(signin.session.as_secs()).unwrap_or(i64::MAX);
    let session = Session {
        user: person.user.clone(),
        groups: person.groups.clone(),
        expires: now().saturating_add(ttl),
    };
    let then = html_escape(&pending.then);
    // A page, not a redirect: the navigation onwards then starts on this site, so the
    // browser sends the SameSite=Strict session with it (after a redirect chain that began
    // at the provider's site it would not).
    let page = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={then}\">\
         <title>driftless: signed in</title><p>Signed in as {}. <a href=\"{then}\">Continue</a>.</p>",
        html_escape(&person.user)
    );
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        page,
    )
        .into_response();
    let headers = response.headers_mut();
    for cookie in [
        session::set_cookie(SESSION_COOKIE, &signin.sealer.seal(&session), ttl, true),
        session::set_cookie(SIGNIN_COOKIE, "", 0, false),
    ] {
        if let Ok(v) = header::HeaderValue::from_str(&cookie) {
            headers.append(header::SET_COOKIE, v);
        }
    }
    response.extensions_mut().insert(Identity::Person {
        person,
        by_cookie: true,
    });
    response
}

/// Ends the session here, and says where the provider ends its own.
async fn logout(signin: &SignIn) -> Response {
    let then = match signin.provider.metadata().await {
        Ok(m) => match m.end_session_endpoint {
            Some(end) => {
                let query = form_encode(&[
                    ("client_id", &signin.provider.client_id),
                    (
                        "post_logout_redirect_uri",
                        &format!("{}/", signin.external_url),
                    ),
                ]);
                let sep = if end.contains('?') { '&' } else { '?' };
                format!("{end}{sep}{query}")
            }
            None => "/".into(),
        },
        Err(_) => "/".into(),
    };
    let cookie = session::set_cookie(SESSION_COOKIE, "", 0, true);
    (
        StatusCode::OK,
        [(header::SET_COOKIE, cookie)],
        axum::Json(json!({"signed_out": true, "then": then})),
    )
        .into_response()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_probes_hooks_sign_in_and_the_ui_s_files_are_open() {
        for path in [
            "/healthz",
            "/readyz",
            "/hooks/git",
            "/auth/login",
            "/ui/app.js",
            "/clusters/edge/ui/app.js",
            "/clusters/edge/readyz",
        ] {
            assert!(open(path), "{path}");
        }
        for path in [
            "/",
            "/metrics",
            "/api/v1/status",
            "/api/v1/specs/manifest/ui/ConfigMap/x",
            "/clusters/edge/",
            "/clusters/edge/api/v1/specs/manifest/ui/ConfigMap/x",
            "/clusters/ui/api/v1/status",
        ] {
            assert!(!open(path), "{path}");
        }
    }

    #[test]
    fn only_a_path_of_this_listener_is_returned_to() {
        assert_eq!(local_path(Some("/clusters/edge/")), "/clusters/edge/");
        for other in ["//evil.example/", "https://evil.example/", "/\\evil", "x"] {
            assert_eq!(local_path(Some(other)), "/", "{other}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn a_request_is_same_origin_when_the_browser_or_its_origin_says_so() {
        let mut h = HeaderMap::new();
        assert!(!same_origin(&h, "https://gitops.example"));
        h.insert("origin", "https://gitops.example".parse().unwrap());
        assert!(same_origin(&h, "https://gitops.example"));
        h.insert("sec-fetch-site", "same-site".parse().unwrap());
        assert!(
            !same_origin(&h, "https://gitops.example"),
            "the browser's word first"
        );
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        assert!(same_origin(&h, "https://gitops.example"));
        let mut h = HeaderMap::new();
        h.insert("origin", "https://gitops.example.evil".parse().unwrap());
        assert!(!same_origin(&h, "https://gitops.example"));
    }
}
