//! Reading the spec files out of one commit's tree, straight from the object database.

use std::io::Read;
use std::path::Path;

use git2::{ErrorCode, ObjectType, Oid, Repository};

use super::GitError;
use crate::spec::settings::SETTINGS_FILE;
use crate::spec::{
    IGNORE_FILE, IgnoreRules, MAX_FILE_BYTES, SourceFile, TreeBudget, is_source_file,
};

const MODE_LINK: i32 = 0o120000;

/// The files under `path` a source reads ([`is_source_file`]), and the paths of the
/// others (what nothing reads, for the rendering stage to say so).
pub(super) fn read_files(
    repo: &Repository,
    commit_id: Oid,
    path: &str,
) -> Result<(Vec<SourceFile>, Vec<String>), GitError> {
    let tree_error = |e: git2::Error| GitError::Tree {
        commit: commit_id.to_string(),
        message: e.message().to_string(),
    };
    let commit = repo.find_commit(commit_id).map_err(tree_error)?;
    let root = commit.tree().map_err(tree_error)?;
    let mut files = Vec::new();
    let start = if path.is_empty() {
        root.id()
    } else {
        let entry = root.get_path(Path::new(path)).map_err(|e| {
            if e.code() == ErrorCode::NotFound {
                GitError::PathNotFound {
                    path: path.to_string(),
                    commit: commit_id.to_string(),
                }
            } else {
                tree_error(e)
            }
        })?;
        match (entry.kind(), entry.filemode()) {
            (Some(ObjectType::Tree), _) => entry.id(),
            (Some(ObjectType::Blob), mode) if mode != MODE_LINK => {
                // As with a local path: a single file is a tree of one.
                let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
                let contents = read_blob_capped(repo, entry.id()).map_err(tree_error)?;
                return Ok((
                    vec![SourceFile {
                        path: name,
                        contents,
                    }],
                    Vec::new(),
                ));
            }
            _ => {
                return Err(GitError::Tree {
                    commit: commit_id.to_string(),
                    message: format!("{path:?} is neither a directory nor a file"),
                });
            }
        }
    };
    let ignore = ignore_rules(repo, start).map_err(|e| GitError::Tree {
        commit: commit_id.to_string(),
        message: e.to_string(),
    })?;
    let mut budget = TreeBudget::default();
    let mut unread = Vec::new();
    // Iterative: a tree nested thousands deep must not overflow the stack.
    let mut pending = vec![(start, String::new())];
    while let Some((tree_id, prefix)) = pending.pop() {
        let tree = repo.find_tree(tree_id).map_err(tree_error)?;
        for entry in tree.iter() {
            let name = String::from_utf8_lossy(entry.name_bytes());
            // Hidden files are not specs; the settings file at the root is read as one.
            let settings = prefix.is_empty() && name == SETTINGS_FILE;
            if name.starts_with('.') && !settings {
                continue;
            }
            let child = if prefix.is_empty() {
                name.into_owned()
            } else {
                format!("{prefix}/{name}")
            };
            let is_tree = entry.kind() == Some(ObjectType::Tree);
            if ignore.ignores(&child, is_tree) {
                continue;
            }
            match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Tree), _) => pending.push((entry.id(), child)),
                // Symlinks could point anywhere (even outside the spec dir); submodules
                // are other repositories.
                (Some(ObjectType::Blob), mode) if mode != MODE_LINK && !is_source_file(&child) => {
                    unread.push(child);
                }
                (Some(ObjectType::Blob), mode) if mode != MODE_LINK => {
                    let contents = read_blob_capped(repo, entry.id()).map_err(tree_error)?;
                    budget
                        .take(contents.len())
                        .map_err(|limit| GitError::Tree {
                            commit: commit_id.to_string(),
                            message: limit.to_string(),
                        })?;
                    files.push(SourceFile {
                        path: child,
                        contents,
                    });
                }
                _ => {}
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    unread.sort();
    Ok((files, unread))
}

/// Why a commit's `.driftlessignore` was not read.
#[derive(Debug, thiserror::Error)]
enum IgnoreError {
    #[error("{}", .0.message())]
    Git(#[from] git2::Error),
    #[error(transparent)]
    Rules(#[from] crate::spec::SpecError),
}

/// The `.driftlessignore` at the spec root `tree`, if it has one (as for a directory).
fn ignore_rules(repo: &Repository, tree: Oid) -> Result<IgnoreRules, IgnoreError> {
    let tree = repo.find_tree(tree)?;
    let Some(entry) = tree.get_name(IGNORE_FILE) else {
        return Ok(IgnoreRules::default());
    };
    if entry.kind() != Some(ObjectType::Blob) || entry.filemode() == MODE_LINK {
        return Ok(IgnoreRules::default());
    }
    let bytes = read_blob_capped(repo, entry.id())?;
    Ok(IgnoreRules::parse(&String::from_utf8_lossy(&bytes))?)
}

/// The blob, or its first `MAX_FILE_BYTES + 1` bytes when it is larger: enough for the
/// spec loader to report it as too large.
fn read_blob_capped(repo: &Repository, id: Oid) -> Result<Vec<u8>, git2::Error> {
    let odb = repo.odb()?;
    let (size, _) = odb.read_header(id)?;
    if size <= MAX_FILE_BYTES {
        return Ok(repo.find_blob(id)?.content().to_vec());
    }
    let limit = MAX_FILE_BYTES + 1;
    // Only loose objects can be streamed; a packed one is inflated whole by libgit2.
    if let Ok((reader, _, _)) = odb.reader(id) {
        let mut buf = Vec::with_capacity(limit);
        if reader.take(limit as u64).read_to_end(&mut buf).is_ok() && buf.len() == limit {
            return Ok(buf);
        }
    }
    let blob = repo.find_blob(id)?;
    Ok(blob.content()[..limit.min(blob.size())].to_vec())
}
