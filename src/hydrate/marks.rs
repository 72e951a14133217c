//! What an app puts on the objects it renders, whichever format the app is of and whichever
//! tool rendered them: one [`AppMarks`] per app (a release's and its Application's for an
//! Argo CD chart source, in that order), put on an item's objects by the stage's one loop
//! once the tool has rendered them (`tool::hydrate_with`).

use serde_json::{Map, Value};

use crate::spec::helm::TargetedIgnore;
use crate::spec::order::{ARGO_WAVE, WAVE};
use crate::spec::policy::{APPLY, PRUNE, SUSPEND};

/// What an app puts on each object it renders (a Flux Kustomization's build, a chart
/// release, an Argo CD Application's sources): its namespace where a namespaced object
/// names none, the fields its ignore rules select, and its labels and annotations
/// (driftless's marks), put as `put` says and read as its controller reads the object's
/// own words (`words`).
#[derive(Debug, Clone)]
pub struct AppMarks {
    /// Who puts them, as a failure to read what it renders is said ("Application web").
    pub of: String,
    pub namespace: Option<String>,
    pub ignore: Vec<TargetedIgnore>,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub put: Put,
    pub words: Words,
    /// A Namespace the app creates when missing and never deletes (Argo CD's
    /// `CreateNamespace=true`): put first among these objects unless they hold it. Set on
    /// one render of the app only.
    pub creates_namespace: Option<String>,
}

/// How an app's labels and annotations meet the object's own: the one rule of each
/// format, as its controller has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// Over the object's own: a Flux Kustomization's `commonMetadata` and marks win, as
    /// Flux's kustomize-controller sets them.
    Over,
    /// Where the object has none by that name: a chart release's and an Application's,
    /// as the chart's or the object's own word is its author's.
    WhereMissing,
}

/// The words on an object its app's controller reads as its author's say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// None but driftless's own: a format whose controller reads nothing else on an
    /// object it applies (a new format starts here, with no variant of its own).
    Driftless,
    /// Flux's kustomize-controller: `kustomize.toolkit.fluxcd.io/ssa: IfNotPresent` is
    /// applied only when missing, `ssa: Ignore` and `reconcile: disabled` left alone
    /// (created when missing, never changed or pruned: the nearest driftless has). Flux's
    /// own objects (a HelmRelease, a nested Kustomization) are carried out by their own
    /// controllers, suspended or not by their own `suspend`.
    Flux,
    /// helm: `helm.sh/resource-policy: keep` is left behind on uninstall (never pruned).
    Helm,
    /// Argo CD: an object's own `argocd.argoproj.io/sync-wave` orders it within its app,
    /// and the app's wave is not put on it.
    Argo,
}

const FLUX_SSA: &str = "kustomize.toolkit.fluxcd.io/ssa";
const FLUX_RECONCILE: &str = "kustomize.toolkit.fluxcd.io/reconcile";
const HELM_RESOURCE_POLICY: &str = "helm.sh/resource-policy";

impl AppMarks {
    /// Marks of `of` with nothing to put yet, put as `put` says and read with `words`.
    pub(crate) fn new(of: String, put: Put, words: Words) -> AppMarks {
        AppMarks {
            of,
            namespace: None,
            ignore: Vec::new(),
            labels: Vec::new(),
            annotations: Vec::new(),
            put,
            words,
            creates_namespace: None,
        }
    }

    /// Puts `layers` on `docs`, one render's objects, in order (a later layer meets what
    /// an earlier one put as the object's own); a Namespace a layer creates goes first.
    pub(crate) fn put_all(layers: &[AppMarks], docs: &mut Vec<Value>) {
        if layers.is_empty() {
            return;
        }
        let crds = match layers.iter().any(|l| l.namespace.is_some()) {
            true => cluster_scoped_crds(docs),
            false => Vec::new(),
        };
        for d in docs.iter_mut() {
            for layer in layers {
                layer.put_on(d, &crds);
            }
        }
        for ns in layers.iter().filter_map(|l| l.creates_namespace.as_deref()) {
            if !docs
                .iter()
                .any(|d| d["kind"] == "Namespace" && d["metadata"]["name"] == ns)
            {
                docs.insert(
                    0,
                    serde_json::json!({
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": ns, "annotations": {APPLY: "create-only", PRUNE: "disabled"}},
                    }),
                );
            }
        }
    }

