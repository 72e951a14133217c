//! How a registry is reached: directly, or through the proxy the environment names
//! (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, upper or lower case), as curl
//! reads them. The rendering tools get the same variables (`hydrate::runner`), and git
//! reads them itself, so one environment sends every fetch the same way.
//!
//! Both schemes go through the proxy with CONNECT: a TLS registry's handshake then runs
//! end to end with the registry, never with the proxy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower::Service;

/// Why the proxy could not carry a connection: already in our words, and found by
/// `wire::explain_io` before anything it would say of a direct connection.
#[derive(Debug, thiserror::Error)]
#[error("through the proxy {proxy}: {why}")]
pub(crate) struct ProxyError {
    /// `scheme://host:port`, never its credentials.
    pub proxy: String,
    pub why: String,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connector for `hyper_rustls`: TCP to the registry, or a tunnel through the proxy.
#[derive(Clone)]
pub(crate) struct Egress {
    direct: HttpConnector,
    proxies: Arc<Matcher>,
}

impl Egress {
    /// The proxies as the environment names them now.
    pub fn from_env(direct: HttpConnector) -> Egress {
        Egress::new(direct, Matcher::from_env())
    }

    pub fn new(direct: HttpConnector, proxies: Matcher) -> Egress {
        Egress {
            direct,
            proxies: Arc::new(proxies),
        }
    }
}

impl Service<Uri> for Egress {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.direct.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let Some(via) = self.proxies.intercept(&dst) else {
            let connecting = self.direct.call(dst);
            return Box::pin(async move { connecting.await.map_err(Into::into) });
        };
        let proxy = shown(via.uri());
        if via.uri().scheme_str() != Some("http") {
            let why = "only a proxy reached over plain http:// is supported".to_string();
            return Box::pin(async move { Err(ProxyError { proxy, why }.into()) });
        }
        let mut tunnel = Tunnel::new(via.uri().clone(), self.direct.clone());
        if let Some(auth) = via.basic_auth() {
            tunnel = tunnel.with_auth(auth.clone());
        }
        // CONNECT names a port always; the tunnel would say 443 for a plain registry.
        let target = with_port(dst);
        Box::pin(async move {
            match tunnel.call(target).await {
                Ok(stream) => Ok(stream),
                Err(e) => {
                    let why = said(&e);
                    Err(ProxyError { proxy, why }.into())
                }
            }
        })
    }
}

/// On one line: a proxy's words may span several.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn shown(uri: &Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("http");
    let host = uri.host().unwrap_or("");
    match uri.port_u16() {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    }
}

fn with_port(dst: Uri) -> Uri {
    if dst.port().is_some() {
        return dst;
    }
    let port = match dst.scheme_str() {
        Some("http") => 80,
        _ => 443,
    };
    let (scheme, host) = (
        dst.scheme_str().unwrap_or("https"),
        dst.host().unwrap_or(""),
    );
    format!("{scheme}://{host}:{port}").parse().unwrap_or(dst)
}

/// hyper-util's tunnel error is not nameable: its words are the only handle on it.
fn said(e: &(dyn std::error::Error + 'static)) -> String {
    let top = e.to_string();
    let mut causes = Vec::new();
    let mut cur = e.source();
    while let Some(c) = cur {
        causes.push(c.to_string());
        cur = c.source();
    }
    let below = causes.join(": ");
    if top.contains("underlying connection") {
        return if below.to_lowercase().contains("connection refused") {
            "cannot connect: connection refused (is the proxy up?)".into()
        } else if below.contains("timed out") {
            "cannot connect: timed out".into()
        } else {
            format!("cannot connect: {}", flat(&below))
        };
    }
    let why = [
        (
            "authorization required",
            "the proxy asks for credentials (407): give them in the proxy's URL",
        ),
        (
            "unsuccessful",
            "the proxy refused to tunnel to the registry",
        ),
        ("unexpected end of file", "the proxy closed the connection"),
        ("headers too long", "the proxy's answer was too long"),
        ("io error", "the connection to the proxy broke"),
    ]
    .into_iter()
    .find(|(case, _)| top.contains(case));
    match why {
        Some((_, said)) if below.is_empty() => said.into(),
        Some((_, said)) => format!("{said}: {}", flat(&below)),
        None => flat(&top),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(https: &str, no: &str) -> Matcher {
        Matcher::builder().https(https).http(https).no(no).build()
    }

    #[test]
    fn a_plain_registry_is_tunnelled_to_its_own_port_not_443() {
        let u: Uri = "http://registry.example".parse().unwrap();
        assert_eq!(with_port(u).to_string(), "http://registry.example:80/");
        let u: Uri = "https://registry.example".parse().unwrap();
        assert_eq!(with_port(u).to_string(), "https://registry.example:443/");
        let u: Uri = "http://127.0.0.1:5000/v2/".parse().unwrap();
        assert_eq!(with_port(u).port_u16(), Some(5000));
    }

    #[test]
    fn no_proxy_and_the_proxys_credentials_are_honoured_and_never_shown() {
        let m = matcher("http://joe:secret@proxy.example:3128", "internal.example");
        let to = m
            .intercept(&"https://ghcr.io/v2/".parse().unwrap())
            .expect("proxied");
        assert_eq!(shown(to.uri()), "http://proxy.example:3128");
        assert!(to.basic_auth().is_some());
        assert!(
            m.intercept(&"https://registry.internal.example/v2/".parse().unwrap())
                .is_none()
        );
    }
}
