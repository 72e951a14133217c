//! What libgit2 asks of us during a fetch: credentials, and whether to trust the SSH host
//! key. libgit2 only reports a failed callback as a generic error, so each callback also
//! notes why it said no.

use std::cell::{Cell, RefCell};
use std::path::Path;

use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

use super::{GitAuth, GitSource, KnownHosts, PresentedKey};

/// libgit2 asks again, forever, while the server keeps refusing what it is given.
const MAX_AUTH_ATTEMPTS: u32 = 3;

/// Why a callback refused, kept for the error the fetch then returns.
#[derive(Default)]
pub(super) struct Refusals {
    attempts: Cell<u32>,
    pub(super) auth: RefCell<Option<String>>,
    pub(super) host_key: RefCell<Option<String>>,
}

/// The callbacks for one fetch by `source`, checking host keys against `known_hosts`.
pub(super) fn remote_callbacks<'a>(
    source: &'a GitSource,
    known_hosts: Option<&'a KnownHosts>,
    refusals: &'a Refusals,
) -> RemoteCallbacks<'a> {
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(|_url, username_from_url, allowed| {
        let choice = choose_credential(&source.auth, username_from_url, allowed);
        // Naming the user is not an attempt that can fail; only offers of secrets are.
        if !matches!(choice, Ok(CredChoice::Username(_))) {
            refusals.attempts.set(refusals.attempts.get() + 1);
            if refusals.attempts.get() > MAX_AUTH_ATTEMPTS {
                let message =
                    format!("the server rejected the credentials {MAX_AUTH_ATTEMPTS} times");
                *refusals.auth.borrow_mut() = Some(message.clone());
                return Err(git2::Error::from_str(&message));
            }
        }
        let made = match choice {
            Ok(choice) => choice.into_cred(),
            Err(why) => {
                *refusals.auth.borrow_mut() = Some(why.to_string());
                return Err(git2::Error::from_str(why));
            }
        };
        made.map_err(|e| {
            // Such as an unreadable or undecryptable key; the message names a path at most.
            let message = format!(
                "cannot use the credentials: {}",
                source.redactor.redact(e.message())
            );
            *refusals.auth.borrow_mut() = Some(message.clone());
            git2::Error::from_str(&message)
        })
    });
    let port = source.ssh_port;
    callbacks.certificate_check(move |cert, host| {
        // TLS certificates: libgit2's own verification decides (it stays on).
        let Some(hostkey) = cert.as_hostkey() else {
            return Ok(CertificateCheckStatus::CertificatePassthrough);
        };
        // No known_hosts file given: libgit2 checks ~/.ssh/known_hosts itself.
        let Some(known) = known_hosts else {
            return Ok(CertificateCheckStatus::CertificatePassthrough);
        };
        let key_type = hostkey
            .hostkey_type()
            .map(|t| t.name())
            .unwrap_or("unknown");
        let presented = PresentedKey {
            key_type,
            raw: hostkey.hostkey(),
            sha256: hostkey.hash_sha256().copied(),
        };
        match known.verify(host, port, presented) {
            Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
            Err(rejection) => {
                let message = rejection.to_string();
                *refusals.host_key.borrow_mut() = Some(message.clone());
                Err(git2::Error::from_str(&message))
            }
        }
    });
    callbacks
}

/// What the credential callback hands libgit2, decided without touching libgit2 so the
/// choice can be tested.
#[derive(Debug, PartialEq, Eq)]
enum CredChoice<'a> {
    Username(&'a str),
    UserPass {
        username: &'a str,
        password: &'a str,
    },
    SshKey {
        username: &'a str,
        private_key: &'a Path,
        passphrase: Option<&'a str>,
    },
}

impl CredChoice<'_> {
    fn into_cred(self) -> Result<Cred, git2::Error> {
        match self {
            CredChoice::Username(u) => Cred::username(u),
            CredChoice::UserPass { username, password } => {
                Cred::userpass_plaintext(username, password)
            }
            CredChoice::SshKey {
                username,
                private_key,
                passphrase,
            } => {
                // Some libssh2 builds cannot derive the public key from every private key
                // format; a `.pub` beside it (as `ssh-keygen` leaves) settles that.
                let public = private_key.with_extension("pub");
                let public = public.is_file().then_some(public);
                Cred::ssh_key(username, public.as_deref(), private_key, passphrase)
            }
        }
    }
}

