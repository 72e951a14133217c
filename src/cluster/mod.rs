//! Cluster selection as kubectl does it: `--kubeconfig`, then `KUBECONFIG`, then
//! `~/.kube/config`, then the in-cluster service account; `--context` picks a context.

mod follow;
pub mod lookup;
mod refusal;
pub mod retry;

use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("reading kubeconfig {path}: {source}")]
    ReadKubeconfig {
        path: PathBuf,
        source: KubeconfigError,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] KubeconfigError),
    #[error(
        "no cluster configuration found (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account): {0}"
    )]
    Infer(#[from] kube::config::InferConfigError),
    #[error("creating the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("reading the cluster's Secret {namespace}/{name} of the home cluster: {why}")]
    Secret {
        namespace: String,
        name: String,
        why: String,
    },
}

/// Where to find the cluster and how fast to talk to it; the global CLI flags.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub rate: retry::RateLimit,
    /// The cluster is reached by what a Secret of the cluster the fields above reach says
    /// (a Flux hub's kubeconfig Secret of a spoke, an Argo CD cluster Secret), not by
    /// those fields.
    pub secret: Option<KubeconfigSecret>,
}

/// A Secret holding how to reach a cluster: a kubeconfig, as Flux's
/// `kubeConfig.secretRef` keeps one, or Argo CD's cluster Secret.
#[derive(Debug, Clone)]
pub struct KubeconfigSecret {
    pub namespace: String,
    pub name: String,
    /// The key of its data; `None`: `value`, else `value.yaml` (Flux's defaults).
    pub key: Option<String>,
    /// The kubeconfig's context (default: its current-context).
    pub context: Option<String>,
    /// An Argo CD cluster Secret (`server`, `config`), not a kubeconfig.
    pub argocd: bool,
}

impl Selection {
    pub async fn config(&self) -> Result<kube::Config, ClusterError> {
        match &self.secret {
            None => self.own_config().await,
            Some(secret) => {
                let home = self.client_of(self.own_config().await?)?;
                from_secret(home, secret).await
            }
        }
    }

    /// The config of the cluster the kubeconfig, context or environment reach.
    async fn own_config(&self) -> Result<kube::Config, ClusterError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        match (&self.kubeconfig, &self.context) {
            (Some(path), _) => from_file(path, &options).await,
            // A context only makes sense against a kubeconfig (KUBECONFIG or ~/.kube/config).
            (None, Some(_)) => Ok(kube::Config::from_kubeconfig(&options).await?),
            (None, None) => Ok(kube::Config::infer().await?),
        }
    }

    pub async fn client(&self) -> Result<Client, ClusterError> {
        self.client_of(self.config().await?)
    }

    /// [`client`](Self::client) for a daemon: a cluster reached by a Secret is reached
    /// by what the Secret holds now, read again whenever it changes (a rotated
    /// credential is taken without a restart).
    pub async fn followed_client(&self) -> Result<Client, ClusterError> {
        match &self.secret {
            None => self.client().await,
            Some(secret) => follow::client(self, secret).await,
        }
    }

    fn client_of(&self, mut config: kube::Config) -> Result<Client, ClusterError> {
        if config.accept_invalid_certs {
            // Said once here, in place of kube's warning on every TLS handshake (which
            // one-shot commands leave out of their log).
            tracing::warn!(
                server = %config.cluster_url,
                "the kubeconfig sets insecure-skip-tls-verify: the apiserver's certificate is not checked, so anyone on the network path can impersonate it"
            );
        }
        // kube's own retry tries 429/503/504 15 times, backing off up to 1000 s: a request
        // to an apiserver whose etcd is away (a 504 after each 60 s) then hangs for most
        // of an hour, and the daemon cannot say what is wrong. Ours (retry.rs) is bounded
        // in tries and in time, and rate-limits as client-go does.
        config.default_retry = false;
        if !proxied_as_kubectl_would(&config) {
            config.proxy_url = None;
        }
        // Retrying needs a service it can clone: the buffer makes kube's one so.
        Ok(kube::client::ClientBuilder::try_from(config)?
            .with_layer(&tower::buffer::BufferLayer::new(1024))
            .with_layer(&retry::Layer::new(self.rate, retry::Policy::default()))
            .build())
    }
}

