//! Charts from an HTTP(S) chart repository or an OCI registry: pulled by `helm pull` once
//! per (source, chart, version) into a cache directory, kept with the digest of the archive helm
//! fetched, and verified against it whenever it is used again. A resync or a restart
//! fetches nothing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::cache::hex;
use crate::spec::helm::HelmRelease;

const DIGEST_FILE: &str = "digest";
const ARCHIVE: &str = "chart.tgz";
const UNPACKED: &str = "chart";

/// Whether release `r`'s chart is pulled (from a repository, or an `oci://` registry).
pub(crate) fn is_pulled(r: &HelmRelease) -> bool {
    r.repository.is_some() || r.chart.starts_with("oci://")
}

/// How long a range's resolution holds before the source is asked again. A resync inside
/// it runs no `helm`; a chart published meanwhile is taken within this time.
const RESOLVE_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether `version` names one version (as `6.2.3` or `v6.2.3-rc.1`), not a range.
pub(crate) fn is_exact(version: &str) -> bool {
    let v = version.strip_prefix('v').unwrap_or(version);
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Why a chart could not be pulled, or its cached copy used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    #[error("`{0}` names a file in the credentials directory, and none is set (--credentials-dir)")]
    NoCredentialsDir(&'static str),
    #[error("`{key}`: cannot read {path}: {message}")]
    Credential {
        key: &'static str,
        path: String,
        message: String,
    },
    #[error("`username-file` and `password-file` go together")]
    HalfCredentials,
    #[error("`ca-file`: no file {0}")]
    NoCaFile(String),
    #[error("a pulled chart needs `version` (an exact version, as 6.2.3, or a range, as ^6.2)")]
    NoVersion,
    #[error("cannot pull chart {chart} {version} from {place}: {said}")]
    Pull {
        chart: String,
        version: String,
        /// The repository or registry.
        place: String,
        said: String,
    },
    /// A step on the cache's disk: what was being done, and the system's words.
    #[error("{doing}: {message}")]
    Disk { doing: String, message: String },
    #[error("helm pulled no archive of chart {0}")]
    NoArchive(String),
    #[error("the archive of chart {0} holds no Chart.yaml")]
    NoChartFile(String),
    #[error("the Chart.yaml of chart {0} names no version")]
    NoChartVersion(String),
    #[error("the pulled chart did not verify")]
    NotVerified,
    #[error("a broken chart archive: {0}")]
    BrokenArchive(String),
    #[error("the chart archive holds a link or a special file; refused")]
    SpecialFile,
    #[error("the chart archive holds a path that leads out; refused")]
    LeadsOut,
    #[error("unpacking the chart: {0}")]
    Unpack(String),
}

/// A failed step on disk, said as the step and the system's words.
fn disk(doing: impl Into<String>) -> impl Fn(std::io::Error) -> PullError {
    let doing = doing.into();
    move |e| PullError::Disk {
        doing: doing.clone(),
        message: e.to_string(),
    }
}

/// What a pull sends besides the chart's name: credentials (read from files the operator
/// put in the credentials directory, never from the tree), a CA, and the TLS choices.
#[derive(Debug, Default)]
struct Access {
    username: Option<String>,
    password: Option<String>,
    ca_file: Option<PathBuf>,
}

impl Access {
    fn of(r: &HelmRelease, credentials: Option<&Path>) -> Result<Access, PullError> {
        let named = [
            ("username-file", &r.username_file),
            ("password-file", &r.password_file),
            ("ca-file", &r.ca_file),
        ];
        if named.iter().all(|(_, f)| f.is_none()) {
            return Ok(Access::default());
        }
        let Some(dir) = credentials else {
            let key = named
                .iter()
                .find(|(_, f)| f.is_some())
                .map_or("username-file", |(k, _)| k);
            return Err(PullError::NoCredentialsDir(key));
        };
        let path = |f: &Option<String>| f.as_ref().map(|f| dir.join(f));
        let read = |key: &'static str, f: &Option<String>| -> Result<Option<String>, PullError> {
            match path(f) {
                None => Ok(None),
                Some(p) => std::fs::read_to_string(&p)
                    .map(|t| Some(t.trim_end_matches(['\n', '\r']).to_string()))
                    .map_err(|e| PullError::Credential {
                        key,
                        path: p.display().to_string(),
                        message: e.to_string(),
                    }),
            }
        };
        let access = Access {
            username: read("username-file", &r.username_file)?,
            password: read("password-file", &r.password_file)?,
            ca_file: path(&r.ca_file),
        };
        if access.username.is_some() != access.password.is_some() {
            return Err(PullError::HalfCredentials);
        }
        if let Some(ca) = &access.ca_file
            && !ca.is_file()
        {
            return Err(PullError::NoCaFile(ca.display().to_string()));
        }
        Ok(access)
    }

    /// The TLS flags `helm pull` and `helm repo add` take alike.
    fn tls_args(&self, r: &HelmRelease, args: &mut Vec<OsString>) {
        if let Some(ca) = &self.ca_file {
            args.extend(["--ca-file".into(), ca.into()]);
        }
        if r.insecure_skip_tls_verify {
            args.push("--insecure-skip-tls-verify".into());
        }
    }
}

