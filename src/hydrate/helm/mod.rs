//! Helm charts in the repository, rendered with an external `helm template` (3.8 or newer,
//! or 4) and the flags Argo CD uses: a `[helm.NAME]` spec names a chart directory, and a
//! chart directory no spec names is rendered once with its own values, release name =
//! its directory's name, as Argo CD does (a library chart never). The output is handed on
//! as manifests: namespaced objects without a namespace get the release's, the release's
//! policies become driftless's annotations on each object, and `helm.sh/resource-policy:
//! keep` is `driftless.dev/prune: disabled`.

mod prepare;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::marks::{AppMarks, Put, Words};
pub use super::stage::ClusterFacts;
use super::stage::Shared;
use super::tool::found_once;
use super::tool::{Context, Entry, FindError, Keep, Keyed, Output, Ran, Rendered, Tool, ToolError};
use super::{pull, runner};
use crate::spec::helm::HelmRelease;
use crate::spec::{AppId, Location, RenderedBy};
pub(crate) use prepare::Prepared;
pub use prepare::prepare;

/// A release of the chart in `dir` that nobody names, called `name` (its directory's).
pub(crate) fn unnamed_release(
    dir: &str,
    name: &str,
    namespace: &str,
    at: crate::spec::Location,
) -> HelmRelease {
    let name = name.to_string();
    HelmRelease {
        release_name: name.clone(),
        name,
        namespace: namespace.to_string(),
        at,
        chart: dir.to_string(),
        repository: None,
        version: None,
        plain_http: false,
        username_file: None,
        password_file: None,
        ca_file: None,
        insecure_skip_tls_verify: false,
        values_files: Vec::new(),
        values: serde_json::Value::Null,
        include_crds: true,
        skip_tests: true,
        kube_version: None,
        api_versions: Vec::new(),
        annotations: BTreeMap::new(),
        ignore: Vec::new(),
        post_render: Vec::new(),
    }
}

/// The helm program and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helm {
    pub program: PathBuf,
    pub version: String,
}

impl Helm {
    /// 3, 4...
    pub(crate) fn major(&self) -> u32 {
        self.version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(3)
    }
}

/// Finds helm: `named` (`--helm` / `DRIFTLESS_HELM`), else `helm` on `PATH`; 3.8 or newer.
pub fn find(named: Option<&Path>, limits: &super::runner::Limits) -> Result<Helm, FindError> {
    let program = match named {
        Some(p) if p.components().count() == 1 => super::runner::on_path(&p.to_string_lossy())
            .ok_or_else(|| FindError::NotOnPath(p.display().to_string()))?,
        Some(p) => p.to_path_buf(),
        None => super::runner::on_path("helm").ok_or(FindError::NotInstalled(
            "helm is not installed: `helm` is not on PATH (or name it with --helm)",
        ))?,
    };
    let args: Vec<OsString> = vec!["version".into(), "--template".into(), "{{.Version}}".into()];
    let out = super::runner::run(
        &program,
        &args,
        &std::env::temp_dir(),
        limits,
        &super::runner::Slots::new(1),
    )
    .map_err(|e| FindError::DoesNotRun {
        program: program.display().to_string(),
        message: e.to_string(),
    })?;
    let version = String::from_utf8_lossy(&out).trim().to_string();
    let nums: Vec<u32> = version
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .take(2)
        .filter_map(|p| p.parse().ok())
        .collect();
    match nums.as_slice() {
        [3, minor] if *minor >= 8 => {}
        [major, _] if *major >= 4 => {}
        _ => {
            return Err(FindError::TooOld {
                program: program.display().to_string(),
                tool: "helm",
                version,
                need: "helm 3.8 or newer",
            });
        }
    }
    Ok(Helm { program, version })
}

/// helm printed what is not YAML (the parser's first line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("helm printed what is not YAML: {0}")]
pub struct NotYaml(String);

