//! The volume-provisioner stand-in: a Pod whose PVC is unbound is never scheduled, and
//! nothing here provisions volumes. For every unbound PVC this creates a hostPath
//! PersistentVolume pre-bound to it (size, access modes, class and volume mode copied);
//! the controller-manager's PV binder does the binding. Volumes whose claim is gone are
//! deleted, as a `Delete` reclaim policy would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

const PROVISIONED_BY: &str = "testbed.driftless.dev/provisioned-for";

pub async fn run(client: Client, pv_dir: PathBuf) -> anyhow::Result<()> {
    let claims = watch_claims(client.clone(), pv_dir);
    let released = reclaim_released(client);
    tokio::try_join!(claims, released)?;
    anyhow::bail!("storage watches ended")
}

async fn watch_claims(client: Client, pv_dir: PathBuf) -> anyhow::Result<()> {
    let pvcs: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client);
    let mut events = watcher(pvcs, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(pvc) = crate::next_event(&mut events, "persistentvolumeclaims").await {
        let unbound = pvc.spec.as_ref().is_some_and(|s| s.volume_name.is_none())
            && pvc.metadata.deletion_timestamp.is_none();
        if !unbound {
            continue;
        }
        if let Err(e) = provision(&pvs, &pvc, &pv_dir).await {
            tracing::warn!(pvc = %pvc.name_any(), error = %e, "provisioning failed");
        }
    }
    Ok(())
}

async fn provision(
    pvs: &Api<PersistentVolume>,
    pvc: &PersistentVolumeClaim,
    pv_dir: &Path,
) -> anyhow::Result<()> {
    let uid = pvc.uid().unwrap_or_default();
    let name = format!("pvc-{uid}");
    if pvs.get_opt(&name).await?.is_some() {
        return Ok(());
    }
    let spec = pvc.spec.clone().unwrap_or_default();
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_else(|| "1Gi".to_string());
    let access_modes = spec
        .access_modes
        .clone()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| vec!["ReadWriteOnce".to_string()]);
    let ns = pvc.namespace().unwrap_or_default();
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": access_modes,
            "storageClassName": spec.storage_class_name.clone().unwrap_or_default(),
            "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".to_string()),
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": pv_dir.join(&name).to_string_lossy(), "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": ns, "name": pvc.name_any(), "uid": uid},
        },
    }))?;
    let pv = PersistentVolume {
        metadata: ObjectMeta {
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY.to_string(),
                format!("{ns}/{}", pvc.name_any()),
            )])),
            ..pv.metadata
        },
        ..pv
    };
    match pvs.create(&PostParams::default(), &pv).await {
        Ok(_) => {
            tracing::info!(pv = %name, pvc = %format!("{ns}/{}", pvc.name_any()), "provisioned");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn reclaim_released(client: Client) -> anyhow::Result<()> {
    let pvs: Api<PersistentVolume> = Api::all(client);
    let mut events = watcher(pvs.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(pv) = crate::next_event(&mut events, "persistentvolumes").await {
        let ours = pv.annotations().contains_key(PROVISIONED_BY);
        let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        if ours && released && pv.metadata.deletion_timestamp.is_none() {
            match pvs.delete(&pv.name_any(), &DeleteParams::default()).await {
                Ok(_) => tracing::info!(pv = %pv.name_any(), "released volume deleted"),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(pv = %pv.name_any(), error = %e, "could not delete released volume")
                }
            }
        }
    }
    Ok(())
}
