//! A real Prometheus server (Debian's `prometheus`) on a free loopback port, scraping one
//! target, with its data in a temporary directory; killed when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::{await_ready, free_port, status_and_body};

pub struct Prometheus {
    child: Option<Child>,
    /// Its web listener: the HTTP API.
    pub addr: SocketAddr,
    dir: TempDir,
}

impl Prometheus {
    /// Scrapes `http://<target>/metrics` every second as job `driftless`. Nothing remote:
    /// no remote write or read, no Alertmanager, no rules.
    pub fn scraping(target: SocketAddr) -> Prometheus {
        if let Err(e) = Command::new("prometheus")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            panic!(
                "cannot run `prometheus` ({e}): install Debian's prometheus package with \
                 testbed/install.sh"
            );
        }
        let dir = TempDir::new().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: driftless\n    metrics_path: /metrics\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // A free port can be taken before Prometheus binds it: then another.
        for _ in 0..5 {
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            if let Some(child) = launch(dir.path(), &config, addr) {
                return Prometheus {
                    child: Some(child),
                    addr,
                    dir,
                };
            }
        }
        panic!(
            "prometheus did not start; its log:\n{}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
    }

    /// The result of an instant query (`/api/v1/query`): the vector's samples, each
    /// `{"metric": {labels}, "value": [time, "value"]}`.
    pub fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let (code, body) = get(
            self.addr,
            &format!("/api/v1/query?query={}", encode(promql)),
        )
        .map_err(|e| format!("querying {promql}: {e}"))?;
        let reply: Value = serde_json::from_str(&body)
            .map_err(|e| format!("{promql}: HTTP {code}, not JSON ({e}): {body}"))?;
        if reply["status"] != "success" {
            return Err(format!("{promql}: HTTP {code}: {reply}"));
        }
        reply["data"]["result"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("{promql}: no result vector in {reply}"))
    }

    /// What Prometheus logged (its scrape errors among it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Prometheus on `addr`, once `/-/ready` says so; `None` when it exits first (the port
/// was taken) or is not ready within 60 s.
fn launch(dir: &Path, config: &Path, addr: SocketAddr) -> Option<Child> {
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    await_ready(child, Duration::from_secs(60), || {
        get(addr, "/-/ready").is_ok_and(|(code, _)| code == 200)
    })
}

/// A GET over HTTP/1.0, so the reply is never chunked: status code and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    Ok(status_and_body(&raw))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
