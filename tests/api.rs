//! Seeing and steering a running daemon through its API, as programs and people do: the
//! real binary on the real local cluster, plain HTTP on loopback, the CLI's `reconcile`,
//! `suspend` and `resume`, and `kubectl scale` as someone else's change.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::Api;
use serde_json::Value;
use support::{Daemon, http};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);
const TOKEN: &str = "api-t0ken";

fn web(name: &str, total_qps: u32) -> String {
    format!(
        "[elasticweb.{name}]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = {total_qps}\n"
    )
}

/// A tree of two elasticweb specs, `shop` and `cart`, under `dir/specs`.
fn shop_and_cart(dir: &Path, ns: &str) -> std::path::PathBuf {
    let tree = dir.join("specs");
    std::fs::create_dir(&tree).unwrap();
    specs(
        &tree,
        ns,
        &format!("{}{}", web("shop", 100), web("cart", 200)),
    );
    tree
}

fn specs(dir: &Path, ns: &str, body: &str) {
    std::fs::write(
        dir.join("specs.toml"),
        format!("namespace = \"{ns}\"\n{body}"),
    )
    .unwrap();
}

fn token_file(dir: &Path) -> String {
    let path = dir.join("token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    path.to_string_lossy().into_owned()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (code, body) = http(addr, "GET", path, &[], b"").await;
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

async fn replicas(client: &Client, ns: &str, name: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|d| d.spec.replicas)
}

async fn wait_replicas(client: &Client, ns: &str, name: &str, want: i32) {
    support::eventually(&format!("{name} at {want} replicas"), WAIT, || async {
        match replicas(client, ns, name).await {
            Some(n) if n == want => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until an elasticweb's per-spec gauge reads `want` (gauges follow the readiness
/// refresh, up to a second after the status file).
async fn wait_gauge(addr: SocketAddr, family: &str, ns: &str, name: &str, want: f64) {
    let series = format!("{family}{{kind=\"elasticweb\",namespace=\"{ns}\",name=\"{name}\"}}");
    support::eventually(&format!("{series} = {want}"), WAIT, || async {
        let (_, metrics) = http(addr, "GET", "/metrics", &[], b"").await;
        match metric(&metrics, &series) {
            Some(v) if v == want => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Someone else's change: `kubectl scale`, through the scale subresource (which moves
/// no field ownership before Kubernetes 1.22).
fn kubectl_scale(ns: &str, name: &str, replicas: u32) {
    support::kubectl(&[
        "scale",
        &format!("deployment/{name}"),
        &format!("--replicas={replicas}"),
        "-n",
        ns,
    ]);
}

/// A daemon on the spec directory `dir/specs`, made with an elasticweb `shop` in it,
/// that takes mutating calls with the token (its file in `dir`) and resyncs every
/// `resync`; once shop is ready, with shop's id.
async fn steerable(ns: &str, dir: &Path, resync: &str) -> (Daemon, String) {
    let tree = dir.join("specs");
    std::fs::create_dir(&tree).unwrap();
    specs(&tree, ns, &web("shop", 100));
    let daemon = Daemon::builder(ns)
        .args(&[
            "--dir",
            &tree.to_string_lossy(),
            "--api-token-file",
            &token_file(dir),
            "--resync",
            resync,
        ])
        .wait(WAIT)
        .start();
    let shop = format!("elasticweb/{ns}/shop");
    daemon
        .wait_status("shop ready", |s| entry(s, &shop)["ready"] == true)
        .await;
    (daemon, shop)
}

/// The CLI against the daemon at `addr`.
fn cli(addr: SocketAddr, args: &[&str]) -> std::process::Output {
    cli_at(&format!("http://{addr}"), args)
}

/// `driftless ARGS --server SERVER` with the API token.
fn cli_at(server: &str, args: &[&str]) -> std::process::Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--server", server]);
    std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(&all)
        .env("DRIFTLESS_API_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// Opens `/api/v1/events` and reads events (`data:` lines as JSON) as they come.
struct Events {
    stream: tokio::net::TcpStream,
    buffered: String,
}

impl Events {
    async fn open(addr: SocketAddr) -> Events {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
        );
        stream.write_all(req.as_bytes()).await.unwrap();
        Events {
            stream,
            buffered: String::new(),
        }
    }

    /// The next status event's document.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(at) = self.buffered.find("\ndata: ") {
                let rest = &self.buffered[at + 7..];
                if let Some(end) = rest.find('\n') {
                    let data = rest[..end].to_string();
                    self.buffered = rest[end..].to_string();
                    return serde_json::from_str(&data).unwrap();
                }
            }
            let mut chunk = [0u8; 65536];
            let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
                .await
                .expect("an event within the wait")
                .unwrap();
            assert!(n > 0, "the event stream closed");
            self.buffered
                .push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    }

    /// Events until one satisfies `pred`.
    async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let doc = self.next().await;
            if pred(&doc) {
                return doc;
            }
        }
    }
}

fn entry<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["specs"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id))
        .unwrap_or(&Value::Null)
}

#[tokio::test]
async fn every_endpoint_answers_as_documented() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api").await;
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("specs");
    std::fs::create_dir(&tree).unwrap();
    // `stuck` never becomes ready: its image cannot be pulled.
    let stuck =
        "[elasticweb.stuck]\nimage = \"unpullable:1\"\nsingle-pod-qps = 100\ntotal-qps = 100\n";
    specs(&tree, &ns, &format!("{}{stuck}", web("shop", 100)));
    // RBAC names are path segments, as upstream bundles name them (`system:...`).
    std::fs::write(
        tree.join("rbac.yaml"),
        format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: system:api-reader\n  namespace: {ns}\nrules: []\n"),
    )
    .unwrap();
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &tree.to_string_lossy(),
            "--api-token-file",
            &token_file(dir.path()),
        ])
        .wait(WAIT)
        .start();
    let addr = daemon.metrics;
    let shop = format!("elasticweb/{ns}/shop");
    let role = format!("manifest/{ns}/Role.rbac.authorization.k8s.io/system:api-reader");
    for path in [role.clone(), role.replace(':', "%3A")] {
        let (code, e) = get_json(
            addr,
            &format!("/api/v1/specs/{path}?wait=ready&timeout=90s"),
        )
        .await;
        assert_eq!(code, 200, "{path}: {e}");
        assert_eq!(e["id"], role.as_str(), "{e}");
    }

    // One spec, long-polled until ready.
    let (code, e) = get_json(
        addr,
        &format!("/api/v1/specs/{shop}?wait=ready&timeout=90s"),
    )
    .await;
    assert_eq!(code, 200, "{e}");
    assert_eq!(
        (e["id"].as_str(), e["ready"].as_bool()),
        (Some(shop.as_str()), Some(true))
    );
    assert_eq!(e["figures"]["kind"], "elasticweb");
    assert!(e["suspended"].is_null(), "{e}");
    // A spec that does not get ready: 408 with its entry when the wait is over.
    let (code, e) = get_json(
        addr,
        &format!("/api/v1/specs/elasticweb/{ns}/stuck?wait=ready&timeout=2s"),
    )
    .await;
    assert_eq!(code, 408, "{e}");
    assert_eq!(e["ready"], false, "{e}");
    assert_eq!(
        get_json(addr, &format!("/api/v1/specs/elasticweb/{ns}/nope"))
            .await
            .0,
        404
    );
    assert_eq!(
        get_json(
            addr,
            &format!("/api/v1/specs/{shop}?wait=ready&timeout=10m")
        )
        .await
        .0,
        400
    );
    assert_eq!(
        get_json(addr, &format!("/api/v1/specs/{shop}?wait=later"))
            .await
            .0,
        400
    );

    // Every spec's entry at once; anything else under /api is a JSON 404.
    let (code, all) = get_json(addr, "/api/v1/specs").await;
    assert_eq!(code, 200, "{all}");
    assert!(
        all["specs"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["id"] == shop.as_str())),
        "{all}"
    );
    for path in ["/api/v1/nope", "/api/v2/status", "/api"] {
        let (code, body) = get_json(addr, path).await;
        assert_eq!(code, 404, "{path}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("no such API route")),
            "{path}: {body}"
        );
    }

    // The status document is the status file, but for when the file was written.
    support::eventually("the API and the status file agree", WAIT, || async {
        let (code, api) = get_json(addr, "/api/v1/status").await;
        let mut file = daemon.status();
        if let Some(Value::Object(f)) = &mut file {
            assert!(f.remove("written").is_some_and(|w| w.is_string()));
        }
        if code == 200 && Some(&api) == file.as_ref() {
            Ok(())
        } else {
            Err(format!("{api}\n---\n{file:?}"))
        }
    })
    .await;

    // Controls need the token.
    for (headers, want) in [
        (vec![], 401),
        (vec![("Authorization", bearer("wrong"))], 401),
        (vec![("Authorization", bearer(TOKEN))], 202),
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, body) = http(addr, "POST", "/api/v1/sync", &headers, b"").await;
        assert_eq!(code, want, "{body}");
    }
    let auth = bearer(TOKEN);
    let (code, body) = http(
        addr,
        "POST",
        &format!("/api/v1/specs/{shop}/suspend"),
        &[("Authorization", &auth)],
        b"{}",
    )
    .await;
    assert_eq!(code, 400, "a suspension needs a reason: {body}");
    let (code, _) = http(
        addr,
        "POST",
        &format!("/api/v1/specs/elasticweb/{ns}/nope/suspend"),
        &[("Authorization", &auth)],
        br#"{"reason": "x"}"#,
    )
    .await;
    assert_eq!(code, 404);

    // A client that connects to the event stream and never reads holds nothing back,
    // while one that reads sees each change, without polling.
    let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(format!("GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut events = Events::open(addr).await;
    let first = events.next().await;
    assert_eq!(first["version"], 1, "{first}");
    for qps in 2..=12 {
        specs(&tree, &ns, &format!("{}{stuck}", web("shop", qps * 100)));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let doc = events
        .until(|d| entry(d, &shop)["figures"]["desired_replicas"] == 12)
        .await;
    assert_eq!(doc["source"], first["source"]);
    wait_replicas(&client, &ns, "shop", 12).await;
    // `reconcile` waits for the whole sync it asked for and prints how it ended (`stuck`
    // is not ready, but everything applied: the sync succeeded).
    // `--server` as `--metrics-addr` is written, without a scheme.
    let out = cli_at(&addr.to_string(), &["reconcile"]);
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("sync success:"),
        "{}",
        support::show(&out)
    );
    drop(stalled);
    assert_eq!(daemon.stop(), Some(0));

    // Without --api-token-file the controls are refused, saying how to enable them.
    let mut plain = Daemon::builder(&ns)
        .args(&["--dir", &tree.to_string_lossy()])
        .wait(WAIT)
        .start();
    let (code, body) = http(
        plain.metrics,
        "POST",
        "/api/v1/sync",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("--api-token-file"), "{body}");
    assert_eq!(plain.stop(), Some(0));
}

#[tokio::test]
async fn a_suspension_holds_a_change_across_a_restart_until_resumed() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api-suspend").await;
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, shop) = steerable(&ns, dir.path(), "3s").await;

    let out = cli(
        daemon.metrics,
        &["suspend", &shop, "--reason", "incident 42"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    let status = daemon
        .wait_status("the suspension shown", |s| {
            entry(s, &shop)["suspended"]["reason"] == "incident 42"
        })
        .await;
    assert!(entry(&status, &shop)["suspended"]["since"].is_string());
    let (_, e) = get_json(daemon.metrics, &format!("/api/v1/specs/{shop}")).await;
    assert_eq!(e["suspended"]["reason"], "incident 42");
    let table = support::driftless(&[
        "status",
        "--status-file",
        &daemon.status_file().to_string_lossy(),
    ]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("suspended: incident 42"),
        "{}",
        support::show(&table)
    );
    wait_gauge(daemon.metrics, "driftless_spec_suspended", &ns, "shop", 1.0).await;

    // Restarted with nothing held back (its revision was applied before it was
    // suspended): ready, not "held back". The old status file goes first: only the new
    // daemon's word counts.
    daemon.stop();
    std::fs::remove_file(daemon.status_file()).unwrap();
    daemon.restart();
    let status = daemon
        .wait_status("suspended and ready after a restart", |s| {
            s["last_sync"]["result"] == "success"
                && entry(s, &shop)["suspended"]["reason"] == "incident 42"
                && entry(s, &shop)["ready"] == true
        })
        .await;
    let message = entry(&status, &shop)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!message.contains("held back"), "{status:#}");

    // A committed change does not reach the cluster, through resyncs and a restart.
    specs(&dir.path().join("specs"), &ns, &web("shop", 300));
    daemon
        .wait_status("the change read", |s| {
            entry(s, &shop)["file"].is_string() && s["revision_seen"] == s["revision_applied"]
        })
        .await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(replicas(&client, &ns, "shop").await, Some(1));
    let status_cmd = |file: &std::path::Path| {
        support::driftless(&["status", "--status-file", &file.to_string_lossy()])
    };
    let out = status_cmd(daemon.status_file());
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("  - suspended with a change held back: {shop}")),
        "{}",
        support::show(&out)
    );
    daemon.sigkill();
    // A daemon that died leaves a file nobody rewrites: stale after 30 s.
    let kept = dir.path().join("after-kill.json");
    std::fs::copy(daemon.status_file(), &kept).unwrap();
    daemon.restart();
    daemon
        .wait_status(
            "still suspended, the change held back, after the restart",
            |s| {
                s["last_sync"]["result"] == "success"
                    && entry(s, &shop)["suspended"]["reason"] == "incident 42"
                    && entry(s, &shop)["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("held back"))
                    && entry(s, &shop)["ready"] == false
            },
        )
        .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(replicas(&client, &ns, "shop").await, Some(1));

    // Resumed: the held change goes through.
    let out = cli(daemon.metrics, &["resume", &shop]);
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    wait_replicas(&client, &ns, "shop", 3).await;
    let status = daemon
        .wait_status("the suspension gone", |s| {
            entry(s, &shop)["suspended"].is_null()
        })
        .await;
    assert!(entry(&status, &shop)["suspended"].is_null());
    let converged = daemon
        .wait_status("converged", |s| {
            s["specs"]
                .as_array()
                .is_some_and(|a| a.iter().all(|s| s["ready"] == true))
        })
        .await;
    let out = status_cmd(daemon.status_file());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{converged}\n{}",
        support::show(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("\nconverged\n"));
    assert_eq!(daemon.stop(), Some(0));
    // The copy taken when the daemon was killed has aged past 30 s by now, or soon.
    let written: k8s_openapi::jiff::Timestamp =
        serde_json::from_str::<Value>(&std::fs::read_to_string(&kept).unwrap()).unwrap()["written"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    let age = k8s_openapi::jiff::Timestamp::now().duration_since(written);
    let left = Duration::from_secs(31).saturating_sub(Duration::try_from(age).unwrap_or_default());
    tokio::time::sleep(left).await;
    let out = status_cmd(&kept);
    assert_eq!(out.status.code(), Some(1), "{}", support::show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("  - stale: the file was written "),
        "{}",
        support::show(&out)
    );
}

#[tokio::test]
async fn reported_drift_stays_as_the_user_set_it_until_correct_mode() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api-drift").await;
    let dir = tempfile::tempdir().unwrap();
    specs(dir.path(), &ns, &web("shop", 100));
    let start = |mode: &str| {
        Daemon::builder(&ns)
            .args(&[
                "--dir",
                &dir.path().to_string_lossy(),
                "--drift",
                mode,
                "--resync",
                "2s",
            ])
            .wait(WAIT)
            .start()
    };
    let mut daemon = start("report");
    let shop = format!("elasticweb/{ns}/shop");
    let status = daemon
        .wait_status("shop ready", |s| entry(s, &shop)["ready"] == true)
        .await;
    assert_eq!(status["drift"], "report");

    kubectl_scale(&ns, "shop", 3);
    let deployment = format!("Deployment.apps {ns}/shop");
    daemon
        .wait_status("the drift shown", |s| {
            entry(s, &shop)["drifted"]
                .as_array()
                .is_some_and(|d| d.iter().any(|o| o == deployment.as_str()))
        })
        .await;
    let (_, e) = get_json(daemon.metrics, &format!("/api/v1/specs/{shop}")).await;
    assert_eq!(e["drifted"][0], deployment.as_str(), "{e}");
    wait_gauge(
        daemon.metrics,
        "driftless_drifted_objects",
        &ns,
        "shop",
        1.0,
    )
    .await;
    // Resyncs come and go; the count stays as the user set it.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(replicas(&client, &ns, "shop").await, Some(3));
    assert_eq!(daemon.stop(), Some(0));

    // Back in correct mode, the drift is taken back.
    let mut daemon = start("correct");
    wait_replicas(&client, &ns, "shop", 1).await;
    let status = daemon
        .wait_status("no drift left", |s| {
            entry(s, &shop)["drifted"]
                .as_array()
                .is_some_and(Vec::is_empty)
                && entry(s, &shop)["ready"] == true
        })
        .await;
    assert_eq!(status["drift"], "correct");
    assert_eq!(daemon.stop(), Some(0));
}

