//! Flux's HelmRelease as a chart release of the `helm` kind: its chart from its source,
//! its name, namespace and values as Flux has them.

mod marks;

use std::collections::BTreeMap;

use serde_json::Value;

use super::data::{TreeData, values_from};
use super::model::*;
use super::order::{Node, depends_on, waves_of};
use crate::hydrate::app_yaml::unknown;
use crate::hydrate::held::AppError;
use crate::hydrate::not_carried_out::{NotCarriedOut, Refusal};
use crate::hydrate::shape;
use crate::spec::{AppId, Location, SpecError};
use marks::{drift_detection, marks};

/// HelmRelease `spec` fields carried out, or accepted (driftless renders and applies a
/// release itself: there is no Helm storage, history or remediation to configure).
pub(super) const RELEASE_CARRIED: &[&str] = &[
    "chart",
    "chartRef",
    "releaseName",
    "targetNamespace",
    "values",
    "install",
    "upgrade",
    "valuesFrom",
    "dependsOn",
    "suspend",
    "interval",
    "timeout",
    "maxHistory",
    "storageNamespace",
    "driftDetection",
    "rollback",
    "uninstall",
    "test",
    "serviceAccountName",
    "postRenderers",
    "kubeConfig",
];

/// `spec.install` and `spec.upgrade` fields carried out or accepted.
const PHASE_CARRIED: &[&str] = &[
    "crds",
    "remediation",
    "strategy",
    "timeout",
    "createNamespace",
    "cleanupOnFail",
    "disableWait",
    "disableWaitForJobs",
];

/// What a HelmRelease's chart is found by: the tree's sources, what its GitRepositories
/// and OCIRepositories read, and the spec root within the repository.
pub(super) struct ChartSources<'a> {
    pub(super) sources: &'a Sources,
    pub(super) origins: &'a Origins,
    pub(super) root: Option<&'a str>,
}

/// Each HelmRelease as a chart release of the `helm` kind: its chart from its source (a
/// HelmRepository over HTTP or OCI, an OCIRepository, or this repository), its values,
/// release name and namespace as Flux names them, and its waves.
pub(super) fn helm_releases(
    read: Vec<(Location, String, Value)>,
    known: &ChartSources<'_>,
    waves: &mut BTreeMap<String, i32>,
    data: &mut TreeData<'_>,
    fleet: &crate::spec::clusters::Clusters,
    found: &mut crate::hydrate::apps::Found,
) -> Vec<Waits> {
    let crate::hydrate::apps::Found {
        errors,
        held,
        destinations,
        ..
    } = found;
    let mut converted = Vec::new();
    for (at, doc, v) in read {
        let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        let app = app_id(ns, name);
        let release = helm_release(&at, &doc, &v, known).and_then(|mut r| {
            values_from(&at, ns, &r.values_from, &mut r.release, data)?;
            if let Some((to, to_at)) = &r.destination
                && let Err(why) = fleet.destination(to)
            {
                return Err(err(
                    to_at.clone(),
                    format!("HelmRelease {ns}/{name}: {why}; nothing is applied"),
                ));
            }
            Ok(r)
        });
        match release {
            Ok(r) => {
                let deps = depends_on(&r.depends_on, &r.namespace_of_object);
                converted.push((r, at, deps, app));
            }
            // Without a name it is no app: what it applied could not be kept.
            Err(e) if name.is_empty() => errors.push(e),
            Err(e) => held.push(AppError::new(app, e)),
        }
    }
    let waits: Vec<Waits> = converted
        .iter()
        .map(|(_, at, deps, app)| Waits {
            app: app.clone(),
            deps: deps.iter().map(|d| format!("flux-helm/{d}")).collect(),
            at: at.clone(),
        })
        .collect();
    // What waits for a HelmRelease held as it was read is held too, and has no wave.
    let mut ids = held.iter().map(|h| h.app.clone()).collect();
    let waiting = waiting_for_held(&waits, &mut ids);
    let waiting_apps: std::collections::BTreeSet<&str> =
        waiting.iter().map(|w| w.app.as_str()).collect();
    converted.retain(|(_, _, _, app)| !waiting_apps.contains(app.as_str()));
    held.extend(waiting);
    let mut out = Vec::new();
    let mut nodes = Vec::new();
    for (r, at, deps, app) in converted {
        if let Some(to) = r.destination {
            destinations.insert(app, to);
        }
        nodes.push(Node {
            key: format!("helmrelease/{}/{}", r.namespace_of_object, r.release.name),
            deps: deps
                .into_iter()
                .map(|d| format!("helmrelease/{d}"))
                .collect(),
            at: at.clone(),
            base: r.wave,
        });
        let id = AppId::FluxHelm {
            namespace: r.namespace_of_object.clone(),
            name: r.release.name.clone(),
        };
        out.push(crate::hydrate::helm::ReleaseAt {
            file: format!(
                "{}#flux-helm.{}.{}",
                at.file, r.namespace_of_object, r.release.name
            ),
            release: r.release,
            app: Some(id),
            app_marks: None,
        });
    }
    let ws = waves_of(&nodes, waves, errors);
    let mut kept = Vec::new();
    for (mut r, w) in out.into_iter().zip(ws) {
        if let Some(w) = w {
            if w > 0 {
                r.release
                    .annotations
                    .insert(crate::spec::order::WAVE.to_string(), w.to_string());
            }
            kept.push(r);
        }
    }
    found.renders.releases = kept;
    waits
}

