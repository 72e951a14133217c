//! An Argo CD source that is a chart, as the release of the `helm` kind Argo CD's
//! repo-server would template: its name, namespace, values files (the chart's own, or
//! `$ref/...` of another source), values and parameters.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::App;
use super::model::{HELM_ACCEPTED, HelmSource, Source, not_carried_out};
use crate::hydrate::app_yaml::clean_path;
use crate::hydrate::apps::Repository;
use crate::hydrate::not_carried_out::NotCarriedOut;
use crate::spec::Location;

/// Why a chart source is not carried out as a release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ChartError {
    #[error(transparent)]
    NotCarriedOut(#[from] NotCarriedOut),
    #[error("`helm.values` is not YAML: {why}")]
    ValuesNotYaml { why: String },
    #[error("parameter {key:?}: {why}")]
    Parameter { key: String, why: ParameterError },
    #[error("values file {file:?} names no `ref` source {name:?}")]
    NoRef { file: String, name: String },
    #[error("values file {file:?} is a URL; not fetched")]
    Url { file: String },
    #[error(
        "values file {file:?} of a chart repository's chart: name it from this repository with a `ref` source (`$values/...`)"
    )]
    OfChartRepository { file: String },
    #[error("values file {file:?} leads out of the repository")]
    LeadsOut { file: String },
}

/// Why a parameter's name is not a path `helm --set` would set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ParameterError {
    #[error(transparent)]
    NotCarriedOut(#[from] NotCarriedOut),
    #[error("an empty key")]
    EmptyKey,
    #[error("not a map")]
    NotAMap,
}

/// The release Argo CD makes of a chart: its name, namespace, values and parameters.
fn release_of(
    at: &Location,
    app_name: &str,
    app: &App,
    h: &HelmSource,
) -> Result<crate::spec::helm::HelmRelease, ChartError> {
    if let Some(key) = not_carried_out(&h.other, HELM_ACCEPTED) {
        return Err(NotCarriedOut::field(format!("helm.{key}")).into());
    }
    let namespace = h
        .namespace
        .clone()
        .or_else(|| app.namespace.clone())
        .unwrap_or_else(|| "default".into());
    let mut values = match (&h.values, &h.values_object) {
        (_, Some(o)) => Value::Object(o.clone()),
        (Some(text), _) if !text.trim().is_empty() => crate::spec::yaml::read_one::<Value>(text)
            .map_err(|e| ChartError::ValuesNotYaml {
                why: crate::spec::yaml::said(&e),
            })?,
        _ => Value::Null,
    };
    for p in &h.parameters {
        let key = p.name.as_deref().unwrap_or_default();
        let raw = p.value.as_deref().unwrap_or_default();
        let value = if p.force_string == Some(true) {
            json!(raw)
        } else {
            set_value(raw)
        };
        set_path(&mut values, key, value).map_err(|why| ChartError::Parameter {
            key: key.to_string(),
            why,
        })?;
    }
    let mut release = crate::hydrate::helm::unnamed_release("", app_name, &namespace, at.clone());
    release.release_name = h.release_name.as_deref().unwrap_or(app_name).to_string();
    release.values = values;
    release.include_crds = h.skip_crds != Some(true);
    release.kube_version = h.kube_version.clone();
    release.api_versions = h.api_versions.clone();
    Ok(release)
}

/// `helm --set`'s reading of a value: a bool, an integer, or a string.
fn set_value(raw: &str) -> Value {
    match raw {
        "true" => json!(true),
        "false" => json!(false),
        "null" => Value::Null,
        _ => raw
            .parse::<i64>()
            .map(|n| json!(n))
            .unwrap_or_else(|_| json!(raw)),
    }
}

/// Sets `a.b.c` (helm's `--set` path; `\.` is a dot in a key) in `values`.
fn set_path(values: &mut Value, path: &str, value: Value) -> Result<(), ParameterError> {
    let mut keys = Vec::new();
    let mut cur = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                cur.push('.');
                chars.next();
            }
            '.' => keys.push(std::mem::take(&mut cur)),
            '[' => return Err(NotCarriedOut::kind("list indexes").into()),
            c => cur.push(c),
        }
    }
    keys.push(cur);
    if keys.iter().any(String::is_empty) {
        return Err(ParameterError::EmptyKey);
    }
    let mut at = values;
    for k in &keys[..keys.len() - 1] {
        if !at.is_object() {
            *at = json!({});
        }
        at = at
            .as_object_mut()
            .map(|o| o.entry(k.clone()).or_insert_with(|| json!({})))
            .ok_or(ParameterError::NotAMap)?;
    }
    if !at.is_object() {
        *at = json!({});
    }
    if let Some(o) = at.as_object_mut() {
        o.insert(keys[keys.len() - 1].clone(), value);
    }
    Ok(())
}

