//! Watches that feed the daemon loop: every kind of object this instance owns (drift,
//! and the live state readiness is computed from, with no polling), and Nodes (for
//! `localservice`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tracing::Instrument as _;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::apply::Resolved;
use crate::apply::suspensions::{self, Suspensions};
use crate::health;
use crate::object::{ObjKey, Packed};
use crate::render::{NodeFacts, ownership};
use crate::spec::SpecId;

#[derive(Debug)]
pub enum Event {
    /// An owned object changed (`Some`) or went away (`None`).
    Object(ObjKey, Option<Watched>),
    /// The set of Nodes (names and labels) changed.
    Nodes(Vec<NodeFacts>),
    /// The Node watch, always running, cannot reach the API (`Some`: why), or can again
    /// (`None`): without it a daemon that never reached the cluster said nothing.
    Cluster(Option<String>),
    /// The suspended specs, as the cluster now records them.
    Suspensions(Suspensions),
    /// A kind's list began (the first, or one made again after the watch lost its
    /// place): not every object of it is known until `Listed`.
    Listing(GroupKind),
    /// A kind's list has reached the loop whole: from now on the watch follows every
    /// object of ours of it.
    Listed(GroupKind),
    /// A kind's list failed (the watch lists it again, with backoff).
    ListFailed,
}

pub(crate) use crate::object::GroupKind;

/// A live object as the watch passes it on: its readiness view (`health::readiness_view`,
/// packed), the spec its annotation names, and the hash of the fields our manager owns
/// (taken from managedFields first). Cut down in the watch task, so a burst of events
/// queued for a busy loop holds small objects.
#[derive(Debug)]
pub(crate) struct Watched {
    pub value: Packed,
    pub spec: Option<SpecId>,
    pub fields: String,
}

/// Initial lists under way at once (across kinds). One at a time left the daemon waiting
/// on the apiserver's encoding and the apiserver on the daemon's decoding, page after
/// page: at 10,000 specs the three kinds took 3.6 s in a row after a restart's sync.
const LISTS_AT_ONCE: usize = 3;

/// One watch task per owned kind, replaced as the set of kinds changes.
pub(crate) struct OwnedWatches {
    client: Client,
    selector: String,
    /// Our field manager: whose owned fields the watch hashes.
    manager: String,
    tx: mpsc::Sender<Event>,
    tasks: HashMap<String, JoinHandle<()>>,
    /// A few initial lists at a time across all kinds (`LISTS_AT_ONCE`): each holds a
    /// page until its objects are cut down (eight kinds listing pages of 500 whole
    /// objects at once took the daemon from 46 to 92 MiB at N=1,000, before pages were
    /// kept as text). A watch that is already streaming needs no permit.
    listing: Arc<Semaphore>,
}

fn resource_id(r: &Resolved) -> String {
    format!(
        "{}/{}/{}",
        r.resource.group, r.resource.version, r.resource.plural
    )
}

impl OwnedWatches {
    pub fn new(client: Client, instance: &str, manager: &str, tx: mpsc::Sender<Event>) -> Self {
        OwnedWatches {
            client,
            selector: format!("{}={instance}", ownership::INSTANCE),
            manager: manager.to_string(),
            tx,
            tasks: HashMap::new(),
            listing: Arc::new(Semaphore::new(LISTS_AT_ONCE)),
        }
    }

    /// Watches exactly `kinds` from now on.
    pub fn set(&mut self, kinds: &[Resolved]) {
        let wanted: BTreeMap<String, &Resolved> =
            kinds.iter().map(|r| (resource_id(r), r)).collect();
        self.tasks.retain(|id, handle| {
            let keep = wanted.contains_key(id);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (id, r) in wanted {
            if self.tasks.contains_key(&id) {
                continue;
            }
            let task = watch_kind(
                self.client.clone(),
                r.clone(),
                self.selector.clone(),
                self.manager.clone(),
                self.tx.clone(),
                self.listing.clone(),
            );
            self.tasks.insert(id, tokio::spawn(task.in_current_span()));
        }
    }
}

impl Drop for OwnedWatches {
    fn drop(&mut self) {
        for (_, h) in self.tasks.drain() {
            h.abort();
        }
    }
}

/// A watcher's events, backing off and retrying on its own after an error.
type Events<K> = futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

fn events<K>(api: Api<K>, config: watcher::Config) -> Events<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, config).default_backoff().boxed()
}

/// The next event, or why the watch failed; `None` once it ended.
async fn next<K>(events: &mut Events<K>) -> Option<Result<watcher::Event<K>, watcher::Error>> {
    events.try_next().await.transpose()
}

