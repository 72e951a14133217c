//! TLS on the daemon's listener (`--tls-cert-file`, `--tls-key-file`): TLS 1.2 and 1.3
//! only, the certificate read again when its files change (cert-manager and a mounted
//! Secret renew them in place), and the one listener type `serve_on` takes with or
//! without it. With `--tls-client-ca-file`, a client may present a certificate that CA
//! signed for client authentication: the connection then carries its holder's name (its
//! subject's common name, as the Kubernetes apiserver names a certificate's user), which
//! the controls accept as they accept the API token. A client without one is served as
//! before; one whose certificate does not verify is refused at the handshake.
//!
//! Handshakes run beside the accept loop, never in it: a client that opens a connection
//! and says nothing would otherwise stop every other client from being served.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::either::Either;

/// How long a client has to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the server to take them.
const WAITING: usize = 64;

/// Why the certificate or its key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {what} {}: {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{what} {}: {message}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("{} holds no certificate", path.display())]
    NoCertificate { path: PathBuf },
    #[error("the key in {} does not fit the certificate in {}: {message}", key.display(), cert.display())]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        message: String,
    },
}

/// The certificate (a PEM chain, the server's own first) and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    fn load(&self, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
        let cert_pem = read(&self.cert, "certificate file")?;
        let key_pem = read(&self.key, "key file")?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Pem {
                what: "certificate file",
                path: self.cert.clone(),
                message: e.to_string(),
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: self.cert.clone(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Pem {
            what: "key file",
            path: self.key.clone(),
            message: e.to_string(),
        })?;
        CertifiedKey::from_der(chain, key, provider).map_err(|e| TlsError::Mismatch {
            cert: self.cert.clone(),
            key: self.key.clone(),
            message: e.to_string(),
        })
    }

    /// What the files look like on disk: when it changes, they are read again.
    fn stamp(&self) -> Option<Stamp> {
        let of = |p: &Path| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.modified().ok(), m.len()))
        };
        Some((of(&self.cert)?, of(&self.key)?))
    }
}

type Stamp = ((Option<SystemTime>, u64), (Option<SystemTime>, u64));

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// The certificate the listener offers: the files' as last read whole. A renewal half
/// written (a new certificate beside the old key) is not taken; the old pair stays
/// until both fit, and the daemon says so once.
struct Reloading {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: Mutex<Current>,
}

struct Current {
    stamp: Option<Stamp>,
    key: Arc<CertifiedKey>,
    /// The stamp whose read failed and was said: said once, not at every handshake.
    refused: Option<Stamp>,
}

impl fmt::Debug for Reloading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloading")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Reloading {
    fn current(&self) -> Arc<CertifiedKey> {
        let stamp = self.files.stamp();
        // A panic while holding it cannot leave the pair half set: it is one Arc.
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if stamp.is_some() && stamp != current.stamp && stamp != current.refused {
            match self.files.load(&self.provider) {
                Ok(key) => {
                    tracing::info!(
                        cert = %self.files.cert.display(),
                        "the listener's certificate changed on disk: read again"
                    );
                    current.key = Arc::new(key);
                    current.stamp = stamp;
                    current.refused = None;
                }
                Err(e) => {
                    tracing::warn!(
                        "the listener's certificate changed on disk but cannot be used, the \
                         one read before is kept: {e}"
                    );
                    current.refused = stamp;
                }
            }
        }
        current.key.clone()
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The server's TLS settings: TLS 1.2 and 1.3, HTTP/1.1, the files' certificate, and
/// client certificates verified against `client_ca` when given (read once, now). An
/// unusable pair or CA file is an error here, so the daemon refuses to start on it.
pub fn server_config(
    files: &TlsFiles,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let stamp = files.stamp();
    let key = Arc::new(files.load(&provider)?);
    let resolver = Reloading {
        files: files.clone(),
        provider: provider.clone(),
        current: Mutex::new(Current {
            stamp,
            key,
            refused: None,
        }),
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Mismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
            message: e.to_string(),
        })?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
    };
    let mut config = builder.with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Verifies client certificates against the CA certificates of `path`; a client may
