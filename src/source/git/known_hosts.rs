//! OpenSSH `known_hosts` files, for checking the host key an SSH git server presents.
//!
//! libgit2 can only check `~/.ssh/known_hosts` of the user running it; a daemon in a
//! container gets its known hosts from a mounted secret instead, so the file named by
//! `DRIFTLESS_GIT_KNOWN_HOSTS_FILE` is read and matched here, with OpenSSH's rules:
//! comma-separated patterns with `*`/`?` wildcards and `!` negation, `[host]:port` for a
//! port other than 22, hashed names (`|1|salt|hash`, as written with `HashKnownHosts`),
//! and `@revoked` keys. `@cert-authority` lines are ignored: certificates are not
//! offered through libgit2's host key callback, so they could never vouch for a key.

use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

/// One usable line of a known_hosts file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    hosts: HostPatterns,
    revoked: bool,
    key_type: String,
    /// The key in SSH wire format, as libssh2 hands it over.
    key: Vec<u8>,
    line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPatterns {
    Plain(Vec<String>),
    Hashed { salt: Vec<u8>, hash: Vec<u8> },
}

/// The parsed entries of a known_hosts file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KnownHosts {
    entries: Vec<Entry>,
}

/// The host key presented by a server: the raw key when libssh2 provides it, otherwise
/// its SHA-256 (every libssh2 that libgit2 1.9 supports provides at least one of them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PresentedKey<'a> {
    pub key_type: &'a str,
    pub raw: Option<&'a [u8]>,
    pub sha256: Option<[u8; 32]>,
}

impl PresentedKey<'_> {
    fn is(&self, key: &[u8]) -> bool {
        if let Some(raw) = self.raw {
            return raw == key;
        }
        if let Some(hash) = self.sha256 {
            use sha2::Digest;
            return sha2::Sha256::digest(key).as_slice() == hash.as_slice();
        }
        false
    }
}

/// Why a host key was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejection {
    Unknown {
        name: String,
    },
    Mismatch {
        name: String,
        presented: String,
        known_types: Vec<String>,
    },
    Revoked {
        name: String,
        line: usize,
    },
    NoKey,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Unknown { name } => write!(
                f,
                "{name} is not in the known_hosts file (add it, e.g. with `ssh-keyscan`)"
            ),
            Rejection::Mismatch {
                name,
                presented,
                known_types,
            } => write!(
                f,
                "the {presented} key presented by {name} does not match the known_hosts file \
                 (known key types: {}); the server key changed or someone is intercepting \
                 the connection",
                known_types.join(", ")
            ),
            Rejection::Revoked { name, line } => write!(
                f,
                "the key presented by {name} is marked @revoked in the known_hosts file (line {line})"
            ),
            Rejection::NoKey => write!(f, "the server's host key was not made available"),
        }
    }
}

impl KnownHosts {
    /// Parses a known_hosts file. Lines that cannot be read are skipped (as OpenSSH
    /// does) and returned with their line numbers, so the caller can warn about them.
    pub fn parse(text: &str) -> (KnownHosts, Vec<usize>) {
        let mut entries = Vec::new();
        let mut bad = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_line(line, line_no) {
                Ok(Some(e)) => entries.push(e),
                Ok(None) => {}
                Err(()) => bad.push(line_no),
            }
        }
        (KnownHosts { entries }, bad)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks the key a server presented for `host` (as in the URL) on `port`.
    pub fn verify(&self, host: &str, port: u16, key: PresentedKey<'_>) -> Result<(), Rejection> {
        if key.raw.is_none() && key.sha256.is_none() {
            return Err(Rejection::NoKey);
        }
        let host = host.to_ascii_lowercase();
        // OpenSSH's spelling of a host on another port; only that spelling matches then.
        let name = if port == 22 {
            host
        } else {
            format!("[{host}]:{port}")
        };
        let matching: Vec<&Entry> = self.entries.iter().filter(|e| e.matches(&name)).collect();
        if let Some(e) = matching.iter().find(|e| e.revoked && key.is(&e.key)) {
            return Err(Rejection::Revoked { name, line: e.line });
        }
        let known: Vec<&&Entry> = matching.iter().filter(|e| !e.revoked).collect();
        if known.iter().any(|e| key.is(&e.key)) {
            return Ok(());
        }
        if known.is_empty() {
            return Err(Rejection::Unknown { name });
        }
        let mut known_types: Vec<String> = known.iter().map(|e| e.key_type.clone()).collect();
        known_types.sort();
        known_types.dedup();
        Err(Rejection::Mismatch {
            name,
            presented: key.key_type.to_string(),
            known_types,
        })
    }
}

