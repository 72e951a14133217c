//! The age identities SOPS files are decrypted with, found as sops itself finds them:
//! `--sops-age-key-file FILE`, else `SOPS_AGE_KEY_FILE`, else `SOPS_AGE_KEY`, else sops's
//! default keys file (`$XDG_CONFIG_HOME/sops/age/keys.txt`, `~/.config/sops/age/keys.txt`)
//! when there is one. The first of these that is set is the only one read, so a flag is
//! never mixed with a stale key from the environment.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use age::x25519;
use zeroize::Zeroizing;

/// The environment variables sops reads, and driftless with it.
pub(crate) const KEY_FILE_ENV: &str = "SOPS_AGE_KEY_FILE";
pub(crate) const KEY_ENV: &str = "SOPS_AGE_KEY";

/// sops's default keys file, under the user's configuration directory.
const DEFAULT_KEYS_FILE: &str = "sops/age/keys.txt";

/// A key file is a few lines; anything larger is not one (and is not read into memory).
const MAX_KEY_FILE_BYTES: u64 = 1 << 20;

/// Age identities, and where they came from. Compared (and shown) by their public
/// recipients only: the secret halves never reach `Debug`, a message or a log.
#[derive(Clone, Default)]
pub struct AgeKeys {
    identities: Arc<[x25519::Identity]>,
    recipients: Vec<String>,
    origin: String,
}

impl PartialEq for AgeKeys {
    fn eq(&self, other: &AgeKeys) -> bool {
        self.recipients == other.recipients
    }
}

impl Eq for AgeKeys {}

impl fmt::Debug for AgeKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgeKeys")
            .field("recipients", &self.recipients)
            .field("origin", &self.origin)
            .finish()
    }
}

/// A key source that was given but cannot be used: a startup error.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{origin}: cannot read {}", path.display())]
    Read {
        origin: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {} is larger than 1 MiB; not an age key file", path.display())]
    TooLarge { origin: String, path: PathBuf },
    /// The line is named, never quoted: it may hold a secret key.
    #[error(
        "{origin}, line {line}: not an age identity ({why}); expected AGE-SECRET-KEY-1… as age-keygen writes it"
    )]
    Bad {
        origin: String,
        line: usize,
        why: &'static str,
    },
    #[error("{origin}: holds no age identity (AGE-SECRET-KEY-1…)")]
    Empty { origin: String },
}

