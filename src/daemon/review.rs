//! The cluster's RBAC as the listener's sign-in asks it (`report::signin::Access`):
//! SubjectAccessReviews through the cluster's handle.

use futures::future::BoxFuture;

use crate::apply::Cluster;
use crate::report::signin::rbac::NoAnswer;
use crate::report::signin::{Access, Ask, Person};

pub(super) struct ClusterAccess(pub(super) Cluster);

impl Access for ClusterAccess {
    fn review<'a>(
        &'a self,
        person: &'a Person,
        ask: &'a Ask,
    ) -> BoxFuture<'a, Result<bool, NoAnswer>> {
        Box::pin(async move {
            self.0
                .person_may(
                    &person.user,
                    &person.groups,
                    ask.verb,
                    &ask.group,
                    &ask.kind,
                    &ask.namespace,
                )
                .await
                .map_err(NoAnswer)
        })
    }
}