/// The chart directory of release `r` (pulled: see [`is_pulled`]) and its exact version,
/// pulled if it is not in `cache` yet. A range is resolved by the source at most every
/// [`RESOLVE_EVERY`]; a source that is away then leaves the last resolution in force.
/// `helm` is the program that pulls.
pub fn chart(
    helm: &Path,
    r: &HelmRelease,
    cache: &Path,
    credentials: Option<&Path>,
    limits: &super::runner::Limits,
    slots: &super::runner::Slots,
) -> Result<(PathBuf, String), PullError> {
    let wanted = r.version.as_deref().ok_or(PullError::NoVersion)?;
    let repository = r.repository.as_deref().unwrap_or_default();
    let key = |version: &str| {
        hex(&Sha256::digest(format!(
            "{repository}\0{}\0{version}",
            r.chart
        )))[..24]
            .to_string()
    };
    // Each cached entry's archive is hashed once per use: a resync does no more.
    let cached = |version: &str| verified(&cache.join(key(version)));
    let version = if is_exact(wanted) {
        wanted.to_string()
    } else {
        let resolution = cache.join("ranges").join(key(wanted));
        let last = resolved(&resolution);
        if let Some((version, true)) = &last
            && let Some(chart) = cached(version)
        {
            return Ok((chart, version.clone()));
        }
        match fetch(helm, r, wanted, cache, credentials, limits, slots) {
            Ok((version, staged, _tmp)) => {
                store(&staged, &cache.join(key(&version)))?;
                let _ = std::fs::create_dir_all(cache.join("ranges"));
                let _ = std::fs::write(&resolution, &version);
                version
            }
            Err(e) => match last {
                Some((version, _)) => {
                    let Some(chart) = cached(&version) else {
                        return Err(e);
                    };
                    tracing::warn!(chart = %r.chart, range = wanted, %version, error = %e, "cannot resolve the range again; the last version it gave stays");
                    return Ok((chart, version));
                }
                None => return Err(e),
            },
        }
    };
    let dir = cache.join(key(&version));
    if let Some(chart) = verified(&dir) {
        return Ok((chart, version));
    }
    let (_, staged, _tmp) = fetch(helm, r, &version, cache, credentials, limits, slots)?;
    store(&staged, &dir)?;
    verified(&dir)
        .map(|chart| (chart, version))
        .ok_or(PullError::NotVerified)
}

/// The version a range last resolved to, and whether that is recent enough to hold.
fn resolved(path: &Path) -> Option<(String, bool)> {
    let version = std::fs::read_to_string(path).ok()?.trim().to_string();
    let age = std::fs::metadata(path)
        .ok()?
        .modified()
        .ok()?
        .elapsed()
        .ok()?;
    (!version.is_empty()).then_some((version, age < RESOLVE_EVERY))
}

