//! A spec tree packed as Flux packs it (`flux push artifact`): one tar+gzip layer of the
//! tree, an empty JSON config, and the source, revision and creation time as manifest
//! annotations. Reproducible: entries sorted, times, owners and modes fixed, the gzip
//! header without a name or a time, so the same tree gives the same digest. `push`
//! publishes it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use hyper::body::Bytes;

use super::wire::{Descriptor, Manifest};
use super::{OciError, RegistryOptions, Repository};

/// The media types of a Flux artifact.
pub(crate) const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.flux.config.v1+json";
pub(crate) const CONTENT_MEDIA_TYPE: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";

pub(crate) const ANNOTATION_SOURCE: &str = "org.opencontainers.image.source";
pub(crate) const ANNOTATION_REVISION: &str = "org.opencontainers.image.revision";
pub(crate) const ANNOTATION_CREATED: &str = "org.opencontainers.image.created";

/// Directories of version control that never belong in an artifact (as Flux leaves them).
const SKIPPED_DIRS: [&str; 3] = [".git", ".hg", ".svn"];

/// Why a tree was not packed: one line each.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PackError {
    /// What was being done (`reading /x`, `packing a.toml`), and why it failed.
    #[error("{doing}: {source}")]
    Io {
        doing: String,
        source: std::io::Error,
    },
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: a file name that is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    #[error("{} is a symbolic link; an artifact holds no links", .0.display())]
    Link(PathBuf),
    #[error("{} is not a file or a directory", .0.display())]
    NotAFile(PathBuf),
}

fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> PackError {
    let doing = doing.into();
    move |source| PackError::Io { doing, source }
}

/// The tree at `root` as a reproducible tar+gzip layer.
pub fn layer(root: &Path) -> Result<Vec<u8>, PackError> {
    let meta = std::fs::metadata(root).map_err(io(root.display().to_string()))?;
    if !meta.is_dir() {
        return Err(PackError::NotADirectory(root.to_path_buf()));
    }
    let mut paths = Vec::new();
    collect(root, "", &mut paths)?;
    paths.sort();
    // Fast is enough: artifacts are small, and the level is part of what the digest
    // depends on, so it is fixed.
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::new(6));
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for (rel, is_dir) in &paths {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        let full = root.join(rel);
        if *is_dir {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
            tar.append_data(&mut h, format!("{rel}/"), std::io::empty())
                .map_err(io(format!("packing {rel}")))?;
        } else {
            let data = std::fs::read(&full).map_err(io(format!("reading {}", full.display())))?;
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            tar.append_data(&mut h, rel, data.as_slice())
                .map_err(io(format!("packing {rel}")))?;
        }
    }
    let gz = tar.into_inner().map_err(io("packing"))?;
    let mut out = gz.finish().map_err(io("packing"))?;
    out.flush().map_err(io("packing"))?;
    Ok(out)
}

/// Every directory and file below `dir` as (path, is a directory); links are refused,
/// since an artifact's tree holds none and following one could pack what lies outside.
fn collect(root: &Path, rel: &str, out: &mut Vec<(String, bool)>) -> Result<(), PackError> {
    let dir = root.join(rel);
    let reading = || io(format!("reading {}", dir.display()));
    let entries = std::fs::read_dir(&dir).map_err(reading())?;
    for entry in entries {
        let entry = entry.map_err(reading())?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(PackError::NotUtf8(dir));
        };
        let child = match rel {
            "" => name.to_string(),
            _ => format!("{rel}/{name}"),
        };
        let kind = entry
            .file_type()
            .map_err(io(format!("reading {}", entry.path().display())))?;
        if kind.is_symlink() {
            return Err(PackError::Link(entry.path()));
        } else if kind.is_dir() {
            if SKIPPED_DIRS.contains(&name) {
                continue;
            }
            out.push((child.clone(), true));
            collect(root, &child, out)?;
        } else if kind.is_file() {
            out.push((child, false));
        } else {
            return Err(PackError::NotAFile(entry.path()));
        }
    }
    Ok(())
}

