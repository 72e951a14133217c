//! The web UI with a real tree, as a new user meets it: the newer version of every
//! bundle of `../shared/realworld-2026` (fourteen projects, hundreds of objects: CRDs, RBAC named
//! `system:…`, webhooks, operators, objects in `kube-system`) plus one crash-looping
//! Deployment, under a real `driftless run` on the local cluster, in a real headless
//! Chromium at 1600×1000 and 400×900. The failing spec is the first row by default and
//! the only one `status:failed` leaves; its object view shows the Pod with its restarts
//! and the events; nothing scrolls sideways, in the list or in the object view.
//!
//! `serial_`: the bundles' cluster-wide objects (CRDs, webhooks, ClusterRoles) are the
//! same ones `tests/realworld.rs` installs, so `scripts/test` runs it alone; it removes
//! everything it made before it ends.

use crate::support;

use std::path::Path;

use support::{Browser, Daemon, url_params};

/// Every bundle's newer version under `root/<project>`; whether one writes `kube-system`.
fn put_bundles(root: &Path) -> bool {
    let mut kube_system = false;
    for project in support::realworld_projects() {
        let (_, new) = support::realworld_versions(&project);
        kube_system |= support::reads_kube_system(&new);
        support::copy_tree(&new, &root.join(&project), &[]);
    }
    kube_system
}

