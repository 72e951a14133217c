//! Tree-level settings: `.driftless.toml` at the spec root, what Flux and Argo CD set per
//! source rather than per object. Variables (`[vars]`, see `vars`), target namespaces by
//! path (`[[namespace]]`), ignore rules across kinds (`[[ignore]]`) and CEL health rules
//! for custom resources (`[[health]]`). Read by `extract::settings`; the namespace rules
//! act while the tree is read, the rest travel with each rendered object's policy.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Location;

/// The file's name. Hidden, so the walkers never take it for specs.
pub(crate) const SETTINGS_FILE: &str = ".driftless.toml";

#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The file as written: what two trees' settings compare by.
    pub(super) text: String,
    /// Whether the file has a `[vars]` table (empty or not): variables are substituted.
    pub(super) declared_vars: bool,
    pub vars: BTreeMap<String, String>,
    /// `[substitute] skip`: files whose values are left as written.
    pub(super) skip: Vec<globset::GlobMatcher>,
    pub namespaces: Vec<NamespaceRule>,
    pub ignore: Vec<IgnoreRule>,
    pub health: Vec<Arc<HealthRule>>,
    /// `[kustomize] remote-bases`: a kustomization may name bases and resources by URL.
    pub remote_bases: bool,
    /// `[repository] urls`: more URLs this repository is known by (a mirror's, the one
    /// Argo CD or Flux names it by), beside its remotes'.
    pub repository_urls: Vec<String>,
    /// `[jsonnet]`: what every `*.jsonnet` file of the tree is evaluated with.
    pub jsonnet: JsonnetSettings,
    /// `[apps] directories`: directories each of which is an app of its own (DESIGN 1.12).
    pub app_dirs: Vec<AppDir>,
    /// `[[cluster]]`: the clusters the files a pattern matches go to.
    pub clusters: Vec<ClusterRule>,
}

/// The files `path` matches go to the clusters `names` names and those whose labels
/// include all of `labels`; to no other (the first rule that matches a file decides).
#[derive(Debug, Clone)]
pub struct ClusterRule {
    pub at: Location,
    pub path: String,
    pub(super) glob: globset::GlobMatcher,
    /// Each with its place, for a name the operator did not declare.
    pub names: Vec<(String, Location)>,
    pub labels: Option<BTreeMap<String, String>>,
}

impl ClusterRule {
    fn takes(&self, cluster: &super::clusters::Cluster) -> bool {
        self.names.iter().any(|(n, _)| *n == cluster.name)
            || self.labels.as_ref().is_some_and(|l| cluster.matches(l))
    }
}

/// A pattern of directories each of which is an app (`teams/*`).
#[derive(Debug, Clone)]
pub struct AppDir {
    pub pattern: String,
    pub(super) glob: globset::GlobMatcher,
}

impl Settings {
    /// The app `dir/PATH` a file of the tree (or a tool's render of it) belongs to: the
    /// deepest of its directories an `[apps]` pattern names; `None` when none does (it
    /// is the tree's own).
    pub(crate) fn app_dir_of(&self, file: &str) -> Option<String> {
        if self.app_dirs.is_empty() {
            return None;
        }
        let base = file.split('#').next().unwrap_or(file);
        let mut dir = base;
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if self.app_dirs.iter().any(|a| a.glob.is_match(parent)) {
                return Some(format!("dir/{parent}"));
            }
            dir = parent;
        }
        None
    }
}

/// `[jsonnet]` in `.driftless.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonnetSettings {
    /// Library paths (`-J`), relative to the spec root, searched in order after the
    /// importing file's own directory.
    pub libs: Vec<String>,
    /// `std.extVar` values (`--ext-str`).
    pub ext_vars: BTreeMap<String, String>,
    /// Top-level arguments (`--tla-str`), for a file whose value is a function.
    pub tlas: BTreeMap<String, String>,
}

/// Namespaced manifests without a namespace, in files `path` matches, go to `namespace`.
#[derive(Debug, Clone)]
pub struct NamespaceRule {
    pub path: String,
    pub(super) glob: globset::GlobMatcher,
    pub namespace: String,
}

/// Objects an `[[ignore]]` rule selects: every criterion given must hold.
#[derive(Debug, Clone)]
pub struct IgnoreRule {
    pub at: Location,
    /// Its name and namespace are anchored regular expressions.
    pub select: super::select::ObjectSelector,
    /// JSON pointers, as `ignore-fields`.
    pub paths: Vec<String>,
    /// Field managers whose fields driftless leaves alone.
    pub managers: Vec<String>,
}

/// A CEL health rule for one kind of custom resource.
#[derive(Debug, Clone)]
pub struct HealthRule {
    pub at: Location,
    pub api_version: String,
    pub kind: String,
    pub current: Option<Expr>,
    pub failed: Option<Expr>,
    pub in_progress: Option<Expr>,
    /// The file of the specs whose objects it judges (a Flux Kustomization's output,
    /// for its `healthCheckExprs`); `None`: every object of its kind in the tree.
    pub scope: Option<String>,
}

/// A compiled CEL expression and its text.
#[derive(Debug, Clone)]
pub struct Expr {
    pub source: String,
    pub program: Arc<cel::Program>,
}

