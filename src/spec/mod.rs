//! Specs: the TOML model, loading a tree of files, and validation that reports every
//! error of the tree as `file:line:col: message`.

mod app_file;
pub mod clusters;
mod depends;
mod extract;
pub mod helm;
mod load;
mod manifest;
pub mod model;
pub mod names;
pub mod order;
pub mod policy;
pub mod quantity;
pub mod removed;
pub mod schema;
pub mod select;
pub mod settings;
pub mod sops;
pub mod vars;
pub(crate) mod yaml;

pub use app_file::{AppId, RenderedApps};
pub(crate) use app_file::{argo_output_file, flux_output_file, guards_own_prune};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub(crate) use load::{IGNORE_FILE, IgnoreRules, TreeBudget, is_source_file, settings_of};
pub use load::{
    LoadError, MAX_ERRORS_PER_FILE, MAX_FILE_BYTES, MAX_TREE_BYTES, MAX_TREE_FILES, SourceFile,
    load_dir, load_dir_with, parse_files, parse_files_with, read_dir, read_dir_all,
};
pub use model::{ElasticWeb, LocalService, Manifest, Workspace};
pub(crate) use policy::ObjectPolicy;
pub use sops::AgeKeys;

/// Namespaces no spec writes into unless the tree's [`Policy`] allows it: the control
/// plane's own, and driftless's (its inventory and Lease live there by default).
pub(crate) const PROTECTED_NAMESPACES: [&str; 4] = [
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "driftless-system",
];

/// What a tree may do beyond the rules every tree follows. The default refuses writes into
/// [`PROTECTED_NAMESPACES`]; an operator allows one with `--allow-namespace NS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Namespaces refused unless in `allow_namespaces`.
    pub protected_namespaces: BTreeSet<String>,
    /// Protected namespaces this tree may write into anyway.
    pub allow_namespaces: BTreeSet<String>,
    /// The age identities SOPS-encrypted YAML files are decrypted with (none by default:
    /// such a file is then an error naming its recipients).
    pub age_keys: AgeKeys,
    /// Variables from the command line (`--var`, `--vars-file`): over the tree's `[vars]`.
    pub vars: BTreeMap<String, String>,
    /// Any error stops the whole revision (`--all-or-nothing`), as an app's own error
    /// otherwise holds that app alone (DESIGN 1.12).
    pub all_or_nothing: bool,
    /// The cluster served, of the operator's (`--clusters`, `--cluster`): only the files
    /// that go to it are read, and `[[cluster]]` rules may name only declared clusters.
    pub cluster: clusters::Target,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            protected_namespaces: PROTECTED_NAMESPACES.map(String::from).into(),
            allow_namespaces: BTreeSet::new(),
            age_keys: AgeKeys::default(),
            vars: BTreeMap::new(),
            all_or_nothing: false,
            cluster: clusters::Target::default(),
        }
    }
}

impl Policy {
    /// The default policy, with these namespaces allowed.
    pub fn allowing<I: IntoIterator<Item = S>, S: Into<String>>(namespaces: I) -> Self {
        Policy {
            allow_namespaces: namespaces.into_iter().map(Into::into).collect(),
            ..Policy::default()
        }
    }

    /// Also protects `namespace` (a non-default `--inventory-namespace`, say).
    pub fn protect(mut self, namespace: impl Into<String>) -> Self {
        self.protected_namespaces.insert(namespace.into());
        self
    }

    /// Decrypts SOPS files with these keys.
    pub fn with_age_keys(mut self, keys: AgeKeys) -> Self {
        self.age_keys = keys;
        self
    }

    /// Whether specs may write into `namespace` ("" for cluster-scoped objects: always).
    pub fn allows(&self, namespace: &str) -> bool {
        !self.protected_namespaces.contains(namespace) || self.allow_namespaces.contains(namespace)
    }
}