/// `flux-helm/NAMESPACE/NAME`: the app a HelmRelease is, as said.
fn app_id(namespace: &str, name: &str) -> String {
    AppId::FluxHelm {
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
    .to_string()
}

/// A HelmRelease as what it waits for: its app and the apps its `dependsOn` names.
#[derive(Debug, Clone)]
pub struct Waits {
    app: String,
    deps: Vec<String>,
    at: Location,
}

/// Those of `list` that wait for a held app (`held`: the held apps' ids, grown by those
/// found), as Flux's HelmRelease waits for a dependency that is not ready: each one whose
/// `dependsOn` names a held one, in turn what depends on those.
fn waiting_for_held(
    list: &[Waits],
    held: &mut std::collections::BTreeSet<String>,
) -> Vec<AppError> {
    let mut waiting = Vec::new();
    loop {
        let more: Vec<(&Waits, &String)> = list
            .iter()
            .filter(|w| !held.contains(&w.app))
            .filter_map(|w| Some((w, w.deps.iter().find(|d| held.contains(*d))?)))
            .collect();
        if more.is_empty() {
            return waiting;
        }
        for (w, dep) in more {
            held.insert(w.app.clone());
            let name = |app: &str| app.trim_start_matches("flux-helm/").to_string();
            let why = format!(
                "HelmRelease {}: waits for HelmRelease {}, which is held",
                name(&w.app),
                name(dep)
            );
            waiting.push(AppError::new(w.app.clone(), err(w.at.clone(), why)));
        }
    }
}

/// After the releases' renders: what waits for a HelmRelease whose render failed (or that
/// is held) is held too, its render taken out.
pub(crate) fn hold_dependents_of_failed(list: &[Waits], out: &mut crate::hydrate::Hydrated) {
    super::hold_waiting(out, |failed| waiting_for_held(list, failed));
}

pub(super) struct Converted {
    release: crate::spec::helm::HelmRelease,
    /// The HelmRelease object's own namespace (what `dependsOn` names).
    namespace_of_object: String,
    wave: i32,
    /// Where its `kubeConfig` sends its objects, with where it says so.
    destination: Option<(crate::spec::clusters::Destination, Location)>,
    depends_on: Vec<NamedRef>,
    /// Read from the tree once the release is converted.
    values_from: Vec<ValuesReference>,
}

/// A HelmRelease as it is read: where it is, its names, and its refusals, each at the
/// line of the field at fault.
struct Reading<'a> {
    at: &'a Location,
    doc: &'a str,
    ns: &'a str,
    name: &'a str,
}

