//! The Argo CD source tool: a directory of manifests read as Argo CD reads one, or a
//! Kustomize directory built with the Application's options (as the Flux Kustomization's
//! build does it: on a private copy, the options put into its kustomization).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Part, PartSource};
use crate::hydrate::flux;
use crate::hydrate::kustomize::{self, Kustomize};
use crate::hydrate::marks::AppMarks;
use crate::hydrate::stage::Shared;
use crate::hydrate::tool::{
    Context, Entry, FindError, Keyed, Output, Ran, Rendered, Tool, ToolError, found_once,
};
use crate::hydrate::walk::{Hidden, Links, Revisit, Walk, WalkError};
use crate::spec::{AppId, Location, RenderedBy};

/// The Argo CD directory and Kustomize sources: kustomize found once, when asked.
#[derive(Default)]
pub(crate) struct Directories {
    found: Mutex<Option<Kustomize>>,
}

/// Manifests Argo CD reads from a directory source (a Jsonnet file evaluated).
const MANIFESTS: [&str; 4] = [".yaml", ".yml", ".json", ".jsonnet"];
/// What a Jsonnet file of a directory source may import from the repository, at most.
const MAX_IMPORTABLE_BYTES: u64 = 64 << 20;

/// A part made ready: a directory is read as it runs (it is driftless's own reading, not
/// a tool's run, so nothing is kept); a Kustomize directory's build is Flux's, keyed by
/// what it reads.
pub(crate) enum PartRun {
    Directory {
        repo: PathBuf,
        path: String,
        recurse: bool,
        include: Option<String>,
        exclude: Option<String>,
    },
    Kustomize {
        tool: Kustomize,
        path: String,
        copy: flux::Copy,
    },
}

impl Tool for Directories {
    type Item = Part;
    /// kustomize, when a part needs it (a tree of directories only needs none).
    type Ready = Option<Kustomize>;
    type Prepared = PartRun;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("an Argo CD Application")
    }

    fn at(&self, item: &Part) -> Location {
        item.at.clone()
    }

    fn app(&self, item: &Part) -> Option<AppId> {
        Some(item.app.clone())
    }

    fn output_file(&self, item: &Part) -> String {
        item.output.clone()
    }

    fn marks(&self, item: &Part) -> Vec<AppMarks> {
        vec![item.marks.clone()]
    }

    fn ready(&self, r: &Shared, _: &Context) -> Result<Option<Kustomize>, FindError> {
        // Directories alone need no kustomize; the Kustomize parts say why it is missing.
        Ok(found_once(&self.found, || {
            kustomize::find(r.opts.kustomize.as_deref(), &r.opts.limits)
        })
        .ok())
    }

    fn prepare(
        &self,
        r: &Shared,
        tool: &Option<Kustomize>,
        part: &Part,
        cx: &Context,
    ) -> Result<Keyed<PartRun>, ToolError> {
        let disk = cx.disk("an Argo CD Application")?;
        match &part.source {
            PartSource::Directory {
                path,
                recurse,
                include,
                exclude,
            } => Ok(Keyed {
                inputs: PartRun::Directory {
                    repo: disk.repo.clone(),
                    path: path.clone(),
                    recurse: *recurse,
                    include: include.clone(),
                    exclude: exclude.clone(),
                },
                key: None,
            }),
            PartSource::Kustomize(k) => {
                let tool = match tool {
                    Some(t) => t.clone(),
                    None => kustomize::find(r.opts.kustomize.as_deref(), &r.opts.limits)
                        .map_err(|e| ToolError::from(e.to_string()))?,
                };
                let Keyed { inputs, key } = flux::prepare_build(&tool, &disk.repo, k)?;
                Ok(Keyed {
                    inputs: PartRun::Kustomize {
                        tool,
                        path: k.path.clone(),
                        copy: inputs,
                    },
                    key,
                })
            }
        }
    }

    fn run(&self, r: &Shared, _: &Option<Kustomize>, _: &Part, run: &PartRun, _: &Context) -> Ran {
        Ran::kept(match run {
            PartRun::Directory {
                repo,
                path,
                recurse,
                include,
                exclude,
            } => directory(r, repo, path, *recurse, include, exclude).map(Arc::new),
            PartRun::Kustomize { tool, copy, .. } => flux::build_copy(r, tool, copy),
        })
    }

    fn finish(
        &self,
        _: &Shared,
        _: &Option<Kustomize>,
        part: &Part,
        run: PartRun,
        output: Entry,
        _: &Context,
    ) -> Result<Rendered, ToolError> {
        let shown = |path: &str| if path.is_empty() { "." } else { path }.to_string();
        let by = match run {
            PartRun::Directory { path, .. } => RenderedBy {
                // Read as it is: driftless is the tool.
                tool: "driftless".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                command: format!("{}: directory {}", part.by, shown(&path)),
                release: None,
            },
            PartRun::Kustomize { tool, path, .. } => RenderedBy {
                tool: "kustomize".into(),
                command: format!("{}: {}", part.by, tool.shown(&shown(&path))),
                version: tool.version,
                release: None,
            },
        };
        Ok(Rendered {
            output: Output::Yaml(Arc::unwrap_or_clone(output?)),
            by,
            notices: Vec::new(),
            read_cluster: false,
        })
    }
}

