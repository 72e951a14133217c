//! Where spec files come from: a git repository (this module), or a local directory
//! (`crate::spec::read_dir`).

pub mod git;
