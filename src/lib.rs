//! driftless: a GitOps sync daemon for Kubernetes.
//!
//! The pipeline, one module a stage: `spec` (TOML model, validation) → `render` (pure:
//! specs → objects) → `apply` / `diff` / `prune` (cluster I/O) → `health` (pure: objects →
//! readiness) → `report` (status file, metrics, HTTP), fed by `source` (dir watch, git)
//! and driven by the daemon loop. `cluster` is the one place a client is made.

pub mod apply;
pub mod cluster;
pub mod daemon;
pub mod health;
pub mod object;
pub mod render;
pub mod report;
pub mod source;
pub mod spec;