fn parse_line(line: &str, line_no: usize) -> Result<Option<Entry>, ()> {
    let mut fields = line.split_whitespace();
    let mut first = fields.next().ok_or(())?;
    let mut revoked = false;
    if let Some(marker) = first.strip_prefix('@') {
        match marker {
            "revoked" => revoked = true,
            "cert-authority" => return Ok(None),
            _ => return Err(()),
        }
        first = fields.next().ok_or(())?;
    }
    let key_type = fields.next().ok_or(())?;
    let key = base64_decode(fields.next().ok_or(())?).ok_or(())?;
    let hosts = if let Some(hashed) = first.strip_prefix("|1|") {
        let (salt, hash) = hashed.split_once('|').ok_or(())?;
        let salt = base64_decode(salt).ok_or(())?;
        let hash = base64_decode(hash).ok_or(())?;
        if hash.len() != 20 {
            return Err(());
        }
        HostPatterns::Hashed { salt, hash }
    } else {
        HostPatterns::Plain(first.split(',').map(str::to_ascii_lowercase).collect())
    };
    Ok(Some(Entry {
        hosts,
        revoked,
        key_type: key_type.to_string(),
        key,
        line: line_no,
    }))
}

impl Entry {
    fn matches(&self, name: &str) -> bool {
        match &self.hosts {
            HostPatterns::Hashed { salt, hash } => hashed_name_is(salt, hash, name),
            HostPatterns::Plain(patterns) => {
                let mut positive = false;
                for p in patterns {
                    if let Some(negated) = p.strip_prefix('!') {
                        if wildcard_match(negated.as_bytes(), name.as_bytes()) {
                            return false;
                        }
                    } else if wildcard_match(p.as_bytes(), name.as_bytes()) {
                        positive = true;
                    }
                }
                positive
            }
        }
    }
}

/// `*` (any run) and `?` (any one byte), as in OpenSSH's `match_pattern`.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Standard base64 with padding, as in known_hosts files. The unused low bits of the last
/// character may be set: a key is only ever compared, never written back.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    // An empty salt or key is no entry at all.
    if s.is_empty() {
        return None;
    }
    BASE64.decode(s).ok()
}

