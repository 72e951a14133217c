//! Reading a spec tree: the files under a root (`read.rs`; or handed over by a source, such
//! as a git commit's tree), then the checks that need the whole tree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::Policy;
use super::extract::{self, FileCtx, Found};
use super::settings::{SETTINGS_FILE, Settings};
use super::vars::Vars;
use super::{
    Kind, Location, Spec, SpecBody, SpecError, SpecErrors, SpecId, SpecTree, defaults_for_manifest,
};

mod read;

pub(crate) use read::{IGNORE_FILE, IgnoreRules, TreeBudget, is_source_file};
pub use read::{
    LoadError, MAX_ERRORS_PER_FILE, MAX_FILE_BYTES, MAX_TREE_BYTES, MAX_TREE_FILES, SourceFile,
    read_dir, read_dir_all,
};

/// Loads and validates the tree under `root` with the default [`Policy`].
pub fn load_dir(root: &Path) -> Result<SpecTree, LoadError> {
    load_dir_with(root, &Policy::default())
}

/// Loads and validates the tree under `root`.
pub fn load_dir_with(root: &Path, policy: &Policy) -> Result<SpecTree, LoadError> {
    let files = read_dir(root)?;
    Ok(parse_files_with(&files, policy)?)
}

/// Validates a set of spec files as one tree with the default [`Policy`].
pub fn parse_files(files: &[SourceFile]) -> Result<SpecTree, SpecErrors> {
    parse_files_with(files, &Policy::default())
}