/// kube takes HTTPS_PROXY for every apiserver and matches NO_PROXY against the proxy's
/// own address. kubectl matches it against the apiserver's, and never proxies loopback or
/// `localhost`: so does driftless. A kubeconfig's `proxy-url` is kept as it is.
fn proxied_as_kubectl_would(config: &kube::Config) -> bool {
    let Some(proxy) = &config.proxy_url else {
        return false;
    };
    let from_env = ["HTTPS_PROXY", "https_proxy"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.is_empty());
    let env = hyper_util::client::proxy::matcher::Matcher::from_env();
    proxy_kept(proxy, &config.cluster_url, from_env.as_deref(), &env)
}

fn proxy_kept(
    proxy: &http::Uri,
    server: &http::Uri,
    from_env: Option<&str>,
    env: &hyper_util::client::proxy::matcher::Matcher,
) -> bool {
    if from_env.and_then(|v| v.parse::<http::Uri>().ok()).as_ref() != Some(proxy) {
        return true;
    }
    let host = server
        .host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'));
    let loopback = match host {
        Some("localhost") | None => true,
        Some(h) => h
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
    };
    let https = format!(
        "https://{}",
        server.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    !loopback
        && https
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| env.intercept(&u))
            .is_some()
}

/// The config `secret` gives (its kubeconfig, or Argo CD's `server` and `config`), read
/// with `home`. What such a kubeconfig
/// may say is narrower than the operator's own file, as Flux narrows it: whoever may
/// write Secrets in that namespace must not make the daemon run a command (`exec`, an
/// `auth-provider`) or read its own files (a certificate, key or token by path).
async fn from_secret(
    home: Client,
    secret: &KubeconfigSecret,
) -> Result<kube::Config, ClusterError> {
    let api = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(home, &secret.namespace);
    let found = get_secret(&api, secret).await?;
    config_of_secret(found.data.unwrap_or_default(), secret).await
}

fn secret_refused(secret: &KubeconfigSecret, why: String) -> ClusterError {
    ClusterError::Secret {
        namespace: secret.namespace.clone(),
        name: secret.name.clone(),
        why,
    }
}

async fn get_secret(
    api: &kube::Api<k8s_openapi::api::core::v1::Secret>,
    secret: &KubeconfigSecret,
) -> Result<k8s_openapi::api::core::v1::Secret, ClusterError> {
    let refuse = |why: String| secret_refused(secret, why);
    api.get_opt(&secret.name)
        .await
        .map_err(|e| refuse(error_text(&e)))?
        .ok_or_else(|| refuse("there is no such Secret".to_string()))
}

/// The config the data of `secret` gives.
async fn config_of_secret(
    data: std::collections::BTreeMap<String, k8s_openapi::ByteString>,
    secret: &KubeconfigSecret,
) -> Result<kube::Config, ClusterError> {
    let refuse = |why: String| secret_refused(secret, why);
    if secret.argocd {
        let text = |key: &str| {
            data.get(key)
                .and_then(|b| std::str::from_utf8(&b.0).ok())
                .map(str::to_string)
        };
        let server = text("server").ok_or_else(|| refuse("it has no `server`".to_string()))?;
        let kubeconfig = argocd_kubeconfig(&server, text("config").as_deref().unwrap_or("{}"))
            .map_err(refuse)?;
        return kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| refuse(e.to_string()));
    }
    let bytes = match &secret.key {
        Some(key) => data.get(key),
        None => data.get("value").or_else(|| data.get("value.yaml")),
    }
    .ok_or_else(|| {
        refuse(match &secret.key {
            Some(key) => format!("it has no key {key:?}"),
            None => "it has neither key `value` nor `value.yaml`".to_string(),
        })
    })?;
    let text = std::str::from_utf8(&bytes.0)
        .map_err(|_| refuse("its kubeconfig is not UTF-8 text".to_string()))?;
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| refuse(e.to_string()))?;
    if let Some(why) = reaches_outside(&kubeconfig) {
        return Err(refuse(why));
    }
    let options = KubeConfigOptions {
        context: secret.context.clone(),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| refuse(e.to_string()))
}

