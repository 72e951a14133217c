//! A commit checked out for the rendering stage's tools, which read files themselves
//! (kustomize): once per commit, beside the bare cache and private to driftless, never in
//! anyone's work tree. Only the newest commit's checkout is kept.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use super::GitError;

/// Marks a checkout as whole: one cut short (a crash, a full disk) is made again.
const DONE: &str = ".driftless-checkout-done";

/// The whole tree of `commit`, on disk; its directory (canonical).
pub(super) fn materialise(
    repo: &Repository,
    commit: Oid,
    cache_path: &Path,
) -> Result<PathBuf, GitError> {
    let fail = |message: String| GitError::Tree {
        commit: commit.to_string(),
        message,
    };
    let parent = checkouts_dir(cache_path);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&parent)
        .map_err(|e| fail(format!("creating {}: {e}", parent.display())))?;
    let dir = parent.join(commit.to_string());
    if !dir.join(DONE).is_file() {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| fail(format!("removing {}: {e}", dir.display())))?;
        }
        let tree = repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| fail(e.message().to_string()))?;
        let mut co = git2::build::CheckoutBuilder::new();
        co.target_dir(&dir).force().recreate_missing(true);
        repo.checkout_tree(tree.as_object(), Some(&mut co))
            .map_err(|e| fail(format!("checking out for rendering: {}", e.message())))?;
        std::fs::write(dir.join(DONE), b"")
            .map_err(|e| fail(format!("writing {}: {e}", dir.display())))?;
        tracing::debug!(commit = %commit, dir = %dir.display(), "checked out for rendering");
    }
    // Older commits' checkouts are not read again.
    if let Ok(entries) = std::fs::read_dir(&parent) {
        for e in entries.flatten() {
            if e.file_name() != commit.to_string().as_str() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    dir.canonicalize()
        .map_err(|e| fail(format!("{}: {e}", dir.display())))
}

/// `<cache>/<repo>.checkout/`, beside the bare repository.
fn checkouts_dir(cache_path: &Path) -> PathBuf {
    cache_path.with_extension("checkout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_checked_out_once_beside_the_bare_cache() {
        let d = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(d.path().join("r.git")).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let blob = repo.blob(b"resources: []\n").unwrap();
        let mut sub = repo.treebuilder(None).unwrap();
        sub.insert("kustomization.yaml", blob, 0o100644).unwrap();
        let sub = sub.write().unwrap();
        let mut root = repo.treebuilder(None).unwrap();
        root.insert("app", sub, 0o040000).unwrap();
        let tree = repo.find_tree(root.write().unwrap()).unwrap();
        let c = repo.commit(None, &sig, &sig, "one", &tree, &[]).unwrap();
        let dir = materialise(&repo, c, &d.path().join("r.git")).unwrap();
        assert!(dir.starts_with(d.path().canonicalize().unwrap().join("r.checkout")));
        assert_eq!(
            std::fs::read_to_string(dir.join("app/kustomization.yaml")).unwrap(),
            "resources: []\n"
        );
        // Again: left as it is.
        std::fs::write(dir.join("app/extra"), "x").unwrap();
        let again = materialise(&repo, c, &d.path().join("r.git")).unwrap();
        assert_eq!(again, dir);
        assert!(dir.join("app/extra").exists());
    }
}