/// Validates a set of spec files as one tree: every error of every file, in file order,
/// or the tree.
pub fn parse_files_with(files: &[SourceFile], policy: &Policy) -> Result<SpecTree, SpecErrors> {
    // The readers stop at the tree's limits; files from elsewhere are held to them too.
    let mut budget = TreeBudget::default();
    if let Err(limit) = files.iter().try_for_each(|f| budget.take(f.contents.len())) {
        return Err(SpecErrors(vec![SpecError {
            at: Location {
                file: ".".to_string(),
                line: 1,
                column: 1,
            },
            message: limit.to_string(),
        }]));
    }
    let mut errors = Vec::new();
    let settings = match files.iter().find(|f| f.path == SETTINGS_FILE) {
        Some(f) => read_settings(f, &mut errors),
        None => Settings::default(),
    };
    undeclared_clusters(&settings, policy, &mut errors);
    let cluster = policy.cluster.cluster();
    let home = &policy.cluster.clusters.home().name;
    // An app's destination, when it names a cluster, over the `[[cluster]]` rules.
    let reads = |path: &str| {
        policy
            .cluster
            .placed_here(path)
            .unwrap_or_else(|| settings.goes_to(path, cluster, home))
    };
    // The command line's values win over the tree's defaults; the cluster's own are
    // named apart (`cluster.name`), so neither can set them.
    let mut vars = settings.vars.clone();
    vars.extend(policy.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    vars.extend(cluster.vars());
    let vars = Vars(vars);
    // Substitution is asked for: a tree without `[vars]`, read without --var, keeps
    // every `${...}` as written (a vendored bundle's scripts have their own).
    let substitutes = settings.declares_vars() || !policy.vars.is_empty();
    let mut found = Vec::new();
    // Another cluster's files are not this one's to read: broken or not, they hold
    // nothing here.
    for f in files
        .iter()
        .filter(|f| f.path != SETTINGS_FILE && reads(&f.path))
    {
        let vars = (substitutes && !settings.skips_substitution(&f.path)).then_some(&vars);
        read_file(f, &settings, vars, policy, &mut found, &mut errors);
    }

    let (mut specs, written) = unique_specs(found, policy, &mut errors);
    errors.extend(super::depends::resolve(&mut specs, written));
    if errors.is_empty() {
        Ok(SpecTree {
            specs,
            settings: std::sync::Arc::new(settings),
            rendered: Default::default(),
            rendered_apps: Default::default(),
            held: Default::default(),
            all_or_nothing: false,
        })
    } else {
        errors.sort();
        errors.dedup();
        Err(SpecErrors(errors))
    }
}

/// A `[[cluster]]` rule may name only the clusters the operator declared: a commit never
/// brings a cluster (nor the credentials to reach one).
fn undeclared_clusters(settings: &Settings, policy: &Policy, errors: &mut Vec<SpecError>) {
    let clusters = &policy.cluster.clusters;
    for rule in &settings.clusters {
        for (name, at) in &rule.names {
            if clusters.get(name).is_none() {
                errors.push(SpecError {
                    at: at.clone(),
                    message: format!(
                        "cluster {name:?} is not declared: {} (the operator declares clusters with --clusters FILE)",
                        clusters.declared()
                    ),
                });
            }
        }
    }
}

/// One spec file's specs into `found` (a manifest without a namespace in the one the
/// tree's settings give its directory), its errors into `errors`, at most
/// `MAX_ERRORS_PER_FILE` of them.
fn read_file(
    f: &SourceFile,
    settings: &Settings,
    vars: Option<&Vars>,
    policy: &Policy,
    found: &mut Vec<Found>,
    errors: &mut Vec<SpecError>,
) {
    // What is not TOML is YAML here: JSON is, and so is what a tool rendered, read at
    // the path of the file it came from (a kustomization, a Jsonnet file).
    let yaml = !f.path.ends_with(".toml");
    let format = if yaml { "YAML" } else { "TOML" };
    let start = Location {
        file: f.path.clone(),
        line: 1,
        column: 1,
    };
    if f.contents.len() > MAX_FILE_BYTES {
        errors.push(SpecError {
            at: start,
            message: format!(
                "file is larger than {} MiB, the limit for a spec file; not read",
                MAX_FILE_BYTES >> 20
            ),
        });
        return;
    }
    let text = match std::str::from_utf8(&f.contents) {
        Ok(t) => t,
        Err(e) => {
            let valid = std::str::from_utf8(&f.contents[..e.valid_up_to()]).unwrap_or_default();
            let ctx = FileCtx::new(&f.path, valid);
            errors.push(SpecError {
                at: ctx.loc(valid.len()),
                message: format!("file is not valid UTF-8: binary data, or text in another encoding; a spec file is UTF-8 {format}"),
            });
            return;
        }
    };
    let mut ctx = FileCtx::new(&f.path, text);
    if let Some(nul) = text.find('\0') {
        errors.push(SpecError {
            at: ctx.loc(nul),
            message: format!("file contains a NUL byte: binary data, not a {format} text file"),
        });
        return;
    }
    let (more, end) = if yaml {
        let (mut docs, mut errs) = super::sops::file(&f.path, text, &policy.age_keys, vars);
        if let Some(ns) = settings.namespace_for(&f.path) {
            for d in docs.iter_mut().filter(|d| d.namespace.is_none()) {
                d.namespace = Some(ns.to_string());
            }
        }
        found.extend(docs);
        let more = errs.len().saturating_sub(MAX_ERRORS_PER_FILE);
        errs.truncate(MAX_ERRORS_PER_FILE);
        errors.extend(errs);
        (more, ctx.loc(text.len()))
    } else {
        let mut docs = extract::file(&mut ctx, text, vars);
        if let Some(ns) = settings.namespace_for(&f.path) {
            for d in docs
                .iter_mut()
                .filter(|d| d.kind == Kind::Manifest && d.namespace.is_none())
            {
                d.namespace = Some(ns.to_string());
            }
        }
        found.extend(docs);
        let more = ctx.dropped_errors;
        let end = ctx.loc(text.len());
        errors.extend(ctx.errors);
        (more, end)
    };
    if more > 0 {
        errors.push(SpecError {
            at: end,
            message: format!(
                "{more} more errors in this file not shown (only the first {MAX_ERRORS_PER_FILE} are)"
            ),
        });
    }
}

/// The specs `found` in the tree, each with the ids it depends on as written: those
/// that claim an id, a NodePort or an object another spec claimed first, or write into
/// a protected namespace, are left out with an error.
fn unique_specs(
    found: Vec<Found>,
    policy: &Policy,
    errors: &mut Vec<SpecError>,
) -> (Vec<Spec>, Vec<Vec<(String, Location)>>) {
    let scopes = crd_scopes(&found);
    let mut specs = Vec::with_capacity(found.len());
    let mut written = Vec::with_capacity(found.len());
    let mut ids: BTreeMap<SpecId, Location> = BTreeMap::new();
    let mut node_ports: BTreeMap<(u16, String), (SpecId, Location)> = BTreeMap::new();
    let mut objects: BTreeMap<ObjectKey, (SpecId, Location)> = BTreeMap::new();
    for f in found {
        let id = match &f.body {
            SpecBody::Manifest(m) => {
                let (namespace, name) = defaults_for_manifest(m, f.namespace.as_deref(), &scopes);
                SpecId {
                    kind: Kind::Manifest,
                    namespace,
                    name,
                }
            }
            _ => SpecId {
                kind: f.kind,
                namespace: f.namespace.clone().unwrap_or_default(),
                name: f.name.clone(),
            },
        };
        if let Some(first) = ids.get(&id) {
            errors.push(SpecError {
                at: f.at.clone(),
                message: format!("duplicate spec {id}: first defined at {first}"),
            });
            continue;
        }
        let mut ok = true;
        for ns in written_namespaces(&id, &f.body) {
            if !policy.allows(ns) {
                errors.push(SpecError {
                    at: f.at.clone(),
                    message: format!(
                        "namespace {ns:?} is protected; driftless writes there only with --allow-namespace {ns}"
                    ),
                });
                ok = false;
            }
        }
        for (port, protocol) in node_ports_of(&f.body) {
            let key = (port, protocol);
            if let Some((other, at)) = node_ports.get(&key) {
                let shown = match key.1.as_str() {
                    "TCP" => port.to_string(),
                    p => format!("{port}/{p}"),
                };
                errors.push(SpecError {
                    at: f.at.clone(),
                    message: format!("NodePort {shown} is already used by {other} at {at}"),
                });
                ok = false;
            } else {
                node_ports.insert(key, (id.clone(), f.at.clone()));
            }
        }
        for key in rendered_objects(&id, &f.body) {
            if let Some((other, at)) = objects.get(&key) {
                errors.push(SpecError {
                    at: f.at.clone(),
                    message: format!(
                        "{key} is also rendered by {other} at {at}; rename one of them"
                    ),
                });
                ok = false;
            } else {
                objects.insert(key, (id.clone(), f.at.clone()));
            }
        }
        if !ok {
            continue;
        }
        ids.insert(id.clone(), f.at.clone());
        specs.push(Spec {
            id,
            at: f.at,
            body: f.body,
            policy: f.policy,
            depends_on: Vec::new(),
        });
        written.push(f.depends_on);
    }
    (specs, written)
}

/// The tree's settings (`.driftless.toml` among `files`), what is wrong in them left out:
/// the tree's validation reports it.
pub(crate) fn settings_of(files: &[SourceFile]) -> Settings {
    match files.iter().find(|f| f.path == SETTINGS_FILE) {
        Some(f) => read_settings(f, &mut Vec::new()),
        None => Settings::default(),
    }
}

/// The settings file's settings; its errors join the tree's.
fn read_settings(f: &SourceFile, errors: &mut Vec<SpecError>) -> Settings {
    let Ok(text) = std::str::from_utf8(&f.contents) else {
        errors.push(SpecError {
            at: Location {
                file: f.path.clone(),
                line: 1,
                column: 1,
            },
            message: "file is not valid UTF-8".into(),
        });
        return Settings::default();
    };
    let mut ctx = FileCtx::new(&f.path, text);
    let settings = extract::settings(&mut ctx, text);
    errors.extend(ctx.errors);
    settings
}

/// The namespaces a spec writes into: its own (none when cluster-scoped), or the one a
/// Namespace manifest is.
fn written_namespaces<'a>(id: &'a SpecId, body: &'a SpecBody) -> Vec<&'a str> {
    match body {
        SpecBody::Manifest(m) if m.group().is_empty() && m.kind == "Namespace" => {
            vec![m.metadata.name.as_str()]
        }
        _ if id.namespace.is_empty() => Vec::new(),
        _ => vec![id.namespace.as_str()],
    }
}

/// The NodePorts a spec asks for, with their protocol: an elasticweb's `port`, and the
/// `nodePort`s a Service manifest sets (the apiserver allocates the rest).
fn node_ports_of(body: &SpecBody) -> Vec<(u16, String)> {
    match body {
        SpecBody::ElasticWeb(e) => e.port.map(|p| (p, "TCP".to_string())).into_iter().collect(),
        SpecBody::Manifest(m) if m.group().is_empty() && m.kind == "Service" => m
            .rest
            .get("spec")
            .and_then(|s| s.get("ports"))
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let port = u16::try_from(p.get("nodePort")?.as_u64()?).ok()?;
                let protocol = p.get("protocol").and_then(|p| p.as_str()).unwrap_or("TCP");
                Some((port, protocol.to_string()))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// One object's identity: `Kind[.group] namespace/name`, as messages show it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ObjectKey {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        match self.namespace.as_str() {
            "" => write!(f, " {}", self.name),
            ns => write!(f, " {ns}/{}", self.name),
        }
    }
}