fn key_of(r: &Resolved, meta: &ObjectMeta) -> ObjKey {
    ObjKey {
        group: r.resource.group.clone(),
        kind: r.resource.kind.clone(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// An owned object as its watch receives it: what the watcher follows it by, and its
/// text, parsed when the watch task takes it. A page of whole objects decoded at once
/// was 16 MiB at 500 Deployments, and pages of 100 made a restart's lists wait on a
/// round trip per 100 objects; as text a page is its size on the wire.
#[derive(Clone, Debug)]
struct Raw {
    metadata: ObjectMeta,
    text: Box<RawValue>,
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            metadata: Ident,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct Ident {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
        }
        let text = Box::<RawValue>::deserialize(d)?;
        let head: Head = serde_json::from_str(text.get()).map_err(D::Error::custom)?;
        let metadata = ObjectMeta {
            name: head.metadata.name,
            namespace: head.metadata.namespace,
            resource_version: head.metadata.resource_version,
            ..ObjectMeta::default()
        };
        Ok(Raw { metadata, text })
    }
}

impl Resource for Raw {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

async fn watch_kind(
    client: Client,
    r: Resolved,
    selector: String,
    manager: String,
    tx: mpsc::Sender<Event>,
    listing: Arc<Semaphore>,
) {
    let api: Api<Raw> = Api::all_with(client, &r.resource);
    // Pages of 500 as text (`Raw`): about 1.6 MB of Deployments each.
    let config = watcher::Config::default().labels(&selector).page_size(500);
    let mut events = events(api, config);
    // Held from the watcher's `Init` (emitted before it sends the list request, which
    // only happens when the stream is polled again) to its `InitDone`, and dropped on an
    // error so a kind that cannot be listed does not hold up the others while it backs off.
    let mut permit: Option<OwnedSemaphorePermit> = None;
    // For the debug timeline: when the initial list began, and how many it held.
    let mut listed: Option<(std::time::Instant, usize)> = None;
    let kind: GroupKind = (r.resource.group.clone(), r.resource.kind.clone());
    while let Some(ev) = next(&mut events).await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                permit = None;
                let why = crate::cluster::error_text(&e);
                tracing::warn!(kind = %r.resource.kind, error = %why, "watch error");
                if listed.take().is_some() && tx.send(Event::ListFailed).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let out = match ev {
            watcher::Event::Apply(raw) | watcher::Event::InitApply(raw) => {
                if let Some((_, n)) = listed.as_mut() {
                    *n += 1;
                }
                let key = key_of(&r, &raw.metadata);
                let Some((view, fields)) = watched_view(&raw, &r.resource, &manager, &key) else {
                    continue;
                };
                let watched = Watched {
                    spec: spec_of(&view),
                    value: Packed::new(&view),
                    fields,
                };
                Event::Object(key, Some(watched))
            }
            watcher::Event::Delete(raw) => Event::Object(key_of(&r, &raw.metadata), None),
            watcher::Event::Init => {
                if permit.is_none() {
                    permit = listing.clone().acquire_owned().await.ok();
                }
                listed = Some((std::time::Instant::now(), 0));
                Event::Listing(kind.clone())
            }
            watcher::Event::InitDone => {
                permit = None;
                if let Some((began, objects)) = listed.take() {
                    tracing::debug!(
                        kind = %r.resource.kind,
                        objects,
                        ms = began.elapsed().as_millis() as u64,
                        "watch listed"
                    );
                }
                Event::Listed(kind.clone())
            }
        };
        // Backpressure rather than an unbounded queue: the loop drains this fast.
        if tx.send(out).await.is_err() {
            return;
        }
    }
}

/// What readiness reads of a watched object, and the hash of the fields `manager` owns.
/// A built-in kind's is read from the text as it is cut down; a custom resource, or text
/// the cut-down reading refuses, is read whole first (which says why it cannot be read).
fn watched_view(
    raw: &Raw,
    resource: &ApiResource,
    manager: &str,
    key: &ObjKey,
) -> Option<(Value, String)> {
    let text = raw.text.get();
    if let Some(Ok(read)) =
        health::readiness_view_of_text(text, &resource.api_version, &resource.kind)
        && let Ok(fields) =
            crate::apply::owned_fields_hash_in(read.managed_fields.as_deref(), manager)
    {
        return Some((read.view, fields));
    }
    match serde_json::from_str::<DynamicObject>(text) {
        Ok(obj) => {
            let (value, fields) = crate::apply::live_parts(obj, Some(resource), manager);
            Some((health::readiness_view(value), fields))
        }
        Err(e) => {
            tracing::warn!(object = %key, error = %e, "a watched object could not be read");
            None
        }
    }
}

/// The spec an owned object's annotation names.
fn spec_of(live: &Value) -> Option<SpecId> {
    live["metadata"]["annotations"][ownership::SPEC]
        .as_str()?
        .parse()
        .ok()
}

/// Sends the node set whenever a Node's name or labels change (not on heartbeats).
pub(crate) async fn watch_nodes(client: Client, tx: mpsc::Sender<Event>) {
    let api: Api<Node> = Api::all(client);
    let mut events = events(api, watcher::Config::default());
    let mut nodes: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, BTreeMap<String, String>>> = None;
    let mut sent: Option<BTreeMap<String, BTreeMap<String, String>>> = None;
    let mut failing: Option<String> = None;
    while let Some(ev) = next(&mut events).await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                // In our words: it goes into the status as the cluster's condition.
                let why = crate::cluster::error_text(&e);
                tracing::warn!(error = %why, "node watch error");
                if failing.as_ref() != Some(&why) {
                    failing = Some(why.clone());
                    if tx.send(Event::Cluster(Some(why))).await.is_err() {
                        return;
                    }
                }
                continue;
            }
        };
        if failing.take().is_some() && tx.send(Event::Cluster(None)).await.is_err() {
            return;
        }
        match ev {
            watcher::Event::Init => listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(n) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(n.name_any(), n.labels().clone());
                }
            }
            watcher::Event::InitDone => nodes = listing.take().unwrap_or_default(),
            watcher::Event::Apply(n) => {
                nodes.insert(n.name_any(), n.labels().clone());
            }
            watcher::Event::Delete(n) => {
                nodes.remove(&n.name_any());
            }
        }
        if listing.is_none() && sent.as_ref() != Some(&nodes) {
            let facts = nodes
                .iter()
                .map(|(name, labels)| NodeFacts {
                    name: name.clone(),
                    labels: labels.clone(),
                })
                .collect();
            if tx.send(Event::Nodes(facts)).await.is_err() {
                return;
            }
            sent = Some(nodes.clone());
        }
    }
}