const DEFAULT_USER: &str = "git";

fn choose_credential<'a>(
    auth: &'a GitAuth,
    username_from_url: Option<&'a str>,
    allowed: CredentialType,
) -> Result<CredChoice<'a>, &'static str> {
    let url_user = username_from_url.filter(|u| !u.is_empty());
    match auth {
        GitAuth::None => Err("the server asks for credentials and none are configured \
             (DRIFTLESS_GIT_TOKEN, DRIFTLESS_GIT_USERNAME/PASSWORD or DRIFTLESS_GIT_SSH_KEY_FILE)"),
        GitAuth::SshKey {
            private_key,
            passphrase,
            ..
        } => {
            let username = url_user.unwrap_or(DEFAULT_USER);
            if allowed.contains(CredentialType::SSH_KEY) {
                Ok(CredChoice::SshKey {
                    username,
                    private_key,
                    passphrase: passphrase.as_deref(),
                })
            } else if allowed.contains(CredentialType::USERNAME) {
                Ok(CredChoice::Username(username))
            } else {
                Err(
                    "an SSH key is configured but the server does not accept one (is the URL an ssh:// URL?)",
                )
            }
        }
        GitAuth::Token { username, token } => {
            let username = username.as_deref().or(url_user).unwrap_or(DEFAULT_USER);
            user_pass(allowed, username, token)
        }
        GitAuth::UserPassword { username, password } => user_pass(allowed, username, password),
    }
}

fn user_pass<'a>(
    allowed: CredentialType,
    username: &'a str,
    password: &'a str,
) -> Result<CredChoice<'a>, &'static str> {
    if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
        Ok(CredChoice::UserPass { username, password })
    } else {
        Err(
            "a token or password is configured but the server does not accept one (SSH URLs need DRIFTLESS_GIT_SSH_KEY_FILE)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_choice_follows_auth_and_allowed_types() {
        let token = GitAuth::Token {
            username: None,
            token: "t".into(),
        };
        let plain = CredentialType::USER_PASS_PLAINTEXT;
        assert_eq!(
            choose_credential(&token, None, plain),
            Ok(CredChoice::UserPass {
                username: "git",
                password: "t"
            })
        );
        // A user in the URL is kept when no username is configured.
        assert_eq!(
            choose_credential(&token, Some("x-access-token"), plain),
            Ok(CredChoice::UserPass {
                username: "x-access-token",
                password: "t"
            })
        );
        let named = GitAuth::Token {
            username: Some("bot".into()),
            token: "t".into(),
        };
        assert_eq!(
            choose_credential(&named, Some("other"), plain),
            Ok(CredChoice::UserPass {
                username: "bot",
                password: "t"
            })
        );
        assert!(choose_credential(&token, None, CredentialType::SSH_KEY).is_err());

        let key = GitAuth::SshKey {
            private_key: "/k/id".into(),
            passphrase: Some("p".into()),
            known_hosts: None,
        };
        assert_eq!(
            choose_credential(&key, None, CredentialType::USERNAME),
            Ok(CredChoice::Username("git"))
        );
        assert_eq!(
            choose_credential(
                &key,
                Some("deploy"),
                CredentialType::SSH_KEY | CredentialType::USER_PASS_PLAINTEXT
            ),
            Ok(CredChoice::SshKey {
                username: "deploy",
                private_key: Path::new("/k/id"),
                passphrase: Some("p")
            })
        );
        assert!(choose_credential(&key, None, plain).is_err());
        assert!(choose_credential(&GitAuth::None, None, plain).is_err());

        // And libgit2 accepts what is chosen.
        let cred = CredChoice::UserPass {
            username: "git",
            password: "t",
        }
        .into_cred()
        .unwrap();
        assert_eq!(cred.credtype(), CredentialType::USER_PASS_PLAINTEXT.bits());
        let cred = CredChoice::Username("git").into_cred().unwrap();
        assert_eq!(cred.credtype(), CredentialType::USERNAME.bits());
        let cred = CredChoice::SshKey {
            username: "git",
            private_key: Path::new("/k/id"),
            passphrase: None,
        }
        .into_cred()
        .unwrap();
        assert_eq!(cred.credtype(), CredentialType::SSH_KEY.bits());
    }
}
