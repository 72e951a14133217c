//! Finding the broken thing in the web UI and seeing why, as a person would: the real
//! daemon on the real local cluster, a real headless Chromium. A tree with a
//! crash-looping Deployment (the testbed's kubelet crash-loops an image named
//! `crashloop`) among objects with very long names: the failing spec is the first row,
//! `status:failed` finds it alone (and the URL keeps that), its object view shows the
//! Pod, its restarts and the events; nothing scrolls sideways at 1600 or 400 px.

use crate::support;

use std::net::SocketAddr;

use fantoccini::key::Key;
use serde_json::{Value, json};
use support::{Browser, Daemon, http, url_params, urlencode};

/// A name of 200 characters without a break: it has to wrap or be cut, never widen.
fn long(i: usize) -> String {
    format!("cm{i}-{}", "averyveryverylongnamewithoutanybreak".repeat(5))
}

async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (code, body) = http(addr, "GET", path, &[], b"").await;
    let parsed = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("GET {path} is not JSON ({e}): {body}"));
    (code, parsed)
}

#[tokio::test]
async fn the_failing_spec_comes_first_is_found_by_status_and_its_view_shows_the_pod_and_events() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-find").await;
    let specs = tempfile::tempdir().unwrap();
    let configmaps: String = (0..12)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {}, namespace: {ns}}}\ndata: {{greeting: hello}}\n",
                long(i)
            )
        })
        .collect();
    let long_file = format!("{}.yaml", "a-bundle-file-with-a-rather-long-name".repeat(4));
    std::fs::write(specs.path().join(&long_file), configmaps).unwrap();
    std::fs::write(
        specs.path().join("apps.yaml"),
        format!(
            "{}---\n{}",
            support::one_pod_deployment(&ns, "fine", "nginx:1.17.1"),
            support::one_pod_deployment(&ns, "crashy", "example.org/crashloop:1")
        ),
    )
    .unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &specs.path().display().to_string(),
            "--resync",
            "1h",
            "--drift",
            "report",
        ])
        .start();
    let addr = daemon.metrics;
    let crashy = format!("manifest/{ns}/Deployment.apps/crashy");
    let fine = format!("manifest/{ns}/Deployment.apps/fine");
    daemon
        .wait_status("crashy failed, the rest ready", |s| {
            let specs = s["specs"].as_array().map_or(0, Vec::len);
            specs == 14
                && support::spec(s, &crashy)["status"] == "Failed"
                && support::spec(s, &fine)["ready"] == true
        })
        .await;

    let browser = Browser::start().await;
    browser.client.set_window_size(1600, 1000).await.unwrap();
    browser.goto(&format!("http://{addr}/")).await;
    browser.wait_for_spec_rows(14).await;
    // Trouble first, by default.
    assert_eq!(browser.spec_rows().await[0], crashy);
    // The object's own kind, not `manifest`.
    let first = browser.text("#spec-rows tr[data-id]").await;
    assert!(
        first.starts_with("Deployment") && !first.contains("manifest"),
        "{first}"
    );
    browser
        .assert_no_sideways_scroll("the list at 1600x1000")
        .await;
    browser.shot("find-wide.png").await;
    // A long name is whole in its title, wherever the cell cuts or wraps it.
    let titled = browser
        .eval_with(
            "return [...document.querySelectorAll('#spec-rows th a')].some(a => a.title.endsWith(arguments[0]))",
            vec![json!(long(3))],
        )
        .await;
    assert_eq!(titled, true);

    // Facets count what there is: 1 failed, 12 ConfigMaps, 2 Deployments.
    let facets = browser.text("#facets").await;
    for needle in [
        "failed (1)",
        "ConfigMap (12)",
        "Deployment (2)",
        "ready (13)",
        "synced (14)",
    ] {
        assert!(facets.contains(needle), "{needle} not in facets: {facets}");
    }
    // The summary's counts are links to the list they count.
    let failed_link = browser
        .eval("return [...document.querySelectorAll('#summary a')].map(a => [a.innerText, a.getAttribute('href')])")
        .await;
    assert!(
        failed_link
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l[0] == "1 failed" && l[1] == "#/?q=status%3Afailed"),
        "{failed_link}"
    );

    // `/` focuses the search; `status:failed` leaves the failing spec alone, in the URL.
    browser.press("/").await;
    assert_eq!(
        browser.eval("return document.activeElement.id").await,
        "search"
    );
    browser.press("status:failed").await;
    browser.wait_for_spec_rows(1).await;
    assert_eq!(browser.spec_rows().await, vec![crashy.clone()]);
    assert_eq!(
        browser.eval("return location.hash").await,
        "#/?q=status%3Afailed"
    );
    // Other prefixes and words narrow the same way.
    for (query, expected) in [
        (format!("kind:deployment ns:{ns}"), 2),
        ("fine".to_string(), 1),
        (format!("file:{}", &long_file[..20]), 12),
        ("status:ready kind:ConfigMap cm11".to_string(), 1),
        ("sync:synced".to_string(), 14),
        ("sync:conflict".to_string(), 0),
    ] {
        browser
            .eval_with(
                "location.hash = '#/?' + new URLSearchParams({q: arguments[0]})",
                vec![json!(query)],
            )
            .await;
        browser
            .wait_for(
                &format!("{expected} rows for {query}"),
                "return document.querySelectorAll('#spec-rows tr[data-id]').length === arguments[0]",
                vec![json!(expected)],
            )
            .await;
    }
    // A deep link opens the list as it was left.
    browser
        .goto(&format!("http://{addr}/#/?q=status%3Afailed&sort=name"))
        .await;
    browser
        .wait_for(
            "the deep-linked list",
            "return document.querySelectorAll('#spec-rows tr[data-id]').length === 1 \
               && document.getElementById('search').value === 'status:failed' \
               && document.getElementById('sort').value === 'name'",
            vec![],
        )
        .await;

    // The keyboard: Esc leaves the search, `j` takes the first row, Enter opens it,
    // Esc goes back; `?` shows the keys.
    browser.goto(&format!("http://{addr}/#/")).await;
    browser.wait_for_spec_rows(14).await;
    browser.press(&char::from(Key::Escape).to_string()).await;
    assert_ne!(
        browser.eval("return document.activeElement.id").await,
        "search"
    );
    browser.press("j").await;
    assert_eq!(
        browser
            .eval("return document.activeElement.closest('tr').dataset.id")
            .await,
        crashy.as_str()
    );
    browser.press("jk").await;
    assert_eq!(
        browser
            .eval("return document.activeElement.closest('tr').dataset.id")
            .await,
        crashy.as_str()
    );
    browser.press(&char::from(Key::Enter).to_string()).await;
    browser
        .wait_for_text("#detail", &["CrashLoopBackOff", "Deployment.apps"])
        .await;
    browser.press(&char::from(Key::Escape).to_string()).await;
    browser
        .wait_for(
            "the list again",
            "return !document.getElementById('list').hidden",
            vec![],
        )
        .await;
    browser.press("?").await;
    assert_eq!(
        browser
            .eval("return document.getElementById('help-dialog').open")
            .await,
        true
    );
    browser.press(&char::from(Key::Escape).to_string()).await;

    // Why: the object view reads the Deployment's ReplicaSet, its Pod with its restarts
    // and how it last ended, and the events, from the cluster.
    let object = format!("Deployment.apps {ns}/crashy");
    let path = format!(
        "/api/v1/object?spec={}&object={}",
        urlencode(&crashy),
        urlencode(&object)
    );
    let (code, view) = get_json(addr, &path).await;
    assert_eq!(code, 200, "{view:#}");
    let owned = view["owned"].as_array().unwrap();
    let pod = owned
        .iter()
        .find(|o| o["object"].as_str().unwrap().starts_with("Pod crashy-"))
        .unwrap_or_else(|| panic!("no Pod in {view:#}"));
    assert_eq!(pod["restarts"], 5, "{pod:#}");
    assert_eq!(pod["state"], "main: CrashLoopBackOff", "{pod:#}");
    assert!(
        pod["last_state"]
            .as_str()
            .unwrap()
            .starts_with("last ended main: Error (exit 1)"),
        "{pod:#}"
    );
    assert!(
        owned.iter().any(|o| o["object"]
            .as_str()
            .unwrap()
            .starts_with("ReplicaSet crashy-")),
        "{view:#}"
    );
    let events = view["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["reason"] == "ScalingReplicaSet")
            && events.iter().any(|e| e["reason"] == "SuccessfulCreate"),
        "{view:#}"
    );
    assert!(
        view["live"].as_str().unwrap().contains("crashloop"),
        "{view:#}"
    );
    // Nothing to change: no diff, and the desired manifest is the spec's.
    assert!(
        view["diff"].is_null() && view["diff_error"].is_null(),
        "{view:#}"
    );
    assert!(
        view["desired"]
            .as_str()
            .unwrap()
            .contains("image: example.org/crashloop:1"),
        "{view:#}"
    );
    // Only an object the status lists for that spec is read.
    let other = format!(
        "/api/v1/object?spec={}&object={}",
        urlencode(&crashy),
        urlencode(&format!("Secret {ns}/anything"))
    );
    assert_eq!(get_json(addr, &other).await.0, 404);

    browser
        .goto(&format!("http://{addr}/#/spec/{crashy}"))
        .await;
    browser
        .click(&format!(
            "#detail a[href=\"#/object?{}\"]",
            url_params(&crashy, &object)
        ))
        .await;
    let shown = browser
        .wait_for_text(
            "#object",
            &[
                "Pod crashy-",
                "CrashLoopBackOff",
                "Restarts",
                "ScalingReplicaSet",
                "Error (exit 1)",
            ],
        )
        .await;
    let restarts = browser
        .eval("return [...document.querySelectorAll('#object td[data-label=Restarts]')].map(td => td.innerText)")
        .await;
    assert!(
        restarts.as_array().unwrap().iter().any(|r| r == "5"),
        "{restarts} in {shown}"
    );
    browser
        .assert_no_sideways_scroll("the object view at 1600x1000")
        .await;
    browser.shot("object-wide.png").await;

    // Drift left in place (report mode) shows as the object's diff.
    let drifted_name = long(0);
    support::kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        &drifted_name,
        "--type=merge",
        "-p",
        "{\"data\":{\"greeting\":\"changed-by-hand\"}}",
    ]);
    let drifted_spec = format!("manifest/{ns}/ConfigMap/{drifted_name}");
    daemon
        .wait_status("the drift reported", |s| {
            support::spec_or_null(s, &drifted_spec)["drifted"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        })
        .await;
    let cm = format!("ConfigMap {ns}/{drifted_name}");
    support::eventually("the drift in the ledger", support::WAIT, || async {
        let (_, ledger) = get_json(addr, "/api/v1/drift").await;
        let found = ledger["drifts"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["object"] == cm.as_str()));
        if found {
            Ok(())
        } else {
            Err(ledger.to_string())
        }
    })
    .await;
    browser
        .goto(&format!(
            "http://{addr}/#/object?{}",
            url_params(&drifted_spec, &cm)
        ))
        .await;
    browser
        .wait_for_text(
            "#object",
            &[
                "greeting: changed-by-hand",
                "greeting: hello",
                "Drift history",
                "/data/greeting: \"hello\" → \"changed-by-hand\"",
                "kubectl-patch",
                "not yet",
            ],
        )
        .await;
    let lines = browser
        .eval("return [...document.querySelectorAll('#object pre.diff span')].map(s => s.className + ' ' + s.innerText.trim())")
        .await;
    let lines: Vec<String> = serde_json::from_value(lines).unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l == "del -  greeting: changed-by-hand")
            && lines.iter().any(|l| l == "add +  greeting: hello"),
        "{lines:?}"
    );

    // A control asked for without a token: refused, and kept in the history.
    let (code, _) = support::http(addr, "POST", "/api/v1/sync", &[], b"").await;
    assert_eq!(code, 403);
    support::eventually("the control in the history", support::WAIT, || async {
        let (_, kept) = get_json(addr, "/api/v1/controls").await;
        match kept["controls"].as_array() {
            Some(c) if c.iter().any(|c| c["what"] == "POST /api/v1/sync") => Ok(()),
            _ => Err(kept.to_string()),
        }
    })
    .await;

    // The history view: every drift recorded, the syncs and the controls.
    browser.goto(&format!("http://{addr}/#/history")).await;
    let history = browser
        .wait_for_text(
            "#history",
            &[
                "1 drift recorded",
                &cm,
                "kubectl-patch",
                "/data/greeting",
                "Syncs",
                &format!("Deployment.apps {ns}/crashy: created"),
                "1 control asked for",
                "anonymous",
                "POST /api/v1/sync",
                "403: controls are disabled",
            ],
        )
        .await;
    assert!(history.contains("success"), "{history}");
    browser
        .click(&format!(
            "#history a[href=\"#/object?{}\"]",
            url_params(&drifted_spec, &cm)
        ))
        .await;
    browser.wait_for_text("#object", &["Drift history"]).await;

    // A phone: nothing scrolls sideways, in the list and in the views.
    browser.client.set_window_size(400, 900).await.unwrap();
    browser.goto(&format!("http://{addr}/#/")).await;
    browser
        .wait_for(
            "14 rows at 400 px",
            "return innerWidth <= 400 && document.querySelectorAll('#spec-rows tr[data-id]').length === 14",
            vec![],
        )
        .await;
    browser
        .assert_no_sideways_scroll("the list at 400x900")
        .await;
    browser.shot("find-narrow.png").await;
    browser
        .goto(&format!("http://{addr}/#/spec/{drifted_spec}"))
        .await;
    browser.wait_for_text("#detail", &["Drifted objects"]).await;
    browser
        .assert_no_sideways_scroll("a long-named spec at 400x900")
        .await;
    browser
        .goto(&format!(
            "http://{addr}/#/object?{}",
            url_params(&crashy, &object)
        ))
        .await;
    browser.wait_for_text("#object", &["Pod crashy-"]).await;
    browser
        .assert_no_sideways_scroll("the object view at 400x900")
        .await;
    browser.goto(&format!("http://{addr}/#/history")).await;
    browser.wait_for_text("#history", &["Syncs"]).await;
    browser
        .assert_no_sideways_scroll("the history at 400x900")
        .await;
    browser.shot("history-narrow.png").await;
    browser.shot("object-narrow.png").await;

    // Dark mode follows the system: the style sheet redefines the colours for it.
    let dark = browser
        .eval(
            "return [...document.styleSheets].flatMap(s => [...s.cssRules])\
               .filter(r => r.media && r.media.mediaText.includes('prefers-color-scheme: dark'))\
               .some(r => [...r.cssRules].some(c => c.style && c.style.getPropertyValue('--bg') && c.style.getPropertyValue('--text')))",
        )
        .await;
    assert_eq!(dark, true);
    browser.close().await;
}

