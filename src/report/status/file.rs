//! Reading and writing the status file: a reader of another version is told so, and the
//! file is only ever replaced by a rename.

use std::io::{BufRead as _, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{StatusFile, VERSION};

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("reading status file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid driftless status file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path}: status file version {found} is not supported (this driftless reads version {VERSION})"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("writing status file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serialising the status: {0}")]
    Serialize(serde_json::Error),
}

impl StatusFile {
    pub fn read(path: &Path) -> Result<StatusFile, StatusError> {
        let text = std::fs::read_to_string(path).map_err(|source| StatusError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        // The version is checked before the full parse so a newer schema is reported as
        // such rather than as whichever field happens not to match.
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let parse_error = |source| StatusError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let Versioned { version } = serde_json::from_str(&text).map_err(parse_error)?;
        if version != VERSION {
            return Err(StatusError::Version {
                path: path.to_path_buf(),
                found: version,
            });
        }
        serde_json::from_str(&text).map_err(parse_error)
    }
}

/// Atomic replace: write a temp file in the same directory, fsync it, rename it over
/// `path`, fsync the directory. A reader never sees a partial file, and a crash leaves the
/// old or the new file. Returns `Ok(false)` without writing when the content on disk is
/// already this, so an unchanged status causes no churn for watchers.
///
/// The text is streamed, never held: once to compare it with the file on disk (stopping at
/// the first byte that differs), then, if it differs, into the temp file. Made in memory
/// and compared with the old file read whole, a 10,000-spec status held about 35 MiB at
/// once, the largest part of a no-op resync's peak.
pub fn write_atomic(path: &Path, status: &impl Serialize) -> Result<bool, StatusError> {
    if unchanged(path, status) {
        return Ok(false);
    }
    replace(path, status).map(|()| true)
}

/// `write_atomic` without the comparison, for a writer that knows the content changed.
pub fn replace(path: &Path, status: &impl Serialize) -> Result<(), StatusError> {
    let write_error = |source| StatusError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "status".into(), |n| n.to_string_lossy().into_owned());
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // The status is meant for other readers (a sidecar, `driftless status` as another
    // user); it holds no secrets. tempfile's default would be 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    // Dropping the temp file on any error below removes it: no leftovers.
    let mut tmp = builder.tempfile_in(dir).map_err(write_error)?;
    let mut out = std::io::BufWriter::with_capacity(CHUNK, tmp.as_file_mut());
    serde_json::to_writer_pretty(&mut out, status).map_err(|e| match e.io_error_kind() {
        Some(_) => write_error(std::io::Error::other(e)),
        None => StatusError::Serialize(e),
    })?;
    out.write_all(b"\n").map_err(write_error)?;
    out.flush().map_err(write_error)?;
    drop(out);
    tmp.as_file().sync_all().map_err(write_error)?;
    tmp.persist(path).map_err(|e| write_error(e.error))?;
    // The rename is durable only once the directory entry is on disk.
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_error)?;
    Ok(())
}

/// Bytes streamed at a time, to the comparison and to the file.
const CHUNK: usize = 64 * 1024;

/// Whether the file at `path` holds exactly `status` as `write_atomic` writes it.
fn unchanged(path: &Path, status: &impl Serialize) -> bool {
    let Ok(old) = std::fs::File::open(path) else {
        return false;
    };
    let mut same = std::io::BufWriter::with_capacity(
        CHUNK,
        Same {
            old: std::io::BufReader::with_capacity(CHUNK, old),
            scratch: Vec::new(),
        },
    );
    // Any error (the first differing byte among them) means: write it.
    let streamed = serde_json::to_writer_pretty(&mut same, status).is_ok()
        && same.write_all(b"\n").is_ok()
        && same.flush().is_ok();
    streamed
        && same
            .into_inner()
            .is_ok_and(|mut s| s.old.fill_buf().is_ok_and(|rest| rest.is_empty()))
}

/// A sink that reads the old file alongside what is written to it, and fails at the first
/// chunk that differs (which ends the serialisation there).
struct Same<R> {
    old: R,
    scratch: Vec<u8>,
}

impl<R: std::io::BufRead> Write for Same<R> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.scratch.resize(buf.len(), 0);
        self.old.read_exact(&mut self.scratch)?;
        match self.scratch == buf {
            true => Ok(buf.len()),
            false => Err(std::io::Error::other("the status differs")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn write_replaces_skips_identical_and_leaves_no_temp_files()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("status.json");
        let mut s = sample();
        assert!(write_atomic(&path, &s)?);
        assert_eq!(StatusFile::read(&path)?, s);
        assert!(
            !write_atomic(&path, &s)?,
            "identical content is not rewritten"
        );
        s.revision_applied = s.revision_seen.clone();
        assert!(write_atomic(&path, &s)?);
        assert_eq!(StatusFile::read(&path)?, s);
        let names: Vec<_> = std::fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        assert_eq!(names, ["status.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path)?.permissions().mode();
            assert_eq!(mode & 0o044, 0o044, "readable by others: {mode:o}");
        }
        Ok(())
    }

    #[test]
    fn a_file_that_is_longer_or_shorter_than_the_status_is_rewritten()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("status.json");
        let s = sample();
        assert!(write_atomic(&path, &s)?);
        let whole = std::fs::read(&path)?;
        for old in [
            [&whole[..], b" "].concat(),
            whole[..whole.len() - 1].to_vec(),
        ] {
            std::fs::write(&path, &old)?;
            assert!(write_atomic(&path, &s)?, "{} bytes on disk", old.len());
            assert_eq!(std::fs::read(&path)?, whole);
        }
        Ok(())
    }

    #[test]
    fn write_into_a_missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().ok();
        let path = dir
            .as_ref()
            .map(|d| d.path().join("nope/status.json"))
            .unwrap_or_default();
        let err = write_atomic(&path, &sample()).err();
        assert!(matches!(err, Some(StatusError::Write { .. })), "{err:?}");
    }

    #[test]
    fn read_errors_name_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing.json");
        let e = StatusFile::read(&missing).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("missing.json")),
            "{e:?}"
        );

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"version\": 1, \"source\": ")?;
        let e = StatusFile::read(&bad).err();
        assert!(matches!(e, Some(StatusError::Parse { .. })), "{e:?}");

        let newer = dir.path().join("newer.json");
        std::fs::write(&newer, r#"{"version": 2, "whatever": true}"#)?;
        let e = StatusFile::read(&newer).err();
        assert!(
            matches!(e, Some(StatusError::Version { found: 2, .. })),
            "{e:?}"
        );
        Ok(())
    }
}