/// An Argo CD cluster Secret's `config` (a bearer token or basic auth, TLS data) as a
/// kubeconfig of `server`. What it would run (`execProviderConfig`, `awsAuthConfig`) or
/// any other field is refused, as for a kubeconfig in a Secret.
fn argocd_kubeconfig(server: &str, config: &str) -> Result<Kubeconfig, String> {
    let config: serde_json::Value =
        serde_json::from_str(config).map_err(|e| format!("its `config` is not JSON: {e}"))?;
    const KNOWN: [&str; 4] = ["bearerToken", "username", "password", "tlsClientConfig"];
    const TLS: [&str; 5] = ["insecure", "serverName", "caData", "certData", "keyData"];
    let unknown = |v: &serde_json::Value, known: &[&str]| {
        v.as_object()
            .and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())).cloned())
    };
    if let Some(key) = unknown(&config, &KNOWN) {
        return Err(format!(
            "its `config` asks for `{key}`, which a cluster Secret may not here (a bearer token, basic auth and TLS data may)"
        ));
    }
    let tls = &config["tlsClientConfig"];
    if let Some(key) = unknown(tls, &TLS) {
        return Err(format!(
            "its `config.tlsClientConfig` asks for `{key}`, which driftless does not take"
        ));
    }
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let yaml = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": server,
            "certificate-authority-data": text(&tls["caData"]),
            "insecure-skip-tls-verify": tls["insecure"].as_bool(),
            "tls-server-name": text(&tls["serverName"]),
        }}],
        "users": [{"name": "u", "user": {
            "token": text(&config["bearerToken"]),
            "username": text(&config["username"]),
            "password": text(&config["password"]),
            "client-certificate-data": text(&tls["certData"]),
            "client-key-data": text(&tls["keyData"]),
        }}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    });
    Kubeconfig::from_yaml(&yaml.to_string()).map_err(|e| e.to_string())
}

/// What a kubeconfig from a Secret may not ask of the daemon's machine, if anything.
fn reaches_outside(kubeconfig: &Kubeconfig) -> Option<String> {
    for user in &kubeconfig.auth_infos {
        let Some(a) = &user.auth_info else { continue };
        let name = &user.name;
        if a.exec.is_some() {
            return Some(format!(
                "user {name:?} runs a command (`exec`), which a kubeconfig in a Secret may not"
            ));
        }
        if a.auth_provider.is_some() {
            return Some(format!(
                "user {name:?} has an `auth-provider`, which a kubeconfig in a Secret may not"
            ));
        }
        for (key, set) in [
            ("client-certificate", a.client_certificate.is_some()),
            ("client-key", a.client_key.is_some()),
            ("tokenFile", a.token_file.is_some()),
        ] {
            if set {
                return Some(format!(
                    "user {name:?} names a file (`{key}`), which a kubeconfig in a Secret may not: give the data inline"
                ));
            }
        }
    }
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.cluster.as_ref().is_some_and(|c| c.certificate_authority.is_some()))
        .map(|c| {
            format!(
                "cluster {:?} names a file (`certificate-authority`), which a kubeconfig in a Secret may not: give the data inline",
                c.name
            )
        })
}

async fn from_file(path: &Path, options: &KubeConfigOptions) -> Result<kube::Config, ClusterError> {
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|source| ClusterError::ReadKubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(kube::Config::from_custom_kubeconfig(kubeconfig, options).await?)
}

/// An error with its causes: kube shows only the outermost one ("client error
/// (Connect)"), which hides why, such as an apiserver certificate that is not trusted.
/// A cause already said by the one before it is not said again, and an apiserver's
/// refusal is said in its own words and code (`... is invalid: ... (422 Invalid)`), not
/// as kube's `ApiError:` with a debug dump of the whole Status.
pub fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(e);
    while let Some(c) = next {
        let (part, source) = match c.downcast_ref::<kube::Error>() {
            // Its source is the same Status again.
            Some(kube::Error::Api(status)) => (status_text(status), None),
            _ => (c.to_string(), c.source()),
        };
        if !part.is_empty() && !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        next = source;
    }
    transport_in_our_words(&text)
}

/// A failure to reach the apiserver as a person says it: kube's and hyper's layers
/// (`ServiceError: client error (Connect): tcp connect error: ...`) name themselves, not
/// what happened.
fn transport_in_our_words(text: &str) -> String {
    let text = text
        .replace("ServiceError: ", "")
        .replace(
            "client error (Connect): ",
            "cannot connect to the Kubernetes API: ",
        )
        .replace(
            "client error (SendRequest): ",
            "the Kubernetes API dropped the connection: ",
        )
        .replace("tcp connect error: ", "")
        .replace("HyperError: ", "");
    // The OS's own error code adds nothing to its words.
    match text.find(" (os error ") {
        Some(at) => {
            let end = text[at..].find(')').map_or(text.len(), |e| at + e + 1);
            format!("{}{}", &text[..at], &text[end..])
        }
        None => text,
    }
}

