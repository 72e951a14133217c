//! `GET /api/v1/events?deltas=1` against the real daemon on the local cluster: the whole
//! status document once, then only what changed. A quiet tree sends nothing but
//! keep-alives, and a change to one spec's object sends that spec alone (the bytes are
//! measured beside the whole-document stream's). The status document and the event
//! stream, asked for with `Accept-Encoding: gzip` as browsers do, come compressed.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use support::{Daemon, EventStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SPECS: usize = 40;

/// GET `path` with `Accept-Encoding: gzip`: (headers, body as sent).
async fn get_gzip(addr: SocketAddr, path: &str) -> (String, Vec<u8>) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tcp.read_to_end(&mut all).await.unwrap();
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&all[..split]).to_lowercase();
    (head, all[split + 4..].to_vec())
}

fn configmaps(ns: &str) -> String {
    (0..SPECS)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}, namespace: {ns}}}\ndata: {{greeting: hello}}\n"
            )
        })
        .collect()
}

#[tokio::test]
async fn a_quiet_tree_sends_almost_nothing_and_a_change_sends_its_spec_alone() {
    let client = support::client().await;
    let ns = support::namespace(&client, "sse-delta").await;
    let specs = tempfile::tempdir().unwrap();
    let file = specs.path().join("cms.yaml");
    std::fs::write(&file, configmaps(&ns)).unwrap();
    let daemon = Daemon::builder(&ns)
        .args(&[
            "--dir",
            &specs.path().display().to_string(),
            "--resync",
            "1h",
        ])
        .start();
    let addr = daemon.metrics;
    daemon
        .wait_status("every spec ready", |s| {
            support::all_ready(s) && s["specs"].as_array().is_some_and(|a| a.len() == SPECS)
        })
        .await;

    // Compressed when asked: the same document, a fraction of the bytes.
    let (_, plain) = support::http(addr, "GET", "/api/v1/status", &[], b"").await;
    let (head, zipped) = get_gzip(addr, "/api/v1/status").await;
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let mut unzipped = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&zipped[..]),
        &mut unzipped,
    )
    .unwrap();
    let (a, b): (Value, Value) = (
        serde_json::from_str(&plain).unwrap(),
        serde_json::from_str(&unzipped).unwrap(),
    );
    assert_eq!(a["specs"], b["specs"]);
    println!(
        "GET /api/v1/status: {} B, {} B gzip",
        plain.len(),
        zipped.len()
    );
    assert!(
        zipped.len() * 4 < plain.len(),
        "{} B gzip of {} B",
        zipped.len(),
        plain.len()
    );

    let mut deltas = EventStream::open(addr, "/api/v1/events?deltas=1").await;
    let mut whole = EventStream::open(addr, "/api/v1/events").await;
    // As a browser asks for it: compressed, each event decodable as it comes.
    let mut zipped = EventStream::open_gzip(addr, "/api/v1/events?deltas=1").await;
    let (name, first) = deltas.next().await;
    assert_eq!(name, "status");
    assert_eq!(first["specs"].as_array().unwrap().len(), SPECS);
    whole.next().await;
    let document = first.to_string().len();
    let (name, first_zipped) = zipped.next().await;
    assert_eq!(name, "status");
    assert_eq!(first_zipped["specs"], first["specs"]);
    let (plain_bytes, zipped_bytes) = (deltas.bytes, zipped.bytes);
    println!("the stream's first document: {plain_bytes} B, {zipped_bytes} B gzip");
    assert!(
        zipped_bytes * 4 < plain_bytes,
        "{zipped_bytes} B gzip of {plain_bytes} B"
    );

    // Quiet: nothing but keep-alive comments, on either stream.
    let span = Duration::from_secs(20);
    let (quiet, quiet_whole, quiet_zipped) = tokio::join!(
        deltas.bytes_during(span),
        whole.bytes_during(span),
        zipped.bytes_during(span)
    );
    println!(
        "status document {document} B; a quiet {}s: {quiet} B with deltas ({quiet_zipped} B gzip), {quiet_whole} B whole",
        span.as_secs()
    );
    assert!(quiet < 1_000, "{quiet} B in a quiet {span:?} with deltas");
    assert!(
        quiet_zipped < 1_000,
        "{quiet_zipped} B in a quiet {span:?} with deltas, gzip"
    );

    // Someone changes one spec's object (drift, taken back): that spec's entry alone.
    // (A new revision touches every spec: each entry says the revision it reflects.)
    support::kubectl(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "cm-7",
        "--type=merge",
        "-p",
        "{\"data\":{\"greeting\":\"by-hand\"}}",
    ]);
    let changed = format!("manifest/{ns}/ConfigMap/cm-7");
    let span = Duration::from_secs(6);
    let (changed_bytes, changed_whole, changed_zipped) = tokio::join!(
        deltas.bytes_during(span),
        whole.bytes_during(span),
        zipped.bytes_during(span)
    );
    println!(
        "one object's drift taken back: {changed_bytes} B with deltas ({changed_zipped} B gzip), {changed_whole} B whole"
    );
    assert!(
        changed_zipped < changed_bytes,
        "deltas {changed_bytes} B, {changed_zipped} B gzip"
    );
    assert!(
        changed_whole >= document && changed_bytes * 5 < changed_whole,
        "deltas {changed_bytes} B, whole {changed_whole} B (document {document} B)"
    );
    let delta = loop {
        let (name, data) = deltas.next().await;
        assert_eq!(name, "delta", "{data}");
        let ids: Vec<&str> = data["specs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["id"].as_str())
            .collect();
        if !ids.is_empty() {
            break data;
        }
    };
    let ids: Vec<&str> = delta["specs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![changed.as_str()], "{delta}");
    // The compressed stream said the same.
    let same = loop {
        let (name, data) = zipped.next().await;
        assert_eq!(name, "delta", "{data}");
        if data.get("specs").is_some() {
            break data;
        }
    };
    assert_eq!(same["specs"], delta["specs"]);
    assert!(
        delta.get("removed").is_none() && delta.get("order").is_none(),
        "{delta}"
    );
}
