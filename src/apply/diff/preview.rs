//! `diff --base`: what a change to the tree does, found with no cluster at all by rendering
//! the base revision and the change and comparing the two renders object by object, as
//! applying the change over a cluster in step with the base would find it. Pure: the CLI
//! reads and renders both sides, and names the application each spec belongs to.
//!
//! What only the apiserver knows is not guessed: defaults it would fill, and whether a
//! change is refused as immutable (a replace shows as an update).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::markdown::{self, MARKDOWN_LIMIT, PREVIEW_MARKER};
use super::present::{DiffAction, Shown, Sides, Summary, render_change_between, shown_between};
use super::{Change, ObjectDiff};
use crate::object::ObjKey;
use crate::render::Object;
use crate::spec::order::Phase;

/// Every object whose apply the change alters, in the order apply would take them (the
/// change's render order), then what prune would delete (`prune`: unless `--no-prune`).
///
/// As the engine has it: an object's ignored fields and a create-only object's every field
/// are left alone once it exists; a kept object is not pruned; a hook runs again (shows as
/// created) when anything else changes, and a hook driftless never runs is not shown.
pub fn between(base: &[Object], head: &[Object], prune: bool) -> Vec<ObjectDiff> {
    let before: HashMap<ObjKey, &Object> = base.iter().map(|o| (o.key(), o)).collect();
    let mut diffs = Vec::new();
    let mut hooks = Vec::new();
    let mut changed = false;
    for o in head.iter().filter(|o| !o.policy.never_applied()) {
        let key = o.key();
        if o.policy.hook.is_some() {
            let only_on_fail = o
                .policy
                .hook
                .as_ref()
                .is_some_and(|h| h.phases == [Phase::Fail]);
            if !only_on_fail && before.get(&key).is_none_or(|b| b.body != o.body) {
                changed = true;
            }
            hooks.push((key, o));
            continue;
        }
        let change = match before.get(&key) {
            None => Change::Create {
                desired: o.body.value(),
            },
            Some(b) => {
                // Most objects are unchanged: compared in place, as cloning both bodies
                // of each to compare them was most of a preview's instructions.
                if o.policy.create_only || (o.policy.ignore_fields.is_empty() && b.body == o.body) {
                    continue;
                }
                let (live, desired) = (applied(b, o), applied(o, o));
                if live == desired {
                    continue;
                }
                Change::Update { live, desired }
            }
        };
        changed = true;
        diffs.push(sealed(o, key, change));
    }
    if changed {
        for (key, o) in hooks {
            let change = Change::Create {
                desired: o.body.value(),
            };
            diffs.push(sealed(o, key, change));
        }
    }
    if prune {
        let after: HashMap<ObjKey, &Object> = head.iter().map(|o| (o.key(), o)).collect();
        for o in base {
            let key = o.key();
            if after.contains_key(&key) || o.policy.keep || o.policy.hook.is_some() {
                continue;
            }
            let change = Change::Delete {
                live: o.body.value(),
            };
            diffs.push(sealed(o, key, change));
        }
    }
    diffs
}

/// What of `o` an apply sends to an object that exists, under `policy`'s rules: its
/// ignored fields go (another owns them), and all of a create-only object.
fn applied(o: &Object, policy: &Object) -> serde_json::Value {
    if policy.policy.create_only {
        return serde_json::Value::Null;
    }
    let mut body = o.body.value();
    for p in &policy.policy.ignore_fields {
        crate::object::pointer::remove(&mut body, p);
    }
    body
}

fn sealed(o: &Object, key: ObjKey, change: Change) -> ObjectDiff {
    let mut d = ObjectDiff {
        key,
        spec: o.spec.to_string(),
        change,
    };
    if o.policy.sealed {
        d.seal(&o.body.value());
    }
    d
}

/// A preview ready to print: the changes grouped by application, each group in apply
/// order, the groups by name.
pub struct Preview {
    /// How the sides are named: `main (1a2b3c4)`, `the work tree`.
    pub base: String,
    pub head: String,
    changes: Vec<(String, ObjectDiff)>,
}

impl Preview {
    /// `app_of` names the application a spec (by its id) belongs to.
    pub fn new(
        base: String,
        head: String,
        diffs: Vec<ObjectDiff>,
        app_of: impl Fn(&str) -> String,
    ) -> Preview {
        let mut changes: Vec<(String, ObjectDiff)> = diffs
            .into_iter()
            .filter(|d| d.change.action().is_some())
            .map(|d| (app_of(&d.spec), d))
            .collect();
        // Stable: within an application the apply order stays.
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        Preview {
            base,
            head,
            changes,
        }
    }

    /// Whether the change alters anything at all.
    pub fn changes_anything(&self) -> bool {
        !self.changes.is_empty()
    }

    fn shown(&self) -> Vec<Shown> {
        self.changes
            .iter()
            .flat_map(|(app, d)| {
                shown_between(std::slice::from_ref(d), Sides::REVISIONS)
                    .into_iter()
                    .map(|mut s| {
                        s.app = Some(app.clone());
                        s
                    })
            })
            .collect()
    }

