//! One object's apply: the ownership decision, the no-write rule, server-side apply, and
//! replacement when a Pod cannot change in place.

use std::borrow::Cow;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde_json::Value;

use super::hash::{BodyHashes, body_hashes, owned_fields_hash_of};
use super::live::Live;
use super::plan::{Planned, Shaped};
use super::{Action, Engine, Entry, ObjectResult, Packed, Verb, record, replace, warned};
use crate::cluster::error_text;
use crate::object::{Claim, claim};

/// Whether the live object runs other replicas than the body asks for. Before Kubernetes
/// 1.22 a change through the scale subresource (`kubectl scale`) moves no field
/// ownership, so only the value shows it. A metadata-only read has no `spec`: unknown,
/// and the watch (which sees whole objects) asks for a sync that reads it whole.
pub(in crate::apply) fn scaled(body: &Value, live: &Value) -> bool {
    let replicas = |v: &Value| v.pointer("/spec/replicas").and_then(Value::as_i64);
    matches!((replicas(body), replicas(live)), (Some(want), Some(have)) if want != have)
}

/// Whether `live` is the object `e` records: the UID it had when we applied it. Another
/// object of the same name (deleted and made again) was not applied by us.
pub(in crate::apply) fn is_recorded(e: &Entry, live: &Value) -> bool {
    let uid = live["metadata"]["uid"].as_str();
    uid.is_some() && e.uid.as_deref() == uid
}

/// The no-write rule, for an existing object: it is the object `e` records, our intent
/// is the one last applied to it (`same_intent`: the caller compares the hashes, a
/// Secret's keyed), the fields our manager owns hash as that apply left them (`fields`,
/// `live`'s), and it runs the replicas `body` asks for (as far as `live` shows them; see
/// `scaled`). Where it holds, a sync writes nothing and `diff` shows the object unchanged
/// without a dry run: one rule for both, so that what `diff` calls unchanged is what
/// `apply` leaves alone.
pub(in crate::apply) fn left_as_applied(
    e: &Entry,
    same_intent: bool,
    body: &Value,
    live: &Value,
    fields: &str,
) -> bool {
    is_recorded(e, live)
        && same_intent
        && e.fields.as_deref() == Some(fields)
        && !scaled(body, live)
}

/// Whether the apiserver predates Kubernetes 1.22, where a scale through the scale
/// subresource moves no field ownership: only `spec.replicas` itself shows it, which a
/// metadata-only read does not hold.
pub(in crate::apply) fn scale_moves_no_fields(version: Option<&(String, String, String)>) -> bool {
    version.is_some_and(|(major, minor, _)| super::without_apply::before(major, minor, 22))
}

impl Engine {
    /// Reads an object that looks drifted (our unchanged intent's fields moved, or its
    /// replicas) again, whole, before it is taken back or left: the copy it was judged
    /// by may lag a write made just before (this replica's own, in a sync cut short;
    /// another member's, before it handed the bucket over), and writing it again would
    /// be a second write of the same intent.
    ///
    /// `None` when the object is as `recorded` says after all: no drift. Otherwise the
    /// drift, described from the read (`Some(None)` when it cannot be read: the drift is
    /// still handled, only not described).
    async fn read_drift(
        &self,
        api: &Api<DynamicObject>,
        p: &Shaped<'_, '_>,
        key: Option<&super::hash::HashKey>,
        recorded: Option<&str>,
    ) -> Option<Option<Box<super::drift::DriftSeen>>> {
        let Ok(whole) = api.get(&p.key.name).await else {
            return Some(None);
        };
        let fields = owned_fields_hash_of(&whole.metadata, &self.opts.field_manager);
        let Ok(whole) = serde_json::to_value(whole) else {
            return Some(None);
        };
        if recorded == Some(fields.as_str()) && !scaled(&p.body, &whole) {
            tracing::debug!("drifted only in a copy that lagged: left as it is");
            return None;
        }
        let seen = super::drift::drift_of(&p.body, &whole, &self.opts.field_manager, key);
        Some(Some(Box::new(seen)))
    }

