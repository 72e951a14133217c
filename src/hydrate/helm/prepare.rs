//! A release made ready to run: its paths checked against the repository, its chart read
//! into the render's key, and the flags of its `helm template` with the command shown.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::Helm;
use crate::hydrate::cache::{Key, KeyBuilder};
use crate::hydrate::stage::ClusterFacts;
use crate::hydrate::walk::{Hidden, Links, Revisit, Walk, WalkError};
use crate::source::Checkout;
use crate::spec::helm::HelmRelease;

/// A release made ready to run: its arguments (absolute paths), the command as status
/// shows it, and the key of its render.
pub struct Prepared {
    /// What follows `helm template NAME CHART`.
    flags: Vec<OsString>,
    release: String,
    pub shown: String,
    pub key: Key,
    /// Its `Chart.yaml`: the release's figures.
    pub meta: crate::hydrate::tree::ChartMeta,
    /// What the chart needs fetched before it renders, and where it is.
    pub needs: crate::hydrate::dependencies::Needs,
    pub chart: PathBuf,
    pub bound: PathBuf,
    /// What to say of the render (a chart's lookups that read nothing).
    pub notices: Vec<String>,
    /// It renders with a server dry run whose lookups read the live cluster.
    pub reads_cluster: bool,
    /// The inline values, in a file of their own (never on the command line); kept until
    /// the run is done.
    _values: Option<tempfile::NamedTempFile>,
}

impl Prepared {
    /// The command line that renders `chart`: the release's own, or a copy of it with
    /// its dependencies built.
    pub fn args(&self, chart: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec!["template".into(), self.release.clone().into(), chart.into()];
        args.extend(self.flags.iter().cloned());
        args
    }
}

