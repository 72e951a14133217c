//! Before a sync writes anything, the objects it would write are dry-run, so that a field
//! the cluster's schema does not have (a typo, a field of a newer version) or a list entry
//! given twice refuses the whole revision: nothing of it is applied and nothing pruned,
//! as Flux and Argo CD do, rather than half a revision with its Namespace made and its
//! Deployment refused. Only manifests whose intent changed since they were last applied
//! are asked about: an unchanged tree costs no request, and neither do the objects
//! driftless builds from its own kinds.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt as _;
use kube::api::PatchParams;

use super::inventory::Inventory;
use super::plan::Planned;
use super::{Action, Engine, ObjectResult, warned};
use crate::cluster::error_text;

impl Engine {
    /// The objects the apiserver refuses for their fields, with the others it refuses
    /// besides; empty when none is refused for its fields (the sync then goes on, and
    /// any other refusal is met by the apply itself, as before).
    pub(super) async fn refused_fields(
        &self,
        planned: &[Planned<'_>],
        recorded: &Inventory,
    ) -> Vec<ObjectResult> {
        let mut asked = Vec::new();
        for p in planned {
            // What driftless builds from its own kinds (workspace, elasticweb, ...) comes
            // from Kubernetes' typed models: only a manifest can name a field that is not.
            if p.obj.spec.kind != crate::spec::Kind::Manifest {
                continue;
            }
            let Ok(resolved) = &p.resolved else { continue };
            // Hooks are made, not applied (a generated name has no object to patch), and
            // an object kept as first created is not written again.
            if p.obj.policy.hook.is_some() || self.without_apply(&p.key).await {
                continue;
            }
            let entry = recorded.entries.get(&p.key);
            if p.obj.policy.create_only && entry.is_some() {
                continue;
            }
            let unchanged = match entry {
                Some(e) => {
                    self.applied_as(e, &p.key, p.obj.policy.sealed, &p.shaped().body)
                        .await
                }
                None => false,
            };
            if !unchanged {
                asked.push((p, resolved));
            }
        }
        // A custom resource whose CRD this sync changes is judged by the new schema, which
        // the apiserver has only once the CRD is applied (a field the upgrade adds): its
        // apply says a refusal, in the same words.
        let changing: Vec<(String, String)> = asked
            .iter()
            .filter(|(p, _)| p.key.is("apiextensions.k8s.io", "CustomResourceDefinition"))
            .filter_map(|(p, _)| {
                let crd = p.obj.body.value();
                let spec = &crd["spec"];
                let (group, kind) = (spec["group"].as_str()?, spec["names"]["kind"].as_str()?);
                Some((group.to_string(), kind.to_string()))
            })
            .collect();
        asked.retain(|(p, _)| {
            !changing
                .iter()
                .any(|(group, kind)| *group == p.key.group && *kind == p.key.kind)
        });
        if asked.is_empty() {
            return Vec::new();
        }
        let pp = PatchParams {
            dry_run: true,
            // Another manager's fields are the apply's to meet (a conflict, or taken).
            force: true,
            ..super::apply_params(&self.opts.field_manager)
        };
        // Made up front and boxed as `Send` (rust-lang/rust#102211; see `apply_in_phases`).
        let pp = &pp;
        let asks: Vec<futures::future::BoxFuture<'_, (usize, Option<String>, bool)>> = asked
            .iter()
            .enumerate()
            .map(|(i, (p, resolved))| -> futures::future::BoxFuture<'_, _> {
                Box::pin(async move {
                    let namespace = Some(p.key.namespace.as_str());
                    let p = &p.shaped();
                    let body = p.full.as_ref().unwrap_or(&p.body);
                    let name = &p.key.name;
                    match warned::apply(&self.client, resolved, namespace, name, pp, body).await {
                        Ok(_) => (i, None, false),
                        Err(e) if field_refusal(&e).is_some() => {
                            (i, Some(refusal_text(p, &e)), true)
                        }
                        Err(e) if counts_as_refused(&e) => (i, Some(error_text(&e)), false),
                        Err(_) => (i, None, false),
                    }
                })
            })
            .collect();
        let answers: Vec<(usize, Option<String>, bool)> = futures::stream::iter(asks)
            .buffer_unordered(self.opts.concurrency.max(1))
            .collect()
            .await;
        if !answers.iter().any(|(_, _, fields)| *fields) {
            return Vec::new();
        }
        let mut refused: Vec<(usize, String)> = answers
            .into_iter()
            .filter_map(|(i, why, _)| Some((i, why?)))
            .collect();
        refused.sort_by_key(|(i, _)| *i);
        refused
            .into_iter()
            .map(|(i, why)| {
                let p = asked[i].0;
                // As the apply says a refusal (`patch`), once.
                tracing::info!(
                    spec = %p.obj.spec,
                    object = %p.key,
                    action = "failed",
                    error = %why,
                    "not applied"
                );
                ObjectResult {
                    key: p.key.clone(),
                    spec: p.obj.spec.clone(),
                    action: Action::Failed(why),
                    live: None,
                    resource_version: None,
                    fields: None,
                    drift: None,
                    warnings: Vec::new(),
                }
            })
            .collect()
    }
}

