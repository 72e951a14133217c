//! An `ObjectDiff` as people and programs read it: Secret values masked in every form,
//! a unified diff for the terminal (`--output text`), and one JSON document
//! (`--output json`). Pure functions; `markdown` builds on `Shown`.

use serde::Serialize;
use serde_json::Value;

use super::{Change, ObjectDiff};

/// Secret values never reach the output: equal ones show as `***`, changed ones as
/// `*** (before)` / `*** (after)`, as kubectl diff does.
pub(crate) fn mask_secrets(live: Option<&mut Value>, desired: Option<&mut Value>) {
    let is_secret = |v: &Option<&mut Value>| {
        v.as_ref().is_some_and(|v| {
            v["kind"].as_str() == Some("Secret") && v["apiVersion"].as_str() == Some("v1")
        })
    };
    if !is_secret(&live) && !is_secret(&desired) {
        return;
    }
    let (mut live, mut desired) = (live, desired);
    for field in ["data", "stringData"] {
        let before = live.as_ref().and_then(|l| l.get(field)).cloned();
        let after = desired.as_ref().and_then(|d| d.get(field)).cloned();
        let mask = |side: Option<&mut Value>, other: &Option<Value>, tag: &str| {
            if let Some(map) = side
                .and_then(|v| v.get_mut(field))
                .and_then(Value::as_object_mut)
            {
                for (k, val) in map.iter_mut() {
                    let same = other.as_ref().and_then(|o| o.get(k)) == Some(&*val);
                    *val = Value::String(if same {
                        "***".into()
                    } else {
                        format!("*** ({tag})")
                    });
                }
            }
        };
        mask(live.as_deref_mut(), &after, "before");
        mask(desired.as_deref_mut(), &before, "after");
    }
}

impl ObjectDiff {
    /// Masks every value of an object decrypted from a SOPS file, whatever its kind, on
    /// both sides (`spec::sops::mask_sealed`): a diff shows which fields change, never their
    /// values; an error about it loses the values of `body`, the object as rendered.
    pub(super) fn seal(&mut self, body: &Value) {
        use crate::spec::sops::{mask_sealed, redact_sealed};
        match &mut self.change {
            Change::Create { desired } => mask_sealed(desired, None, "after"),
            Change::Delete { live } => mask_sealed(live, None, "before"),
            Change::Update { live, desired } | Change::Replace { live, desired, .. } => {
                let before = live.clone();
                mask_sealed(live, Some(&*desired), "before");
                mask_sealed(desired, Some(&before), "after");
            }
            Change::Error(m) => *m = redact_sealed(m, body),
            Change::Unchanged => {}
        }
    }
}

fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot show as YAML: {e}\n"))
}

/// What a diff compares: the names its unified diffs give the two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sides {
    pub before: &'static str,
    pub after: &'static str,
}

impl Sides {
    /// `diff`: the live object and what the specs make of it.
    pub(crate) const LIVE: Sides = Sides {
        before: "live",
        after: "desired",
    };
    /// `diff --base`: the object as the base revision renders it and as the change does.
    pub(crate) const REVISIONS: Sides = Sides {
        before: "base",
        after: "head",
    };
}

/// A unified diff of two object states, headed `--- live/<ref>` / `+++ desired/<ref>`.
pub fn unified(
    reference: &str,
    live: Option<&Value>,
    desired: Option<&Value>,
    color: bool,
) -> String {
    unified_between(reference, live, desired, Sides::LIVE, color)
}

/// [`unified`], its sides named by `sides`.
pub(crate) fn unified_between(
    reference: &str,
    before: Option<&Value>,
    after: Option<&Value>,
    sides: Sides,
    color: bool,
) -> String {
    let (a, b) = (
        before.map(yaml).unwrap_or_default(),
        after.map(yaml).unwrap_or_default(),
    );
    let diff = similar::TextDiff::from_lines(&a, &b);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{}/{reference}", sides.before),
            &format!("{}/{reference}", sides.after),
        )
        .to_string();
    if !color {
        return text;
    }
    text.lines()
        .map(|l| {
            let code = if l.starts_with("+++") || l.starts_with("---") {
                "1"
            } else if l.starts_with('+') {
                "32"
            } else if l.starts_with('-') {
                "31"
            } else if l.starts_with("@@") {
                "36"
            } else {
                return format!("{l}\n");
            };
            format!("\x1b[{code}m{l}\x1b[0m\n")
        })
        .collect()
}

