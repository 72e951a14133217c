//! Where revisions come from: a watched directory, or a git repository.

pub mod dir;
pub mod git;
