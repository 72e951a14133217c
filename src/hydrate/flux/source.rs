//! Where a Flux Kustomization reads from: this repository (a GitRepository that is it) or
//! an artifact an ArtifactGenerator makes of it, made on disk by its copy rules.

use serde_json::Value;

use super::artifact::options as copy_options;
use super::model::*;
use crate::hydrate::not_carried_out::{NotCarriedOut, Refusal};
use crate::hydrate::shape;
use crate::spec::{Location, SpecError};

/// Whether `k` is built here, from this repository or from an artifact an
/// ArtifactGenerator makes of it (then its copy rules are put on `k`).
pub(super) fn from_source(
    k: &mut Kustomization,
    generators: &[Generator],
    origins: &Origins,
    root: Option<&str>,
) -> Result<bool, SpecError> {
    let source = &k.spec.source_ref;
    if source.kind.as_deref() != Some("ExternalArtifact") {
        return followed(k, origins, root);
    }
    let name = source.name.clone().unwrap_or_default();
    let ns = source
        .namespace
        .clone()
        .unwrap_or_else(|| k.namespace.clone());
    let said = |why: String| {
        err(
            k.at.clone(),
            format!(
                "{}: its ExternalArtifact {ns}/{name} {why}; nothing is applied",
                k.said()
            ),
        )
    };
    let generator = generators
        .iter()
        .find(|g| g.namespace == ns && g.names.contains(&name));
    let artifact = generator.and_then(|g| {
        let spec = g.spec.as_ref().ok()?;
        let artifact = spec
            .artifacts
            .iter()
            .find(|a| a.name.as_deref() == Some(name.as_str()))?;
        Some((spec, artifact))
    });
    let (spec, artifact) = match (generator, artifact) {
        (Some(Generator { spec: Err(r), .. }), _) => {
            return Err(r.holds(&k.said()));
        }
        (Some(_), Some(found)) => found,
        _ => {
            return Err(said(
                "is made by no ArtifactGenerator the tree holds".into(),
            ));
        }
    };
    let gns = ns.as_str();
    if spec.path_pattern.is_some() {
        return Err(said(format!(
            "is made by an ArtifactGenerator whose {}",
            NotCarriedOut::field("pathPattern")
        )));
    }
    let mut rules = Vec::new();
    for rule in &artifact.copy {
        let (exclude, strategy) = copy_options(rule).map_err(|e| said(e.to_string()))?;
        // Their shape is checked: a string, or absent.
        let from = rule["from"].as_str().unwrap_or_default();
        let to = rule["to"].as_str().unwrap_or_default();
        let Some((alias, rest)) = from.strip_prefix('@').and_then(|f| f.split_once('/')) else {
            return Err(said(format!("copies from {from:?}, which names no source")));
        };
        let source = spec
            .sources
            .iter()
            .find(|s| s.alias.as_deref() == Some(alias));
        let (kind, sns, sname) = source.map_or(("", gns, ""), |s| {
            (
                s.kind.as_deref().unwrap_or_default(),
                s.namespace.as_deref().unwrap_or(gns),
                s.name.as_deref().unwrap_or_default(),
            )
        });
        if let Some(refused) = refusal(kind, sns, sname, origins) {
            return Err(refused.holds(&k.said()));
        }
        let this_repo = source.is_some() && is_this_repository(kind, sns, sname, origins);
        if !this_repo {
            return Err(said(format!(
                "copies from source {alias:?}, which is not the repository being read"
            )));
        }
        let Some(to) = to.strip_prefix("@artifact") else {
            return Err(said(format!("copies to {to:?}, not into `@artifact/`")));
        };
        let dir = to.ends_with('/') || to.is_empty();
        let (Some(from_path), Some(mut to_path)) = (clean_path(rest), clean_path(to)) else {
            return Err(said(format!("copies {from:?} to {to:?}, which leads out")));
        };
        if dir && !to_path.is_empty() {
            to_path.push('/');
        }
        rules.push(CopyRule {
            from: from_path,
            to: to_path,
            exclude,
            strategy,
        });
    }
    k.artifact = Some(rules);
    Ok(true)
}

