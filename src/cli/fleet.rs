//! The fleet at the binary's edge. The clusters of Argo CD's cluster Secrets
//! (`--cluster-secrets-namespace`): each Secret labelled
//! `argocd.argoproj.io/secret-type: cluster` in those namespaces of the home cluster is a
//! cluster by its `name`, `server` and labels, reached with its `config` when served. Only
//! the operator names the namespaces: a commit names clusters, never where their
//! credentials are. And `diff` and `apply` of a fleet with no `--cluster`: each declared
//! cluster in turn, one cluster's failure told and the others still served.

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};

use super::{ApplyArgs, DiffArgs, DiffOutput, GlobalArgs, PolicyArgs, exit};
use driftless::cluster::{Selection, error_text};
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
                kube_version: None,
            });
        }
    }
    Ok(found)
}

/// Writes to stdout, a closed pipe an error (never a panic).
fn write_out(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Whether a `diff` or `apply` goes to every declared cluster: a fleet, none named.
pub fn every_cluster(p: &PolicyArgs) -> anyhow::Result<bool> {
    Ok(p.cluster.is_none() && p.target()?.is_fleet())
}

/// `diff` of each declared cluster, under its name (text, markdown), or one JSON document
/// `{"clusters": [...]}` with a cluster's document (or its `error`) each. One cluster
/// unreachable or its tree invalid is told and the others are still diffed; the exit
/// code is the worst of them.
pub async fn diff_each(
    args: &DiffArgs,
    global: &GlobalArgs,
    home: &Selection,
) -> anyhow::Result<u8> {
    let json = args.output == DiffOutput::Json;
    let mut code = exit::OK;
    let mut docs = Vec::new();
    for cluster in args.tree.policy.clusters()?.iter() {
        let name = &cluster.name;
        let mut one = args.clone();
        one.tree.policy.cluster = Some(name.clone());
        // JSON names the cluster inside its document instead.
        match args.output {
            DiffOutput::Text => write_out(&format!("cluster {name}:\n"))?,
            DiffOutput::Markdown => write_out(&format!("## cluster `{name}`\n\n"))?,
            DiffOutput::Json => {}
        }
        let diffed = match one.tree.policy.selection(home) {
            Ok(selection) => super::sync::diff_of(&one, global, &selection).await,
            Err(e) => Err(e),
        };
        let failed = |why: String| serde_json::json!({"cluster": name, "error": why});
        match diffed {
            Ok(Some(d)) => {
                code = code.max(d.code);
                match json {
                    true => {
                        let mut doc: serde_json::Value = serde_json::from_str(&d.text)?;
                        if let Some(map) = doc.as_object_mut() {
                            map.insert("cluster".into(), name.clone().into());
                        }
                        docs.push(doc);
                    }
                    false => write_out(&d.text)?,
                }
            }
            Ok(None) => {
                code = exit::ERROR;
                docs.push(failed(format!(
                    "the tree as cluster {name} reads it is invalid"
                )));
            }
            Err(e) => {
                let why = error_text(e.as_ref());
                eprintln!("driftless: cluster {name}: {why}");
                code = exit::ERROR;
                docs.push(failed(why));
            }
        }
    }
    if json {
        let doc = serde_json::json!({ "clusters": docs });
        write_out(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    Ok(code)
}

/// `apply` to each declared cluster in turn, under its name. One cluster unreachable or
/// its tree invalid is told and the others are still applied; Ctrl-C stops the lot.
pub async fn apply_each(
    args: &ApplyArgs,
    global: &GlobalArgs,
    home: &Selection,
) -> anyhow::Result<u8> {
    let mut code = exit::OK;
    for cluster in args.tree.policy.clusters()?.iter() {
        let name = &cluster.name;
        let mut one = args.clone();
        one.tree.policy.cluster = Some(name.clone());
        write_out(&format!("cluster {name}:\n"))?;
        let applied = match one.tree.policy.selection(home) {
            Ok(selection) => super::sync::apply(&one, global, &selection).await,
            Err(e) => Err(e),
        };
        match applied {
            Ok(exit::INTERRUPTED) => return Ok(exit::INTERRUPTED),
            Ok(c) => code = code.max(c),
            Err(e) if super::output::is_broken_pipe(&e) => return Err(e),
            Err(e) => {
                eprintln!("driftless: cluster {name}: {}", error_text(e.as_ref()));
                code = exit::ERROR;
            }
        }
    }
    Ok(code)
}

/// `run --clusters FILE` without `--cluster`: one daemon serving every declared
/// cluster, each reached with its own credentials. Each cluster's status is written
/// beside the status file (`NAME.CLUSTER.json`), which lists them, as `driftless
/// status` reads it.
pub async fn run(
    args: &super::run::RunArgs,
    global: &GlobalArgs,
    home: &Selection,
) -> anyhow::Result<u8> {
    super::run::warn_of(args);
    let index = super::run::status_file(args, global)?;
    let mut engines = Vec::new();
    let mut files = Vec::new();
    for cluster in args.policy.clusters()?.iter() {
        let name = &cluster.name;
        let mut policy = args.policy.clone();
        policy.cluster = Some(name.clone());
        let file = fleet_status_file(&index, name);
        let mut cfg = super::run::config(args, global, &policy, file.clone())?;
        // Each cluster's source fetches into a repository of its own: one bare
        // repository fetched by several at once is not safe.
        if let driftless::source::Config::Git { config, .. } = &mut cfg.source {
            config.cache_dir = config.cache_dir.join("clusters").join(name);
        }
        let client = policy
            .selection(home)?
            .followed_client()
            .await
            .with_context(|| format!("connecting to cluster {name}"))?;
        files.push(file);
        engines.push((name.clone(), cfg, client));
    }
    driftless::report::status::FleetIndex::write(&index, &files)?;
    // The listener's TLS as each cluster's configuration read it (the same flags).
    let tls = engines.first().and_then(|(_, cfg, _)| cfg.tls.clone());
    driftless::daemon::run_fleet(
        engines,
        args.metrics_addr,
        tls,
        super::run::shutdown_signal(),
    )
    .await?;
    Ok(exit::OK)
}

/// Where a fleet's daemon writes a cluster's status: beside `index`, the cluster's name
/// before its extension.
fn fleet_status_file(index: &std::path::Path, cluster: &str) -> std::path::PathBuf {
    let stem = index.file_stem().map_or_else(
        || "status".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    index.with_file_name(format!("{stem}.{cluster}.json"))
}

#[cfg(test)]
mod tests {
    use super::fleet_status_file;
    use std::path::Path;

    #[test]
    fn a_cluster_s_status_is_beside_the_fleet_s_with_its_name_before_the_extension() {
        assert_eq!(
            fleet_status_file(Path::new("/var/lib/driftless/status.json"), "prod-eu"),
            Path::new("/var/lib/driftless/status.prod-eu.json")
        );
        assert_eq!(
            fleet_status_file(Path::new("fleet"), "edge"),
            Path::new("fleet.edge.json")
        );
    }
}