/// What happens to an object that differs, as every output names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffAction {
    Create,
    Update,
    /// Apply deletes and recreates it: the change cannot be made in place.
    Replace,
    /// Prune deletes it: it left the specs.
    Prune,
    /// It could not be diffed (a conflict, a missing kind, an apiserver refusal).
    Error,
}

impl Change {
    /// `None` when the object is unchanged.
    pub fn action(&self) -> Option<DiffAction> {
        Some(match self {
            Change::Unchanged => return None,
            Change::Create { .. } => DiffAction::Create,
            Change::Update { .. } => DiffAction::Update,
            Change::Replace { .. } => DiffAction::Replace,
            Change::Delete { .. } => DiffAction::Prune,
            Change::Error(_) => DiffAction::Error,
        })
    }
}

/// One object that differs, or could not be diffed: an entry of `--output json`, and what
/// `--output markdown` shows. Secret values are masked and there is no colour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shown {
    /// The object as driftless displays it everywhere: `Deployment.apps dev/shop`.
    pub id: String,
    /// The spec that renders it (for a prune, the one that did); empty for the prune guard.
    pub spec: String,
    /// For a preview (`diff --base`): the application the spec belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    pub kind: String,
    /// The API group; empty for the core group.
    pub group: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
    pub action: DiffAction,
    /// The unified diff, `--- live/...` / `+++ desired/...`; empty for an error.
    pub diff: String,
    pub error: Option<String>,
    /// For a replace: the immutable fields that make it one, as the apiserver named them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub immutable: Vec<String>,
}

/// ` (spec.template is immutable)`, or nothing when no field was named.
pub(super) fn immutable_said(fields: &[String]) -> String {
    match fields {
        [] => String::new(),
        [one] => format!(" ({one} is immutable)"),
        many => format!(" ({} are immutable)", many.join(", ")),
    }
}

/// Counts per action, the head of the JSON and markdown outputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub prune: usize,
    pub error: usize,
}

impl Summary {
    pub fn of(objects: &[Shown]) -> Summary {
        let mut s = Summary::default();
        for o in objects {
            *match o.action {
                DiffAction::Create => &mut s.create,
                DiffAction::Update => &mut s.update,
                DiffAction::Replace => &mut s.replace,
                DiffAction::Prune => &mut s.prune,
                DiffAction::Error => &mut s.error,
            } += 1;
        }
        s
    }
}

/// The masked unified diff of one change; empty when unchanged or an error.
fn masked_diff(d: &ObjectDiff, sides: Sides, color: bool) -> String {
    let (live, desired) = match &d.change {
        Change::Unchanged | Change::Error(_) => return String::new(),
        Change::Create { desired } => (None, Some(desired)),
        Change::Delete { live } => (Some(live), None),
        Change::Update { live, desired } | Change::Replace { live, desired, .. } => {
            (Some(live), Some(desired))
        }
    };
    let (mut live, mut desired) = (live.cloned(), desired.cloned());
    mask_secrets(live.as_mut(), desired.as_mut());
    let reference = d.key.to_string().replace(' ', "/");
    unified_between(&reference, live.as_ref(), desired.as_ref(), sides, color)
}

/// Renders one object's change for the terminal; empty when unchanged.
pub fn render_change(d: &ObjectDiff, color: bool) -> String {
    render_change_between(d, Sides::LIVE, color)
}