/// Why a release could not be made ready to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    #[error("{what} {path:?} is not in the tree")]
    NotInTree { what: &'static str, path: String },
    #[error("{what} {path:?} leads out of the repository; refused")]
    LeadsOut { what: &'static str, path: String },
    #[error("{0:?} is not a chart: it has no Chart.yaml")]
    NotAChart(String),
    #[error("the chart holds a symlink that leads out of the repository; refused")]
    ChartLeadsOut,
    #[error("the chart holds more than 20000 files; not rendered")]
    TooManyFiles,
    #[error("{path}: {message}")]
    Read { path: String, message: String },
    #[error("values file {path:?}: {message}")]
    Values { path: String, message: String },
    #[error("writing the inline values: {0}")]
    InlineValues(String),
    #[error(transparent)]
    Dependencies(#[from] crate::hydrate::dependencies::DependencyError),
}

/// Checks a release's paths against the repository and builds its run.
pub fn prepare(
    helm: &Helm,
    r: &HelmRelease,
    pulled: Option<(&Path, &Path)>,
    disk: &Checkout,
    facts: &ClusterFacts,
) -> Result<Prepared, PrepareError> {
    // A pulled chart (its directory in the cache, and the cache), or one in the tree.
    let (chart, bound) = match pulled {
        Some((chart, cache)) => (chart.to_path_buf(), cache.to_path_buf()),
        None => (inside(disk, &r.chart, "chart")?, disk.repo.clone()),
    };
    if !chart.join("Chart.yaml").is_file() {
        return Err(PrepareError::NotAChart(r.chart.clone()));
    }
    let mut key = KeyBuilder::new("helm");
    key.part(helm.program.as_os_str().as_encoded_bytes())
        .part(helm.version.as_bytes());
    let mut lookup = digest_tree(&bound, &chart, &mut key)?;
    let meta = crate::hydrate::tree::chart_meta(&chart).unwrap_or_default();
    let needs = crate::hydrate::dependencies::of(&meta, &chart, &bound)?;
    for dir in &needs.local {
        lookup |= digest_tree(&bound, dir, &mut key)?;
    }
    let mut flags = Flags::new(r);
    flags.options(r, facts);
    let reads_cluster = lookup && facts.lookup.is_some();
    let notices = match lookup {
        true => flags.lookup(helm, r, facts, &mut key),
        false => Vec::new(),
    };
    flags.values_files(r, disk, &mut key)?;
    let values = flags.inline_values(r, &mut key)?;
    let head: [OsString; 2] = ["template".into(), r.release_name.clone().into()];
    for a in head.iter().chain(&flags.args) {
        // Paths are in the digest by content; the rest by what they say.
        if !Path::new(a).is_absolute() {
            key.part(a.as_encoded_bytes());
        }
    }
    Ok(Prepared {
        flags: flags.args,
        release: r.release_name.clone(),
        shown: flags.shown.join(" "),
        key: key.finish(),
        meta,
        needs,
        chart,
        bound,
        notices,
        reads_cluster,
        _values: values,
    })
}

/// `rel` within the repository, its symlinks followed: refused when it is not there or
/// leads out.
fn inside(disk: &Checkout, rel: &str, what: &'static str) -> Result<PathBuf, PrepareError> {
    let p = disk.root.join(rel);
    let real = p.canonicalize().map_err(|_| PrepareError::NotInTree {
        what,
        path: rel.to_string(),
    })?;
    if !real.starts_with(&disk.repo) {
        return Err(PrepareError::LeadsOut {
            what,
            path: rel.to_string(),
        });
    }
    Ok(real)
}

/// The flags of a release's `helm template` as it is run, and the command as status
/// shows it.
struct Flags {
    args: Vec<OsString>,
    shown: Vec<String>,
}

impl Flags {
    /// The release's namespace, and what the command shown names: the chart, and the
    /// repository and version it is pulled at.
    fn new(r: &HelmRelease) -> Flags {
        let args: Vec<OsString> = vec!["--namespace".into(), r.namespace.clone().into()];
        let mut shown = vec![
            "helm template".to_string(),
            r.release_name.clone(),
            match r.chart.as_str() {
                "" => ".".to_string(),
                chart => chart.to_string(),
            },
            format!("--namespace {}", r.namespace),
        ];
        match (&r.repository, &r.version) {
            (Some(repo), Some(version)) => shown.push(format!("--repo {repo} --version {version}")),
            (None, Some(version)) if r.chart.starts_with("oci://") => {
                shown.push(format!("--version {version}"))
            }
            _ => {}
        }
        Flags { args, shown }
    }

    /// The release's render options, and the cluster's version and APIs.
    fn options(&mut self, r: &HelmRelease, facts: &ClusterFacts) {
        if r.include_crds {
            self.args.push("--include-crds".into());
            self.shown.push("--include-crds".into());
        }
        if r.skip_tests {
            self.args.push("--skip-tests".into());
            self.shown.push("--skip-tests".into());
        }
        if let Some(v) = r.kube_version.as_ref().or(facts.kube_version.as_ref()) {
            self.args.extend(["--kube-version".into(), v.into()]);
            self.shown.push(format!("--kube-version {v}"));
        }
        let mut api_versions: Vec<&String> =
            facts.api_versions.iter().chain(&r.api_versions).collect();
        api_versions.sort();
        api_versions.dedup();
        for v in &api_versions {
            self.args
                .extend(["--api-versions".into(), v.as_str().into()]);
        }
        if !api_versions.is_empty() {
            self.shown
                .push(format!("--api-versions ({})", api_versions.len()));
        }
    }

    /// For a chart that calls `lookup`: what to say of its render.
    fn lookup(
        &mut self,
        helm: &Helm,
        r: &HelmRelease,
        facts: &ClusterFacts,
        key: &mut KeyBuilder,
    ) -> Vec<String> {
        // `lookup` reads the live cluster, as `helm install` and Flux's helm-controller let
        // it, through driftless's read-only listener; a render that read the cluster is kept
        // for that reading of it only.
        let mut notices = Vec::new();
        match &facts.lookup {
            Some(access) => {
                self.args.extend([
                    "--dry-run=server".into(),
                    "--kubeconfig".into(),
                    access.kubeconfig.clone().into(),
                ]);
                if helm.major() >= 4 {
                    // Helm 4 checks that what exists is the release's; what driftless
                    // applies is driftless's to own.
                    self.args.push("--take-ownership".into());
                }
                key.part(b"lookup").part(&access.reading.to_le_bytes());
                self.shown
                    .push("--dry-run=server (its lookups read the cluster)".into());
            }
            None => notices.push(format!(
                "chart {} calls lookup: with no cluster at hand its lookups return nothing (as helm template's do), so what it would keep from the cluster is made anew",
                match r.chart.as_str() {
                    "" => ".",
                    chart => chart,
                }
            )),
        }
        notices
    }

    /// The release's values files, read into the key.
    fn values_files(
        &mut self,
        r: &HelmRelease,
        disk: &Checkout,
        key: &mut KeyBuilder,
    ) -> Result<(), PrepareError> {
        for f in &r.values_files {
            let p = inside(disk, f, "values file")?;
            let text = std::fs::read(&p).map_err(|e| PrepareError::Values {
                path: f.clone(),
                message: e.to_string(),
            })?;
            key.part(f.as_bytes()).part(&text);
            self.args.extend(["--values".into(), p.into()]);
            self.shown.push(format!("--values {f}"));
        }
        Ok(())
    }

    /// The spec's inline values, in the file that holds them for the run.
    fn inline_values(
        &mut self,
        r: &HelmRelease,
        key: &mut KeyBuilder,
    ) -> Result<Option<tempfile::NamedTempFile>, PrepareError> {
        let serde_json::Value::Object(m) = &r.values else {
            return Ok(None);
        };
        if m.is_empty() {
            return Ok(None);
        }
        let text = serde_json::to_vec(&r.values).unwrap_or_default();
        key.part(b"inline").part(&text);
        let mut file = tempfile::Builder::new()
            .prefix("driftless-values-")
            .suffix(".json")
            .tempfile()
            .map_err(|e| PrepareError::InlineValues(e.to_string()))?;
        file.write_all(&text)
            .map_err(|e| PrepareError::InlineValues(e.to_string()))?;
        self.args.extend(["--values".into(), file.path().into()]);
        self.shown.push("--values (the spec's values)".into());
        Ok(Some(file))
    }
}

/// Every file of a chart, by path and contents, into `key` (a chart's templates, values,
/// vendored subcharts, all are read by helm); whether a template calls `lookup`.
fn digest_tree(repo: &Path, dir: &Path, key: &mut KeyBuilder) -> Result<bool, PrepareError> {
    let read = |p: &Path, e: std::io::Error| PrepareError::Read {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    let walk = Walk {
        hidden: Hidden::Keep,
        // A link leading out of the repository, to a directory or a file, is refused.
        links: Links::Inside(repo),
        // Every path, as helm reads them: a `templates` that links to another directory
        // holds templates.
        revisit: Revisit::ByEveryPath,
        depth: None,
    };
    let mut files = Vec::new();
    for e in walk.iter(dir) {
        match e {
            Ok(e) if e.is_file() => files.push((e.rel, e.path)),
            Ok(_) | Err(WalkError::Missing { .. }) => continue,
            Err(WalkError::LeadsOut { .. }) => return Err(PrepareError::ChartLeadsOut),
            Err(WalkError::Read { dir, source }) => return Err(read(&dir, source)),
        }
        if files.len() > 20_000 {
            return Err(PrepareError::TooManyFiles);
        }
    }
    files.sort();
    let mut lookup = false;
    for (rel, f) in files {
        let text = std::fs::read(&f).map_err(|e| read(&f, e))?;
        let rel = rel.as_path();
        lookup = lookup
            || match rel.extension().and_then(|x| x.to_str()) {
                Some("tgz") => crate::hydrate::tree::archive_calls_lookup(&text),
                _ => crate::hydrate::tree::template_calls_lookup(&rel.to_string_lossy(), &text),
            };
        key.part(rel.as_os_str().as_encoded_bytes()).part(&text);
    }
    Ok(lookup)
}
