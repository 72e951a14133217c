//! The clusters a tree's objects go to. The operator declares them (`--clusters FILE`:
//! names, labels, and how to reach each, which a commit never gives); a tree only names
//! them, in `.driftless.toml`'s `[[cluster]]` rules (by name or by labels). A command or
//! a daemon serves one of them (`--cluster NAME`, else the home cluster) and reads only
//! the files that go to it: one cluster's files, broken or not, are not another's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::names;

/// The cluster a command reaches with its own connection (`--kubeconfig`, `KUBECONFIG`,
/// the in-cluster service account), when the operator declares no other name for it:
/// Argo CD's name for the cluster it runs in.
pub const HOME: &str = "in-cluster";

/// One declared cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The kubeconfig it is reached with (the operator's file); `None`: the command's
    /// own connection (the home cluster).
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context (default: its current-context).
    pub context: Option<String>,
    /// Its apiserver's URL as its kubeconfig gives it (what an Argo CD Application's
    /// `destination.server` names it by); `None` when the file cannot be read here.
    pub server: Option<String>,
    /// The Secret of the home cluster its kubeconfig is in, as Flux's hub keeps a spoke's
    /// (what a Flux `kubeConfig.secretRef` names it by); read when it is served.
    pub secret: Option<SecretRef>,
    /// Its Kubernetes version as the operator declares it (`1.34`, `v1.34.4`): what charts
    /// are told of it when it is not reached (`diff --base`, `validate`, `render`); a
    /// command that reaches it asks the cluster itself.
    pub kube_version: Option<String>,
}

/// A Secret holding how to reach a cluster: `namespace/name`, and the key of its data
/// (`None`: `value`, else `value.yaml`, as Flux reads one); or an Argo CD cluster Secret
/// (`argocd`: its `server`, `name` and `config`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
    pub key: Option<String>,
    pub argocd: bool,
}

impl SecretRef {
    /// Whether a reference to the Secret by `key` (`None`: the default keys) is this one.
    fn is(&self, other: &SecretRef) -> bool {
        if self.argocd || other.argocd {
            return false;
        }
        let key = |k: &Option<String>| k.clone().unwrap_or_else(|| "value".to_string());
        self.namespace == other.namespace
            && self.name == other.name
            && key(&self.key) == key(&other.key)
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        match &self.key {
            Some(k) => write!(f, " (key {k})"),
            None => Ok(()),
        }
    }
}

impl Cluster {
    fn home() -> Self {
        Cluster {
            name: HOME.to_string(),
            labels: BTreeMap::new(),
            kubeconfig: None,
            context: None,
            server: None,
            secret: None,
            kube_version: None,
        }
    }

    /// Whether these labels (a `[[cluster]]` rule's selector, all of them) are its.
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector
            .iter()
            .all(|(k, v)| self.labels.get(k).is_some_and(|l| l == v))
    }

    /// Its variables for `${cluster.name}` and `${cluster.labels.KEY}`.
    pub fn vars(&self) -> impl Iterator<Item = (String, String)> + '_ {
        std::iter::once(("cluster.name".to_string(), self.name.clone())).chain(
            self.labels
                .iter()
                .map(|(k, v)| (format!("cluster.labels.{k}"), v.clone())),
        )
    }
}

/// The operator's clusters: those `--clusters FILE` declares, and the home cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clusters {
    /// By name; the home cluster among them.
    list: BTreeMap<String, Cluster>,
    home: String,
}

impl Default for Clusters {
    /// No file: the home cluster alone.
    fn default() -> Self {
        let home = Cluster::home();
        Clusters {
            home: home.name.clone(),
            list: BTreeMap::from([(home.name.clone(), home)]),
        }
    }
}

/// A `--clusters` file that cannot be used, in our words.
#[derive(Debug, thiserror::Error)]
pub enum ClustersFileError {
    #[error("clusters file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("--cluster {name}: not a declared cluster; {declared}")]
    Unknown { name: String, declared: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    cluster: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    kubeconfig: Option<PathBuf>,
    /// `NAMESPACE/NAME` of a Secret of the home cluster holding its kubeconfig.
    secret: Option<String>,
    /// The key of that Secret's data.
    key: Option<String>,
    context: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(rename = "kube-version")]
    kube_version: Option<String>,
}

