//! The web UI: a dashboard at `/`, its script, style sheet and icon at `/ui/{file}`, all
//! compiled into the binary from `ui/` (no build step, nothing fetched from elsewhere, so
//! it works on an air-gapped cluster). The page reads the JSON API and its event stream on
//! the same listener; its controls post to the API with the token the user pastes.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Only this origin, for everything: no inline script or style (the page has none), so an
/// object name or message that slipped into markup could still not run. `form-action
/// 'none'` keeps the token form from ever submitting the token in a URL.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// An asset of `ui/`, named once: its file is its URL.
macro_rules! asset {
    ($name:literal, $content_type:literal) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_bytes!(concat!("../../ui/", $name)),
        }
    };
}

const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("find.js", "text/javascript; charset=utf-8"),
    asset!("object.js", "text/javascript; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("fleet.html", "text/html; charset=utf-8"),
    asset!("fleet.js", "text/javascript; charset=utf-8"),
];

/// `/` and `/ui/{file}`, for any router state (the handlers need none).
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    assets().route("/", get(index))
}

/// `/ui/{file}` alone.
pub fn assets<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new().route("/ui/{file}", get(asset))
}

/// A fleet's listener: the fleet's page at `/`, the assets, and each cluster's own page
/// at `/clusters/NAME/` (its closing slash is what the page's relative URLs need).
pub(crate) fn fleet_router<S: Clone + Send + Sync + 'static>(clusters: &[String]) -> Router<S> {
    let mut router = assets().route("/", get(|| async { serve("fleet.html") }));
    for name in clusters {
        let to = format!("/clusters/{name}/");
        router = router.route(&to, get(index)).route(
            &format!("/clusters/{name}"),
            get(move || redirect(to.clone())),
        );
    }
    router
}

async fn index() -> Response {
    serve("index.html")
}

async fn redirect(to: String) -> Response {
    (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, to)]).into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    serve(&file)
}

fn serve(name: &str) -> Response {
    let found = ASSETS.iter().find(|a| a.name == name);
    let (status, content_type, body): (_, _, &'static [u8]) = match found {
        Some(a) => (StatusCode::OK, a.content_type, a.body),
        None => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            b"no such file in the web UI",
        ),
    };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        // The assets change with the binary, not with a version in their names: a browser
        // must ask again each time (cheap on a loopback or in-cluster listener).
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (
            HeaderName::from_static("x-frame-options"),
            HeaderValue::from_static("DENY"),
        ),
    ];
    (status, headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(response: &'a Response, name: &str) -> &'a str {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    #[test]
    fn every_asset_has_its_type_and_the_security_headers() {
        for (name, kind) in [
            ("index.html", "text/html"),
            ("app.js", "text/javascript"),
            ("find.js", "text/javascript"),
            ("object.js", "text/javascript"),
            ("app.css", "text/css"),
            ("icon.svg", "image/svg+xml"),
        ] {
            let response = serve(name);
            assert_eq!(response.status(), StatusCode::OK, "{name}");
            assert!(
                header(&response, "content-type").starts_with(kind),
                "{name}"
            );
            assert_eq!(header(&response, "cache-control"), "no-cache", "{name}");
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            let csp = header(&response, "content-security-policy");
            assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
        }
        let missing = serve("../Cargo.toml");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert_eq!(header(&missing, "x-content-type-options"), "nosniff");
    }

    /// The page names only files this module serves, from this origin: the CSP would
    /// block anything else, and the page would break quietly.
    #[test]
    fn the_page_refers_only_to_served_assets() {
        // Relative references, so that a fleet's cluster page under /clusters/NAME/ finds
        // them as a daemon's own page at / does.
        for page in ["index.html", "fleet.html"] {
            let body = ASSETS
                .iter()
                .find(|a| a.name == page)
                .map_or(&b""[..], |a| a.body);
            let text = std::str::from_utf8(body).unwrap_or_default();
            let refs: Vec<&str> = text
                .split(['"', '\''])
                .filter(|s| s.starts_with("ui/") || s.starts_with("/ui/") || s.contains("://"))
                .collect();
            assert!(refs.len() >= 3, "{page}: {refs:?}");
            for r in refs {
                let name = r.strip_prefix("ui/").unwrap_or(r);
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{page}: {r} is not served"
                );
            }
        }
        for asset in ASSETS {
            let text = std::str::from_utf8(asset.body).unwrap_or_default();
            assert!(
                !text.contains("style=\"") && !text.contains("<script>"),
                "{}: inline style or script, which the CSP refuses",
                asset.name
            );
        }
    }
}