/// The kinds of spec a file may hold, in the order they are documented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Workspace,
    ElasticWeb,
    LocalService,
    Manifest,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Workspace,
        Kind::ElasticWeb,
        Kind::LocalService,
        Kind::Manifest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Workspace => "workspace",
            Kind::ElasticWeb => "elasticweb",
            Kind::LocalService => "localservice",
            Kind::Manifest => "manifest",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A spec's identity, `kind/namespace/name`: unique across the tree. A `manifest`'s
/// name is `Kind.group/name` (`Kind/name` for the core group), since several objects of
/// different kinds may share a name; a cluster-scoped one has an empty namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpecId {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for SpecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// Text that is not a spec identity (`kind/namespace/name`, with a known kind).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a spec identity (kind/namespace/name)")]
pub struct BadSpecId(pub String);

impl std::str::FromStr for SpecId {
    type Err = BadSpecId;

    /// The inverse of `Display`. A manifest's name holds a `/` of its own
    /// (`manifest/ns/Kind.group/name`), so only the first two separate.
    fn from_str(s: &str) -> Result<SpecId, BadSpecId> {
        let bad = || BadSpecId(s.to_string());
        let mut parts = s.splitn(3, '/');
        let kind = parts.next().and_then(Kind::parse).ok_or_else(bad)?;
        let namespace = parts.next().ok_or_else(bad)?;
        let name = parts.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
        Ok(SpecId {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

/// A place in the spec tree; `file` is relative to the tree's root.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
}

/// The 1-based line and column (in characters) of byte `offset` in `text`: where an
/// operator's file (`--vars-file`, `--clusters`) is wrong, as a spec's place is said.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpecBody {
    Workspace(Workspace),
    ElasticWeb(ElasticWeb),
    LocalService(LocalService),
    Manifest(Manifest),
}

/// One validated spec, with its resolved namespace in `id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub id: SpecId,
    pub at: Location,
    pub body: SpecBody,
    /// What driftless does with its objects besides applying them.
    pub policy: ObjectPolicy,
    /// Specs that must be ready before this one is applied (`depends-on`).
    pub depends_on: Vec<SpecId>,
}

/// A valid spec tree: every spec of every file, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecTree {
    pub specs: Vec<Spec>,
    /// Its `.driftless.toml` (`settings`): what render and health take from it.
    pub settings: std::sync::Arc<settings::Settings>,
    /// The files a tool rendered (a kustomization, a Jsonnet file), by path: what made
    /// the specs read from them.
    pub rendered: std::sync::Arc<BTreeMap<String, RenderedBy>>,
    /// The apps that made each rendered file (Flux's, Argo CD's, a chart release's).
    pub rendered_apps: std::sync::Arc<RenderedApps>,
    /// The apps this revision holds (`flux/NS/NAME`, `argo/NAME`), each with its errors:
    /// their render or validation failed, so none of their objects is applied or pruned
    /// and the rest of the revision goes on (DESIGN 1.12).
    pub held: std::sync::Arc<BTreeMap<String, Vec<SpecError>>>,
    /// `--all-or-nothing`: any error stops the whole revision, a refusal by the apiserver
    /// too, rather than holding the app it is in.
    pub all_or_nothing: bool,
}

/// What a sync takes from the tree besides its objects.
#[derive(Debug, Clone, Default)]
pub struct TreeFacts {
    /// Specs that take over existing objects (`adopt = true`).
    pub adopt: BTreeSet<SpecId>,
    /// The Flux and Argo CD apps of the tree, those rendering nothing too: each is its
    /// own prune guard's.
    pub apps: BTreeSet<String>,
    /// The apps that made each rendered file: an object's app is its spec file's.
    pub rendered_apps: std::sync::Arc<RenderedApps>,
    /// The apps the tree holds back (an object of theirs is `driftless.dev/suspend`, as
    /// a suspended Flux Kustomization's all are): what they applied before is not
    /// pruned, also an object their render no longer holds.
    pub held_apps: BTreeSet<String>,
    /// Some app failed and is held: an app that left the tree may have been rendered by
    /// it (an app of apps whose render failed renders none of its apps), so what such an
    /// app applied is not pruned either until nothing is held.
    pub hold_departed: bool,
    /// `--all-or-nothing`: an object the apiserver refuses stops the whole revision
    /// rather than holding its app.
    pub all_or_nothing: bool,
}