/// [`render_change`], the diff's sides named by `sides`.
pub(crate) fn render_change_between(d: &ObjectDiff, sides: Sides, color: bool) -> String {
    let head = match &d.change {
        Change::Unchanged => return String::new(),
        // The prune guard is no object of a spec: its message says it all.
        Change::Error(e) if d.spec.is_empty() => return format!("error: {e}\n"),
        Change::Error(e) => return format!("error: {} ({}): {e}\n", d.key, d.spec),
        Change::Delete { .. } => format!("# prune: {} left the specs\n", d.key),
        Change::Replace { immutable, .. } => format!(
            "# replace: {} cannot change in place{}; apply deletes and recreates it\n",
            d.key,
            immutable_said(immutable)
        ),
        Change::Create { .. } | Change::Update { .. } => String::new(),
    };
    head + &masked_diff(d, sides, color)
}

/// `--output text`: every change for the terminal, in the engine's order.
pub fn text(diffs: &[ObjectDiff], color: bool) -> String {
    diffs.iter().map(|d| render_change(d, color)).collect()
}

/// The objects that differ (or failed), in the engine's order: apply order, then prunes.
pub fn shown(diffs: &[ObjectDiff]) -> Vec<Shown> {
    shown_between(diffs, Sides::LIVE)
}

/// [`shown`], the diffs' sides named by `sides`.
pub(crate) fn shown_between(diffs: &[ObjectDiff], sides: Sides) -> Vec<Shown> {
    diffs
        .iter()
        .filter_map(|d| {
            Some(Shown {
                id: d.key.to_string(),
                spec: d.spec.clone(),
                app: None,
                kind: d.key.kind.clone(),
                group: d.key.group.clone(),
                namespace: d.key.namespace.clone(),
                name: d.key.name.clone(),
                action: d.change.action()?,
                diff: masked_diff(d, sides, false),
                error: match &d.change {
                    Change::Error(e) => Some(e.clone()),
                    _ => None,
                },
                immutable: match &d.change {
                    Change::Replace { immutable, .. } => immutable.clone(),
                    _ => Vec::new(),
                },
            })
        })
        .collect()
}

#[derive(Serialize)]
struct Document<'a> {
    summary: Summary,
    objects: &'a [Shown],
}

