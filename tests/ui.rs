//! The web UI as a person uses it: the real daemon on the real local cluster, looked at
//! and steered through a real headless Chromium (tests/support/browser.rs).
//!
//! `DRIFTLESS_UI_SCREENSHOT_DIR=DIR` keeps screenshots of the dashboard in DIR: `ui.png`
//! (wide) and `ui-narrow.png` (phone width). The book's picture is the wide one:
//! `DRIFTLESS_UI_SCREENSHOT_DIR=docs/src/images cargo test --test suite ui::the_dashboard_shows`
//! retakes it.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;

use fantoccini::key::Key;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::HeaderMap;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use support::{Browser, Daemon, http};

const TOKEN: &str = "ui-test-token-7c1e9a";

/// A GET that keeps the response headers (support::http keeps only status and body).
async fn get(addr: SocketAddr, path: &str) -> (u16, HeaderMap, String) {
    // support::http retries until the daemon listens; after it, one attempt is enough.
    http(addr, "GET", "/healthz", &[], b"").await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri = format!("http://{addr}{path}").parse().unwrap();
    let response = client.get(uri).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn assert_strict_policy(headers: &HeaderMap, what: &str) {
    let csp = header(headers, "content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: CSP without {directive}: {csp:?}"
        );
    }
    assert_eq!(
        header(headers, "x-content-type-options"),
        "nosniff",
        "{what}"
    );
    assert_eq!(header(headers, "cache-control"), "no-cache", "{what}");
}

/// `driftless run --dir SPECS --resync 1h EXTRA...`: every change below must come from
/// the watch and reach the page by itself.
fn start(ns: &str, specs: &Path, extra: &[&str]) -> Daemon {
    let dir = specs.display().to_string();
    let mut args = vec!["--dir", &dir, "--resync", "1h"];
    args.extend(extra);
    Daemon::builder(ns).args(&args).start()
}

/// The row of spec `id` once its text holds every one of `needles`; its text.
async fn row(browser: &Browser, id: &str, needles: &[&str]) -> String {
    let script = "const row = [...document.querySelectorAll('#spec-rows tr')]\
                      .find(r => r.dataset.id === arguments[0]);\
                  return row && arguments[1].every(n => row.innerText.includes(n))\
                      ? row.innerText : null;";
    let found = browser
        .wait_for(
            &format!("the row of {id} showing {needles:?}"),
            script,
            vec![json!(id), json!(needles)],
        )
        .await;
    found.as_str().unwrap_or_default().to_string()
}

/// What the API says about one spec.
async fn api_spec(addr: SocketAddr, id: &str) -> Value {
    let (code, body) = http(addr, "GET", &format!("/api/v1/specs/{id}"), &[], b"").await;
    assert_eq!(code, 200, "GET /api/v1/specs/{id}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The `error` text the API answers a mutating call with `token`.
async fn api_refusal(addr: SocketAddr, token: &str) -> (u16, String) {
    let bearer = format!("Bearer {token}");
    let (code, body) = http(
        addr,
        "POST",
        "/api/v1/sync",
        &[("Authorization", &bearer)],
        b"",
    )
    .await;
    let parsed: Value = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("the API's refusal is not JSON ({e}): {body}"));
    let text = parsed["error"].as_str().unwrap_or_default().to_string();
    assert!(!text.is_empty(), "{body}");
    (code, text)
}

/// The status once no sync has run or started for a second.
async fn idle(daemon: &Daemon) -> Value {
    support::eventually("the daemon idle", support::WAIT, || async {
        let before = daemon.status().unwrap_or_default();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let after = daemon.status().unwrap_or_default();
        if after["syncing"] == false && after["last_sync"] == before["last_sync"] {
            Ok(after)
        } else {
            Err(after["last_sync"].to_string())
        }
    })
    .await
}

fn object_count(status: &Value) -> u64 {
    let specs = status["specs"].as_array().into_iter().flatten();
    specs
        .map(|s| s["objects"].as_array().map_or(0, Vec::len) as u64)
        .sum()
}

fn configmap(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  greeting: hello\n"
    )
}