impl TreeFacts {
    /// The app the specs of `file` are the render of, as said (`argo/web`).
    pub fn app_of(&self, file: &str) -> Option<String> {
        self.rendered_apps.app_of(file).map(AppId::to_string)
    }

    /// Whether what was applied for app `app` (`None`: the tree's own) and is not in this
    /// revision is left as it is, neither applied nor pruned: the app is held (suspended,
    /// or its render failed), or an app is held and this one left the tree, or is the
    /// tree's own (a held app of apps renders none of its apps, and a held Flux
    /// Kustomization none of its HelmReleases, whose objects are their releases', no
    /// app's). The caller asks it only of what the revision does not hold.
    pub fn holds(&self, app: Option<&str>) -> bool {
        match app {
            Some(a) => self.held_apps.contains(a) || (self.hold_departed && !self.apps.contains(a)),
            None => self.hold_departed,
        }
    }
}

/// What rendered a file's specs: the tool, its version, the command (DESIGN 1.9).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RenderedBy {
    pub tool: String,
    pub version: String,
    pub command: String,
    /// For a chart: the release its objects make up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<Release>,
}

/// A chart release (DESIGN 1.10): what status, API and UI show it by.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Release {
    /// The spec's name (`[helm.NAME]`), or the chart directory's for a chart nobody names.
    pub name: String,
    pub release_name: String,
    pub namespace: String,
    /// The chart as the spec names it.
    pub chart: String,
    /// The chart's version in force (a range resolved).
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    /// Where the spec is.
    pub file: String,
    pub line: usize,
}

impl Release {
    /// `web/podinfo: chart podinfo 6.2.3 (app 6.2.3)`: how the CLI names a release.
    pub fn title(&self) -> String {
        let app = self
            .app_version
            .as_ref()
            .map(|a| format!(" (app {a})"))
            .unwrap_or_default();
        format!(
            "{}/{}: chart {} {}{app}",
            self.namespace, self.release_name, self.chart, self.version
        )
    }
}

impl SpecTree {
    /// Joins the health rules a render found (Flux's `healthCheckExprs`, each scoped to
    /// its Kustomization's objects) to the tree's own.
    pub fn add_health(&mut self, rules: &[std::sync::Arc<settings::HealthRule>]) {
        if !rules.is_empty() {
            std::sync::Arc::make_mut(&mut self.settings)
                .health
                .extend(rules.iter().cloned());
        }
    }

    /// Specs that say `adopt = true`: they may take over objects driftless did not create.
    /// What a sync takes from the tree besides its objects.
    pub fn facts(&self) -> TreeFacts {
        let files = self
            .rendered
            .keys()
            .chain(self.specs.iter().map(|s| &s.at.file));
        let app_of = |f: &String| self.rendered_apps.app_of(f).map(AppId::to_string);
        TreeFacts {
            adopt: self.adopt_specs(),
            apps: files
                .filter_map(app_of)
                .chain(self.held.keys().cloned())
                .collect(),
            held_apps: self
                .specs
                .iter()
                .filter(|s| s.policy.suspended.is_some())
                .filter_map(|s| app_of(&s.at.file))
                .chain(self.held.keys().cloned())
                .collect(),
            rendered_apps: self.rendered_apps.clone(),
            hold_departed: !self.held.is_empty(),
            all_or_nothing: self.all_or_nothing,
        }
    }

