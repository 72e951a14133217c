//! The clusters of Argo CD's cluster Secrets (`--cluster-secrets-namespace`): each Secret
//! labelled `argocd.argoproj.io/secret-type: cluster` in those namespaces of the home
//! cluster is a cluster by its `name`, `server` and labels, reached with its `config`
//! when served. Only the operator names the namespaces: a commit names clusters, never
//! where their credentials are.

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};

use driftless::spec::clusters::{Cluster, IN_CLUSTER_SERVER, SecretRef};

const SECRET_TYPE: &str = "argocd.argoproj.io/secret-type";

/// The clusters of the cluster Secrets in `namespaces`, by name; the one Argo CD names
/// its own cluster by (`https://kubernetes.default.svc`) is the home cluster, not another.
pub async fn argocd_clusters(
    home: &kube::Client,
    namespaces: &[String],
) -> anyhow::Result<Vec<Cluster>> {
    let mut found = Vec::new();
    for ns in namespaces {
        let listed = Api::<Secret>::namespaced(home.clone(), ns)
            .list(&ListParams::default().labels(&format!("{SECRET_TYPE}=cluster")))
            .await
            .with_context(|| format!("listing the cluster Secrets of namespace {ns}"))?;
        for s in listed.items {
            let secret = s.metadata.name.clone().unwrap_or_default();
            let data = s.data.unwrap_or_default();
            let text = |key: &str| {
                data.get(key)
                    .and_then(|b| String::from_utf8(b.0.clone()).ok())
                    .map(|v| v.trim().to_string())
            };
            let Some(server) = text("server").map(|s| s.trim_end_matches('/').to_string()) else {
                anyhow::bail!("cluster Secret {ns}/{secret} has no `server`");
            };
            if server == IN_CLUSTER_SERVER {
                continue;
            }
            let name = text("name").unwrap_or_default();
            driftless::spec::names::label_value(&name)
                .and_then(|()| match name.is_empty() {
                    true => Err("it has no `name`".to_string()),
                    false => Ok(()),
                })
                .map_err(|why| {
                    anyhow::anyhow!("cluster Secret {ns}/{secret}: cluster name {name:?}: {why}")
                })?;
            let labels = s
                .metadata
                .labels
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| k != SECRET_TYPE)
                .collect();
            found.push(Cluster {
                name,
                labels,
                kubeconfig: None,
                context: None,
                server: Some(server),
                secret: Some(SecretRef {
                    namespace: ns.clone(),
                    name: secret,
                    key: None,
                    argocd: true,
                }),
            });
        }
    }
    Ok(found)
}
