//! The OCI source: a spec tree published as an OCI artifact (as `flux push artifact` and
//! `driftless push` lay it out), followed by tag, by the newest tag in a semver range, or
//! pinned by digest. Each poll costs one manifest request when nothing moved; a new
//! digest is pulled, its layer checked and unpacked under the cache directory, where the
//! rendering stage's tools read it as they read a directory.

mod egress;
mod follow;
mod pack;
pub mod reference;
mod registry;
pub(crate) mod tls;
mod unpack;
pub mod verify;
mod wire;

pub use follow::Oci;
#[cfg(test)]
pub(crate) use follow::commit_of_origin;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use wire::{Descriptor, Manifest, WireError};

pub(crate) use pack::{ANNOTATION_REVISION, ANNOTATION_SOURCE, CONTENT_MEDIA_TYPE};
pub use pack::{Push, push};
pub use reference::{Repository, Selector};
pub use registry::RegistryOptions;
pub use unpack::Limits;
pub(crate) use unpack::unpack as unpack_tarball;

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("invalid OCI reference {0}")]
    Reference(String),
    #[error("{0}")]
    Config(String),
    #[error("{url}: {message}")]
    Registry { url: String, message: String },
    #[error("{url}: {message}")]
    Artifact { url: String, message: String },
    #[error("{0}")]
    Local(String),
}

impl OciError {
    /// Every label [`OciError::metric_label`] gives.
    pub(crate) const METRIC_LABELS: &'static [&'static str] =
        &["reference", "config", "registry", "artifact", "local"];

    /// A stable, low-cardinality label for the error metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            OciError::Reference(_) => "reference",
            OciError::Config(_) => "config",
            OciError::Registry { .. } => "registry",
            OciError::Artifact { .. } => "artifact",
            OciError::Local(_) => "local",
        }
    }
}

/// Why no layer of an artifact was taken as its tree.
#[derive(Debug, thiserror::Error)]
enum LayerError {
    #[error(
        "the artifact has no layer of media type {wanted} (it has: {has}); --layer-media-type chooses another"
    )]
    None { wanted: String, has: String },
    #[error("the artifact has more than one layer of media type {0}")]
    Several(String),
}

/// Everything an OCI source needs.
#[derive(Debug, Clone)]
pub struct OciConfig {
    pub repository: Repository,
    pub selector: Selector,
    /// The layer that holds the tree (default: Flux's content media type).
    pub layer_media_type: Option<String>,
    pub registry: RegistryOptions,
    pub cache_dir: PathBuf,
    pub limits: Limits,
    /// `--path`: the spec root within the artifact's tree, normalised ("" for its root).
    pub path: String,
    /// `--verify-key`: pull only what a cosign signature of this key vouches for.
    pub verify_key: Option<verify::VerifyKey>,
}

/// One artifact, unpacked (what the daemon reads as a [`crate::source::Revision`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// `TAG@sha256:…`, or `sha256:…` when pinned by digest.
    pub id: String,
    pub digest: String,
    /// The unpacked tree (canonical).
    pub dir: PathBuf,
    /// The manifest's annotations: where the tree came from (`org.opencontainers.image.*`).
    pub annotations: BTreeMap<String, String>,
}

/// What a poll found.
#[derive(Debug)]
pub enum Fetched {
    /// The same digest as the last pull: nothing was downloaded.
    Unchanged(Artifact),
    New(Artifact),
}

/// A repository in a registry to take spec trees from.
pub struct OciSource {
    cfg: OciConfig,
    registry: wire::Registry,
    cache_path: PathBuf,
    last: Mutex<Option<Artifact>>,
}

impl std::fmt::Debug for OciSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciSource")
            .field("cfg", &self.cfg)
            .field("cache_path", &self.cache_path)
            .finish_non_exhaustive()
    }
}

impl OciSource {
    pub fn open(cfg: OciConfig) -> Result<OciSource, OciError> {
        let registry = cfg.registry.client(&cfg.repository.registry)?;
        let name = format!(
            "{:016x}",
            crate::spec::names::fnv1a64(cfg.repository.to_string().bytes())
        );
        let cache_path = cfg.cache_dir.join("oci").join(name);
        Ok(OciSource {
            cfg,
            registry,
            cache_path,
            last: Mutex::new(None),
        })
    }

    /// `oci://HOST/REPO`, for status and logs.
    pub fn display(&self) -> String {
        self.cfg.repository.to_string()
    }

    pub fn selector(&self) -> &Selector {
        &self.cfg.selector
    }

    /// Where the specs lie in an unpacked revision: `--path` within its tree.
    pub(crate) fn spec_root(&self, rev: &Artifact) -> Result<PathBuf, OciError> {
        if self.cfg.path.is_empty() {
            return Ok(rev.dir.clone());
        }
        let root = rev.dir.join(&self.cfg.path);
        match std::fs::symlink_metadata(&root) {
            Ok(m) if m.is_dir() => Ok(root),
            _ => Err(OciError::Artifact {
                url: self.display(),
                message: format!("path {:?} is not a directory of {}", self.cfg.path, rev.id),
            }),
        }
    }