pub(super) fn helm_release(
    at: &Location,
    doc: &str,
    v: &Value,
    known: &ChartSources<'_>,
) -> Result<Converted, SpecError> {
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let r = Reading { at, doc, ns, name };
    r.carried(v)?;
    // Its shape is checked: what is left is `null` where a map is wanted in a list.
    let spec: HelmReleaseSpec = shape::or_default(&v["spec"]).map_err(|e| {
        err(
            at.clone(),
            format!("HelmRelease {ns}/{name}: spec: {e}; nothing is applied"),
        )
    })?;
    let target = spec.target_namespace.as_deref();
    let namespace = target.unwrap_or(ns).to_string();
    let release_name = match (spec.release_name.as_deref(), target) {
        (Some(r), _) => r.to_string(),
        (None, Some(t)) => format!("{t}-{name}"),
        (None, None) => name.to_string(),
    };
    // The chart is set from its source below.
    let mut release = crate::hydrate::helm::unnamed_release("", name, &namespace, at.clone());
    release.release_name = release_name;
    release.values = spec.values.clone();
    release.include_crds = spec.install.crds.as_deref() != Some("Skip");
    let wave = marks(v, &spec, ns, name, &mut release);
    if let Err((key, why)) = drift_detection(&spec.drift_detection, &mut release) {
        return Err(r.refuse(key, why));
    }
    r.post_renderers(&spec, &mut release)?;
    let destination = kube_config(&v["spec"], ns)
        .map_err(|(key, why)| r.refuse(&key, why))?
        .map(|to| (to, r.field_at("kubeConfig")));
    match &spec.chart_ref {
        Some(chart_ref) => r.chart_ref(chart_ref, known.sources, &mut release)?,
        None => r.chart(&spec.chart.spec, known, &mut release)?,
    }
    Ok(Converted {
        release,
        namespace_of_object: ns.to_string(),
        wave,
        destination,
        depends_on: spec.depends_on,
        values_from: spec.values_from,
    })
}

/// A chart source's credentials and transport, as the release pulls its chart.
fn credentials(release: &mut crate::spec::helm::HelmRelease, source: &SourceSpec) {
    if let Some(secret) = &source.secret_ref.name {
        release.username_file = Some(format!("{secret}/username"));
        release.password_file = Some(format!("{secret}/password"));
    }
    if let Some(secret) = &source.cert_secret_ref.name {
        release.ca_file = Some(format!("{secret}/ca.crt"));
    }
    release.plain_http = source.insecure == Some(true);
}

