//! Readiness judged again only where the live state changed.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::{Expected, SpecHealth, spec_health};
use crate::object::{Observed, Packed};
use crate::spec::{Spec, SpecId};

/// Ready specs' health, kept while the live views it was judged from stay the same: a
/// refresh then judges again only the specs whose objects changed, or that are not ready.
/// While 10,000 specs rolled out, a refresh ran each second and took about a core;
/// judging every spec afresh (reading every packed view back) was 755 M instructions of
/// each. Only a ready verdict is kept: it never depends on the time (an unschedulable
/// Pod's grace does, and it is not ready). A verdict kept is shared with the state that
/// shows it, not copied: at 10,000 specs the copies were 5 MiB at rest and 10 MiB more
/// while every spec became ready at once.
#[derive(Debug, Default)]
pub struct Judged {
    ready: HashMap<SpecId, (u64, Arc<SpecHealth>)>,
    /// Specs the last refresh judged (not taken from here): what a benchmark checks.
    pub last_judged: usize,
}

impl Judged {
    /// Every spec's health, in tree order, as [`super::tree_health`] gives it.
    pub fn tree_health(
        &mut self,
        specs: &[Spec],
        objects: &[Expected],
        observed: &Observed,
        now: Timestamp,
    ) -> Vec<Arc<SpecHealth>> {
        judge(Some(self), specs, objects, observed, now)
    }

    /// Forgets every verdict: what the specs render to changed (a rule, a node).
    pub fn clear(&mut self) {
        self.ready.clear();
    }

    /// Forgets the verdicts of `specs`: they changed, and a verdict is judged of the spec
    /// as much as of its objects (an elasticweb's figures).
    pub fn forget<'a>(&mut self, specs: impl IntoIterator<Item = &'a SpecId>) {
        for spec in specs {
            self.ready.remove(spec);
        }
    }
}

/// What a spec's health is judged from, as one number: each object's live view, and a
/// Service's Endpoints (a localservice's figures count them). Pods are read only for a
/// Deployment that is not ready, so a ready verdict never depends on them.
fn judged_from(objects: &[&Expected], observed: &Observed) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    for o in objects {
        observed
            .objects
            .get(&o.key)
            .map(|s| s.view.text())
            .hash(&mut h);
        if o.key.kind == "Service" {
            observed
                .endpoints
                .get(&(o.key.namespace.clone(), o.key.name.clone()))
                .map(Packed::text)
                .hash(&mut h);
        }
    }
    h.finish()
}

