//! A daemon's cluster reached by a Secret of the home cluster (a Flux hub's kubeconfig
//! Secret of a spoke, an Argo CD cluster Secret), followed: credentials in Secrets are
//! rotated (a token that expires, a client certificate renewed, a credential revoked and
//! replaced), and a daemon that kept what it read at start would be refused from then on
//! until restarted. The Secret is watched; when what it holds changes, the next requests
//! reach the cluster with it. What every part of the daemon holds is one `Client` whose
//! requests go to the client of the Secret's latest usable content.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::client::Body;
use kube::runtime::{WatchStreamExt as _, watcher};

use super::{ClusterError, KubeconfigSecret, Selection, config_of_secret, error_text, get_secret};

/// A client of the cluster `secret` reaches, which follows the Secret from now on.
pub(super) async fn client(
    selection: &Selection,
    secret: &KubeconfigSecret,
) -> Result<Client, ClusterError> {
    let home = selection.client_of(selection.own_config().await?)?;
    let api = kube::Api::<Secret>::namespaced(home, &secret.namespace);
    let data = get_secret(&api, secret).await?.data.unwrap_or_default();
    let config = config_of_secret(data.clone(), secret).await?;
    let namespace = config.default_namespace.clone();
    let current = Arc::new(RwLock::new(selection.client_of(config)?));
    tokio::spawn(follow(
        api,
        secret.clone(),
        selection.clone(),
        current.clone(),
        data,
    ));
    Ok(Client::new(Current(current), namespace))
}

/// Watches the Secret and puts a client of each new content in `current`; a content
/// that cannot be used is said, and the cluster is reached as before.
async fn follow(
    api: kube::Api<Secret>,
    secret: KubeconfigSecret,
    selection: Selection,
    current: Arc<RwLock<Client>>,
    mut last: BTreeMap<String, ByteString>,
) {
    let shown = format!("{}/{}", secret.namespace, secret.name);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", secret.name));
    let mut seen = watcher(api, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut refused_before = false;
    while let Some(event) = seen.next().await {
        let found = match event {
            Ok(found) => found,
            Err(e) => {
                // Said once: the watch backs off and tries again.
                if !refused_before {
                    tracing::warn!(secret = %shown, error = %error_text(&e), "the cluster's Secret cannot be watched: a credential rotated in it is taken at the next start");
                    refused_before = true;
                }
                continue;
            }
        };
        let data = found.data.unwrap_or_default();
        if data == last {
            continue;
        }
        last = data.clone();
        let client = match config_of_secret(data, &secret).await {
            Ok(config) => selection.client_of(config),
            Err(e) => Err(e),
        };
        match client {
            Ok(client) => {
                match current.write() {
                    Ok(mut c) => *c = client,
                    Err(poisoned) => *poisoned.into_inner() = client,
                }
                tracing::info!(secret = %shown, "the cluster's Secret changed: the cluster is reached with what it holds now");
            }
            Err(e) => {
                tracing::warn!(secret = %shown, error = %error_text(&e), "the cluster's Secret changed but cannot be used: the cluster is still reached as before");
            }
        }
    }
}

/// The service under the daemon's client: each request goes to the current client.
#[derive(Clone)]
struct Current(Arc<RwLock<Client>>);

impl tower::Service<http::Request<Body>> for Current {
    type Response = http::Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let client = match self.0.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        Box::pin(async move { client.send(request).await })
    }
}
