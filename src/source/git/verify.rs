//! Commit signatures, checked against what the operator gives with `--verify-commits`,
//! never against anything the repository says: an `allowed_signers` file (ssh-keygen(1),
//! ALLOWED SIGNERS) for SSH signatures, as git checks them with `gpg.format=ssh`, and an
//! OpenPGP keyring for OpenPGP ones (`openpgp.rs`). A commit is applied only when it
//! carries an SSH signature in the `git` namespace, over its own content, by a key the
//! file allows for that namespace at the commit's time, or an OpenPGP signature over its
//! content by a key of the keyring that could sign then.
//!
//! The files are read again before each check: a mounted Secret can change while the
//! daemon runs, as the known_hosts file can.

use std::path::{Path, PathBuf};

use git2::{ErrorCode, Oid, Repository};
use ssh_key::{HashAlg, PublicKey, SshSig};

pub use super::signature::{Signer, Unverified};

/// The namespace git signs commits and tags in.
const NAMESPACE: &str = "git";

/// Why the allowed signers or a keyring cannot be read: the daemon refuses to start on
/// it (at start) or the revision is not applied (later).
#[derive(Debug, thiserror::Error)]
pub enum SignersError {
    #[error("--verify-commits {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("OpenPGP keyring {}: {why}", path.display())]
    Keyring {
        path: PathBuf,
        why: super::openpgp::KeyringError,
    },
    #[error("OpenPGP keyring {} holds no key", path.display())]
    EmptyKeyring { path: PathBuf },
    #[error("{}:{line}: {error}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        error: LineError,
    },
    #[error("allowed signers file {} allows no key", path.display())]
    Empty { path: PathBuf },
}

/// What is wrong with one line of the allowed signers file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("expected: principals [options] key-type base64-key")]
    Shape,
    #[error("the key cannot be read: {0}")]
    Key(String),
    #[error("cert-authority lines are not supported: list the signers' own keys")]
    CertAuthority,
    #[error("unknown option {0:?}")]
    UnknownOption(String),
    #[error("{0:?} is no time (YYYYMMDD[HHMM[SS]][Z])")]
    Time(String),
}

/// What `--verify-commits` trusts: the keys of its allowed_signers files and OpenPGP
/// keyrings (a file is one or the other, told apart by its content).
#[derive(Debug, Clone, Default)]
pub struct Trusted {
    ssh: AllowedSigners,
    openpgp: super::openpgp::Keyring,
}

impl Trusted {
    /// Reads `paths`, each an allowed_signers file or an OpenPGP keyring (armored or
    /// binary, as `gpg --export` writes it).
    pub fn read(paths: &[PathBuf]) -> Result<Trusted, SignersError> {
        let mut trusted = Trusted::default();
        for path in paths {
            let bytes = std::fs::read(path).map_err(|source| SignersError::Read {
                path: path.clone(),
                source,
            })?;
            if !super::openpgp::is_keyring(&bytes) {
                let signers = AllowedSigners::of_file(path, bytes)?;
                trusted.ssh.entries.extend(signers.entries);
                continue;
            }
            let keyring =
                super::openpgp::Keyring::parse(&bytes).map_err(|why| SignersError::Keyring {
                    path: path.clone(),
                    why,
                })?;
            if keyring.is_empty() {
                return Err(SignersError::EmptyKeyring { path: path.clone() });
            }
            trusted.openpgp.extend(keyring);
        }
        Ok(trusted)
    }
}

/// The keys an allowed_signers file allows, each with its principals and limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct AllowedSigners {
    entries: Vec<Allowed>,
}

#[derive(Debug, Clone)]
struct Allowed {
    principals: String,
    key: PublicKey,
    /// `namespaces="..."`: the namespaces the key may sign in (all when absent).
    namespaces: Option<Vec<String>>,
    /// `valid-after` / `valid-before`, as Unix seconds.
    after: Option<i64>,
    before: Option<i64>,
}