/// helm's output as the release's manifests.
pub fn objects(output: &[u8]) -> Result<Vec<serde_json::Value>, NotYaml> {
    let text = String::from_utf8_lossy(output);
    let docs: Vec<serde_json::Value> = crate::spec::yaml::read_all(&text)
        .map_err(|e| NotYaml(first_line(&crate::spec::yaml::said(&e))))?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

/// What a release puts on its objects: its namespace where a namespaced object says none,
/// its policies, `keep` honoured.
pub(crate) fn marks(r: &HelmRelease) -> AppMarks {
    AppMarks {
        namespace: Some(r.namespace.clone()),
        ignore: r.ignore.clone(),
        annotations: r
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ..AppMarks::new(
            format!("release {}", r.name),
            Put::WhereMissing,
            Words::Helm,
        )
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// helm's error, in one line: `Error: template: podinfo/templates/x.yaml:4:10: ...` keeps
/// the chart's own file and line.
pub fn said(e: super::runner::RunError, repo: &Path) -> String {
    let said = match e {
        super::runner::RunError::Failed(line) => format!("helm template failed: {line}"),
        other => format!("helm template: {other}"),
    };
    said.replace(&format!("{}/", repo.display()), "")
}

/// Helm as the stage drives it: the program, found once per process (not finding it is
/// asked again next revision).
#[derive(Debug, Default)]
pub struct Releases {
    found: Mutex<Option<Helm>>,
    /// For post-renderers, found on the first release that has one.
    kustomize: Mutex<Option<super::kustomize::Kustomize>>,
}

/// A release, and the file its output is handed on as: `FILE#helm.NAME` for a spec's
/// release, the chart's `Chart.yaml` for a chart nobody names.
#[derive(Debug, Clone)]
pub struct ReleaseAt {
    pub release: HelmRelease,
    pub file: String,
    /// The app it is (a `[helm.NAME]` release, a Flux HelmRelease, an Argo CD
    /// Application's chart); none for a chart nobody names, the tree's own.
    pub app: Option<AppId>,
    /// What the app whose source it is puts on its objects over the release's own (an
    /// Argo CD Application's).
    pub app_marks: Option<AppMarks>,
}

/// A release made ready: its run, and the kustomize of its post-renderers (when it has
/// any).
pub struct ReleaseRun {
    prepared: Prepared,
    /// The repository, as helm's errors leave it out.
    repo: PathBuf,
    kustomize: Option<super::kustomize::Kustomize>,
}

impl Tool for Releases {
    type Item = ReleaseAt;
    type Ready = Helm;
    type Prepared = ReleaseRun;

    fn reads_disk(&self) -> Option<&'static str> {
        Some("a chart")
    }

    fn at(&self, item: &ReleaseAt) -> Location {
        item.release.at.clone()
    }

    fn app(&self, item: &ReleaseAt) -> Option<AppId> {
        item.app.clone()
    }

    fn output_file(&self, item: &ReleaseAt) -> String {
        item.file.clone()
    }

    fn marks(&self, item: &ReleaseAt) -> Vec<AppMarks> {
        let mut layers = vec![marks(&item.release)];
        layers.extend(item.app_marks.clone());
        layers
    }

    fn ready(&self, r: &Shared, _: &Context) -> Result<Helm, FindError> {
        found_once(&self.found, || find(r.opts.helm.as_deref(), &r.opts.limits))
    }

    fn prepare(
        &self,
        stage: &Shared,
        tool: &Helm,
        item: &ReleaseAt,
        cx: &Context,
    ) -> Result<Keyed<ReleaseRun>, ToolError> {
        let disk = cx.disk("a chart")?;
        let r = &item.release;
        let pulled = match pull::is_pulled(r) {
            true => {
                let cache = stage.opts.chart_cache.as_deref().ok_or_else(|| {
                    "pulled charts need a cache directory, and none is set".to_string()
                })?;
                let (dir, _) = pull::chart(
                    &tool.program,
                    r,
                    cache,
                    stage.opts.credentials_dir.as_deref(),
                    &stage.opts.limits,
                    &stage.slots,
                )
                .map_err(|e| e.to_string())?;
                Some((dir, cache.to_path_buf()))
            }
            false => None,
        };
        let prepared = prepare(
            tool,
            r,
            pulled.as_ref().map(|(d, c)| (d.as_path(), c.as_path())),
            disk,
            &cx.input.cluster,
        )
        .map_err(|e| e.to_string())?;
        let (kustomize, key) = match r.post_render.is_empty() {
            true => (None, prepared.key),
            false => {
                let kustomize = found_once(&self.kustomize, || {
                    super::kustomize::find(stage.opts.kustomize.as_deref(), &stage.opts.limits)
                })
                .map_err(|e| ToolError {
                    read_cluster: prepared.reads_cluster,
                    ..ToolError::from(e.to_string())
                })?;
                let key = super::post_render::key(&prepared.key, &kustomize, r);
                (Some(kustomize), key)
            }
        };
        Ok(Keyed {
            inputs: ReleaseRun {
                prepared,
                repo: disk.repo.clone(),
                kustomize,
            },
            key: Some(key),
        })
    }

    fn run(
        &self,
        stage: &Shared,
        tool: &Helm,
        item: &ReleaseAt,
        run: &ReleaseRun,
        _: &Context,
    ) -> Ran {
        let r = &item.release;
        let prepared = &run.prepared;
        let span = tracing::info_span!("render", tool = "helm", release = %r.release_name);
        let _enter = span.enter();
        stage.runs.fetch_add(1, Ordering::Relaxed);
        let mut chart = prepared.chart.clone();
        let mut _copy = None;
        if !prepared.needs.missing.is_empty() {
            match super::dependencies::build(
                &tool.program,
                &prepared.chart,
                &prepared.bound,
                &prepared.needs,
                &r.chart,
                &stage.opts.limits,
                &stage.slots,
            ) {
                Ok((tmp, built)) => {
                    chart = built;
                    _copy = Some(tmp);
                }
                // Not kept: its repository may be back by the next revision.
                Err(e) => {
                    return Ran {
                        output: Err(ToolError::from(e.to_string())),
                        keep: Keep::Not,
                    };
                }
            }
        }
        let result = runner::run(
            &tool.program,
            &prepared.args(&chart),
            &chart,
            &stage.opts.limits,
            &stage.slots,
        )
        .map(Arc::new)
        .map_err(|e| {
            let line = said(e, &run.repo);
            let line = match &_copy {
                Some(t) => line.replace(&format!("{}/", t.path().join("tree").display()), ""),
                None => line,
            };
            ToolError::from(line)
        });
        tracing::info!(ok = result.is_ok(), "rendered");
        let result = match (&run.kustomize, result) {
            (Some(kustomize), Ok(output)) => {
                super::post_render::post_render(stage, kustomize, r, output)
            }
            (_, result) => result,
        };
        Ran::kept(result)
    }

    fn finish(
        &self,
        _: &Shared,
        tool: &Helm,
        item: &ReleaseAt,
        run: ReleaseRun,
        output: Entry,
        _: &Context,
    ) -> Result<Rendered, ToolError> {
        let rel = &item.release;
        let prepared = run.prepared;
        // A render that read the cluster and failed (helm 4's server dry run of a custom
        // resource whose CRD is not there yet) may pass once the cluster changes: it says so.
        let rendered = output.map_err(|e| ToolError {
            read_cluster: prepared.reads_cluster,
            ..e
        })?;
        let objects = objects(&rendered).map_err(|e| ToolError {
            read_cluster: prepared.reads_cluster,
            ..ToolError::from(e.to_string())
        })?;
        let meta = prepared.meta;
        Ok(Rendered {
            output: Output::Objects(objects),
            by: RenderedBy {
                tool: "helm".into(),
                version: tool.version.clone(),
                command: prepared.shown,
                release: Some(crate::spec::Release {
                    name: rel.name.clone(),
                    release_name: rel.release_name.clone(),
                    namespace: rel.namespace.clone(),
                    chart: rel.chart.clone(),
                    version: meta.version,
                    app_version: meta.app_version,
                    file: rel.at.file.clone(),
                    line: rel.at.line,
                }),
            },
            notices: prepared.notices,
            read_cluster: prepared.reads_cluster,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Checkout;

    #[test]
    fn objects_land_in_the_release_namespace_with_its_policies() {
        let r = HelmRelease {
            annotations: [(crate::spec::order::WAVE.to_string(), "2".to_string())].into(),
            ..unnamed_release(
                "charts/web",
                "web",
                "shop",
                crate::spec::Location::default(),
            )
        };
        let mut out = objects(
            b"---\n# Source: web/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    helm.sh/resource-policy: keep\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: other\n"
        )
        .unwrap();
        AppMarks::put_all(&[marks(&r)], &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0]["metadata"]["namespace"], "shop");
        assert_eq!(
            out[0]["metadata"]["annotations"]["driftless.dev/prune"],
            "disabled"
        );
        assert_eq!(out[0]["metadata"]["annotations"]["driftless.dev/wave"], "2");
        assert!(out[1]["metadata"].get("namespace").is_none());
        assert_eq!(out[2]["metadata"]["namespace"], "other");
        assert_eq!(r.release_name, "web");
    }

    #[test]
    fn a_release_reads_the_cluster_only_when_its_chart_calls_lookup_and_a_cluster_is_at_hand() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let chart = |name: &str, template: &str| {
            let c = root.join(name);
            std::fs::create_dir_all(c.join("templates")).unwrap();
            std::fs::write(
                c.join("Chart.yaml"),
                format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
            )
            .unwrap();
            std::fs::write(c.join("templates/all.yaml"), template).unwrap();
        };
        chart(
            "finds",
            "{{- $s := lookup \"v1\" \"Secret\" \"n\" \"s\" }}\nkind: ConfigMap\n",
        );
        chart("plain", "kind: ConfigMap\n");
        let disk = Checkout {
            root: root.clone(),
            repo: root.clone(),
            urls: Vec::new(),
            revisions: Vec::new(),
        };
        let helm = Helm {
            program: "/usr/bin/helm".into(),
            version: "v3.17.0".into(),
        };
        let live = ClusterFacts {
            lookup: Some(super::super::stage::LookupAccess {
                kubeconfig: root.join("kubeconfig"),
                reading: 1,
            }),
            ..ClusterFacts::default()
        };
        let reads = |name: &str, facts: &ClusterFacts| {
            let r = unnamed_release(name, name, "n", Location::default());
            prepare(&helm, &r, None, &disk, facts)
                .unwrap()
                .reads_cluster
        };
        assert!(reads("finds", &live));
        assert!(!reads("plain", &live));
        // Offline its lookups return nothing: nothing was read.
        assert!(!reads("finds", &ClusterFacts::default()));
    }
}
