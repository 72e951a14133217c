//! Running an external rendering tool (kustomize, later helm): each run gets a temporary
//! home of its own, an environment with nothing of the daemon's in it but `PATH` and the
//! proxies (and Go's collector told to wait: [`go_runtime`]), a time
//! limit after which its whole process group is killed, a cap on what it prints, and a
//! place among at most N runs at once.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a tool may print on stdout: a rendered tree is megabytes at most; more is a
/// runaway (or a hostile generator), stopped before it fills the daemon's memory.
pub(crate) const MAX_OUTPUT: usize = 64 << 20;
/// What is kept of stderr: the first error line is all that is shown.
const MAX_STDERR: usize = 64 << 10;

/// How tools run.
#[derive(Debug, Clone)]
pub struct Limits {
    pub timeout: Duration,
    pub max_output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(90),
            max_output: MAX_OUTPUT,
        }
    }
}

/// Why a run gave no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {program}: {message}")]
    Start { program: String, message: String },
    #[error("{0}")]
    Failed(String),
    #[error("did not finish within {}; stopped", humantime::format_duration(*.0))]
    TimedOut(Duration),
    #[error("printed more than {} MiB; stopped", .0 >> 20)]
    TooMuchOutput(usize),
}

/// At most `n` runs at once, across every render of the process.
#[derive(Debug, Clone)]
pub struct Slots(Arc<(Mutex<usize>, Condvar)>, usize);

impl Slots {
    pub fn new(n: usize) -> Self {
        Slots(Arc::new((Mutex::new(0), Condvar::new())), n.max(1))
    }

    pub(super) fn take(&self) -> SlotGuard<'_> {
        let (lock, cv) = &*self.0;
        let mut busy = lock.lock().unwrap_or_else(|e| e.into_inner());
        while *busy >= self.1 {
            busy = cv.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy += 1;
        SlotGuard(self)
    }
}

pub(super) struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let (lock, cv) = &*(self.0).0;
        let mut busy = lock.lock().unwrap_or_else(|e| e.into_inner());
        *busy = busy.saturating_sub(1);
        cv.notify_one();
    }
}

/// The variables a tool keeps from ours: where programs are, and the proxies (a chart
/// repository behind one is reached as the registry client and git reach theirs).
/// Credentials, KUBECONFIG and the like stay with the daemon.
const KEPT_ENV: [&str; 9] = [
    "PATH",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// The Go runtime's settings a tool runs with. helm, kustomize and most plugins are Go
/// programs that live a fraction of a second, and at Go's default (a collection each time
/// the heap doubles from 4 MiB) a `helm template` of podinfo spends a quarter of its CPU
/// collecting what the process's exit frees anyway (80 ms a run against 58 ms, and the
/// same 48 MiB peak): a thousand releases are a thousand runs. They collect only near
/// [`GO_MEMORY_LIMIT`] instead, so a large render stays bounded as before. An operator who
/// sets either variable for the daemon has both passed on as set, ours then unused.
fn go_runtime(gogc: Option<OsString>, limit: Option<OsString>) -> Vec<(&'static str, OsString)> {
    match (gogc, limit) {
        (None, None) => vec![
            ("GOGC", "off".into()),
            ("GOMEMLIMIT", GO_MEMORY_LIMIT.into()),
        ],
        (gogc, limit) => [("GOGC", gogc), ("GOMEMLIMIT", limit)]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect(),
    }
}

/// Where a tool's Go runtime starts collecting (a soft limit: past it, it collects often,
/// and never fails for it).
const GO_MEMORY_LIMIT: &str = "128MiB";

/// Runs `program args…` in `cwd`; its stdout when it exits 0, else the first meaningful
/// line of what it said.
pub fn run(
    program: &Path,
    args: &[OsString],
    cwd: &Path,
    limits: &Limits,
    slots: &Slots,
) -> Result<Vec<u8>, RunError> {
    run_in(program, args, cwd, limits, slots, Session::default())
}

/// What a run shares with the runs before and after it: a home (where `helm registry
/// login` leaves what the next `helm pull` reads), and what it reads on stdin (a password,
/// never on a command line where `ps` shows it), and variables of its own on top of the
/// clean environment (a config management plugin's `ARGOCD_APP_*`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Session<'a> {
    pub home: Option<&'a Path>,
    pub stdin: Option<&'a [u8]>,
    pub env: &'a [(String, String)],
}