#[tokio::test]
async fn serial_with_the_real_bundles_the_crash_looping_deployment_is_the_first_row_and_its_view_shows_why()
 {
    let client = support::client().await;
    let ns = support::namespace(&client, "ui-rw").await;
    let specs = tempfile::tempdir().unwrap();
    assert!(
        put_bundles(specs.path()),
        "some bundle installs into kube-system"
    );
    let objects = support::rendered_objects(specs.path(), true);
    assert!(objects.len() >= 200, "{} objects", objects.len());
    std::fs::write(
        specs.path().join("crashy.yaml"),
        support::one_pod_deployment(&ns, "crashy", "example.org/crashloop:1"),
    )
    .unwrap();
    let total = objects.len() + 1;

    let uninstall = Uninstall(ns.clone());
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &specs.path().display().to_string(),
            "--resync",
            "1h",
            "--allow-namespace",
            "kube-system",
        ])
        .start();
    let crashy = format!("manifest/{ns}/Deployment.apps/crashy");
    let status = daemon
        .wait_status("every spec applied, crashy failed", |s| {
            s["specs"].as_array().map_or(0, Vec::len) == total
                && s["last_sync"]["result"] == "success"
                && support::spec_or_null(s, &crashy)["status"] == "Failed"
        })
        .await;
    // Only crashy fails: the bundles themselves are fine on this cluster.
    let failed: Vec<&str> = status["specs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "Failed")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(failed, vec![crashy.as_str()]);
    // Its reason is its object's: the Deployment says CrashLoopBackOff, not "LessAvailable".
    let spec = support::spec(&status, &crashy);
    assert_eq!(spec["reason"], "CrashLoopBackOff", "{spec:#}");
    assert_eq!(spec["objects"][0]["status"], "Failed", "{spec:#}");
    assert_eq!(spec["objects"][0]["reason"], "CrashLoopBackOff", "{spec:#}");

    let browser = Browser::start().await;
    let addr = daemon.metrics;
    let object = format!("Deployment.apps {ns}/crashy");
    let object_view = format!("http://{addr}/#/object?{}", url_params(&crashy, &object));
    for (width, height) in [(1600, 1000), (400, 900)] {
        let size = format!("{width}x{height}");
        browser.client.set_window_size(width, height).await.unwrap();
        browser.goto(&format!("http://{addr}/")).await;
        browser.wait_for_spec_rows(total).await;
        // Trouble first, by default: the failing spec is the first row, its name on the
        // first screen at 1600×1000 (a tree's dozens of files and namespaces are behind
        // "more").
        assert_eq!(browser.spec_rows().await[0], crashy, "at {size}");
        if width == 1600 {
            let place = browser
                .eval(
                    "return [document.querySelector('#spec-rows tr[data-id] th a').getBoundingClientRect().bottom, \
                     window.innerHeight]",
                )
                .await;
            browser.shot("realworld-first-screen.png").await;
            assert!(
                place[0].as_f64().unwrap() <= place[1].as_f64().unwrap(),
                "the first row is below the first screen: {place}"
            );
        }
        browser
            .assert_no_sideways_scroll(&format!("the list at {size}"))
            .await;
        browser.shot(&format!("realworld-list-{size}.png")).await;
        if width == 1600 {
            // The sources facet shows its commonest few; "more" shows every file.
            let sources =
                "return document.querySelectorAll('#facets [aria-label=Source] .chip').length";
            let few = browser.eval(sources).await.as_u64().unwrap();
            assert!(few <= 6, "{few} sources shown before 'more'");
            browser
                .click("#facets [aria-label=Source] button.more")
                .await;
            let all = browser.eval(sources).await.as_u64().unwrap();
            assert!(all > 20, "{all} sources after 'more'");
            browser
                .click("#facets [aria-label=Source] button.more")
                .await;
        }

        // `status:failed` leaves it alone.
        browser
            .goto(&format!("http://{addr}/#/?q=status%3Afailed"))
            .await;
        browser.wait_for_spec_rows(1).await;
        assert_eq!(browser.spec_rows().await, vec![crashy.clone()], "at {size}");

        // Why: its object view shows the Pod, its restarts, how it ended, the events.
        browser.goto(&object_view).await;
        let shown = browser
            .wait_for_text(
                "#object",
                &[
                    "Pod crashy-",
                    "CrashLoopBackOff",
                    "Restarts",
                    "Error (exit 1)",
                    "ScalingReplicaSet",
                ],
            )
            .await;
        let restarts = browser
            .eval(
                "return [...document.querySelectorAll('#object td[data-label=Restarts]')]\
                 .map(td => Number(td.innerText)).filter(n => n > 0).length",
            )
            .await;
        assert_eq!(restarts, 1, "no Pod with restarts at {size}: {shown}");
        browser
            .assert_no_sideways_scroll(&format!("the object view at {size}"))
            .await;
        browser.shot(&format!("realworld-object-{size}.png")).await;
    }
    browser.close().await;

    // Dark mode follows the system, and both schemes are legible as rendered: every
    // text on its background at WCAG's 4.5:1 at least, in the list and the object view.
    for (scheme, browser) in [
        ("light", Browser::start().await),
        ("dark", Browser::start_dark().await),
    ] {
        browser.client.set_window_size(1600, 1000).await.unwrap();
        for (view, url) in [
            ("list", format!("http://{addr}/")),
            ("object view", object_view.clone()),
        ] {
            browser.goto(&url).await;
            browser
                .wait_for_text("body", &["crashy", "CrashLoopBackOff"])
                .await;
            let background = browser
                .eval("return getComputedStyle(document.body).backgroundColor")
                .await;
            let dark = background == "rgb(17, 21, 29)";
            assert_eq!(dark, scheme == "dark", "{scheme} {view}: body {background}");
            let low = browser.low_contrast().await;
            assert!(
                low.is_empty(),
                "{scheme} {view}: low contrast:\n{}",
                low.join("\n")
            );
            browser
                .shot(&format!(
                    "realworld-{scheme}-{}.png",
                    view.replace(' ', "-")
                ))
                .await;
        }
        browser.close().await;
    }

    // Everything it made goes.
    daemon.stop();
    let gone = support::resources(&client, &objects).await;
    support::assert_exit(&uninstall.run(), 0);
    support::all_gone(&client, &gone).await;
}

/// The instance's objects removed however the test ends (a failed assertion too): the
/// serial tests after it install the same cluster-wide objects.
struct Uninstall(String);

impl Uninstall {
    /// An empty tree, applied with mass pruning allowed.
    fn run(&self) -> std::process::Output {
        let empty = tempfile::tempdir().unwrap();
        support::driftless_on_cluster(
            &self.0,
            &[
                "apply",
                &empty.path().display().to_string(),
                "--allow-mass-prune",
                "--allow-namespace",
                "kube-system",
            ],
        )
    }
}

impl Drop for Uninstall {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.run();
        }
    }
}
