//! An OCI artifact as a followed source: each read asks the registry for the tag (one
//! manifest request when nothing moved) and unpacks a new artifact; an unchanged one is
//! read again only when the last read failed.

use std::sync::Arc;

use super::{Failure, Followed};
use crate::report::notify::{Origins, commit_of_origin};
use crate::source::Revision;
use crate::source::oci::{ANNOTATION_REVISION, ANNOTATION_SOURCE, Artifact, Fetched, OciSource};

pub(super) struct Oci {
    pub source: Arc<OciSource>,
    /// Hears the commit each revision was built from, for commit statuses.
    pub origins: Origins,
}

impl Followed for Oci {
    const KIND: &'static str = "oci";
    const REASONS: &'static [&'static str] = crate::source::oci::OciError::METRIC_LABELS;

    async fn read(&self, again: bool) -> Result<Option<Revision>, Failure> {
        let failure = |e: crate::source::oci::OciError| Failure {
            reason: e.metric_label(),
            message: e.to_string(),
        };
        let rev = match self.source.fetch().await.map_err(failure)? {
            Fetched::New(rev) => {
                if let Some(commit) = rev
                    .annotations
                    .get(ANNOTATION_REVISION)
                    .and_then(|r| commit_of_origin(r))
                {
                    self.origins.record(&rev.id, &commit);
                }
                let said = |key: &str| rev.annotations.get(key).map_or("", String::as_str);
                tracing::info!(
                    source = %self.source.display(),
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

impl Oci {
    /// The unpacked artifact (its `--path`), read as a directory is. Kustomize bases may
    /// reach the whole artifact's tree, as they reach a git repository.
    async fn unpacked(&self, rev: Artifact) -> Result<Revision, Failure> {
        let local = |message: String| Failure {
            message,
            reason: "local",
        };
        let root = self
            .source
            .spec_root(&rev)
            .map_err(|e| local(e.to_string()))?;
        let tree = rev.dir.clone();
        let read = tokio::task::spawn_blocking(move || crate::source::read_tree(&root, Some(tree)))
            .await
            .map_err(|e| local(format!("reading the artifact: {e}")))?
            .map_err(|e| local(e.to_string()))?;
        Ok(Revision {
            id: Some(rev.id),
            ..read
        })
    }
}
