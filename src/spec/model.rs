//! The typed form of a spec file. These types are the single description of what a file
//! may hold: the JSON Schema is generated from them, and the loader's output is checked
//! against their serde form in tests.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A field that takes one of a few Kubernetes API values, spelled in a file as the API
/// spells it (`ReadWriteOnce`, `NodePort`, `TCP`); the first one is the default. `ALL`
/// pairs each with its spelling for the loader (which names them all in its message for
/// any other value), and `as_str` gives the spelling back for the rendered object.
macro_rules! api_enum {
    ($name:ident { $default:ident $(, $value:ident)* $(,)? }) => {
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            #[default]
            $default,
            $($value,)*
        }

        impl $name {
            pub const ALL: [(&'static str, $name); 1 + [$(stringify!($value)),*].len()] = [
                (stringify!($default), $name::$default),
                $((stringify!($value), $name::$value),)*
            ];

            pub fn as_str(self) -> &'static str {
                match self {
                    $name::$default => stringify!($default),
                    $($name::$value => stringify!($value),)*
                }
            }
        }
    };
}

/// A workload kind's spec: its own fields, then the keys every workload kind shares
/// (`adopt` and the policies, docs/src/policies.md), declared once.
macro_rules! workload_kind {
    ($(#[$meta:meta])* pub struct $name:ident { $($field:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            $($field)*
            /// Take over existing objects of the same names that driftless did not create
            /// (otherwise they are reported as conflicts and left alone).
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            pub adopt: bool,
            /// Fields of its objects sent on create only (JSON pointers, as /spec/replicas):
            /// others own them afterwards (see the Policies guide).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub ignore_fields: Vec<String>,
            /// `false`: its objects stay in the cluster when the spec is removed.
            #[serde(default = "defaults::prune", skip_serializing_if = "defaults::is_prune")]
            pub prune: bool,
            /// Specs (`kind/namespace/name`) that must be ready before this one is applied.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub depends_on: Vec<String>,
            /// When only immutable fields refuse an apply of its objects: `on-immutable`
            /// deletes and recreates them, `never` (the default) reports the refusal.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub replace: Option<ReplaceKey>,
            /// Its sync wave: its objects are applied, and must be ready, after every
            /// lower wave's and before any higher wave's (see the Policies guide).
            #[serde(default, skip_serializing_if = "defaults::is_zero")]
            pub wave: i32,
        }
    };
}

/// A workload kind's `replace` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReplaceKey {
    OnImmutable,
    Never,
}

/// A whole spec file, as an editor sees it (the root of the JSON Schema).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "driftless spec file")]
pub struct SpecFile {
    /// Default namespace for the specs of this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Cloud IDE workspaces (code-server), keyed by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspace: BTreeMap<String, Workspace>,
    /// Web apps scaled from QPS figures, keyed by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub elasticweb: BTreeMap<String, ElasticWeb>,
    /// One Service per node, keyed by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub localservice: BTreeMap<String, LocalService>,
    /// Any other Kubernetes object, custom resources and CRDs included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest: Vec<Manifest>,
    /// Helm chart releases, keyed by name: rendered with `helm template`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub helm: BTreeMap<String, Helm>,
}

// Read by `extract::helm` into `spec::helm::HelmRelease`; this type is the schema's.
/// A Helm chart release: the chart rendered with `helm template` (the flags Argo CD
/// uses, the cluster's version and APIs), its objects applied as manifests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Helm {
    /// Release namespace: where namespaced objects without one go (default: the file's
    /// `namespace`, else "default").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The chart's directory in the repository, relative to the spec root; with
    /// `repository`, the chart's name there; or `oci://HOST/REPO/CHART`.
    pub chart: String,
    /// An HTTP(S) chart repository's URL: the chart is pulled from it once, into the
    /// cache, and verified by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// The chart's version (required with `repository` and for an `oci://` chart): exact
    /// (`6.2.3`) or a range (`^6.2`, `>=6.0.0 <7.0.0`), resolved by the source at most every
    /// 10 minutes; the version in force is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Pull an `oci://` chart over plain HTTP (a registry without TLS; only when asked).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plain_http: bool,
    /// The chart source's user name: a file's name in the credentials directory
    /// (`--credentials-dir`), which only the operator fills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_file: Option<String>,
    /// The chart source's password: a file's name in the credentials directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    /// A CA bundle the chart source's certificate is verified against: a file's name in the
    /// credentials directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Do not verify the chart source's TLS certificate (only when asked).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
    /// The release's name (default: the spec's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_name: Option<String>,
    /// Values files, relative to the spec root, applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,
    /// Values applied last, over the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<BTreeMap<String, serde_json::Value>>,
    /// Render the chart's CRDs (`--include-crds`).
    #[serde(
        default = "defaults::prune",
        skip_serializing_if = "defaults::is_prune"
    )]
    pub include_crds: bool,
    /// Leave the chart's tests out (`--skip-tests`).
    #[serde(
        default = "defaults::prune",
        skip_serializing_if = "defaults::is_prune"
    )]
    pub skip_tests: bool,
    /// `--kube-version` (default: the cluster's; needed by validate and render offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_version: Option<String>,
    /// Added to what the cluster serves (`--api-versions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_versions: Vec<String>,
    /// Fields of its objects sent on create only (JSON pointers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_fields: Vec<String>,
    /// `false`: its objects stay in the cluster when the release is removed.
    #[serde(
        default = "defaults::prune",
        skip_serializing_if = "defaults::is_prune"
    )]
    pub prune: bool,
    /// Specs (`kind/namespace/name`) that must be ready before its objects are applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// When only immutable fields refuse an apply of its objects: `on-immutable` deletes
    /// and recreates them, `never` reports the refusal (each object's own
    /// `driftless.dev/replace` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<ReplaceKey>,
    /// Its sync wave.
    #[serde(default, skip_serializing_if = "defaults::is_zero")]
    pub wave: i32,
}