pub(super) fn judge(
    mut memo: Option<&mut Judged>,
    specs: &[Spec],
    objects: &[Expected],
    observed: &Observed,
    now: Timestamp,
) -> Vec<Arc<SpecHealth>> {
    // Objects grouped by spec in one pass (in their order): filtering all objects per
    // spec was quadratic, seconds per refresh at a few thousand specs.
    let mut by_spec: HashMap<&SpecId, Vec<&Expected>> = HashMap::with_capacity(specs.len());
    for o in objects {
        by_spec.entry(&o.spec).or_default().push(o);
    }
    let mut judged = 0;
    let healths = specs
        .iter()
        .map(|spec| {
            let mine = by_spec.get(&spec.id).map(Vec::as_slice).unwrap_or_default();
            let Some(memo) = memo.as_deref_mut() else {
                judged += 1;
                return Arc::new(spec_health(spec, mine, observed, now));
            };
            let from = judged_from(mine, observed);
            if let Some((was, health)) = memo.ready.get(&spec.id)
                && *was == from
            {
                return Arc::clone(health);
            }
            judged += 1;
            let health = Arc::new(spec_health(spec, mine, observed, now));
            if health.ready {
                memo.ready
                    .insert(spec.id.clone(), (from, Arc::clone(&health)));
            } else {
                memo.ready.remove(&spec.id);
            }
            health
        })
        .collect();
    if let Some(memo) = memo {
        // Specs gone from the tree are not kept.
        if memo.ready.len() > specs.len() {
            let ids: HashSet<&SpecId> = specs.iter().map(|s| &s.id).collect();
            memo.ready.retain(|id, _| ids.contains(id));
        }
        memo.last_judged = judged;
    }
    healths
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::health::{expected, readiness_view, tree_health};
    use crate::render::{Facts, Object, render};
    use crate::spec::{SourceFile, SpecTree, parse_files};

    /// Two elasticwebs of one replica each.
    fn tree() -> (SpecTree, Vec<Object>) {
        let text = |name: &str| {
            format!(
                "namespace = \"shop\"\n\n[elasticweb.{name}]\nimage = \"nginx:1.27\"\n\
                 single-pod-qps = 100\ntotal-qps = 100\ncpu = \"10m\"\nmemory = \"16Mi\"\n"
            )
        };
        let files: Vec<SourceFile> = ["web", "api"]
            .iter()
            .map(|n| SourceFile {
                path: format!("{n}.toml"),
                contents: text(n).into_bytes(),
            })
            .collect();
        let tree = parse_files(&files).unwrap();
        let objects = render(&tree, &Facts::default()).unwrap();
        (tree, objects)
    }

    fn live(o: &Object, available: i64) -> Value {
        let mut v = o.body.value();
        v["metadata"]["generation"] = json!(1);
        match o.kind.as_str() {
            "Deployment" => {
                v["status"] = json!({
                    "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                    "readyReplicas": available, "availableReplicas": available,
                    "conditions": [
                        {"type": "Available", "status": if available > 0 { "True" } else { "False" }},
                        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                    ],
                });
            }
            "Service" => v["spec"]["clusterIP"] = json!("10.0.0.10"),
            _ => {}
        }
        readiness_view(v)
    }

    fn observed(objects: &[Object], available: impl Fn(&Object) -> i64) -> Observed {
        let mut observed = Observed::default();
        for o in objects {
            let seen = crate::object::Seen {
                view: Packed::new(&live(o, available(o))),
                fields: String::new(),
            };
            observed.objects_mut().insert(o.key(), seen);
        }
        observed
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    #[test]
    fn a_ready_spec_is_judged_again_only_when_its_objects_change() {
        let (tree, objects) = tree();
        let expected = expected(&objects);
        let mut memo = Judged::default();
        let ready = observed(&objects, |_| 1);
        let first = memo.tree_health(&tree.specs, &expected, &ready, now());
        assert!(first.iter().all(|h| h.ready), "{first:?}");
        assert_eq!(memo.last_judged, 2);
        let again = memo.tree_health(&tree.specs, &expected, &ready, now());
        assert_eq!(memo.last_judged, 0, "nothing changed: nothing judged");
        assert_eq!(again, first);
        assert!(
            again.iter().zip(&first).all(|(a, b)| Arc::ptr_eq(a, b)),
            "a verdict kept is shared, not copied"
        );
        // One Deployment loses its Pod: that spec alone is judged, and says so.
        let one_down = observed(&objects, |o| i64::from(o.name != "web"));
        let after = memo.tree_health(&tree.specs, &expected, &one_down, now());
        assert_eq!(memo.last_judged, 1);
        let afresh = tree_health(&tree.specs, &expected, &one_down, now());
        assert!(after.iter().map(|h| &**h).eq(afresh.iter()), "{after:?}");
        let web = after.iter().find(|h| h.id.ends_with("/web")).unwrap();
        assert!(!web.ready, "{web:?}");
        assert!(after.iter().find(|h| h.id.ends_with("/api")).unwrap().ready);
    }

    #[test]
    fn a_spec_not_ready_is_judged_every_time_and_clear_forgets_all() {
        let (tree, objects) = tree();
        let expected = expected(&objects);
        let mut memo = Judged::default();
        let one_down = observed(&objects, |o| i64::from(o.name != "web"));
        memo.tree_health(&tree.specs, &expected, &one_down, now());
        assert_eq!(memo.last_judged, 2, "both, the first time");
        for _ in 0..2 {
            memo.tree_health(&tree.specs, &expected, &one_down, now());
            assert_eq!(memo.last_judged, 1, "the one not ready, each time after");
        }
        memo.clear();
        memo.tree_health(&tree.specs, &expected, &one_down, now());
        assert_eq!(memo.last_judged, 2);
    }

    #[test]
    fn an_object_gone_is_a_change() {
        let (tree, objects) = tree();
        let expected = expected(&objects);
        let mut memo = Judged::default();
        let mut ready = observed(&objects, |_| 1);
        memo.tree_health(&tree.specs, &expected, &ready, now());
        let service = objects.iter().find(|o| o.kind == "Service").unwrap();
        ready.objects_mut().remove(&service.key());
        let after = memo.tree_health(&tree.specs, &expected, &ready, now());
        assert_eq!(memo.last_judged, 1);
        assert_eq!(after.iter().filter(|h| h.ready).count(), 1, "{after:?}");
    }

    #[test]
    fn forget_drops_only_the_specs_named() {
        let (tree, objects) = tree();
        let expected = expected(&objects);
        let mut memo = Judged::default();
        let ready = observed(&objects, |_| 1);
        memo.tree_health(&tree.specs, &expected, &ready, now());
        let web = tree.specs.iter().find(|s| s.id.name == "web").unwrap();
        memo.forget([&web.id]);
        memo.tree_health(&tree.specs, &expected, &ready, now());
        assert_eq!(memo.last_judged, 1, "web alone judged again");
    }
}
