//! The real bundles of `../shared/realworld-2026` (fourteen projects' install YAML at two
//! released versions), as tests read them: never copied into the repository nor edited.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;

pub fn realworld_corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/realworld-2026")
}

/// The corpus's projects, by name.
pub fn realworld_projects() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(realworld_corpus())
        .unwrap_or_else(|e| panic!("{}: {e}", realworld_corpus().display()))
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A project's two versions, as its `SOURCE` names them (`old: tag X`, `new: tag Y`).
pub fn realworld_versions(project: &str) -> (PathBuf, PathBuf) {
    let dir = realworld_corpus().join(project);
    let source = std::fs::read_to_string(dir.join("SOURCE")).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the real bundles live in ../shared/realworld-2026 beside the repository",
            dir.join("SOURCE").display()
        )
    });
    let tag = |which: &str| {
        source
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{which}: tag ")))
            .and_then(|rest| rest.split_whitespace().next())
            .map(|tag| dir.join(tag))
            .unwrap_or_else(|| panic!("{project}/SOURCE names no `{which}: tag`"))
    };
    let (old, new) = (tag("old"), tag("new"));
    for v in [&old, &new] {
        assert!(v.is_dir(), "{} is missing", v.display());
    }
    (old, new)
}

pub fn reads_kube_system(version: &Path) -> bool {
    let mut stack = vec![version.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains("namespace: kube-system")) {
            return true;
        }
    }
    false
}

/// What the bundle renders to, as the library reads it.
pub fn rendered_objects(root: &Path, kube_system: bool) -> Vec<driftless::render::Object> {
    let mut policy = driftless::spec::Policy::default();
    if kube_system {
        policy.allow_namespaces.insert("kube-system".into());
    }
    let tree = driftless::spec::load_dir_with(root, &policy)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    driftless::render::render(&tree, &driftless::render::Facts::default()).expect("render")
}

/// The API resource of each kind the bundle has, by discovery (custom resources only
/// once their CRD is served).
pub async fn resources(
    client: &kube::Client,
    objects: &[driftless::render::Object],
) -> Vec<(driftless::render::Object, ApiResource)> {
    let mut out = Vec::new();
    for o in objects {
        let (group, version) = match o.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", o.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &o.kind);
        let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("discovering {}: {e}", o.display_ref()));
        out.push((o.clone(), ar));
    }
    out
}

/// Waits (2 minutes at most) until none of `gone` is left in the cluster.
///
/// A CRD the apiserver fails to finalize is nudged. Its cleanup finalizer can list the
/// custom resources while their storage is still starting ("storage is (re)initializing"),
/// and the retry then meets a conflict the controller reads as "called again later": the
/// CRD stays Terminating until the informer's next resync, up to five minutes on. Any
/// change besides that condition queues the CRD again, so the wait touches an annotation.
pub async fn all_gone(client: &kube::Client, gone: &[(driftless::render::Object, ApiResource)]) {
    let nudged =
        std::sync::Mutex::new(std::collections::HashMap::<String, std::time::Instant>::new());
    super::eventually("the bundle gone", Duration::from_secs(120), || async {
        let mut left = Vec::new();
        for (o, ar) in gone {
            let api: Api<DynamicObject> = match &o.namespace {
                Some(ns) if !ns.is_empty() => Api::namespaced_with(client.clone(), ns, ar),
                _ => Api::all_with(client.clone(), ar),
            };
            match api.get_opt(&o.name).await {
                Ok(None) => {}
                // Its kind went with its CRD.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Ok(Some(live)) => {
                    if finalizer_failed(&live) && due(&nudged, &o.name) {
                        nudge(&api, &o.name).await;
                    }
                    left.push(o.display_ref());
                }
                Err(e) => left.push(format!("{}: {e}", o.display_ref())),
            }
        }
        match left.is_empty() {
            true => Ok(()),
            false => Err(format!("still there: {left:?}")),
        }
    })
    .await;
}

/// A CRD being deleted whose cleanup finalizer failed its last try.
fn finalizer_failed(live: &DynamicObject) -> bool {
    live.metadata.deletion_timestamp.is_some()
        && live.data["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Terminating" && c["reason"] == "InstanceDeletionFailed")
            })
}

/// Once per 5 seconds per object, so a nudge's own retry has time to finish.
fn due(
    nudged: &std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    name: &str,
) -> bool {
    let mut nudged = nudged.lock().unwrap();
    let now = std::time::Instant::now();
    match nudged.get(name) {
        Some(at) if now.duration_since(*at) < Duration::from_secs(5) => false,
        _ => {
            nudged.insert(name.to_string(), now);
            true
        }
    }
}

async fn nudge(api: &Api<DynamicObject>, name: &str) {
    eprintln!("the apiserver's finalizer of {name} failed its last try: nudging it");
    let stamp = format!("{:?}", std::time::SystemTime::now());
    let patch = serde_json::json!({
        "metadata": {"annotations": {"driftless-test/finalizer-retry": stamp}}
    });
    let _ = api
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await;
}
