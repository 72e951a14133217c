//! The types of the fields the Flux and Argo CD readers take from an app's object, checked
//! once before they read it, as the object's CRD would have the apiserver check them: a
//! field of the wrong type is refused at its place, where reading it by hand took it as
//! absent (a number as a Kustomization's `spec.path` became the repository's root). Only
//! what a reader takes is declared; unknown fields are `app_yaml::unknown`'s to refuse.

use serde::Deserialize;
use serde_json::Value;

/// What a field holds. `null` is as absent, for every shape.
#[derive(Debug)]
pub enum Shape {
    Text,
    Flag,
    /// A map of any content: Helm values.
    Map,
    /// A map from names to strings: labels, annotations, substitutions.
    Strings,
    List(&'static Shape),
    /// A map whose named fields have these shapes; others are not checked here.
    Fields(&'static [(&'static str, Shape)]),
}

/// A field whose value is not of its shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` is {found}, not {want}")]
pub struct WrongType {
    /// From the checked object's root: `spec.sourceRef.name`, `spec.sources[1].path`.
    pub path: String,
    /// The field's own name, by which its line is found.
    pub key: String,
    want: &'static str,
    found: &'static str,
}

/// Checks `v`, found at `path`, against `shape`.
pub fn check(v: &Value, shape: &Shape, path: &str) -> Result<(), WrongType> {
    let fits = match (shape, v) {
        (_, Value::Null) => true,
        (Shape::Text, Value::String(_)) | (Shape::Flag, Value::Bool(_)) => true,
        (Shape::Map, Value::Object(_)) => true,
        (Shape::Strings, Value::Object(map)) => {
            for (key, value) in map {
                if !value.is_string() {
                    return Err(wrong(value, "a string", format!("{path}.{key}"), key));
                }
            }
            true
        }
        (Shape::List(item), Value::Array(items)) => {
            for (i, value) in items.iter().enumerate() {
                check(value, item, &format!("{path}[{i}]"))?;
            }
            true
        }
        (Shape::Fields(fields), Value::Object(map)) => {
            for (key, shape) in fields.iter() {
                if let Some(value) = map.get(*key) {
                    check(value, shape, &format!("{path}.{key}"))?;
                }
            }
            true
        }
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let want = match shape {
        Shape::Text => "a string",
        Shape::Flag => "true or false",
        Shape::Map | Shape::Strings | Shape::Fields(_) => "a map",
        Shape::List(_) => "a list",
    };
    let key = path
        .rsplit('.')
        .next()
        .unwrap_or(path)
        .split('[')
        .next()
        .unwrap_or_default();
    Err(wrong(v, want, path.to_string(), key))
}

fn wrong(v: &Value, want: &'static str, path: String, key: &str) -> WrongType {
    let found = match v {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    };
    WrongType {
        path,
        key: key.to_string(),
        want,
        found,
    }
}

/// A reference to another object by name: `dependsOn` entries.
const NAMED: Shape = Shape::Fields(&[("name", Shape::Text), ("namespace", Shape::Text)]);
const SOURCE_REF: Shape = Shape::Fields(&[
    ("apiVersion", Shape::Text),
    ("kind", Shape::Text),
    ("name", Shape::Text),
    ("namespace", Shape::Text),
]);
const METADATA: Shape =
    Shape::Fields(&[("labels", Shape::Strings), ("annotations", Shape::Strings)]);

/// Flux's `spec.kubeConfig`, of a Kustomization or a HelmRelease.
const KUBE_CONFIG: Shape = Shape::Fields(&[(
    "secretRef",
    Shape::Fields(&[("name", Shape::Text), ("key", Shape::Text)]),
)]);

/// A Flux Kustomization's `spec` (kustomize.toolkit.fluxcd.io/v1), as far as it is read.
pub(crate) const KUSTOMIZATION: Shape = Shape::Fields(&[
    ("kubeConfig", KUBE_CONFIG),
    ("path", Shape::Text),
    ("targetNamespace", Shape::Text),
    ("namePrefix", Shape::Text),
    ("nameSuffix", Shape::Text),
    ("prune", Shape::Flag),
    ("force", Shape::Flag),
    ("wait", Shape::Flag),
    ("suspend", Shape::Flag),
    ("serviceAccountName", Shape::Text),
    ("interval", Shape::Text),
    ("timeout", Shape::Text),
    ("components", Shape::List(&Shape::Text)),
    ("patches", Shape::List(&Shape::Map)),
    ("images", Shape::List(&Shape::Map)),
    ("sourceRef", SOURCE_REF),
    ("dependsOn", Shape::List(&NAMED)),
    ("commonMetadata", METADATA),
    (
        "postBuild",
        Shape::Fields(&[
            ("substitute", Shape::Strings),
            (
                "substituteFrom",
                Shape::List(&Shape::Fields(&[
                    ("kind", Shape::Text),
                    ("name", Shape::Text),
                    ("optional", Shape::Flag),
                ])),
            ),
        ]),
    ),
]);

/// A Flux HelmRelease's `spec` (helm.toolkit.fluxcd.io/v2), as far as it is read.
pub(crate) const HELM_RELEASE: Shape = Shape::Fields(&[
    ("kubeConfig", KUBE_CONFIG),
    ("releaseName", Shape::Text),
    ("targetNamespace", Shape::Text),
    ("storageNamespace", Shape::Text),
    ("serviceAccountName", Shape::Text),
    ("suspend", Shape::Flag),
    ("values", Shape::Map),
    ("dependsOn", Shape::List(&NAMED)),
    (
        "chart",
        Shape::Fields(&[(
            "spec",
            Shape::Fields(&[
                ("chart", Shape::Text),
                ("version", Shape::Text),
                ("sourceRef", SOURCE_REF),
            ]),
        )]),
    ),
    ("chartRef", SOURCE_REF),
    (
        "valuesFrom",
        Shape::List(&Shape::Fields(&[
            ("kind", Shape::Text),
            ("name", Shape::Text),
            ("valuesKey", Shape::Text),
            ("targetPath", Shape::Text),
            ("optional", Shape::Flag),
        ])),
    ),
    (
        "install",
        Shape::Fields(&[
            ("crds", Shape::Text),
            ("createNamespace", Shape::Flag),
            ("disableWait", Shape::Flag),
        ]),
    ),
    ("upgrade", Shape::Fields(&[("disableWait", Shape::Flag)])),
]);

/// A Flux source's `spec` (source.toolkit.fluxcd.io/v1 GitRepository, OCIRepository,
/// HelmRepository, Bucket), as far as it is read. `verify` is read apart (`flux::verify`).
pub(crate) const FLUX_SOURCE: Shape = Shape::Fields(&[
    ("url", Shape::Text),
    ("type", Shape::Text),
    ("insecure", Shape::Flag),
    (
        "ref",
        Shape::Fields(&[
            ("branch", Shape::Text),
            ("tag", Shape::Text),
            ("semver", Shape::Text),
            ("name", Shape::Text),
            ("commit", Shape::Text),
            ("digest", Shape::Text),
        ]),
    ),
    ("secretRef", Shape::Fields(&[("name", Shape::Text)])),
    ("certSecretRef", Shape::Fields(&[("name", Shape::Text)])),
]);

/// A Flux ArtifactGenerator's `spec` (source.extensions.fluxcd.io/v1beta1), as far as it
/// is read. A copy rule's `exclude` is read apart, with its patterns (`flux::artifact`).
pub(crate) const ARTIFACT_GENERATOR: Shape = Shape::Fields(&[
    (
        "sources",
        Shape::List(&Shape::Fields(&[
            ("alias", Shape::Text),
            ("kind", Shape::Text),
            ("name", Shape::Text),
            ("namespace", Shape::Text),
        ])),
    ),
    (
        "artifacts",
        Shape::List(&Shape::Fields(&[
            ("name", Shape::Text),
            (
                "copy",
                Shape::List(&Shape::Fields(&[
                    ("from", Shape::Text),
                    ("to", Shape::Text),
                    ("strategy", Shape::Text),
                ])),
            ),
        ])),
    ),
]);

/// One source of an Argo CD Application, as far as it is read.
const ARGO_SOURCE: Shape = Shape::Fields(&[
    ("repoURL", Shape::Text),
    ("path", Shape::Text),
    ("targetRevision", Shape::Text),
    ("chart", Shape::Text),
    ("ref", Shape::Text),
    (
        "helm",
        Shape::Fields(&[
            ("releaseName", Shape::Text),
            ("namespace", Shape::Text),
            ("valueFiles", Shape::List(&Shape::Text)),
            ("values", Shape::Text),
            ("valuesObject", Shape::Map),
            ("skipCrds", Shape::Flag),
            ("ignoreMissingValueFiles", Shape::Flag),
            ("kubeVersion", Shape::Text),
            ("apiVersions", Shape::List(&Shape::Text)),
            (
                "parameters",
                Shape::List(&Shape::Fields(&[
                    ("name", Shape::Text),
                    ("value", Shape::Text),
                    ("forceString", Shape::Flag),
                ])),
            ),
        ]),
    ),
    (
        "kustomize",
        Shape::Fields(&[
            ("namePrefix", Shape::Text),
            ("nameSuffix", Shape::Text),
            ("namespace", Shape::Text),
            ("images", Shape::List(&Shape::Text)),
            ("components", Shape::List(&Shape::Text)),
            ("patches", Shape::List(&Shape::Map)),
            ("replicas", Shape::List(&Shape::Map)),
            ("commonLabels", Shape::Strings),
            ("commonAnnotations", Shape::Strings),
        ]),
    ),
    (
        "directory",
        Shape::Fields(&[
            ("recurse", Shape::Flag),
            ("include", Shape::Text),
            ("exclude", Shape::Text),
        ]),
    ),
]);

/// An Argo CD Application's `spec` (argoproj.io/v1alpha1), as far as it is read.
pub(crate) const APPLICATION: Shape = Shape::Fields(&[
    ("project", Shape::Text),
    (
        "destination",
        Shape::Fields(&[
            ("server", Shape::Text),
            ("name", Shape::Text),
            ("namespace", Shape::Text),
        ]),
    ),
    ("source", ARGO_SOURCE),
    ("sources", Shape::List(&ARGO_SOURCE)),
    (
        "syncPolicy",
        Shape::Fields(&[
            ("syncOptions", Shape::List(&Shape::Text)),
            (
                "automated",
                Shape::Fields(&[("prune", Shape::Flag), ("selfHeal", Shape::Flag)]),
            ),
        ]),
    ),
    ("ignoreDifferences", Shape::List(&Shape::Map)),
]);

/// A git generator's `directories[]` or `files[]` entry.
const PATH_RULE: Shape = Shape::Fields(&[("path", Shape::Text), ("exclude", Shape::Flag)]);

/// An Argo CD ApplicationSet's `spec` (argoproj.io/v1alpha1), as far as it is read: the
/// generators carried out, not their template, which becomes an Application.
pub(crate) const APPLICATION_SET: Shape = Shape::Fields(&[
    ("goTemplate", Shape::Flag),
    (
        "generators",
        Shape::List(&Shape::Fields(&[
            (
                "list",
                Shape::Fields(&[
                    ("elements", Shape::List(&Shape::Map)),
                    ("template", Shape::Map),
                ]),
            ),
            (
                "git",
                Shape::Fields(&[
                    ("repoURL", Shape::Text),
                    ("directories", Shape::List(&PATH_RULE)),
                    ("files", Shape::List(&PATH_RULE)),
                    ("template", Shape::Map),
                ]),
            ),
            (
                "clusters",
                Shape::Fields(&[
                    (
                        "selector",
                        Shape::Fields(&[
                            ("matchLabels", Shape::Map),
                            (
                                "matchExpressions",
                                Shape::List(&Shape::Fields(&[
                                    ("key", Shape::Text),
                                    ("operator", Shape::Text),
                                    ("values", Shape::List(&Shape::Text)),
                                ])),
                            ),
                        ]),
                    ),
                    ("values", Shape::Map),
                    ("flatList", Shape::Flag),
                    ("template", Shape::Map),
                ]),
            ),
        ])),
    ),
]);

/// A list with its `null` entries left out, as absent ones: for a typed model read after
/// its shape is checked (serde's `deserialize_with`), as `or_default`.
pub(crate) fn without_nulls<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let list = Option::<Vec<Option<T>>>::deserialize(d)?;
    Ok(list.into_iter().flatten().flatten().collect())
}

