//! Where a Flux Kustomization reads from: this repository (a GitRepository that is it) or
//! an artifact an ArtifactGenerator makes of it, made on disk by its copy rules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::*;
use crate::spec::SpecError;

/// Whether `k` is built here, from this repository or from an artifact an
/// ArtifactGenerator makes of it (then its copy rules are put on `k`).
pub(super) fn from_source(
    k: &mut Kustomization,
    generators: &[Value],
    sources: &BTreeMap<String, Option<String>>,
    own: Option<&str>,
    root: Option<&str>,
) -> Result<bool, SpecError> {
    if k.spec["sourceRef"]["kind"] != "ExternalArtifact" {
        return followed(k, sources, own, root);
    }
    let name = k.spec["sourceRef"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = k.spec["sourceRef"]["namespace"]
        .as_str()
        .unwrap_or(&k.namespace)
        .to_string();
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
    let mut rules = Vec::new();
    for rule in artifact["copy"].as_array().into_iter().flatten() {
        if rule.get("exclude").is_some() {
            return Err(said(
                "has a copy rule with `exclude`, not carried out by driftless yet".into(),
            ));
        }
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
            s["kind"] == "GitRepository" && is_this_repository(sns, sname, sources, own)
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
        let from_path = if rest.ends_with("/**") || rest == "**" {
            format!(
                "{}/**",
                from_path.trim_end_matches("/**").trim_end_matches("**")
            )
            .trim_start_matches('/')
            .to_string()
        } else {
            from_path
        };
        rules.push(CopyRule {
            from: from_path,
            to: to_path,
        });
    }
    k.artifact = Some(rules);
    Ok(true)
}

/// Makes the artifact `rules` describe of `repo` in `into`.
pub(super) fn materialise(repo: &Path, rules: &[CopyRule], into: &Path) -> Result<(), String> {
    let inside = |p: &Path| -> Result<PathBuf, String> {
        let real = p
            .canonicalize()
            .map_err(|e| format!("{}: {e}", p.strip_prefix(repo).unwrap_or(p).display()))?;
        match real.starts_with(repo) {
            true => Ok(real),
            false => Err(format!(
                "{} leads out of the repository",
                p.strip_prefix(repo).unwrap_or(p).display()
            )),
        }
    };
    let copy = |from: &Path, to: &Path| -> Result<(), String> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::copy(from, to).map(drop).map_err(|e| e.to_string())
    };
    let all_under = |dir: &Path, to: &Path| -> Result<(), String> {
        let mut pending = vec![dir.to_path_buf()];
        while let Some(d) = pending.pop() {
            for e in std::fs::read_dir(&d).map_err(|e| e.to_string())?.flatten() {
                let p = inside(&e.path())?;
                if p.is_dir() {
                    pending.push(p);
                } else {
                    copy(&p, &to.join(p.strip_prefix(dir).unwrap_or(&p)))?;
                }
            }
        }
        Ok(())
    };
    for rule in rules {
        let to = into.join(&rule.to);
        if let Some(dir) = rule.from.strip_suffix("**") {
            let dir = inside(&repo.join(dir.trim_end_matches('/')))?;
            all_under(&dir, &to)?;
        } else if rule
            .from
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains('*'))
        {
            let (dir, glob) = rule
                .from
                .rsplit_once('/')
                .unwrap_or(("", rule.from.as_str()));
            let dir = inside(&repo.join(dir))?;
            for e in std::fs::read_dir(&dir)
                .map_err(|e| e.to_string())?
                .flatten()
            {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = inside(&e.path())?;
                if p.is_file() && glob_match(glob, &name) {
                    copy(&p, &to.join(&name))?;
                }
            }
        } else {
            let src = inside(&repo.join(&rule.from))?;
            let base = src.file_name().map(PathBuf::from).unwrap_or_default();
            let into_dir = rule.to.is_empty() || rule.to.ends_with('/');
            match (src.is_dir(), into_dir) {
                (true, _) => all_under(&src, &to.join(base))?,
                (false, true) => copy(&src, &to.join(base))?,
                (false, false) => copy(&src, &to)?,
            }
        }
    }
    Ok(())
}

/// `*` matches any run of characters within a name; nothing else is special.
pub(super) fn glob_match(glob: &str, name: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return glob == name;
    }
    if !name.starts_with(first)
        || !name[first.len()..].ends_with(last)
        || name.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `k` is built here (`false`: it is the tree being read); an error when its
/// source is not this repository.
pub(super) fn followed(
    k: &Kustomization,
    sources: &BTreeMap<String, Option<String>>,
    own: Option<&str>,
    root: Option<&str>,
) -> Result<bool, SpecError> {
    let r = &k.spec["sourceRef"];
    let kind = r["kind"].as_str().unwrap_or("GitRepository");
    let name = r["name"].as_str().unwrap_or_default();
    let ns = r["namespace"].as_str().unwrap_or(&k.namespace);
    let this_repo = kind == "GitRepository" && is_this_repository(ns, name, sources, own);
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
