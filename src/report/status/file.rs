//! Reading and writing the status file: a reader of another version is told so, and the
//! file is only ever replaced by a rename.

use std::io::Write;
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

/// What a fleet's daemon writes at its status file: where each cluster's status is
/// (`driftless status` reads them all).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct FleetIndex {
    pub version: u32,
    pub fleet: Vec<PathBuf>,
}

impl FleetIndex {
    pub fn write(path: &Path, files: &[PathBuf]) -> Result<(), StatusError> {
        replace(
            path,
            &FleetIndex {
                version: VERSION,
                fleet: files.to_vec(),
            },
        )
    }

    /// The index at `path`, when the file there is one (else it is a daemon's status,
    /// or no file at all, which the status's own reader says).
    pub fn read(path: &Path) -> Option<FleetIndex> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str::<FleetIndex>(&text).ok()
    }
}

/// Atomic replace: write a temp file in the same directory, fsync it, rename it over
/// `path`, fsync the directory. A reader never sees a partial file, and a crash leaves the
/// old or the new file.
pub fn replace(path: &Path, status: &impl Serialize) -> Result<(), StatusError> {
    replace_with(path, |out| {
        serde_json::to_writer_pretty(out, status).map_err(std::io::Error::from)
    })
}

/// `replace` with the status as the API already holds it (compact JSON without
/// `written`, the last field), indented as `replace` writes it and `written` added: the
/// daemon makes each spec's entry once per write, not once for the API and again for the
/// file.
pub(crate) fn replace_indented(
    path: &Path,
    compact: &str,
    written: Option<&str>,
) -> Result<(), StatusError> {
    replace_with(path, |out| {
        let body = compact
            .strip_suffix('}')
            .ok_or_else(|| std::io::Error::other("the status is not a JSON object"))?;
        indent(out, body.as_bytes())?;
        if let Some(w) = written {
            out.write_all(b",\n  \"written\": ")?;
            serde_json::to_writer(&mut *out, w)?;
        }
        out.write_all(b"\n}")
    })
}

/// Writes the temp file with `fill`, then a newline, and renames it over `path`.
fn replace_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), StatusError> {
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
    fill(&mut out).map_err(write_error)?;
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

/// Bytes written to the file at a time.
const CHUNK: usize = 64 * 1024;

/// Writes compact JSON `text` indented as `serde_json::to_writer_pretty` would (two
/// spaces; `": "` after a key; `{}` and `[]` kept on one line). The text between two
/// structural bytes is copied in one piece.
fn indent(out: &mut dyn Write, text: &[u8]) -> std::io::Result<()> {
    let mut depth = 0usize;
    let mut run = 0;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut dyn Write, depth: usize| -> std::io::Result<()> {
        out.write_all(b"\n")?;
        (0..depth).try_for_each(|_| out.write_all(b"  "))
    };
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b'}' | b']' | b',' | b':' => {
                out.write_all(&text[run..i])?;
                match b {
                    b'{' | b'[' if matches!(text.get(i + 1), Some(b'}' | b']')) => {
                        out.write_all(&text[i..i + 2])?;
                        i += 1;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        out.write_all(&[b])?;
                        newline(out, depth)?;
                    }
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        newline(out, depth)?;
                        out.write_all(&[b])?;
                    }
                    b',' => {
                        out.write_all(b",")?;
                        newline(out, depth)?;
                    }
                    _ => out.write_all(b": ")?,
                }
                run = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.write_all(&text[run..])
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn write_replaces_and_leaves_no_temp_files() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("status.json");
        let mut s = sample();
        replace(&path, &s)?;
        assert_eq!(StatusFile::read(&path)?, s);
        s.revision_applied = s.revision_seen.clone();
        replace(&path, &s)?;
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

    /// The API's compact text, indented, is the file `replace` writes: byte for byte,
    /// with and without `written`, with empty lists and maps, and strings holding what
    /// the indenting must pass over (quotes, escapes, brackets, commas, colons).
    #[test]
    fn the_api_text_indented_is_the_file_replace_writes() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let (indented, whole) = (dir.path().join("a.json"), dir.path().join("b.json"));
        let mut s = sample();
        s.source = r#"dir:/a "b" \c, {d: [e]}"#.to_string();
        s.errors.clear();
        for written in [None, Some("2026-11-30T03:00:00Z".to_string())] {
            s.written = None;
            let compact = serde_json::to_string(&s)?;
            replace_indented(&indented, &compact, written.as_deref())?;
            s.written = written;
            replace(&whole, &s)?;
            let (a, b) = (
                std::fs::read_to_string(&indented)?,
                std::fs::read_to_string(&whole)?,
            );
            assert!(a.contains("\"errors\": []"), "{a}");
            assert_eq!(a, b);
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
        let err = replace(&path, &sample()).err();
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