/// present none.
fn client_verifier(
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    const WHAT: &str = "client CA file";
    let pem_error = |message: String| TlsError::Pem {
        what: WHAT,
        path: path.to_path_buf(),
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&read(path, WHAT)?) {
        let cert = cert.map_err(|e| pem_error(e.to_string()))?;
        roots.add(cert).map_err(|e| pem_error(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| pem_error(e.to_string()))
}

/// The name a verified client certificate gives its holder: its subject's common name,
/// or the whole subject when it has none.
fn client_name(der: &CertificateDer<'_>) -> Arc<str> {
    use x509_cert::der::Decode;
    let Ok(cert) = x509_cert::Certificate::from_der(der.as_ref()) else {
        // rustls verified it, so this is not reached; the holder is still someone.
        return Arc::from("(a certificate whose subject cannot be read)");
    };
    let subject = &cert.tbs_certificate.subject;
    let common_name = subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid == x509_cert::der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3"))
        .find_map(|atv| {
            atv.value
                .decode_as::<x509_cert::der::asn1::Utf8StringRef<'_>>()
                .map(|s| s.as_str().to_string())
                .or_else(|_| {
                    atv.value
                        .decode_as::<x509_cert::der::asn1::PrintableStringRef<'_>>()
                        .map(|s| s.as_str().to_string())
                })
                .ok()
        });
    Arc::from(common_name.unwrap_or_else(|| subject.to_string()))
}

/// A connection the server reads and writes, plain or TLS.
pub(crate) type Conn = Either<TcpStream, tokio_rustls::server::TlsStream<TcpStream>>;

/// What the daemon listens with: plain TCP, or TLS handshaken beside the accept loop.
pub enum Listening {
    Plain(TcpListener),
    Tls {
        local: SocketAddr,
        ready: mpsc::Receiver<(Conn, SocketAddr)>,
        /// Ends the accepting task with the listener.
        _accepting: AbortOnDrop,
    },
}

impl From<TcpListener> for Listening {
    fn from(listener: TcpListener) -> Listening {
        Listening::Plain(listener)
    }
}

pub struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Listening {
    /// `listener` as is, or behind TLS with `config`.
    pub fn new(listener: TcpListener, tls: Option<Arc<ServerConfig>>) -> io::Result<Listening> {
        let Some(config) = tls else {
            return Ok(Listening::Plain(listener));
        };
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(WAITING);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let accepting = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of file descriptors and the like: a pause, as axum's own loop.
                        tracing::debug!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((Either::Right(tls), peer)).await;
                        }
                        // A client that does not speak TLS, or gives up: its own affair.
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Listening::Tls {
            local,
            ready,
            _accepting: AbortOnDrop(accepting),
        })
    }

    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Listening::Tls { .. })
    }
}

impl Listener for Listening {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        match self {
            Listening::Plain(listener) => {
                let (tcp, peer) = Listener::accept(listener).await;
                (Either::Left(tcp), peer)
            }
            Listening::Tls { ready, .. } => match ready.recv().await {
                Some(pair) => pair,
                // The accepting task is gone only when the listener is: nothing to serve.
                None => std::future::pending().await,
            },
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listening::Plain(listener) => listener.local_addr(),
            Listening::Tls { local, .. } => Ok(*local),
        }
    }
}

/// Who sent a request, as the listener saw the connection: what the audit line names.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub addr: SocketAddr,
    /// The name of the client certificate the connection presented, verified against
    /// `--tls-client-ca-file`.
    pub client: Option<Arc<str>>,
}

impl Connected<IncomingStream<'_, Listening>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Listening>) -> Self {
        let client = match stream.io() {
            Either::Right(tls) => tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(client_name),
            Either::Left(_) => None,
        };
        Peer {
            addr: *stream.remote_addr(),
            client,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_files_are_said_in_one_line() {
        let dir = std::env::temp_dir().join(format!("driftless-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = TlsFiles {
            cert: dir.join("absent.crt"),
            key: dir.join("absent.key"),
        };
        let e = server_config(&files, None).unwrap_err().to_string();
        assert!(
            e.starts_with("reading certificate file ") && e.contains("absent.crt"),
            "{e}"
        );
        std::fs::write(dir.join("empty.crt"), "not pem\n").unwrap();
        std::fs::write(dir.join("empty.key"), "not pem\n").unwrap();
        let files = TlsFiles {
            cert: dir.join("empty.crt"),
            key: dir.join("empty.key"),
        };
        let e = server_config(&files, None).unwrap_err().to_string();
        assert!(e.contains("holds no certificate"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
