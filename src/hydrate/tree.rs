//! What a tree's files are to the rendering stage: kustomization directories and chart
//! directories (each read whole by its tool, nothing under it on its own), Jsonnet files
//! (evaluated) and libraries (imports only), JSON files (manifests when they hold one),
//! and what nothing reads.

use std::collections::BTreeMap;

/// The names kustomize looks for in a directory, in its order.
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// A Helm chart's own file.
pub const CHART_FILE: &str = "Chart.yaml";

/// Whether `bytes` hold `needle` anywhere: the cheap look into a file (or a plugin's
/// definition) before it is parsed, or whether it is parsed at all.
pub fn mentions(bytes: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && bytes.windows(needle.len()).any(|w| w == needle)
}

/// The directory of `path` ("" at the root).
pub(crate) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

pub(crate) fn base_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether `path` lies in directory `dir` ("" is the root: everything does).
pub(crate) fn is_under(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || (path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/')
}

/// A directory a tool renders whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RenderedDir {
    /// A kustomization: its directory and its file (`dir/kustomization.yaml`).
    Kustomize { dir: String, file: String },
    /// A chart: its directory and its `Chart.yaml`.
    Chart { dir: String, file: String },
}

impl RenderedDir {
    pub fn dir(&self) -> &str {
        match self {
            RenderedDir::Kustomize { dir, .. } | RenderedDir::Chart { dir, .. } => dir,
        }
    }
}

/// The outermost rendered directories among `paths`: one inside another is the outer
/// one's to read (a base under an overlay, a subchart in `charts/`). Two kustomization
/// files in one directory are an error, as kustomize says.
pub(crate) fn rendered_dirs<'a>(
    paths: impl IntoIterator<Item = &'a str>,
) -> (Vec<RenderedDir>, Vec<(String, String)>) {
    let mut found: BTreeMap<String, Vec<RenderedDir>> = BTreeMap::new();
    for p in paths {
        let (dir, base) = (dir_of(p), base_of(p));
        let r = if KUSTOMIZATION_FILES.contains(&base) {
            RenderedDir::Kustomize {
                dir: dir.to_string(),
                file: p.to_string(),
            }
        } else if base == CHART_FILE {
            RenderedDir::Chart {
                dir: dir.to_string(),
                file: p.to_string(),
            }
        } else {
            continue;
        };
        found.entry(dir.to_string()).or_default().push(r);
    }
    let mut errors = Vec::new();
    let mut out: Vec<RenderedDir> = Vec::new();
    // BTreeMap order puts a directory before what lies in it.
    for (dir, mut rs) in found {
        if out
            .iter()
            .any(|o| is_under(&dir, o.dir()) || o.dir() == dir)
        {
            continue;
        }
        let kustomizations: Vec<&RenderedDir> = rs
            .iter()
            .filter(|r| matches!(r, RenderedDir::Kustomize { .. }))
            .collect();
        if kustomizations.len() > 1 {
            let names: Vec<&str> = kustomizations
                .iter()
                .map(|r| match r {
                    RenderedDir::Kustomize { file, .. } => base_of(file),
                    RenderedDir::Chart { .. } => "",
                })
                .collect();
            if let Some(RenderedDir::Kustomize { file, .. }) = kustomizations.get(1) {
                errors.push((
                    file.clone(),
                    format!(
                        "more than one kustomization file in one directory ({}); kustomize reads one: keep one",
                        names.join(", ")
                    ),
                ));
            }
        }
        // A chart directory that also holds a kustomization is a chart.
        rs.sort_by_key(|r| matches!(r, RenderedDir::Kustomize { .. }));
        if let Some(first) = rs.into_iter().next() {
            out.push(first);
        }
    }
    (out, errors)
}

/// Whether a JSON document is a Kubernetes object (or a list of them): an object with
/// `apiVersion` and `kind`. Anything else (a dashboard, a `package.json`) is not read.
pub(crate) fn is_manifest_json(v: &serde_json::Value) -> bool {
    v.get("apiVersion")
        .is_some_and(serde_json::Value::is_string)
        && v.get("kind").is_some_and(serde_json::Value::is_string)
}

/// What a chart's `Chart.yaml` says of it: a release's figures and its dependencies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChartMeta {
    pub name: String,
    pub version: String,
    pub app_version: Option<String>,
    pub chart_type: Option<String>,
    pub dependencies: Vec<Dependency>,
}

/// One of `Chart.yaml`'s `dependencies`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dependency {
    pub name: String,
    pub version: Option<String>,
    pub repository: Option<String>,
}

