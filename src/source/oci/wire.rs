//! The registry's HTTP API (the OCI distribution spec), spoken on the process's one TLS
//! stack. Our own client rather than a library's so that a certificate given with
//! `--ca-file` is trusted as curl, helm, docker and Flux trust it (`tls.rs`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use sha2::Digest as _;

mod auth;
pub(crate) use auth::Credentials;

/// Why a registry request has no useful answer, in our words.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the registry refused the credentials (401 Unauthorized)")]
    Unauthorized,
    #[error("the registry denied access (403 Forbidden)")]
    Denied,
    #[error("not found in the registry")]
    NotFound,
    #[error("the registry answered {code}: {message}")]
    Status { code: u16, message: String },
    #[error("the registry's token service refused the credentials: {0}")]
    Token(String),
    /// Connecting, TLS, a timeout: already said in one line.
    #[error("{0}")]
    Transport(String),
    #[error("more than {limit} bytes; refused")]
    TooLarge { limit: u64 },
    #[error("{0}")]
    Invalid(String),
}

/// A descriptor: what a manifest says of a blob.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    pub fn of(media_type: &str, data: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_string(),
            digest: digest_of(data),
            size: data.len() as i64,
            annotations: None,
        }
    }
}

/// An image manifest, or (with `manifests`) an index of several.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Manifest {
    /// An index (or Docker manifest list) rather than one image's manifest.
    pub(crate) fn is_index(&self) -> bool {
        self.manifests.is_some()
            || self
                .media_type
                .as_deref()
                .is_some_and(|m| m == INDEX_OCI || m == INDEX_DOCKER)
    }
}

const INDEX_OCI: &str = "application/vnd.oci.image.index.v1+json";
const INDEX_DOCKER: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";
/// The distribution spec's advice: registries refuse manifests larger than 4 MiB.
const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// A registry's error bodies and token answers are short; more is not read.
const MAX_SMALL_BYTES: u64 = 1 << 20;
const MAX_REDIRECTS: usize = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A registry that says nothing for this long, for an answer or the next chunk, is away.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const USER_AGENT: &str = concat!("driftless/", env!("CARGO_PKG_VERSION"));

