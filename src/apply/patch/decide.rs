//! What the live object decides before a write: whose it is, the no-write rule (shared
//! with `diff`), drift read again before it is taken back, and the intent's hashes the
//! inventory compares.

use std::ops::ControlFlow;

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::{Answer, Found, result_of};
use crate::apply::hash::{BodyHashes, HashKey, body_hashes, owned_fields_hash_of};
use crate::apply::live::Live;
use crate::apply::plan::{Shaped, pinned};
use crate::apply::{Action, Engine, Entry, ObjectResult, Packed, record};
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
    version.is_some_and(|(major, minor, _)| crate::apply::without_apply::before(major, minor, 22))
}

/// What apply sends, as the inventory compares it: the body's hashes, keyed (`key`) for
/// a Secret or an object decrypted from a SOPS file.
pub(super) struct Intent<'k> {
    pub(super) key: Option<&'k HashKey>,
    pub(super) keyed: bool,
    pub(super) applied: String,
    pub(super) shape: String,
    /// The unkeyed hash a keyed object's entry may record (`Engine::intent`).
    pub(super) plain: Option<String>,
}

impl Intent<'_> {
    /// Whether `e` records this intent as last applied.
    pub(super) fn same(&self, e: &Entry) -> bool {
        e.applied.as_deref() == Some(self.applied.as_str())
            || (self.plain.is_some() && e.applied == self.plain)
    }
}