/// The manifest's annotations, as `flux push artifact --source --revision` writes them.
pub fn annotations(source: &str, revision: &str, created: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (ANNOTATION_CREATED.to_string(), created.to_string()),
        (ANNOTATION_REVISION.to_string(), revision.to_string()),
        (ANNOTATION_SOURCE.to_string(), source.to_string()),
    ])
}

/// What `push` publishes.
#[derive(Debug, Clone)]
pub struct Push {
    pub dir: PathBuf,
    pub repository: Repository,
    pub tag: String,
    /// `org.opencontainers.image.source` (Flux: the git remote).
    pub source: String,
    /// `org.opencontainers.image.revision` (Flux: `BRANCH@sha1:COMMIT`).
    pub revision: String,
    /// `org.opencontainers.image.created`, RFC 3339.
    pub created: String,
}

/// Publishes a tree as a Flux artifact; the manifest's digest.
pub async fn push(p: &Push, registry: &RegistryOptions) -> Result<String, OciError> {
    let url = p.repository.to_string();
    let dir = p.dir.clone();
    let layer = tokio::task::spawn_blocking(move || layer(&dir))
        .await
        .map_err(|e| OciError::Local(format!("packing: {e}")))?
        .map_err(|e| OciError::Local(e.to_string()))?;
    let client = registry.client(&p.repository.registry)?;
    let repo = &p.repository.repository;
    let fail = |e: super::wire::WireError| OciError::Registry {
        url: url.clone(),
        message: e.to_string(),
    };
    let layer = Descriptor {
        media_type: CONTENT_MEDIA_TYPE.to_string(),
        ..client
            .push_blob(repo, Bytes::from(layer))
            .await
            .map_err(fail)?
    };
    let config = Descriptor {
        media_type: CONFIG_MEDIA_TYPE.to_string(),
        ..client
            .push_blob(repo, Bytes::from_static(b"{}"))
            .await
            .map_err(fail)?
    };
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_string()),
        config: Some(config),
        layers: vec![layer],
        manifests: None,
        annotations: Some(annotations(&p.source, &p.revision, &p.created)),
    };
    client
        .push_manifest(repo, &p.tag, &manifest, MANIFEST_MEDIA_TYPE)
        .await
        .map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_tree_packs_to_the_same_bytes_whatever_its_times_and_modes() {
        use std::os::unix::fs::PermissionsExt as _;
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("app/.git")).unwrap();
        std::fs::write(a.path().join("app/a.toml"), "x = 1\n").unwrap();
        std::fs::write(a.path().join("b.yaml"), "y: 2\n").unwrap();
        std::fs::write(a.path().join("app/.git/HEAD"), "ref\n").unwrap();
        let first = layer(a.path()).unwrap();

        let b = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(b.path().join("app")).unwrap();
        std::fs::write(b.path().join("b.yaml"), "y: 2\n").unwrap();
        std::fs::write(b.path().join("app/a.toml"), "x = 1\n").unwrap();
        std::fs::set_permissions(
            b.path().join("b.yaml"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        assert_eq!(first, layer(b.path()).unwrap());

        std::fs::write(b.path().join("b.yaml"), "y: 3\n").unwrap();
        assert_ne!(first, layer(b.path()).unwrap());

        // And what is packed unpacks to the tree, .git left out.
        let out = tempfile::tempdir().unwrap();
        super::super::unpack::unpack(&first, &out.path().join("t"), Default::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join("t/app/a.toml")).unwrap(),
            "x = 1\n"
        );
        assert!(!out.path().join("t/app/.git").exists());
    }

    #[test]
    fn links_are_refused() {
        let a = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.path().join("p.yaml")).unwrap();
        let e = layer(a.path()).unwrap_err().to_string();
        assert!(e.contains("symbolic link") && !e.contains('\n'), "{e}");
    }
}