fn web_and_ide(ns: &str, total_qps: u32) -> String {
    format!(
        "namespace = \"{ns}\"\n\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\n\
         total-qps = {total_qps}\n\n[workspace.ide]\nimage = \"codercom/code-server:4.9.0\"\nport = 8080\n"
    )
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_their_types_and_a_strict_policy() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-assets").await;
    let specs = tempfile::tempdir().unwrap();
    let daemon = start(&ns, specs.path(), &[]);

    for (path, content_type) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/find.js", "text/javascript"),
        ("/ui/object.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/ui/icon.svg", "image/svg+xml"),
        ("/ui/fleet.js", "text/javascript"),
        ("/ui/fleet.html", "text/html"),
    ] {
        let (code, headers, body) = get(daemon.metrics, path).await;
        assert_eq!(code, 200, "{path}: {body}");
        assert!(
            header(&headers, "content-type").starts_with(content_type),
            "{path}: {headers:?}"
        );
        assert_strict_policy(&headers, path);
        assert!(!body.is_empty(), "{path}");
    }
    // Relative, so that the same page serves a cluster of a fleet under /clusters/NAME/.
    let (_, _, page) = get(daemon.metrics, "/").await;
    assert!(
        page.contains(r#"<script src="ui/app.js""#) && page.contains(r#"href="ui/app.css""#),
        "{page}"
    );
    let (code, headers, _) = get(daemon.metrics, "/ui/secrets.txt").await;
    assert_eq!(code, 404);
    assert_eq!(header(&headers, "x-content-type-options"), "nosniff");
}

#[tokio::test]
async fn without_an_api_token_file_the_controls_say_how_to_enable_them() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-notoken").await;
    let specs = tempfile::tempdir().unwrap();
    std::fs::write(specs.path().join("cm.yaml"), configmap(&ns, "plain")).unwrap();
    let daemon = start(&ns, specs.path(), &[]);
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", daemon.metrics)).await;
    row(
        &browser,
        &format!("manifest/{ns}/ConfigMap/plain"),
        &["Ready"],
    )
    .await;

    // No token pasted: the button explains where one comes from instead of calling.
    browser.click("#reconcile").await;
    browser
        .wait_for_text("#action-result", &["--api-token-file"])
        .await;

    // A token, but the daemon has none configured: the API's own explanation is shown.
    let (code, refusal) = api_refusal(daemon.metrics, "anything").await;
    assert_eq!(code, 403, "{refusal}");
    browser.type_into("#token", "anything").await;
    browser.click("#token-form button[type=submit]").await;
    browser.click("#reconcile").await;
    browser
        .wait_for_text("#action-result", &["403", &refusal])
        .await;
    browser.close().await;
}

#[tokio::test]
async fn the_page_says_when_it_lost_the_daemon_and_catches_up_when_it_is_back() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-reconnect").await;
    let specs = tempfile::tempdir().unwrap();
    std::fs::write(specs.path().join("a.yaml"), configmap(&ns, "a")).unwrap();
    // An RBAC name is any path segment, as bundles name them: a row like any other.
    std::fs::write(
        specs.path().join("role.yaml"),
        format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: system:ui-reader\n  namespace: {ns}\nrules: []\n"),
    )
    .unwrap();
    let mut daemon = start(&ns, specs.path(), &[]);
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", daemon.metrics)).await;
    row(&browser, &format!("manifest/{ns}/ConfigMap/a"), &["Ready"]).await;
    row(
        &browser,
        &format!("manifest/{ns}/Role.rbac.authorization.k8s.io/system:ui-reader"),
        &["system:ui-reader", "Ready"],
    )
    .await;
    browser.wait_for_text("#connection", &["Live"]).await;
    browser.eval("window.__uiTestMarker = 'kept'").await;

    assert_eq!(daemon.stop(), Some(0));
    browser
        .wait_for(
            "the connection shown as lost",
            "const c = document.getElementById('connection');\
             return c.dataset.state !== 'live' && /Reconnecting|Disconnected/.test(c.innerText);",
            vec![],
        )
        .await;
    std::fs::write(specs.path().join("b.yaml"), configmap(&ns, "b")).unwrap();
    daemon.restart();
    row(&browser, &format!("manifest/{ns}/ConfigMap/b"), &["Ready"]).await;
    browser.wait_for_text("#connection", &["Live"]).await;
    assert_eq!(browser.eval("return window.__uiTestMarker").await, "kept");
    browser.close().await;
}

