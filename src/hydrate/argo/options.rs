//! An Application's `ignoreDifferences` and `kustomize` options in driftless's terms:
//! JSON pointers for what is left to others, and the kustomization fields a build puts in.

use serde_json::{Value, json};

use super::model::{Source, not_carried_out};
use crate::hydrate::kustomize::Overlay;
use crate::hydrate::not_carried_out::NotCarriedOut;
use crate::spec::helm::TargetedIgnore;
use crate::spec::select::{ObjectSelector, Pattern};

/// Why an `ignoreDifferences` entry is not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum IgnoreError {
    #[error(transparent)]
    NotCarriedOut(#[from] NotCarriedOut),
    #[error(
        "the jq expression {jq:?} is not a plain path (`.a.b`, `.a[\"k\"]`); write it as a JSON pointer"
    )]
    NotAPlainPath { jq: String },
    #[error("names no `kind`")]
    NoKind,
}

/// Why an Application's `kustomize` options are not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum KustomizeError {
    #[error(transparent)]
    NotCarriedOut(#[from] NotCarriedOut),
    #[error("image {image:?} names no image")]
    NoImage { image: String },
}

/// An `ignoreDifferences` entry as JSON pointers: `jsonPointers` as they are, and
/// `jqPathExpressions` that are plain paths (`.spec.replicas`, `.data["k"]`).
pub(super) fn ignore(d: &Value) -> Result<TargetedIgnore, IgnoreError> {
    if d.get("managedFieldsManagers").is_some() {
        return Err(NotCarriedOut::field("managedFieldsManagers")
            .instead("its fields are another manager's already")
            .into());
    }
    let mut pointers: Vec<String> = d["jsonPointers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    for jq in d["jqPathExpressions"].as_array().into_iter().flatten() {
        let jq = jq.as_str().unwrap_or_default();
        pointers
            .push(jq_pointer(jq).ok_or_else(|| IgnoreError::NotAPlainPath { jq: jq.to_string() })?);
    }
    let kind = d["kind"].as_str().unwrap_or_default();
    if kind.is_empty() {
        return Err(IgnoreError::NoKind);
    }
    let exact = |key: &str| d[key].as_str().map(|s| Pattern::Exact(s.to_string()));
    Ok(TargetedIgnore {
        select: ObjectSelector {
            group: Some(d["group"].as_str().unwrap_or_default().to_string()),
            kind: Some(kind.to_string()),
            name: exact("name"),
            namespace: exact("namespace"),
            ..ObjectSelector::default()
        },
        pointers,
    })
}

/// `.spec.replicas` or `.data["a.b"]` as `/spec/replicas`, `/data/a.b`.
fn jq_pointer(jq: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = jq.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let key;
        if let Some(r) = rest.strip_prefix("[\"") {
            let end = r.find("\"]")?;
            key = &r[..end];
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            if let Some(r2) = r.strip_prefix("[\"") {
                let end = r2.find("\"]")?;
                key = &r2[..end];
                rest = &r2[end + 2..];
            } else {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                key = &r[..end];
                rest = &r[end..];
                if key.is_empty()
                    || !key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    return None;
                }
            }
        } else {
            return None;
        }
        out.push('/');
        out.push_str(&key.replace('~', "~0").replace('/', "~1"));
    }
    Some(out)
}

/// The Application's `kustomize` options as the overlay its build puts into the
/// kustomization (Argo CD's `kustomize edit` does the same).
pub(super) fn kustomization(
    name: &str,
    s: &Source,
    path: &str,
) -> Result<crate::hydrate::flux::Build, KustomizeError> {
    let k = s.kustomize.clone().unwrap_or_default();
    if let Some(key) = not_carried_out(&k.other, &["version"]) {
        return Err(NotCarriedOut::field(format!("kustomize.{key}")).into());
    }
    let images: Result<Vec<Value>, KustomizeError> = k.images.iter().map(|i| image(i)).collect();
    Ok(crate::hydrate::flux::Build {
        path: path.to_string(),
        overlay: Overlay {
            namespace: k.namespace,
            name_prefix: k.name_prefix,
            name_suffix: k.name_suffix,
            patches: k.patches,
            common_labels: k.common_labels,
            common_annotations: k.common_annotations,
            replicas: k.replicas,
            images: images?,
            components: k.components,
        },
        label: format!("argo/{name}"),
    })
}

/// `kustomize edit set image`'s `[OLD=]NEW[:TAG|@DIGEST]` as a kustomization image.
fn image(text: &str) -> Result<Value, KustomizeError> {
    let (old, new) = match text.split_once('=') {
        Some((o, n)) => (Some(o), n),
        None => (None, text),
    };
    let (new_name, tag, digest) = match new.split_once('@') {
        Some((n, d)) => (n, None, Some(d)),
        None => {
            let slash = new.rfind('/').map_or(0, |i| i + 1);
            match new[slash..].split_once(':') {
                Some((n, t)) => (&new[..slash + n.len()], Some(t), None),
                None => (new, None, None),
            }
        }
    };
    if new_name.is_empty() {
        return Err(KustomizeError::NoImage {
            image: text.to_string(),
        });
    }
    let mut out = serde_json::Map::new();
    out.insert("name".into(), json!(old.unwrap_or(new_name)));
    if old.is_some_and(|o| o != new_name) {
        out.insert("newName".into(), json!(new_name));
    }
    if let Some(t) = tag {
        out.insert("newTag".into(), json!(t));
    }
    if let Some(d) = digest {
        out.insert("digest".into(), json!(d));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jq_paths_become_pointers() {
        assert_eq!(
            jq_pointer(".spec.replicas").as_deref(),
            Some("/spec/replicas")
        );
        assert_eq!(
            jq_pointer(".data[\"a.b/c\"]").as_deref(),
            Some("/data/a.b~1c")
        );
        assert_eq!(
            jq_pointer(".spec.template.spec.containers[] | select(.name == \"x\")"),
            None
        );
    }

    #[test]
    fn refusals_say_what_is_not_carried_out() {
        let jq = serde_json::json!({"kind": "Deployment", "jqPathExpressions": [".a | b"]});
        assert_eq!(
            ignore(&jq).unwrap_err().to_string(),
            "the jq expression \".a | b\" is not a plain path (`.a.b`, `.a[\"k\"]`); write it as a JSON pointer"
        );
        assert_eq!(
            ignore(&serde_json::json!({})).unwrap_err().to_string(),
            "names no `kind`"
        );
        assert_eq!(
            image("=:1").unwrap_err().to_string(),
            "image \"=:1\" names no image"
        );
    }

    #[test]
    fn images_as_kustomize_edit_reads_them() {
        assert_eq!(
            image("nginx=registry.local/nginx:1.27").unwrap(),
            json!({"name": "nginx", "newName": "registry.local/nginx", "newTag": "1.27"})
        );
        assert_eq!(
            image("localhost:5000/web:2").unwrap(),
            json!({"name": "localhost:5000/web", "newTag": "2"})
        );
        assert_eq!(
            image("web@sha256:abc").unwrap(),
            json!({"name": "web", "digest": "sha256:abc"})
        );
    }
}
