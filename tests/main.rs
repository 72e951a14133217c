//! The integration tests, one binary: each file beside this one is a module (its doc says
//! what it proves), `support/` what they share. One binary links the crate with kube and
//! git2 once instead of once per file (on 2 cores that was most of a test build). Filters:
//! a file's tests are `test(/^FILE::/)`; `serial_*` tests run alone (`test(/::serial_/)`);
//! the fault injection (`faults::`) runs on its own (scripts/test).

// A panic is how a test fails, and its output is the report: unwrap, expect and print
// are the tests' own ([lints] in Cargo.toml keeps them out of the crate).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod support;

mod api;
mod argo;
mod argo_hooks;
mod argo_plugins;
mod daemon;
mod diff_output;
mod docs;
mod drift_ledger;
mod emptied_map;
mod events_delta;
mod examples;
mod faults;
mod fleet;
mod flux;
mod git_source;
mod git_ssh;
mod helm;
mod helm_lookup;
mod hook_flood;
mod hooks;
mod hostile;
mod kubernetes;
mod layout;
mod lease;
mod limits;
mod listener;
mod marks;
mod notify;
mod oci;
mod oci_artifacts;
mod policies;
mod preview;
mod prometheus;
mod prune_finalizers;
mod quiet;
mod rbac;
mod realworld;
mod refusals;
mod render_cluster;
mod rendered;
mod replace;
mod report;
mod secret_hashes;
mod security;
mod shards;
mod ship;
mod signed;
mod signin;
mod sops;
mod spec;
mod sync;
mod testbed;
mod throttle;
mod tree_settings;
mod ui;
mod ui_find;
mod ui_realworld;
mod yaml;