/// Sends the suspended specs whenever their ConfigMap changes (every replica sees a
/// suspension made through any of them). Without permission to watch it, suspensions
/// made elsewhere are not seen: said once, retried with backoff.
/// The suspensions as the cluster holds them now, read once; `None` when they cannot be
/// read within a few seconds (the watch says so, and brings them when it can).
pub(crate) async fn read_suspensions(
    client: &kube::Client,
    namespace: &str,
    instance: &str,
) -> Option<Suspensions> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = suspensions::configmap_name(instance);
    match tokio::time::timeout(std::time::Duration::from_secs(5), api.get_opt(&name)).await {
        Ok(Ok(Some(cm))) => Some(suspensions::parse(&cm)),
        Ok(Ok(None)) => Some(Suspensions::new()),
        _ => None,
    }
}

pub(crate) async fn watch_suspensions(
    client: Client,
    namespace: String,
    instance: String,
    tx: mpsc::Sender<Event>,
) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let name = suspensions::configmap_name(&instance);
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = events(api, config);
    let mut current = Suspensions::new();
    let mut listed = false;
    let mut listing: Option<Suspensions> = None;
    let mut warned = false;
    while let Some(ev) = next(&mut events).await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(why) => {
                if !warned {
                    let why = crate::cluster::error_text(&why);
                    tracing::warn!(configmap = %name, error = %why, "cannot watch the suspensions");
                    warned = true;
                }
                continue;
            }
        };
        warned = false;
        let next = match ev {
            watcher::Event::Init => {
                listing = Some(Default::default());
                continue;
            }
            watcher::Event::InitApply(cm) => {
                listing = Some(suspensions::parse(&cm));
                continue;
            }
            watcher::Event::InitDone => listing.take().unwrap_or_default(),
            watcher::Event::Apply(cm) => suspensions::parse(&cm),
            watcher::Event::Delete(_) => Default::default(),
        };
        // The first list is sent even when empty: no sync starts before it (`Gate`).
        if next != current || !listed {
            listed = true;
            current = next.clone();
            if tx.send(Event::Suspensions(next)).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ObjectList, WatchEvent};

    #[test]
    fn a_watched_object_is_kept_as_text_with_what_the_watcher_follows_it_by() {
        let page = r#"{"kind":"DeploymentList","apiVersion":"apps/v1",
            "metadata":{"resourceVersion":"7","continue":"next"},
            "items":[{"metadata":{"name":"web","namespace":"shop","resourceVersion":"5",
            "managedFields":[{"manager":"driftless"}]},"spec":{"replicas":2}}]}"#;
        let list: ObjectList<Raw> = serde_json::from_str(page).unwrap();
        assert_eq!(list.metadata.continue_.as_deref(), Some("next"));
        let raw = &list.items[0];
        assert_eq!(raw.metadata.name.as_deref(), Some("web"));
        assert_eq!(raw.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(raw.metadata.resource_version.as_deref(), Some("5"));
        let whole: DynamicObject = serde_json::from_str(raw.text.get()).unwrap();
        assert_eq!(whole.data["spec"]["replicas"], 2);
        assert!(whole.metadata.managed_fields.is_some());

        let line =
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"web","resourceVersion":"6"}}}"#;
        match serde_json::from_str::<WatchEvent<Raw>>(line).unwrap() {
            WatchEvent::Modified(raw) => {
                assert_eq!(raw.metadata.resource_version.as_deref(), Some("6"))
            }
            other => panic!("{other:?}"),
        }
        let bookmark = r#"{"type":"BOOKMARK","object":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"resourceVersion":"9"}}}"#;
        assert!(matches!(
            serde_json::from_str::<WatchEvent<Raw>>(bookmark).unwrap(),
            WatchEvent::Bookmark(_)
        ));
    }

    /// The view and owned-fields hash read from text as it is cut down are the ones the
    /// whole object gives, byte for byte (views are compared as text): real objects as
    /// the apiserver sent them, with and without their types (a list's items have none),
    /// and the shapes readiness reads of other built-in kinds.
    #[test]
    fn a_view_read_from_text_is_the_one_the_whole_object_gives() {
        let fixture = |name: &str| -> Value {
            let path = format!(
                "{}/src/health/fixtures/watched/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        let mut endpoints = fixture("endpoints.json");
        endpoints["subsets"] = serde_json::json!([{
            "addresses": [{"ip": "10.0.0.1", "nodeName": "n1",
                "targetRef": {"kind": "Pod", "name": "p", "namespace": "scale"}}],
            "notReadyAddresses": [{"ip": "10.0.0.2"}],
            "ports": [{"port": 8080, "protocol": "TCP"}]
        }]);
        let mut pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "creationTimestamp": null,
                "labels": {"app": "x"}, "annotations": {}, "ownerReferences": [{"kind": "ReplicaSet"}]},
            "spec": {"nodeName": "node-1", "priority": 0, "enableServiceLinks": true,
                "overhead": null, "activeDeadlineSeconds": 1.5, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let sts = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "generation": 4, "deletionTimestamp": "2026-11-30T18:19:37Z",
                "managedFields": [{"manager": "driftless", "operation": "Update", "fieldsV1": {"f:a": {}}},
                    {"manager": "driftless", "operation": "Apply"}]},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate"}, "volumeClaimTemplates": []},
            "status": {"observedGeneration": 4, "replicas": 3}
        });
        let cm = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"big": "x"}
        });
        let mut objects = vec![
            fixture("deployment.json"),
            fixture("service.json"),
            endpoints,
            sts,
            cm,
        ];
        pod["metadata"]["labels"]["driftless.dev/instance"] = "s10k".into();
        objects.push(pod);
        let typeless: Vec<Value> = objects
            .iter()
            .map(|o| {
                let mut o = o.clone();
                let map = o.as_object_mut().unwrap();
                map.remove("apiVersion");
                map.remove("kind");
                o
            })
            .collect();
        let kind_of = |o: &Value| {
            (
                o["apiVersion"].as_str().unwrap().to_string(),
                o["kind"].as_str().unwrap().to_string(),
            )
        };
        let types: Vec<_> = objects.iter().map(kind_of).collect();
        for (obj, (api_version, kind)) in objects.iter().chain(&typeless).zip(types.iter().cycle())
        {
            let (group, version) = match api_version.split_once('/') {
                Some((g, v)) => (g, v),
                None => ("", api_version.as_str()),
            };
            let resource = ApiResource {
                group: group.into(),
                version: version.into(),
                api_version: api_version.clone(),
                kind: kind.clone(),
                plural: format!("{}s", kind.to_lowercase()),
            };
            let text = obj.to_string();
            let read = health::readiness_view_of_text(&text, api_version, kind)
                .expect("a built-in kind is read from its text")
                .unwrap();
            let whole: DynamicObject = serde_json::from_str(&text).unwrap();
            let (value, fields) = crate::apply::live_parts(whole, Some(&resource), "driftless");
            assert_eq!(
                Packed::new(&read.view),
                Packed::new(&health::readiness_view(value)),
                "{text}"
            );
            assert_eq!(
                crate::apply::owned_fields_hash_in(read.managed_fields.as_deref(), "driftless")
                    .unwrap(),
                fields,
                "{text}"
            );
        }
        // The real Deployment's pod template is read past; its owned fields are ours.
        let read = health::readiness_view_of_text(
            &fixture("deployment.json").to_string(),
            "apps/v1",
            "Deployment",
        )
        .unwrap()
        .unwrap();
        assert!(read.view["spec"].get("template").is_none());
        assert_eq!(read.view["spec"]["replicas"], 0);
        assert!(
            read.managed_fields
                .unwrap()
                .get()
                .contains("\"f:template\"")
        );
        // A custom resource's rules may read anything: it is read whole.
        assert!(
            health::readiness_view_of_text(r#"{"spec":{"a":{"b":1}}}"#, "example.com/v1", "Widget")
                .is_none()
        );
    }
}
