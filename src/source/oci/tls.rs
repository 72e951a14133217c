//! What a registry's certificate is trusted by: the system's roots and `--ca-file`'s, and
//! a certificate `--ca-file` gives, presented by the registry itself, as it is: also
//! when it is a CA (`openssl req -x509` makes them so, as Docker's registry docs do),
//! which webpki alone refuses as "a CA used as an end entity", and curl, helm, docker
//! and Flux accept.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

/// Why the certificates a registry client trusts could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--ca-file holds a certificate that cannot be parsed")]
    Unparsable,
    /// webpki refused the roots as a whole.
    #[error("the trusted certificates: {0}")]
    Verifier(rustls::client::VerifierBuilderError),
    /// The client's own certificate and key do not make an identity.
    #[error("the client certificate: {0}")]
    Identity(rustls::Error),
}

/// A client's own certificate (the chain, its own first) and key, for a server that
/// asks for one.
pub(crate) type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Why a `--ca-file` (a registry's, the CLI's for a daemon) cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("reading --ca-file {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("--ca-file {}: {message}", path.display())]
    Pem {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("--ca-file {} holds no PEM certificate", path.display())]
    Empty { path: std::path::PathBuf },
}

/// The PEM certificates of a `--ca-file`; at least one.
pub(crate) fn read_ca_file(
    path: &std::path::Path,
) -> Result<Vec<CertificateDer<'static>>, CaFileError> {
    use rustls::pki_types::pem::PemObject as _;
    let data = std::fs::read(path).map_err(|source| CaFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let given = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CaFileError::Pem {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    if given.is_empty() {
        return Err(CaFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(given)
}

/// The TLS configuration of a registry client (or the CLI's, for a daemon); `given`:
/// the `--ca-file`'s certificates; `identity`: the client's own certificate, if any.
pub(crate) fn client_config(
    given: Vec<CertificateDer<'static>>,
    identity: Option<Identity>,
) -> Result<rustls::ClientConfig, TlsError> {
    let finish = |builder: rustls::ConfigBuilder<
        rustls::ClientConfig,
        rustls::client::WantsClientCert,
    >| match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(TlsError::Identity),
    };
    // No crypto provider of its own: the process's is ring, as for kube and the
    // notifications. Installing it twice is refused, harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    // A bare container has no system roots: then only `--ca-file` is trusted.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    let (added, _) = roots.add_parsable_certificates(given.iter().cloned());
    if added < given.len() {
        return Err(TlsError::Unparsable);
    }
    if roots.is_empty() {
        return finish(rustls::ClientConfig::builder().with_root_certificates(roots));
    }
    let inner = WebPkiServerVerifier::builder(Arc::new(roots))
        .build()
        .map_err(TlsError::Verifier)?;
    let verifier = GivenCertificates { inner, given };
    finish(
        rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier)),
    )
}

/// The system's roots and `--ca-file`'s, as webpki judges them; and a certificate
/// `--ca-file` gives, presented by the server itself, trusted as it is (its names still
/// checked), as OpenSSL and Go trust a self-signed certificate they were given.
#[derive(Debug)]
struct GivenCertificates {
    inner: Arc<WebPkiServerVerifier>,
    given: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for GivenCertificates {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let judged =
            self.inner
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        match judged {
            // webpki checks a certificate's dates before its CA flag, so a refusal of
            // this kind is past the dates: only "a CA used as an end entity" is left to
            // overrule, and only for the very certificate the user gave.
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(_)))
                if self.given.iter().any(|g| g.as_ref() == end_entity.as_ref()) =>
            {
                let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