    pub(super) async fn apply_one(
        &self,
        p: &Planned<'_>,
        live: Option<Option<Live>>,
        entry: Option<Entry>,
    ) -> (ObjectResult, Option<Entry>) {
        use tracing::Instrument as _;
        let span = tracing::info_span!("apply", spec = %p.obj.spec, object = %p.key);
        let p = &p.shaped();
        let (mut result, entry) = self.apply_one_inner(p, live, entry).instrument(span).await;
        // The apiserver's answer may quote the object, and a sealed one's values are
        // plaintext decrypted from a SOPS file: they never reach a status or a log.
        if p.obj.policy.sealed
            && let Action::Failed(m) | Action::Conflict(m) = &mut result.action
        {
            *m = crate::spec::sops::redact_sealed(m, p.full.as_ref().unwrap_or(&p.body));
        }
        // In our words, once: kube's own log line of the refused request is silenced.
        if let Action::Failed(m) | Action::Conflict(m) = &result.action {
            tracing::info!(
                spec = %p.obj.spec,
                object = %p.key,
                action = %result.action.label(),
                error = %m,
                "not applied"
            );
        }
        (result, entry)
    }

    /// The apply itself. A custom resource whose CRD this sync wrote may be refused for a
    /// field the new schema has, until the apiserver takes that schema up (a moment after
    /// the CRD's write was answered): such a refusal is asked again, bounded by `crd_wait`.
    async fn apply_settled(
        &self,
        p: &Shaped<'_, '_>,
        resolved: &super::resolve::Resolved,
        namespace: Option<&str>,
        pp: &PatchParams,
        body: &Value,
    ) -> Result<(kube::api::DynamicObject, Vec<String>), kube::Error> {
        let deadline = tokio::time::Instant::now() + self.opts.crd_wait;
        loop {
            let answer =
                warned::apply(&self.client, resolved, namespace, &p.key.name, pp, body).await;
            match &answer {
                Err(e)
                    if p.schema_settling
                        && super::validate::field_refusal(e).is_some()
                        && tokio::time::Instant::now() < deadline =>
                {
                    tracing::debug!("refused by the schema its CRD had: asked again");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    self.writes.count(Verb::Patch);
                }
                _ => return answer,
            }
        }
    }

