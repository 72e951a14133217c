//! Writing as a ServiceAccount may (`driftless.dev/service-account`, Flux's
//! `serviceAccountName`): before an object so marked is written, the apiserver is asked
//! whether that account may write it (a SubjectAccessReview: what impersonating it would
//! be allowed), and a refusal is the object's failure. driftless's own rights are never
//! more than the account's for it, as Flux's controllers impersonate a tenant's account.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::Engine;
use super::plan::Planned;
use super::resolve::Resolved;
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
        let Some((ns, name)) = account.split_once('/') else {
            return Err(format!(
                "{account:?} is not a ServiceAccount as NAMESPACE/NAME"
            ));
        };
        let verb = if exists { "patch" } else { "create" };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{ns}:{name}")),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(resolved.resource.group.clone()),
                    version: Some(resolved.resource.version.clone()),
                    resource: Some(resolved.resource.plural.clone()),
                    namespace: (!p.key.namespace.is_empty()).then(|| p.key.namespace.clone()),
                    name: exists.then(|| p.key.name.clone()),
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
                "ServiceAccount {account} may not {verb} it (its driftless.dev/service-account, Flux's serviceAccountName): not written"
            )),
        }
    }
}
