//! A chart's dependencies (`Chart.yaml`'s `dependencies`): vendored in `charts/` or given
//! as `file://` they are used as they are (and a `file://` one's files are part of the
//! render's key); any other is fetched by `helm dependency build`, on a private copy of the
//! chart, never in the checkout or the chart cache.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::runner::{self, Session};
use super::tree::{self, Dependency};
use super::walk::{Hidden, Links, Revisit, Walk, WalkError};

/// What a chart needs besides its own directory.
#[derive(Debug, Default)]
pub struct Needs {
    /// `file://` dependencies: their directories (canonical, inside the bound).
    pub local: Vec<PathBuf>,
    /// Dependencies neither vendored nor local: `helm dependency build` fetches them.
    pub missing: Vec<Dependency>,
}

/// Why a chart's dependencies could not be used or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DependencyError {
    #[error("dependency {name}: {repository} is not in the tree")]
    NotInTree { name: String, repository: String },
    #[error("dependency {name}: {repository} leads out of the repository; refused")]
    LeadsOut { name: String, repository: String },
    /// A step of the build on disk: what was being done, and the system's words.
    #[error("{doing}: {message}")]
    Disk { doing: String, message: String },
    #[error("chart {chart}: dependency {names} cannot be fetched: {said}")]
    Fetch {
        chart: String,
        names: String,
        said: String,
    },
}

/// The dependencies `meta` (the `Chart.yaml` of `chart`) names, none of which may lead
/// out of `bound`.
pub fn of(meta: &tree::ChartMeta, chart: &Path, bound: &Path) -> Result<Needs, DependencyError> {
    let mut needs = Needs::default();
    for d in &meta.dependencies {
        let repo = d.repository.as_deref().unwrap_or_default();
        if let Some(rel) = repo.strip_prefix("file://") {
            let dir = chart
                .join(rel)
                .canonicalize()
                .map_err(|_| DependencyError::NotInTree {
                    name: d.name.clone(),
                    repository: repo.to_string(),
                })?;
            if !dir.starts_with(bound) {
                return Err(DependencyError::LeadsOut {
                    name: d.name.clone(),
                    repository: repo.to_string(),
                });
            }
            needs.local.push(dir);
        } else if !repo.is_empty() && !vendored(chart, &d.name) {
            needs.missing.push(d.clone());
        }
    }
    Ok(needs)
}

/// Whether `charts/` holds dependency `name`, as a directory or an archive.
fn vendored(chart: &Path, name: &str) -> bool {
    let charts = chart.join("charts");
    charts.join(name).join(tree::CHART_FILE).is_file()
        || std::fs::read_dir(&charts).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let file = e.file_name().to_string_lossy().into_owned();
                file.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|rest| rest.ends_with(".tgz"))
            })
        })
}

/// A private copy of `chart` (and of its `file://` dependencies, at the same places
/// relative to `bound`, so relative paths and `Chart.lock` still hold) with its missing
/// dependencies built in: the directory holding the copy, and the copy's chart.
pub fn build(
    helm: &Path,
    chart: &Path,
    bound: &Path,
    needs: &Needs,
    shown: &str,
    limits: &runner::Limits,
    slots: &runner::Slots,
) -> Result<(tempfile::TempDir, PathBuf), DependencyError> {
    let disk = |doing: String| {
        move |e: std::io::Error| DependencyError::Disk {
            doing,
            message: e.to_string(),
        }
    };
    let tmp = tempfile::Builder::new()
        .prefix("driftless-chart-")
        .tempdir()
        .map_err(disk(format!(
            "a directory to build chart {shown}'s dependencies in"
        )))?;
    let mirror = |p: &Path| {
        tmp.path()
            .join("tree")
            .join(p.strip_prefix(bound).unwrap_or(p))
    };
    for dir in std::iter::once(chart).chain(needs.local.iter().map(PathBuf::as_path)) {
        copy_dir(dir, &mirror(dir), bound).map_err(disk(format!(
            "copying chart {shown} to build its dependencies"
        )))?;
    }
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).map_err(disk("a home for helm".to_string()))?;
    let copy = mirror(chart);
    let args: Vec<OsString> = vec!["dependency".into(), "build".into(), copy.clone().into()];
    runner::run_in(
        helm,
        &args,
        &copy,
        limits,
        slots,
        Session {
            home: Some(&home),
            stdin: None,
            ..Session::default()
        },
    )
    .map_err(|e| {
        let said = match e {
            runner::RunError::Failed(line) if line.contains("no cached repository") => {
                "its repository cannot be reached".to_string()
            }
            runner::RunError::Failed(line) => line,
            other => other.to_string(),
        };
        let names: Vec<String> = needs
            .missing
            .iter()
            .map(|d| {
                format!(
                    "{} {} from {}",
                    d.name,
                    d.version.as_deref().unwrap_or("(any version)"),
                    d.repository.as_deref().unwrap_or_default()
                )
            })
            .collect();
        DependencyError::Fetch {
            chart: shown.to_string(),
            names: names.join(", "),
            said: said.replace(&format!("{}/", tmp.path().display()), ""),
        }
    })?;
    Ok((tmp, copy))
}

/// Copies the regular files and directories of `from` into `to`; a link is followed only
/// while it stays inside `bound`.
fn copy_dir(from: &Path, to: &Path, bound: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let walk = Walk {
        hidden: Hidden::Keep,
        links: Links::Inside(bound),
        revisit: Revisit::ByEveryPath,
        depth: None,
    };
    for e in walk.iter(from) {
        let e = match e {
            Ok(e) => e,
            Err(WalkError::LeadsOut { path }) => {
                return Err(std::io::Error::other(format!(
                    "{} leads out of the repository",
                    path.display()
                )));
            }
            Err(WalkError::Read { source, .. } | WalkError::Missing { source, .. }) => {
                return Err(source);
            }
        };
        let target = to.join(&e.rel);
        if e.is_dir() {
            std::fs::create_dir_all(&target)?;
        } else if e.is_file() {
            std::fs::copy(&e.real, &target)?;
        }
    }
    Ok(())
}