fn status_text(s: &kube::core::Status) -> String {
    let message = refusal::plain(&s.message);
    let message = if message.is_empty() {
        "the apiserver refused it"
    } else {
        &message
    };
    // kube's words for an answer that was not a Status (plain text, a proxy's page),
    // not the apiserver's.
    let reason = match s.reason.as_str() {
        "Failed to parse error data" => "",
        r => r,
    };
    match (s.code, reason) {
        (0, "") => message.to_string(),
        (0, reason) => format!("{message} ({reason})"),
        (code, "") => format!("{message} ({code})"),
        (code, reason) => format!("{message} ({code} {reason})"),
    }
}

/// The cluster's Nodes as rendering sees them (name and labels).
pub async fn node_facts(client: &Client) -> Result<Vec<crate::render::NodeFacts>, kube::Error> {
    use k8s_openapi::api::core::v1::Node;
    use kube::ResourceExt;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let list = nodes.list(&kube::api::ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .map(|n| crate::render::NodeFacts {
            name: n.name_any(),
            labels: n.labels().clone(),
        })
        .collect())
}

/// What charts are told of the cluster (helm's `--kube-version` and `--api-versions`): its
/// version and every group/version it serves, from discovery.
pub async fn chart_facts(
    client: &Client,
) -> Result<crate::hydrate::helm::ClusterFacts, kube::Error> {
    let version = client.apiserver_version().await?;
    let mut api_versions: Vec<String> = client
        .list_core_api_versions()
        .await?
        .versions
        .into_iter()
        .collect();
    for g in client.list_api_groups().await?.groups {
        api_versions.extend(g.versions.into_iter().map(|v| v.group_version));
    }
    api_versions.sort();
    api_versions.dedup();
    Ok(crate::hydrate::helm::ClusterFacts {
        kube_version: Some(version.git_version),
        api_versions,
        lookup: None,
    })
}

#[cfg(test)]
mod tests {