/// The objects a spec renders whatever the cluster's nodes (a localservice's per-node
/// Services depend on them: rendering checks those). Kept in step with `render::kinds`;
/// tests/hostile.rs checks each kind against the renderer.
fn rendered_objects(id: &SpecId, body: &SpecBody) -> Vec<ObjectKey> {
    let key = |group: &str, kind: &str| ObjectKey {
        group: group.to_string(),
        kind: kind.to_string(),
        namespace: id.namespace.clone(),
        name: id.name.clone(),
    };
    match body {
        SpecBody::Workspace(w) => {
            let mut out = vec![key("", "Service")];
            if w.storage.is_some() {
                out.push(key("", "PersistentVolumeClaim"));
            }
            if w.state == super::model::WorkspaceState::Running {
                out.push(key("", "Pod"));
            }
            out
        }
        SpecBody::ElasticWeb(_) => vec![key("apps", "Deployment"), key("", "Service")],
        SpecBody::LocalService(_) => Vec::new(),
        SpecBody::Manifest(m) => vec![ObjectKey {
            group: m.group().to_string(),
            kind: m.kind.clone(),
            namespace: id.namespace.clone(),
            name: m.metadata.name.clone(),
        }],
    }
}

/// `(group, kind)` of the custom resources whose CRD in this tree says `scope = Cluster`.
fn crd_scopes(found: &[Found]) -> BTreeSet<(String, String)> {
    found
        .iter()
        .filter_map(|f| match &f.body {
            SpecBody::Manifest(m)
                if m.kind == "CustomResourceDefinition" && m.group() == "apiextensions.k8s.io" =>
            {
                let spec = m.rest.get("spec")?;
                (spec.get("scope")?.as_str()? == "Cluster").then(|| {
                    let group = spec
                        .get("group")
                        .and_then(|g| g.as_str())
                        .unwrap_or_default();
                    let kind = spec
                        .pointer("/names/kind")
                        .and_then(|k| k.as_str())
                        .unwrap_or_default();
                    (group.to_string(), kind.to_string())
                })
            }
            _ => None,
        })
        .collect()
}