/// Pulls `version` (exact or a range) of `r`'s chart: the version pulled, a staged cache
/// entry, and the temporary directory that holds it.
fn fetch(
    helm: &Path,
    r: &HelmRelease,
    version: &str,
    cache: &Path,
    credentials: Option<&Path>,
    limits: &super::runner::Limits,
    slots: &super::runner::Slots,
) -> Result<(String, PathBuf, tempfile::TempDir), PullError> {
    use super::runner::{RunError, Session};
    let access = Access::of(r, credentials)?;
    let repository = r.repository.as_deref().unwrap_or_default();
    let source = if repository.is_empty() {
        r.chart.as_str()
    } else {
        repository
    };
    let failed = |e: RunError| {
        let said = match e {
            RunError::Failed(line) => line,
            other => other.to_string(),
        };
        PullError::Pull {
            chart: r.chart.clone(),
            version: version.to_string(),
            place: source.to_string(),
            said,
        }
    };
    std::fs::create_dir_all(cache).map_err(disk(format!("creating {}", cache.display())))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(cache)
        .map_err(disk("a directory to pull into"))?;
    // One home for the login and the pull: the login leaves its token there.
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).map_err(disk("a home for helm"))?;
    let session = Session {
        home: Some(&home),
        stdin: None,
        ..Session::default()
    };
    let login = |args: Vec<OsString>| {
        super::runner::run_in(
            helm,
            &args,
            tmp.path(),
            limits,
            slots,
            Session {
                stdin: access.password.as_deref().map(str::as_bytes),
                ..session
            },
        )
        .map_err(failed)
    };
    let mut args: Vec<OsString> = vec!["pull".into()];
    match (&access.username, repository.is_empty()) {
        (Some(user), true) => {
            let host = r
                .chart
                .trim_start_matches("oci://")
                .split('/')
                .next()
                .unwrap_or_default();
            let mut l: Vec<OsString> = vec![
                "registry".into(),
                "login".into(),
                host.into(),
                "--username".into(),
                user.into(),
                "--password-stdin".into(),
            ];
            if let Some(ca) = &access.ca_file {
                l.extend(["--ca-file".into(), ca.into()]);
            }
            if r.insecure_skip_tls_verify || r.plain_http {
                l.push("--insecure".into());
            }
            login(l)?;
            args.push(r.chart.clone().into());
        }
        (Some(user), false) => {
            // `helm repo add` reads the password on stdin; `helm pull --password` would
            // show it to anyone who lists processes.
            let mut l: Vec<OsString> = vec![
                "repo".into(),
                "add".into(),
                "pulled".into(),
                repository.into(),
                "--username".into(),
                user.into(),
                "--password-stdin".into(),
            ];
            access.tls_args(r, &mut l);
            login(l)?;
            args.push(format!("pulled/{}", r.chart).into());
        }
        (None, true) => args.push(r.chart.clone().into()),
        (None, false) => {
            args.extend([r.chart.clone().into(), "--repo".into(), repository.into()]);
        }
    }
    let into = tmp.path().join("pulled");
    std::fs::create_dir(&into).map_err(disk("a directory to pull into"))?;
    args.extend([
        "--version".into(),
        version.into(),
        "--destination".into(),
        into.clone().into(),
    ]);
    access.tls_args(r, &mut args);
    if r.plain_http {
        args.push("--plain-http".into());
    }
    tracing::info!(source, chart = %r.chart, version, "pulling a chart");
    super::runner::run_in(helm, &args, tmp.path(), limits, slots, session).map_err(failed)?;
    let archive = std::fs::read_dir(&into)
        .map_err(disk("reading what helm pulled"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "tgz"))
        .ok_or_else(|| PullError::NoArchive(r.chart.clone()))?;
    let bytes = std::fs::read(&archive).map_err(disk("reading the chart archive"))?;
    let digest = hex(&Sha256::digest(&bytes));
    let unpack = tmp.path().join("unpacked");
    unpack_archive(&bytes, &unpack)?;
    // The archive holds one directory, the chart's.
    let inner = std::fs::read_dir(&unpack)
        .map_err(disk("reading the unpacked chart"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("Chart.yaml").is_file())
        .ok_or_else(|| PullError::NoChartFile(r.chart.clone()))?;
    let pulled = super::tree::chart_meta(&inner)
        .map(|m| m.version)
        .ok_or_else(|| PullError::NoChartVersion(r.chart.clone()))?;
    let staged = tmp.path().join("staged");
    let staging = disk("staging the chart for the cache");
    std::fs::create_dir(&staged).map_err(&staging)?;
    std::fs::rename(&inner, staged.join(UNPACKED)).map_err(&staging)?;
    std::fs::write(staged.join(ARCHIVE), &bytes).map_err(&staging)?;
    std::fs::write(staged.join(DIGEST_FILE), format!("sha256:{digest}\n")).map_err(&staging)?;
    Ok((pulled, staged, tmp))
}

/// Moves a staged entry into place as `dir`.
fn store(staged: &Path, dir: &Path) -> Result<(), PullError> {
    if dir.exists() {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::fs::rename(staged, dir).map_err(disk("caching the chart"))
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
fn unpack_archive(bytes: &[u8], into: &Path) -> Result<(), PullError> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    std::fs::create_dir_all(into).map_err(disk("a directory to unpack the chart in"))?;
    let broken = |e: std::io::Error| PullError::BrokenArchive(e.to_string());
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            return Err(PullError::SpecialFile);
        }
        // unpack_in refuses paths that climb out of `into`.
        match entry.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => return Err(PullError::LeadsOut),
            Err(e) => return Err(PullError::Unpack(e.to_string())),
        }
    }
    Ok(())
}
