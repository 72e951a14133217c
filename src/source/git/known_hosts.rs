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
pub struct KnownHosts {
    entries: Vec<Entry>,
}

/// The host key presented by a server: the raw key when libssh2 provides it, otherwise
/// its SHA-256 (every libssh2 that libgit2 1.9 supports provides at least one of them).
#[derive(Debug, Clone, Copy)]
pub struct PresentedKey<'a> {
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
pub enum Rejection {
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
            HostPatterns::Hashed { salt, hash } => hmac_sha1(salt, name.as_bytes()) == hash[..],
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

/// Standard base64 with padding, as in known_hosts files.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = s.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let last = i == bytes.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

/// HMAC-SHA1, which OpenSSH uses to hash host names; no SHA-1 crate is among the
/// dependencies, and this is all of it that is needed.
fn hmac_sha1(key: &[u8], message: &[u8]) -> [u8; 20] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..20].copy_from_slice(&sha1(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Vec::with_capacity(BLOCK + message.len());
    inner.extend(k.iter().map(|b| b ^ 0x36));
    inner.extend_from_slice(message);
    let mut outer = Vec::with_capacity(BLOCK + 20);
    outer.extend(k.iter().map(|b| b ^ 0x5c));
    outer.extend_from_slice(&sha1(&inner));
    sha1(&outer)
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, &wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let temp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = temp;
        }
        for (hi, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hi = hi.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, v) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&v.to_be_bytes());
    }
    out
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

    fn presented<'a>(key_type: &'a str, key: &'a [u8]) -> PresentedKey<'a> {
        PresentedKey {
            key_type,
            raw: Some(key),
            sha256: None,
        }
    }

    #[test]
    fn sha1_and_hmac_match_published_vectors() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(&sha1(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        // RFC 2202 test cases 1 and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha1(&[0x0b; 20], b"Hi There")),
            "b617318655057264e28bc0b6fb378c8ef146be00"
        );
        assert_eq!(
            hex(&hmac_sha1(
                &[0xaa; 80],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "aa4ae5e15272d00e95705637ce8a3b55ed402112"
        );
    }

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8h").unwrap(), b"hello!");
        assert_eq!(base64_decode("aGVsbA==").unwrap(), b"hell");
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
        let a = raw(KEY_A);
        let b = raw(KEY_B);
        assert_eq!(
            kh.verify("git.example.com", 22, presented("ssh-ed25519", &a)),
            Ok(())
        );
        assert_eq!(
            kh.verify("10.0.0.1", 22, presented("ssh-ed25519", &a)),
            Ok(())
        );
        // Host names are case-insensitive.
        assert_eq!(
            kh.verify("Git.Example.COM", 22, presented("ssh-ed25519", &a)),
            Ok(())
        );
        assert_eq!(
            kh.verify(
                "git.example.com",
                2222,
                presented("ecdsa-sha2-nistp256", &b)
            ),
            Ok(())
        );
        // The port-22 entry does not vouch for another port, nor the other way round.
        assert_eq!(
            kh.verify("git.example.com", 2222, presented("ssh-ed25519", &a)),
            Err(Rejection::Mismatch {
                name: "[git.example.com]:2222".into(),
                presented: "ssh-ed25519".into(),
                known_types: vec!["ecdsa-sha2-nistp256".into()],
            })
        );
        assert_eq!(
            kh.verify("git.example.com", 22, presented("ecdsa-sha2-nistp256", &b)),
            Err(Rejection::Mismatch {
                name: "git.example.com".into(),
                presented: "ecdsa-sha2-nistp256".into(),
                known_types: vec!["ssh-ed25519".into()],
            })
        );
        assert_eq!(
            kh.verify("other.example.com", 22, presented("ssh-ed25519", &a)),
            Err(Rejection::Unknown {
                name: "other.example.com".into()
            })
        );
    }

    #[test]
    fn hashed_entries_match_only_their_host() {
        let (kh, bad) = KnownHosts::parse(HASHED);
        assert!(bad.is_empty());
        let a = raw(KEY_A);
        let b = raw(KEY_B);
        assert_eq!(
            kh.verify("git.example.com", 22, presented("ssh-ed25519", &a)),
            Ok(())
        );
        assert_eq!(
            kh.verify(
                "git.example.com",
                2222,
                presented("ecdsa-sha2-nistp256", &b)
            ),
            Ok(())
        );
        assert!(matches!(
            kh.verify("git.example.org", 22, presented("ssh-ed25519", &a)),
            Err(Rejection::Unknown { .. })
        ));
        assert!(matches!(
            kh.verify("git.example.com", 22, presented("ecdsa-sha2-nistp256", &b)),
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
        let a = raw(KEY_A);
        let b = raw(KEY_B);
        assert_eq!(
            kh.verify("git.example.com", 22, presented("ssh-ed25519", &a)),
            Ok(())
        );
        assert_eq!(
            kh.verify("a.b.example.com", 22, presented("ssh-ed25519", &a)),
            Ok(())
        );
        assert!(matches!(
            kh.verify("evil.example.com", 22, presented("ssh-ed25519", &a)),
            Err(Rejection::Unknown { .. })
        ));
        // Revoked wins even though another line lists the same key for the host.
        assert_eq!(
            kh.verify("git1.example.com", 22, presented("ecdsa-sha2-nistp256", &b)),
            Err(Rejection::Revoked {
                name: "git1.example.com".into(),
                line: 2
            })
        );
        // A @cert-authority line is not a host key for the hosts it names.
        assert!(matches!(
            kh.verify("x.example.com", 22, presented("ecdsa-sha2-nistp256", &b)),
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
