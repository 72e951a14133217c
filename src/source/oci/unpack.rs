//! An artifact's layer (tar+gzip) unpacked into a directory, refusing what a spec tree
//! must not hold: paths that leave the tree, links, devices and FIFOs, and more than the
//! limits of a tree. Nothing in the archive chooses a file's mode or owner.

use std::io::Read as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Component, Path, PathBuf};

use crate::spec::{MAX_TREE_BYTES, MAX_TREE_FILES};

/// What an artifact may hold at most.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The layer as the registry serves it (compressed).
    pub layer_bytes: u64,
    /// Everything unpacked.
    pub unpacked_bytes: u64,
    /// Files (directories not counted).
    pub files: usize,
}

impl Default for Limits {
    /// A tree's limits (as for git): the layer and its content both within the bytes a tree
    /// may read, since an artifact is all tree.
    fn default() -> Self {
        Limits {
            layer_bytes: MAX_TREE_BYTES as u64,
            unpacked_bytes: MAX_TREE_BYTES as u64,
            files: MAX_TREE_FILES,
        }
    }
}

/// Why an artifact's layer was not unpacked: one line each.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    /// A file-system step: what was being done (`creating /x`, `writing a.toml`), and why
    /// it failed.
    #[error("{doing}: {source}")]
    Io {
        doing: String,
        source: std::io::Error,
    },
    #[error("the layer is not a tar+gzip archive: {0}")]
    NotAnArchive(std::io::Error),
    #[error("the layer is not a readable tar+gzip archive: {0}")]
    Unreadable(std::io::Error),
    #[error("an entry's path is not valid: {0}")]
    EntryPath(std::io::Error),
    #[error("the artifact's entry {0:?} leaves the tree; refused")]
    LeavesTheTree(String),
    #[error("the artifact's entry {0:?} is a link; an artifact's tree holds no links")]
    Link(String),
    #[error("the artifact's entry {0:?} is not a file or a directory; refused")]
    NotAFile(String),
    #[error("the artifact's entry {0:?} has no name")]
    NoName(String),
    #[error("the artifact's entry {0:?} is cut short")]
    CutShort(String),
    #[error("the artifact holds more than {0} files, the limit for a tree; not read")]
    TooManyFiles(usize),
    #[error("the artifact unpacks to more than {} MiB, the limit for a tree; not read", .0 >> 20)]
    TooLarge(u64),
}

impl UnpackError {
    pub(super) fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> UnpackError {
        let doing = doing.into();
        move |source| UnpackError::Io { doing, source }
    }
}

/// Unpacks a tar+gzip `layer` into `dest` (made here, empty).
pub(crate) fn unpack(layer: &[u8], dest: &Path, limits: Limits) -> Result<(), UnpackError> {
    make_dir(dest)?;
    let gz = flate2::read::GzDecoder::new(layer);
    // One byte past the limit tells an archive at it from one beyond.
    let mut archive = tar::Archive::new(gz.take(limits.unpacked_bytes + 1 + 1024 * 1024));
    let entries = archive.entries().map_err(UnpackError::NotAnArchive)?;
    let mut files = 0usize;
    let mut bytes = 0u64;
    for entry in entries {
        let mut entry = entry.map_err(UnpackError::Unreadable)?;
        let raw = entry.path().map_err(UnpackError::EntryPath)?.into_owned();
        let shown = raw.display().to_string();
        let Some(rel) = inside(&raw) else {
            return Err(UnpackError::LeavesTheTree(shown));
        };
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            if !rel.as_os_str().is_empty() {
                make_dir(&dest.join(&rel))?;
            }
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(UnpackError::Link(shown));
        }
        if !kind.is_file() {
            return Err(UnpackError::NotAFile(shown));
        }
        if rel.as_os_str().is_empty() {
            return Err(UnpackError::NoName(shown));
        }
        files += 1;
        if files > limits.files {
            return Err(UnpackError::TooManyFiles(limits.files));
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        bytes = bytes.saturating_add(size);
        if bytes > limits.unpacked_bytes {
            return Err(UnpackError::TooLarge(limits.unpacked_bytes));
        }
        let path = dest.join(&rel);
        if let Some(parent) = path.parent() {
            make_dir(parent)?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .or_else(|_| {
                // A later entry of the same path replaces the earlier one, as tar does.
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&path)
            })
            .map_err(UnpackError::io(format!("writing {shown}")))?;
        let copied = std::io::copy(&mut (&mut entry).take(size), &mut out)
            .map_err(UnpackError::io(format!("unpacking {shown}")))?;
        if copied != size {
            return Err(UnpackError::CutShort(shown));
        }
    }
    Ok(())
}

fn make_dir(dir: &Path) -> Result<(), UnpackError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(UnpackError::io(format!("creating {}", dir.display())))
}

/// The entry's path below the tree's root, or `None` when it leaves it (`..`, absolute).
fn inside(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tar+gzip of (path, kind, data) entries, written raw so that bad paths survive.
    pub(crate) fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut b = tar::Builder::new(gz);
        for (path, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            {
                let name = &mut h.as_old_mut().name;
                name[..path.len()].copy_from_slice(path.as_bytes());
            }
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if kind.is_symlink() {
                h.set_link_name("/etc/passwd").unwrap();
            }
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_tree_unpacks_with_private_modes() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().unwrap();
        let layer = archive(&[
            ("./", tar::EntryType::Directory, b""),
            ("./app/", tar::EntryType::Directory, b""),
            ("./app/a.toml", tar::EntryType::Regular, b"x = 1\n"),
        ]);
        unpack(&layer, &d.path().join("t"), Limits::default()).unwrap();
        let file = d.path().join("t/app/a.toml");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x = 1\n");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn escapes_links_specials_and_excess_are_refused_in_one_line() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                archive(&[("../evil.toml", tar::EntryType::Regular, b"x")]),
                "leaves the tree",
            ),
            (
                archive(&[("a/../../evil", tar::EntryType::Regular, b"x")]),
                "leaves the tree",
            ),
            (
                archive(&[("/etc/evil", tar::EntryType::Regular, b"x")]),
                "leaves the tree",
            ),
            (
                archive(&[("link.yaml", tar::EntryType::Symlink, b"")]),
                "is a link",
            ),
            (
                archive(&[("hard.yaml", tar::EntryType::Link, b"")]),
                "is a link",
            ),
            (
                archive(&[("fifo", tar::EntryType::Fifo, b"")]),
                "not a file or a directory",
            ),
            (
                archive(&[("dev", tar::EntryType::Char, b"")]),
                "not a file or a directory",
            ),
            (b"not gzip at all".to_vec(), "not a"),
        ];
        for (layer, expect) in cases {
            let d = tempfile::tempdir().unwrap();
            let e = unpack(&layer, &d.path().join("t"), Limits::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(expect), "{e}");
            assert!(!e.contains('\n'), "{e}");
            assert!(!d.path().join("evil.toml").exists());
        }
        let big = vec![0u8; 4096];
        let layer = archive(&[
            ("a", tar::EntryType::Regular, &big),
            ("b", tar::EntryType::Regular, &big),
        ]);
        let small = Limits {
            unpacked_bytes: 5000,
            ..Limits::default()
        };
        let d = tempfile::tempdir().unwrap();
        let e = unpack(&layer, &d.path().join("t"), small)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unpacks to more than"), "{e}");
        let few = Limits {
            files: 1,
            ..Limits::default()
        };
        let e = unpack(&layer, &d.path().join("u"), few)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 1 files"), "{e}");
    }
}