impl Reading<'_> {
    fn field_at(&self, key: &str) -> Location {
        Location {
            line: self.at.line + line_of(self.doc, key),
            ..self.at.clone()
        }
    }

    fn refuse(&self, key: &str, what: impl Into<Refusal>) -> SpecError {
        err(
            self.field_at(key),
            format!("{}: {}; nothing is applied", self.said(), what.into()),
        )
    }

    /// `HelmRelease NS/NAME`.
    fn said(&self) -> String {
        format!("HelmRelease {}/{}", self.ns, self.name)
    }

    /// Refuses a field that is not carried out, in `spec` or its `install` and `upgrade`.
    fn carried(&self, v: &Value) -> Result<(), SpecError> {
        if let Some(key) = unknown(&v["spec"], RELEASE_CARRIED) {
            return Err(self.refuse(key, NotCarriedOut::field(format!("spec.{key}"))));
        }
        shape::check(&v["spec"], &shape::HELM_RELEASE, "spec")
            .map_err(|e| self.refuse(&e.key.clone(), e))?;
        if v["spec"]["test"]["enable"].as_bool() == Some(true) {
            return Err(self.refuse(
                "test",
                "`test.enable: true` is not carried out: driftless does not run a chart's tests (its health checks judge the release)",
            ));
        }
        for phase in ["install", "upgrade"] {
            if let Some(key) = unknown(&v["spec"][phase], PHASE_CARRIED) {
                return Err(self.refuse(key, NotCarriedOut::field(format!("spec.{phase}.{key}"))));
            }
        }
        Ok(())
    }

    /// `postRenderers`: kustomize's `patches` and `images`, the rest refused.
    fn post_renderers(
        &self,
        spec: &HelmReleaseSpec,
        release: &mut crate::spec::helm::HelmRelease,
    ) -> Result<(), SpecError> {
        for step in spec.post_renderers.as_array().into_iter().flatten() {
            let kustomize = step.get("kustomize").and_then(Value::as_object);
            let other = step
                .as_object()
                .and_then(|o| o.keys().find(|k| *k != "kustomize"))
                .cloned()
                .or_else(|| {
                    kustomize
                        .and_then(|k| k.keys().find(|k| *k != "patches" && *k != "images"))
                        .map(|k| format!("kustomize.{k}"))
                });
            if let Some(key) = other {
                return Err(self.refuse(
                    "postRenderers",
                    NotCarriedOut::field(format!("postRenderers[].{key}"))
                        .instead("a kustomize post-renderer's `patches` and `images` are"),
                ));
            }
            if let Some(k) = kustomize {
                release.post_render.push(Value::Object(k.clone()));
            }
        }
        Ok(())
    }

    /// The chart of a `chartRef`: an OCIRepository the tree holds.
    fn chart_ref(
        &self,
        chart_ref: &SourceRef,
        sources: &Sources,
        release: &mut crate::spec::helm::HelmRelease,
    ) -> Result<(), SpecError> {
        let kind = chart_ref.kind.as_deref().unwrap_or_default();
        let rname = chart_ref.name.as_deref().unwrap_or_default();
        let rns = chart_ref.namespace.as_deref().unwrap_or(self.ns);
        let Some(source) = sources
            .get(&format!("{kind}/{rns}/{rname}"))
            .filter(|_| kind == "OCIRepository")
        else {
            return Err(self.refuse(
                "chartRef",
                format!("its chartRef {kind} {rns}/{rname} is not an OCIRepository the tree holds"),
            ));
        };
        let source = source.as_ref().map_err(|r| r.holds(&self.said()))?;
        release.chart = source.url.clone().unwrap_or_default();
        let reference = &source.reference;
        release.version = Some(
            reference
                .tag
                .as_deref()
                .or(reference.semver.as_deref())
                .unwrap_or("*")
                .to_string(),
        );
        if reference.digest.is_some() {
            return Err(self.refuse(
                "chartRef",
                format!(
                    "OCIRepository {rns}/{rname}: {}",
                    NotCarriedOut::field("ref.digest")
                ),
            ));
        }
        credentials(release, source);
        Ok(())
    }

    /// The chart of `spec.chart`: from a HelmRepository the tree holds, or this repository.
    fn chart(
        &self,
        chart: &ChartSpec,
        known: &ChartSources<'_>,
        release: &mut crate::spec::helm::HelmRelease,
    ) -> Result<(), SpecError> {
        let ChartSources {
            sources,
            origins,
            root,
        } = *known;
        let (ns, name) = (self.ns, self.name);
        let chart_name = chart.chart.as_deref().unwrap_or_default();
        if chart_name.is_empty() {
            return Err(self.refuse(
                "chart",
                "names no chart (`spec.chart.spec.chart` or `spec.chartRef`)",
            ));
        }
        if chart.values_files.is_some() || chart.values_file.is_some() {
            return Err(self.refuse(
                "valuesFiles",
                NotCarriedOut::field("spec.chart.spec.valuesFiles").to_string(),
            ));
        }
        let source = &chart.source_ref;
        let kind = source.kind.as_deref().unwrap_or("HelmRepository");
        let sname = source.name.as_deref().unwrap_or_default();
        let sns = source.namespace.as_deref().unwrap_or(ns);
        let version = chart.version.as_deref().unwrap_or("*").to_string();
        match kind {
            "HelmRepository" => {
                let Some(source) = sources.get(&format!("HelmRepository/{sns}/{sname}")) else {
                    return Err(self.refuse(
                        "sourceRef",
                        format!("its HelmRepository {sns}/{sname} is not in the tree"),
                    ));
                };
                let source = source.as_ref().map_err(|r| r.holds(&self.said()))?;
                let url = source
                    .url
                    .as_deref()
                    .unwrap_or_default()
                    .trim_end_matches('/');
                if source.repository_type.as_deref() == Some("oci") || url.starts_with("oci://") {
                    release.chart = format!("{url}/{chart_name}");
                } else {
                    release.chart = chart_name.to_string();
                    release.repository = Some(url.to_string());
                }
                release.version = Some(version);
                credentials(release, source);
            }
            "GitRepository" => {
                if let Some(refused) = refusal("GitRepository", sns, sname, origins) {
                    return Err(refused.holds(&self.said()));
                }
                let this_repo = is_this_repository("GitRepository", sns, sname, origins);
                if !this_repo {
                    return Err(self.refuse(
                        "sourceRef",
                        Refusal::OtherRepository {
                            named: format!("GitRepository {sns}/{sname}"),
                            hint: None,
                        },
                    ));
                }
                let path = clean_path(chart_name).ok_or_else(|| {
                    err(
                        self.field_at("chart"),
                        format!(
                            "HelmRelease {ns}/{name}: {}",
                            Refusal::LeadsOut {
                                what: "chart",
                                path: chart_name.to_string()
                            }
                        ),
                    )
                })?;
                // The chart's path from the spec root, which the `helm` kind reads from.
                let up = root.map_or(0, |r| {
                    if r.is_empty() {
                        0
                    } else {
                        r.split('/').count()
                    }
                });
                release.chart = format!("{}{path}", "../".repeat(up));
            }
            other => {
                return Err(self.refuse(
                    "sourceRef",
                    NotCarriedOut::named(format!("a chart from a {other}")).to_string(),
                ));
            }
        }
        Ok(())
    }
}
