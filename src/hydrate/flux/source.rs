//! Where a Flux Kustomization reads from: this repository (a GitRepository that is it) or
//! an artifact an ArtifactGenerator makes of it, made on disk by its copy rules.

use serde_json::Value;

use super::artifact::options as copy_options;
use super::model::*;
use crate::hydrate::not_carried_out::NotCarriedOut;
use crate::spec::SpecError;

/// Whether `k` is built here, from this repository or from an artifact an
/// ArtifactGenerator makes of it (then its copy rules are put on `k`).
pub(super) fn from_source(
    k: &mut Kustomization,
    generators: &[Value],
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
                "Kustomization {}/{}: its ExternalArtifact {ns}/{name} {why}; nothing is applied",
                k.namespace, k.name
            ),
        )
    };
    let found = generators.iter().find_map(|g| {
        let gns = g["metadata"]["namespace"].as_str().unwrap_or("default");
        let artifact = g["spec"]["artifacts"]
            .as_array()?
            .iter()
            .find(|a| a["name"] == name.as_str())?;
        (gns == ns).then_some((g, artifact))
    });
    let Some((generator, artifact)) = found else {
        return Err(said(
            "is made by no ArtifactGenerator the tree holds".into(),
        ));
    };
    let gns = generator["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    if generator["spec"].get("pathPattern").is_some() {
        return Err(said(format!(
            "is made by an ArtifactGenerator whose {}",
            NotCarriedOut::field("pathPattern")
        )));
    }
    let mut rules = Vec::new();
    for rule in artifact["copy"].as_array().into_iter().flatten() {
        let (exclude, strategy) = copy_options(rule).map_err(|e| said(e.to_string()))?;
        let from = rule["from"].as_str().unwrap_or_default();
        let to = rule["to"].as_str().unwrap_or_default();
        let Some((alias, rest)) = from.strip_prefix('@').and_then(|f| f.split_once('/')) else {
            return Err(said(format!("copies from {from:?}, which names no source")));
        };
        let source = generator["spec"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["alias"] == alias);
        let this_repo = source.is_some_and(|s| {
            let sname = s["name"].as_str().unwrap_or_default();
            let sns = s["namespace"].as_str().unwrap_or(gns);
            let kind = s["kind"].as_str().unwrap_or_default();
            is_this_repository(kind, sns, sname, origins)
        });
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
    if !this_repo {
        return Err(err(
            k.at.clone(),
            format!(
                "Kustomization {}/{}: its source {kind} {ns}/{name} is not the repository being read; driftless follows only this one, and nothing is applied",
                k.namespace, k.name
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
                "Kustomization {}/{}: path {:?} holds the tree being read ({}); point driftless at {:?} instead",
                k.namespace,
                k.name,
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
                "Kustomization {}/{}: path {:?} lies in the tree being read ({}), whose files driftless reads already: point driftless at the path Flux's own Kustomization names (as clusters/NAME)",
                k.namespace,
                k.name,
                shown(&k.path),
                shown(root)
            ),
        ));
    }
    Ok(true)
}
