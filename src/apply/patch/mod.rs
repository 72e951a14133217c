//! One object's apply: server-side apply, and replacement when a Pod cannot change in
//! place; what the live object decides before the write (the ownership decision, the
//! no-write rule, drift) is `decide`.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde_json::Value;

use super::live::Live;
use super::plan::{Planned, Shaped};
use super::{Action, Engine, Entry, ObjectResult, Packed, Verb, record, replace, warned};
use crate::cluster::error_text;

mod decide;

use decide::{Intent, Write};
pub(in crate::apply) use decide::{is_recorded, left_as_applied, scale_moves_no_fields};

/// One object's answer: its result, and its inventory entry.
type Answer = (ObjectResult, Option<Entry>);

/// What apply found of the object: where it is written, what is live (`None`: nothing),
/// and what the inventory records of it.
struct Found {
    api: Api<DynamicObject>,
    live: Option<Live>,
    entry: Option<Entry>,
}

/// The result for `p` with `action`, and `live` as the write (or a read) left it.
fn result_of(p: &Shaped<'_, '_>, action: Action, live: Option<Live>) -> ObjectResult {
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
}

impl Engine {
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
    ) -> Answer {
        let failed = |msg: String, live: Option<Live>| result_of(p, Action::Failed(msg), live);
        let resolved = match &p.resolved {
            Ok(r) => r,
            Err(e) => return (failed(e.clone(), None), entry),
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
                        failed(format!("reading it: {}", error_text(&e)), None),
                        entry,
                    );
                }
            },
        };
        let found = Found { api, live, entry };
        let stripped;
        let p = match self.without_managers(p, &found).await {
            Ok(None) => p,
            Ok(Some(s)) => {
                stripped = s;
                &stripped
            }
            Err(msg) => return (failed(msg, found.live), found.entry),
        };
        let intent = match self.intent(p).await {
            Ok(i) => i,
            Err(e) => return (failed(e.to_string(), found.live), found.entry),
        };
        if found.live.is_none()
            && let Some(e) = found
                .entry
                .as_ref()
                .filter(|e| super::removed_by_its_ttl(p, e) && intent.same(e))
        {
            tracing::debug!("ran, and its TTL removed it: not run again until it changes");
            let kept = e.clone();
            return (result_of(p, Action::Unchanged, None), Some(kept));
        }
        let write = match &found.live {
            Some(live) => match self.before_write(p, &found, live, &intent).await {
                ControlFlow::Continue(write) => write,
                ControlFlow::Break(answer) => return answer,
            },
            None => Write {
                force: self.opts.force_conflicts,
                ..Write::default()
            },
        };

        if let Some(account) = &p.obj.policy.service_account
            && let Err(why) = self
                .may_write(account, p, resolved, found.live.is_some())
                .await
        {
            return (failed(why, found.live), found.entry);
        }
        if write.replace
            && let Some(live) = &found.live
        {
            let Intent { applied, shape, .. } = intent;
            return self
                .replace(p, &found.api, &live.value, applied, shape)
                .await;
        }
        let ignored = &p.obj.policy.ignore_fields;
        if found.live.is_some()
            && !ignored.is_empty()
            && let Err(e) = self.release_live(&found.api, &p.key.name, ignored).await
        {
            let msg = format!("letting go of its ignored fields: {}", error_text(&e));
            return (failed(msg, found.live), found.entry);
        }
        let written = self.write(p, resolved, &found, write.force).await;
        self.answered(p, found, written, intent, write.drift).await
    }

    /// `p` without the fields another manager owns (`[[ignore]]` managers), which are
    /// left out as ignored ones are: only the whole object names them. `None` when it
    /// leaves nothing out.
    async fn without_managers<'s, 'a>(
        &self,
        p: &Shaped<'s, 'a>,
        found: &Found,
    ) -> Result<Option<Shaped<'s, 'a>>, String> {
        if found.live.is_none() || p.obj.policy.ignore_managers.is_empty() {
            return Ok(None);
        }
        match found.api.get(&p.key.name).await {
            Ok(whole) => {
                let whole = serde_json::to_value(whole).unwrap_or(Value::Null);
                let owned =
                    super::managers::owned_by(&whole, &p.obj.policy.ignore_managers, &p.body);
                Ok(match super::managers::without(&p.body, &owned) {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(body) => Some(Shaped {
                        p: p.p,
                        body,
                        full: p.full.clone(),
                    }),
                })
            }
            Err(e) => Err(format!("reading its field managers: {}", error_text(&e))),
        }
    }

    /// The write: a server-side apply (`force`d to take fields), or what an apiserver
    /// that cannot apply this object takes instead (`without_apply`).
    async fn write(
        &self,
        p: &Shaped<'_, '_>,
        resolved: &super::resolve::Resolved,
        found: &Found,
        force: bool,
    ) -> Result<(DynamicObject, Vec<String>), kube::Error> {
        let pp = PatchParams {
            force,
            ..super::apply_params(&self.opts.field_manager)
        };
        let (api, exists) = (&found.api, found.live.is_some());
        // A create sends the ignored fields too: their first value is the spec's.
        let body = match (&found.live, &p.full) {
            (None, Some(full)) => full,
            _ => &p.body,
        };
        if self.without_apply(&p.key).await {
            return self
                .write_without_apply(api, &p.key.name, body, exists, false)
                .await
                .map(|obj| (obj, Vec::new()));
        }
        self.writes.count(Verb::Patch);
        let namespace = Some(p.key.namespace.as_str());
        match self.apply_settled(p, resolved, namespace, &pp, body).await {
            Ok(answer) => Ok(answer),
            Err(e) if exists && self.emptied_map_refused(&e) => self
                .apply_after_emptying(api, &p.key.name, body, &pp, e)
                .await
                .map(|obj| (obj, Vec::new())),
            Err(e) => Err(e),
        }
    }

    /// The answer to the write: the object as written, recorded; or why it was not, and
    /// a replacement where only replacing can make the change.
    async fn answered(
        &self,
        p: &Shaped<'_, '_>,
        found: Found,
        written: Result<(DynamicObject, Vec<String>), kube::Error>,
        intent: Intent<'_>,
        drift: Option<Box<super::drift::DriftSeen>>,
    ) -> Answer {
        let Found { api, live, entry } = found;
        let Intent { applied, shape, .. } = intent;
        let failed = |msg: String, live: Option<Live>| result_of(p, Action::Failed(msg), live);
        match written {
            Ok((obj, warnings)) => {
                for w in &warnings {
                    tracing::info!(warning = %w, "the apiserver warned");
                }
                let obj = match live.is_none() && p.full.is_some() {
                    true => match self.release(&api, obj, &p.obj.policy.ignore_fields).await {
                        Ok(obj) => obj,
                        Err(e) => {
                            // Created: recorded, so the next sync lets go of them.
                            let msg = format!(
                                "created, but letting go of its ignored fields failed: {}",
                                error_text(&e)
                            );
                            return (failed(msg, None), entry);
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
                    drift,
                    warnings,
                    ..result_of(p, action, Some(v))
                };
                (done, Some(e))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let msg = format!(
                    "field conflict with another manager (pass --force-conflicts to take the fields): {}",
                    e.message
                );
                (result_of(p, Action::Conflict(msg), live), entry)
            }
            // Most of a Pod's spec cannot change in place.
            Err(kube::Error::Api(e)) if e.code == 422 && p.key.is("", "Pod") && live.is_some() => {
                match &live {
                    Some(l) => self.replace(p, &api, &l.value, applied, shape).await,
                    None => (failed(e.message.clone(), None), entry),
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
                        (failed(msg, live), entry)
                    }
                }
            }
            Err(e) => {
                let why = super::validate::refusal_text(p, &e);
                (failed(why, live), entry)
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