/// The manifests of `path` (relative to `repo`) as one YAML stream, as Argo CD reads a
/// directory source: its YAML and JSON files (all below it with `recurse`), those
/// `include` matches and `exclude` does not (globs on the path within the directory,
/// `{a,b}` alternatives), a Jsonnet file's objects as Argo CD evaluates it (no
/// arguments: a function's own defaults). Hidden files and directories are skipped; a
/// link leading out of the repository is refused.
fn directory(
    r: &Shared,
    repo: &Path,
    path: &str,
    recurse: bool,
    include: &Option<String>,
    exclude: &Option<String>,
) -> Result<Vec<u8>, ToolError> {
    let said = |m: String| ToolError::from(m);
    let glob = |g: &Option<String>| -> Result<Option<globset::GlobMatcher>, ToolError> {
        g.as_deref()
            .filter(|g| !g.is_empty())
            .map(|g| {
                globset::GlobBuilder::new(g)
                    .literal_separator(false)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|e| said(format!("glob {g:?}: {e}")))
            })
            .transpose()
    };
    let (include, exclude) = (glob(include)?, glob(exclude)?);
    let dir = repo
        .join(path)
        .canonicalize()
        .map_err(|e| said(format!("path {path:?}: {e}")))?;
    if !dir.starts_with(repo) || !dir.is_dir() {
        return Err(said(format!(
            "path {path:?} is not a directory of the repository"
        )));
    }
    let walk = Walk {
        hidden: Hidden::Skip,
        // Argo CD refuses a link leading out of the repository.
        links: Links::Inside(repo),
        revisit: Revisit::Never,
        depth: if recurse { None } else { Some(1) },
    };
    let mut files = Vec::new();
    for e in walk.iter(&dir) {
        let (rel, p) = match e {
            Ok(e) if e.is_dir() => continue,
            Ok(e) => (e.rel.to_string_lossy().into_owned(), e.path),
            // A link to nothing is read, and says so, if it is a manifest.
            Err(WalkError::Missing { path: p, .. }) => (
                p.strip_prefix(&dir)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .into_owned(),
                p,
            ),
            Err(WalkError::LeadsOut { path: p }) => {
                let shown = p.strip_prefix(repo).unwrap_or(&p).display().to_string();
                return Err(said(format!("{shown} leads out of the repository")));
            }
            Err(WalkError::Read { source, .. }) => {
                return Err(said(format!("reading {path}: {source}")));
            }
        };
        if !MANIFESTS.iter().any(|ext| rel.ends_with(ext)) {
            continue;
        }
        if include.as_ref().is_some_and(|g| !g.is_match(&rel))
            || exclude.as_ref().is_some_and(|g| g.is_match(&rel))
        {
            continue;
        }
        files.push((rel, p));
    }
    files.sort();
    let mut out = Vec::new();
    let mut importable = None;
    for (rel, p) in files {
        if rel.ends_with(".jsonnet") {
            let entry = if path.is_empty() {
                rel.clone()
            } else {
                format!("{path}/{rel}")
            };
            let files = match &importable {
                Some(f) => std::sync::Arc::clone(f),
                None => {
                    let f = importable_files(repo)?;
                    importable = Some(std::sync::Arc::clone(&f));
                    f
                }
            };
            let evaluated = {
                let _slot = r.slots.take();
                crate::hydrate::jsonnet::eval::evaluate(
                    &entry,
                    &files,
                    &crate::spec::settings::JsonnetSettings::default(),
                    r.opts.limits.timeout,
                    r.opts.limits.max_output,
                )
            }
            .objects
            .map_err(|e| said(format!("{}:{}:{}: {}", e.file, e.line, e.column, e.message)))?;
            out.extend_from_slice(b"---\n");
            out.extend_from_slice(&crate::hydrate::stage::to_yaml(&evaluated));
            continue;
        }
        let bytes = std::fs::read(&p).map_err(|e| said(format!("reading {rel}: {e}")))?;
        if rel.ends_with(".json") {
            let v: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| said(format!("{path}/{rel}: not valid JSON: {e}")))?;
            // A JSON file that is not an object (a dashboard) is not a manifest.
            if !crate::hydrate::tree::is_manifest_json(&v) {
                continue;
            }
            out.extend_from_slice(b"---\n");
            out.extend_from_slice(&crate::hydrate::stage::to_yaml(&[v]));
        } else {
            out.extend_from_slice(b"---\n");
            out.extend_from_slice(&bytes);
            if !bytes.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
    }
    Ok(out)
}

/// The repository's files (no `.git`), by path from its root: what a Jsonnet file may
/// import.
fn importable_files(repo: &Path) -> Result<crate::hydrate::jsonnet::eval::Files, ToolError> {
    let files = crate::hydrate::tree::repository_files(
        repo,
        MAX_IMPORTABLE_BYTES,
        "its Jsonnet files are not evaluated",
    )
    .map_err(|e| ToolError::from(e.to_string()))?;
    Ok(std::sync::Arc::new(
        files
            .into_iter()
            .map(|f| {
                (
                    f.path.to_string_lossy().into_owned(),
                    std::sync::Arc::new(f.contents),
                )
            })
            .collect(),
    ))
}