#[tokio::test]
async fn the_dashboard_shows_every_spec_updates_live_and_steers_the_daemon() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui").await;
    let specs = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::write(specs.path().join("apps.toml"), web_and_ide(&ns, 200)).unwrap();
    std::fs::write(
        specs.path().join("settings.yaml"),
        configmap(&ns, "settings"),
    )
    .unwrap();
    let daemon = start(
        &ns,
        specs.path(),
        &["--api-token-file", &token_file.to_string_lossy()],
    );
    let addr = daemon.metrics;
    let shop = format!("elasticweb/{ns}/shop");
    let ide = format!("workspace/{ns}/ide");
    let settings = format!("manifest/{ns}/ConfigMap/settings");
    let status = daemon
        .wait_status("three specs ready", |s| {
            support::all_ready(s) && s["specs"].as_array().is_some_and(|a| a.len() == 3)
        })
        .await;

    let browser = Browser::start().await;
    browser.goto(&format!("http://{addr}/")).await;

    // Every spec, with its readiness in words and its figures.
    row(
        &browser,
        &shop,
        &["elasticweb", &ns, "shop", "Ready", "2/2 available", "200"],
    )
    .await;
    let url = support::spec(&status, &ide)["figures"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    row(
        &browser,
        &ide,
        &["workspace", "ide", "Ready", "Running", &url],
    )
    .await;
    row(&browser, &settings, &["ConfigMap", "settings", "Ready"]).await;
    assert_eq!(
        browser.text("#source").await,
        status["source"].as_str().unwrap()
    );
    assert_eq!(
        browser.text("#instance").await,
        status["instance"].as_str().unwrap()
    );
    assert_eq!(
        browser.text("#revision-applied").await,
        status["revision_applied"].as_str().unwrap()
    );
    browser.wait_for_text("#last-sync", &["success"]).await;
    browser
        .wait_for_text("#summary", &["3/3 specs ready"])
        .await;
    browser.wait_for_text("#connection", &["Live"]).await;

    // Changes reach the open page by themselves: a reload would drop this marker.
    browser.eval("window.__uiTestMarker = 'kept'").await;
    std::fs::write(specs.path().join("apps.toml"), web_and_ide(&ns, 300)).unwrap();
    std::fs::write(specs.path().join("extra.yaml"), configmap(&ns, "extra")).unwrap();
    row(&browser, &shop, &["3/3 available", "300"]).await;
    row(
        &browser,
        &format!("manifest/{ns}/ConfigMap/extra"),
        &["Ready"],
    )
    .await;
    std::fs::write(
        specs.path().join("broken.toml"),
        "[elasticweb.x]\nimagee = 1\n",
    )
    .unwrap();
    let broken = daemon.wait_errors("the broken file reported").await;
    let first = &broken["errors"][0];
    let location = format!(
        "{}:{}:{}: ",
        first["file"].as_str().unwrap(),
        first["line"],
        first["column"]
    );
    browser
        .wait_for_text("#errors", &[&location, first["message"].as_str().unwrap()])
        .await;
    // The last sync succeeded, but of an older revision: not green beside the red errors.
    let last = browser
        .wait_for_text("#last-sync", &["success, of an older revision"])
        .await;
    assert_eq!(
        browser
            .eval("const e = document.getElementById('last-sync'); return [e.dataset.result, getComputedStyle(e).color]")
            .await,
        json!(["stale", "rgb(122, 75, 0)"]),
        "{last}"
    );
    std::fs::remove_file(specs.path().join("broken.toml")).unwrap();
    browser
        .wait_for(
            "the errors gone",
            "return document.getElementById('errors').hidden \
               && document.getElementById('last-sync').dataset.result === 'success'",
            vec![],
        )
        .await;
    assert_eq!(browser.eval("return window.__uiTestMarker").await, "kept");

    // The detail view, by keyboard: the objects and their state.
    let link = browser
        .find(&format!("#spec-rows a[href=\"#/spec/{shop}\"]"))
        .await;
    link.send_keys(&char::from(Key::Enter).to_string())
        .await
        .unwrap();
    let shop_status = api_spec(addr, &shop).await;
    let objects: Vec<&str> = shop_status["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["object"].as_str().unwrap())
        .collect();
    assert!(objects.len() >= 2, "{shop_status}");
    let mut needles = vec![shop.as_str(), "Objects", "Last action", "Suspended"];
    needles.extend(&objects);
    browser.wait_for_text("#detail", &needles).await;
    assert_eq!(
        browser.eval("return location.hash").await,
        format!("#/spec/{shop}")
    );
    assert_eq!(
        browser
            .eval("return document.getElementById('list').hidden")
            .await,
        true
    );
    browser.click("#detail a[href=\"#/\"]").await;
    row(&browser, &shop, &["Ready"]).await;

    // Controls without a token say how to get one; a wrong one shows the API's answer.
    let suspend_shop = format!("button[aria-label=\"Suspend {shop}\"]");
    browser.click(&suspend_shop).await;
    browser
        .wait_for_text("#action-result", &["--api-token-file"])
        .await;
    assert_eq!(
        browser
            .eval("return document.getElementById('suspend-dialog').open")
            .await,
        false
    );
    let (code, refusal) = api_refusal(addr, "wrong").await;
    assert_eq!(code, 401, "{refusal}");
    browser.type_into("#token", "wrong").await;
    browser.click("#token-form button[type=submit]").await;
    browser.click("#reconcile").await;
    browser
        .wait_for_text("#action-result", &["401", &refusal])
        .await;

    // The right token, kept for this tab only.
    browser.click("#forget-token").await;
    browser.type_into("#token", TOKEN).await;
    browser.click("#token-form button[type=submit]").await;
    let storage = browser
        .eval(
            "return [Object.values(sessionStorage), localStorage.length, document.cookie, \
             document.getElementById('token').value]",
        )
        .await;
    assert_eq!(storage, json!([[TOKEN], 0, "", ""]));

    // Suspend with a reason, as the API then reports; the page follows; Resume clears it.
    let reason = "load test in progress (UI)";
    browser.click(&suspend_shop).await;
    browser.type_into("#suspend-reason", reason).await;
    browser.click("#suspend-form button[type=submit]").await;
    support::eventually(
        "the API to report the suspension",
        support::WAIT,
        || async {
            let spec = api_spec(addr, &shop).await;
            match spec["suspended"]["reason"].as_str() {
                Some(r) if r == reason => Ok(()),
                _ => Err(spec["suspended"].to_string()),
            }
        },
    )
    .await;
    // The reason is in the row itself, not only in a tooltip.
    let shown = format!("Suspended: {reason}");
    row(&browser, &shop, &["Suspended", "Resume", shown.as_str()]).await;
    let shots = std::env::var_os("DRIFTLESS_UI_SCREENSHOT_DIR");
    if let Some(dir) = &shots {
        browser.screenshot(&Path::new(dir).join("ui.png")).await;
    }
    browser
        .click(&format!("button[aria-label=\"Resume {shop}\"]"))
        .await;
    support::eventually(
        "the API to report the resumption",
        support::WAIT,
        || async {
            let spec = api_spec(addr, &shop).await;
            if spec["suspended"].is_null() {
                Ok(())
            } else {
                Err(spec["suspended"].to_string())
            }
        },
    )
    .await;
    browser
        .wait_for(
            "the row without its Suspended badge",
            "const row = [...document.querySelectorAll('#spec-rows tr')]\
                 .find(r => r.dataset.id === arguments[0]);\
             return row && !row.innerText.includes('Suspended') && row.innerText.includes('Suspend');",
            vec![json!(shop)],
        )
        .await;

    // Reconcile now: accepted, and a whole sync follows (every object, not the one spec
    // the resume touched).
    let settled = idle(&daemon).await;
    let before = settled["last_sync"]["time"].clone();
    let objects = object_count(&settled);
    browser.click("#reconcile").await;
    browser
        .wait_for_text("#action-result", &["Reconcile", "202"])
        .await;
    daemon
        .wait_status("a whole sync after Reconcile now", |s| {
            let last = &s["last_sync"];
            last["time"] != before
                && last["applied"].as_u64().unwrap_or(0) + last["unchanged"].as_u64().unwrap_or(0)
                    >= objects
        })
        .await;

    // Nothing came from anywhere but the daemon, and the page was never reloaded.
    let loaded = browser
        .eval(
            "return { origin: location.origin, urls: \
               performance.getEntriesByType('resource').map(e => e.name).concat(\
               [...document.querySelectorAll('script[src],link[href],img[src]')]\
                 .map(e => e.src || e.href)) }",
        )
        .await;
    let origin = format!("{}/", loaded["origin"].as_str().unwrap());
    let urls = loaded["urls"].as_array().unwrap();
    assert!(urls.len() >= 3, "{loaded}");
    for url in urls {
        assert!(
            url.as_str().is_some_and(|u| u.starts_with(&origin)),
            "{url} is not on {origin}"
        );
    }
    let (_, headers, _) = get(addr, "/").await;
    assert_strict_policy(&headers, "/");
    assert_eq!(browser.eval("return window.__uiTestMarker").await, "kept");

    // A phone: nothing scrolls sideways and every button is on screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser
        .wait_for(
            "the phone layout without sideways scrolling",
            "return innerWidth < 500 && document.documentElement.scrollWidth <= innerWidth \
               && [...document.querySelectorAll('button')].filter(b => b.offsetParent)\
                    .every(b => b.getBoundingClientRect().right <= innerWidth)",
            vec![],
        )
        .await;
    if let Some(dir) = &shots {
        browser
            .eval("document.getElementById('specs-heading').scrollIntoView()")
            .await;
        browser
            .screenshot(&Path::new(dir).join("ui-narrow.png"))
            .await;
    }
    browser.close().await;
}

#[tokio::test]
async fn in_report_mode_drift_is_badged_and_listed_and_localservice_nodes_are_shown() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-drift").await;
    let specs = tempfile::tempdir().unwrap();
    std::fs::write(
        specs.path().join("apps.toml"),
        format!(
            "namespace = \"{ns}\"\n\n[elasticweb.shop]\nimage = \"nginx:1.17.1\"\n\
             single-pod-qps = 100\ntotal-qps = 100\n\n[localservice.near]\n\
             selector = {{ app = \"near\" }}\nports = [{{ name = \"http\", port = 80, target-port = 8080 }}]\n"
        ),
    )
    .unwrap();
    let daemon = start(&ns, specs.path(), &["--drift", "report"]);
    let shop = format!("elasticweb/{ns}/shop");
    let near = format!("localservice/{ns}/near");
    let status = daemon
        .wait_status("shop ready and near's nodes known", |s| {
            support::spec_or_null(s, &shop)["ready"] == true
                && support::spec_or_null(s, &near)["figures"]["nodes"]
                    .as_array()
                    .is_some_and(|n| !n.is_empty())
        })
        .await;
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", daemon.metrics)).await;
    let figures = &support::spec(&status, &near)["figures"];
    let mut needles = vec!["localservice".to_string(), "Ready endpoints".to_string()];
    for node in figures["nodes"].as_array().unwrap() {
        let node = node.as_str().unwrap();
        needles.push(node.to_string());
        needles.push(format!("{node}: {}", figures["ready_endpoints"][node]));
    }
    let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
    row(&browser, &near, &needles).await;
    browser.wait_for_text("#drift", &["reported only"]).await;

    // Someone else scales the Deployment; in report mode it stays so, and the page says so.
    support::scale_as_someone_else(&client, &ns, "shop", 3).await;
    let drifted = daemon
        .wait_status("the drift reported", |s| {
            support::spec_or_null(s, &shop)["drifted"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        })
        .await;
    let object = support::spec(&drifted, &shop)["drifted"][0]
        .as_str()
        .unwrap()
        .to_string();
    row(&browser, &shop, &["Drifted (1)"]).await;
    browser.wait_for_text("#summary", &["1 drifted"]).await;
    browser
        .click(&format!("#spec-rows a[href=\"#/spec/{shop}\"]"))
        .await;
    let detail = browser
        .wait_for_text("#detail", &["Drifted objects", &object])
        .await;
    let listed = browser
        .eval("return [...document.querySelectorAll('#detail ul.drifted li')].map(li => li.innerText)")
        .await;
    assert_eq!(listed, json!([object]), "{detail}");
    browser.close().await;
}

/// A spec the tree suspends is badged suspended with its reason, says so where the
/// Suspend and Resume buttons stand, and offers no Resume (the tree resumes it).
#[tokio::test]
async fn a_spec_the_tree_suspends_offers_no_resume() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-declared").await;
    let specs = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let held = configmap(&ns, "held").replace(
        "  namespace:",
        "  annotations:\n    driftless.dev/suspend: incident 7\n  namespace:",
    );
    std::fs::write(specs.path().join("held.yaml"), held).unwrap();
    std::fs::write(specs.path().join("free.yaml"), configmap(&ns, "free")).unwrap();
    let daemon = start(
        &ns,
        specs.path(),
        &["--api-token-file", &token_file.to_string_lossy()],
    );
    let (held, free) = (
        format!("manifest/{ns}/ConfigMap/held"),
        format!("manifest/{ns}/ConfigMap/free"),
    );
    daemon
        .wait_status("free ready, held suspended by the tree", |s| {
            support::spec_or_null(s, &free)["ready"] == true
                && support::spec_or_null(s, &held)["suspended"]["declared"] == true
        })
        .await;
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", daemon.metrics)).await;
    let text = row(
        &browser,
        &held,
        &["Suspended: incident 7", "Suspended in the tree"],
    )
    .await;
    assert!(!text.contains("Resume"), "{text}");
    let resume = format!("button[aria-label=\"Resume {held}\"]");
    let buttons = browser
        .wait_for(
            "the rows drawn",
            "return [document.querySelectorAll(arguments[0]).length, document.querySelectorAll('#spec-rows button').length];",
            vec![json!(resume)],
        )
        .await;
    assert_eq!(buttons[0], 0, "no Resume for it");
    assert_eq!(buttons[1], 1, "free's Suspend alone: {buttons}");
    row(&browser, &free, &["Suspend"]).await;
}