    /// A kubeconfig from a Secret may not run a command or read the daemon's files;
    /// inline data and tokens pass.
    #[test]
    fn a_kubeconfig_in_a_secret_reaches_nothing_of_the_machine() {
        let with_user = |user: &str| {
            let text = format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://10.0.0.9:6443', certificate-authority-data: 'Zm9v'}}\nusers:\n- name: u\n  user: {user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
            );
            super::reaches_outside(&super::Kubeconfig::from_yaml(&text).unwrap())
        };
        assert_eq!(with_user("{token: t}"), None);
        assert_eq!(
            with_user("{client-certificate-data: Zm9v, client-key-data: Zm9v}"),
            None
        );
        assert_eq!(
            with_user("{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ['-c', 'id']}}")
                .as_deref(),
            Some("user \"u\" runs a command (`exec`), which a kubeconfig in a Secret may not")
        );
        assert_eq!(
            with_user("{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}")
                .as_deref(),
            Some(
                "user \"u\" names a file (`tokenFile`), which a kubeconfig in a Secret may not: give the data inline"
            )
        );
        assert_eq!(
            with_user("{client-key: /etc/driftless/key.pem}").as_deref(),
            Some(
                "user \"u\" names a file (`client-key`), which a kubeconfig in a Secret may not: give the data inline"
            )
        );
        let ca_file = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://x', certificate-authority: /etc/ca.pem}\n";
        assert_eq!(
            super::reaches_outside(&super::Kubeconfig::from_yaml(ca_file).unwrap()).as_deref(),
            Some(
                "cluster \"c\" names a file (`certificate-authority`), which a kubeconfig in a Secret may not: give the data inline"
            )
        );
    }

    /// An Argo CD cluster Secret's `config`: a token and TLS data make a kubeconfig of
    /// its server; what would run a command, or a field not known, is refused.
    #[test]
    fn an_argocd_cluster_secret_s_config_is_a_kubeconfig_of_its_server() {
        let k = super::argocd_kubeconfig(
            "https://10.0.0.9:6443",
            r#"{"bearerToken": "t", "tlsClientConfig": {"caData": "Zm9v", "serverName": "api"}}"#,
        )
        .unwrap();
        let cluster = k.clusters[0].cluster.clone().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.9:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Zm9v"));
        assert_eq!(cluster.tls_server_name.as_deref(), Some("api"));
        assert_eq!(super::reaches_outside(&k), None);
        assert_eq!(
            super::argocd_kubeconfig(
                "https://x",
                r#"{"execProviderConfig": {"command": "argocd-k8s-auth"}}"#
            )
            .unwrap_err(),
            "its `config` asks for `execProviderConfig`, which a cluster Secret may not here (a bearer token, basic auth and TLS data may)"
        );
        assert_eq!(
            super::argocd_kubeconfig("https://x", r#"{"tlsClientConfig": {"caFile": "/etc/ca"}}"#)
                .unwrap_err(),
            "its `config.tlsClientConfig` asks for `caFile`, which driftless does not take"
        );
        assert!(
            super::argocd_kubeconfig("https://x", "not json")
                .unwrap_err()
                .starts_with("its `config` is not JSON: ")
        );
    }

    #[test]
    fn the_apiserver_is_proxied_as_kubectl_proxies_it() {
        use super::proxy_kept;
        use hyper_util::client::proxy::matcher::Matcher;
        let proxy: http::Uri = "http://proxy.example:3128".parse().unwrap();
        let env = |no: &str| {
            Matcher::builder()
                .https("http://proxy.example:3128")
                .no(no)
                .build()
        };
        let url = |u: &str| u.parse::<http::Uri>().unwrap();
        let from_env = Some("http://proxy.example:3128");
        let kept = |server: &str, no: &str| proxy_kept(&proxy, &url(server), from_env, &env(no));
        assert!(kept("https://10.0.0.1:6443", ""));
        // NO_PROXY is matched against the apiserver, not the proxy.
        assert!(!kept("https://10.0.0.1:6443", "10.0.0.0/8"));
        assert!(!kept("https://api.internal.example", ".internal.example"));
        assert!(kept("https://api.internal.example", "proxy.example"));
        // Loopback never.
        assert!(!kept("https://127.0.0.1:6443", ""));
        assert!(!kept("https://[::1]:6443", ""));
        assert!(!kept("https://localhost:6443", ""));
        // The kubeconfig's own proxy-url is kept whatever the environment says.
        assert!(proxy_kept(
            &proxy,
            &url("https://127.0.0.1:6443"),
            None,
            &env("*")
        ));
    }
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Layer(&'static str, #[source] Option<Box<Layer>>);

    #[test]
    fn error_text_shows_every_cause_once() {
        let e = Layer(
            "client error (Connect)",
            Some(Box::new(Layer(
                "invalid peer certificate: UnknownIssuer",
                Some(Box::new(Layer("UnknownIssuer", None))),
            ))),
        );
        assert_eq!(
            super::error_text(&e),
            "cannot connect to the Kubernetes API: invalid peer certificate: UnknownIssuer"
        );
    }

    /// An apiserver's refusal reads as its own message and code, once, also under
    /// layers of ours: never kube's `ApiError:` with a debug dump of the Status.
    #[test]
    fn an_apiserver_refusal_is_said_once_in_its_words() {
        let refusal = || {
            kube::Error::Api(Box::new(kube::core::Status {
                code: 422,
                reason: "Invalid".into(),
                message: "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1"
                    .into(),
                ..Default::default()
            }))
        };
        let said =
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1 (422 Invalid)";
        assert_eq!(super::error_text(&refusal()), said);
        #[derive(Debug, thiserror::Error)]
        #[error("listing {0}")]
        struct Listing(&'static str, #[source] kube::Error);
        let listed = Listing("apps/v1 Deployment", refusal());
        assert_eq!(
            super::error_text(&listed),
            format!("listing apps/v1 Deployment: {said}")
        );
        let bare = kube::Error::Api(Box::new(kube::core::Status {
            code: 500,
            ..Default::default()
        }));
        assert_eq!(super::error_text(&bare), "the apiserver refused it (500)");
    }
}

#[cfg(test)]
mod words {
    use super::transport_in_our_words;

    #[test]
    fn a_refused_connection_reads_as_one() {
        assert_eq!(
            transport_in_our_words(
                "ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)"
            ),
            "cannot connect to the Kubernetes API: Connection refused"
        );
        assert_eq!(transport_in_our_words("x (422)"), "x (422)");
    }
}