pub(crate) fn digest_of(data: &[u8]) -> String {
    let sum = sha2::Sha256::digest(data);
    let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

type HttpClient = Client<hyper_rustls::HttpsConnector<super::egress::Egress>, Full<Bytes>>;

/// One registry, reached over HTTPS (or plain HTTP when asked), with its credentials.
pub struct Registry {
    http: HttpClient,
    /// `https://HOST` or `http://HOST`.
    base: String,
    credentials: Credentials,
    /// What the registry took last, per scope: sent up front on the next request, so a
    /// poll costs one request, not a refused one and its retry.
    authorized: Mutex<BTreeMap<String, String>>,
}

impl Registry {
    /// `given`: the `--ca-file`'s certificates (DER), trusted besides the system's.
    pub fn new(
        host: &str,
        plain_http: bool,
        given: Vec<CertificateDer<'static>>,
        credentials: Credentials,
    ) -> Result<Registry, super::tls::TlsError> {
        let tls = super::tls::client_config(given, None)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(super::egress::Egress::from_env(http));
        let scheme = if plain_http { "http" } else { "https" };
        Ok(Registry {
            http: Client::builder(TokioExecutor::new()).build(connector),
            base: format!("{scheme}://{host}"),
            credentials,
            authorized: Mutex::new(BTreeMap::new()),
        })
    }

    /// The digest a tag names now: one HEAD, or a GET when the registry does not say.
    pub(crate) async fn digest_of_tag(&self, repo: &str, tag: &str) -> Result<String, WireError> {
        let url = format!("{}/v2/{repo}/manifests/{tag}", self.base);
        let accept = [(header::ACCEPT, ACCEPT_MANIFESTS)];
        let resp = self
            .send(Method::HEAD, &url, &accept, Bytes::new(), &pull(repo))
            .await?;
        let resp = success(resp).await?;
        if let Some(d) = header_str(resp.headers(), "docker-content-digest") {
            return Ok(d.to_string());
        }
        let (_, digest) = self.manifest(repo, tag).await?;
        Ok(digest)
    }

    /// A manifest by tag or digest, and the digest of its bytes (checked against the
    /// reference when it is one).
    pub async fn manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<(Manifest, String), WireError> {
        let url = format!("{}/v2/{repo}/manifests/{reference}", self.base);
        let accept = [(header::ACCEPT, ACCEPT_MANIFESTS)];
        let resp = self
            .send(Method::GET, &url, &accept, Bytes::new(), &pull(repo))
            .await?;
        let body = read(success(resp).await?, MAX_MANIFEST_BYTES).await?;
        let digest = digest_of(&body);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(WireError::Invalid(format!(
                "the registry served {digest} for {reference}"
            )));
        }
        let manifest = serde_json::from_slice(&body)
            .map_err(|e| WireError::Invalid(format!("not an OCI manifest: {e}")))?;
        Ok((manifest, digest))
    }

    /// One page of the repository's tags.
    pub async fn tags(
        &self,
        repo: &str,
        n: usize,
        last: Option<&str>,
    ) -> Result<Vec<String>, WireError> {
        let mut url = format!("{}/v2/{repo}/tags/list?n={n}", self.base);
        if let Some(last) = last {
            url.push_str("&last=");
            url.push_str(&query(last));
        }
        let resp = self
            .send(Method::GET, &url, &[], Bytes::new(), &pull(repo))
            .await?;
        let body = read(success(resp).await?, MAX_MANIFEST_BYTES).await?;
        #[derive(serde::Deserialize)]
        struct Tags {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let tags: Tags = serde_json::from_slice(&body)
            .map_err(|e| WireError::Invalid(format!("not a tag list: {e}")))?;
        Ok(tags.tags.unwrap_or_default())
    }

    /// A blob's bytes, refused past `limit`. The digest is the caller's to check.
    pub async fn blob(&self, repo: &str, digest: &str, limit: u64) -> Result<Vec<u8>, WireError> {
        let mut url = format!("{}/v2/{repo}/blobs/{digest}", self.base);
        let scope = pull(repo);
        let mut resp = self
            .send(Method::GET, &url, &[], Bytes::new(), &scope)
            .await?;
        // Registries hand blobs to storage by redirects; the credentials stay with the
        // registry's own host.
        for _ in 0..MAX_REDIRECTS {
            if !resp.status().is_redirection() {
                break;
            }
            let Some(next) = header_str(resp.headers(), "location") else {
                break;
            };
            url = resolve(&url, next);
            resp = match same_origin(&url, &self.base) {
                true => {
                    self.send(Method::GET, &url, &[], Bytes::new(), &scope)
                        .await?
                }
                false => {
                    self.exchange(Method::GET, &url, &[], Bytes::new(), None)
                        .await?
                }
            };
        }
        Ok(read(success(resp).await?, limit).await?.to_vec())
    }

    /// Uploads a blob unless the registry has it already.
    pub(crate) async fn push_blob(&self, repo: &str, data: Bytes) -> Result<Descriptor, WireError> {
        let digest = digest_of(&data);
        let scope = push(repo);
        let head = format!("{}/v2/{repo}/blobs/{digest}", self.base);
        let resp = self
            .send(Method::HEAD, &head, &[], Bytes::new(), &scope)
            .await?;
        let size = data.len() as i64;
        if resp.status() == StatusCode::OK {
            return Ok(Descriptor {
                media_type: String::new(),
                digest,
                size,
                annotations: None,
            });
        }
        let start = format!("{}/v2/{repo}/blobs/uploads/", self.base);
        let resp = self
            .send(Method::POST, &start, &[], Bytes::new(), &scope)
            .await?;
        let resp = success(resp).await?;
        let location = header_str(resp.headers(), "location")
            .ok_or_else(|| WireError::Invalid("the registry gave no upload location".into()))?;
        let mut url = resolve(&start, location);
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str("digest=");
        url.push_str(&query(&digest));
        let octets = [(header::CONTENT_TYPE, "application/octet-stream")];
        let resp = self.send(Method::PUT, &url, &octets, data, &scope).await?;
        success(resp).await?;
        Ok(Descriptor {
            media_type: String::new(),
            digest,
            size,
            annotations: None,
        })
    }

    /// Puts a manifest under `tag`; its digest.
    pub(crate) async fn push_manifest(
        &self,
        repo: &str,
        tag: &str,
        manifest: &Manifest,
        media_type: &str,
    ) -> Result<String, WireError> {
        let body = serde_json::to_vec(manifest)
            .map_err(|e| WireError::Invalid(format!("writing the manifest: {e}")))?;
        let digest = digest_of(&body);
        let url = format!("{}/v2/{repo}/manifests/{tag}", self.base);
        let kind = [(header::CONTENT_TYPE, media_type)];
        let resp = self
            .send(Method::PUT, &url, &kind, Bytes::from(body), &push(repo))
            .await?;
        success(resp).await?;
        Ok(digest)
    }

    /// One request, its answer's head within the read timeout.
    async fn exchange(
        &self,
        method: Method,
        url: &str,
        headers: &[(header::HeaderName, &str)],
        body: Bytes,
        authorization: Option<&str>,
    ) -> Result<Response<Incoming>, WireError> {
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header(header::USER_AGENT, USER_AGENT);
        for (name, value) in headers {
            req = req.header(name, *value);
        }
        if let Some(a) = authorization {
            let mut value = HeaderValue::from_str(a)
                .map_err(|_| WireError::Invalid("credentials that cannot be sent".into()))?;
            value.set_sensitive(true);
            req = req.header(header::AUTHORIZATION, value);
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| WireError::Invalid(format!("{url}: {e}")))?;
        match tokio::time::timeout(READ_TIMEOUT, self.http.request(req)).await {
            Err(_) => Err(WireError::Transport(
                "the registry did not answer in time".into(),
            )),
            Ok(Err(e)) => Err(WireError::Transport(explain_io(&e))),
            Ok(Ok(resp)) => Ok(resp),
        }
    }
}

fn pull(repo: &str) -> String {
    format!("repository:{repo}:pull")
}

fn push(repo: &str) -> String {
    format!("repository:{repo}:pull,push")
}

fn query(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `location` taken against `base`: absolute, host-relative or (rarely) relative.
fn resolve(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let origin_end = base
        .find("://")
        .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
        .unwrap_or(base.len());
    match location.starts_with('/') {
        true => format!("{}{location}", &base[..origin_end]),
        false => {
            let dir = base
                .rfind('/')
                .filter(|&i| i >= origin_end)
                .unwrap_or(base.len());
            format!("{}/{location}", &base[..dir])
        }
    }
}

fn same_origin(url: &str, base: &str) -> bool {
    url == base || url.starts_with(&format!("{base}/"))
}

/// The answer when it is a success, else the registry's refusal in our words.
async fn success(resp: Response<Incoming>) -> Result<Response<Incoming>, WireError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = read(resp, MAX_SMALL_BYTES).await.unwrap_or_default();
    Err(refusal(status, &body))
}

fn refusal(status: StatusCode, body: &[u8]) -> WireError {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Said>,
    }
    #[derive(serde::Deserialize)]
    struct Said {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let said = serde_json::from_slice::<Envelope>(body)
        .map(|e| e.errors)
        .unwrap_or_default();
    let has = |codes: &[&str]| said.iter().any(|s| codes.contains(&s.code.as_str()));
    if status == StatusCode::UNAUTHORIZED || has(&["UNAUTHORIZED"]) {
        return WireError::Unauthorized;
    }
    if status == StatusCode::FORBIDDEN || has(&["DENIED"]) {
        return WireError::Denied;
    }
    if status == StatusCode::NOT_FOUND || has(&["MANIFEST_UNKNOWN", "NAME_UNKNOWN", "BLOB_UNKNOWN"])
    {
        return WireError::NotFound;
    }
    let message = match said.is_empty() {
        true => one_line(&String::from_utf8_lossy(body)),
        false => one_line(
            &said
                .iter()
                .map(|s| s.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    WireError::Status {
        code: status.as_u16(),
        message: match message.is_empty() {
            true => status.canonical_reason().unwrap_or("").to_string(),
            false => message,
        },
    }
}

/// The body, up to `limit` bytes, each chunk within the read timeout.
async fn read(resp: Response<Incoming>, limit: u64) -> Result<Bytes, WireError> {
    let mut body = resp.into_body();
    let mut out = Vec::new();
    loop {
        let frame = match tokio::time::timeout(READ_TIMEOUT, body.frame()).await {
            Err(_) => {
                return Err(WireError::Transport(
                    "the registry stopped sending in the middle of an answer".into(),
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(WireError::Transport(explain_io(&e))),
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if (out.len() + data.len()) as u64 > limit {
                return Err(WireError::TooLarge { limit });
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

/// A transport error by its cause (refused, TLS, timeout), without the client's wrapping.
pub(crate) fn explain_io(e: &(dyn std::error::Error + 'static)) -> String {
    let mut causes = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        causes.push(c.to_string());
        cur = c.source();
    }
    // The proxy's trouble, said before what it would look like from the registry.
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(p) = c.downcast_ref::<super::egress::ProxyError>() {
            return p.to_string();
        }
        cur = c.source();
    }
    let all = causes.join(": ");
    if all.contains("certificate") || all.contains("UnknownIssuer") {
        // rustls says why in its Debug form: said in our words where the case is known.
        let why = [
            (
                "CaUsedAsEndEntity",
                "it is a self-signed CA certificate that --ca-file does not hold",
            ),
            (
                "UnknownIssuer",
                "issued by no CA the system's roots or --ca-file hold",
            ),
            ("NotValidForName", "not issued for this host name"),
            ("NotValidYet", "not valid yet"),
            ("Expired", "expired"),
            ("BadSignature", "its signature does not verify"),
        ]
        .into_iter()
        .find(|(case, _)| all.contains(case))
        .map_or("the TLS handshake refused it", |(_, said)| said);
        return format!("TLS: the registry's certificate is not trusted: {why}");
    }
    if all.contains("InvalidContentType") || all.contains("corrupt message") {
        return "TLS: the registry does not speak TLS there (a plain HTTP registry needs --plain-http)".into();
    }
    if all.contains("Connection refused") || all.contains("connection refused") {
        return "cannot connect: connection refused (is the registry up?)".into();
    }
    if all.contains("timed out") {
        return "the registry did not answer in time".into();
    }
    one_line(
        causes
            .last()
            .map(String::as_str)
            .unwrap_or("request failed"),
    )
}

pub fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.chars().count() > 300 {
        true => s.chars().take(300).collect::<String>() + "…",
        false => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_resolve_against_the_request() {
        let base = "https://r.example:5000/v2/a/blobs/uploads/";
        assert_eq!(
            resolve(base, "/v2/a/blobs/uploads/u1?_state=x"),
            "https://r.example:5000/v2/a/blobs/uploads/u1?_state=x"
        );
        assert_eq!(
            resolve(base, "https://s3.example/b"),
            "https://s3.example/b"
        );
        assert_eq!(
            resolve(base, "u2"),
            "https://r.example:5000/v2/a/blobs/uploads/u2"
        );
        assert!(same_origin(
            "https://r.example:5000/v2/x",
            "https://r.example:5000"
        ));
        assert!(!same_origin(
            "https://r.example:50001/v2",
            "https://r.example:5000"
        ));
    }

    #[test]
    fn refusals_are_said_in_our_words() {
        let unknown = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#;
        assert!(matches!(
            refusal(StatusCode::NOT_FOUND, unknown),
            WireError::NotFound
        ));
        assert!(matches!(
            refusal(StatusCode::UNAUTHORIZED, b""),
            WireError::Unauthorized
        ));
        let other = br#"{"errors":[{"code":"SIZE_INVALID","message":"bad\nsize"}]}"#;
        assert_eq!(
            refusal(StatusCode::BAD_REQUEST, other).to_string(),
            "the registry answered 400: bad size"
        );
        assert_eq!(
            refusal(StatusCode::BAD_GATEWAY, b"").to_string(),
            "the registry answered 502: Bad Gateway"
        );
    }

    #[test]
    fn an_untrusted_certificate_is_said_in_our_words() {
        #[derive(Debug)]
        struct Cause(&'static str);
        impl std::fmt::Display for Cause {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Cause {}
        let said = explain_io(&Cause(
            "invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))",
        ));
        assert_eq!(
            said,
            "TLS: the registry's certificate is not trusted: it is a self-signed CA certificate that --ca-file does not hold"
        );
        let said = explain_io(&Cause("invalid peer certificate: UnknownIssuer"));
        assert!(said.ends_with("issued by no CA the system's roots or --ca-file hold"));
    }

    #[test]
    fn credentials_do_not_show_in_debug() {
        let c = format!("{:?}", Credentials::Basic("bob".into(), "s3cret".into()));
        assert!(!c.contains("s3cret"), "{c}");
    }
}
