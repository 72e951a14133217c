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
        let user = format!("system:serviceaccount:{ns}:{sa}");
        let groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ];
        let attributes = ResourceAttributes {
            group: Some(resolved.resource.group.clone()),
            version: Some(resolved.resource.version.clone()),
            resource: Some(resolved.resource.plural.clone()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            name: name.map(str::to_string),
            verb: Some(verb.into()),
            ..ResourceAttributes::default()
        };
        let allowed = self.review(user, groups, attributes).await.map_err(|e| {
            format!(
                "asking whether ServiceAccount {account} may {verb} it: {}",
                error_text(&e)
            )
        })?;
        match allowed {
            true => Ok(()),
            false => Err(format!(
                "ServiceAccount {account} may not {verb} it (its driftless.dev/service-account, Flux's serviceAccountName)"
            )),
        }
    }

    /// One SubjectAccessReview: whether the cluster allows `user` in `groups`.
    async fn review(
        &self,
        user: String,
        groups: Vec<String>,
        attributes: ResourceAttributes,
    ) -> Result<bool, kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user),
                groups: Some(groups),
                resource_attributes: Some(attributes),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

impl Engine {
    /// A SubjectAccessReview for a person who signed in to the listener: may `user` (in
    /// `groups`, and every authenticated user's group) `verb` objects of `kind` in
    /// `group` in `namespace` ("": cluster-wide)? A kind the cluster does not serve is
    /// a no.
    pub(crate) async fn person_may(
        &self,
        user: &str,
        groups: &[String],
        verb: &str,
        group: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<bool, String> {
        let Some(plural) = self.resolver.plural(group, kind).await else {
            return Err(format!(
                "the cluster does not serve {kind} in group {group:?}"
            ));
        };
        let mut groups = groups.to_vec();
        groups.push("system:authenticated".into());
        let attributes = ResourceAttributes {
            group: Some(group.to_string()),
            resource: Some(plural),
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            verb: Some(verb.into()),
            ..ResourceAttributes::default()
        };
        self.review(user.to_string(), groups, attributes)
            .await
            .map_err(|e| {
                format!(
                    "asking whether {user} may {verb} {kind}: {}",
                    error_text(&e)
                )
            })
    }
}
