//! Helm's `lookup` against the live cluster, read-only and with driftless's own rights.
//! A chart that calls `lookup` is rendered by helm pointed at a listener of ours on
//! loopback (a kubeconfig of its own, whose server's path holds a secret only those runs
//! are given: client-go sends no credentials to a server without TLS), which
//! forwards GET requests with driftless's client and refuses every other verb: helm
//! learns what driftless may read and can change nothing, whatever the chart does, and
//! the daemon's credentials (a token, a client certificate, an exec plugin) are never
//! handed to a tool.

use std::io::Read as _;
use std::path::PathBuf;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::Client;

/// The listener, for as long as it is kept: dropping it stops it.
pub struct Lookup {
    /// A kubeconfig naming the listener, for helm's `--kubeconfig`.
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Lookup {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Forward {
    client: Client,
    /// `/SECRET`: every request's path begins with it.
    prefix: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("a listener for charts' lookups: {0}")]
    Io(#[from] std::io::Error),
}

/// Starts the listener on loopback, forwarding with `client`.
pub async fn start(client: Client) -> Result<Lookup, LookupError> {
    let token = random_token()?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .tempdir()?;
    sweep_stale(dir.path());
    let kubeconfig = dir.path().join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: driftless\n  cluster:\n    server: http://{addr}/{token}\nusers:\n- name: driftless\n  user: {{}}\ncontexts:\n- name: driftless\n  context:\n    cluster: driftless\n    user: driftless\ncurrent-context: driftless\n"
    );
    write_private(&kubeconfig, text.as_bytes())?;
    let app = axum::Router::new().fallback(forward).with_state(Forward {
        client,
        prefix: format!("/{token}"),
    });
    let task = tokio::spawn(async move {
        // Stops with the task (the listener is dropped); an error ends lookups only.
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the listener for charts' lookups stopped");
        }
    });
    Ok(Lookup {
        kubeconfig,
        _dir: dir,
        task,
    })
}

/// A listener's directory is named `driftless-lookup-PID-...` after its process.
const PREFIX: &str = "driftless-lookup-";

/// Removes what listeners of processes that are gone left beside `ours` (a daemon killed
/// outright, OOM-killed in its container, never drops its listener): directories of the
/// same owner whose process no longer runs. One whose process runs, or that is not named
/// so, is left alone; a failure is no reason to stop.
fn sweep_stale(ours: &std::path::Path) {
    use std::os::unix::fs::MetadataExt as _;
    let (Some(tmp), Ok(mine)) = (ours.parent(), std::fs::metadata(ours)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
        let owned = entry
            .metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == mine.uid());
        if gone && owned {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A `Status` as the apiserver answers, so helm says it in its words.
fn refused(code: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

async fn forward(State(f): State<Forward>, request: Request) -> Response {
    let Some(path_and_query) = request.uri().path_and_query() else {
        return refused(StatusCode::NOT_FOUND, "not a render of driftless's");
    };
    let Some(target) = path_and_query
        .as_str()
        .strip_prefix(f.prefix.as_str())
        .filter(|t| t.starts_with('/'))
        .map(str::to_string)
    else {
        return refused(StatusCode::NOT_FOUND, "not a render of driftless's");
    };
    if request.method() != axum::http::Method::GET {
        return refused(
            StatusCode::METHOD_NOT_ALLOWED,
            "a chart's render may only read the cluster (driftless forwards GET requests only)",
        );
    }
    let mut out = http::Request::get(target);
    if let Some(accept) = request.headers().get(header::ACCEPT) {
        out = out.header(header::ACCEPT, accept);
    }
    let out = match out.body(kube::client::Body::empty()) {
        Ok(r) => r,
        Err(e) => return refused(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    match f.client.send(out).await {
        Ok(answer) => answer.map(Body::new),
        Err(e) => refused(
            StatusCode::BAD_GATEWAY,
            &format!(
                "driftless could not ask the cluster: {}",
                super::error_text(&e)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_gone_process_left_is_swept_and_a_running_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        // A process that has ended: its id names no running process (until reused).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let stale = tmp.path().join(format!("{PREFIX}{gone}-abc"));
        let running = tmp
            .path()
            .join(format!("{PREFIX}{}-def", std::process::id()));
        let unnamed = tmp.path().join(format!("{PREFIX}xyz"));
        for d in [&stale, &running, &unnamed] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("kubeconfig"), "x").unwrap();
        }
        let ours = tmp
            .path()
            .join(format!("{PREFIX}{}-ours", std::process::id()));
        std::fs::create_dir(&ours).unwrap();
        sweep_stale(&ours);
        assert!(!stale.exists(), "a gone process's directory is removed");
        assert!(running.exists() && unnamed.exists() && ours.exists());
    }
}
