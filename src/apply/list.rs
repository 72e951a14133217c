//! Reading what exists: ours by one paged list per kind, the rest directly.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta};

use super::live::{Listed, Live};
use super::plan::Planned;
use super::{ApplyError, Engine, ObjKey, Resolved};
use crate::object::{Seen, ownership};

/// From this many objects of one kind (in one namespace, for objects not ours) a list
/// is cheaper than reading each.
const LIST_FROM: usize = 8;

/// What the daemon's watches hold of this instance's objects, kind by kind: a whole sync
/// takes it for its list of those kinds. At 10,000 specs listing the metadata of 20,000
/// objects the watches already held was half of a no-op resync; Argo CD's cluster cache
/// serves its syncs the same way.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// The kinds (group, kind) whose every object of this instance is in `objects`.
    pub kinds: BTreeSet<(String, String)>,
    /// The watches' objects as they were when the sync began, shared with the daemon's
    /// state (a copy of them was 5 MiB of a 10,000-spec no-op's peak); only those of
    /// `kinds` are known.
    pub objects: Arc<HashMap<ObjKey, Seen>>,
    /// Written by an earlier sync and not yet reported by their watch, which may still
    /// hold what was there before the write: read again, not taken from `objects`.
    pub unconfirmed: HashSet<ObjKey>,
}

impl Known {
    /// The object as the watches held it, if its kind is known whole and no write of
    /// it awaits its watch's report.
    pub fn get(&self, key: &ObjKey) -> Option<&Seen> {
        if !key.of_any(&self.kinds) || self.unconfirmed.contains(key) {
            return None;
        }
        self.objects.get(key)
    }
}

/// What exists of the desired objects, as far as a sync has read them.
pub(super) struct Existing {
    /// Read and present: listed or read one by one.
    live: HashMap<ObjKey, Listed>,
    /// Present as the watches hold them: shared, and each object copied out only when
    /// its turn comes (a kind known is not listed, so the two never share a key).
    known: Known,
    /// Read and absent. The rest (kinds served only after planning, reads that failed)
    /// are read when applied. (Not a set of every key read, which copied 20,000 keys at
    /// each whole sync of 10,000 specs.)
    absent: HashSet<ObjKey>,
    /// Of kinds this identity may not list: neither recorded nor written.
    pub(super) skipped: BTreeSet<ObjKey>,
}

impl Existing {
    /// Known absent (`Some(None)`), known present, or unknown (`None`). What this sync
    /// read is moved out, not copied: each object is applied once.
    pub(super) fn take(&mut self, key: &ObjKey) -> Option<Option<Live>> {
        if let Some(listed) = self.live.remove(key) {
            return Some(Some(listed.unpack()));
        }
        if let Some(seen) = self.known.get(key) {
            return Some(Some(Listed::seen(seen.clone()).unpack()));
        }
        self.absent.contains(key).then_some(None)
    }

    /// The object as read or known, if it exists.
    pub(super) fn value_of(&self, key: &ObjKey) -> Option<serde_json::Value> {
        match self.live.get(key) {
            Some(listed) => Some(listed.value()),
            None => self.known.get(key).map(|seen| seen.view.value()),
        }
    }

    fn present(&self, key: &ObjKey) -> bool {
        self.live.contains_key(key) || self.known.get(key).is_some()
    }
}