impl Clusters {
    /// The clusters of a `--clusters` file:
    ///
    /// ```toml
    /// [cluster.prod-eu]
    /// kubeconfig = "prod-eu.yaml"   # relative to this file's directory
    /// context = "prod-eu"           # default: the kubeconfig's current-context
    /// labels = { env = "prod", region = "eu" }
    ///
    /// [cluster.staging]             # its kubeconfig in a Secret of the home cluster
    /// secret = "staging/cluster-kubeconfig"
    ///
    /// [cluster.in-cluster]          # no kubeconfig: the command's own connection
    /// labels = { env = "mgmt" }
    /// kube-version = "1.34"         # what charts are told when it is not reached
    /// ```
    ///
    /// At most one cluster has neither a kubeconfig nor a Secret: the home cluster. When every one has one,
    /// the home cluster is `in-cluster` (declared with a kubeconfig, or else added).
    pub fn read_file(path: &Path) -> Result<Clusters, ClustersFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ClustersFileError::Read {
            path: shown.clone(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Clusters::parse(&text, &shown, base)
    }

    fn parse(text: &str, shown: &str, base: &Path) -> Result<Clusters, ClustersFileError> {
        let at = |offset: usize, message: String| {
            let (line, column) = super::line_column(text, offset);
            ClustersFileError::Invalid {
                path: shown.to_string(),
                line,
                column,
                message,
            }
        };
        let file: File = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            at(offset, e.message().trim().to_string())
        })?;
        // Where a cluster's table is, for what is wrong in it: serde keeps no places.
        let place = |name: &str| {
            [
                format!("cluster.{name}"),
                format!("\"{name}\""),
                name.to_string(),
            ]
            .iter()
            .find_map(|n| text.find(n.as_str()))
            .unwrap_or(0)
        };
        let mut list = BTreeMap::new();
        let mut homes = Vec::new();
        for (name, entry) in file.cluster {
            names::label_value(&name)
                .and_then(|()| match name.is_empty() {
                    true => Err("must not be empty".to_string()),
                    false => Ok(()),
                })
                .map_err(|why| at(place(&name), format!("cluster name {name:?}: {why}")))?;
            for (k, v) in &entry.labels {
                names::label_key(k)
                    .map_err(|why| format!("label key {k:?}: {why}"))
                    .and_then(|()| {
                        names::label_value(v).map_err(|why| format!("label {k}={v:?}: {why}"))
                    })
                    .map_err(|why| at(place(&name), format!("cluster {name}: {why}")))?;
            }
            let secret = entry
                .secret
                .as_deref()
                .map(|s| secret_ref(s, entry.key.clone()))
                .transpose()
                .map_err(|why| at(place(&name), format!("cluster {name}: {why}")))?;
            if let Some(v) = &entry.kube_version {
                kube_version(v).map_err(|why| {
                    let table = place(&name);
                    let key = text[table..]
                        .find("kube-version")
                        .map_or(table, |i| table + i);
                    at(key, format!("cluster {name}: kube-version {v:?}: {why}"))
                })?;
            }
            let refuse = |why: &str| Err(at(place(&name), format!("cluster {name}: {why}")));
            match (&entry.kubeconfig, &secret) {
                (Some(_), Some(_)) => {
                    return refuse("both `kubeconfig` and `secret`: a cluster is reached one way");
                }
                (None, None) if entry.context.is_some() => {
                    return refuse(
                        "`context` without `kubeconfig` or `secret` (the home cluster's context is --context)",
                    );
                }
                (_, None) if entry.key.is_some() => {
                    return refuse("`key` without `secret`");
                }
                (None, None) => homes.push(name.clone()),
                _ => {}
            }
            let kubeconfig = entry.kubeconfig.map(|k| match k.is_absolute() {
                true => k,
                false => base.join(k),
            });
            let server = kubeconfig
                .as_deref()
                .and_then(|k| server_of(k, entry.context.as_deref()));
            list.insert(
                name.clone(),
                Cluster {
                    name,
                    labels: entry.labels,
                    kubeconfig,
                    context: entry.context,
                    server,
                    secret,
                    kube_version: entry.kube_version,
                },
            );
        }
        let home = match homes.as_slice() {
            [] => HOME.to_string(),
            [one] => one.clone(),
            [_, second, ..] => {
                return Err(at(
                    place(second),
                    format!(
                        "clusters {} have no kubeconfig: only one cluster, the home cluster, is reached with the command's own connection",
                        homes.join(", ")
                    ),
                ));
            }
        };
        list.entry(home.clone()).or_insert_with(Cluster::home);
        Ok(Clusters { list, home })
    }

    /// The clusters found in Argo CD's cluster Secrets, beside the declared ones: each
    /// name once (a declared cluster's, or the home cluster's, is not taken again).
    pub fn with_found(mut self, found: Vec<Cluster>) -> Result<Clusters, String> {
        for c in found {
            if let Some(taken) = self.list.get(&c.name) {
                let by = match &taken.secret {
                    _ if taken.name == self.home => "the home cluster".to_string(),
                    Some(s) if s.argocd => format!("cluster Secret {}/{}", s.namespace, s.name),
                    _ => "--clusters".to_string(),
                };
                let secret = c
                    .secret
                    .as_ref()
                    .map(|s| format!("{}/{}", s.namespace, s.name))
                    .unwrap_or_default();
                return Err(format!(
                    "cluster Secret {secret} names cluster {:?}, a name {by} has already",
                    c.name
                ));
            }
            self.list.insert(c.name.clone(), c);
        }
        Ok(self)
    }

    /// The cluster named `name`.
    pub fn get(&self, name: &str) -> Option<&Cluster> {
        self.list.get(name)
    }

    /// The cluster named `name`, or an error naming the declared ones.
    pub fn pick(&self, name: &str) -> Result<&Cluster, ClustersFileError> {
        self.get(name).ok_or_else(|| ClustersFileError::Unknown {
            name: name.to_string(),
            declared: self.declared(),
        })
    }

    /// The cluster a command reaches with its own connection, where files no rule sends
    /// elsewhere go.
    pub fn home(&self) -> &Cluster {
        // The home is always in the list (parse and default put it there).
        self.list
            .get(&self.home)
            .unwrap_or_else(|| unreachable!("the home cluster is declared"))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Cluster> {
        self.list.values()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The declared cluster an app's objects go to: `None` for the home cluster (the
    /// cluster the reader runs in, as for Argo CD: the tree's `[[cluster]]` rules
    /// decide). A destination the operator did not declare is an error, in words for
    /// the app's.
    pub fn destination(&self, to: &Destination) -> Result<Option<&Cluster>, String> {
        let found = match to {
            Destination::Named(n) if n == HOME || *n == self.home => return Ok(None),
            Destination::Server(s) if s.trim_end_matches('/') == IN_CLUSTER_SERVER => {
                return Ok(None);
            }
            Destination::Named(n) => self.get(n).ok_or_else(|| {
                format!(
                    "its destination cluster {n:?} is not a declared cluster: {} (--clusters)",
                    self.declared()
                )
            })?,
            Destination::Server(s) => self
                .iter()
                .find(|c| c.server.as_deref() == Some(s.trim_end_matches('/')))
                .ok_or_else(|| {
                    format!(
                        "its destination {s} is not the server of a declared cluster: {} (--clusters)",
                        self.declared()
                    )
                })?,
            // A Secret names no cluster by itself: the operator says which cluster's
            // kubeconfig it holds, or none is reached through it (a commit cannot point
            // the daemon's credentials anywhere).
            Destination::Secret(r) => self
                .iter()
                .find(|c| c.secret.as_ref().is_some_and(|s| s.is(r)))
                .ok_or_else(|| {
                    format!(
                        "its kubeConfig Secret {r} is not a declared cluster's (`secret` in --clusters): {}",
                        self.declared()
                    )
                })?,
        };
        Ok((found.name != self.home).then_some(found))
    }

    /// "the declared clusters are a, b (home)", for messages.
    pub fn declared(&self) -> String {
        let names: Vec<String> = self
            .list
            .keys()
            .map(|n| match *n == self.home {
                true => format!("{n} (home)"),
                false => n.clone(),
            })
            .collect();
        format!("the declared clusters are {}", names.join(", "))
    }
}

/// A Kubernetes version as helm's `--kube-version` takes one: `1.34`, `v1.34`, `1.34.4`,
/// `v1.34.4`.
fn kube_version(text: &str) -> Result<(), String> {
    let numbers = text.strip_prefix('v').unwrap_or(text);
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    match (2..=3).contains(&parts.len()) && parts.iter().all(numeric) {
        true => Ok(()),
        false => Err("not a Kubernetes version (such as 1.34 or v1.34.4)".to_string()),
    }
}

/// `NAMESPACE/NAME` as a Secret's reference.
fn secret_ref(text: &str, key: Option<String>) -> Result<SecretRef, String> {
    let bad = || format!("secret {text:?}: give it as NAMESPACE/NAME");
    let (namespace, name) = text.split_once('/').ok_or_else(bad)?;
    names::dns1123_label(namespace).map_err(|why| format!("secret {text:?}: namespace {why}"))?;
    names::dns1123_subdomain(name).map_err(|why| format!("secret {text:?}: name {why}"))?;
    Ok(SecretRef {
        namespace: namespace.to_string(),
        name: name.to_string(),
        key,
        argocd: false,
    })
}

/// The server a kubeconfig's context (default: its current-context) reaches; `None`
/// when the file is not there (a pipeline that only validates has no credentials) or
/// does not say.
fn server_of(kubeconfig: &Path, context: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string(kubeconfig).ok()?;
    let v: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    let context = context.or_else(|| v["current-context"].as_str())?;
    let named = |list: &str, name: &str| {
        v[list]
            .as_array()
            .and_then(|l| l.iter().find(|e| e["name"] == name))
            .cloned()
    };
    let cluster = named("contexts", context)?["context"]["cluster"]
        .as_str()?
        .to_string();
    named("clusters", &cluster)?["cluster"]["server"]
        .as_str()
        .map(|s| s.trim_end_matches('/').to_string())
}

/// Where an app object says its objects go (an Argo CD Application's `destination`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `destination.name`.
    Named(String),
    /// `destination.server`.
    Server(String),
    /// A Flux `spec.kubeConfig.secretRef`: the Secret (in the app's namespace) that holds
    /// the cluster's kubeconfig on the hub.
    Secret(SecretRef),
}

