//! Writing as a ServiceAccount may (`driftless.dev/service-account`, Flux's
//! `serviceAccountName`): before an object so marked is written, the apiserver is asked
//! whether that account may write it (a SubjectAccessReview: what impersonating it would
//! be allowed), and a refusal is the object's failure. So before it is pruned (the
//! inventory records the account it was applied as). driftless's own rights are never
//! more than the account's for it, as Flux's controllers impersonate a tenant's account.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::plan::Planned;
use super::resolve::Resolved;
use super::{Engine, Entry};
use crate::cluster::error_text;

impl Engine {
    /// `Err(why)` unless the ServiceAccount `account` (`NAMESPACE/NAME`) may write `p`:
    /// create it when it is missing (`exists` false), patch it otherwise.
    pub(super) async fn may_write(
        &self,
        account: &str,
        p: &Planned<'_>,
        resolved: &Resolved,
        exists: bool,
    ) -> Result<(), String> {
        let verb = if exists { "patch" } else { "create" };
        let name = exists.then_some(p.key.name.as_str());
        self.may(account, verb, resolved, &p.key.namespace, name)
            .await
            .map_err(|why| format!("{why}: not written"))
    }

    /// `Err(why)` unless `account` may delete the object `entry` records: what it
    /// applied as that account, it prunes as that account.
    pub(super) async fn may_delete(&self, account: &str, entry: &Entry) -> Result<(), String> {
        let resolved = self
            .resolver
            .resolve(&entry.api_version(), &entry.key.kind)
            .await
            .map_err(|e| error_text(&e))?;
        let (ns, name) = (&entry.key.namespace, Some(entry.key.name.as_str()));
        self.may(account, "delete", &resolved, ns, name)
            .await
            .map_err(|why| format!("{why}: not pruned"))
    }

    /// A SubjectAccessReview: may `account` do `verb` to the object (`name`, or any of
    /// its kind in `namespace` for a create)?
    async fn may(
        &self,
        account: &str,
        verb: &str,
        resolved: &Resolved,
        namespace: &str,
        name: Option<&str>,
    ) -> Result<(), String> {
        let Some((ns, sa)) = account.split_once('/') else {
            return Err(format!(
                "{account:?} is not a ServiceAccount as NAMESPACE/NAME"
            ));
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{ns}:{sa}")),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(resolved.resource.group.clone()),
                    version: Some(resolved.resource.version.clone()),
                    resource: Some(resolved.resource.plural.clone()),
                    namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
                    name: name.map(str::to_string),
                    verb: Some(verb.into()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                format!(
                    "asking whether ServiceAccount {account} may {verb} it: {}",
                    error_text(&e)
                )
            })?;
        match answer.status {
            Some(s) if s.allowed => Ok(()),
            _ => Err(format!(
                "ServiceAccount {account} may not {verb} it (its driftless.dev/service-account, Flux's serviceAccountName)"
            )),
        }
    }
}