    /// Puts them on `d`, one of the documents whose CustomResourceDefinitions made `crds`
    /// cluster-scoped ([`cluster_scoped_crds`]).
    pub(crate) fn put_on(&self, d: &mut Value, crds: &[(String, String)]) {
        let cluster_scoped = is_cluster_scoped(d, crds);
        // Read before anything is put: the object's author's, not the app's.
        let own = |key: &str| d["metadata"]["annotations"][key].as_str().map(String::from);
        let (flux_ssa, flux_reconcile, helm_policy) = match self.words {
            Words::Flux => (own(FLUX_SSA), own(FLUX_RECONCILE), None),
            Words::Helm => (None, None, own(HELM_RESOURCE_POLICY)),
            Words::Argo | Words::Driftless => (None, None, None),
        };
        let flux_own = self.words == Words::Flux
            && d["apiVersion"].as_str().is_some_and(|a| {
                a.split('/')
                    .next()
                    .is_some_and(|g| g.ends_with(".fluxcd.io"))
            });
        let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if let (false, Some(ns)) = (cluster_scoped, self.namespace.as_deref())
            && meta.get("namespace").is_none_or(Value::is_null)
        {
            meta.insert("namespace".into(), ns.into());
        }
        // Selected once its namespace is set, as the app's controller matches what it
        // applies.
        let pointers: Vec<&str> = self
            .ignore
            .iter()
            .filter(|i| i.select.selects(d))
            .flat_map(|i| i.pointers.iter().map(String::as_str))
            .collect();
        let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let put = |m: &mut Map<String, Value>, key: &str, value: &str| match self.put {
            Put::Over => {
                m.insert(key.into(), value.into());
            }
            Put::WhereMissing => {
                m.entry(key).or_insert_with(|| value.into());
            }
        };
        if !self.labels.is_empty()
            && let Some(l) = meta
                .entry("labels")
                .or_insert_with(|| Value::Object(Default::default()))
                .as_object_mut()
        {
            for (key, value) in &self.labels {
                put(l, key, value);
            }
        }
        let Some(a) = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()))
            .as_object_mut()
        else {
            return;
        };
        let own_wave = self.words == Words::Argo && a.contains_key(ARGO_WAVE);
        for (key, value) in &self.annotations {
            if (key == WAVE && own_wave) || (key == SUSPEND && flux_own) {
                continue;
            }
            put(a, key, value);
        }
        let left_alone =
            flux_ssa.as_deref() == Some("Ignore") || flux_reconcile.as_deref() == Some("disabled");
        if flux_ssa.as_deref() == Some("IfNotPresent") || left_alone {
            put(a, APPLY, "create-only");
        }
        if left_alone {
            put(a, PRUNE, "disabled");
        }
        if helm_policy.as_deref() == Some("keep") {
            a.entry(PRUNE.to_string())
                .or_insert_with(|| "disabled".into());
        }
        ignore_fields(a, &pointers);
        if a.is_empty() {
            meta.remove("annotations");
        }
    }
}

/// The kinds the CustomResourceDefinitions among `docs` make cluster-scoped, as
/// `(group, kind)`.
pub(crate) fn cluster_scoped_crds(docs: &[Value]) -> Vec<(String, String)> {
    docs.iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition" && d["spec"]["scope"] == "Cluster")
        .map(|d| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (s(&d["spec"]["group"]), s(&d["spec"]["names"]["kind"]))
        })
        .collect()
}

