//! driftless: a GitOps sync daemon for Kubernetes.
//!
//! The pipeline, one module a stage: `spec` (TOML and YAML model, validation) → `render`
//! (pure: specs → objects) → `apply` (cluster I/O, one file per verb: apply, diff, prune)
//! → `health` (pure: objects → readiness) → `report` (status file, metrics, HTTP), fed by
//! `source` (dir watch, git) through `hydrate` (Kustomize, Jsonnet: a revision's files
//! rendered into what `spec` reads) and driven by the daemon loop. `object` is the lowest module,
//! the names every stage shares; `cluster` is the one place a client is made. The CLI is
//! the binary's (`src/cli/`), not the library's.

pub mod apply;
pub mod cluster;
pub mod daemon;
pub mod health;
pub mod hydrate;
pub mod object;
pub mod render;
pub mod report;
pub mod source;
pub mod spec;
