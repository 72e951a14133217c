//! Where revisions come from: a watched directory, a git repository, or an OCI artifact.

pub mod dir;
pub mod git;
pub mod oci;