workload_kind! {
/// A cloud IDE workspace: a Pod running the image, a ClusterIP Service, and a PVC when
/// `storage` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Workspace {
    /// Namespace (default: the file's `namespace`, else "cloud-ide").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Container image.
    pub image: String,
    /// Port the IDE listens on (TCP).
    #[serde(default = "defaults::workspace_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// CPU limit; the request equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory limit; the request equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Size of the PersistentVolumeClaim; omit for no volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// StorageClass of the claim (default: the cluster's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Access mode of the claim.
    #[serde(default)]
    pub access_mode: AccessMode,
    /// Where the volume is mounted in the container.
    #[serde(default = "defaults::mount_path")]
    pub mount_path: String,
    /// "stopped" removes the Pod and keeps the volume and the Service.
    #[serde(default)]
    pub state: WorkspaceState,
}
}

api_enum!(AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    ReadWriteOncePod,
});

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceState {
    #[default]
    Running,
    Stopped,
}

workload_kind! {
/// A web app whose replica count follows `ceil(total-qps / single-pod-qps)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ElasticWeb {
    /// Namespace (default: the file's `namespace`, else "default").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Container image.
    pub image: String,
    /// NodePort of the Service (30000-32767); omit for a ClusterIP Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30000, max = 32767))]
    pub port: Option<u16>,
    /// Port the container listens on (TCP).
    #[serde(default = "defaults::container_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: u16,
    /// Queries per second one Pod handles.
    #[schemars(range(min = 1))]
    pub single_pod_qps: u64,
    /// Queries per second the app must handle.
    #[schemars(range(min = 0))]
    pub total_qps: u64,
    /// CPU request and limit of each Pod.
    #[serde(default = "defaults::elasticweb_cpu")]
    pub cpu: String,
    /// Memory request and limit of each Pod.
    #[serde(default = "defaults::elasticweb_memory")]
    pub memory: String,
}
}

impl ElasticWeb {
    /// `ceil(total / single)`; 0 when no traffic is expected.
    pub fn replicas(&self) -> u64 {
        if self.single_pod_qps == 0 {
            return 0;
        }
        self.total_qps.div_ceil(self.single_pod_qps)
    }
}

workload_kind! {
/// One Service per matching Node, each reaching only the Pods on that node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LocalService {
    /// Namespace (default: the file's `namespace`, else "default").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels of the Pods to reach (not empty).
    pub selector: BTreeMap<String, String>,
    /// Labels a Node must carry to get a Service (default: every node).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Service type.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// Ports of each Service (at least one).
    pub ports: Vec<ServicePort>,
}
}

api_enum!(ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
});

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServicePort {
    /// Port name (required when there are several ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Port of the Service.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// Port (number or name) on the Pods (default: `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<TargetPort>,
    /// Protocol.
    #[serde(default)]
    pub protocol: Protocol,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TargetPort {
    Number(#[schemars(range(min = 1, max = 65535))] u16),
    Name(String),
}

api_enum!(Protocol { TCP, UDP, SCTP });

/// Any Kubernetes object, passed through with ownership labels added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    /// The object's API group and version, as `apps/v1` (`v1` for the core group).
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// The object's kind, as `Deployment`.
    pub kind: String,
    /// Its name, namespace, labels and annotations.
    pub metadata: ManifestMetadata,
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestMetadata {
    /// The object's name, checked as the apiserver checks names of its kind.
    // For a YAML hook written with `generateName` instead, that prefix (`generated`): each
    // run gets a name of its own from the apiserver. Not in the schema: a TOML
    // `[[manifest]]` always has a name.
    pub name: String,
    /// The object's namespace (default: the file's `namespace`, else "default"); none for
    /// a cluster-scoped kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `name` is a hook's `generateName` prefix, not a name: the object is sent without
    /// one (`generateName` stays in `rest`). Never in a spec file's own words.
    #[serde(skip)]
    #[schemars(skip)]
    pub generated: bool,
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

impl Manifest {
    /// The API group ("" for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// The whole object as JSON, as the apiserver takes it.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut obj = serde_json::Map::new();
        for (k, v) in &self.rest {
            obj.insert(k.clone(), v.clone());
        }
        let mut meta = serde_json::Map::new();
        for (k, v) in &self.metadata.rest {
            meta.insert(k.clone(), v.clone());
        }
        if !self.metadata.generated {
            meta.insert("name".into(), self.metadata.name.clone().into());
        }
        if let Some(ns) = &self.metadata.namespace {
            meta.insert("namespace".into(), ns.clone().into());
        }
        obj.insert("apiVersion".into(), self.api_version.clone().into());
        obj.insert("kind".into(), self.kind.clone().into());
        obj.insert("metadata".into(), meta.into());
        obj.into()
    }
}

pub mod defaults {
    pub(crate) const WORKSPACE_NAMESPACE: &str = "cloud-ide";
    pub const NAMESPACE: &str = "default";

    pub(crate) fn workspace_port() -> u16 {
        9999
    }
    pub(crate) fn mount_path() -> String {
        "/user_data".to_string()
    }
    pub(crate) fn container_port() -> u16 {
        8080
    }
    pub(crate) fn elasticweb_cpu() -> String {
        "100m".to_string()
    }
    pub(crate) fn elasticweb_memory() -> String {
        "512Mi".to_string()
    }
    pub fn prune() -> bool {
        true
    }
    pub(crate) fn is_zero(n: &i32) -> bool {
        *n == 0
    }

    pub(crate) fn is_prune(prune: &bool) -> bool {
        *prune
    }
}