    pub(crate) fn adopt_specs(&self) -> BTreeSet<SpecId> {
        self.specs
            .iter()
            .filter(|s| match &s.body {
                SpecBody::Workspace(w) => w.adopt,
                SpecBody::ElasticWeb(e) => e.adopt,
                SpecBody::LocalService(l) => l.adopt,
                SpecBody::Manifest(_) => false,
            })
            .map(|s| s.id.clone())
            .collect()
    }

    /// The application each spec belongs to, by spec id: its chart release
    /// (`release NS/NAME`), its Flux Kustomization (`flux/NS/NAME`), else the file it is read from (for what a tool rendered, the
    /// kustomization or Jsonnet file). What a preview (`diff --base`) groups changes by.
    pub fn apps(&self) -> BTreeMap<String, String> {
        self.specs
            .iter()
            .map(|s| {
                let release = self
                    .rendered
                    .get(&s.at.file)
                    .and_then(|r| r.release.as_ref());
                let app = match (self.rendered_apps.app_of(&s.at.file), release) {
                    (Some(app), _) => app.to_string(),
                    (None, Some(r)) => format!("release {}/{}", r.namespace, r.release_name),
                    (None, None) => s.at.file.clone(),
                };
                (s.id.to_string(), app)
            })
            .collect()
    }

    /// How many specs of each kind, for `validate`'s summary.
    pub fn count_by_kind(&self) -> BTreeMap<Kind, usize> {
        let mut counts = BTreeMap::new();
        for s in &self.specs {
            *counts.entry(s.id.kind).or_insert(0) += 1;
        }
        counts
    }
}

/// One problem in a spec tree, at its exact place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{at}: {message}")]
pub struct SpecError {
    pub at: Location,
    pub message: String,
}

/// Every problem of a spec tree, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Built-in kinds that are not namespaced, as `(group, kind)`. A custom kind is
/// cluster-scoped when its CRD in the same tree says so; otherwise it is taken as
/// namespaced (apply corrects this through discovery).
pub(crate) const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("networking.k8s.io", "IngressClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("policy", "PodSecurityPolicy"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
];

/// A manifest's namespace (empty when cluster-scoped) and its identity's name part.
fn defaults_for_manifest(
    m: &Manifest,
    file_ns: Option<&str>,
    crd_cluster_scoped: &std::collections::BTreeSet<(String, String)>,
) -> (String, String) {
    let group = m.group();
    let cluster_scoped = CLUSTER_SCOPED.contains(&(group, m.kind.as_str()))
        || crd_cluster_scoped.contains(&(group.to_string(), m.kind.clone()));
    let namespace = if cluster_scoped {
        String::new()
    } else {
        m.metadata
            .namespace
            .clone()
            .or_else(|| file_ns.map(str::to_string))
            .unwrap_or_else(|| model::defaults::NAMESPACE.to_string())
    };
    let name = if group.is_empty() {
        format!("{}/{}", m.kind, m.metadata.name)
    } else {
        format!("{}.{group}/{}", m.kind, m.metadata.name)
    };
    (namespace, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_ids_parse_back_from_their_text() {
        for text in [
            "elasticweb/dev/shop",
            "workspace/cloud-ide/alice-go",
            "manifest/default/ConfigMap/x",
            "manifest//CustomResourceDefinition.apiextensions.k8s.io/vms.infra.sealyun.com",
        ] {
            let id: SpecId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
        }
        let id: SpecId = "manifest/ns/Deployment.apps/web".parse().unwrap();
        assert_eq!(id.kind, Kind::Manifest);
        assert_eq!(id.namespace, "ns");
        assert_eq!(id.name, "Deployment.apps/web");
    }

    #[test]
    fn text_that_is_not_a_spec_id_is_refused() {
        for text in [
            "",
            "elasticweb",
            "elasticweb/dev",
            "elasticweb/dev/",
            "pod/dev/x",
        ] {
            assert_eq!(
                text.parse::<SpecId>(),
                Err(BadSpecId(text.to_string())),
                "{text:?}"
            );
        }
    }
}
