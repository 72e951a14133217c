//! The tree's ConfigMaps and Secrets, read when asked: Flux's `substituteFrom` and
//! `valuesFrom`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::model::*;
use crate::hydrate::merge::{Nulls, merge};
use crate::spec::{Location, SourceFile, SpecError};

/// The ConfigMaps and Secrets the tree holds (as written or rendered): what
/// `substituteFrom` and `valuesFrom` read, as Flux reads them from the cluster.
/// Read only when a Kustomization or HelmRelease asks: most trees never do.
pub(crate) struct TreeData<'a> {
    files: &'a [SourceFile],
    objects: Option<BTreeMap<String, Value>>,
}

impl<'a> TreeData<'a> {
    pub(super) fn new(files: &'a [SourceFile]) -> TreeData<'a> {
        TreeData {
            files,
            objects: None,
        }
    }

    fn index(files: &[SourceFile]) -> BTreeMap<String, Value> {
        let mut objects = BTreeMap::new();
        for f in files.iter().filter(|f| !f.path.ends_with(".toml")) {
            let has = |needle: &[u8]| crate::hydrate::tree::mentions(&f.contents, needle);
            if !has(b"ConfigMap") && !has(b"Secret") {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&f.contents) else {
                continue;
            };
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            for (start, end) in documents(&lines) {
                let Ok(v) = crate::spec::yaml::read_one::<Value>(&lines[start..end].concat())
                else {
                    continue;
                };
                if v["apiVersion"] != "v1"
                    || !matches!(v["kind"].as_str(), Some("ConfigMap" | "Secret"))
                {
                    continue;
                }
                let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                objects.insert(
                    format!("{}/{ns}/{name}", v["kind"].as_str().unwrap_or_default()),
                    v,
                );
            }
        }
        objects
    }

    /// The string data of ConfigMap or Secret `ns/name` (a Secret's `data` decoded);
    /// `Ok(None)` when the tree does not hold it.
    fn read(&mut self, kind: &str, ns: &str, name: &str) -> Result<Option<StringData>, DataError> {
        use base64::Engine as _;
        let files = self.files;
        let objects = self.objects.get_or_insert_with(|| TreeData::index(files));
        let Some(v) = objects.get(&format!("{kind}/{ns}/{name}")) else {
            return Ok(None);
        };
        if v.get("sops").is_some() {
            return Err(DataError::Encrypted(format!("{kind} {ns}/{name}")));
        }
        let mut out = BTreeMap::new();
        for (k, val) in v["data"].as_object().into_iter().flatten() {
            let text = val.as_str().unwrap_or_default();
            let text = match kind {
                "Secret" => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text.trim())
                        .map_err(|_| DataError::NotBase64 {
                            object: format!("{kind} {ns}/{name}"),
                            key: k.clone(),
                        })?;
                    String::from_utf8(bytes).map_err(|_| DataError::NotText {
                        object: format!("{kind} {ns}/{name}"),
                        key: k.clone(),
                    })?
                }
                _ => text.to_string(),
            };
            out.insert(k.clone(), text);
        }
        for (k, val) in v["stringData"].as_object().into_iter().flatten() {
            out.insert(k.clone(), val.as_str().unwrap_or_default().to_string());
        }
        Ok(Some(out))
    }
}

/// A ConfigMap's or Secret's data as text, by key.
type StringData = BTreeMap<String, String>;

/// Why a ConfigMap's or Secret's data is not read (`KIND NS/NAME` each names its object).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DataError {
    #[error("{0} is encrypted with SOPS, and not read for this yet")]
    Encrypted(String),
    #[error("{object}: data.{key} is not base64")]
    NotBase64 { object: String, key: String },
    #[error("{object}: data.{key} is not text")]
    NotText { object: String, key: String },
}

/// A Kustomization's `postBuild.substituteFrom` read from the tree into its `substitute`
/// (whose own values win, as in Flux).
pub(super) fn variables(k: &mut Kustomization, data: &mut TreeData<'_>) -> Result<(), SpecError> {
    let from = &k.spec.post_build.substitute_from;
    if from.is_empty() {
        return Ok(());
    }
    let mut vars = BTreeMap::new();
    for source in from {
        let kind = source.kind.as_deref().unwrap_or("ConfigMap");
        let name = source.name.as_deref().unwrap_or_default();
        let said = |why: String| err(k.at.clone(), format!("{}: substituteFrom: {why}", k.said()));
        match data
            .read(kind, &k.namespace, name)
            .map_err(|e| said(e.to_string()))?
        {
            Some(values) => vars.extend(values),
            None if source.optional == Some(true) => {}
            None => {
                return Err(said(format!(
                    "{kind} {}/{name} is not in the tree",
                    k.namespace
                )));
            }
        }
    }
    let own = k.spec.post_build.substitute.take().unwrap_or_default();
    vars.extend(own);
    k.spec.post_build.substitute = Some(vars);
    Ok(())
}

/// A HelmRelease's `valuesFrom` read from the tree, in order, under its `values` (which
/// win, as in Flux); `targetPath` puts one value at a dotted path.
pub(super) fn values_from(
    at: &Location,
    ns: &str,
    list: &[ValuesReference],
    release: &mut crate::spec::helm::HelmRelease,
    data: &mut TreeData<'_>,
) -> Result<(), SpecError> {
    if list.is_empty() {
        return Ok(());
    }
    let said = |why: String| {
        err(
            at.clone(),
            format!("HelmRelease {ns}/{}: valuesFrom: {why}", release.name),
        )
    };
    let mut merged = json!({});
    for source in list {
        let kind = source.kind.as_deref().unwrap_or("ConfigMap");
        let name = source.name.as_deref().unwrap_or_default();
        let key = source.values_key.as_deref().unwrap_or("values.yaml");
        let optional = source.optional == Some(true);
        let found = data.read(kind, ns, name).map_err(|e| said(e.to_string()))?;
        let Some(text) = found.as_ref().and_then(|d| d.get(key)) else {
            if optional {
                continue;
            }
            return Err(said(match found {
                Some(_) => format!("{kind} {ns}/{name} has no key {key:?}"),
                None => format!("{kind} {ns}/{name} is not in the tree"),
            }));
        };
        let parsed: Value = crate::spec::yaml::read_one(text).map_err(|e| {
            said(format!(
                "{kind} {ns}/{name} key {key:?} is not YAML: {}",
                crate::spec::yaml::said(&e)
            ))
        })?;
        match source.target_path.as_deref() {
            Some(path) => {
                let mut slot = &mut merged;
                for part in path.split('.') {
                    if !slot.is_object() {
                        *slot = json!({});
                    }
                    slot = slot
                        .as_object_mut()
                        .map(|m| m.entry(part.to_string()).or_insert(Value::Null))
                        .ok_or_else(|| said(format!("targetPath {path:?}")))?;
                }
                *slot = parsed;
            }
            None => merge(&mut merged, parsed, Nulls::Keep),
        }
    }
    let own = std::mem::take(&mut release.values);
    merge(&mut merged, own, Nulls::Keep);
    release.values = merged;
    Ok(())
}
