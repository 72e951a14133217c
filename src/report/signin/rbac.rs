//! Who may see and steer what, as the cluster's RBAC says: a person may see a spec when
//! the cluster lets them `get` each kind of its objects in that object's namespace, and
//! steer it (reconcile, suspend, resume) when it lets them `patch` them. Asked with
//! SubjectAccessReview for the person's user and groups (the daemon's `Access`), and
//! kept briefly, so a change of a RoleBinding takes effect within that time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;

/// A signed-in person, as the cluster's RBAC knows them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Person {
    pub user: String,
    pub groups: Vec<String>,
}

/// One question for the cluster: may the person `verb` objects of `kind` (of `group`)
/// in `namespace` ("": cluster-scoped, or every namespace)?
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ask {
    pub verb: &'static str,
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

impl std::fmt::Display for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.kind)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        match self.namespace.as_str() {
            "" => write!(f, " (cluster-wide)"),
            ns => write!(f, " in namespace {ns}"),
        }
    }
}

/// Why the cluster gave no answer (away, or a kind it does not serve): a refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoAnswer(pub String);

/// The cluster's answer to one question (SubjectAccessReview).
pub trait Access: Send + Sync {
    fn review<'a>(
        &'a self,
        person: &'a Person,
        ask: &'a Ask,
    ) -> BoxFuture<'a, Result<bool, NoAnswer>>;
}

/// Answers kept at most this many; past it they are all dropped (asked again).
const KEPT_AT_MOST: usize = 50_000;

/// The answers of one cluster's RBAC, kept for `ttl`.
pub struct Rbac {
    access: Arc<dyn Access>,
    ttl: Duration,
    kept: Mutex<HashMap<(Person, Ask), (bool, Instant)>>,
}

impl Rbac {
    pub fn new(access: Arc<dyn Access>, ttl: Duration) -> Rbac {
        Rbac {
            access,
            ttl,
            kept: Mutex::new(HashMap::new()),
        }
    }

    pub async fn may(&self, person: &Person, ask: &Ask) -> bool {
        let key = (person.clone(), ask.clone());
        if let Ok(kept) = self.kept.lock()
            && let Some((answer, at)) = kept.get(&key)
            && at.elapsed() < self.ttl
        {
            return *answer;
        }
        let answer = match self.access.review(person, ask).await {
            Ok(answer) => answer,
            Err(why) => {
                tracing::warn!(user = %person.user, ask = %ask, error = %why, "cannot ask the cluster whether a person may; refused");
                false
            }
        };
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() >= KEPT_AT_MOST {
                kept.clear();
            }
            kept.insert(key, (answer, Instant::now()));
        }
        answer
    }

    /// The first right the person lacks on a spec (its entry in the status), if any.
    pub async fn lacks(&self, person: &Person, spec: &Value, verb: &'static str) -> Option<Ask> {
        for ask in asks(spec, verb) {
            if !self.may(person, &ask).await {
                return Some(ask);
            }
        }
        None
    }

    /// The ids of the specs (status entries) the person may see.
    pub async fn visible(&self, person: &Person, specs: &[Value]) -> HashSet<String> {
        let mut seen = HashSet::new();
        for spec in specs {
            if self.lacks(person, spec, "get").await.is_none()
                && let Some(id) = spec["id"].as_str()
            {
                seen.insert(id.to_string());
            }
        }
        seen
    }
}

/// What a spec's entry asks: one question per kind and namespace of its objects (as the
/// status names them, `Kind[.group] [namespace/]name`). A spec with no object yet (not
/// rendered, or invalid) stands for its namespace's ConfigMaps, what a team's `view`
/// role there grants; cluster-wide when it names none.
pub fn asks(spec: &Value, verb: &'static str) -> Vec<Ask> {
    let mut asks: Vec<Ask> = Vec::new();
    let objects = spec["objects"].as_array().into_iter().flatten();
    for object in objects.filter_map(|o| o["object"].as_str()) {
        let Some((kind, place)) = object.split_once(' ') else {
            continue;
        };
        let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
        let namespace = place.split_once('/').map_or("", |(ns, _)| ns);
        let ask = Ask {
            verb,
            group: group.to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
        };
        if !asks.contains(&ask) {
            asks.push(ask);
        }
    }
    if asks.is_empty() {
        asks.push(Ask {
            verb,
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: spec["namespace"].as_str().unwrap_or_default().to_string(),
        });
    }
    asks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Alice may get and patch in team-a; nobody anything else.
    struct Fixed(AtomicUsize);

    impl Access for Fixed {
        fn review<'a>(
            &'a self,
            person: &'a Person,
            ask: &'a Ask,
        ) -> BoxFuture<'a, Result<bool, NoAnswer>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(person.user == "alice" && ask.namespace == "team-a") })
        }
    }

    fn spec(id: &str, objects: &[&str]) -> Value {
        json!({"id": id, "namespace": "team-a",
               "objects": objects.iter().map(|o| json!({"object": o})).collect::<Vec<_>>()})
    }

    #[test]
    fn a_spec_asks_once_per_kind_and_namespace_of_its_objects() {
        let s = spec(
            "a",
            &[
                "Deployment.apps team-a/web",
                "Deployment.apps team-a/api",
                "Service team-a/web",
                "ClusterRole.rbac.authorization.k8s.io reader",
            ],
        );
        let said: Vec<String> = asks(&s, "get").iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "get Deployment.apps in namespace team-a",
                "get Service in namespace team-a",
                "get ClusterRole.rbac.authorization.k8s.io (cluster-wide)"
            ]
        );
        assert_eq!(
            asks(
                &json!({"id": "b", "namespace": "team-b", "objects": []}),
                "patch"
            )[0]
            .to_string(),
            "patch ConfigMap in namespace team-b"
        );
    }

    #[tokio::test]
    async fn a_person_sees_what_the_cluster_lets_them_get_and_answers_are_kept() {
        let fixed = Arc::new(Fixed(AtomicUsize::new(0)));
        let rbac = Rbac::new(fixed.clone(), Duration::from_secs(60));
        let alice = Person {
            user: "alice".into(),
            groups: vec!["team-a".into()],
        };
        let specs = vec![
            spec("mine", &["Deployment.apps team-a/web"]),
            spec(
                "mixed",
                &["Deployment.apps team-a/web", "Deployment.apps team-b/web"],
            ),
            spec("theirs", &["Service team-b/x"]),
        ];
        let seen = rbac.visible(&alice, &specs).await;
        assert_eq!(seen, HashSet::from(["mine".to_string()]));
        let asked = fixed.0.load(Ordering::SeqCst);
        rbac.visible(&alice, &specs).await;
        assert_eq!(fixed.0.load(Ordering::SeqCst), asked, "kept");
        assert_eq!(
            rbac.lacks(&alice, &specs[1], "patch")
                .await
                .map(|a| a.to_string()),
            Some("patch Deployment.apps in namespace team-b".into())
        );
        let short = Rbac::new(fixed.clone(), Duration::ZERO);
        short.visible(&alice, &specs).await;
        short.visible(&alice, &specs).await;
        assert!(
            fixed.0.load(Ordering::SeqCst) > asked + 3,
            "asked again once over"
        );
    }
}
