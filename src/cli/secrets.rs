//! Secrets the operator hands the daemon: from files (systemd credentials, mounted
//! Secrets) or the environment, never argv.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// A secret from VAR or the file named by VAR_FILE (systemd credentials, mounted Secrets).
pub(super) fn secret_from_env(var: &str) -> anyhow::Result<Option<String>> {
    if let Ok(v) = std::env::var(var)
        && !v.trim().is_empty()
    {
        return Ok(Some(v.trim().to_string()));
    }
    let file_var = format!("{var}_FILE");
    let Some(path) = std::env::var_os(&file_var) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {file_var} ({})", PathBuf::from(&path).display()))?;
    Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty()))
}

pub(super) fn read_secret_file(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    let secret = std::fs::read(path)
        .with_context(|| format!("reading the {what} {}", path.display()))?
        .trim_ascii()
        .to_vec();
    // Refused here rather than later, where it would fail quietly while the daemon runs.
    anyhow::ensure!(
        !secret.is_empty(),
        "the {what} file {} is empty",
        path.display()
    );
    Ok(secret)
}