impl AllowedSigners {
    /// The signers of file `path`, whose content is `bytes` (text, as the file is read
    /// as text: bytes that are not UTF-8 are a read error).
    fn of_file(path: &Path, bytes: Vec<u8>) -> Result<AllowedSigners, SignersError> {
        let text = String::from_utf8(bytes).map_err(|e| SignersError::Read {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
        })?;
        let signers = Self::parse(&text).map_err(|(line, error)| SignersError::Line {
            path: path.to_path_buf(),
            line,
            error,
        })?;
        if signers.entries.is_empty() {
            return Err(SignersError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(signers)
    }

    /// Parses the file's text; an error names its line (1-based). A `cert-authority`
    /// line is refused: certificates are not checked, and trusting a CA's key as a
    /// signer's would allow what the line does not.
    pub fn parse(text: &str) -> Result<AllowedSigners, (usize, LineError)> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            entries.push(parse_line(line).map_err(|m| (i + 1, m))?);
        }
        Ok(AllowedSigners { entries })
    }
}

fn parse_line(line: &str) -> Result<Allowed, LineError> {
    let (principals, rest) = split_token(line);
    let rest = rest.trim_start();
    // Options come between the principals and the key when the next token is no key type.
    let (options, key_text) = if looks_like_key_type(rest) {
        ("", rest)
    } else {
        let (options, rest) = split_token(rest);
        (options, rest.trim_start())
    };
    if principals.is_empty() || key_text.is_empty() {
        return Err(LineError::Shape);
    }
    let mut allowed = Allowed {
        principals: principals.to_string(),
        key: PublicKey::from_openssh(key_text).map_err(|e| LineError::Key(e.to_string()))?,
        namespaces: None,
        after: None,
        before: None,
    };
    for option in split_options(options) {
        let (name, value) = match option.split_once('=') {
            Some((n, v)) => (n, Some(v.trim_matches('"'))),
            None => (option, None),
        };
        match (name.to_ascii_lowercase().as_str(), value) {
            ("namespaces", Some(v)) => {
                allowed.namespaces = Some(v.split(',').map(str::to_string).collect());
            }
            ("valid-after", Some(v)) => allowed.after = Some(time_of(v)?),
            ("valid-before", Some(v)) => allowed.before = Some(time_of(v)?),
            ("cert-authority", None) => {
                return Err(LineError::CertAuthority);
            }
            _ => return Err(LineError::UnknownOption(option.to_string())),
        }
    }
    Ok(allowed)
}

/// The first whitespace-separated token, quotes kept together (`"a b",c`), and the rest.
fn split_token(text: &str) -> (&str, &str) {
    let mut quoted = false;
    for (i, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return (&text[..i], &text[i..]),
            _ => {}
        }
    }
    (text, "")
}

/// Options are separated by commas outside quotes.
fn split_options(options: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quoted, mut start) = (false, 0);
    for (i, c) in options.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&options[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < options.len() {
        out.push(&options[start..]);
    }
    out.into_iter().filter(|o| !o.is_empty()).collect()
}

fn looks_like_key_type(text: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-", "rsa-"]
        .iter()
        .any(|p| text.starts_with(p))
}

/// `YYYYMMDD[HHMM[SS]][Z]` as ssh-keygen reads it; without `Z`, ssh-keygen takes the
/// host's time zone, which a daemon in a container rarely shares with whoever wrote
/// the file, so UTC is taken (said in the book).
fn time_of(value: &str) -> Result<i64, LineError> {
    let digits = value.strip_suffix(['Z', 'z']).unwrap_or(value);
    let bad = || LineError::Time(value.to_string());
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| digits.get(r).and_then(|s| s.parse::<i16>().ok());
    let (year, month, day) = (num(0..4), num(4..6), num(6..8));
    let hour = if digits.len() > 8 {
        num(8..10)
    } else {
        Some(0)
    };
    let minute = if digits.len() > 8 {
        num(10..12)
    } else {
        Some(0)
    };
    let second = if digits.len() > 12 {
        num(12..14)
    } else {
        Some(0)
    };
    let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(s)) =
        (year, month, day, hour, minute, second)
    else {
        return Err(bad());
    };
    let at = k8s_openapi::jiff::civil::DateTime::new(
        y, mo as i8, d as i8, h as i8, mi as i8, s as i8, 0,
    )
    .map_err(|_| bad())?;
    at.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .map(|z| z.timestamp().as_second())
        .map_err(|_| bad())
}

