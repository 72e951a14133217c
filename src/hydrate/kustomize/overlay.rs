//! What a GitOps tool puts into a kustomization before it builds it, as `kustomize edit`
//! would: Flux's Kustomization fields and Argo CD's `kustomize` options both map to one
//! [`Overlay`], and the build knows neither tool.

use serde_json::{Map, Value, json};

/// A kustomization's overlay: each field put into the kustomization's own (a list
/// extended, a map merged, a scalar replaced).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlay {
    /// `namespace`: Flux's `targetNamespace`, Argo CD's `kustomize.namespace`.
    pub namespace: Option<String>,
    pub name_prefix: Option<String>,
    pub name_suffix: Option<String>,
    /// Appended to the kustomization's `patches`.
    pub patches: Vec<Value>,
    /// Merged into `commonLabels` and `commonAnnotations` (Argo CD's only).
    pub common_labels: Map<String, Value>,
    pub common_annotations: Map<String, Value>,
    /// Appended to `replicas` (Argo CD's only).
    pub replicas: Vec<Value>,
    /// Each replaces the kustomization's image of the same `name`, or is added.
    pub images: Vec<Value>,
    /// Component directories (relative to the kustomization's), appended; their files
    /// are read by the build, so the caller checks each (a path, inside the repository).
    pub components: Vec<Value>,
}

impl Overlay {
    /// Puts the overlay into `kus`, a kustomization's top-level map.
    pub(crate) fn put_into(&self, kus: &mut Map<String, Value>) {
        if let Some(ns) = &self.namespace {
            kus.insert("namespace".into(), json!(ns));
        }
        for (field, value) in [
            ("namePrefix", &self.name_prefix),
            ("nameSuffix", &self.name_suffix),
        ] {
            if let Some(v) = value {
                kus.insert(field.into(), json!(v));
            }
        }
        for (field, extra) in [
            ("patches", &self.patches),
            ("replicas", &self.replicas),
            ("components", &self.components),
        ] {
            if extra.is_empty() {
                continue;
            }
            if let Some(list) = kus.entry(field).or_insert_with(|| json!([])).as_array_mut() {
                list.extend(extra.iter().cloned());
            }
        }
        for (field, extra) in [
            ("commonLabels", &self.common_labels),
            ("commonAnnotations", &self.common_annotations),
        ] {
            if extra.is_empty() {
                continue;
            }
            if let Some(map) = kus
                .entry(field)
                .or_insert_with(|| json!({}))
                .as_object_mut()
            {
                map.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        if !self.images.is_empty()
            && let Some(list) = kus
                .entry("images")
                .or_insert_with(|| json!([]))
                .as_array_mut()
        {
            for image in &self.images {
                match list.iter_mut().find(|i| i["name"] == image["name"]) {
                    Some(i) => *i = image.clone(),
                    None => list.push(image.clone()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_extended_maps_merged_and_an_image_of_the_same_name_replaced() {
        let mut kus = json!({
            "resources": ["a.yaml"],
            "patches": [{"path": "p.yaml"}],
            "commonLabels": {"team": "web"},
            "images": [{"name": "nginx", "newTag": "1"}, {"name": "redis", "newTag": "7"}],
        });
        let overlay = Overlay {
            namespace: Some("shop".into()),
            name_prefix: Some("x-".into()),
            patches: vec![json!({"patch": "p"})],
            common_labels: [("tier".to_string(), json!("front"))].into_iter().collect(),
            images: vec![json!({"name": "nginx", "newTag": "2"})],
            components: vec![json!("../c")],
            ..Overlay::default()
        };
        overlay.put_into(kus.as_object_mut().unwrap());
        assert_eq!(
            kus,
            json!({
                "resources": ["a.yaml"],
                "namespace": "shop",
                "namePrefix": "x-",
                "patches": [{"path": "p.yaml"}, {"patch": "p"}],
                "commonLabels": {"team": "web", "tier": "front"},
                "images": [{"name": "nginx", "newTag": "2"}, {"name": "redis", "newTag": "7"}],
                "components": ["../c"],
            })
        );
        // An empty overlay changes nothing.
        let before = kus.clone();
        Overlay::default().put_into(kus.as_object_mut().unwrap());
        assert_eq!(kus, before);
    }
}
