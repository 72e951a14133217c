//! The server-side apply request, sent so that its answer's `Warning` headers are kept.
//! kube's `Api::patch` hands back the body alone, yet the apiserver says in those headers
//! what it accepted but finds wrong (a deprecated API version, a finalizer name without a
//! domain, a port listed twice): a user must see that once per object, not never.

use http_body_util::BodyExt as _;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{Request, Resource as _, Status};
use serde_json::Value;

use super::resolve::Resolved;

/// Applies `body` as `name`; the object as the apiserver returned it, and its warnings.
pub(super) async fn apply(
    client: &kube::Client,
    resolved: &Resolved,
    namespace: Option<&str>,
    name: &str,
    pp: &PatchParams,
    body: &Value,
) -> Result<(DynamicObject, Vec<String>), kube::Error> {
    let namespace = namespace.filter(|ns| resolved.namespaced && !ns.is_empty());
    let url = DynamicObject::url_path(&resolved.resource, namespace);
    let mut req = Request::new(url)
        .patch(name, pp, &Patch::Apply(body))
        .map_err(kube::Error::BuildRequest)?;
    // What kube's own patch marks its requests with (its tracing layer names the verb).
    req.extensions_mut().insert("patch");
    let res = client.send(req.map(kube::client::Body::from)).await?;
    let warnings = warnings_of(res.headers());
    let code = res.status();
    let bytes = res.into_body().collect().await?.to_bytes();
    if code.is_client_error() || code.is_server_error() {
        let status = serde_json::from_slice::<Status>(&bytes).unwrap_or_else(|_| {
            let text = String::from_utf8_lossy(&bytes);
            Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
        });
        return Err(kube::Error::Api(status.boxed()));
    }
    let object = serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?;
    Ok((object, warnings))
}

/// The texts of `Warning` headers (RFC 9111: `299 - "text"`), each once, in order.
fn warnings_of(headers: &http::HeaderMap) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in headers.get_all(http::header::WARNING) {
        let Ok(value) = value.to_str() else { continue };
        let text = warning_text(value);
        if !text.is_empty() && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// `299 - "a \"quoted\" text"` → `a "quoted" text`; a value not in that form, as it is.
fn warning_text(value: &str) -> String {
    let value = value.trim();
    let quoted = value
        .split_once(' ')
        .and_then(|(_code, rest)| rest.trim_start().split_once(' '))
        .map(|(_agent, text)| text.trim())
        .filter(|t| t.len() >= 2 && t.starts_with('"'));
    let Some(quoted) = quoted else {
        return value.to_string();
    };
    let mut out = String::with_capacity(quoted.len());
    let mut chars = quoted[1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            // The closing quote; a date may follow it.
            '"' => break,
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_header_is_read_as_its_text() {
        assert_eq!(
            warning_text(
                r#"299 - "metadata.finalizers: \"example/x\": prefer a domain-qualified finalizer name""#
            ),
            r#"metadata.finalizers: "example/x": prefer a domain-qualified finalizer name"#
        );
        assert_eq!(
            warning_text(r#"299 - "text" "Tue, 15 Nov 1994 08:12:31 GMT""#),
            "text"
        );
        assert_eq!(warning_text("not the usual form"), "not the usual form");
    }

    #[test]
    fn each_warning_is_kept_once() {
        let mut h = http::HeaderMap::new();
        for v in [r#"299 - "a""#, r#"299 - "b""#, r#"299 - "a""#] {
            h.append(http::header::WARNING, v.parse().unwrap());
        }
        assert_eq!(warnings_of(&h), ["a", "b"]);
    }
}
