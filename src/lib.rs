//! driftless: a GitOps sync daemon for Kubernetes.
//!
//! The pipeline, one module a stage: `spec` (TOML and YAML model, validation) → `render`
//! (pure: specs → objects) → `apply` (cluster I/O, one file per verb: apply, diff, prune)
//! → `health` (pure: objects → readiness) → `report` (status file, metrics, HTTP), fed by
//! `source` (a watched directory, git, OCI) through `hydrate` (the stage that runs
//! Kustomize, Helm and Jsonnet over a revision's files: what `spec` reads) and driven by
//! the daemon loop; `gate` waits between a sync's stages, for the daemon and
//! `driftless apply` alike. `object` is the lowest module, the names every stage shares;
//! `cluster` is the one place a client is made. The CLI is the binary's (`src/cli/`), not
//! the library's.

pub mod apply;
pub mod cluster;
pub mod daemon;
pub mod gate;
pub mod health;
pub mod hydrate;
pub mod object;
pub mod render;
pub mod report;
pub mod source;
pub mod spec;
pub(crate) mod timeline;