    fn apps(&self) -> Vec<(&str, Summary)> {
        let mut apps: BTreeMap<&str, Vec<Shown>> = BTreeMap::new();
        for (app, d) in &self.changes {
            apps.entry(app)
                .or_default()
                .extend(shown_between(std::slice::from_ref(d), Sides::REVISIONS));
        }
        apps.into_iter()
            .map(|(app, objects)| (app, Summary::of(&objects)))
            .collect()
    }

    fn headline(&self) -> String {
        format!("{} → {}", self.base, self.head)
    }

    /// `--output text`: a line of totals, then each application's changes under its name.
    pub fn text(&self, color: bool) -> String {
        if self.changes.is_empty() {
            return format!(
                "No changes: {} and {} render the same objects.\n",
                self.base, self.head
            );
        }
        let apps = self.apps();
        let mut out = format!(
            "{}: {} {} change{}: {}\n",
            self.headline(),
            apps.len(),
            if apps.len() == 1 { "app" } else { "apps" },
            if apps.len() == 1 { "s" } else { "" },
            counts(&Summary::of(&self.shown()))
        );
        let mut under: Option<&str> = None;
        for (app, d) in &self.changes {
            if under != Some(app.as_str()) {
                let summary = apps.iter().find(|(a, _)| a == app).map(|(_, s)| *s);
                out.push_str(&format!(
                    "\n# app {app}: {}\n",
                    summary.map(|s| counts(&s)).unwrap_or_default()
                ));
                under = Some(app);
            }
            out.push_str(&render_change_between(d, Sides::REVISIONS, color));
        }
        out
    }

    /// `--output markdown`: a pull-request comment: a table of the applications that
    /// change, then a collapsed diff per object, within GitHub's limit.
    pub fn markdown(&self) -> String {
        self.markdown_within(MARKDOWN_LIMIT)
    }

    fn markdown_within(&self, limit: usize) -> String {
        let mut head = format!(
            "{PREVIEW_MARKER}\n### driftless diff: {}\n\n",
            markdown::escape(&self.headline())
        );
        if self.changes.is_empty() {
            head.push_str("No changes: both render the same objects.\n");
            return head;
        }
        head.push_str("| app | create | update | prune |\n| --- | ---: | ---: | ---: |\n");
        for (app, s) in self.apps() {
            head.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                app.replace('`', "'").replace('|', "\\|"),
                s.create,
                s.update,
                s.prune
            ));
        }
        head.push('\n');
        markdown::sections(head, self.shown(), limit)
    }

    /// `--output json`: `{"base", "head", "summary", "apps": [...], "objects": [...]}`.
    pub fn json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct App<'a> {
            app: &'a str,
            summary: Summary,
        }
        #[derive(Serialize)]
        struct Document<'a> {
            base: &'a str,
            head: &'a str,
            summary: Summary,
            apps: Vec<App<'a>>,
            objects: Vec<Shown>,
        }
        let objects = self.shown();
        let doc = Document {
            base: &self.base,
            head: &self.head,
            summary: Summary::of(&objects),
            apps: self
                .apps()
                .into_iter()
                .map(|(app, summary)| App { app, summary })
                .collect(),
            objects,
        };
        Ok(serde_json::to_string_pretty(&doc)? + "\n")
    }
}

