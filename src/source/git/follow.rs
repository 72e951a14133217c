//! A git repository as a followed source: fetched on every read (a fetch that finds the
//! same commit is a revision the loop has already sent, and is not sent again).

use std::sync::Arc;

use super::{GitConfig, GitError, GitSource};
use crate::source::{Failure, Followed, Revision};

pub struct Git(Arc<GitSource>);

impl Git {
    pub fn open(config: GitConfig) -> Result<Git, GitError> {
        Ok(Git(Arc::new(GitSource::open(config)?)))
    }
}

impl Followed for Git {
    const KIND: &'static str = "git";
    const REASONS: &'static [&'static str] = GitError::METRIC_LABELS;

    fn name(&self) -> String {
        self.0.display_url()
    }

    async fn read(&self, _again: bool) -> Result<Option<Revision>, Failure> {
        match super::fetch(self.0.clone()).await {
            Ok(rev) => Ok(Some(rev)),
            Err(e) => {
                let revision = e.revision().map(str::to_string);
                Err(Failure {
                    revision,
                    ..Failure::new(e.metric_label(), e)
                })
            }
        }
    }
}
