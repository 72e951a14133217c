//! The bare repository on disk that fetches go to: where it lives, and making sure it is
//! usable and private before it is used.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use git2::Repository;
use sha2::Digest;

use super::GitError;

/// `repo-<hash>.git`: the hash keeps URLs apart, the name helps whoever looks at the dir.
pub(super) fn cache_name(display_url: &str) -> String {
    let hash = sha2::Sha256::digest(display_url.as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    let base = display_url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("")
        .trim_end_matches(".git");
    let base: String = base
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let base = base.trim_start_matches('.');
    if base.is_empty() {
        format!("{hex}.git")
    } else {
        format!("{base}-{hex}.git")
    }
}

pub(super) fn open_or_init(path: &Path) -> Result<Repository, GitError> {
    let open_error = |message: String| GitError::Open {
        path: path.to_path_buf(),
        message,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        match Repository::open_bare(path).and_then(|r| check_repo(&r).map(|()| r)) {
            Ok(repo) => {
                // A cache made before the clone was kept private (or by hand).
                if meta.permissions().mode() & 0o077 != 0
                    && let Err(e) =
                        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
                {
                    tracing::warn!(cache = %path.display(), error = %e, "cannot make the git cache private");
                }
                return Ok(repo);
            }
            Err(e) => {
                // The cache holds nothing that cannot be fetched again.
                tracing::warn!(cache = %path.display(), error = %e.message(), "git cache is unusable; recreating it");
                let removed = if meta.is_dir() {
                    std::fs::remove_dir_all(path)
                } else {
                    std::fs::remove_file(path)
                };
                removed
                    .map_err(|e| open_error(format!("cannot remove the unusable cache: {e}")))?;
            }
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| open_error(e.to_string()))?;
    }
    // The clone holds the specs, Secrets' values included: this user's alone.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(|e| open_error(e.to_string()))?;
    Repository::init_bare(path).map_err(|e| open_error(e.message().to_string()))
}

/// Opening only looks at a few files; reading every ref and resolving each to an object
/// catches the breakage an interrupted write or a full disk leaves behind.
fn check_repo(repo: &Repository) -> Result<(), git2::Error> {
    if !repo.is_bare() {
        return Err(git2::Error::from_str("not a bare repository"));
    }
    let odb = repo.odb()?;
    for reference in repo.references()? {
        let reference = reference?;
        if let Some(target) = reference.target() {
            odb.read_header(target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::url::strip_userinfo;
    use super::*;

    #[test]
    fn cache_names_differ_per_url_and_ignore_credentials() {
        let a = cache_name(&strip_userinfo("https://u:p@example.com/org/shop.git"));
        let b = cache_name(&strip_userinfo("https://example.com/org/shop.git"));
        let c = cache_name("https://example.com/other/shop.git");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.starts_with("shop-") && a.ends_with(".git"), "{a}");
        assert!(cache_name("file:///").ends_with(".git"));
        assert!(!cache_name("https://example.com/../..").contains('/'));
    }
}
