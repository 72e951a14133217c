//! Kustomize directories, built with an external `kustomize build` (or `kubectl
//! kustomize`), as Flux and Argo CD build them. Before a run, the kustomization's local
//! closure is walked (`closure.rs`): it is the render's cache key, and where what leads
//! out of the repository is refused.

mod closure;
mod overlay;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::cache::{self, KeyBuilder};
use super::runner;
use super::stage::Shared;
use super::tool::found_once;
use super::tool::{Context, Entry, FindError, Keyed, Output, Ran, Rendered, Tool, ToolError};
use crate::spec::{AppId, Location, RenderedBy};
pub(crate) use closure::ClosureError;
pub use closure::closure;
pub(crate) use overlay::Overlay;

/// The program that builds kustomizations, and how it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kustomize {
    pub program: PathBuf,
    /// `kubectl kustomize DIR` rather than `kustomize build DIR`.
    pub via_kubectl: bool,
    pub version: String,
}

impl Kustomize {
    pub fn args(&self, dir: &Path) -> Vec<OsString> {
        let verb = if self.via_kubectl {
            "kustomize"
        } else {
            "build"
        };
        vec![verb.into(), dir.as_os_str().to_owned()]
    }

    /// The command as status shows it, with the directory relative to the spec root.
    pub fn shown(&self, dir: &str) -> String {
        let dir = if dir.is_empty() { "." } else { dir };
        match self.via_kubectl {
            true => format!("kubectl kustomize {dir}"),
            false => format!("kustomize build {dir}"),
        }
    }
}

/// The kustomize driftless needs, as its errors say.
const NEED: &str = "kustomize v5 (or kubectl 1.27 or newer)";

/// Finds the tool: `named` (`--kustomize` / `DRIFTLESS_KUSTOMIZE`), else `kustomize` on
/// `PATH`, else `kubectl` on `PATH`; then asks its version. kustomize older than v5 is
/// refused: its output differs (v4's `commonLabels` on selectors, v3's ordering).
pub fn find(named: Option<&Path>, limits: &super::runner::Limits) -> Result<Kustomize, FindError> {
    let program = match named {
        Some(p) if p.components().count() == 1 => super::runner::on_path(&p.to_string_lossy())
            .ok_or_else(|| FindError::NotOnPath(p.display().to_string()))?,
        Some(p) => p.to_path_buf(),
        None => super::runner::on_path("kustomize")
            .or_else(|| super::runner::on_path("kubectl"))
            .ok_or(FindError::NotInstalled(
                "kustomize is not installed: neither `kustomize` nor `kubectl` is on PATH (or name one with --kustomize)",
            ))?,
    };
    let via_kubectl = program
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("kubectl"));
    let args: Vec<OsString> = if via_kubectl {
        vec!["version".into(), "--client".into()]
    } else {
        vec!["version".into()]
    };
    let cwd = std::env::temp_dir();
    let out = super::runner::run(&program, &args, &cwd, limits, &super::runner::Slots::new(1))
        .map_err(|e| FindError::DoesNotRun {
            program: program.display().to_string(),
            message: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out);
    let version = if via_kubectl {
        text.lines()
            .find_map(|l| l.strip_prefix("Kustomize Version:"))
            .and_then(semver_in)
    } else {
        semver_in(&text)
    }
    .ok_or_else(|| FindError::NoVersion {
        program: program.display().to_string(),
        tool: "kustomize",
        need: NEED,
    })?;
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 5 {
        return Err(FindError::TooOld {
            program: program.display().to_string(),
            tool: "kustomize",
            version,
            need: NEED,
        });
    }
    Ok(Kustomize {
        program,
        via_kubectl,
        version,
    })
}

/// The first `vN.N.N` in `text`.
fn semver_in(text: &str) -> Option<String> {
    text.split(|c: char| {
        c.is_whitespace() || c == '/' || c == '"' || c == ',' || c == '{' || c == '}' || c == ':'
    })
    .map(|w| w.trim())
    .find(|w| {
        // A pre-release or build suffix may follow the patch number (kubectl 1.30's
        // kustomize is `v5.0.4-0.20230601165947-6ce0bf390ce3`).
        let core = w
            .trim_start_matches('v')
            .split(['-', '+'])
            .next()
            .unwrap_or_default();
        w.starts_with('v')
            && core.split('.').count() == 3
            && core
                .split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    })
    .map(str::to_string)
}

/// Kustomize as the stage drives it: the program, found once per process (not finding
/// it is asked again next revision: it may be installed meanwhile).
#[derive(Debug, Default)]
pub struct Kustomizations {
    found: Mutex<Option<Kustomize>>,
}

/// A kustomization: its directory and its file, relative to the spec root.
#[derive(Debug, Clone)]
pub struct Dir {
    pub dir: String,
    pub file: String,
}

