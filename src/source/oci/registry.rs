//! How a registry is reached: TLS (system roots or `--ca-file`), plain HTTP only when asked,
//! and the credentials, from `--username-file`/`--password-file` or a Docker `config.json`
//! (`auths` only: credential helpers, `credsStore` and `credHelpers`, are not run).

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::OciError;
use super::wire::{Credentials, Registry};

/// What the registry flags say.
#[derive(Clone, Default)]
pub struct RegistryOptions {
    /// `--plain-http`: HTTP, no TLS (a registry on loopback or in a lab).
    pub plain_http: bool,
    /// `--ca-file`: PEM certificates trusted besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// `--registry-config`: a Docker `config.json`; `None` for `$DOCKER_CONFIG/config.json`
    /// (else `~/.docker/config.json`) when it exists.
    pub config_file: Option<PathBuf>,
    /// `--username-file` and `--password-file`, read: they win over `config.json`.
    pub basic: Option<(String, String)>,
}

impl fmt::Debug for RegistryOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryOptions")
            .field("plain_http", &self.plain_http)
            .field("ca_file", &self.ca_file)
            .field("config_file", &self.config_file)
            .field(
                "basic",
                &self.basic.as_ref().map(|(u, _)| (u, "<redacted>")),
            )
            .finish()
    }
}

impl RegistryOptions {
    /// A client for `registry`, with its credentials.
    pub fn client(&self, registry: &str) -> Result<Registry, OciError> {
        let given = match &self.ca_file {
            Some(path) => {
                super::tls::read_ca_file(path).map_err(|e| OciError::Config(e.to_string()))?
            }
            None => Vec::new(),
        };
        let credentials = self.auth(registry)?;
        Registry::new(registry, self.plain_http, given, credentials)
            .map_err(|e| OciError::Config(e.to_string()))
    }

    fn auth(&self, registry: &str) -> Result<Credentials, OciError> {
        if let Some((user, password)) = &self.basic {
            return Ok(Credentials::Basic(user.clone(), password.clone()));
        }
        let (path, told) = match &self.config_file {
            Some(p) => (p.clone(), true),
            None => match default_config_file() {
                Some(p) => (p, false),
                None => return Ok(Credentials::Anonymous),
            },
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if !told && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Credentials::Anonymous);
            }
            Err(e) => {
                return Err(OciError::Config(format!(
                    "reading the registry config {}: {e}",
                    path.display()
                )));
            }
        };
        auth_from_config(&text, registry)
            .map_err(|e| OciError::Config(format!("registry config {}: {e}", path.display())))
    }
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, as docker and flux read it.
fn default_config_file() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        Some(dir) => Some(Path::new(&dir).join("config.json")),
        None => std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker/config.json")),
    }
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, DockerAuth>,
}

#[derive(serde::Deserialize, Default)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
    registrytoken: Option<String>,
}

/// Why a Docker `config.json` gave no credentials for a registry.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("not a Docker config.json: {0}")]
    NotDockerConfig(serde_json::Error),
    #[error("the auth of {0} is not base64 of user:password")]
    NotBase64(String),
    #[error("the auth of {0} is not user:password")]
    NotUserPassword(String),
    #[error(
        "the entry of {0} holds an identity token, which driftless does not trade; use --username-file/--password-file"
    )]
    IdentityToken(String),
}

/// The credentials `config.json`'s `auths` holds for `registry`, anonymous when none.
/// Keys are matched as docker does: the host, with or without a scheme and a path.
pub(crate) fn auth_from_config(text: &str, registry: &str) -> Result<Credentials, ConfigError> {
    let config: DockerConfig = serde_json::from_str(text).map_err(ConfigError::NotDockerConfig)?;
    let host_of = |key: &str| {
        let key = key
            .strip_prefix("https://")
            .or_else(|| key.strip_prefix("http://"))
            .unwrap_or(key);
        key.split('/').next().unwrap_or(key).to_string()
    };
    // Docker Hub goes by several names; `docker login` files it under index.docker.io.
    let hub = ["docker.io", "index.docker.io", "registry-1.docker.io"];
    let same = |key: &str| {
        let host = host_of(key);
        host == registry || (hub.contains(&host.as_str()) && hub.contains(&registry))
    };
    let Some((_, entry)) = config.auths.iter().find(|(k, _)| same(k)) else {
        return Ok(Credentials::Anonymous);
    };
    if let Some(token) = entry.registrytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Credentials::Bearer(token.clone()));
    }
    if let Some(encoded) = entry.auth.as_ref().filter(|a| !a.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| ConfigError::NotBase64(registry.to_string()))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| ConfigError::NotUserPassword(registry.to_string()))?;
        return Ok(Credentials::Basic(user.to_string(), password.to_string()));
    }
    match (&entry.username, &entry.password, &entry.identitytoken) {
        (Some(u), Some(p), _) => Ok(Credentials::Basic(u.clone(), p.clone())),
        // An identity token is a refresh token docker trades for access tokens.
        (_, _, Some(_)) => Err(ConfigError::IdentityToken(registry.to_string())),
        _ => Ok(Credentials::Anonymous),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_json_auths_are_read_as_docker_writes_them() {
        let text = r#"{"auths": {
            "https://reg.example:5000/v1/": {"auth": "Ym9iOnMzY3JldA=="},
            "other.example": {"username": "ann", "password": "pw"},
            "tok.example": {"registrytoken": "abc"}
        }, "credsStore": "desktop"}"#;
        let basic = |u: &str, p: &str| Credentials::Basic(u.into(), p.into());
        assert_eq!(
            auth_from_config(text, "reg.example:5000").unwrap(),
            basic("bob", "s3cret")
        );
        assert_eq!(
            auth_from_config(text, "other.example").unwrap(),
            basic("ann", "pw")
        );
        assert_eq!(
            auth_from_config(text, "tok.example").unwrap(),
            Credentials::Bearer("abc".into())
        );
        assert_eq!(
            auth_from_config(text, "none.example").unwrap(),
            Credentials::Anonymous
        );
        let bad = r#"{"auths": {"r": {"auth": "!!"}}}"#;
        assert!(
            auth_from_config(bad, "r")
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
        assert!(
            auth_from_config("[", "r")
                .unwrap_err()
                .to_string()
                .contains("config.json")
        );
    }

    #[test]
    fn debug_hides_the_password() {
        let o = RegistryOptions {
            basic: Some(("bob".into(), "s3cret".into())),
            ..RegistryOptions::default()
        };
        assert!(!format!("{o:?}").contains("s3cret"));
    }
}