/// The apps whose objects the apiserver refused (`refused`), each with its first refusal;
/// `None` when the revision stops whole instead: an object refused is the tree's own (no
/// app), or the tree says all or nothing.
pub(super) fn refused_apps(
    refused: &[ObjectResult],
    planned: &[Planned<'_>],
    facts: &crate::spec::TreeFacts,
) -> Option<BTreeMap<String, String>> {
    if facts.all_or_nothing {
        return None;
    }
    let by_key: BTreeMap<&crate::object::ObjKey, &Planned<'_>> =
        planned.iter().map(|p| (&p.key, p)).collect();
    let mut apps = BTreeMap::new();
    for r in refused {
        let app = by_key.get(&r.key).and_then(|p| super::record::app(p))?;
        let why = match &r.action {
            Action::Failed(why) => format!("{}: {why}", r.key),
            _ => continue,
        };
        apps.entry(app).or_insert(why);
    }
    Some(apps)
}

/// Takes the held `apps`' objects out of `planned`: a result for each (the refused as
/// refused, the others as held with their app), and the specs they stand for.
pub(super) fn held_out(
    planned: &mut Vec<Planned<'_>>,
    refused: Vec<ObjectResult>,
    apps: &BTreeMap<String, String>,
) -> (Vec<ObjectResult>, BTreeSet<crate::spec::SpecId>) {
    let mut results: BTreeMap<crate::object::ObjKey, ObjectResult> =
        refused.into_iter().map(|r| (r.key.clone(), r)).collect();
    let mut specs = BTreeSet::new();
    planned.retain(|p| {
        let Some((app, why)) = super::record::app(p).and_then(|a| apps.get_key_value(&a)) else {
            return true;
        };
        specs.insert(p.obj.spec.clone());
        results
            .entry(p.key.clone())
            .or_insert_with(|| ObjectResult {
                key: p.key.clone(),
                spec: p.obj.spec.clone(),
                action: Action::Failed(format!(
                    "app {app} held, neither applied nor pruned: the apiserver refused {why}"
                )),
                live: None,
                fields: None,
                drift: None,
                warnings: Vec::new(),
                resource_version: None,
            });
        false
    });
    (results.into_values().collect(), specs)
}

/// Why a sync refused by `refused_fields` stopped.
pub(super) fn stopped_for_fields(results: &[ObjectResult]) -> String {
    let n = results.len();
    let objects = if n == 1 { "object" } else { "objects" };
    format!(
        "the apiserver refused {n} {objects} of this revision (a field its schema does not have, or given twice): nothing of it was applied, and nothing was pruned"
    )
}

/// A refusal met by the apply as well, which then also is reported with the revision:
/// not a missing namespace (made by the sync), an immutable field (replaced where the
/// policy says so) or a conflict (the apply's to settle).
fn counts_as_refused(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            !matches!(s.code, 404 | 409) && super::replace::immutable_fields(e).is_none()
        }
        _ => false,
    }
}

