//! A revision of the repository a local path lies in, read as it was at that commit: what
//! `diff --base` compares the work tree with. The commit is checked out into a private
//! temporary directory, never into anyone's work tree, so the tools read it as the daemon's
//! checkout would be read and an uncommitted change is never touched.

use std::path::{Path, PathBuf};

use git2::{ObjectType, Repository};

use super::super::{Revision, TreeError, read_tree};

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{}: not in a git repository (--base and --head read its history)", path.display())]
    NoRepository { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Path { path: PathBuf, message: String },
    #[error("{rev:?} names no commit in {}", repo.display())]
    NoCommit { rev: String, repo: PathBuf },
    #[error("checking out {rev} into {}: {message}", dir.display())]
    Checkout {
        rev: String,
        dir: PathBuf,
        message: String,
    },
    #[error(transparent)]
    Tree(#[from] TreeError),
}

/// The spec tree at `path` as commit `rev` has it, checked out under `into` (a directory
/// the caller owns and removes). A path the commit does not have is an empty tree: the
/// change adds all of it.
pub fn at_commit(path: &Path, rev: &str, into: &Path) -> Result<Revision, LocalError> {
    let (repo, rel) = open(path)?;
    let commit = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| LocalError::NoCommit {
            rev: rev.to_string(),
            repo: repo.workdir().unwrap_or(repo.path()).to_path_buf(),
        })?;
    let id = commit.id().to_string();
    let fail = |message: String| LocalError::Checkout {
        rev: rev.to_string(),
        dir: into.to_path_buf(),
        message,
    };
    let tree = commit.tree().map_err(|e| fail(e.message().to_string()))?;
    let present = rel.as_os_str().is_empty()
        || tree
            .get_path(&rel)
            .is_ok_and(|e| matches!(e.kind(), Some(ObjectType::Tree | ObjectType::Blob)));
    if !present {
        return Ok(Revision {
            id: Some(id),
            ..Revision::default()
        });
    }
    let mut co = git2::build::CheckoutBuilder::new();
    co.target_dir(into).force().recreate_missing(true);
    repo.checkout_tree(tree.as_object(), Some(&mut co))
        .map_err(|e| fail(e.message().to_string()))?;
    let repo_dir = into
        .canonicalize()
        .map_err(|e| fail(format!("{}: {e}", into.display())))?;
    let mut revision = read_tree(&repo_dir.join(&rel), Some(repo_dir))?;
    // The copy has no remotes: the tree's apps name the repository it was taken from,
    // and the revision goes by the name it was asked by and its commit.
    if let (Some(c), Some(workdir)) = (revision.checkout.as_mut(), repo.workdir()) {
        c.urls = crate::source::remote_urls(workdir);
        c.revisions = vec![rev.to_string()];
        if rev != id {
            c.revisions.push(id.clone());
        }
    }
    revision.id = Some(id);
    Ok(revision)
}

/// The work tree at `path` as it is now, uncommitted changes and all, read as a revision of
/// its repository (so renders are keyed as a checkout's are, and an application the change
/// leaves alone is rendered once for both sides).
pub fn work_tree(path: &Path) -> Result<Revision, LocalError> {
    let (repo, _) = open(path)?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| LocalError::NoRepository {
            path: path.to_path_buf(),
        })?
        .canonicalize()
        .map_err(|e| LocalError::Path {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let mut revision = read_tree(path, Some(workdir))?;
    if let Some(c) = revision.checkout.as_mut() {
        c.revisions = crate::source::head_names(&repo);
    }
    Ok(revision)
}

/// The repository holding `path` and where `path` lies in it. `path` must exist: a spec
/// root the change deletes is previewed from a `--head` commit instead.
fn open(path: &Path) -> Result<(Repository, PathBuf), LocalError> {
    let full = path.canonicalize().map_err(|e| LocalError::Path {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let repo = Repository::discover(&full).map_err(|_| LocalError::NoRepository {
        path: path.to_path_buf(),
    })?;
    let workdir = repo
        .workdir()
        .and_then(|w| w.canonicalize().ok())
        .ok_or_else(|| LocalError::NoRepository {
            path: path.to_path_buf(),
        })?;
    let rel = full
        .strip_prefix(&workdir)
        .map(Path::to_path_buf)
        .map_err(|_| LocalError::NoRepository {
            path: path.to_path_buf(),
        })?;
    Ok((repo, rel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn paths(r: &Revision) -> Vec<(&str, &str)> {
        r.files
            .iter()
            .map(|f| {
                (
                    f.path.as_str(),
                    std::str::from_utf8(&f.contents).unwrap_or("?"),
                )
            })
            .collect()
    }

    #[test]
    fn a_commit_is_read_as_it_was_and_the_work_tree_as_it_is() {
        let repo = tempfile::tempdir().unwrap();
        let specs = repo.path().join("specs");
        std::fs::create_dir(&specs).unwrap();
        std::fs::write(specs.join("a.yaml"), "old\n").unwrap();
        git(repo.path(), &["init", "-q", "-b", "main"]);
        git(repo.path(), &["add", "."]);
        git(repo.path(), &["commit", "-q", "-m", "one"]);
        std::fs::write(specs.join("a.yaml"), "new\n").unwrap();
        std::fs::write(specs.join("b.yaml"), "added\n").unwrap();

        let into = tempfile::tempdir().unwrap();
        let base = at_commit(&specs, "main", into.path()).unwrap();
        assert_eq!(paths(&base), [("a.yaml", "old\n")]);
        assert_eq!(base.id.as_ref().map(String::len), Some(40));
        let checkout = base.checkout.as_ref().unwrap();
        assert_eq!(checkout.repo, into.path().canonicalize().unwrap());
        assert_eq!(checkout.root, checkout.repo.join("specs"));
        // Named as asked, and by its commit: what an Argo CD targetRevision is held to.
        assert_eq!(
            checkout.revisions,
            ["main".to_string(), base.id.clone().unwrap()]
        );

        let head = work_tree(&specs).unwrap();
        assert_eq!(
            head.checkout.as_ref().unwrap().revisions,
            ["main".to_string(), base.id.clone().unwrap()],
            "the work tree's branch and the commit it stands on"
        );
        assert_eq!(paths(&head), [("a.yaml", "new\n"), ("b.yaml", "added\n")]);
        assert_eq!(
            head.checkout.as_ref().unwrap().repo,
            repo.path().canonicalize().unwrap()
        );
        // The work tree was not touched by the checkout.
        assert_eq!(std::fs::read(specs.join("a.yaml")).unwrap(), b"new\n");
    }

    #[test]
    fn a_path_the_commit_lacks_is_empty_and_a_bad_revision_says_so() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::write(repo.path().join("README"), "x\n").unwrap();
        git(repo.path(), &["init", "-q", "-b", "main"]);
        git(repo.path(), &["add", "."]);
        git(repo.path(), &["commit", "-q", "-m", "one"]);
        let specs = repo.path().join("specs");
        std::fs::create_dir(&specs).unwrap();
        std::fs::write(specs.join("a.yaml"), "new\n").unwrap();

        let into = tempfile::tempdir().unwrap();
        let base = at_commit(&specs, "HEAD", into.path()).unwrap();
        assert!(base.files.is_empty());
        let e = at_commit(&specs, "no-such-branch", into.path()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("\"no-such-branch\" names no commit in "),
            "{e}"
        );
        let outside = tempfile::tempdir().unwrap();
        let e = work_tree(outside.path()).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("not in a git repository (--base and --head read its history)"),
            "{e}"
        );
    }
}
