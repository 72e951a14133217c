//! An OCI artifact as a followed source: each read asks the registry for the tag (one
//! manifest request when nothing moved) and unpacks a new artifact; an unchanged one is
//! read again only when the last read failed.

use super::{
    ANNOTATION_REVISION, ANNOTATION_SOURCE, Artifact, Fetched, OciConfig, OciError, OciSource,
};
use crate::source::{Failure, Followed, Revision};

pub struct Oci(OciSource);

impl Oci {
    pub fn open(config: OciConfig) -> Result<Oci, OciError> {
        Ok(Oci(OciSource::open(config)?))
    }

    /// The unpacked artifact (its `--path`), read as a directory is. Kustomize bases may
    /// reach the whole artifact's tree, as they reach a git repository.
    async fn unpacked(&self, rev: Artifact) -> Result<Revision, Failure> {
        let root = self
            .0
            .spec_root(&rev)
            .map_err(|e| Failure::new("local", e))?;
        let tree = rev.dir.clone();
        let read = tokio::task::spawn_blocking(move || crate::source::read_tree(&root, Some(tree)))
            .await
            .map_err(|e| Failure::new("local", format!("reading the artifact: {e}")))?
            .map_err(|e| Failure::new("local", e))?;
        let origin = rev
            .annotations
            .get(ANNOTATION_REVISION)
            .and_then(|r| commit_of_origin(r));
        let mut read = read;
        // The tree's apps name the artifact's repository (a Flux OCIRepository) or the
        // git repository it was built from (its source annotation) as this repository.
        if let Some(c) = read.checkout.as_mut() {
            c.urls.push(self.0.display());
            c.urls
                .extend(rev.annotations.get(ANNOTATION_SOURCE).cloned());
        }
        Ok(Revision {
            id: Some(rev.id),
            origin,
            ..read
        })
    }
}

impl Followed for Oci {
    const KIND: &'static str = "oci";
    const REASONS: &'static [&'static str] = OciError::METRIC_LABELS;

    fn name(&self) -> String {
        self.0.display()
    }

    async fn read(&self, again: bool) -> Result<Option<Revision>, Failure> {
        let rev = match self
            .0
            .fetch()
            .await
            .map_err(|e| Failure::new(e.metric_label(), e))?
        {
            Fetched::New(rev) => {
                let said = |key: &str| rev.annotations.get(key).map_or("", String::as_str);
                tracing::info!(
                    source = %self.0.display(),
                    revision = %rev.id,
                    origin = said(ANNOTATION_SOURCE),
                    origin_revision = said(ANNOTATION_REVISION),
                    "pulled a new artifact"
                );
                rev
            }
            Fetched::Unchanged(rev) if again => rev,
            Fetched::Unchanged(_) => return Ok(None),
        };
        self.unpacked(rev).await.map(Some)
    }
}

/// The commit an OCI artifact's `org.opencontainers.image.revision` names, in the forms
/// Flux writes it: `BRANCH@sha1:HEX`, `sha1:HEX`, `BRANCH/HEX` (before Flux 2.0), or a
/// bare `HEX`.
pub(crate) fn commit_of_origin(revision: &str) -> Option<String> {
    let tail = revision.rsplit(['@', '/']).next().unwrap_or(revision);
    let hex = tail
        .strip_prefix("sha1:")
        .or_else(|| tail.strip_prefix("sha256:"))
        .unwrap_or(tail);
    crate::source::is_commit(hex).then(|| hex.to_ascii_lowercase())
}
