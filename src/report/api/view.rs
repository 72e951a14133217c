//! What a signed-in person is shown: the specs the cluster's RBAC lets them see (see
//! `signin::rbac`), and of the history only what touches those specs. The API token's
//! holder, a client certificate and a listener without sign-in see everything.

use std::collections::HashSet;

use axum::Extension;
use serde_json::Value;

use super::ApiState;
use crate::report::signin::Identity;

/// The identity the gate found (none without sign-in).
pub(crate) type Caller = Option<Extension<Identity>>;

pub(crate) enum View {
    All,
    Only {
        /// Spec ids.
        specs: HashSet<String>,
        /// Objects of those specs, as the status names them.
        objects: HashSet<String>,
        /// Those specs' kind, namespace and name, as `/metrics` labels them.
        names: HashSet<(String, String, String)>,
        /// As the audit names the person.
        who: String,
    },
}

/// The view of whoever `caller` is.
pub(crate) async fn of(api: &ApiState, caller: &Caller) -> View {
    let (Some(rbac), Some(Extension(identity))) = (&api.rbac, caller) else {
        return View::All;
    };
    let Some(person) = identity.person() else {
        return View::All;
    };
    let current = api.status.borrow().clone();
    let specs = current.specs();
    let visible = rbac.visible(person, &specs).await;
    let seen: Vec<&Value> = specs
        .iter()
        .filter(|s| s["id"].as_str().is_some_and(|id| visible.contains(id)))
        .collect();
    let objects = seen
        .iter()
        .flat_map(|s| s["objects"].as_array().into_iter().flatten())
        .filter_map(|o| o["object"].as_str().map(String::from))
        .collect();
    let names = seen
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (text("kind"), text("namespace"), text("name"))
        })
        .collect();
    View::Only {
        specs: visible,
        objects,
        names,
        who: identity.name(),
    }
}

impl View {
    pub(crate) fn sees(&self, id: &str) -> bool {
        match self {
            View::All => true,
            View::Only { specs, .. } => specs.contains(id),
        }
    }

    /// A status document with only the specs seen.
    pub(crate) fn status(&self, json: &str) -> String {
        let View::Only { specs, .. } = self else {
            return json.to_string();
        };
        let Ok(mut doc) = serde_json::from_str::<Value>(json) else {
            return json.to_string();
        };
        if let Some(list) = doc.get_mut("specs").and_then(Value::as_array_mut) {
            list.retain(|s| s["id"].as_str().is_some_and(|id| specs.contains(id)));
        }
        doc.to_string()
    }

    /// One part of the history: drifts of the specs seen, syncs with only the changes
    /// of their objects, and the person's own controls.
    pub(crate) fn ledger(&self, part: &str, list: Vec<Value>) -> Vec<Value> {
        let View::Only {
            specs,
            objects,
            who,
            ..
        } = self
        else {
            return list;
        };
        match part {
            "drifts" => list
                .into_iter()
                .filter(|d| d["spec"].as_str().is_some_and(|s| specs.contains(s)))
                .collect(),
            "syncs" => list
                .into_iter()
                .map(|mut sync| {
                    if let Some(changes) = sync.get_mut("changed").and_then(Value::as_array_mut) {
                        changes.retain(|c| {
                            c.as_str().is_some_and(|c| {
                                let object = c.rsplit_once(": ").map_or(c, |(o, _)| o);
                                objects.contains(object)
                            })
                        });
                    }
                    sync
                })
                .collect(),
            "controls" => list
                .into_iter()
                .filter(|c| c["who"].as_str() == Some(who.as_str()))
                .collect(),
            _ => list,
        }
    }
}