/// `"../"` as many times as the spec root is deep in the repository: paths of the
/// repository as the `helm` kind reads them (from the spec root).
fn up(repo: &Repository) -> String {
    let depth = repo.root.map_or(0, |r| {
        if r.is_empty() {
            0
        } else {
            r.split('/').count()
        }
    });
    "../".repeat(depth)
}

/// Values files as the `helm` kind reads them: `$ref/...` from a `ref` source's root
/// (this repository), the rest from the chart's directory (`dir`; none for a chart of a
/// chart repository, whose files are not this repository's).
fn values_files(
    h: &HelmSource,
    dir: Option<&str>,
    refs: &BTreeMap<String, ()>,
    repo: &Repository,
) -> Result<Vec<String>, ChartError> {
    let optional = h.ignore_missing_value_files == Some(true);
    let mut out = Vec::new();
    for f in &h.value_files {
        let rel = if let Some(rest) = f.strip_prefix('$') {
            let (r, path) = rest.split_once('/').unwrap_or((rest, ""));
            if !refs.contains_key(r) {
                return Err(ChartError::NoRef {
                    file: f.to_string(),
                    name: r.to_string(),
                });
            }
            clean_path(path)
        } else if f.contains("://") {
            return Err(ChartError::Url {
                file: f.to_string(),
            });
        } else {
            match dir {
                Some(d) => clean_path(&format!("{d}/{f}")),
                None => {
                    return Err(ChartError::OfChartRepository {
                        file: f.to_string(),
                    });
                }
            }
        };
        let rel = rel.ok_or_else(|| ChartError::LeadsOut {
            file: f.to_string(),
        })?;
        let there = repo.repo.is_none_or(|r| Path::new(r).join(&rel).is_file());
        if !there && optional {
            continue;
        }
        out.push(format!("{}{rel}", up(repo)));
    }
    Ok(out)
}

/// A chart of this repository at `path`.
pub(super) fn local_release(
    at: &Location,
    name: &str,
    app: &App,
    s: &Source,
    path: &str,
    refs: &BTreeMap<String, ()>,
    repo: &Repository,
) -> Result<crate::spec::helm::HelmRelease, ChartError> {
    let h = s.helm.clone().unwrap_or_default();
    let mut release = release_of(at, name, app, &h)?;
    release.chart = format!("{}{path}", up(repo));
    release.values_files = values_files(&h, Some(path), refs, repo)?;
    Ok(release)
}

/// A chart of a chart repository (HTTP, or OCI named with or without `oci://`).
pub(super) fn chart_release(
    at: &Location,
    name: &str,
    app: &App,
    s: &Source,
    chart: &str,
    refs: &BTreeMap<String, ()>,
    repo: &Repository,
) -> Result<crate::spec::helm::HelmRelease, ChartError> {
    let h = s.helm.clone().unwrap_or_default();
    let mut release = release_of(at, name, app, &h)?;
    let url = s
        .repo_url
        .as_deref()
        .unwrap_or_default()
        .trim_end_matches('/');
    let version = s.target_revision.as_deref().unwrap_or("*");
    if url.starts_with("http://") || url.starts_with("https://") {
        release.chart = chart.to_string();
        release.repository = Some(url.to_string());
    } else {
        let registry = url.strip_prefix("oci://").unwrap_or(url);
        release.chart = format!("oci://{registry}/{chart}");
    }
    release.version = Some(version.to_string());
    release.values_files = values_files(&h, None, refs, repo)?;
    Ok(release)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_set_values_as_helm_set_does() {
        let mut v = json!({"a": {"keep": 1}});
        set_path(&mut v, "a.b", set_value("3")).unwrap();
        set_path(&mut v, "c\\.d", set_value("true")).unwrap();
        set_path(&mut v, "e", set_value("x")).unwrap();
        assert_eq!(v, json!({"a": {"keep": 1, "b": 3}, "c.d": true, "e": "x"}));
        assert_eq!(
            set_path(&mut v, "list[0]", json!(1))
                .unwrap_err()
                .to_string(),
            "list indexes are not carried out by driftless yet"
        );
        let why = set_path(&mut v, "a..b", json!(1)).unwrap_err();
        assert_eq!(
            ChartError::Parameter {
                key: "a..b".into(),
                why
            }
            .to_string(),
            "parameter \"a..b\": an empty key"
        );
    }
}