/// How the live object has the write made.
#[derive(Default)]
pub(super) struct Write {
    /// Take the fields other managers hold: adopting it, taking drift back, or as told.
    pub(super) force: bool,
    /// Delete and create it: a Pod whose shape changed.
    pub(super) replace: bool,
    /// The drift taken back.
    pub(super) drift: Option<Box<crate::apply::drift::DriftSeen>>,
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
        key: Option<&HashKey>,
        recorded: Option<&str>,
    ) -> Option<Option<Box<crate::apply::drift::DriftSeen>>> {
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
        let seen = crate::apply::drift::drift_of(&p.body, &whole, &self.opts.field_manager, key);
        Some(Some(Box::new(seen)))
    }

    /// An object that carries this instance's mark but that the inventory does not
    /// confirm as written (its entry still pending: a sync cut short after the write
    /// was answered, or another member's, stopped at once when its Lease lapsed, before
    /// it could record what it wrote): its apply is dry-run first, pinned to the version
    /// read, and where the apiserver's answer is the object as it stands the write would
    /// change nothing. That object, to be recorded without a second write of the same
    /// intent; `None` where it would change or the dry run cannot tell (the write then
    /// goes ahead as it always did).
    async fn unconfirmed_as_applied(
        &self,
        p: &Shaped<'_, '_>,
        api: &Api<DynamicObject>,
        force: bool,
    ) -> Option<Live> {
        // Ignored fields are let go of before the write, and an apiserver without apply
        // for the kind writes it another way: neither is what one dry run shows.
        if !p.obj.policy.ignore_fields.is_empty() || self.without_apply(&p.key).await {
            return None;
        }
        let whole = api.get(&p.key.name).await.ok()?;
        let read = serde_json::to_value(&whole).ok()?;
        let pinned = pinned(&p.body, whole.metadata.resource_version.as_deref());
        let dry = self
            .dry_apply(api, &p.key, &pinned, Some(&read), force)
            .await
            .ok()?;
        // A no-op apply leaves the object whole, managedFields and their times too.
        let unchanged = read == serde_json::to_value(&dry).ok()?;
        unchanged.then(|| Live::of(whole, &self.opts))
    }

    /// The answer for an object the dry run shows as `intent` leaves it
    /// ([`Self::unconfirmed_as_applied`]): unchanged, recorded with this intent, not
    /// written.
    async fn applied_unrecorded(
        &self,
        p: &Shaped<'_, '_>,
        api: &Api<DynamicObject>,
        intent: &Intent<'_>,
        force: bool,
    ) -> Option<Answer> {
        let whole = self.unconfirmed_as_applied(p, api, force).await?;
        tracing::debug!("already as this intent applies it: recorded, not written");
        let confirmed = record::confirmed(p, &whole, intent.applied.clone(), intent.shape.clone());
        let unchanged = ObjectResult {
            fields: Some(whole.fields),
            ..result_of(p, Action::Unchanged, None)
        };
        Some((unchanged, Some(confirmed)))
    }

    /// The hashes of what `p` sends. A Secret's hashes are keyed (`hash`), and so are
    /// those of any object decrypted from a SOPS file; without the key it is not applied,
    /// rather than recorded with a hash anyone reading the inventory could test guesses
    /// on.
    pub(super) async fn intent(
        &self,
        p: &Shaped<'_, '_>,
    ) -> Result<Intent<'_>, crate::apply::secret_key::KeyError> {
        let keyed = p.key.is("", "Secret") || p.obj.policy.sealed;
        let key = match keyed {
            true => Some(self.hash_key().await?),
            false => None,
        };
        let BodyHashes { applied, shape } = body_hashes(&p.body, key);
        // An inventory written before Secrets' hashes were keyed records the plain hash:
        // the same intent. It is taken as such, and recorded keyed from now on (an
        // inventory write, not a write of the Secret).
        let plain = keyed.then(|| body_hashes(&p.body, None).applied);
        Ok(Intent {
            key,
            keyed,
            applied,
            shape,
            plain,
        })
    }

    /// What the existing object `live` decides before any write: whether it is ours to
    /// write, and how (forcing, replacing); or the answer without a write (someone
    /// else's, created once, as last applied, drift only reported).
    pub(super) async fn before_write(
        &self,
        p: &Shaped<'_, '_>,
        found: &Found,
        live: &Live,
        intent: &Intent<'_>,
    ) -> ControlFlow<Answer, Write> {
        let mut write = Write {
            force: self.opts.force_conflicts,
            ..Write::default()
        };
        let entry = found.entry.as_ref();
        let recorded = entry.is_some_and(|e| is_recorded(e, &live.value));
        match claim(&live.value, &self.opts.instance, p.adopt) {
            Ok(Claim::Ours) if !recorded && !p.obj.policy.create_only => {
                if let Some(answer) = self
                    .applied_unrecorded(p, &found.api, intent, write.force)
                    .await
                {
                    return ControlFlow::Break(answer);
                }
            }
            Ok(Claim::Ours) => {}
            Ok(Claim::Adopt) => {
                write.force = true;
                if let Err(e) = self
                    .take_over_client_side_apply(&found.api, &p.key.name)
                    .await
                {
                    let msg = format!(
                        "adopting it: moving kubectl's ownership: {}",
                        error_text(&e)
                    );
                    let failed = result_of(p, Action::Failed(msg), Some(live.clone()));
                    return ControlFlow::Break((failed, entry.cloned()));
                }
            }
            Err(refusal) => {
                let conflict =
                    result_of(p, Action::Conflict(refusal.to_string()), Some(live.clone()));
                return ControlFlow::Break((conflict, entry.filter(|e| e.uid.is_some()).cloned()));
            }
        }
        let uid = live.value["metadata"]["uid"].as_str();
        // Created once; from then on whatever anyone makes of it is theirs.
        if p.obj.policy.create_only {
            let recorded = match entry {
                Some(e) if e.uid.as_deref() == uid && uid.is_some() => e.clone(),
                _ => record::confirmed(p, live, intent.applied.clone(), intent.shape.clone()),
            };
            let unchanged = ObjectResult {
                fields: Some(live.fields.clone()),
                ..result_of(p, Action::Unchanged, None)
            };
            return ControlFlow::Break((unchanged, Some(recorded)));
        }
        if recorded && let Some(e) = entry {
            self.against_record(p, &found.api, live, e, intent, &mut write)
                .await?;
        }
        ControlFlow::Continue(write)
    }

    /// What the object we applied `e`'s intent to decides: as last applied, nothing to
    /// write; a Pod of another shape, replaced; drift, taken back or (reporting only)
    /// left.
    async fn against_record(
        &self,
        p: &Shaped<'_, '_>,
        api: &Api<DynamicObject>,
        live: &Live,
        e: &Entry,
        intent: &Intent<'_>,
        write: &mut Write,
    ) -> ControlFlow<Answer> {
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
            if intent.keyed {
                recorded.applied = Some(intent.applied.clone());
                recorded.shape = Some(intent.shape.clone());
            }
            let unchanged = ObjectResult {
                live: crd.then(|| Packed::new(&live.value)),
                fields: Some(fields),
                ..result_of(p, Action::Unchanged, None)
            };
            ControlFlow::Break((unchanged, Some(recorded)))
        };
        if left_as_applied(e, intent.same(e), &p.body, &live.value, &live.fields) {
            return unchanged(live.fields.clone());
        }
        write.replace =
            p.key.is("", "Pod") && e.shape.as_deref().is_some_and(|s| s != intent.shape);
        // Our intent is what we last applied, so only someone else's edit moved our
        // fields: that is drift, and we take them back (or, reporting only, leave
        // it). A change of *our* intent that collides with another manager's fields
        // is a conflict to report instead.
        if intent.same(e) {
            let Some(seen) = self
                .read_drift(api, p, intent.key, e.fields.as_deref())
                .await
            else {
                return unchanged(e.fields.clone().unwrap_or_default());
            };
            if !self.opts.correct_drift || p.obj.policy.report_drift {
                let drifted = ObjectResult {
                    drift: seen,
                    ..result_of(p, Action::Drifted, Some(live.clone()))
                };
                return ControlFlow::Break((drifted, Some(e.clone())));
            }
            write.force = true;
            write.drift = seen;
        } else {
            if p.obj.policy.report_drift {
                // Drift left as it was is not someone's claim on the fields: a new
                // revision takes them back, as Argo CD's and Flux's syncs do.
                write.force = true;
            }
            // A new intent after a sync of this engine was stopped mid-write (a
            // member's Lease lapsed): perhaps written by that sync, which could not
            // record it. Dry-run first, so that it is recorded rather than written
            // twice; otherwise a change of intent costs nothing more.
            if self.cut_short()
                && let Some(answer) = self.applied_unrecorded(p, api, intent, write.force).await
            {
                return ControlFlow::Break(answer);
            }
        }
        ControlFlow::Continue(())
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