#[tokio::test]
async fn a_scale_held_by_a_suspension_is_taken_back_on_resume() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api-resume").await;
    let dir = tempfile::tempdir().unwrap();
    // No resync in the test's time: what corrects the drift is the resume alone.
    let (mut daemon, shop) = steerable(&ns, dir.path(), "1h").await;
    let out = cli(daemon.metrics, &["suspend", &shop, "--reason", "load test"]);
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    daemon
        .wait_status("the suspension shown", |s| {
            !entry(s, &shop)["suspended"].is_null()
        })
        .await;

    // Scaled while suspended: reported, left so, and settled (three replicas ready, so
    // no further watch event on it is to come).
    kubectl_scale(&ns, "shop", 3);
    let deployment = format!("Deployment.apps {ns}/shop");
    daemon
        .wait_status("the scale reported and settled", |s| {
            let e = entry(s, &shop);
            e["drifted"]
                .as_array()
                .is_some_and(|d| d.iter().any(|o| o == deployment.as_str()))
                && e["ready"] == true
        })
        .await;
    support::eventually("three replicas ready", WAIT, || async {
        let d = Api::<Deployment>::namespaced(client.clone(), &ns)
            .get("shop")
            .await
            .map_err(|e| e.to_string())?;
        let ready = d.status.and_then(|s| s.ready_replicas);
        (ready == Some(3)).then_some(()).ok_or(format!("{ready:?}"))
    })
    .await;
    assert_eq!(replicas(&client, &ns, "shop").await, Some(3));

    // Resumed: the whole sync that follows reads objects as metadata only, and sees no
    // field of ours moved; the replicas the watch saw are taken back all the same.
    let out = cli(daemon.metrics, &["resume", &shop]);
    assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
    wait_replicas(&client, &ns, "shop", 1).await;
    daemon
        .wait_status("no drift left", |s| {
            let e = entry(s, &shop);
            e["suspended"].is_null() && e["drifted"].as_array().is_some_and(Vec::is_empty)
        })
        .await;
    assert_eq!(daemon.stop(), Some(0));
}