    async fn apply_one_inner(
        &self,
        p: &Shaped<'_, '_>,
        live: Option<Option<Live>>,
        entry: Option<Entry>,
    ) -> (ObjectResult, Option<Entry>) {
        let result = |action: Action, live: Option<Live>| {
            let resource_version = live.as_ref().and_then(|l| l.version.clone());
            let (live, fields) = live.map(|l| (Packed::new(&l.value), l.fields)).unzip();
            ObjectResult {
                key: p.key.clone(),
                spec: p.obj.spec.clone(),
                action,
                live,
                resource_version,
                fields,
                drift: None,
                warnings: Vec::new(),
            }
        };
        let resolved = match &p.resolved {
            Ok(r) => r,
            Err(e) => return (result(Action::Failed(e.clone()), None), entry),
        };
        let api = resolved.api(
            &self.client,
            (!p.key.namespace.is_empty()).then_some(p.key.namespace.as_str()),
        );
        // Not read yet (its kind was served only after planning): read it now.
        let live = match live {
            Some(v) => v,
            None => match api.get_opt(&p.key.name).await {
                Ok(o) => o.map(|o| Live::of(o, &self.opts)),
                Err(e) => {
                    return (
                        result(
                            Action::Failed(format!("reading it: {}", error_text(&e))),
                            None,
                        ),
                        entry,
                    );
                }
            },
        };
        // Fields another manager owns (`[[ignore]]` managers) are left out as ignored
        // ones are; only the whole object names them.
        let stripped;
        let p = match (&live, p.obj.policy.ignore_managers.is_empty()) {
            (Some(_), false) => match api.get(&p.key.name).await {
                Ok(whole) => {
                    let whole = serde_json::to_value(whole).unwrap_or(Value::Null);
                    let owned =
                        super::managers::owned_by(&whole, &p.obj.policy.ignore_managers, &p.body);
                    match super::managers::without(&p.body, &owned) {
                        Cow::Borrowed(_) => p,
                        Cow::Owned(body) => {
                            stripped = Shaped {
                                p: p.p,
                                body,
                                full: p.full.clone(),
                            };
                            &stripped
                        }
                    }
                }
                Err(e) => {
                    let msg = format!("reading its field managers: {}", error_text(&e));
                    return (result(Action::Failed(msg), live), entry);
                }
            },
            _ => p,
        };
        // A Secret's hashes are keyed (`hash`), and so are those of any object decrypted
        // from a SOPS file; without the key it is not applied, rather than recorded with
        // a hash anyone reading the inventory could test guesses on.
        let keyed = p.key.is("", "Secret") || p.obj.policy.sealed;
        let key = match keyed {
            true => match self.hash_key().await {
                Ok(k) => Some(k),
                Err(e) => return (result(Action::Failed(e.to_string()), live), entry),
            },
            false => None,
        };
        let BodyHashes { applied, shape } = body_hashes(&p.body, key);
        // An inventory written before Secrets' hashes were keyed records the plain hash:
        // the same intent. It is taken as such, and recorded keyed from now on (an
        // inventory write, not a write of the Secret).
        let plain = keyed.then(|| body_hashes(&p.body, None).applied);
        let same_intent = |e: &Entry| {
            e.applied.as_deref() == Some(applied.as_str())
                || (plain.is_some() && e.applied == plain)
        };
        if live.is_none()
            && let Some(e) = entry
                .as_ref()
                .filter(|e| super::removed_by_its_ttl(p, e) && same_intent(e))
        {
            tracing::debug!("ran, and its TTL removed it: not run again until it changes");
            let kept = e.clone();
            return (result(Action::Unchanged, None), Some(kept));
        }
        let mut force = self.opts.force_conflicts;
        let mut replace = false;
        let mut drift_seen = None;
        if let Some(live) = &live {
            match claim(&live.value, &self.opts.instance, p.adopt) {
                Ok(Claim::Ours) => {}
                Ok(Claim::Adopt) => {
                    force = true;
                    if let Err(e) = self.take_over_client_side_apply(&api, &p.key.name).await {
                        let msg = format!(
                            "adopting it: moving kubectl's ownership: {}",
                            error_text(&e)
                        );
                        return (result(Action::Failed(msg), Some(live.clone())), entry);
                    }
                }
                Err(refusal) => {
                    return (
                        result(Action::Conflict(refusal.to_string()), Some(live.clone())),
                        entry.filter(|e| e.uid.is_some()),
                    );
                }
            }
            let uid = live.value["metadata"]["uid"].as_str();
            // Created once; from then on whatever anyone makes of it is theirs.
            if p.obj.policy.create_only {
                let recorded = match &entry {
                    Some(e) if e.uid.as_deref() == uid && uid.is_some() => e.clone(),
                    _ => record::confirmed(p, live, applied, shape),
                };
                let unchanged = ObjectResult {
                    fields: Some(live.fields.clone()),
                    ..result(Action::Unchanged, None)
                };
                return (unchanged, Some(recorded));
            }
            if let Some(e) = &entry
                && is_recorded(e, &live.value)
            {
                // Listed as metadata only (but CRDs): no body to hand on.
                let crd = p.key.kind == "CustomResourceDefinition";
                // A keyed entry (a Secret, a sealed object) stays keyed, whichever hash
                // matched. The app and the account are recorded here too, so entries made
                // before they were recorded gain them without a write to the object.
                let unchanged = |fields: String| {
                    let mut recorded = Entry {
                        app: record::app(p),
                        account: p.obj.policy.service_account.clone(),
                        ..e.clone()
                    };
                    if keyed {
                        recorded.applied = Some(applied.clone());
                        recorded.shape = Some(shape.clone());
                    }
                    let unchanged = ObjectResult {
                        live: crd.then(|| Packed::new(&live.value)),
                        fields: Some(fields),
                        ..result(Action::Unchanged, None)
                    };
                    (unchanged, Some(recorded))
                };
                if left_as_applied(e, same_intent(e), &p.body, &live.value, &live.fields) {
                    return unchanged(live.fields.clone());
                }
                replace = p.key.is("", "Pod") && e.shape.as_deref().is_some_and(|s| s != shape);
                // Our intent is what we last applied, so only someone else's edit moved our
                // fields: that is drift, and we take them back (or, reporting only, leave
                // it). A change of *our* intent that collides with another manager's fields
                // is a conflict to report instead.
                if same_intent(e) {
                    let Some(seen) = self.read_drift(&api, p, key, e.fields.as_deref()).await
                    else {
                        return unchanged(e.fields.clone().unwrap_or_default());
                    };
                    if !self.opts.correct_drift || p.obj.policy.report_drift {
                        let drifted = ObjectResult {
                            drift: seen,
                            ..result(Action::Drifted, Some(live.clone()))
                        };
                        return (drifted, Some(e.clone()));
                    }
                    force = true;
                    drift_seen = seen;
                } else if p.obj.policy.report_drift {
                    // Drift left as it was is not someone's claim on the fields: a new
                    // revision takes them back, as Argo CD's and Flux's syncs do.
                    force = true;
                }
            }
        }

        if let Some(account) = &p.obj.policy.service_account
            && let Err(why) = self.may_write(account, p, resolved, live.is_some()).await
        {
            return (result(Action::Failed(why), live), entry);
        }
        if replace && let Some(live) = &live {
            return self.replace(p, &api, &live.value, applied, shape).await;
        }
        let ignored = &p.obj.policy.ignore_fields;
        if live.is_some()
            && !ignored.is_empty()
            && let Err(e) = self.release_live(&api, &p.key.name, ignored).await
        {
            let msg = format!("letting go of its ignored fields: {}", error_text(&e));
            return (result(Action::Failed(msg), live), entry);
        }
        let pp = PatchParams {
            force,
            ..super::apply_params(&self.opts.field_manager)
        };
        // A create sends the ignored fields too: their first value is the spec's.
        let body = match (&live, &p.full) {
            (None, Some(full)) => full,
            _ => &p.body,
        };
        let mut warnings = Vec::new();
        let written = if self.without_apply(&p.key).await {
            self.write_without_apply(&api, &p.key.name, body, live.is_some(), false)
                .await
        } else {
            self.writes.count(Verb::Patch);
            let namespace = Some(p.key.namespace.as_str());
            match self.apply_settled(p, resolved, namespace, &pp, body).await {
                Ok((obj, said)) => {
                    warnings = said;
                    Ok(obj)
                }
                Err(e) if live.is_some() && self.emptied_map_refused(&e) => {
                    self.apply_after_emptying(&api, &p.key.name, body, &pp, e)
                        .await
                }
                Err(e) => Err(e),
            }
        };
        for w in &warnings {
            tracing::info!(warning = %w, "the apiserver warned");
        }
        match written {
            Ok(obj) => {
                let obj = match live.is_none() && p.full.is_some() {
                    true => match self.release(&api, obj, ignored).await {
                        Ok(obj) => obj,
                        Err(e) => {
                            // Created: recorded, so the next sync lets go of them.
                            let msg = format!(
                                "created, but letting go of its ignored fields failed: {}",
                                error_text(&e)
                            );
                            return (result(Action::Failed(msg), None), entry);
                        }
                    },
                    false => obj,
                };
                let v = Live::of(obj, &self.opts);
                let action = if live.is_some() {
                    Action::Configured
                } else {
                    Action::Created
                };
                tracing::info!(action = %action.label(), "applied");
                let e = record::confirmed(p, &v, applied, shape);
                let done = ObjectResult {
                    drift: drift_seen,
                    warnings,
                    ..result(action, Some(v))
                };
                (done, Some(e))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let msg = format!(
                    "field conflict with another manager (pass --force-conflicts to take the fields): {}",
                    e.message
                );
                (result(Action::Conflict(msg), live), entry)
            }
            // Most of a Pod's spec cannot change in place.
            Err(kube::Error::Api(e)) if e.code == 422 && p.key.is("", "Pod") && live.is_some() => {
                match &live {
                    Some(l) => self.replace(p, &api, &l.value, applied, shape).await,
                    None => (result(Action::Failed(e.message.clone()), None), entry),
                }
            }
            // Refused only for immutable fields: replaced where its policy says so.
            Err(e) if live.is_some() && replace::immutable_fields(&e).is_some() => {
                let fields = replace::immutable_fields(&e).unwrap_or_default();
                match &live {
                    Some(l) if replace::allowed(&p.key, &p.obj.policy, &self.opts) => {
                        self.replace(p, &api, &l.value, applied, shape).await
                    }
                    _ => {
                        let msg = replace::refusal(&p.key, &fields, &error_text(&e));
                        (result(Action::Failed(msg), live), entry)
                    }
                }
            }
            Err(e) => {
                let why = super::validate::refusal_text(p, &e);
                (result(Action::Failed(why), live), entry)
            }
        }
    }

