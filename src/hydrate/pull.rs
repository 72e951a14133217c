//! Charts from an HTTP(S) chart repository or an OCI registry: pulled by `helm pull` once
//! per (source, chart, version) into a cache directory, kept with the digest of the archive helm
//! fetched, and verified against it whenever it is used again. A resync or a restart
//! fetches nothing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::spec::helm::HelmRelease;

const DIGEST_FILE: &str = "digest";
const ARCHIVE: &str = "chart.tgz";
const UNPACKED: &str = "chart";

/// Whether release `r`'s chart is pulled (from a repository, or an `oci://` registry).
pub fn is_pulled(r: &HelmRelease) -> bool {
    r.repository.is_some() || r.chart.starts_with("oci://")
}

/// The chart directory of release `r` (pulled: see [`is_pulled`]), pulled if it is not in
/// `cache` yet.
pub fn chart(
    helm: &super::helm::Helm,
    r: &HelmRelease,
    cache: &Path,
    limits: &super::runner::Limits,
    slots: &super::runner::Slots,
) -> Result<PathBuf, String> {
    let version = r
        .version
        .as_deref()
        .ok_or_else(|| "a pulled chart needs `version` (an exact version, as 6.2.3)".to_string())?;
    if version.contains(['^', '~', '>', '<', '*', ' ', ',']) {
        return Err(format!(
            "`version` {version:?} is a range; name an exact version (ranges are not resolved yet)"
        ));
    }
    let repository = r.repository.as_deref().unwrap_or_default();
    let source = if repository.is_empty() {
        r.chart.as_str()
    } else {
        repository
    };
    let key = hex(&Sha256::digest(format!(
        "{repository}\0{}\0{version}",
        r.chart
    )))[..24]
        .to_string();
    let dir = cache.join(&key);
    if let Some(chart) = verified(&dir) {
        return Ok(chart);
    }
    std::fs::create_dir_all(cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(cache)
        .map_err(|e| format!("a directory to pull into: {e}"))?;
    let mut args: Vec<OsString> = vec!["pull".into(), r.chart.clone().into()];
    if !repository.is_empty() {
        args.extend(["--repo".into(), repository.into()]);
    }
    args.extend([
        "--version".into(),
        version.into(),
        "--destination".into(),
        tmp.path().into(),
    ]);
    if r.plain_http {
        args.push("--plain-http".into());
    }
    tracing::info!(source, chart = %r.chart, version, "pulling a chart");
    super::runner::run(&helm.program, &args, tmp.path(), limits, slots).map_err(|e| {
        let said = match e {
            super::runner::RunError::Failed(line) => line,
            other => other.to_string(),
        };
        format!(
            "cannot pull chart {} {version} from {source}: {said}",
            r.chart
        )
    })?;
    let archive = std::fs::read_dir(tmp.path())
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "tgz"))
        .ok_or_else(|| format!("helm pulled no archive of chart {}", r.chart))?;
    let bytes = std::fs::read(&archive).map_err(|e| e.to_string())?;
    let digest = hex(&Sha256::digest(&bytes));
    let unpack = tmp.path().join("unpacked");
    unpack_archive(&bytes, &unpack)?;
    // The archive holds one directory, the chart's.
    let inner = std::fs::read_dir(&unpack)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("Chart.yaml").is_file())
        .ok_or_else(|| format!("the archive of chart {} holds no Chart.yaml", r.chart))?;
    let staged = tmp.path().join("staged");
    std::fs::create_dir(&staged).map_err(|e| e.to_string())?;
    std::fs::rename(&inner, staged.join(UNPACKED)).map_err(|e| e.to_string())?;
    std::fs::write(staged.join(ARCHIVE), &bytes).map_err(|e| e.to_string())?;
    std::fs::write(staged.join(DIGEST_FILE), format!("sha256:{digest}\n"))
        .map_err(|e| e.to_string())?;
    if dir.exists() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::rename(&staged, &dir).map_err(|e| format!("caching the chart: {e}"))?;
    verified(&dir).ok_or_else(|| "the pulled chart did not verify".to_string())
}

/// The cached chart in `dir`, when its archive still has the digest recorded at pull.
fn verified(dir: &Path) -> Option<PathBuf> {
    let recorded = std::fs::read_to_string(dir.join(DIGEST_FILE)).ok()?;
    let bytes = std::fs::read(dir.join(ARCHIVE)).ok()?;
    let chart = dir.join(UNPACKED);
    (recorded.trim() == format!("sha256:{}", hex(&Sha256::digest(&bytes)))
        && chart.join("Chart.yaml").is_file())
    .then_some(chart)
}

/// A chart archive (`.tgz`), unpacked where nothing may land outside `into`.
fn unpack_archive(bytes: &[u8], into: &Path) -> Result<(), String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    std::fs::create_dir_all(into).map_err(|e| e.to_string())?;
    for entry in archive
        .entries()
        .map_err(|e| format!("a broken chart archive: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("a broken chart archive: {e}"))?;
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            return Err("the chart archive holds a link or a special file; refused".into());
        }
        // unpack_in refuses paths that climb out of `into`.
        match entry.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => {
                return Err("the chart archive holds a path that leads out; refused".into());
            }
            Err(e) => return Err(format!("unpacking the chart: {e}")),
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
