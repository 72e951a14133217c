//! A git repository as a followed source: fetched on every read (a fetch that finds the
//! same commit is a revision the loop has already sent, and is not sent again).

use std::sync::Arc;

use super::{Failure, Followed};
use crate::source::Revision;
use crate::source::git::GitSource;

pub(super) struct Git(pub Arc<GitSource>);

impl Followed for Git {
    const KIND: &'static str = "git";
    const REASONS: &'static [&'static str] = crate::source::git::GitError::METRIC_LABELS;

    async fn read(&self, _again: bool) -> Result<Option<Revision>, Failure> {
        match crate::source::git::fetch(self.0.clone()).await {
            Ok(rev) => Ok(Some(rev)),
            Err(e) => Err(Failure {
                reason: e.metric_label(),
                message: e.to_string(),
            }),
        }
    }
}