/// The URL Argo CD names the cluster it runs in by.
pub const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// The cluster a command serves, with the fleet it is one of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub clusters: std::sync::Arc<Clusters>,
    /// The name of the cluster served: one of `clusters`.
    serving: String,
    /// Rendered files whose app's destination decides, over the `[[cluster]]` rules,
    /// whether they are this cluster's (the innermost app that made a file and names a
    /// cluster); set per revision, from what the apps say.
    pub placed: std::sync::Arc<BTreeMap<String, bool>>,
}

impl Default for Target {
    fn default() -> Self {
        Target::home(std::sync::Arc::new(Clusters::default()))
    }
}

impl Target {
    /// The home cluster of `clusters`.
    pub fn home(clusters: std::sync::Arc<Clusters>) -> Self {
        Target {
            serving: clusters.home().name.clone(),
            clusters,
            placed: Default::default(),
        }
    }

    /// The cluster named `name` of `clusters`.
    pub fn named(
        clusters: std::sync::Arc<Clusters>,
        name: &str,
    ) -> Result<Self, ClustersFileError> {
        clusters.pick(name)?;
        Ok(Target {
            serving: name.to_string(),
            clusters,
            placed: Default::default(),
        })
    }

    /// The cluster served.
    pub fn cluster(&self) -> &Cluster {
        self.clusters
            .get(&self.serving)
            .unwrap_or_else(|| self.clusters.home())
    }

