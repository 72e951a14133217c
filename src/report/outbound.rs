//! Requests the daemon and the CLI send over HTTP(S): notifications, and the CLI's calls
//! to a daemon's API. One client, trusting the system's CA certificates, over the TLS
//! stack kube already builds on.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub(crate) type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTP(S) client trusting the system's CA certificates. Without any (a bare
/// container), HTTPS receivers fail with a certificate error and plain HTTP still works.
pub fn client() -> HttpClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "no system CA certificates: HTTPS requests will fail");
            let roots = rustls::RootCertStore::empty();
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(
                rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        }
    };
    let connector = builder.https_or_http().enable_http1().build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A client's certificate and key files (PEM), for a daemon that verifies them.
#[derive(Debug, Clone, Copy)]
pub struct IdentityFiles<'a> {
    pub cert: &'a std::path::Path,
    pub key: &'a std::path::Path,
}

/// [`client`], trusting also the PEM certificates in `ca_file` (the CA that signed a
/// daemon's listener certificate, or that self-signed certificate itself), and
/// presenting `identity` to a server that asks for a client certificate.
pub fn client_for(
    ca_file: Option<&std::path::Path>,
    identity: Option<IdentityFiles<'_>>,
) -> Result<HttpClient, CaFileError> {
    use crate::source::oci::tls;
    if ca_file.is_none() && identity.is_none() {
        return Ok(client());
    }
    let given = match ca_file {
        Some(path) => tls::read_ca_file(path)?,
        None => Vec::new(),
    };
    let cert = identity.map(|i| i.cert.to_path_buf()).unwrap_or_default();
    let identity = identity.map(read_identity).transpose()?;
    // The registry client's trust: the system's roots, the file's, and a self-signed
    // certificate the file gives, presented by the server itself, as curl trusts it.
    let config = tls::client_config(given, identity).map_err(|e| match e {
        tls::TlsError::Identity(e) => CaFileError::Identity {
            cert,
            message: e.to_string(),
        },
        e => CaFileError::Trust {
            path: ca_file
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default(),
            message: e.to_string(),
        },
    })?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// The certificate chain and key of `files`.
fn read_identity(
    files: IdentityFiles<'_>,
) -> Result<crate::source::oci::tls::Identity, CaFileError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let unusable = |message: String| CaFileError::Identity {
        cert: files.cert.to_path_buf(),
        message,
    };
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| unusable(format!("reading {}: {e}", path.display())))
    };
    let chain = CertificateDer::pem_slice_iter(&read(files.cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unusable(e.to_string()))?;
    if chain.is_empty() {
        return Err(unusable("it holds no PEM certificate".to_string()));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(files.key)?)
        .map_err(|e| unusable(format!("its key {}: {e}", files.key.display())))?;
    Ok((chain, key))
}

/// Why a CA file cannot be trusted, or a client certificate used.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error(transparent)]
    Read(#[from] crate::source::oci::tls::CaFileError),
    #[error("--client-cert-file {}: {message}", cert.display())]
    Identity {
        cert: std::path::PathBuf,
        message: String,
    },
    #[error("--ca-file {}: {message}", path.display())]
    Trust {
        path: std::path::PathBuf,
        message: String,
    },
}

/// Why a request has no answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("invalid request: {0}")]
    Invalid(#[from] hyper::http::Error),
    /// Connecting, TLS or the exchange itself, with its causes (hyper's own error says
    /// only "client error (Connect)").
    #[error("{0}")]
    Exchange(String),
    #[error("reading the answer: {0}")]
    Body(String),
    #[error("no answer within {}s", .0.as_secs())]
    TimedOut(Duration),
}

/// One request: the answer's status and body, or why there is none. Bodies are read up
/// to `MAX_BODY`.
pub async fn request(
    client: &HttpClient,
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<(StatusCode, Bytes), RequestError> {
    let mut request = hyper::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(Full::new(Bytes::from(body)))?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| RequestError::Exchange(error_chain(&e)))?;
        let status = response.status();
        let body = http_body_util::Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| RequestError::Body(e.to_string()))?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| RequestError::TimedOut(timeout))?
}

/// Largest answer read: the API's status of thousands of specs is a few MiB.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The error with its causes: hyper's own says only "client error (Connect)".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