    /// Polls: the tag's digest (one manifest request), and the artifact when it moved.
    pub async fn fetch(&self) -> Result<Fetched, OciError> {
        let (tag, digest) = self.resolve().await?;
        let id = match &tag {
            Some(t) => format!("{t}@{digest}"),
            None => digest.clone(),
        };
        let last = self.last.lock().ok().and_then(|l| l.clone());
        let rev = match last.filter(|l| l.digest == digest && l.dir.is_dir()) {
            Some(last) if last.id == id => return Ok(Fetched::Unchanged(last)),
            // The same artifact under a newer tag (`--semver`): nothing to download, but
            // the revision names the tag now followed.
            Some(last) => Artifact { id, ..last },
            None => self.pull(id, &digest).await?,
        };
        if let Ok(mut l) = self.last.lock() {
            *l = Some(rev.clone());
        }
        Ok(Fetched::New(rev))
    }

    fn repo(&self) -> &str {
        &self.cfg.repository.repository
    }

    fn registry_error(&self, e: WireError) -> OciError {
        OciError::Registry {
            url: self.display(),
            message: e.to_string(),
        }
    }

    /// The tag followed (none when pinned) and the digest it names now.
    async fn resolve(&self) -> Result<(Option<String>, String), OciError> {
        let tag = match &self.cfg.selector {
            // Pinned: nothing to ask the registry until it is pulled.
            Selector::Digest(d) => return Ok((None, d.clone())),
            Selector::Tag(t) => t.clone(),
            Selector::Semver(range) => {
                let tags = self.list_tags().await?;
                reference::newest_matching(&tags, range)
                    .map(str::to_string)
                    .ok_or_else(|| OciError::Registry {
                        url: self.display(),
                        message: format!("no tag matches the semver range {range}"),
                    })?
            }
        };
        let digest = self
            .registry
            .digest_of_tag(self.repo(), &tag)
            .await
            .map_err(|e| match e {
                WireError::NotFound => OciError::Registry {
                    url: self.display(),
                    message: format!("tag {tag} not found"),
                },
                other => self.registry_error(other),
            })?;
        Ok((Some(tag), digest))
    }

    async fn list_tags(&self) -> Result<Vec<String>, OciError> {
        let mut tags = Vec::new();
        let mut last: Option<String> = None;
        // Pages of 1000; a repository of more than 100 000 tags is not followed by range.
        for _ in 0..100 {
            let page = self
                .registry
                .tags(self.repo(), 1000, last.as_deref())
                .await
                .map_err(|e| self.registry_error(e))?;
            let n = page.len();
            last = page.last().cloned();
            tags.extend(page);
            if n < 1000 {
                break;
            }
        }
        Ok(tags)
    }

    /// Pulls the manifest and the tree's layer of `digest`, checks and unpacks it.
    async fn pull(&self, id: String, digest: &str) -> Result<Artifact, OciError> {
        let url = self.display();
        let bad = |message: String| OciError::Artifact {
            url: url.clone(),
            message,
        };
        let (manifest, _) =
            self.registry
                .manifest(self.repo(), digest)
                .await
                .map_err(|e| match e {
                    WireError::Invalid(m) => bad(m),
                    other => self.registry_error(other),
                })?;
        if manifest.is_index() {
            return Err(bad(format!(
                "{digest} is an image index, not an artifact of one manifest"
            )));
        }
        if let Some(key) = &self.cfg.verify_key {
            self.check_signature(key, digest).await?;
        }
        let layer = self.tree_layer(&manifest).map_err(|e| bad(e.to_string()))?;
        if layer.size < 0 || layer.size as u64 > self.cfg.limits.layer_bytes {
            return Err(bad(format!(
                "the artifact's layer is {} bytes, more than the {} MiB a tree may be; not pulled",
                layer.size,
                self.cfg.limits.layer_bytes >> 20
            )));
        }
        let data = self.pull_layer(layer).await?;
        let dir = self.cache_path.join(digest.trim_start_matches("sha256:"));
        let limits = self.cfg.limits;
        let cache = self.cache_path.clone();
        let unpacked = tokio::task::spawn_blocking(move || store(&data, &cache, &dir, limits))
            .await
            .map_err(|e| OciError::Local(format!("unpacking: {e}")))?
            .map_err(|e| bad(e.to_string()))?;
        Ok(Artifact {
            id,
            digest: digest.to_string(),
            dir: unpacked,
            annotations: manifest.annotations.clone().unwrap_or_default(),
        })
    }

