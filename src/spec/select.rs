//! Which objects a rule picks, by any of group, version, kind, name, namespace and labels:
//! one shape for the tree's `[[ignore]]` rules, Flux's `driftDetection.ignore` and Argo
//! CD's `ignoreDifferences`.

use std::collections::BTreeMap;

/// A name or namespace as a rule gives it.
#[derive(Debug, Clone)]
pub enum Pattern {
    Exact(String),
    /// Anchored: the whole name must match (`[[ignore]]`'s `name`, `namespace`).
    Regex(regex::Regex),
}

impl Pattern {
    pub fn matches(&self, s: &str) -> bool {
        match self {
            Pattern::Exact(e) => e == s,
            Pattern::Regex(r) => r.is_match(s),
        }
    }

    fn text(&self) -> (bool, &str) {
        match self {
            Pattern::Exact(e) => (false, e),
            Pattern::Regex(r) => (true, r.as_str()),
        }
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Pattern {}

/// Every criterion given must hold; none given picks every object. A group of `""` is
/// the core group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectSelector {
    pub group: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<Pattern>,
    pub namespace: Option<Pattern>,
    pub labels: BTreeMap<String, String>,
}

impl ObjectSelector {
    /// Whether it picks `obj`, a manifest as rendered (its namespace set; none when
    /// cluster-scoped).
    pub fn selects(&self, obj: &serde_json::Value) -> bool {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let meta = &obj["metadata"];
        self.picks(
            api_version,
            obj["kind"].as_str().unwrap_or_default(),
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default(),
            meta["labels"].as_object(),
        )
    }

    /// [`ObjectSelector::selects`] of an object known by its parts.
    pub fn picks(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        labels: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> bool {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let like =
            |want: &Option<Pattern>, have: &str| want.as_ref().is_none_or(|p| p.matches(have));
        is(&self.group, group)
            && is(&self.version, version)
            && is(&self.kind, kind)
            && like(&self.name, name)
            && like(&self.namespace, namespace)
            && self.labels.iter().all(|(k, v)| {
                labels
                    .and_then(|l| l.get(k))
                    .and_then(serde_json::Value::as_str)
                    == Some(v.as_str())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_criterion_given_must_hold() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"team": "a"}}});
        let core = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(ObjectSelector::default().selects(&obj));
        let deployments = ObjectSelector {
            group: Some("apps".into()),
            kind: Some("Deployment".into()),
            ..ObjectSelector::default()
        };
        assert!(deployments.selects(&obj) && !deployments.selects(&core));
        let core_group = ObjectSelector {
            group: Some(String::new()),
            version: Some("v1".into()),
            ..ObjectSelector::default()
        };
        assert!(core_group.selects(&core) && !core_group.selects(&obj));
        let named = |p: Pattern| ObjectSelector {
            name: Some(p),
            labels: BTreeMap::from([("team".into(), "a".into())]),
            ..ObjectSelector::default()
        };
        let anchored = regex::Regex::new("^(?:web-[0-9])$").unwrap();
        assert!(named(Pattern::Regex(anchored)).selects(&obj));
        assert!(named(Pattern::Exact("web-1".into())).selects(&obj));
        assert!(!named(Pattern::Exact("web".into())).selects(&obj));
        let other_team = ObjectSelector {
            labels: BTreeMap::from([("team".into(), "b".into())]),
            ..ObjectSelector::default()
        };
        assert!(!other_team.selects(&obj));
    }
}
