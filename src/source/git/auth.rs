//! The credentials for the remote, as configured: read from the environment (never argv),
//! and never printed.

use std::fmt;
use std::path::PathBuf;

use super::GitError;

/// How to authenticate to the remote.
#[derive(Clone, PartialEq, Eq)]
pub enum GitAuth {
    None,
    /// SSH private key file (+ optional passphrase) and known_hosts file; host keys are verified against it.
    SshKey {
        private_key: PathBuf,
        passphrase: Option<String>,
        known_hosts: Option<PathBuf>,
    },
    /// HTTPS token (sent as the password, user "git" unless a username is given).
    Token {
        username: Option<String>,
        token: String,
    },
    UserPassword {
        username: String,
        password: String,
    },
}

struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitAuth::None => f.write_str("None"),
            GitAuth::SshKey {
                private_key,
                passphrase,
                known_hosts,
            } => f
                .debug_struct("SshKey")
                .field("private_key", private_key)
                .field("passphrase", &passphrase.as_ref().map(|_| Redacted))
                .field("known_hosts", known_hosts)
                .finish(),
            GitAuth::Token { username, .. } => f
                .debug_struct("Token")
                .field("username", username)
                .field("token", &Redacted)
                .finish(),
            GitAuth::UserPassword { username, .. } => f
                .debug_struct("UserPassword")
                .field("username", username)
                .field("password", &Redacted)
                .finish(),
        }
    }
}

const ENV_TOKEN: &str = "DRIFTLESS_GIT_TOKEN";
const ENV_TOKEN_FILE: &str = "DRIFTLESS_GIT_TOKEN_FILE";
const ENV_USERNAME: &str = "DRIFTLESS_GIT_USERNAME";
const ENV_PASSWORD: &str = "DRIFTLESS_GIT_PASSWORD";
const ENV_PASSWORD_FILE: &str = "DRIFTLESS_GIT_PASSWORD_FILE";
const ENV_SSH_KEY_FILE: &str = "DRIFTLESS_GIT_SSH_KEY_FILE";
const ENV_SSH_KEY_PASSPHRASE: &str = "DRIFTLESS_GIT_SSH_KEY_PASSPHRASE";
const ENV_KNOWN_HOSTS_FILE: &str = "DRIFTLESS_GIT_KNOWN_HOSTS_FILE";

impl GitAuth {
    /// From the environment, never argv: DRIFTLESS_GIT_TOKEN or DRIFTLESS_GIT_TOKEN_FILE,
    /// DRIFTLESS_GIT_USERNAME + DRIFTLESS_GIT_PASSWORD or DRIFTLESS_GIT_PASSWORD_FILE,
    /// DRIFTLESS_GIT_SSH_KEY_FILE (+ DRIFTLESS_GIT_SSH_KEY_PASSPHRASE, DRIFTLESS_GIT_KNOWN_HOSTS_FILE).
    /// Takes a lookup fn so tests don't touch the process env.
    ///
    /// An empty variable counts as unset (an optional secret in a Deployment often comes
    /// through as ""). Settings that would be ignored are errors rather than surprises.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<GitAuth, GitError> {
        let var = |name: &str| get(name).filter(|v| !v.is_empty());
        let token = secret(&var, ENV_TOKEN, ENV_TOKEN_FILE)?;
        let password = secret(&var, ENV_PASSWORD, ENV_PASSWORD_FILE)?;
        let username = var(ENV_USERNAME);
        let key = var(ENV_SSH_KEY_FILE).map(PathBuf::from);
        let passphrase = var(ENV_SSH_KEY_PASSPHRASE);
        let known_hosts = var(ENV_KNOWN_HOSTS_FILE).map(PathBuf::from);

