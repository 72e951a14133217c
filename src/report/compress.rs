//! gzip for what the listener answers with a whole body (the status, the API's JSON, the
//! page and its assets) when the client accepts it: a 170 KB status document of 300
//! specs is a tenth of that compressed. Event streams are compressed as one gzip stream
//! flushed after every event (a sync flush), so each event reaches the page at once and
//! later events are compressed against what came before: a stream's first document
//! shrinks as a whole body does, and a delta repeating its spec's shape costs little.

use std::io::Write as _;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::StreamExt as _;

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
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("text/event-stream") {
        return gzip_stream(response);
    }
    if !COMPRESSIBLE.iter().any(|c| content_type.starts_with(c)) {
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

/// An event stream as one gzip stream, each chunk of it flushed through at once.
fn gzip_stream(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    let encoder = GzEncoder::new(Vec::new(), Compression::fast());
    let chunks = futures::stream::unfold(
        (body.into_data_stream(), Some(encoder)),
        |(mut body, encoder)| async move {
            let mut encoder = encoder?;
            match body.next().await {
                Some(Ok(chunk)) => {
                    // A sync flush: everything so far is decodable by the page now.
                    let out = encoder
                        .write_all(&chunk)
                        .and_then(|()| encoder.flush())
                        .map(|()| std::mem::take(encoder.get_mut()));
                    match out {
                        Ok(out) => Some((Ok(out), (body, Some(encoder)))),
                        Err(e) => Some((Err(e), (body, None))),
                    }
                }
                Some(Err(e)) => Some((Err(std::io::Error::other(e)), (body, None))),
                None => Some((encoder.finish(), (body, None))),
            }
        },
    );
    Response::from_parts(parts, Body::from_stream(chunks))
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

    #[tokio::test]
    async fn an_event_stream_is_one_gzip_stream_each_event_decodable_as_it_comes() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Vec<u8>, std::io::Error>>();
        let response = Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(rx))
            .unwrap();
        let response = gzip_stream(response);
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        let mut body = response.into_body().into_data_stream();
        let mut decoder = flate2::write::GzDecoder::new(Vec::new());
        let event = |n: usize| {
            format!(
                "event: delta\ndata: {{\"specs\":[{{\"id\":\"manifest/shop/Deployment.apps/web\",\"ready\":true,\"n\":{n}}}]}}\n\n"
            )
        };
        let mut sizes = Vec::new();
        for n in 0..3 {
            tx.unbounded_send(Ok(event(n).into_bytes())).unwrap();
            // Out before the next event is even sent, and whole once decoded.
            let zipped = body.next().await.unwrap().unwrap();
            sizes.push(zipped.len());
            decoder.write_all(&zipped).unwrap();
            decoder.flush().unwrap();
            let so_far = String::from_utf8(std::mem::take(decoder.get_mut())).unwrap();
            assert_eq!(so_far, event(n));
        }
        // Later events are compressed against the earlier ones.
        assert!(sizes[2] * 2 < event(2).len(), "{sizes:?}");
        drop(tx);
        let end = body.next().await.unwrap().unwrap();
        decoder.write_all(&end).unwrap();
        assert!(decoder.finish().unwrap().is_empty());
        assert!(body.next().await.is_none());
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