impl HealthRule {
    /// What was written, and where: what a change of the rule changes.
    pub fn text(&self) -> String {
        let src = |e: &Option<Expr>| e.as_ref().map_or("", |e| e.source.as_str()).to_string();
        format!(
            "{}|{:?}|{}|{}|{}|{}|{}\n",
            self.at,
            self.scope,
            self.api_version,
            self.kind,
            src(&self.current),
            src(&self.failed),
            src(&self.in_progress)
        )
    }
}

impl Expr {
    /// The program, or why CEL refuses it in one line.
    pub(crate) fn compile(source: &str) -> Result<Expr, String> {
        // A parser bug must not take down the daemon reading a new revision: it is refused.
        let compiled = std::panic::catch_unwind(|| cel::Program::compile(source))
            .map_err(|_| "the CEL parser failed on it".to_string())?;
        let program = compiled.map_err(|errs| {
            errs.errors
                .first()
                .map(|e| {
                    // The grammar's list of every token it would have taken is no help.
                    let msg = e.msg.split(" expecting ").next().unwrap_or(&e.msg);
                    format!("{msg} (at {}:{})", e.pos.0, e.pos.1 + 1)
                })
                .unwrap_or_else(|| "cannot be parsed".into())
        })?;
        Ok(Expr {
            source: source.to_string(),
            program: Arc::new(program),
        })
    }
}

/// Rules compare by what was written and where: a compiled program has no equality.
impl PartialEq for HealthRule {
    fn eq(&self, other: &Self) -> bool {
        let src = |e: &Option<Expr>| e.as_ref().map(|e| e.source.clone());
        self.at == other.at
            && self.scope == other.scope
            && self.api_version == other.api_version
            && self.kind == other.kind
            && src(&self.current) == src(&other.current)
            && src(&self.failed) == src(&other.failed)
            && src(&self.in_progress) == src(&other.in_progress)
    }
}

impl Eq for HealthRule {}

impl PartialEq for Settings {
    fn eq(&self, other: &Self) -> bool {
        // The rules a render added (Flux's healthCheckExprs) are not in the text.
        self.text == other.text && self.health == other.health
    }
}

impl Settings {
    /// Whether the file at `file` (a tool's render: the file it came from) goes to
    /// `cluster`: as the first `[[cluster]]` rule that matches it says, else to the home
    /// cluster alone.
    pub(crate) fn goes_to(
        &self,
        file: &str,
        cluster: &super::clusters::Cluster,
        home: &str,
    ) -> bool {
        let base = file.split('#').next().unwrap_or(file);
        match self.clusters.iter().find(|r| r.glob.is_match(base)) {
            Some(rule) => rule.takes(cluster),
            None => cluster.name == home,
        }
    }

    /// The namespace the first rule matching `file` gives its namespaced manifests.
    pub(crate) fn namespace_for(&self, file: &str) -> Option<&str> {
        self.namespaces
            .iter()
            .find(|r| r.glob.is_match(file))
            .map(|r| r.namespace.as_str())
    }

    /// What the file holds, as `validate` shows it: `.driftless.toml: 2 variables, 1
    /// namespace rule`; `None` without a file.
    pub fn summary(&self) -> Option<String> {
        if self.text.is_empty() {
            return None;
        }
        let count = |n: usize, what: &str| match n {
            1 => Some(format!("1 {what}")),
            0 => None,
            n => Some(format!("{n} {what}s")),
        };
        let parts: Vec<String> = [
            count(self.app_dirs.len(), "app directory pattern"),
            count(self.vars.len(), "variable"),
            count(self.namespaces.len(), "namespace rule"),
            count(self.clusters.len(), "cluster rule"),
            count(self.ignore.len(), "ignore rule"),
            // The file's own: those a render added are said with what rendered them.
            count(
                self.health.iter().filter(|r| r.scope.is_none()).count(),
                "health rule",
            ),
            self.remote_bases
                .then(|| "remote kustomize bases allowed".to_string()),
            count(self.jsonnet.libs.len(), "Jsonnet library path"),
            count(self.jsonnet.ext_vars.len(), "Jsonnet external variable"),
            count(self.jsonnet.tlas.len(), "Jsonnet top-level argument"),
        ]
        .into_iter()
        .flatten()
        .collect();
        Some(match parts.is_empty() {
            true => format!("{SETTINGS_FILE}: empty"),
            false => format!("{SETTINGS_FILE}: {}", parts.join(", ")),
        })
    }

    /// Whether the tree asks for variables: it has a `[vars]` table.
    pub(crate) fn declares_vars(&self) -> bool {
        self.declared_vars
    }

    /// Whether `[substitute] skip` leaves the file at `path` as written.
    pub(crate) fn skips_substitution(&self, path: &str) -> bool {
        self.skip.iter().any(|g| g.is_match(path))
    }

    /// The health rule for objects of `api_version` and `kind` that a spec of `file`
    /// renders, if any: one scoped to that file first, then the tree's.
    pub(crate) fn health_for(
        &self,
        api_version: &str,
        kind: &str,
        file: &str,
    ) -> Option<&Arc<HealthRule>> {
        let of_kind = || {
            self.health
                .iter()
                .filter(move |r| r.api_version == api_version && r.kind == kind)
        };
        of_kind()
            .find(|r| r.scope.as_deref() == Some(file))
            .or_else(|| of_kind().find(|r| r.scope.is_none()))
    }
}

/// API groups Kubernetes itself serves: kstatus judges their kinds, a rule may not.
pub(crate) const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "extensions",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];