/// [`run`], in a session.
pub(crate) fn run_in(
    program: &Path,
    args: &[OsString],
    cwd: &Path,
    limits: &Limits,
    slots: &Slots,
    session: Session<'_>,
) -> Result<Vec<u8>, RunError> {
    let _slot = slots.take();
    let own_home = match session.home {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("driftless-render-")
                .tempdir()
                .map_err(|e| RunError::Start {
                    program: program.display().to_string(),
                    message: format!("no temporary home: {e}"),
                })?,
        ),
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(match session.stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a timeout kills whatever it started too (git for a remote base).
        .process_group(0);
    for k in KEPT_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in go_runtime(std::env::var_os("GOGC"), std::env::var_os("GOMEMLIMIT")) {
        cmd.env(k, v);
    }
    let h = match (&own_home, session.home) {
        (Some(t), _) => t.path(),
        (None, Some(h)) => h,
        (None, None) => Path::new("/nonexistent"),
    };
    cmd.env("HOME", h)
        .env("TMPDIR", h)
        .env("XDG_CONFIG_HOME", h.join(".config"))
        .env("XDG_CACHE_HOME", h.join(".cache"))
        .env("XDG_DATA_HOME", h.join(".local/share"))
        .env("LANG", "C.UTF-8");
    for (k, v) in session.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| RunError::Start {
        program: program.display().to_string(),
        message: e.to_string(),
    })?;
    let pgid = child.id() as i32;
    if let (Some(mut pipe), Some(bytes)) = (child.stdin.take(), session.stdin) {
        use std::io::Write;
        // Small (a password): the pipe's buffer takes it whole; dropping `pipe` closes it.
        let _ = pipe.write_all(bytes);
    }
    let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stdout = child.stdout.take().map(|out| {
        let (cap, over) = (limits.max_output, over.clone());
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let read = out.take(cap as u64 + 1).read_to_end(&mut buf);
            if buf.len() > cap {
                over.store(true, std::sync::atomic::Ordering::SeqCst);
                kill_group(pgid);
            }
            read.map(|_| buf)
        })
    });
    let stderr = child.stderr.take().map(|err| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut r = err.take(MAX_STDERR as u64);
            let _ = r.read_to_end(&mut buf);
            // Whatever follows is drained so the tool never blocks on a full pipe.
            let _ = std::io::copy(&mut r.into_inner(), &mut std::io::sink());
            buf
        })
    });
    let deadline = Instant::now() + limits.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                kill_group(pgid);
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => {
                kill_group(pgid);
                let _ = child.wait();
                break None;
            }
        }
    };
    // The tool is gone; anything it left behind in its group goes too.
    kill_group(pgid);
    let out = stdout
        .and_then(|t| t.join().ok())
        .and_then(Result::ok)
        .unwrap_or_default();
    let err = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if over.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(RunError::TooMuchOutput(limits.max_output));
    }
    match status {
        None => Err(RunError::TimedOut(limits.timeout)),
        Some(s) if s.success() => Ok(out),
        Some(s) => Err(RunError::Failed(first_error_line(&err).unwrap_or_else(
            || match s.code() {
                Some(code) => format!("exited with status {code} and said nothing"),
                None => "was killed by a signal".to_string(),
            },
        ))),
    }
}

fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals the process group the tool leads
        // (it was started with process_group(0)); it touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// The line of a tool's stderr worth showing: its first that says something (not a
/// usage banner, a blank or a bare `Error:`), without the tool's own prefixes.
pub(crate) fn first_error_line(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().map(str::trim).find(|l| {
        !l.is_empty()
            && !l.starts_with("Usage:")
            && *l != "Error:"
            && !l.starts_with("WARNING")
            // Helm 4 logs as slog does: its warnings are not the error.
            && !l.starts_with("level=WARN")
            && !l.starts_with("level=INFO")
            && !l.starts_with("level=DEBUG")
            && !l.starts_with("# Warning")
    })?;
    let line = ["Error: ", "error: "]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .unwrap_or(line);
    let mut line = line.trim().to_string();
    if line.chars().count() > 400 {
        line = line.chars().take(400).collect::<String>() + "…";
    }
    Some(line)
}

/// `name` on `PATH`, if it is there.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file() && is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limits: &Limits) -> Result<Vec<u8>, RunError> {
        let dir = tempfile::tempdir().unwrap();
        run(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            dir.path(),
            limits,
            &Slots::new(2),
        )
    }

    #[test]
    fn output_and_errors() {
        let l = Limits::default();
        assert_eq!(sh("echo hi", &l).unwrap(), b"hi\n");
        assert_eq!(
            sh("echo 'Error: accumulating resources: nope' >&2; exit 1", &l),
            Err(RunError::Failed("accumulating resources: nope".into()))
        );
        assert_eq!(
            sh("exit 3", &l),
            Err(RunError::Failed(
                "exited with status 3 and said nothing".into()
            ))
        );
    }

    #[test]
    fn the_environment_is_clean_but_for_the_proxies_and_home_is_private() {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe {
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "not-for-tools");
            std::env::set_var("HTTPS_PROXY", "http://10.9.9.9:1");
            std::env::set_var("no_proxy", ".internal.example");
        };
        let out = sh("env", &Limits::default()).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("AWS_SECRET_ACCESS_KEY"), "{out}");
        // The proxies go with the tool: `helm pull` behind one reaches its repository.
        assert!(out.contains("HTTPS_PROXY=http://10.9.9.9:1\n"), "{out}");
        assert!(out.contains("no_proxy=.internal.example\n"), "{out}");
        assert!(out.contains("HOME=/"), "{out}");
        assert!(!out.contains(&format!("HOME={}\n", std::env::var("HOME").unwrap())));
        // Go's collector waits for the memory limit (this process sets neither variable).
        assert!(out.contains("GOGC=off\n"), "{out}");
        assert!(out.contains("GOMEMLIMIT=128MiB\n"), "{out}");
    }

    #[test]
    fn an_operators_go_settings_are_passed_on_as_set() {
        let ours = go_runtime(None, None);
        assert_eq!(
            ours,
            vec![("GOGC", "off".into()), ("GOMEMLIMIT", "128MiB".into())]
        );
        assert_eq!(
            go_runtime(Some("50".into()), None),
            vec![("GOGC", "50".into())]
        );
        assert_eq!(
            go_runtime(None, Some("1GiB".into())),
            vec![("GOMEMLIMIT", "1GiB".into())]
        );
        assert_eq!(
            go_runtime(Some("200".into()), Some("64MiB".into())),
            vec![("GOGC", "200".into()), ("GOMEMLIMIT", "64MiB".into())]
        );
    }

    #[test]
    fn a_run_past_its_time_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let l = Limits {
            timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let started = Instant::now();
        assert_eq!(sh(&script, &l), Err(RunError::TimedOut(l.timeout)));
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the background child outlived the kill");
    }

    #[test]
    fn output_past_the_cap_is_stopped() {
        let l = Limits {
            max_output: 1000,
            ..Limits::default()
        };
        assert_eq!(sh("yes", &l), Err(RunError::TooMuchOutput(1000)));
    }
}
