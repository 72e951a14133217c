//! Diff: what `apply` would change, object by object. The desired side is the
//! apiserver's own answer to a server-side dry-run apply with our field manager, so
//! defaults and normalisation appear on both sides and only real changes show.

use std::collections::BTreeSet;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::hash::shape_hash;
use super::plan::Planned;
use super::prune::{self, Prunable};
use super::{ApplyError, Engine, Entry, Inventory, ObjKey};
use crate::object::{Claim, claim};
use crate::render::Object;
use crate::spec::SpecId;

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Unchanged,
    Create {
        desired: Value,
    },
    Update {
        live: Value,
        desired: Value,
    },
    /// The change cannot be made in place: apply deletes and recreates the object.
    Replace {
        live: Value,
        desired: Value,
    },
    /// Prune would delete it.
    Delete {
        live: Value,
    },
    Error(String),
}

#[derive(Debug, Clone)]
pub struct ObjectDiff {
    pub key: ObjKey,
    pub spec: String,
    pub change: Change,
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what the server owns or changes on every write, so equal objects compare equal.
pub fn clean(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "managedFields",
                "resourceVersion",
                "generation",
                "uid",
                "creationTimestamp",
                "selfLink",
            ] {
                meta.remove(k);
            }
            let empty = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
                Some(a) => {
                    a.remove(LAST_APPLIED);
                    a.is_empty()
                }
                None => false,
            };
            if empty {
                meta.remove("annotations");
            }
        }
    }
    v
}

/// Secret values never reach the output: equal ones show as `***`, changed ones as
/// `*** (before)` / `*** (after)`, as kubectl diff does.
pub fn mask_secrets(live: Option<&mut Value>, desired: Option<&mut Value>) {
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

fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot show as YAML: {e}\n"))
}