/// Whether `k` is built here (`false`: it is the tree being read); an error when its
/// source is not this repository.
pub(super) fn followed(
    k: &Kustomization,
    origins: &Origins,
    root: Option<&str>,
) -> Result<bool, SpecError> {
    let r = &k.spec.source_ref;
    let kind = r.kind.as_deref().unwrap_or("GitRepository");
    let name = r.name.as_deref().unwrap_or_default();
    let ns = r.namespace.as_deref().unwrap_or(&k.namespace);
    let this_repo = is_this_repository(kind, ns, name, origins);
    // Bootstrap's Kustomization reads the tree itself, whatever its GitRepository says.
    let tree = this_repo && root == Some(k.path.as_str());
    if let Some(refused) = refusal(kind, ns, name, origins)
        && !tree
    {
        return Err(refused.holds(&k.said()));
    }
    if !this_repo {
        return Err(err(
            k.at.clone(),
            format!(
                "{}: {}; driftless follows only this one, and nothing is applied",
                k.said(),
                Refusal::OtherRepository {
                    named: format!("source {kind} {ns}/{name}"),
                    hint: None
                }
            ),
        ));
    }
    let Some(root) = root else {
        // No tree on disk: the tool says so for each.
        return Ok(true);
    };
    let shown = |p: &str| match p {
        "" => ".".to_string(),
        p => p.to_string(),
    };
    let under =
        |inner: &str, outer: &str| outer.is_empty() || inner.starts_with(&format!("{outer}/"));
    if k.path == root {
        return Ok(false);
    }
    if under(root, &k.path) {
        return Err(err(
            k.at.clone(),
            format!(
                "{}: path {:?} holds the tree being read ({}); point driftless at {:?} instead",
                k.said(),
                shown(&k.path),
                shown(root),
                shown(&k.path)
            ),
        ));
    }
    if under(&k.path, root) {
        return Err(err(
            k.at.clone(),
            format!(
                "{}: path {:?} lies in the tree being read ({}), whose files driftless reads already: point driftless at the path Flux's own Kustomization names (as clusters/NAME)",
                k.said(),
                shown(&k.path),
                shown(root)
            ),
        ));
    }
    Ok(true)
}

/// What source `kind ns/name` (`v`, written in `doc` at `at`) reads, or why it is refused,
/// at the field of the wrong type.
pub(super) fn source_spec(
    v: &Value,
    doc: &str,
    at: &Location,
    kind: &str,
    ns: &str,
    name: &str,
) -> Result<SourceSpec, Refused> {
    read_spec(
        v,
        doc,
        at,
        format!("{kind} {ns}/{name}"),
        &shape::FLUX_SOURCE,
    )
}

/// A GitRepository of this repository is read in place, at the revision being synced: one
/// that names another ref than bootstrap's (a tenant's `ref.branch: dev-team`, as
/// flux2-multi-tenancy has) would be read at that ref by Flux.
pub(super) fn other_refs(sources: &Sources, origins: &Origins) -> Vec<String> {
    const BOOTSTRAP: &str = "GitRepository/flux-system/flux-system";
    let Some(Ok(followed)) = sources
        .get(BOOTSTRAP)
        .map(|s| s.as_ref().map(|s| &s.reference))
    else {
        return Vec::new();
    };
    let said = |r: &Reference| {
        [
            ("branch", &r.branch),
            ("tag", &r.tag),
            ("semver", &r.semver),
            ("name", &r.name),
            ("commit", &r.commit),
        ]
        .into_iter()
        .find_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
        .unwrap_or_else(|| "the default branch".to_string())
    };
    origins
        .iter()
        .filter(|(k, origin)| k.as_str() != BOOTSTRAP && **origin == Origin::This)
        .filter_map(|(k, _)| {
            let r = &sources.get(k)?.as_ref().ok()?.reference;
            (said(r) != said(followed)).then(|| {
                format!(
                    "{k} names {} of this repository: driftless reads it in place, at the revision being synced ({} of flux-system), not at that ref",
                    said(r),
                    said(followed)
                )
            })
        })
        .collect()
}

/// The ArtifactGenerator `v` (written in `doc` at `at`): what it makes, or why it is
/// refused, at the field of the wrong type.
pub(super) fn generator(v: &Value, doc: &str, at: &Location) -> Generator {
    let namespace = v["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let names = v["spec"]["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["name"].as_str().map(str::to_string))
        .collect();
    let spec = read_spec(
        v,
        doc,
        at,
        format!("ArtifactGenerator {namespace}/{name}"),
        &shape::ARTIFACT_GENERATOR,
    );
    Generator {
        namespace: namespace.to_string(),
        names,
        spec,
    }
}

/// `v`'s `spec` (written in `doc` at `at`) read as `T`, once `shape` has refused a field
/// of the wrong type: then `source` (`GitRepository NS/NAME`) is refused at that field.
fn read_spec<T: serde::de::DeserializeOwned + Default>(
    v: &Value,
    doc: &str,
    at: &Location,
    source: String,
    shape: &shape::Shape,
) -> Result<T, Refused> {
    let refused = |key: &str, why: String| Refused {
        at: Location {
            line: at.line + line_of(doc, key),
            ..at.clone()
        },
        source: source.clone(),
        why,
    };
    shape::check(&v["spec"], shape, "spec").map_err(|e| refused(&e.key, e.to_string()))?;
    // Its shape is checked: what could still fail is a `null` where a map is wanted.
    shape::or_default(&v["spec"]).map_err(|e| refused("spec", e.to_string()))
}