/// Whether `doc` is of a cluster-scoped kind: built in, or made so by one of `crds`
/// ([`cluster_scoped_crds`]). A rendered object of any other kind that names no namespace
/// goes to its release's or app's.
pub(crate) fn is_cluster_scoped(doc: &Value, crds: &[(String, String)]) -> bool {
    let group = doc["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(g, _)| g)
        .unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    crate::spec::CLUSTER_SCOPED.contains(&(group, kind))
        || crds.iter().any(|(g, k)| g == group && k == kind)
}

/// Joins `pointers` to the `driftless.dev/ignore-fields` of an object's annotations `a`,
/// each once, after those it lists already.
pub(crate) fn ignore_fields(
    a: &mut Map<String, Value>,
    pointers: impl IntoIterator<Item = impl AsRef<str>>,
) {
    use crate::spec::policy::IGNORE_FIELDS;
    let mut all: Vec<String> = a
        .get(IGNORE_FIELDS)
        .and_then(Value::as_str)
        .map(|s| crate::spec::order::items(s).map(String::from).collect())
        .unwrap_or_default();
    let before = all.len();
    for p in pointers {
        if !all.iter().any(|x| x == p.as_ref()) {
            all.push(p.as_ref().to_string());
        }
    }
    if all.len() > before {
        a.insert(IGNORE_FIELDS.into(), all.join(", ").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_apps_marks_go_where_the_object_has_none_of_its_own() {
        let ignore = vec![crate::spec::helm::TargetedIgnore {
            select: crate::spec::select::ObjectSelector {
                kind: Some("Deployment".into()),
                namespace: Some(crate::spec::select::Pattern::Exact("web".into())),
                ..Default::default()
            },
            pointers: vec!["/spec/replicas".into()],
        }];
        let marks = |words| AppMarks {
            namespace: Some("web".into()),
            ignore: ignore.clone(),
            annotations: vec![(WAVE.into(), "2".into()), (PRUNE.into(), "disabled".into())],
            ..AppMarks::new("Application web".into(), Put::WhereMissing, words)
        };
        let crds = [("example.com".to_string(), "Thing".to_string())];
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"argocd.argoproj.io/sync-wave": "5", "driftless.dev/prune": "enabled"}}});
        marks(Words::Argo).put_on(&mut deployment, &crds);
        // Its namespace set first, so the ignore rule selecting `web` picks it.
        assert_eq!(
            deployment["metadata"],
            json!({"name": "d", "namespace": "web", "annotations": {
                "argocd.argoproj.io/sync-wave": "5",
                "driftless.dev/prune": "enabled",
                "driftless.dev/ignore-fields": "/spec/replicas"}})
        );
        // Without Argo CD's words (a HelmRelease's chart), the app's wave is put.
        let mut thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "t", "annotations": {"argocd.argoproj.io/sync-wave": "5"}}});
        marks(Words::Helm).put_on(&mut thing, &crds);
        assert_eq!(
            thing["metadata"],
            json!({"name": "t", "annotations": {
                "argocd.argoproj.io/sync-wave": "5",
                "driftless.dev/wave": "2",
                "driftless.dev/prune": "disabled"}}),
            "cluster-scoped by its CRD: no namespace"
        );
        // With driftless's words alone, no controller's words on the object count.
        let mut worded = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "w", "namespace": "a", "annotations": {
                "argocd.argoproj.io/sync-wave": "5",
                "helm.sh/resource-policy": "keep",
                "kustomize.toolkit.fluxcd.io/ssa": "Ignore"}}});
        let plain = AppMarks {
            annotations: vec![(WAVE.into(), "2".into())],
            ..AppMarks::new("GitRepo g".into(), Put::WhereMissing, Words::Driftless)
        };
        plain.put_on(&mut worded, &[]);
        assert_eq!(
            worded["metadata"]["annotations"],
            json!({"argocd.argoproj.io/sync-wave": "5",
                "helm.sh/resource-policy": "keep",
                "kustomize.toolkit.fluxcd.io/ssa": "Ignore",
                "driftless.dev/wave": "2"})
        );
        // A Flux Kustomization's: over the object's own, labels too.
        let flux = AppMarks {
            labels: vec![("team".into(), "a".into())],
            annotations: vec![(WAVE.into(), "2".into())],
            ..AppMarks::new("Flux Kustomization a/b".into(), Put::Over, Words::Flux)
        };
        let mut map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"team": "b"}, "annotations": {"driftless.dev/wave": "9"}}});
        flux.put_on(&mut map, &[]);
        assert_eq!(
            map["metadata"],
            json!({"name": "c", "labels": {"team": "a"}, "annotations": {"driftless.dev/wave": "2"}})
        );
    }

    #[test]
    fn layers_go_on_in_order_and_a_namespace_created_goes_first_once() {
        // An Argo CD chart source: the release's marks (helm's words), then the
        // Application's, each where the object has none.
        let release = AppMarks {
            namespace: Some("shop".into()),
            annotations: vec![(WAVE.into(), "1".into())],
            ..AppMarks::new("release web".into(), Put::WhereMissing, Words::Helm)
        };
        let app = AppMarks {
            namespace: Some("other".into()),
            annotations: vec![(WAVE.into(), "7".into()), (PRUNE.into(), "disabled".into())],
            creates_namespace: Some("shop".into()),
            ..AppMarks::new("Application web".into(), Put::WhereMissing, Words::Argo)
        };
        let mut docs = vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"helm.sh/resource-policy": "keep"}}})];
        AppMarks::put_all(&[release.clone(), app.clone()], &mut docs);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["kind"], "Namespace");
        assert_eq!(docs[0]["metadata"]["name"], "shop");
        assert_eq!(
            docs[1]["metadata"],
            json!({"name": "c", "namespace": "shop", "annotations": {
                "helm.sh/resource-policy": "keep",
                "driftless.dev/wave": "1",
                "driftless.dev/prune": "disabled"}})
        );
        // Objects that hold the Namespace are given none.
        let mut docs =
            vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})];
        AppMarks::put_all(&[app], &mut docs);
        assert_eq!(docs.len(), 1);
    }
}