/// `null` read as absent, as the shape check and the apiserver take it.
pub(crate) fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_of_another_type_is_named_with_its_path() {
        let spec = json!({"path": 5, "prune": true});
        assert_eq!(
            check(&spec, &KUSTOMIZATION, "spec")
                .unwrap_err()
                .to_string(),
            "`spec.path` is a number, not a string"
        );
        let spec = json!({"sources": [{"repoURL": "https://x"}, {"path": ["a"]}]});
        let e = check(&spec, &APPLICATION, "spec").unwrap_err();
        assert_eq!(
            e.to_string(),
            "`spec.sources[1].path` is a list, not a string"
        );
        assert_eq!(e.key, "path");
        let spec = json!({"postBuild": {"substitute": {"replicas": 3}}});
        assert_eq!(
            check(&spec, &KUSTOMIZATION, "spec")
                .unwrap_err()
                .to_string(),
            "`spec.postBuild.substitute.replicas` is a number, not a string"
        );
        // Read by hand, a map of patches was taken as none.
        let spec = json!({"patches": {"patch": "x"}});
        assert_eq!(
            check(&spec, &KUSTOMIZATION, "spec")
                .unwrap_err()
                .to_string(),
            "`spec.patches` is a map, not a list"
        );
        let spec = json!({"dependsOn": {"name": "a"}});
        assert_eq!(
            check(&spec, &HELM_RELEASE, "spec").unwrap_err().to_string(),
            "`spec.dependsOn` is a map, not a list"
        );
    }

    #[test]
    fn absent_null_and_unlisted_fields_pass() {
        let spec =
            json!({"path": null, "sourceRef": {"kind": "GitRepository", "name": "x"}, "other": 1});
        assert_eq!(check(&spec, &KUSTOMIZATION, "spec"), Ok(()));
        assert_eq!(check(&json!({}), &APPLICATION, "spec"), Ok(()));
    }
}
