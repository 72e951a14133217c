//! gzip for what the listener answers with a whole body (the status, the API's JSON, the
//! page and its assets) when the client accepts it: a 170 KB status document of 300
//! specs is a tenth of that compressed. Event streams are left as they are: each event
//! must reach the page at once, and deltas keep them small.

use std::io::Write as _;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use flate2::Compression;
use flate2::write::GzEncoder;

/// Below this a body is sent as it is: gzip's own header would eat the gain.
const SMALLEST: usize = 1024;
/// Largest body buffered to compress: a status of 10,000 specs is a few MB.
const LARGEST: usize = 64 * 1024 * 1024;

const COMPRESSIBLE: &[&str] = &[
    "application/json",
    "text/html",
    "text/javascript",
    "text/css",
    "image/svg+xml",
    "text/plain",
    "application/openmetrics-text",
];

fn accepts_gzip(request: &Request) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut parts = e.trim().split(';');
            let name = parts.next().unwrap_or_default().trim();
            // `gzip;q=0` says no.
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    == Some(0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// The middleware: compresses the response to a request that accepts gzip.
pub async fn gzip(request: Request, next: Next) -> Response {
    let wanted = accepts_gzip(&request);
    let response = next.run(request).await;
    if !wanted || response.headers().contains_key(header::CONTENT_ENCODING) {
        return response;
    }
    let compressible = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| COMPRESSIBLE.iter().any(|c| t.starts_with(c)));
    if !compressible {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, LARGEST).await else {
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::empty());
    };
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    if bytes.len() < SMALLEST {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    let zipped = encoder.write_all(&bytes).and_then(|()| encoder.finish());
    match zipped {
        Ok(zipped) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            Response::from_parts(parts, Body::from(zipped))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(value: &str) -> Request {
        axum::http::Request::builder()
            .header(header::ACCEPT_ENCODING, value)
            .body(Body::empty())
            .unwrap()
    }

    #[test]
    fn gzip_is_used_only_when_accepted() {
        assert!(accepts_gzip(&asking("gzip, deflate, br")));
        assert!(accepts_gzip(&asking("br;q=1.0, GZIP;q=0.5")));
        assert!(!accepts_gzip(&asking("gzip;q=0")));
        assert!(!accepts_gzip(&asking("br")));
        assert!(!accepts_gzip(&axum::http::Request::new(Body::empty())));
    }
}