/// A refusal for the manifest's own fields, in our words: `unknown field spec.replicass`,
/// `duplicate entries for key [containerPort=80,protocol="TCP"] in spec.template...ports`.
/// Server-side apply types the patch before anything else (a 500, with every version we
/// test), and Strict field validation says `strict decoding error` (a 400).
pub(super) fn field_refusal(e: &kube::Error) -> Option<String> {
    let kube::Error::Api(s) = e else { return None };
    // One refusal a line: a patch with several wrong fields is refused with `errors:` and
    // each on a line of its own.
    let said: Vec<String> = s.message.lines().filter_map(field_line).collect();
    (!said.is_empty()).then(|| said.join("; "))
}

fn field_line(line: &str) -> Option<String> {
    if let Some(at) = line.find(": field not declared in schema") {
        let path = last_path(&line[..at]);
        return Some(format!("unknown field {path}"));
    }
    if let Some(at) = line.find(": duplicate entries for key ") {
        let path = last_path(&line[..at]);
        let key = line[at + ": duplicate entries for key ".len()..].trim();
        return Some(format!("duplicate entries for key {key} in {path}"));
    }
    let strict = line.find("strict decoding error: ")?;
    Some(
        line[strict + "strict decoding error: ".len()..]
            .trim()
            .replace('"', ""),
    )
}

/// The field path a message ends with (`.spec.replicass`), without its leading dot.
fn last_path(text: &str) -> &str {
    let path = text.rsplit([' ', '(']).next().unwrap_or(text);
    path.strip_prefix('.').unwrap_or(path)
}

/// A refusal of `p` as apply and diff say it: a field refusal in our words at the place
/// the object is written, any other as the apiserver put it.
pub(super) fn refusal_text(p: &Planned<'_>, e: &kube::Error) -> String {
    match field_refusal(e) {
        Some(words) => located(p, &words),
        None => error_text(e),
    }
}

/// `words` at the place the object is written (`file:line:col`), when known.
fn located(p: &Planned<'_>, words: &str) -> String {
    match &p.obj.at {
        Some(at) => format!("{at}: {words}"),
        None => words.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn the_apiservers_field_refusals_in_our_words() {
        assert_eq!(
            field_refusal(&api(500, "failed to create typed patch object (ns/web; apps/v1, Kind=Deployment): .spec.replicass: field not declared in schema")).as_deref(),
            Some("unknown field spec.replicass")
        );
        assert_eq!(
            field_refusal(&api(500, "failed to create typed patch object (ns/web; apps/v1, Kind=Deployment): .spec.template.spec.containers[name=\"web\"].ports: duplicate entries for key [containerPort=80,protocol=\"TCP\"]")).as_deref(),
            Some("duplicate entries for key [containerPort=80,protocol=\"TCP\"] in spec.template.spec.containers[name=\"web\"].ports")
        );
        assert_eq!(
            field_refusal(&api(
                400,
                "strict decoding error: unknown field \"spec.colour\""
            ))
            .as_deref(),
            Some("unknown field spec.colour")
        );
        assert_eq!(
            field_refusal(&api(500, "failed to create typed patch object (ns/web; apps/v1, Kind=Deployment): errors:\n  .spec.replicass: field not declared in schema\n  .spec.template.spec.containers[name=\"web\"].ports: duplicate entries for key [containerPort=80,protocol=\"TCP\"]")).as_deref(),
            Some("unknown field spec.replicass; duplicate entries for key [containerPort=80,protocol=\"TCP\"] in spec.template.spec.containers[name=\"web\"].ports")
        );
        assert_eq!(
            field_refusal(&api(
                422,
                "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1"
            )),
            None
        );
    }
}