    /// A cosign signature of `digest` by `key`, found beside it, or an error saying why not.
    async fn check_signature(&self, key: &verify::VerifyKey, digest: &str) -> Result<(), OciError> {
        let refused = |message: String| OciError::Artifact {
            url: self.display(),
            message: format!("{digest}: {message}; refused under --verify-key"),
        };
        let tag = verify::signature_tag(digest);
        let manifest = match self.registry.manifest(self.repo(), &tag).await {
            Ok((m, _)) if !m.is_index() => m,
            Ok(_) => return Err(refused(format!("{tag} is not a cosign signature manifest"))),
            Err(WireError::NotFound) => {
                return Err(refused(format!("no cosign signature (no tag {tag})")));
            }
            Err(e) => return Err(self.registry_error(e)),
        };
        let mut why = Vec::new();
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type == verify::SIMPLE_SIGNING_MEDIA_TYPE)
        {
            let Some(signature) = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(verify::SIGNATURE_ANNOTATION))
            else {
                continue;
            };
            if !(0..=verify::MAX_PAYLOAD_BYTES).contains(&layer.size) {
                why.push("a signed payload too large to be one".to_string());
                continue;
            }
            let payload = self.pull_layer(layer).await?;
            match verify::verify(key, &payload, signature, digest) {
                Ok(()) => return Ok(()),
                Err(e) => why.push(e.to_string()),
            }
        }
        Err(refused(match why.first() {
            Some(first) => first.clone(),
            None => format!("{tag} holds no cosign signature"),
        }))
    }

    /// The one layer of the tree's media type.
    fn tree_layer<'m>(&self, manifest: &'m Manifest) -> Result<&'m Descriptor, LayerError> {
        let wanted = self
            .cfg
            .layer_media_type
            .as_deref()
            .unwrap_or(CONTENT_MEDIA_TYPE);
        let mut found = manifest.layers.iter().filter(|l| l.media_type == wanted);
        match (found.next(), found.next()) {
            (Some(l), None) => Ok(l),
            (None, _) => {
                let types: Vec<&str> = manifest
                    .layers
                    .iter()
                    .map(|l| l.media_type.as_str())
                    .collect();
                Err(LayerError::None {
                    wanted: wanted.to_string(),
                    has: match types.is_empty() {
                        true => "none".to_string(),
                        false => types.join(", "),
                    },
                })
            }
            (Some(_), Some(_)) => Err(LayerError::Several(wanted.to_string())),
        }
    }

    /// The layer's bytes, no more than its descriptor says, and checked against its digest.
    async fn pull_layer(&self, layer: &Descriptor) -> Result<Vec<u8>, OciError> {
        let data = self
            .registry
            .blob(self.repo(), &layer.digest, layer.size.max(0) as u64)
            .await
            .map_err(|e| match e {
                WireError::TooLarge { .. } => OciError::Artifact {
                    url: self.display(),
                    message: "the layer is larger than its manifest says; refused".into(),
                },
                WireError::Transport(m) => OciError::Registry {
                    url: self.display(),
                    message: format!("downloading the layer: {m}"),
                },
                other => self.registry_error(other),
            })?;
        let actual = wire::digest_of(&data);
        if actual != layer.digest {
            return Err(OciError::Artifact {
                url: self.display(),
                message: format!(
                    "the layer's digest is {actual}, not {}; refused",
                    layer.digest
                ),
            });
        }
        Ok(data)
    }
}

/// `--path`, checked: `a/b` for `./a//b/`, refused when it leaves the tree.
pub fn normalize_path(path: &str) -> Result<String, OciError> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(OciError::Config(format!(
                    "--path {path:?} leaves the artifact's tree"
                )));
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Unpacks `layer` to `dir` (kept: one whole unpack per digest), and drops older ones.
fn store(
    layer: &[u8],
    cache: &Path,
    dir: &Path,
    limits: Limits,
) -> Result<PathBuf, unpack::UnpackError> {
    use unpack::UnpackError;
    if !dir.is_dir() {
        let tmp = dir.with_extension("partial");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)
                .map_err(UnpackError::io(format!("removing {}", tmp.display())))?;
        }
        let unpacked = unpack::unpack(layer, &tmp, limits);
        if let Err(e) = unpacked {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        // Renamed only once whole, so a directory under the digest's name is always whole.
        std::fs::rename(&tmp, dir)
            .map_err(UnpackError::io(format!("storing {}", dir.display())))?;
    }
    if let Ok(entries) = std::fs::read_dir(cache) {
        for e in entries.flatten() {
            if e.path() != dir {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    dir.canonicalize()
        .map_err(UnpackError::io(dir.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_and_kept_within_the_tree() {
        assert_eq!(normalize_path("").unwrap(), "");
        assert_eq!(normalize_path("./team//prod/").unwrap(), "team/prod");
        let e = normalize_path("team/../../etc").unwrap_err().to_string();
        assert!(e.contains("leaves the artifact's tree"), "{e}");
    }
}
