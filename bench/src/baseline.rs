//! The run a workload's results are compared with: the one committed at its `--out` path
//! in HEAD, and the commit a new run is made at.

use std::path::Path;
use std::process::Command;

use serde::de::DeserializeOwned;

/// `git describe --always --dirty`: the commit a run is made at ("" outside git).
pub(crate) fn this_commit() -> String {
    git(&["describe", "--always", "--dirty"])
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The run committed at `path` in HEAD, if any (and if it reads as `T`).
pub(crate) fn committed<T: DeserializeOwned>(path: &Path) -> Option<T> {
    let text = git(&["show", &format!("HEAD:{}", path.display())])?;
    serde_json::from_str(&text).ok()
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