        let config = |m: String| Err(GitError::Config(m));
        let kinds = [
            token.is_some().then_some("a token"),
            password.is_some().then_some("a password"),
            key.is_some().then_some("an SSH key"),
        ];
        let kinds: Vec<&str> = kinds.into_iter().flatten().collect();
        if kinds.len() > 1 {
            return config(format!(
                "git credentials: set only one of {ENV_TOKEN}(_FILE), {ENV_PASSWORD}(_FILE) \
                 and {ENV_SSH_KEY_FILE} (found {})",
                kinds.join(" and ")
            ));
        }
        if key.is_none() {
            for (name, set) in [
                (ENV_SSH_KEY_PASSPHRASE, passphrase.is_some()),
                (ENV_KNOWN_HOSTS_FILE, known_hosts.is_some()),
            ] {
                if set {
                    return config(format!("git credentials: {name} needs {ENV_SSH_KEY_FILE}"));
                }
            }
        }
        if let Some(private_key) = key {
            if username.is_some() {
                return config(format!(
                    "git credentials: {ENV_USERNAME} is not used with an SSH key; put the user \
                     in the URL (ssh://user@host/repo.git)"
                ));
            }
            for path in std::iter::once(&private_key).chain(known_hosts.as_ref()) {
                if let Err(e) = std::fs::metadata(path) {
                    return config(format!("git credentials: {}: {e}", path.display()));
                }
            }
            return Ok(GitAuth::SshKey {
                private_key,
                passphrase,
                known_hosts,
            });
        }
        if let Some(token) = token {
            return Ok(GitAuth::Token { username, token });
        }
        if let Some(password) = password {
            let Some(username) = username else {
                return config(format!(
                    "git credentials: {ENV_PASSWORD}(_FILE) needs {ENV_USERNAME}"
                ));
            };
            return Ok(GitAuth::UserPassword { username, password });
        }
        if username.is_some() {
            return config(format!(
                "git credentials: {ENV_USERNAME} needs {ENV_PASSWORD}(_FILE) or {ENV_TOKEN}(_FILE)"
            ));
        }
        Ok(GitAuth::None)
    }

    pub(super) fn secrets(&self) -> Vec<String> {
        match self {
            GitAuth::None => vec![],
            GitAuth::SshKey { passphrase, .. } => passphrase.iter().cloned().collect(),
            GitAuth::Token { token, .. } => vec![token.clone()],
            GitAuth::UserPassword { password, .. } => vec![password.clone()],
        }
    }
}