impl ChartMeta {
    pub fn parse(bytes: &[u8]) -> Option<ChartMeta> {
        let v: serde_json::Value =
            crate::spec::yaml::read_one(std::str::from_utf8(bytes).ok()?).ok()?;
        // Charts write versions as numbers too (appVersion: 1.16): read as written.
        let text = |v: Option<&serde_json::Value>| match v? {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let dependencies = v
            .get("dependencies")
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
            .map(|d| Dependency {
                name: text(d.get("name")).unwrap_or_default(),
                version: text(d.get("version")),
                repository: text(d.get("repository")),
            })
            .collect();
        Some(ChartMeta {
            name: text(v.get("name")).unwrap_or_default(),
            version: text(v.get("version"))?,
            app_version: text(v.get("appVersion")),
            chart_type: text(v.get("type")),
            dependencies,
        })
    }
}

/// The `Chart.yaml` of the chart directory `dir` on disk.
pub(crate) fn chart_meta(dir: &std::path::Path) -> Option<ChartMeta> {
    ChartMeta::parse(&std::fs::read(dir.join(CHART_FILE)).ok()?)
}

/// One file of a repository as a tool that reads it whole is given it.
pub(crate) struct RepositoryFile {
    /// Relative to the repository.
    pub path: std::path::PathBuf,
    pub executable: bool,
    pub contents: Vec<u8>,
}

/// Why a repository's files could not be given to a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RepositoryFilesError {
    #[error("reading {what}: {why}")]
    Read { what: String, why: String },
    /// `then`: what is not done for it ("a plugin is not given a copy of it").
    #[error("the repository is larger than {mib} MiB; {then}")]
    TooLarge { mib: u64, then: String },
}

/// Every regular file of the repository `repo` (canonical), `.git` left out, a link
/// followed only while it stays inside; in path order. More than `max_bytes` in all is
/// an error, in words for `what` ("a plugin is not given a copy of it").
pub(crate) fn repository_files(
    repo: &std::path::Path,
    max_bytes: u64,
    what: &str,
) -> Result<Vec<RepositoryFile>, RepositoryFilesError> {
    use std::os::unix::fs::PermissionsExt;
    let walk = crate::hydrate::walk::Walk {
        hidden: crate::hydrate::walk::Hidden::ExceptGit,
        // A link leading out of the repository: not given.
        links: crate::hydrate::walk::Links::SkipOutside(repo),
        revisit: crate::hydrate::walk::Revisit::ByEveryPath,
        depth: None,
    };
    let mut files = Vec::new();
    let mut bytes = 0u64;
    for e in walk.iter(repo) {
        let e = match e {
            Ok(e) => e,
            Err(crate::hydrate::walk::WalkError::Read { source, .. }) => {
                return Err(RepositoryFilesError::Read {
                    what: "the repository".into(),
                    why: source.to_string(),
                });
            }
            // A dangling link: not given.
            Err(_) => continue,
        };
        if !e.is_file() {
            continue;
        }
        bytes += e.meta.len();
        if bytes > max_bytes {
            return Err(RepositoryFilesError::TooLarge {
                mib: max_bytes >> 20,
                then: what.to_string(),
            });
        }
        let contents = std::fs::read(&e.real).map_err(|err| RepositoryFilesError::Read {
            what: e.path.display().to_string(),
            why: err.to_string(),
        })?;
        files.push(RepositoryFile {
            path: e.rel,
            executable: e.meta.permissions().mode() & 0o111 != 0,
            contents,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn is_template(path: &str) -> bool {
    path.split('/').any(|c| c == "templates")
}

/// Whether a chart's file at `path` (within the chart) is a template that calls helm's
/// `lookup` (`lookup "v1" "Secret" ...`, `(lookup ...)`, `lookup $x`).
pub(crate) fn template_calls_lookup(path: &str, text: &[u8]) -> bool {
    is_template(path) && calls_lookup(text)
}

fn calls_lookup(text: &[u8]) -> bool {
    static CALL: std::sync::LazyLock<Option<regex::bytes::Regex>> =
        std::sync::LazyLock::new(|| regex::bytes::Regex::new(r#"\blookup\s+["($]"#).ok());
    CALL.as_ref().is_some_and(|re| re.is_match(text))
}

/// Whether a packaged subchart (`charts/NAME.tgz`) has a template that calls `lookup`.
pub(crate) fn archive_calls_lookup(bytes: &[u8]) -> bool {
    use std::io::Read as _;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let Ok(entries) = archive.entries() else {
        return false;
    };
    for entry in entries.flatten() {
        let path = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.ends_with(".tgz") || !is_template(&path) {
            continue;
        }
        let mut text = Vec::new();
        // A template past 4 MiB is not a chart's; what was read is judged.
        let _ = entry.take(4 << 20).read_to_end(&mut text);
        if calls_lookup(&text) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outermost_directory_reads_what_lies_in_it() {
        let (dirs, errors) = rendered_dirs([
            "apps/a/kustomization.yaml",
            "apps/a/base/kustomization.yaml",
            "apps/b/Kustomization",
            "charts/c/Chart.yaml",
            "charts/c/charts/d/Chart.yaml",
            "x.yaml",
        ]);
        assert!(errors.is_empty());
        let shown: Vec<&str> = dirs.iter().map(RenderedDir::dir).collect();
        assert_eq!(shown, ["apps/a", "apps/b", "charts/c"]);
        assert!(is_under("apps/a/x.yaml", "apps/a"));
        assert!(!is_under("apps/ab/x.yaml", "apps/a"));
        assert!(is_under("x.yaml", ""));
    }

    #[test]
    fn two_kustomization_files_in_one_directory_are_an_error() {
        let (_, errors) = rendered_dirs(["k/kustomization.yaml", "k/kustomization.yml"]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, "k/kustomization.yml");
    }
}