/// `--output json`: `{"summary": {...}, "objects": [...]}`, pretty-printed, one document.
pub fn json(diffs: &[ObjectDiff]) -> serde_json::Result<String> {
    let objects = shown(diffs);
    let doc = Document {
        summary: Summary::of(&objects),
        objects: &objects,
    };
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_and_changes_still_visible() {
        let secret = |v: &str| json!({"apiVersion": "v1", "kind": "Secret", "data": {"same": "c2FtZQ==", "pw": v}});
        let (mut live, mut desired) = (secret("b2xk"), secret("bmV3"));
        mask_secrets(Some(&mut live), Some(&mut desired));
        assert_eq!(live["data"], json!({"same": "***", "pw": "*** (before)"}));
        assert_eq!(desired["data"], json!({"same": "***", "pw": "*** (after)"}));
        let text = unified("Secret/ns/s", Some(&live), Some(&desired), false);
        assert!(!text.contains("b2xk") && !text.contains("bmV3"), "{text}");
        assert!(
            text.contains("-  pw: '*** (before)'") || text.contains("-  pw: \"*** (before)\""),
            "{text}"
        );
    }

    #[test]
    fn unified_diff_shows_exactly_the_changed_field() {
        let live = json!({"spec": {"replicas": 3, "image": "a"}});
        let desired = json!({"spec": {"replicas": 4, "image": "a"}});
        let text = unified("Deployment/dev/shop", Some(&live), Some(&desired), false);
        let changed: Vec<&str> = text
            .lines()
            .filter(|l| {
                (l.starts_with('+') || l.starts_with('-'))
                    && !l.starts_with("+++")
                    && !l.starts_with("---")
            })
            .collect();
        assert_eq!(changed, ["-  replicas: 3", "+  replicas: 4"], "{text}");
        assert!(
            text.starts_with("--- live/Deployment/dev/shop\n+++ desired/Deployment/dev/shop\n"),
            "{text}"
        );
        assert!(unified("x", Some(&live), Some(&live), false).is_empty());
    }

    fn key(kind: &str, namespace: &str, name: &str) -> crate::apply::ObjKey {
        crate::apply::ObjKey {
            group: if kind == "Deployment" { "apps" } else { "" }.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn json_has_one_entry_per_object_that_differs() {
        let web = |replicas: u32| json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": replicas}});
        let diffs = [
            ObjectDiff {
                key: key("Deployment", "dev", "shop"),
                spec: "elasticweb/dev/shop".into(),
                change: Change::Update {
                    live: web(3),
                    desired: web(4),
                },
            },
            ObjectDiff {
                key: key("Service", "dev", "same"),
                spec: "elasticweb/dev/same".into(),
                change: Change::Unchanged,
            },
            ObjectDiff {
                key: key("Namespace", "", "x"),
                spec: "manifest/Namespace/x".into(),
                change: Change::Error("forbidden".into()),
            },
        ];
        let doc: Value = serde_json::from_str(&json(&diffs).unwrap()).unwrap();
        assert_eq!(
            doc["summary"],
            json!({"create": 0, "update": 1, "replace": 0, "prune": 0, "error": 1})
        );
        assert_eq!(
            doc["objects"][0],
            json!({
                "id": "Deployment.apps dev/shop", "spec": "elasticweb/dev/shop",
                "kind": "Deployment", "group": "apps", "namespace": "dev", "name": "shop",
                "action": "update", "error": null,
                "diff": "--- live/Deployment.apps/dev/shop\n+++ desired/Deployment.apps/dev/shop\n@@ -1,4 +1,4 @@\n apiVersion: apps/v1\n kind: Deployment\n spec:\n-  replicas: 3\n+  replicas: 4\n",
            })
        );
        assert_eq!(
            doc["objects"][1],
            json!({
                "id": "Namespace x", "spec": "manifest/Namespace/x", "kind": "Namespace",
                "group": "", "namespace": "", "name": "x", "action": "error", "diff": "",
                "error": "forbidden",
            })
        );
        assert_eq!(doc["objects"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            json(&diffs[1..2]).unwrap(),
            "{\n  \"summary\": {\n    \"create\": 0,\n    \"update\": 0,\n    \"replace\": 0,\n    \"prune\": 0,\n    \"error\": 0\n  },\n  \"objects\": []\n}\n"
        );
    }

    #[test]
    fn text_heads_replacements_and_prunes_and_colours_only_when_asked() {
        let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": v}});
        let diffs = [
            ObjectDiff {
                key: key("Pod", "dev", "ide"),
                spec: "workspace/dev/ide".into(),
                change: Change::Replace {
                    live: cm("a"),
                    desired: cm("b"),
                    immutable: vec!["spec.template".into()],
                },
            },
            ObjectDiff {
                key: key("ConfigMap", "dev", "old"),
                spec: "manifest/dev/ConfigMap/old".into(),
                change: Change::Delete { live: cm("a") },
            },
        ];
        let guard = ObjectDiff {
            key: key("Prune", "", "guard"),
            spec: String::new(),
            change: Change::Error(
                "prune refused for instance \"blue\": ...; it would prune ConfigMap dev/a".into(),
            ),
        };
        assert_eq!(
            render_change(&guard, false),
            "error: prune refused for instance \"blue\": ...; it would prune ConfigMap dev/a\n"
        );
        let plain = text(&diffs, false);
        assert!(
            plain.starts_with("# replace: Pod dev/ide cannot change in place (spec.template is immutable); apply deletes and recreates it\n--- live/Pod/dev/ide\n"),
            "{plain}"
        );
        assert!(
            plain.contains(
                "# prune: ConfigMap dev/old left the specs\n--- live/ConfigMap/dev/old\n"
            ),
            "{plain}"
        );
        assert!(!plain.contains('\x1b'));
        assert!(text(&diffs, true).contains("\x1b[32m+  k: b\x1b[0m\n"));
    }
}