/// `1 to create, 2 to update, 1 to prune`: the actions that occur.
fn counts(s: &Summary) -> String {
    let parts: Vec<String> = [
        (s.create, DiffAction::Create),
        (s.update, DiffAction::Update),
        (s.replace, DiffAction::Replace),
        (s.prune, DiffAction::Prune),
        (s.error, DiffAction::Error),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, a)| {
        let word = match a {
            DiffAction::Create => "to create",
            DiffAction::Update => "to update",
            DiffAction::Replace => "to replace",
            DiffAction::Prune => "to prune",
            DiffAction::Error => "failed",
        };
        format!("{n} {word}")
    })
    .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Packed;
    use serde_json::{Value, json};

    fn object(kind: &str, name: &str, data: Value) -> Object {
        let api_version = if kind == "Deployment" {
            "apps/v1"
        } else {
            "v1"
        };
        Object {
            spec: format!("manifest/dev/{name}").parse().unwrap(),
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("dev".into()),
            name: name.into(),
            body: Packed::new(&json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": "dev"}, "data": data})),
            policy: crate::render::default_policy(),
            at: None,
        }
    }

    fn actions(diffs: &[ObjectDiff]) -> Vec<(String, DiffAction)> {
        diffs
            .iter()
            .filter_map(|d| Some((d.key.to_string(), d.change.action()?)))
            .collect()
    }

    #[test]
    fn what_the_change_adds_alters_and_removes_is_found_and_nothing_else() {
        let base = [
            object("ConfigMap", "same", json!({"k": "v"})),
            object("ConfigMap", "changed", json!({"k": "old"})),
            object("ConfigMap", "gone", json!({"k": "v"})),
        ];
        let head = [
            object("ConfigMap", "same", json!({"k": "v"})),
            object("ConfigMap", "changed", json!({"k": "new"})),
            object("ConfigMap", "new", json!({"k": "v"})),
        ];
        let diffs = between(&base, &head, true);
        assert_eq!(
            actions(&diffs),
            [
                ("ConfigMap dev/changed".to_string(), DiffAction::Update),
                ("ConfigMap dev/new".to_string(), DiffAction::Create),
                ("ConfigMap dev/gone".to_string(), DiffAction::Prune),
            ]
        );
        assert_eq!(
            actions(&between(&base, &head, false)).len(),
            2,
            "--no-prune"
        );
        assert!(between(&base, &base, true).is_empty());
    }

    #[test]
    fn ignored_create_only_and_kept_objects_are_left_as_apply_leaves_them() {
        let mut ignoring = object("ConfigMap", "hpa", json!({"replicas": "1"}));
        std::sync::Arc::make_mut(&mut ignoring.policy).ignore_fields =
            vec!["/data/replicas".into()];
        let mut once = object("ConfigMap", "once", json!({"k": "a"}));
        std::sync::Arc::make_mut(&mut once.policy).create_only = true;
        let mut kept = object("ConfigMap", "kept", json!({}));
        std::sync::Arc::make_mut(&mut kept.policy).keep = true;
        let base = [ignoring.clone(), once.clone(), kept];
        ignoring.body.edit(|b| b["data"]["replicas"] = json!("5"));
        once.body.edit(|b| b["data"]["k"] = json!("b"));
        assert!(between(&base, &[ignoring, once], true).is_empty());
    }

    #[test]
    fn secrets_and_sealed_values_never_show() {
        let mut secret = object("Secret", "db", json!({"pw": "b2xk", "same": "c2FtZQ=="}));
        let base = [secret.clone()];
        secret.body.edit(|b| b["data"]["pw"] = json!("bmV3"));
        let preview = Preview::new(
            "main".into(),
            "the work tree".into(),
            between(&base, &[secret], true),
            |_| "db.yaml".into(),
        );
        for out in [
            preview.text(false),
            preview.markdown(),
            preview.json().unwrap(),
        ] {
            assert!(!out.contains("b2xk") && !out.contains("bmV3"), "{out}");
            assert!(out.contains("*** (after)"), "{out}");
        }

        let mut sealed = object("ConfigMap", "sops", json!({"token": "hunter2"}));
        std::sync::Arc::make_mut(&mut sealed.policy).sealed = true;
        let diffs = between(&[], &[sealed], true);
        let text = Preview::new("a".into(), "b".into(), diffs, |_| "x".into()).text(false);
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn changes_are_grouped_by_app_in_every_output() {
        let base = [object("ConfigMap", "a1", json!({"k": "1"}))];
        let head = [
            object("ConfigMap", "b1", json!({})),
            object("ConfigMap", "a1", json!({"k": "2"})),
            object("ConfigMap", "a2", json!({})),
        ];
        let app_of = |spec: &str| match spec {
            "manifest/dev/b1" => "shop".to_string(),
            _ => "billing".to_string(),
        };
        let preview = Preview::new(
            "main (1a2b3c4)".into(),
            "the work tree".into(),
            between(&base, &head, true),
            app_of,
        );
        assert!(preview.changes_anything());
        let text = preview.text(false);
        assert!(
            text.starts_with(
                "main (1a2b3c4) → the work tree: 2 apps change: 2 to create, 1 to update\n\n\
                 # app billing: 1 to create, 1 to update\n--- base/ConfigMap/dev/a1\n+++ head/ConfigMap/dev/a1\n"
            ),
            "{text}"
        );
        let shop = text.find("# app shop: 1 to create\n").expect(&text);
        assert!(text.find("ConfigMap/dev/a2").expect(&text) < shop, "{text}");

        let md = preview.markdown();
        assert!(md.starts_with(PREVIEW_MARKER), "{md}");
        assert!(
            md.contains("| `billing` | 1 | 1 | 0 |\n| `shop` | 1 | 0 | 0 |\n"),
            "{md}"
        );
        assert!(md.contains(" in app <code>shop</code>"), "{md}");

        let doc: Value = serde_json::from_str(&preview.json().unwrap()).unwrap();
        assert_eq!(doc["summary"]["create"], 2);
        assert_eq!(
            doc["apps"][1],
            json!({"app": "shop", "summary": {"create": 1, "update": 0, "replace": 0, "prune": 0, "error": 0}})
        );
        assert_eq!(doc["objects"][2]["app"], "shop");
        assert_eq!(doc["base"], "main (1a2b3c4)");
    }

    #[test]
    fn no_change_says_so() {
        let preview = Preview::new("main".into(), "the work tree".into(), Vec::new(), |_| {
            String::new()
        });
        assert!(!preview.changes_anything());
        assert_eq!(
            preview.text(false),
            "No changes: main and the work tree render the same objects.\n"
        );
        assert!(
            preview
                .markdown()
                .ends_with("No changes: both render the same objects.\n")
        );
    }
}
