//! Rendering: pure, deterministic, specs + cluster facts → Kubernetes objects.

mod kinds;
pub mod ownership;
mod tree_rules;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use crate::object::{ObjKey, Packed};
use crate::spec::settings::Settings;
use crate::spec::{ObjectPolicy, Spec, SpecBody, SpecId, SpecTree};

/// What rendering needs to know about the cluster; everything else comes from specs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// This driftless instance (`--instance`): several can share a cluster.
    pub instance: String,
    /// Nodes, for `localservice`.
    pub nodes: Vec<NodeFacts>,
}

impl Default for Facts {
    fn default() -> Self {
        Facts {
            instance: ownership::DEFAULT_INSTANCE.to_string(),
            nodes: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// One rendered object and the spec it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub spec: SpecId,
    pub api_version: String,
    pub kind: String,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    /// The full object as the apiserver takes it (apiVersion, kind, metadata, ...), kept
    /// as its compact text until its turn: as a `Value` a rendered Deployment is about
    /// 7 KiB (a map node is 600 bytes however few keys it has), and a sync holds every
    /// object it renders, 160 MiB of a 10,000-spec sync's 310 MiB heap.
    pub body: Packed,
    /// Its spec's policy (`spec::policy`): what apply, diff and prune do with it. Shared
    /// by the objects of a spec (and by every object with the default policy): inline,
    /// it was 176 of each object's 384 bytes, 3.6 MiB of a 10,000-spec render kept
    /// between syncs.
    pub policy: Arc<ObjectPolicy>,
    /// Where its spec is written, for a refusal of its fields (`file:line:col`); one
    /// for all the objects of a spec.
    pub at: Option<Arc<crate::spec::Location>>,
}

impl Object {
    /// The API group ("" for core).
    pub fn group(&self) -> &str {
        crate::object::group_of(&self.api_version)
    }

    /// The key of this object (its namespace as rendered).
    pub fn key(&self) -> ObjKey {
        ObjKey {
            group: self.group().to_string(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: self.name.clone(),
        }
    }

    /// `Kind[.group] namespace/name`, for messages.
    pub fn display_ref(&self) -> String {
        let kind = if self.group().is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group())
        };
        match &self.namespace {
            Some(ns) => format!("{kind} {ns}/{}", self.name),
            None => format!("{kind} {}", self.name),
        }
    }

    /// Namespaces first, then CRDs, then everything else: what later objects need exists.
    pub fn apply_phase(&self) -> u8 {
        crate::object::apply_phase(self.group(), &self.kind)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("{spec}: serialising {what}: {source}")]
    Serialize {
        spec: SpecId,
        what: &'static str,
        source: serde_json::Error,
    },
    /// Two specs render the same object: possible only for a localservice's per-node
    /// Services, whose names depend on the cluster's nodes (validation catches the rest).
    #[error("{object} is rendered by both {first} and {second}; rename one of them")]
    Collision {
        object: String,
        /// The two specs' identities, `kind/namespace/name`.
        first: String,
        second: String,
    },
    #[error("writing YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// Sets (or, for `None`, removes) an object's `metadata.namespace`.
pub(crate) fn set_namespace(body: &mut Value, namespace: Option<&str>) {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        match namespace {
            Some(ns) => {
                meta.insert("namespace".into(), ns.into());
            }
            None => {
                meta.remove("namespace");
            }
        }
    }
}

/// The policy of an object whose spec says nothing of one, one for all of them.
pub(crate) fn default_policy() -> Arc<ObjectPolicy> {
    static DEFAULT: LazyLock<Arc<ObjectPolicy>> = LazyLock::new(Arc::default);
    DEFAULT.clone()
}

/// One spec's objects, with what the tree's settings say of each.
pub(crate) fn render_spec(
    spec: &Spec,
    settings: &Settings,
    facts: &Facts,
) -> Result<Vec<Object>, RenderError> {
    let mut objects = match &spec.body {
        SpecBody::Workspace(w) => kinds::workspace(&spec.id, w, facts)?,
        SpecBody::ElasticWeb(e) => kinds::elasticweb(&spec.id, e, facts)?,
        SpecBody::LocalService(l) => kinds::localservice(&spec.id, l, facts)?,
        SpecBody::Manifest(m) => vec![kinds::manifest(&spec.id, m, facts)],
    };
    if spec.policy != ObjectPolicy::default() {
        let policy = Arc::new(spec.policy.clone());
        for o in &mut objects {
            o.policy = policy.clone();
        }
    }
    let at = Arc::new(spec.at.clone());
    for o in &mut objects {
        tree_rules::apply(settings, o, &spec.at.file);
        o.at = Some(at.clone());
    }
    Ok(objects)
}

/// Renders `specs` one at a time, handing each spec's objects to `each` and checking
/// that no two specs render the same object. Only the objects' identities are kept
/// across specs, so a caller that needs a few specs' bodies (or none) never holds the
/// whole tree's (about 15 MiB at 1,000 specs).
pub(crate) fn render_each<'a>(
    specs: impl IntoIterator<Item = &'a Spec>,
    settings: &Settings,
    facts: &Facts,
    mut each: impl FnMut(&'a Spec, Vec<Object>),
) -> Result<(), RenderError> {
    let mut seen: BTreeMap<(String, String, Option<String>, String), &SpecId> = BTreeMap::new();
    for spec in specs {
        let rendered = render_spec(spec, settings, facts)?;
        for o in &rendered {
            let key = (
                o.group().to_string(),
                o.kind.clone(),
                o.namespace.clone(),
                o.name.clone(),
            );
            if let Some(first) = seen.insert(key, &spec.id) {
                return Err(RenderError::Collision {
                    object: o.display_ref(),
                    first: first.to_string(),
                    second: o.spec.to_string(),
                });
            }
        }
        each(spec, rendered);
    }
    Ok(())
}

/// All objects of a tree, in apply order (stable: spec order within a phase).
pub fn render(tree: &SpecTree, facts: &Facts) -> Result<Vec<Object>, RenderError> {
    let mut objects = Vec::new();
    render_each(&tree.specs, &tree.settings, facts, |_, rendered| {
        objects.extend(rendered)
    })?;
    objects.sort_by_key(Object::apply_phase);
    Ok(objects)
}

/// Multi-document YAML of the objects, in the order given.
pub fn to_yaml(objects: &[Object]) -> Result<String, RenderError> {
    let bodies: Vec<Value> = objects.iter().map(|o| o.body.value()).collect();
    // Multi-line strings stay literal blocks (`|`), but a long single-line value (an
    // annotation, an image reference) is never folded: kubectl users read these raw.
    let mut options = serde_saphyr::SerializerOptions::default();
    options.folded_wrap_chars = usize::MAX;
    Ok(serde_saphyr::to_string_multiple_with_options(
        &bodies, options,
    )?)
}