/// 10,000 specs in the real page, drawn by its own code from a status document: all
/// 10,000 rows, the failing spec first; then one spec's delta at a time moves exactly
/// that spec's row (a new row for its new entry, in its new place) and leaves every
/// other row the very element it was. The document is made in the page (a daemon with
/// 10,000 specs is more than the shared test cluster should carry). How long the drawing
/// takes is the benchmark's to say (`scripts/bench --ui`), not this test's: a shared CI
/// machine's clock would judge the machine. `serial_`: 10,000 rows in Chromium are load
/// the other tests should not share.
#[tokio::test]
async fn serial_ten_thousand_specs_draw_and_one_specs_delta_redraws_one_row() {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-scale").await;
    let specs = tempfile::tempdir().unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &specs.path().display().to_string(),
            "--resync",
            "1h",
        ])
        .start();
    daemon
        .wait_status("started", |s| s["last_sync"].is_object())
        .await;
    let browser = Browser::start().await;
    browser.client.set_window_size(1600, 1000).await.unwrap();
    browser.goto(&format!("http://{}/", daemon.metrics)).await;
    browser.wait_for_text("#connection", &["Live"]).await;
    // Each row drawn is marked; a delta's redraw is what it removed and added, as a
    // MutationObserver on the list saw it, and which rows lost the mark.
    let figures = browser
        .eval(
            "const specs = [];\
             for (let i = 0; i < 10000; i++) {\
               const failed = i === 7345;\
               specs.push({id: `manifest/ns-${i % 50}/Deployment.apps/app-${i}`, kind: 'manifest',\
                 namespace: `ns-${i % 50}`, name: `Deployment.apps/app-${i}`, file: `bundle-${i % 300}.yaml`, line: 1,\
                 ready: !failed, status: failed ? 'Failed' : 'Current', reason: failed ? 'CrashLoopBackOff' : null,\
                 message: failed ? 'CrashLoopBackOff: Pod app-7345-x' : 'ready', figures: {kind: 'manifest'},\
                 objects: [{object: `Deployment.apps ns-${i % 50}/app-${i}`, status: failed ? 'InProgress' : 'Current',\
                   reason: null, message: '', action: 'unchanged'}], suspended: null, drifted: [], revision: 'r1'});\
             }\
             model = Object.assign({}, model, {specs}); render();\
             const body = document.getElementById('spec-rows');\
             const ids = () => [...body.querySelectorAll('tr[data-id]')].map(r => r.dataset.id);\
             const first = ids();\
             const observer = new MutationObserver(() => {});\
             observer.observe(body, {childList: true});\
             const deltas = [];\
             for (let k = 0; k < 3; k++) {\
               for (const row of body.children) row.drawnBefore = true;\
               const changed = Object.assign({}, specs[42 + k], {ready: false, status: 'InProgress'});\
               applyDelta(model, {specs: [changed]}); render();\
               const records = observer.takeRecords();\
               const rows = [...body.querySelectorAll('tr[data-id]')];\
               deltas.push({changed: changed.id,\
                 removed: records.flatMap(r => [...r.removedNodes]).map(n => n.dataset.id),\
                 added: records.flatMap(r => [...r.addedNodes]).map(n => n.dataset.id),\
                 redrawn: rows.filter(r => !r.drawnBefore).map(r => r.dataset.id),\
                 rows: rows.length, top: rows.slice(0, k + 2).map(r => r.dataset.id)});\
             }\
             observer.disconnect();\
             return {rows: first.length, firstRow: first[0], deltas};",
        )
        .await;
    assert_eq!(figures["rows"], 10000, "{figures}");
    assert_eq!(
        figures["firstRow"], "manifest/ns-45/Deployment.apps/app-7345",
        "{figures}"
    );
    let failed = "manifest/ns-45/Deployment.apps/app-7345";
    let deltas = figures["deltas"].as_array().unwrap();
    assert_eq!(deltas.len(), 3, "{figures}");
    let mut moved = vec![json!(failed)];
    for delta in deltas {
        let changed = &delta["changed"];
        // Its old row out, its new row in; nothing else taken out or put in.
        assert_eq!(delta["removed"], json!([changed]), "{delta}");
        assert_eq!(delta["added"], json!([changed]), "{delta}");
        assert_eq!(delta["redrawn"], json!([changed]), "{delta}");
        assert_eq!(delta["rows"], 10000, "{delta}");
        // Now in progress: right after the failed spec and the ones moved before it.
        moved.push(changed.clone());
        assert_eq!(delta["top"], json!(moved), "{delta}");
    }
    browser.close().await;
}