/// Whether `name` is the host a `|1|salt|hash` entry stands for: OpenSSH hashes host
/// names with HMAC-SHA1 keyed by the salt.
fn hashed_name_is(salt: &[u8], hash: &[u8], name: &str) -> bool {
    let Ok(mut mac) = <Hmac<Sha1> as KeyInit>::new_from_slice(salt) else {
        return false;
    };
    mac.update(name.as_bytes());
    mac.verify_slice(hash).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Generated with ssh-keygen; the hashed lines with `ssh-keygen -H` from
    // "git.example.com <A>" and "[git.example.com]:2222 <B>".
    const KEY_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAILERWni52QnK6Z6cCuaWlhTPBJXXwDNOj60xoXONVVHA";
    const KEY_B: &str = "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBKmHM8jVBg5K+beCdTqGWjIn4U39ouD0P1juGTLpYx1X5Y1k5HxQG/77fX/Ku1iEQiG8UhYPiWXadYOqpan9fZs=";
    const HASHED: &str = "\
|1|VkKpLxoqpNDys8yV9vXlzQN7PZc=|tRCAJuyzuB+VNQ8+vPAHF1qNaGY= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILERWni52QnK6Z6cCuaWlhTPBJXXwDNOj60xoXONVVHA
|1|4TPlLkKTnwM4/OO0orusgGUt1/U=|H/Qs/Qzoioo4cs7thd8Rz/yjgMU= ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBKmHM8jVBg5K+beCdTqGWjIn4U39ouD0P1juGTLpYx1X5Y1k5HxQG/77fX/Ku1iEQiG8UhYPiWXadYOqpan9fZs=
";

    fn raw(b64: &str) -> Vec<u8> {
        base64_decode(b64).unwrap()
    }

    /// The test keys with their types: a key blob starts with its own type, so the two
    /// always go together.
    const A: (&str, &str) = ("ssh-ed25519", KEY_A);
    const B: (&str, &str) = ("ecdsa-sha2-nistp256", KEY_B);

    /// What `kh` says to `host` on `port` presenting `key` whole, as libssh2 hands it over.
    fn verify(
        kh: &KnownHosts,
        host: &str,
        port: u16,
        (key_type, key): (&str, &str),
    ) -> Result<(), Rejection> {
        let raw = raw(key);
        kh.verify(
            host,
            port,
            PresentedKey {
                key_type,
                raw: Some(&raw),
                sha256: None,
            },
        )
    }

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hashed_names_are_hmac_sha1_as_published() {
        // RFC 2202 test cases 1, 2 and 6 (a key longer than the block).
        let cases: [(&[u8], &str, &str); 3] = [
            (
                &[0x0b; 20],
                "Hi There",
                "b617318655057264e28bc0b6fb378c8ef146be00",
            ),
            (
                b"Jefe",
                "what do ya want for nothing?",
                "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
            ),
            (
                &[0xaa; 80],
                "Test Using Larger Than Block-Size Key - Hash Key First",
                "aa4ae5e15272d00e95705637ce8a3b55ed402112",
            ),
        ];
        for (key, name, hash) in cases {
            assert!(hashed_name_is(key, &unhex(hash), name), "{name}");
            assert!(!hashed_name_is(key, &unhex(hash), "other"), "{name}");
        }
        // The first entry of HASHED, taken apart.
        let salt = raw("VkKpLxoqpNDys8yV9vXlzQN7PZc=");
        let hash = raw("tRCAJuyzuB+VNQ8+vPAHF1qNaGY=");
        assert!(hashed_name_is(&salt, &hash, "git.example.com"));
        assert!(!hashed_name_is(&salt, &hash, "git.example.org"));
        assert!(!hashed_name_is(&salt, &hash[..19], "git.example.com"));
    }

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8h").unwrap(), b"hello!");
        assert_eq!(base64_decode("aGVsbA==").unwrap(), b"hell");
        // Set bits past the last byte are ignored, not a reason to skip the line.
        assert_eq!(base64_decode("aGVsbG9=").unwrap(), b"hello");
        assert!(base64_decode("aGVsbG8").is_none());
        assert!(base64_decode("aG=sbG8h").is_none());
        assert!(base64_decode("a$Vs").is_none());
        assert!(base64_decode("").is_none());
        // The key blob starts with its own type name, length-prefixed.
        assert_eq!(&raw(KEY_A)[4..15], b"ssh-ed25519");
    }

    #[test]
    fn plain_entries_match_host_and_port_spelling() {
        let text = format!(
            "# comment\n\ngit.example.com,10.0.0.1 ssh-ed25519 {KEY_A} me@host\n\
             [git.example.com]:2222 ecdsa-sha2-nistp256 {KEY_B}\n"
        );
        let (kh, bad) = KnownHosts::parse(&text);
        assert!(bad.is_empty());
        assert_eq!(verify(&kh, "git.example.com", 22, A), Ok(()));
        assert_eq!(verify(&kh, "10.0.0.1", 22, A), Ok(()));
        // Host names are case-insensitive.
        assert_eq!(verify(&kh, "Git.Example.COM", 22, A), Ok(()));
        assert_eq!(verify(&kh, "git.example.com", 2222, B), Ok(()));
        // The port-22 entry does not vouch for another port, nor the other way round.
        for (port, name, presented, known) in [
            (2222, "[git.example.com]:2222", A, B),
            (22, "git.example.com", B, A),
        ] {
            assert_eq!(
                verify(&kh, "git.example.com", port, presented),
                Err(Rejection::Mismatch {
                    name: name.into(),
                    presented: presented.0.into(),
                    known_types: vec![known.0.into()],
                })
            );
        }
        assert_eq!(
            verify(&kh, "other.example.com", 22, A),
            Err(Rejection::Unknown {
                name: "other.example.com".into()
            })
        );
    }

    #[test]
    fn hashed_entries_match_only_their_host() {
        let (kh, bad) = KnownHosts::parse(HASHED);
        assert!(bad.is_empty());
        assert_eq!(verify(&kh, "git.example.com", 22, A), Ok(()));
        assert_eq!(verify(&kh, "git.example.com", 2222, B), Ok(()));
        assert!(matches!(
            verify(&kh, "git.example.org", 22, A),
            Err(Rejection::Unknown { .. })
        ));
        assert!(matches!(
            verify(&kh, "git.example.com", 22, B),
            Err(Rejection::Mismatch { .. })
        ));
    }

    #[test]
    fn wildcards_negation_revocation_and_markers() {
        let text = format!(
            "*.example.com,!evil.example.com ssh-ed25519 {KEY_A}\n\
             @revoked git?.example.com ecdsa-sha2-nistp256 {KEY_B}\n\
             git1.example.com ecdsa-sha2-nistp256 {KEY_B}\n\
             @cert-authority *.example.com ecdsa-sha2-nistp256 {KEY_B}\n\
             not-a-valid-line\n\
             host ssh-ed25519 not*base64\n\
             @bogus host ssh-ed25519 {KEY_A}\n"
        );
        let (kh, bad) = KnownHosts::parse(&text);
        assert_eq!(bad, vec![5, 6, 7]);
        assert_eq!(verify(&kh, "git.example.com", 22, A), Ok(()));
        assert_eq!(verify(&kh, "a.b.example.com", 22, A), Ok(()));
        assert!(matches!(
            verify(&kh, "evil.example.com", 22, A),
            Err(Rejection::Unknown { .. })
        ));
        // Revoked wins even though another line lists the same key for the host.
        assert_eq!(
            verify(&kh, "git1.example.com", 22, B),
            Err(Rejection::Revoked {
                name: "git1.example.com".into(),
                line: 2
            })
        );
        // A @cert-authority line is not a host key for the hosts it names.
        assert!(matches!(
            verify(&kh, "x.example.com", 22, B),
            Err(Rejection::Mismatch { .. })
        ));
    }

    #[test]
    fn a_key_known_only_by_its_sha256_is_checked_by_hash() {
        use sha2::Digest;
        let text = format!("git.example.com ssh-ed25519 {KEY_A}\n");
        let (kh, _) = KnownHosts::parse(&text);
        let good: [u8; 32] = sha2::Sha256::digest(raw(KEY_A)).into();
        let other: [u8; 32] = sha2::Sha256::digest(raw(KEY_B)).into();
        let by_hash = |sha256| PresentedKey {
            key_type: "ssh-ed25519",
            raw: None,
            sha256: Some(sha256),
        };
        assert_eq!(kh.verify("git.example.com", 22, by_hash(good)), Ok(()));
        assert!(kh.verify("git.example.com", 22, by_hash(other)).is_err());
        let nothing = PresentedKey {
            key_type: "ssh-ed25519",
            raw: None,
            sha256: None,
        };
        assert_eq!(
            kh.verify("git.example.com", 22, nothing),
            Err(Rejection::NoKey)
        );
    }

    #[test]
    fn wildcard_matching() {
        assert!(wildcard_match(b"*", b"anything"));
        assert!(wildcard_match(b"a*c", b"abbbc"));
        assert!(wildcard_match(b"a?c", b"abc"));
        assert!(!wildcard_match(b"a?c", b"abbc"));
        assert!(wildcard_match(b"*.example.com", b"x.example.com"));
        assert!(!wildcard_match(b"*.example.com", b"example.com"));
        assert!(wildcard_match(b"[*]:2222", b"[h]:2222"));
        assert!(!wildcard_match(b"[*]:2222", b"[h]:22"));
    }
}