    /// Whether an app whose objects go to `to` is this cluster's: `None` when `to` is
    /// the home cluster (the cluster the reader runs in, as for Argo CD: then the tree's
    /// `[[cluster]]` rules decide), else whether it is the cluster served. A destination
    /// the operator did not declare is an error, in words for the app's.
    pub fn place(&self, to: &Destination) -> Result<Option<bool>, String> {
        Ok(self
            .clusters
            .destination(to)?
            .map(|found| found.name == self.serving))
    }

    /// Whether the file at `file` is this cluster's as the innermost app that rendered
    /// it and names a cluster says; `None`: none does, the tree's `[[cluster]]` rules say.
    pub(crate) fn placed_here(&self, file: &str) -> Option<bool> {
        self.placed.get(file).copied()
    }

    /// Whether the operator declared clusters beside the home cluster.
    pub fn is_fleet(&self) -> bool {
        self.clusters.len() > 1
    }

    /// The served cluster's name, as what the daemon tells names it: only in a fleet
    /// (alone, a cluster needs no name).
    pub(crate) fn named_in_fleet(&self) -> Option<String> {
        self.is_fleet().then(|| self.cluster().name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn parse(text: &str) -> Result<Clusters, String> {
        Clusters::parse(text, "clusters.toml", Path::new("/etc/driftless"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_file_declares_clusters_and_the_home_is_the_one_without_a_kubeconfig() {
        let c = parse(
            "[cluster.prod-eu]\nkubeconfig = \"prod-eu.yaml\"\ncontext = \"eu\"\nlabels = { env = \"prod\", region = \"eu\" }\n\n[cluster.mgmt]\nlabels = { env = \"mgmt\" }\n",
        )
        .unwrap();
        assert_eq!(c.home().name, "mgmt");
        assert_eq!(c.len(), 2, "no implicit in-cluster beside a declared home");
        let eu = c.get("prod-eu").unwrap();
        assert_eq!(
            eu.kubeconfig.as_deref(),
            Some(Path::new("/etc/driftless/prod-eu.yaml"))
        );
        assert_eq!(eu.context.as_deref(), Some("eu"));
        assert!(eu.matches(&BTreeMap::from([("env".into(), "prod".into())])));
        assert!(!eu.matches(&BTreeMap::from([("env".into(), "mgmt".into())])));
        assert!(
            eu.matches(&BTreeMap::new()),
            "an empty selector matches all"
        );
        let vars: BTreeMap<_, _> = eu.vars().collect();
        assert_eq!(vars["cluster.name"], "prod-eu");
        assert_eq!(vars["cluster.labels.region"], "eu");
    }

    #[test]
    fn a_cluster_s_version_may_be_declared_for_rendering_without_it() {
        let c = parse(
            "[cluster.edge]\nkubeconfig = \"e\"\nkube-version = \"1.34\"\n[cluster.mgmt]\nkube-version = \"v1.37.2\"\n",
        )
        .unwrap();
        assert_eq!(c.get("edge").unwrap().kube_version.as_deref(), Some("1.34"));
        assert_eq!(c.home().kube_version.as_deref(), Some("v1.37.2"));
        for bad in ["1", "one.two", "1.34.4.1", "v", "1..4", "1.34-rc"] {
            let text = format!("[cluster.edge]\nkubeconfig = \"e\"\nkube-version = \"{bad}\"\n");
            assert_eq!(
                parse(&text).unwrap_err(),
                format!(
                    "clusters.toml:3:1: cluster edge: kube-version {bad:?}: not a Kubernetes version (such as 1.34 or v1.34.4)"
                )
            );
        }
    }

    #[test]
    fn a_cluster_may_be_reached_by_a_secret_of_the_home_cluster() {
        let c = parse(
            "[cluster.staging]\nsecret = \"staging/cluster-kubeconfig\"\n[cluster.prod]\nsecret = \"prod/kc\"\nkey = \"value.yaml\"\ncontext = \"p\"\n",
        )
        .unwrap();
        assert_eq!(c.home().name, HOME, "a Secret's cluster is not the home");
        let staging = c.get("staging").unwrap();
        assert_eq!(
            staging.secret.as_ref().map(|s| s.to_string()).as_deref(),
            Some("staging/cluster-kubeconfig")
        );
        assert_eq!(staging.kubeconfig, None);
        let prod = c.get("prod").unwrap().secret.clone().unwrap();
        assert_eq!(prod.key.as_deref(), Some("value.yaml"));
        let by = |ns: &str, name: &str, key: Option<&str>| SecretRef {
            namespace: ns.into(),
            name: name.into(),
            key: key.map(str::to_string),
            argocd: false,
        };
        let target = Target::named(Arc::new(c), "staging").unwrap();
        let place = |r| target.place(&Destination::Secret(r));
        assert_eq!(
            place(by("staging", "cluster-kubeconfig", None)),
            Ok(Some(true))
        );
        assert_eq!(
            place(by("staging", "cluster-kubeconfig", Some("value"))),
            Ok(Some(true)),
            "`value` is the default key"
        );
        assert_eq!(place(by("prod", "kc", Some("value.yaml"))), Ok(Some(false)));
        assert_eq!(
            place(by("prod", "kc", None)).unwrap_err(),
            "its kubeConfig Secret prod/kc is not a declared cluster's (`secret` in --clusters): the declared clusters are in-cluster (home), prod, staging"
        );
        for (text, why) in [
            (
                "[cluster.a]\nkubeconfig = \"k\"\nsecret = \"ns/s\"\n",
                "clusters.toml:1:2: cluster a: both `kubeconfig` and `secret`: a cluster is reached one way",
            ),
            (
                "[cluster.a]\nsecret = \"s\"\n",
                "clusters.toml:1:2: cluster a: secret \"s\": give it as NAMESPACE/NAME",
            ),
            (
                "[cluster.a]\nkubeconfig = \"k\"\nkey = \"v\"\n",
                "clusters.toml:1:2: cluster a: `key` without `secret`",
            ),
            (
                "[cluster.a]\nsecret = \"Ns/s\"\n",
                "clusters.toml:1:2: cluster a: secret \"Ns/s\": namespace must consist of lowercase letters, digits and '-'",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err(), why);
        }
    }

    /// Argo CD's cluster Secrets join the declared clusters, each name once.
    #[test]
    fn clusters_found_in_secrets_join_the_declared_ones_by_a_name_of_their_own() {
        let found = |name: &str, secret: &str| Cluster {
            name: name.into(),
            labels: BTreeMap::from([("region".into(), "eu".into())]),
            kubeconfig: None,
            context: None,
            server: Some("https://10.0.0.9:6443".into()),
            secret: Some(SecretRef {
                namespace: "argocd".into(),
                name: secret.into(),
                key: None,
                argocd: true,
            }),
            kube_version: None,
        };
        let declared = parse("[cluster.prod]\nkubeconfig = \"p\"\n").unwrap();
        let all = declared
            .clone()
            .with_found(vec![found("edge", "cluster-edge")])
            .unwrap();
        assert_eq!(
            all.declared(),
            "the declared clusters are edge, in-cluster (home), prod"
        );
        let target = Target::named(Arc::new(all), "edge").unwrap();
        assert_eq!(
            target.place(&Destination::Server("https://10.0.0.9:6443/".into())),
            Ok(Some(true))
        );
        // A Flux reference never names an Argo CD Secret.
        let flux = SecretRef {
            namespace: "argocd".into(),
            name: "cluster-edge".into(),
            key: None,
            argocd: false,
        };
        assert!(target.place(&Destination::Secret(flux)).is_err());
        for (name, by) in [("prod", "--clusters"), ("in-cluster", "the home cluster")] {
            assert_eq!(
                declared
                    .clone()
                    .with_found(vec![found(name, "s")])
                    .unwrap_err(),
                format!("cluster Secret argocd/s names cluster {name:?}, a name {by} has already")
            );
        }
        assert_eq!(
            declared
                .with_found(vec![found("edge", "a"), found("edge", "b")])
                .unwrap_err(),
            "cluster Secret argocd/b names cluster \"edge\", a name cluster Secret argocd/a has already"
        );
    }

    #[test]
    fn without_a_home_in_the_file_in_cluster_is_added() {
        let c = parse("[cluster.a]\nkubeconfig = \"/k/a\"\n").unwrap();
        assert_eq!(c.home().name, HOME);
        assert!(c.get("a").is_some());
        assert_eq!(
            c.declared(),
            "the declared clusters are a, in-cluster (home)"
        );
        assert_eq!(Clusters::default().home().name, HOME);
    }

    #[test]
    fn what_is_wrong_in_the_file_is_said_at_its_place() {
        assert_eq!(
            parse("[cluster.a]\nserver = \"https://x\"\n").unwrap_err(),
            "clusters.toml:2:1: unknown field `server`, expected one of `kubeconfig`, `secret`, `key`, `context`, `labels`, `kube-version`"
        );
        assert_eq!(
            parse("[cluster.a]\n[cluster.b]\n").unwrap_err(),
            "clusters.toml:2:2: clusters a, b have no kubeconfig: only one cluster, the home cluster, is reached with the command's own connection"
        );
        assert_eq!(
            parse("[cluster.a]\nkubeconfig = \"k\"\nlabels = { env = \"not ok!\" }\n").unwrap_err(),
            "clusters.toml:1:2: cluster a: label env=\"not ok!\": value must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        );
        assert_eq!(
            parse("[cluster.\"a b\"]\nkubeconfig = \"k\"\n").unwrap_err(),
            "clusters.toml:1:10: cluster name \"a b\": value must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        );
        assert_eq!(
            Clusters::default().pick("prod").unwrap_err().to_string(),
            "--cluster prod: not a declared cluster; the declared clusters are in-cluster (home)"
        );
    }

    fn files(list: &[(&str, &str)]) -> Vec<crate::spec::SourceFile> {
        list.iter()
            .map(|(p, c)| crate::spec::SourceFile {
                path: p.to_string(),
                contents: c.as_bytes().to_vec(),
            })
            .collect()
    }

    fn fleet() -> Arc<Clusters> {
        Arc::new(
            parse(
                "[cluster.edge]\nkubeconfig = \"edge.yaml\"\nlabels = { fleet = \"yes\", region = \"eu\" }\n[cluster.in-cluster]\nlabels = { fleet = \"yes\", region = \"us\" }\n",
            )
            .unwrap(),
        )
    }

    fn config_map(name: &str, value: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\ndata:\n  v: \"{value}\"\n"
        )
    }

    /// The ConfigMaps the tree gives `cluster`, with their value.
    fn seen(tree: &[(&str, &str)], cluster: &str) -> Result<Vec<(String, String)>, Vec<String>> {
        let policy = crate::spec::Policy {
            cluster: Target::named(fleet(), cluster).unwrap(),
            ..Default::default()
        };
        let tree = crate::spec::parse_files_with(&files(tree), &policy)
            .map_err(|e| e.0.iter().map(|e| e.to_string()).collect::<Vec<_>>())?;
        let mut seen: Vec<(String, String)> = tree
            .specs
            .iter()
            .map(|s| match &s.body {
                crate::spec::SpecBody::Manifest(m) => (
                    m.metadata.name.clone(),
                    m.rest["data"]["v"].as_str().unwrap_or_default().to_string(),
                ),
                _ => unreachable!("only manifests here"),
            })
            .collect();
        seen.sort();
        Ok(seen)
    }

    const SETTINGS: &str = "[vars]\n\n[[cluster]]\npath = \"edge/**\"\nnames = [\"edge\"]\n\n[[cluster]]\npath = \"all/**\"\nlabels = { fleet = \"yes\" }\n";

    #[test]
    fn each_cluster_reads_the_files_that_go_to_it_with_its_own_variables() {
        let core = config_map("core", "${cluster.name}");
        let edge = config_map("edge-app", "${cluster.labels.region}");
        let all = config_map("common", "${cluster.name}");
        let tree = [
            (".driftless.toml", SETTINGS),
            ("core.yaml", core.as_str()),
            ("edge/app.yaml", edge.as_str()),
            ("all/common.yaml", all.as_str()),
        ];
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        assert_eq!(
            seen(&tree, "in-cluster").unwrap(),
            [pair("common", "in-cluster"), pair("core", "in-cluster")]
        );
        assert_eq!(
            seen(&tree, "edge").unwrap(),
            [pair("common", "edge"), pair("edge-app", "eu")]
        );
        // A broken file of one cluster is not another's.
        let broken = [(".driftless.toml", SETTINGS), ("edge/app.yaml", "kind: [")];
        assert_eq!(seen(&broken, "in-cluster").unwrap(), []);
        assert!(seen(&broken, "edge").is_err());
    }

    #[test]
    fn a_tree_names_only_declared_clusters_and_never_how_to_reach_one() {
        let tree = [(
            ".driftless.toml",
            "[[cluster]]\npath = \"x/**\"\nnames = [\"edge\", \"mars\"]\n",
        )];
        assert_eq!(
            seen(&tree, "edge").unwrap_err(),
            [
                ".driftless.toml:3:18: cluster \"mars\" is not declared: the declared clusters are edge, in-cluster (home) (the operator declares clusters with --clusters FILE)"
            ]
        );
        let tree = [(
            ".driftless.toml",
            "[[cluster]]\npath = \"x/**\"\nnames = [\"edge\"]\nkubeconfig = \"/tmp/k\"\n",
        )];
        let err = seen(&tree, "edge").unwrap_err();
        assert!(
            err.len() == 1
                && err[0].starts_with(".driftless.toml:4:1: ")
                && err[0].contains("kubeconfig"),
            "{err:?}"
        );
        let tree = [(".driftless.toml", "[[cluster]]\npath = \"x/**\"\n")];
        assert_eq!(
            seen(&tree, "edge").unwrap_err(),
            [
                ".driftless.toml:1:1: [[cluster]]: give `names` (clusters by name) or `labels` (clusters by their labels), or both"
            ]
        );
    }
}