impl AgeKeys {
    /// The identities in `text`: one per line, blank lines and `#` comments skipped (as
    /// age-keygen writes a keys file); with `several_per_line`, words split a line too
    /// (sops's rule for `SOPS_AGE_KEY`).
    pub fn parse(text: &str, origin: &str, several_per_line: bool) -> Result<AgeKeys, KeyError> {
        let mut identities = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = if several_per_line {
                line.split_whitespace().collect()
            } else {
                vec![line]
            };
            for word in words {
                let why = if word.starts_with("AGE-PLUGIN-") {
                    Some("age plugins are not supported")
                } else if word.starts_with("AGE-SECRET-KEY-PQ-") {
                    Some("post-quantum age keys are not supported yet")
                } else {
                    None
                };
                let identity = match why {
                    Some(why) => Err(why),
                    None => x25519::Identity::from_str(word),
                };
                identities.push(identity.map_err(|why| KeyError::Bad {
                    origin: origin.to_string(),
                    line: i + 1,
                    why,
                })?);
            }
        }
        if identities.is_empty() {
            return Err(KeyError::Empty {
                origin: origin.to_string(),
            });
        }
        let recipients = identities
            .iter()
            .map(|i| i.to_public().to_string())
            .collect();
        Ok(AgeKeys {
            identities: identities.into(),
            recipients,
            origin: origin.to_string(),
        })
    }

    /// The identities of a keys file.
    pub fn read_file(path: &Path, origin: &str) -> Result<AgeKeys, KeyError> {
        use std::io::Read;
        let read = |source| KeyError::Read {
            origin: origin.to_string(),
            path: path.to_path_buf(),
            source,
        };
        let mut bytes = Zeroizing::new(Vec::new());
        std::fs::File::open(path)
            .map_err(read)?
            .take(MAX_KEY_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(read)?;
        if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
            return Err(KeyError::TooLarge {
                origin: origin.to_string(),
                path: path.to_path_buf(),
            });
        }
        let text = String::from_utf8_lossy(&bytes);
        let keys = AgeKeys::parse(&text, origin, false);
        if let std::borrow::Cow::Owned(mut s) = text {
            zeroize::Zeroize::zeroize(&mut s);
        }
        keys
    }

    /// The keys the flag, the environment or sops's default file give, in that order of
    /// precedence; none (and no error) when nothing is set and there is no default file.
    pub fn discover(
        flag: Option<&Path>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<AgeKeys, KeyError> {
        let set = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(path) = flag {
            return AgeKeys::read_file(path, "--sops-age-key-file");
        }
        if let Some(path) = set(KEY_FILE_ENV) {
            return AgeKeys::read_file(Path::new(&path), KEY_FILE_ENV);
        }
        if let Some(value) = set(KEY_ENV) {
            let value = Zeroizing::new(value.to_string_lossy().into_owned());
            return AgeKeys::parse(&value, KEY_ENV, true);
        }
        let config = set("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".config")));
        match config.map(|c| c.join(DEFAULT_KEYS_FILE)) {
            Some(path) if path.exists() => {
                let origin = format!("sops's default keys file {}", path.display());
                AgeKeys::read_file(&path, &origin)
            }
            _ => Ok(AgeKeys::default()),
        }
    }

    /// [`AgeKeys::discover`] in this process's environment.
    pub fn from_environment(flag: Option<&Path>) -> Result<AgeKeys, KeyError> {
        AgeKeys::discover(flag, |name| std::env::var_os(name))
    }

    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }

    /// The public halves (`age1…`), in the order the keys were given.
    pub(crate) fn recipients(&self) -> &[String] {
        &self.recipients
    }

    /// Where the keys came from (`--sops-age-key-file`, `SOPS_AGE_KEY_FILE`, ...).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub(super) fn identities(&self) -> impl Iterator<Item = &dyn age::Identity> {
        self.identities.iter().map(|i| i as &dyn age::Identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Demo keys from age's own test vectors; never used for anything real.
    const SECRET: &str =
        "AGE-SECRET-KEY-1GQ9778VQXMMJVE8SK7J6VT8UJ4HDQAJUVSFCWCM02D8GEWQ72PVQ2Y5J33";
    const PUBLIC: &str = "age1t7rxyev2z3rw82stdlrrepyc39nvn86l5078zqkf5uasdy86jp6svpy7pa";

    #[test]
    fn a_keys_file_as_age_keygen_writes_it() {
        let text = format!("# created: 2024-01-01T00:00:00Z\n# public key: {PUBLIC}\n{SECRET}\n\n");
        let keys = AgeKeys::parse(&text, "test", false).unwrap();
        assert_eq!(keys.recipients(), [PUBLIC]);
        let shown = format!("{keys:?}");
        assert!(shown.contains(PUBLIC) && !shown.contains(SECRET), "{shown}");
    }

    #[test]
    fn a_bad_line_is_named_never_quoted() {
        let text = format!("{SECRET}\nAGE-SECRET-KEY-1NOTAKEYATALL\n");
        let e = AgeKeys::parse(&text, "SOPS_AGE_KEY_FILE", false).unwrap_err();
        let shown = e.to_string();
        assert!(shown.starts_with("SOPS_AGE_KEY_FILE, line 2: "), "{shown}");
        assert!(!shown.contains("NOTAKEY"), "{shown}");
        assert!(matches!(
            AgeKeys::parse("# only a comment\n", "x", false),
            Err(KeyError::Empty { .. })
        ));
    }

    #[test]
    fn the_flag_wins_then_the_file_variable_then_the_key_variable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys.txt");
        std::fs::write(&file, format!("{SECRET}\n")).unwrap();
        let env = |vars: Vec<(&'static str, OsString)>| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        let missing = dir.path().join("missing");
        let keys = AgeKeys::discover(
            Some(&file),
            env(vec![(KEY_FILE_ENV, missing.clone().into())]),
        )
        .unwrap();
        assert_eq!(keys.origin(), "--sops-age-key-file");
        let e = AgeKeys::discover(None, env(vec![(KEY_FILE_ENV, missing.into())])).unwrap_err();
        assert!(matches!(e, KeyError::Read { .. }), "{e}");
        let keys = AgeKeys::discover(
            None,
            env(vec![(KEY_ENV, format!("  {SECRET} {SECRET}\n").into())]),
        )
        .unwrap();
        assert_eq!((keys.origin(), keys.recipients().len()), (KEY_ENV, 2));
        // sops's default file, under XDG_CONFIG_HOME.
        let none = AgeKeys::discover(None, env(vec![("XDG_CONFIG_HOME", dir.path().into())]));
        assert!(none.unwrap().is_empty());
        std::fs::create_dir_all(dir.path().join("sops/age")).unwrap();
        std::fs::copy(&file, dir.path().join("sops/age/keys.txt")).unwrap();
        let keys =
            AgeKeys::discover(None, env(vec![("XDG_CONFIG_HOME", dir.path().into())])).unwrap();
        assert_eq!(keys.recipients(), [PUBLIC]);
    }
}