    /// Reads the object whole (its managedFields) and lets go of the `ignored` fields our
    /// manager still owns: an object created before they were ignored, or whose release
    /// failed.
    async fn release_live(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        ignored: &[String],
    ) -> Result<(), kube::Error> {
        let obj = api.get(name).await?;
        self.release(api, obj, ignored).await.map(drop)
    }

    /// Delete, wait until gone, create: for changes the object cannot take in place.
    async fn replace(
        &self,
        p: &Shaped<'_, '_>,
        api: &Api<DynamicObject>,
        live: &Value,
        applied: String,
        shape: String,
    ) -> (ObjectResult, Option<Entry>) {
        // Only a successful replace has a live object we know the owned fields of.
        let result = |action: Action, live: Option<&Value>| ObjectResult {
            key: p.key.clone(),
            spec: p.obj.spec.clone(),
            action,
            live: live.map(Packed::new),
            resource_version: None,
            fields: None,
            drift: None,
            warnings: Vec::new(),
        };
        let uid = live["metadata"]["uid"].as_str().map(str::to_string);
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: uid.clone(),
                resource_version: None,
            }),
            propagation_policy: Some(replace::propagation(&p.key)),
            ..DeleteParams::default()
        };
        self.writes.count(Verb::Delete);
        match api.delete(&p.key.name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                return (
                    result(
                        Action::Failed(format!("replacing: delete failed: {}", error_text(&e))),
                        Some(live),
                    ),
                    None,
                );
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            match api.get_opt(&p.key.name).await {
                Ok(None) => break,
                Ok(Some(o)) if o.metadata.uid != uid => break,
                Ok(Some(_)) | Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                _ => {
                    return (
                        result(
                            Action::Failed("replacing: the old object did not go away".into()),
                            None,
                        ),
                        None,
                    );
                }
            }
        }
        self.writes.count(Verb::Patch);
        let body = p.full.as_ref().unwrap_or(&p.body);
        let created = api
            .patch(
                &p.key.name,
                &super::apply_params(&self.opts.field_manager),
                &Patch::Apply(body),
            )
            .await;
        let created = match created {
            Ok(obj) => self.release(api, obj, &p.obj.policy.ignore_fields).await,
            Err(e) => Err(e),
        };
        match created {
            Ok(obj) => {
                let v = Live::of(obj, &self.opts);
                tracing::info!("replaced");
                let e = record::confirmed(p, &v, applied, shape);
                let fields = Some(v.fields);
                let r = ObjectResult {
                    fields,
                    resource_version: v.version.clone(),
                    ..result(Action::Replaced, Some(&v.value))
                };
                (r, Some(e))
            }
            Err(e) => (
                result(
                    Action::Failed(format!("replacing: create failed: {}", error_text(&e))),
                    None,
                ),
                None,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scaled_compares_replicas_only_where_both_sides_have_them() {
        let body = json!({"spec": {"replicas": 1}});
        assert!(scaled(&body, &json!({"spec": {"replicas": 3}})));
        assert!(!scaled(&body, &json!({"spec": {"replicas": 1}})));
        // Read as metadata only: unknown, not a difference.
        assert!(!scaled(&body, &json!({"metadata": {}})));
        // A body that leaves replicas to others does not own them.
        assert!(!scaled(
            &json!({"spec": {}}),
            &json!({"spec": {"replicas": 3}})
        ));
    }

    #[test]
    fn the_no_write_rule_holds_for_a_metadata_only_view_of_the_object_as_left() {
        let e: Entry = serde_json::from_value(json!({
            "group": "apps", "kind": "Deployment", "namespace": "n", "name": "web",
            "version": "v1", "spec": "web", "uid": "u-1", "applied": "a", "fields": "f",
        }))
        .unwrap();
        let body = json!({"spec": {"replicas": 2}});
        // As a metadata-only list shows it: no replicas to compare.
        let listed = json!({"metadata": {"name": "web", "uid": "u-1"}});
        assert!(left_as_applied(&e, true, &body, &listed, "f"));
        // Another intent, fields someone else moved, another object of the same name.
        assert!(!left_as_applied(&e, false, &body, &listed, "f"));
        assert!(!left_as_applied(&e, true, &body, &listed, "g"));
        let other = json!({"metadata": {"name": "web", "uid": "u-2"}});
        assert!(!left_as_applied(&e, true, &body, &other, "f"));
        assert!(!left_as_applied(
            &e,
            true,
            &body,
            &json!({"metadata": {}}),
            "f"
        ));
        // Read whole, and scaled.
        let whole = json!({"metadata": {"uid": "u-1"}, "spec": {"replicas": 5}});
        assert!(!left_as_applied(&e, true, &body, &whole, "f"));
    }

    #[test]
    fn only_an_apiserver_before_1_22_hides_a_scale_from_field_ownership() {
        let v = |major: &str, minor: &str| (major.to_string(), minor.to_string(), String::new());
        assert!(scale_moves_no_fields(Some(&v("1", "21"))));
        assert!(scale_moves_no_fields(Some(&v("1", "20+"))));
        assert!(!scale_moves_no_fields(Some(&v("1", "22"))));
        assert!(!scale_moves_no_fields(Some(&v("1", "37"))));
        // One that does not say is taken as a current one.
        assert!(!scale_moves_no_fields(None));
    }
}