/// A kustomization made ready: its directory on disk, and the repository it lies in.
pub struct KustomizationRun {
    abs: PathBuf,
    repo: PathBuf,
}

impl Tool for Kustomizations {
    type Item = Dir;
    type Ready = Kustomize;
    type Prepared = KustomizationRun;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("a kustomization")
    }

    fn at(&self, item: &Dir) -> Location {
        Location {
            file: item.file.clone(),
            line: 1,
            column: 1,
        }
    }

    fn app(&self, _: &Dir) -> Option<AppId> {
        None
    }

    fn output_file(&self, item: &Dir) -> String {
        item.file.clone()
    }

    fn ready(&self, r: &Shared, _: &Context) -> Result<Kustomize, FindError> {
        found_once(&self.found, || {
            find(r.opts.kustomize.as_deref(), &r.opts.limits)
        })
    }

    /// The kustomization's closure walked (what leads out refused) and read into its key.
    fn prepare(
        &self,
        _: &Shared,
        tool: &Kustomize,
        item: &Dir,
        cx: &Context,
    ) -> Result<Keyed<KustomizationRun>, ToolError> {
        let disk = cx.disk("a kustomization")?;
        let said = <ToolError as From<String>>::from;
        let abs = disk.root.join(&item.dir);
        let abs = abs
            .canonicalize()
            .map_err(|e| said(format!("cannot read the kustomization's directory: {e}")))?;
        if !abs.starts_with(&disk.repo) {
            return Err(said(
                "the kustomization's directory leads out of the repository; refused".into(),
            ));
        }
        let closure =
            closure(&disk.repo, &abs, cx.settings.remote_bases).map_err(|e| said(e.to_string()))?;
        let mut key = KeyBuilder::new("kustomize");
        key.part(tool.program.as_os_str().as_encoded_bytes())
            .part(tool.version.as_bytes())
            .part(tool.shown(&item.dir).as_bytes());
        closure
            .digest(&disk.repo, &mut key)
            .map_err(|e| said(e.to_string()))?;
        Ok(Keyed {
            inputs: KustomizationRun {
                abs,
                repo: disk.repo.clone(),
            },
            // A remote base can change without the repository changing: never kept.
            key: (!closure.remote).then(|| key.finish()),
        })
    }

    fn run(
        &self,
        r: &Shared,
        tool: &Kustomize,
        item: &Dir,
        run: &KustomizationRun,
        _: &Context,
    ) -> Ran {
        let dir = if item.dir.is_empty() { "." } else { &item.dir };
        let span = tracing::info_span!("render", tool = "kustomize", dir = %dir);
        let _enter = span.enter();
        Ran::kept(run_build(r, tool, &run.abs, &[], &run.repo))
    }

    fn finish(
        &self,
        _: &Shared,
        tool: &Kustomize,
        item: &Dir,
        _: KustomizationRun,
        output: Entry,
        _: &Context,
    ) -> Result<Rendered, ToolError> {
        Ok(Rendered {
            output: Output::Yaml(Arc::unwrap_or_clone(output?)),
            by: RenderedBy {
                tool: "kustomize".into(),
                version: tool.version.clone(),
                command: tool.shown(&item.dir),
                release: None,
            },
            notices: Vec::new(),
            read_cluster: false,
        })
    }
}

/// One `kustomize build` of `at` (`extra`: flags after the tool's own), counted as a
/// run. A failure says paths as the tree names them: `copy/`, where this copy of the
/// tree lies, left out.
pub(super) fn run_build(
    r: &Shared,
    tool: &Kustomize,
    at: &Path,
    extra: &[&str],
    copy: &Path,
) -> cache::Entry {
    r.runs.fetch_add(1, Ordering::Relaxed);
    let mut args = tool.args(at);
    args.extend(extra.iter().map(OsString::from));
    let result = runner::run(&tool.program, &args, at, &r.opts.limits, &r.slots)
        .map(Arc::new)
        .map_err(|e| {
            let said = match e {
                runner::RunError::Failed(line) => format!("kustomize build failed: {line}"),
                other => format!("kustomize build: {other}"),
            };
            ToolError::from(said.replace(&format!("{}/", copy.display()), ""))
        });
    // A failure is the revision's error, said once, where errors are said.
    tracing::info!(ok = result.is_ok(), "rendered");
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_either_tool() {
        assert_eq!(semver_in("v5.7.1\n").as_deref(), Some("v5.7.1"));
        assert_eq!(
            semver_in("{Version:kustomize/v4.5.7 GitCommit:abc}").as_deref(),
            Some("v4.5.7")
        );
        assert_eq!(semver_in(" v5.5.0").as_deref(), Some("v5.5.0"));
        assert_eq!(
            semver_in("Kustomize Version: v5.0.4-0.20230601165947-6ce0bf390ce3").as_deref(),
            Some("v5.0.4-0.20230601165947-6ce0bf390ce3")
        );
        assert_eq!(semver_in("unknown"), None);
    }
}