impl Engine {
    /// What exists of the desired objects: ours by one list per kind, then the rest read
    /// directly, so nothing is recorded (or written) for an object we may not take.
    /// A sync of a few specs (`subset`) reads their objects directly; listing a kind
    /// would read all of this instance's objects of it. A whole sync lists every kind,
    /// and so learns which kinds it may not list: their objects fail with the reason.
    /// Kinds `known` holds are taken from it, not listed.
    pub(super) async fn read_existing(
        &self,
        planned: &mut [Planned<'_>],
        subset: bool,
        known: Option<Known>,
    ) -> Result<Existing, ApplyError> {
        let list_from = if subset { LIST_FROM } else { 1 };
        let known = known.unwrap_or_default();
        let (live, forbidden) = self
            .list_owned(planned, false, list_from, &known.kinds)
            .await?;
        let mut existing = Existing {
            live,
            known,
            absent: HashSet::new(),
            skipped: BTreeSet::new(),
        };
        for what in forbidden.keys() {
            tracing::warn!(kind = %what, "may not list this kind; its objects are skipped");
        }
        for p in planned.iter_mut() {
            let id = p.resolved.as_deref().ok().map(resource_id);
            if let Some(why) = id.and_then(|id| forbidden.get(&id)) {
                p.resolved = Err(why.clone());
                existing.skipped.insert(p.key.clone());
            }
        }
        for (key, found) in self.read_unlisted(planned, &existing).await {
            match found {
                Some(v) => {
                    existing.live.insert(key, Listed::of(v));
                }
                None => {
                    existing.absent.insert(key);
                }
            }
        }
        Ok(existing)
    }

    /// Everything this instance owns among the kinds of `planned`, by key: one list call
    /// per kind, not one GET per object. `whole` lists full objects (readiness needs
    /// them); a sync lists metadata only (ownership, UID and managedFields are all its
    /// no-write rule reads, a fraction of what the apiserver must serialise), except
    /// CRDs, whose group and kind a deferred custom resource is matched by.
    /// Kinds this identity may not list come back in the second map (by resource id,
    /// with the reason), for the caller to say what becomes of their objects: a sync's
    /// fail alone instead of sinking the whole sync, a diff reads them one by one.
    /// Only kinds with at least `list_from` objects in `planned` are listed, and none of
    /// `known` (group, kind).
    pub(super) async fn list_owned(
        &self,
        planned: &[Planned<'_>],
        whole: bool,
        list_from: usize,
        known: &BTreeSet<(String, String)>,
    ) -> Result<(HashMap<ObjKey, Listed>, BTreeMap<String, String>), ApplyError> {
        let mut kinds: BTreeMap<String, (&Resolved, usize)> = BTreeMap::new();
        let is_known = |r: &Resolved| {
            known
                .iter()
                .any(|(g, k)| *g == r.resource.group && *k == r.resource.kind)
        };
        for p in planned {
            if let Ok(r) = &p.resolved
                && !is_known(r)
            {
                kinds.entry(resource_id(r)).or_insert((r, 0)).1 += 1;
            }
        }
        // Kinds with fewer desired objects than `list_from` are left to `read_unlisted`.
        kinds.retain(|_, (_, n)| *n >= list_from);
        let kinds = kinds.into_iter().map(|(what, (r, _))| (what, r));
        let selector = format!("{}={}", ownership::INSTANCE, self.opts.instance);
        let selector = selector.as_str();
        // The kinds are listed at once (a no-op sync is mostly these round trips); the
        // pages of one kind follow each other, each slimmed before the next is read (a
        // whole list of full objects was the largest allocation of a sync).
        let lists = futures::future::try_join_all(kinds.map(|(what, r)| async move {
            let api = r.api_all(&self.client);
            let key = |meta: &ObjectMeta| ObjKey {
                group: r.resource.group.clone(),
                kind: r.resource.kind.clone(),
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: meta.name.clone().unwrap_or_default(),
            };
            let listed = if whole || r.resource.kind == "CustomResourceDefinition" {
                list_map(&api, selector, |mut obj| {
                    // List items carry no apiVersion/kind of their own.
                    obj.types = Some(kube::core::TypeMeta {
                        api_version: r.resource.api_version.clone(),
                        kind: r.resource.kind.clone(),
                    });
                    (key(&obj.metadata), Listed::of(Live::of(obj, &self.opts)))
                })
                .await
            } else {
                list_meta_map(&api, selector, |meta| {
                    (key(&meta), Listed::of_meta(meta, r, &self.opts))
                })
                .await
            };
            match listed {
                Ok(items) => Ok(Ok(items)),
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    let why = format!(
                        "forbidden: this identity may not list {} cluster-wide ({}); grant get/list/watch/create/patch/delete on it",
                        r.resource.plural, e.message
                    );
                    Ok(Err((what, why)))
                }
                Err(source) => Err(ApplyError::List { what, source }),
            }
        }))
        .await?;
        let mut out = HashMap::new();
        let mut forbidden = BTreeMap::new();
        for list in lists {
            match list {
                Ok(items) => out.extend(items),
                Err((what, why)) => {
                    forbidden.insert(what, why);
                }
            }
        }
        Ok((out, forbidden))
    }

    /// Reads the desired objects that are not among ours: absent, or someone else's. A
    /// group of many in one namespace is listed once; a few are read one by one.
    async fn read_unlisted(
        &self,
        planned: &[Planned<'_>],
        ours: &Existing,
    ) -> Vec<(ObjKey, Option<Live>)> {
        let mut groups: BTreeMap<(String, String), Vec<&Planned<'_>>> = BTreeMap::new();
        for p in planned.iter().filter(|p| !ours.present(&p.key)) {
            if let Ok(r) = &p.resolved {
                let kind = format!(
                    "{}/{}/{}",
                    r.resource.group, r.resource.version, r.resource.plural
                );
                groups
                    .entry((kind, p.key.namespace.clone()))
                    .or_default()
                    .push(p);
            }
        }
        let mut out = Vec::new();
        for ((_, namespace), members) in groups {
            let Some(Ok(resolved)) = members.first().map(|p| &p.resolved) else {
                continue;
            };
            if members.len() >= LIST_FROM {
                let api = resolved.api(
                    &self.client,
                    (!namespace.is_empty()).then_some(namespace.as_str()),
                );
                // A failed list leaves them unread; apply_one reads them itself.
                let opts = &self.opts;
                if let Ok(items) = list_map(&api, "", |o| {
                    (
                        o.metadata.name.clone().unwrap_or_default(),
                        Live::of(o, opts),
                    )
                })
                .await
                {
                    let mut existing: HashMap<String, Live> = items.into_iter().collect();
                    out.extend(
                        members
                            .iter()
                            .map(|p| (p.key.clone(), existing.remove(&p.key.name))),
                    );
                }
                continue;
            }
            // Made up front and boxed as `Send`: a stream holding a closure over
            // borrowed objects cannot be proven `Send` for every lifetime
            // (rust-lang/rust#102211), and the daemon runs each sync as a task.
            let gets: Vec<futures::future::BoxFuture<'_, _>> = members
                .iter()
                .map(|p| -> futures::future::BoxFuture<'_, _> {
                    Box::pin(async move {
                        let ns = (!p.key.namespace.is_empty()).then_some(p.key.namespace.as_str());
                        let r = match &p.resolved {
                            Ok(r) => r.api(&self.client, ns).get_opt(&p.key.name).await.ok(),
                            Err(_) => None,
                        };
                        (p.key.clone(), r)
                    })
                })
                .collect();
            let read: Vec<(ObjKey, Option<Option<kube::api::DynamicObject>>)> =
                futures::stream::iter(gets)
                    .buffer_unordered(self.opts.concurrency.max(1))
                    .collect()
                    .await;
            let reads = read
                .into_iter()
                .filter_map(|(k, r)| r.map(|o| (k, o.map(|o| Live::of(o, &self.opts)))));
            out.extend(reads);
        }
        out
    }
}

fn resource_id(r: &Resolved) -> String {
    format!(
        "{}/{}/{}",
        r.resource.group, r.resource.version, r.resource.plural
    )
}

/// Objects per page when listing, full or metadata only (each metadata item's
/// managedFields still parse as JSON trees: a page of 2,000 held 13 MiB).
const LIST_PAGE: u32 = 500;

/// A full list, page by page, each item passed through `f` before the next page is read
/// (so a whole list of full objects is never held at once).
pub(crate) async fn list_map<T>(
    api: &Api<DynamicObject>,
    selector: &str,
    f: impl FnMut(DynamicObject) -> T,
) -> Result<Vec<T>, kube::Error> {
    paged(selector, |lp| async move { api.list(&lp).await }, f).await
}

/// `list_map` of metadata only (`PartialObjectMetadataList`).
async fn list_meta_map<T>(
    api: &Api<DynamicObject>,
    selector: &str,
    mut f: impl FnMut(ObjectMeta) -> T,
) -> Result<Vec<T>, kube::Error> {
    paged(
        selector,
        |lp| async move { api.list_metadata(&lp).await },
        |item| f(item.metadata),
    )
    .await
}

/// The paging loop both lists share: `fetch` reads one page for the given parameters.
async fn paged<I: Clone, T, Fut>(
    selector: &str,
    mut fetch: impl FnMut(ListParams) -> Fut,
    mut f: impl FnMut(I) -> T,
) -> Result<Vec<T>, kube::Error>
where
    Fut: std::future::Future<Output = Result<kube::core::ObjectList<I>, kube::Error>>,
{
    let mut out = Vec::new();
    let mut lp = ListParams::default().labels(selector).limit(LIST_PAGE);
    loop {
        let page = fetch(lp.clone()).await?;
        out.extend(page.items.into_iter().map(&mut f));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => break,
        }
    }
    Ok(out)
}
