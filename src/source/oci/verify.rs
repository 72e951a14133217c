//! `--verify-key`: an artifact is pulled only when a cosign signature of its digest,
//! made with the key's private half, is found beside it. Keyed ECDSA P-256 only, stored as
//! cosign 2 stores it by default: a `sha256-<hex>.sig` tag in the same repository whose
//! manifest's layers are "simple signing" payloads, each with its signature (base64 DER)
//! in the `dev.cosignproject.cosign/signature` annotation. Keyless signatures (Fulcio,
//! Rekor) and the OCI 1.1 referrers form are not read.

use p256::ecdsa::signature::Verifier as _;
use p256::pkcs8::DecodePublicKey as _;

use base64::Engine as _;

pub(crate) const SIMPLE_SIGNING_MEDIA_TYPE: &str =
    "application/vnd.dev.cosign.simplesigning.v1+json";
pub(crate) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// A simple signing payload is a few hundred bytes; anything much larger is not one.
pub(crate) const MAX_PAYLOAD_BYTES: i64 = 64 * 1024;

/// A cosign public key (`cosign.pub`: PEM, `PUBLIC KEY`, ECDSA P-256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyKey(p256::ecdsa::VerifyingKey);

/// Why a key or a signature was not taken: one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "not an ECDSA P-256 public key in PEM (what `cosign generate-key-pair` writes to cosign.pub)"
    )]
    Key,
    #[error("the signature is not base64")]
    NotBase64,
    #[error("the signature is not an ECDSA signature")]
    NotEcdsa,
    #[error("the signature does not verify with --verify-key")]
    DoesNotVerify,
    #[error("the signed payload is not cosign's simple signing JSON")]
    NotSimpleSigning,
    #[error("the signed payload's type is {0:?}")]
    PayloadType(String),
    #[error("the signature is of {signed}, not of {digest}")]
    OtherDigest { signed: String, digest: String },
}

impl VerifyKey {
    pub fn from_pem(text: &str) -> Result<VerifyKey, VerifyError> {
        p256::ecdsa::VerifyingKey::from_public_key_pem(text.trim())
            .map(VerifyKey)
            .map_err(|_| VerifyError::Key)
    }
}

/// The tag cosign keeps the signatures of `digest` under.
pub(crate) fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

#[derive(serde::Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(serde::Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(serde::Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

/// Whether `payload`, signed as `signature` (base64 of DER), is `key`'s signature of
/// `digest`. The payload's docker-reference is not compared: a mirrored artifact keeps
/// its signature, as cosign allows.
pub fn verify(
    key: &VerifyKey,
    payload: &[u8],
    signature: &str,
    digest: &str,
) -> Result<(), VerifyError> {
    let der = base64::engine::general_purpose::STANDARD
        .decode(signature.trim())
        .map_err(|_| VerifyError::NotBase64)?;
    let sig = p256::ecdsa::Signature::from_der(&der).map_err(|_| VerifyError::NotEcdsa)?;
    key.0
        .verify(payload, &sig)
        .map_err(|_| VerifyError::DoesNotVerify)?;
    let payload: Payload =
        serde_json::from_slice(payload).map_err(|_| VerifyError::NotSimpleSigning)?;
    if payload.critical.kind != PAYLOAD_TYPE {
        return Err(VerifyError::PayloadType(payload.critical.kind));
    }
    if payload.critical.image.digest != digest {
        return Err(VerifyError::OtherDigest {
            signed: payload.critical.image.digest,
            digest: digest.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Signer as _;
    use p256::pkcs8::EncodePublicKey as _;

    fn key(seed: u8) -> (p256::ecdsa::SigningKey, VerifyKey) {
        let signing = p256::ecdsa::SigningKey::from_slice(&[seed; 32]).unwrap();
        let pem = signing
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap();
        (signing, VerifyKey::from_pem(&pem).unwrap())
    }

    fn payload(digest: &str) -> Vec<u8> {
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"r.example/app"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
        )
        .into_bytes()
    }

    fn sign(k: &p256::ecdsa::SigningKey, data: &[u8]) -> String {
        let sig: p256::ecdsa::Signature = k.sign(data);
        base64::engine::general_purpose::STANDARD.encode(sig.to_der().as_bytes())
    }

    #[test]
    fn a_signature_verifies_only_with_its_key_and_for_its_digest() {
        let d = format!("sha256:{}", "a".repeat(64));
        let (signing, public) = key(7);
        let (_, other) = key(9);
        let p = payload(&d);
        let s = sign(&signing, &p);
        assert_eq!(verify(&public, &p, &s, &d), Ok(()));
        assert!(
            verify(&other, &p, &s, &d)
                .unwrap_err()
                .to_string()
                .contains("does not verify")
        );
        let e = format!("sha256:{}", "b".repeat(64));
        assert!(
            verify(&public, &p, &s, &e)
                .unwrap_err()
                .to_string()
                .contains("not of")
        );
        let mut tampered = p.clone();
        tampered[5] ^= 1;
        assert!(verify(&public, &tampered, &s, &d).is_err());
        assert!(
            verify(&public, &p, "!!", &d)
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
        assert_eq!(signature_tag(&d), format!("sha256-{}.sig", "a".repeat(64)));
        assert!(
            VerifyKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
                .is_err()
        );
    }
}