/// A secret given either inline or as a file (a mounted Kubernetes Secret, whose trailing
/// newline is not part of the secret).
fn secret(
    var: &impl Fn(&str) -> Option<String>,
    name: &str,
    file_name: &str,
) -> Result<Option<String>, GitError> {
    match (var(name), var(file_name)) {
        (Some(_), Some(_)) => Err(GitError::Config(format!(
            "git credentials: set {name} or {file_name}, not both"
        ))),
        (Some(v), None) => Ok(Some(v)),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                GitError::Config(format!("git credentials: {file_name}={path}: {e}"))
            })?;
            let value = text.trim();
            if value.is_empty() {
                return Err(GitError::Config(format!(
                    "git credentials: {file_name}={path}: the file is empty"
                )));
            }
            Ok(Some(value.to_string()))
        }
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        move |k| map.get(k).map(|v| v.to_string())
    }

    fn config_error(r: Result<GitAuth, GitError>) -> String {
        match r {
            Err(GitError::Config(m)) => m,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn from_env_nothing_is_anonymous() {
        assert_eq!(GitAuth::from_env(env(&[])).unwrap(), GitAuth::None);
        // Empty counts as unset.
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN, ""), (ENV_USERNAME, "")])).unwrap(),
            GitAuth::None
        );
    }

    #[test]
    fn from_env_token_inline_and_from_file() {
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN, "tok-123")])).unwrap(),
            GitAuth::Token {
                username: None,
                token: "tok-123".into()
            }
        );
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN, "tok-123"), (ENV_USERNAME, "bot")])).unwrap(),
            GitAuth::Token {
                username: Some("bot".into()),
                token: "tok-123".into()
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "tok-from-file\n").unwrap();
        let file = file.to_str().unwrap();
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_TOKEN_FILE, file)])).unwrap(),
            GitAuth::Token {
                username: None,
                token: "tok-from-file".into()
            }
        );
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_TOKEN, "x"),
            (ENV_TOKEN_FILE, file),
        ])));
        assert!(m.contains(ENV_TOKEN_FILE), "{m}");
        let missing = dir.path().join("nope");
        let m = config_error(GitAuth::from_env(env(&[(
            ENV_TOKEN_FILE,
            missing.to_str().unwrap(),
        )])));
        assert!(m.contains("nope"), "{m}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let m = config_error(GitAuth::from_env(env(&[(
            ENV_TOKEN_FILE,
            empty.to_str().unwrap(),
        )])));
        assert!(m.contains("empty"), "{m}");
    }

    #[test]
    fn from_env_user_password() {
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_USERNAME, "alice"), (ENV_PASSWORD, "pw")])).unwrap(),
            GitAuth::UserPassword {
                username: "alice".into(),
                password: "pw".into()
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "pw-file\r\n").unwrap();
        assert_eq!(
            GitAuth::from_env(env(&[
                (ENV_USERNAME, "alice"),
                (ENV_PASSWORD_FILE, file.to_str().unwrap())
            ]))
            .unwrap(),
            GitAuth::UserPassword {
                username: "alice".into(),
                password: "pw-file".into()
            }
        );
        let m = config_error(GitAuth::from_env(env(&[(ENV_PASSWORD, "pw")])));
        assert!(m.contains(ENV_USERNAME), "{m}");
        let m = config_error(GitAuth::from_env(env(&[(ENV_USERNAME, "alice")])));
        assert!(m.contains(ENV_PASSWORD), "{m}");
    }

    #[test]
    fn from_env_ssh_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("identity");
        let kh = dir.path().join("known_hosts");
        std::fs::write(&key, "key").unwrap();
        std::fs::write(&kh, "").unwrap();
        let (key_s, kh_s) = (key.to_str().unwrap(), kh.to_str().unwrap());
        assert_eq!(
            GitAuth::from_env(env(&[(ENV_SSH_KEY_FILE, key_s)])).unwrap(),
            GitAuth::SshKey {
                private_key: key.clone(),
                passphrase: None,
                known_hosts: None
            }
        );
        assert_eq!(
            GitAuth::from_env(env(&[
                (ENV_SSH_KEY_FILE, key_s),
                (ENV_SSH_KEY_PASSPHRASE, "phrase"),
                (ENV_KNOWN_HOSTS_FILE, kh_s)
            ]))
            .unwrap(),
            GitAuth::SshKey {
                private_key: key.clone(),
                passphrase: Some("phrase".into()),
                known_hosts: Some(kh.clone())
            }
        );
        let missing = dir.path().join("missing_known_hosts");
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_SSH_KEY_FILE, key_s),
            (ENV_KNOWN_HOSTS_FILE, missing.to_str().unwrap()),
        ])));
        assert!(m.contains("missing_known_hosts"), "{m}");
        let m = config_error(GitAuth::from_env(env(&[(ENV_KNOWN_HOSTS_FILE, kh_s)])));
        assert!(m.contains(ENV_SSH_KEY_FILE), "{m}");
        let m = config_error(GitAuth::from_env(env(&[(ENV_SSH_KEY_PASSPHRASE, "p")])));
        assert!(m.contains(ENV_SSH_KEY_FILE), "{m}");
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_SSH_KEY_FILE, key_s),
            (ENV_USERNAME, "u"),
        ])));
        assert!(m.contains(ENV_USERNAME), "{m}");
    }

    #[test]
    fn from_env_rejects_two_kinds_without_echoing_secrets() {
        let m = config_error(GitAuth::from_env(env(&[
            (ENV_TOKEN, "tok-secret"),
            (ENV_USERNAME, "u"),
            (ENV_PASSWORD, "pw-secret"),
        ])));
        assert!(m.contains("a token and a password"), "{m}");
        assert!(!m.contains("tok-secret") && !m.contains("pw-secret"), "{m}");
    }

    #[test]
    fn debug_redacts_secrets() {
        let all = [
            GitAuth::Token {
                username: Some("bot".into()),
                token: "tok-secret".into(),
            },
            GitAuth::UserPassword {
                username: "alice".into(),
                password: "pw-secret".into(),
            },
            GitAuth::SshKey {
                private_key: "/keys/id".into(),
                passphrase: Some("phrase-secret".into()),
                known_hosts: Some("/keys/kh".into()),
            },
        ];
        for auth in all {
            let text = format!("{auth:?} {auth:#?}");
            assert!(!text.contains("secret"), "{text}");
            assert!(text.contains("<redacted>"), "{text}");
        }
    }
}