/// A unified diff of two object states, headed `--- live/<ref>` / `+++ desired/<ref>`.
pub fn unified(
    reference: &str,
    live: Option<&Value>,
    desired: Option<&Value>,
    color: bool,
) -> String {
    let (a, b) = (
        live.map(yaml).unwrap_or_default(),
        desired.map(yaml).unwrap_or_default(),
    );
    let diff = similar::TextDiff::from_lines(&a, &b);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("live/{reference}"),
            &format!("desired/{reference}"),
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

/// Renders one object's change for the terminal; empty when unchanged.
pub fn render_change(d: &ObjectDiff, color: bool) -> String {
    let reference = d.key.to_string().replace(' ', "/");
    match &d.change {
        Change::Unchanged => String::new(),
        Change::Error(e) => format!("error: {} ({}): {e}\n", d.key, d.spec),
        Change::Create { desired } => {
            let mut desired = desired.clone();
            mask_secrets(None, Some(&mut desired));
            unified(&reference, None, Some(&desired), color)
        }
        Change::Delete { live } => {
            let mut live = live.clone();
            mask_secrets(Some(&mut live), None);
            format!(
                "# prune: {} left the specs\n{}",
                d.key,
                unified(&reference, Some(&live), None, color)
            )
        }
        Change::Update { live, desired } | Change::Replace { live, desired } => {
            let (mut live, mut desired) = (live.clone(), desired.clone());
            mask_secrets(Some(&mut live), Some(&mut desired));
            let head = if matches!(d.change, Change::Replace { .. }) {
                format!(
                    "# replace: {} cannot change in place; apply deletes and recreates it\n",
                    d.key
                )
            } else {
                String::new()
            };
            head + &unified(&reference, Some(&live), Some(&desired), color)
        }
    }
}

impl Engine {
    /// The change apply would make to every object, and what prune would delete.
    pub async fn diff(
        &self,
        objects: &[Object],
        adopt_specs: &BTreeSet<SpecId>,
    ) -> Result<Vec<ObjectDiff>, ApplyError> {
        let inventory = self.store().load(&self.client).await?;
        let planned = self.plan(objects, adopt_specs).await;
        let desired: BTreeSet<ObjKey> = planned.iter().map(|p| p.key.clone()).collect();
        let in_revision_crds: Vec<&Object> = objects
            .iter()
            .filter(|o| o.kind == "CustomResourceDefinition")
            .collect();

        let mut out: Vec<(usize, ObjectDiff)> = futures::stream::iter(planned.iter().enumerate())
            .map(|(i, p)| {
                let inventory = &inventory;
                let crds = &in_revision_crds;
                async move {
                    let change = self.diff_one(p, inventory, crds).await;
                    (
                        i,
                        ObjectDiff {
                            key: p.key.clone(),
                            spec: p.obj.spec.to_string(),
                            change,
                        },
                    )
                }
            })
            .buffer_unordered(self.opts.concurrency.max(1))
            .collect()
            .await;
        out.sort_by_key(|(i, _)| *i);
        let mut diffs: Vec<ObjectDiff> = out.into_iter().map(|(_, d)| d).collect();

        if self.opts.prune.enabled {
            let plan = prune::plan(&inventory, &desired, &self.opts.prune);
            if let Some(why) = &plan.refused {
                diffs.push(ObjectDiff {
                    key: ObjKey {
                        group: String::new(),
                        kind: "Prune".into(),
                        namespace: String::new(),
                        name: "guard".into(),
                    },
                    spec: String::new(),
                    change: Change::Error(format!("prune refused: {why}")),
                });
            } else {
                for entry in &plan.candidates {
                    if let Some(live) = self.live_if_prunable(entry).await {
                        diffs.push(ObjectDiff {
                            key: entry.key.clone(),
                            spec: entry.spec.clone(),
                            change: Change::Delete { live: clean(&live) },
                        });
                    }
                }
            }
        }
        Ok(diffs)
    }

    async fn diff_one(&self, p: &Planned<'_>, inventory: &Inventory, crds: &[&Object]) -> Change {
        let (key, body, adopt) = (&p.key, &p.body, p.adopt);
        let resolved = match &p.resolved {
            Ok(r) => r,
            Err(e) => {
                // Its CRD is in this revision: it will be created after the CRD.
                let defined_here = crds.iter().any(|c| {
                    c.body["spec"]["group"].as_str() == Some(key.group.as_str())
                        && c.body["spec"]["names"]["kind"].as_str() == Some(key.kind.as_str())
                });
                return if defined_here {
                    Change::Create {
                        desired: clean(body),
                    }
                } else {
                    Change::Error(e.clone())
                };
            }
        };
        let api = resolved.api(
            &self.client,
            (!key.namespace.is_empty()).then_some(key.namespace.as_str()),
        );
        // Live and dry-run must describe the same moment: the dry-run is pinned to the
        // resourceVersion read, and a controller's update in between (a Deployment's
        // revision annotation, say) means reading again, not a spurious difference.
        let mut attempt = 0;
        let (live, dry) = loop {
            attempt += 1;
            let live = match api.get_opt(&key.name).await {
                Ok(o) => o.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)),
                Err(e) => return Change::Error(format!("reading it: {e}")),
            };
            let claimed = match live.as_ref().map(|l| claim(l, &self.opts.instance, adopt)) {
                Some(Err(refusal)) => return Change::Error(format!("conflict: {refusal}")),
                Some(Ok(c)) => Some(c),
                None => None,
            };
            let force = self.opts.force_conflicts || claimed == Some(Claim::Adopt);
            let pp = PatchParams {
                force,
                ..PatchParams::apply(&self.opts.field_manager).dry_run()
            };
            let mut pinned = body.clone().into_owned();
            if let Some(rv) = live
                .as_ref()
                .and_then(|l| l["metadata"]["resourceVersion"].as_str())
                && let Some(meta) = pinned.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.insert("resourceVersion".into(), rv.into());
            }
            let dry = api.patch(&key.name, &pp, &Patch::Apply(&pinned)).await;
            let moved = matches!(&dry, Err(kube::Error::Api(e)) if e.code == 409 && e.message.contains("has been modified"));
            if !moved || attempt >= 5 {
                break (live, dry);
            }
        };
        let is_pod = key.is("", "Pod");
        match (live, dry) {
            (None, Ok(d)) => Change::Create {
                desired: clean(&serde_json::to_value(d).unwrap_or(Value::Null)),
            },
            // e.g. its namespace does not exist yet: apply creates it first.
            (None, Err(_)) => Change::Create {
                desired: clean(body),
            },
            (Some(l), Ok(d)) => {
                let (l, d) = (
                    clean(&l),
                    clean(&serde_json::to_value(d).unwrap_or(Value::Null)),
                );
                let shape_changed = is_pod
                    && inventory
                        .entries
                        .get(key)
                        .and_then(|e| e.shape.clone())
                        .is_some_and(|s| s != shape_hash(body));
                if shape_changed {
                    Change::Replace {
                        live: l,
                        desired: clean(body),
                    }
                } else if l == d {
                    Change::Unchanged
                } else {
                    Change::Update {
                        live: l,
                        desired: d,
                    }
                }
            }
            (Some(l), Err(kube::Error::Api(e))) if e.code == 422 && is_pod => Change::Replace {
                live: clean(&l),
                desired: clean(body),
            },
            (Some(_), Err(kube::Error::Api(e))) if e.code == 409 => Change::Error(format!(
                "conflict with another field manager (--force-conflicts takes the fields): {}",
                e.message
            )),
            (Some(_), Err(e)) => Change::Error(e.to_string()),
        }
    }

    /// The live object prune would delete for `entry`, if it would delete one.
    async fn live_if_prunable(&self, entry: &Entry) -> Option<Value> {
        match self.prunable(entry).await {
            Ok(Prunable::Delete { live, .. }) => Some(live),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clean_drops_server_fields_and_last_applied() {
        let v = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "uid": "u", "resourceVersion": "5", "generation": 2, "creationTimestamp": "t",
                         "managedFields": [{}], "annotations": {LAST_APPLIED: "{}"}, "labels": {"a": "b"}},
            "data": {"k": "v"}, "status": {"x": 1},
        });
        assert_eq!(
            clean(&v),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v"}})
        );
    }

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
}