/// Checks `commit`'s signature against `signers`; returns who signed it.
pub(crate) fn verify_commit(
    repo: &Repository,
    commit: Oid,
    trusted: &Trusted,
) -> Result<Signer, Unverified> {
    let what = format!("commit {}", &commit.to_string()[..12]);
    let (signature, signed) = match repo.extract_signature(&commit, None) {
        Ok(found) => found,
        Err(e) if e.code() == ErrorCode::NotFound => {
            return Err(Unverified::Unsigned { what });
        }
        Err(e) => {
            return Err(Unverified::Unreadable {
                what,
                message: e.message().to_string(),
            });
        }
    };
    let when = repo
        .find_commit(commit)
        .map(|c| c.committer().when().seconds())
        .map_err(|e| Unverified::Unreadable {
            what: what.clone(),
            message: e.message().to_string(),
        })?;
    verify(&what, &signature, &signed, when, trusted)
}

/// Checks the signature of tag `name` (the object `target` its ref points to), as git's
/// `verify-tag` does: the signature is the armored block that ends the tag object, over
/// what comes before it. A lightweight tag (a ref straight to a commit) has nothing
/// signed.
pub(crate) fn verify_tag(
    repo: &Repository,
    name: &str,
    target: Oid,
    trusted: &Trusted,
) -> Result<Signer, Unverified> {
    let what = format!("tag {name}");
    let unreadable = |e: git2::Error| Unverified::Unreadable {
        what: what.clone(),
        message: e.message().to_string(),
    };
    let Ok(tag) = repo.find_tag(target) else {
        return Err(Unverified::Unsigned { what });
    };
    let when = tag.tagger().map_or(0, |t| t.when().seconds());
    let odb = repo.odb().map_err(unreadable)?;
    let object = odb.read(target).map_err(unreadable)?;
    let data = object.data();
    let start = [
        "-----BEGIN SSH SIGNATURE-----",
        "-----BEGIN PGP SIGNATURE-----",
    ]
    .iter()
    .filter_map(|marker| find_line(data, marker.as_bytes()))
    .min();
    let Some(start) = start else {
        return Err(Unverified::Unsigned { what });
    };
    verify(&what, &data[start..], &data[..start], when, trusted)
}

/// Where a line beginning with `marker` starts in `data`.
fn find_line(data: &[u8], marker: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at < data.len() {
        if data[at..].starts_with(marker) {
            return Some(at);
        }
        at += data[at..].iter().position(|&b| b == b'\n')? + 1;
    }
    None
}

/// Checks one signature (`signature`, armored) over `signed` made at `when` (Unix
/// seconds: the committer's time, as git hands ssh-keygen with `-Overify-time`; an
/// OpenPGP signature carries its own).
pub fn verify(
    what: &str,
    signature: &[u8],
    signed: &[u8],
    when: i64,
    trusted: &Trusted,
) -> Result<Signer, Unverified> {
    let text = String::from_utf8_lossy(signature);
    let no_keys = |kind, file| Unverified::NoKeys {
        what: what.to_string(),
        kind,
        file,
    };
    if text.contains("-----BEGIN PGP SIGNATURE-----") {
        if trusted.openpgp.is_empty() {
            return Err(no_keys("OpenPGP", "OpenPGP keyring"));
        }
        return super::openpgp::verify(what, signature, signed, &trusted.openpgp);
    }
    if trusted.ssh.entries.is_empty() && text.contains("-----BEGIN SSH SIGNATURE-----") {
        return Err(no_keys("SSH", "allowed_signers file"));
    }
    verify_ssh(what, &text, signed, when, &trusted.ssh)
}