/// The cloud-IDE backend's flow: write a workspace, at once long-poll it ready, hand out
/// its address. The answer is the new revision's Pod, never the old one's.
#[tokio::test]
async fn wait_ready_answers_for_the_revision_just_written() {
    use k8s_openapi::api::core::v1::Pod;
    let client = support::client().await;
    let ns = support::namespace(&client, "api-rev").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ide.toml");
    let workspace = |image: &str| {
        format!("namespace = \"{ns}\"\n[workspace.ide]\nimage = \"{image}\"\nstorage = \"1Gi\"\n")
    };
    std::fs::write(&file, workspace("codercom/code-server:4.0")).unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&["--dir", &dir.path().to_string_lossy(), "--resync", "1h"])
        .wait(WAIT)
        .start();
    let addr = daemon.metrics;
    let id = format!("workspace/{ns}/ide");
    let wait = format!("/api/v1/specs/{id}?wait=ready&timeout=90s");
    let (code, first) = get_json(addr, &wait).await;
    assert_eq!(code, 200, "{first}");
    let old_ip = first["figures"]["pod_ip"].clone();
    assert!(old_ip.is_string(), "{first}");
    let revision = first["revision"].as_str().unwrap().to_string();

    // A new image whose Pod is ready only 3 s after it starts; asked at once, no sleep.
    std::fs::write(&file, workspace("codercom/code-server:slowready-3")).unwrap();
    let asked = std::time::Instant::now();
    let (code, second) = get_json(addr, &wait).await;
    assert_eq!(code, 200, "{second}");
    // lower bound: the answer waited for the Pod's 3 s to readiness (no slow machine
    // makes it shorter).
    assert!(asked.elapsed() >= Duration::from_secs(2), "{second}");
    assert_ne!(
        second["revision"].as_str(),
        Some(revision.as_str()),
        "{second}"
    );
    assert_ne!(second["figures"]["pod_ip"], old_ip, "{second}");
    assert_eq!(second["ready"], true, "{second}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.pod_ip.as_ref())
                .map(String::as_str)
                == second["figures"]["pod_ip"].as_str()
        })
        .unwrap_or_else(|| panic!("no Pod with the address given: {second}"));
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("codercom/code-server:slowready-3")
    );
    // Naming a revision that is not (yet) there waits for it, and says so when time is up.
    let (code, _) = get_json(
        addr,
        &format!("/api/v1/specs/{id}?wait=ready&timeout=2s&revision=0123456789abcdef"),
    )
    .await;
    assert_eq!(code, 408);
}

