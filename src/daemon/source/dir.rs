//! A directory as a followed source: read whole on every change the watch reports.

use super::{Failure, Followed};
use crate::source::Revision;

pub(super) struct Dir {
    pub root: std::path::PathBuf,
    /// Kept for as long as the directory is followed: dropping it stops the watch.
    pub _watch: crate::source::dir::DirWatch,
}

impl Followed for Dir {
    const KIND: &'static str = "dir";
    const REASONS: &'static [&'static str] = &["read"];

    async fn read(&self, _again: bool) -> Result<Option<Revision>, Failure> {
        // Named by what it renders to (`id: None`).
        crate::source::read_tree(&self.root, None)
            .map(Some)
            .map_err(|e| Failure {
                message: e.to_string(),
                reason: "read",
            })
    }
}