fn verify_ssh(
    what: &str,
    text: &str,
    signed: &[u8],
    when: i64,
    signers: &AllowedSigners,
) -> Result<Signer, Unverified> {
    let sig = SshSig::from_pem(text.trim().as_bytes()).map_err(|e| Unverified::Unreadable {
        what: what.to_string(),
        message: e.to_string(),
    })?;
    let key = sig.public_key().fingerprint(HashAlg::Sha256).to_string();
    if sig.namespace() != NAMESPACE {
        return Err(Unverified::Namespace {
            what: what.to_string(),
            namespace: sig.namespace().to_string(),
        });
    }
    let mut allowed_then = None;
    let mut listed = None;
    for entry in signers
        .entries
        .iter()
        .filter(|e| e.key.key_data() == sig.public_key())
        .filter(|e| {
            e.namespaces
                .as_ref()
                .is_none_or(|ns| ns.iter().any(|n| n == NAMESPACE))
        })
    {
        listed.get_or_insert(entry);
        if entry.after.is_none_or(|t| when >= t) && entry.before.is_none_or(|t| when < t) {
            allowed_then = Some(entry);
            break;
        }
    }
    let Some(entry) = allowed_then else {
        return Err(match listed {
            Some(entry) => Unverified::Expired {
                what: what.to_string(),
                key,
                principals: entry.principals.clone(),
            },
            None => Unverified::UnknownKey {
                what: what.to_string(),
                key,
            },
        });
    };
    entry
        .key
        .verify(NAMESPACE, signed, &sig)
        .map_err(|_| Unverified::BadSignature {
            what: what.to_string(),
            key: key.clone(),
        })?;
    Ok(Signer {
        principals: entry.principals.clone(),
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILM+rvN+ot98qgEN796jTiQfZfG1KaT0PtFDJ/XFSqti";

    #[test]
    fn a_file_reads_principals_options_and_keys_and_refuses_what_it_cannot_honour() {
        let text = format!(
            "# the team\n\nalice@example.com {KEY} alice\n\
             bob@example.com,\"c d\" namespaces=\"git,file\",valid-after=\"20260101\",valid-before=20270101Z {KEY}\n"
        );
        let signers = AllowedSigners::parse(&text).unwrap();
        assert_eq!(signers.entries.len(), 2);
        assert_eq!(signers.entries[0].principals, "alice@example.com");
        assert!(signers.entries[0].namespaces.is_none());
        let bob = &signers.entries[1];
        assert_eq!(bob.principals, "bob@example.com,\"c d\"");
        assert_eq!(
            bob.namespaces.as_deref(),
            Some(&["git".to_string(), "file".to_string()][..])
        );
        assert_eq!(bob.after, Some(1_767_225_600));
        assert_eq!(bob.before, Some(1_798_761_600));

        let refused = |text: &str| AllowedSigners::parse(text).unwrap_err();
        assert_eq!(refused(&format!("\nca cert-authority {KEY}\n")).0, 2);
        assert!(
            refused(&format!("a cert-authority {KEY}"))
                .1
                .to_string()
                .contains("cert-authority")
        );
        assert!(
            refused(&format!("a frobnicate {KEY}"))
                .1
                .to_string()
                .contains("unknown option")
        );
        assert!(
            refused(&format!("a valid-after=2026 {KEY}"))
                .1
                .to_string()
                .contains("no time")
        );
        assert!(
            refused("a ssh-ed25519 AAAA-not-base64")
                .1
                .to_string()
                .contains("cannot be read")
        );
        assert_eq!(refused("lonely").1, LineError::Shape);
    }

    #[test]
    fn a_signature_of_a_kind_nothing_trusts_or_unreadable_is_said_as_such() {
        let trusted = Trusted {
            ssh: AllowedSigners::parse(&format!("a {KEY}")).unwrap(),
            openpgp: Default::default(),
        };
        let pgp = b"-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n";
        let no_keys = verify("commit c", pgp, b"x", 0, &trusted).unwrap_err();
        assert_eq!(
            no_keys.to_string(),
            "commit c is signed with OpenPGP, and --verify-commits was given no OpenPGP keyring"
        );
        assert!(matches!(
            verify("c", b"garbage", b"x", 0, &trusted),
            Err(Unverified::Unreadable { .. })
        ));
        let ssh = b"-----BEGIN SSH SIGNATURE-----\nabc\n-----END SSH SIGNATURE-----\n";
        assert!(matches!(
            verify("c", ssh, b"x", 0, &Trusted::default()),
            Err(Unverified::NoKeys { kind: "SSH", .. })
        ));
    }
}