/// A spec the tree suspends (`driftless.dev/suspend`, what Flux's `suspend: true` becomes)
/// is left as it is and shown suspended in the tree; `resume` refuses it, naming where it
/// is held; the tree lets it go, and it is applied.
#[tokio::test]
async fn a_spec_the_tree_suspends_is_resumed_by_the_tree_alone() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api-declared").await;
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("specs");
    std::fs::create_dir(&tree).unwrap();
    let map = |name: &str, annotations: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{annotations}data:\n  k: v\n"
        )
    };
    let suspended = "  annotations:\n    driftless.dev/suspend: \"incident 7\"\n";
    std::fs::write(tree.join("held.yaml"), map("held", suspended)).unwrap();
    std::fs::write(tree.join("free.yaml"), map("free", "")).unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &tree.to_string_lossy(),
            "--api-token-file",
            &token_file(dir.path()),
        ])
        .wait(WAIT)
        .start();
    let (held, free) = (
        format!("manifest/{ns}/ConfigMap/held"),
        format!("manifest/{ns}/ConfigMap/free"),
    );
    let status = daemon
        .wait_status("free applied and held suspended", |s| {
            entry(s, &free)["ready"] == true && entry(s, &held)["suspended"]["declared"] == true
        })
        .await;
    assert_eq!(entry(&status, &held)["suspended"]["reason"], "incident 7");
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(maps.get_opt("held").await.unwrap().is_none(), "not applied");

    let out = cli(daemon.metrics, &["resume", &held]);
    assert!(!out.status.success(), "{}", support::show(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("is suspended by the tree (incident 7): resume it there"),
        "{said}"
    );

    // The tree lets it go: applied, and shown so.
    std::fs::write(tree.join("held.yaml"), map("held", "")).unwrap();
    support::eventually("held applied", WAIT, || async {
        match maps.get_opt("held").await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    daemon
        .wait_status("held no longer suspended", |s| {
            entry(s, &held)["suspended"].is_null() && entry(s, &held)["ready"] == true
        })
        .await;
}

/// Once the watches have listed the Deployments and Services, a whole sync takes the
/// objects they hold for its own lists of those kinds: of ten `reconcile`s in a row,
/// nine ask the apiserver for no list of either and one lists both itself (a watch that
/// missed an event is put right within ten resyncs); none writes. `serial_`: it counts
/// the apiserver's own requests.
#[tokio::test]
async fn serial_a_resync_takes_what_the_watches_hold_and_lists_every_tenth_time() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api-known").await;
    let dir = tempfile::tempdir().unwrap();
    let tree = shop_and_cart(dir.path(), &ns);
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &tree.to_string_lossy(),
            "--api-token-file",
            &token_file(dir.path()),
            "--resync",
            "1h",
        ])
        .log_level("info,kube=warn,driftless::daemon::watch=debug")
        .wait(WAIT)
        .start();
    daemon
        .wait_status("both specs ready", |s| {
            s["specs"]
                .as_array()
                .is_some_and(|a| a.len() == 2 && a.iter().all(|e| e["ready"] == true))
        })
        .await;
    support::eventually("the watches' lists of both kinds in", WAIT, || async {
        let log = daemon.log();
        let listed = |kind: &str| {
            log.lines()
                .any(|l| l.contains("watch listed") && l.contains(&format!("kind={kind} ")))
        };
        match listed("Deployment") && listed("Service") {
            true => Ok(()),
            false => Err(log.clone()),
        }
    })
    .await;
    let resources = ["deployments", "services"];
    let writes = support::apiserver_writes_when_quiet(&client, &resources).await;
    // The apiserver counts every client's lists: the cluster's own controllers list
    // these kinds now and then too (once in a CI run, one list in the fourth of ten
    // reconciles, right after the non-serial lane). A second round of ten tells that
    // from a daemon that lists: one that does would list in both.
    let mut rounds = Vec::new();
    for _ in 0..2 {
        let mut lists = Vec::new();
        for _ in 0..10 {
            let before = support::apiserver_lists(&client, &resources).await;
            let out = cli(daemon.metrics, &["reconcile"]);
            assert_eq!(out.status.code(), Some(0), "{}", support::show(&out));
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(said.starts_with("sync success:"), "{}", support::show(&out));
            lists.push(support::apiserver_lists(&client, &resources).await - before);
        }
        let each_tenth = lists.iter().filter(|n| **n == 0).count() == 9 && lists.contains(&2);
        rounds.push(lists);
        if each_tenth {
            break;
        }
    }
    let lists = rounds.last().cloned().unwrap_or_default();
    assert_eq!(
        lists.iter().filter(|n| **n == 0).count(),
        9,
        "lists of Deployments and Services per reconcile, by round: {rounds:?}\n{}",
        daemon.log()
    );
    assert!(
        lists.contains(&2),
        "one whole sync lists both kinds itself: {rounds:?}"
    );
    assert_eq!(
        support::apiserver_writes(&client, &resources).await - writes,
        0,
        "{}",
        daemon.log()
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// A restarted daemon lists each kind it owns once: its watches are set from the kinds
/// its inventory records before the first sync, which waits for their lists and takes
/// what they hold instead of listing every kind itself beside them (at 10,000 specs the
/// two rounds were most of a restart). `serial_`: it counts the apiserver's requests.
#[tokio::test]
async fn serial_a_restarted_daemon_lists_each_kind_once() {
    let client = support::client().await;
    let ns = support::namespace(&client, "api-restart-lists").await;
    let dir = tempfile::tempdir().unwrap();
    let tree = shop_and_cart(dir.path(), &ns);
    let mut daemon = Daemon::builder(&ns)
        .args(&["--dir", &tree.to_string_lossy(), "--resync", "1h"])
        .log_level("info,kube=warn,driftless::daemon::watch=debug")
        .wait(WAIT)
        .start();
    let converged = |s: &serde_json::Value| {
        s["last_sync"]["result"] == "success"
            && s["specs"]
                .as_array()
                .is_some_and(|a| a.len() == 2 && a.iter().all(|e| e["ready"] == true))
    };
    daemon.wait_status("both specs ready", converged).await;
    // Deployments, Services and the Services' Endpoints: each listed by its watch.
    let resources = ["deployments", "services", "endpoints"];
    // The apiserver counts every client's lists, the cluster's controllers' too (now and
    // then): a second restart tells those from a daemon that lists twice.
    let mut rounds = Vec::new();
    for _ in 0..2 {
        daemon.sigkill();
        std::fs::remove_file(daemon.status_file()).unwrap();
        let before = support::apiserver_lists(&client, &resources).await;
        daemon.restart();
        daemon
            .wait_status("both specs ready after the restart", converged)
            .await;
        let lists = support::apiserver_lists(&client, &resources).await - before;
        rounds.push(lists);
        if lists == 3 {
            break;
        }
    }
    assert_eq!(
        rounds.last(),
        Some(&3),
        "lists of the three kinds per restart, by restart: {rounds:?}\n{}",
        daemon.log()
    );
    assert_eq!(daemon.stop(), Some(0));
}
