//! A directory as a followed source: read whole on every change the watch reports.

use super::{Failure, Followed, Found};
use crate::hydrate::{Input, OnDisk};

pub(super) struct Dir {
    pub root: std::path::PathBuf,
    /// Kept for as long as the directory is followed: dropping it stops the watch.
    pub _watch: crate::source::dir::DirWatch,
}

impl Followed for Dir {
    const KIND: &'static str = "dir";
    const REASONS: &'static [&'static str] = &["read"];

    async fn read(&self, _again: bool) -> Result<Option<Found>, Failure> {
        let failure = |message: String| Failure {
            message,
            reason: "read",
        };
        let (files, unread) =
            crate::spec::read_dir_all(&self.root).map_err(|e| failure(e.to_string()))?;
        let disk = OnDisk::for_dir(&self.root)
            .map_err(|e| failure(format!("spec root {}: {e}", self.root.display())))?;
        Ok(Some(Found {
            // Named by what it renders to.
            id: None,
            input: Input {
                files,
                unread,
                disk: Some(disk),
                ..Input::default()
            },
        }))
    }
}
