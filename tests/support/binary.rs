//! The real binary: one-shot commands, and `driftless run` as a child process with its
//! own status file, cache, metrics port and logs.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::{WAIT, admin_kubeconfig, eventually, free_port};

/// Runs the driftless binary; RUST_LOG=warn so stderr carries only what matters.
pub fn driftless(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("DRIFTLESS_INSTANCE")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run driftless")
}

/// `driftless --kubeconfig <the local cluster's admin kubeconfig> --instance <instance> args…`.
pub fn driftless_on_cluster(instance: &str, args: &[&str]) -> Output {
    let kubeconfig = super::admin_kubeconfig();
    let mut all = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--instance",
        instance,
    ];
    all.extend(args);
    driftless(&all)
}

/// Fails with the whole output unless the command exited with `code`.
#[track_caller]
/// The testbed's helm 4 (`DRIFTLESS_TEST_HELM4`).
pub fn helm4() -> String {
    std::env::var("DRIFTLESS_TEST_HELM4")
        .expect("DRIFTLESS_TEST_HELM4 names the testbed's helm 4 (source its env file)")
}

/// `driftless ARGS --helm HELM4` on the test cluster as `instance`.
pub fn driftless_helm4_on_cluster(instance: &str, args: &[&str]) -> Output {
    let helm = helm4();
    driftless_on_cluster(instance, &[args, &["--helm", &helm]].concat())
}

/// `driftless ARGS --helm HELM4` with no cluster.
pub fn driftless_helm4(args: &[&str]) -> Output {
    let helm = helm4();
    driftless(&[args, &["--helm", &helm]].concat())
}

/// What a `diff --output json` says it would do: each object's id and action.
pub fn diff_changes(doc: &Value) -> std::collections::BTreeSet<(String, String)> {
    doc["objects"]
        .as_array()
        .expect("an objects array")
        .iter()
        .map(|o| {
            (
                o["id"].as_str().unwrap_or_default().to_string(),
                o["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", show(out));
}

/// The CLI counted no write of its own: its closing line is exactly `0 API writes` (not
/// `10 API writes`).
#[track_caller]
pub fn assert_no_writes(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().any(|l| l.trim() == "0 API writes"),
        "{}",
        show(out)
    );
}

/// All a command printed, stdout then stderr: where a test looks for words wherever the
/// CLI put them.
pub fn printed(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

pub fn show(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Nothing from the test's environment that would change what is tested.
pub fn scrub_env(cmd: &mut Command) {
    for var in [
        "KUBECONFIG",
        "DRIFTLESS_INSTANCE",
        "DRIFTLESS_CACHE_DIR",
        "DRIFTLESS_GIT_TOKEN",
        "DRIFTLESS_GIT_TOKEN_FILE",
        "DRIFTLESS_GIT_USERNAME",
        "DRIFTLESS_GIT_PASSWORD",
        "DRIFTLESS_GIT_PASSWORD_FILE",
        "DRIFTLESS_GIT_SSH_KEY_FILE",
        "DRIFTLESS_GIT_SSH_KEY_PASSPHRASE",
        "DRIFTLESS_GIT_KNOWN_HOSTS_FILE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "NO_COLOR",
        "SOPS_AGE_KEY_FILE",
        "SOPS_AGE_KEY",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
}

/// The last `n` bytes of `text` (or a little less, at a character boundary).
pub fn tail(text: &str, n: usize) -> &str {
    let start = text.len().saturating_sub(n);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

/// How the daemon finds the cluster.
enum Kubeconfig {
    /// `--kubeconfig <file>`.
    Flag(PathBuf),
    /// `KUBECONFIG=<file>`, as most users run it.
    Env(PathBuf),
}

/// The options of a `driftless run` to start (`Daemon::builder`); `Daemon::start` is the
/// common case.
pub struct RunOptions {
    instance: String,
    kubeconfig: Kubeconfig,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log_level: String,
    status_file: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    wait: Duration,
    stop_within: Duration,
    metrics: Option<SocketAddr>,
}

impl RunOptions {
    /// `--metrics-addr` this address (the default: a free loopback port), for a test that
    /// must name it before the start (sign-in's `--external-url`).
    pub fn metrics_addr(mut self, addr: SocketAddr) -> Self {
        self.metrics = Some(addr);
        self
    }

    /// `--kubeconfig <path>` (the default is the local cluster's admin kubeconfig).
    pub fn kubeconfig(mut self, path: &Path) -> Self {
        self.kubeconfig = Kubeconfig::Flag(path.to_path_buf());
        self
    }

    /// The local cluster's kubeconfig through `KUBECONFIG` instead of `--kubeconfig`.
    pub fn kubeconfig_in_env(mut self) -> Self {
        self.kubeconfig = Kubeconfig::Env(admin_kubeconfig());
        self
    }

    /// Arguments of `run`, before the ones the harness adds.
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: &[S]) -> Self {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// An environment variable, set after the scrubbing and `RUST_LOG` (so it can
    /// override them).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn envs(self, vars: &[(&str, &str)]) -> Self {
        vars.iter().fold(self, |b, (k, v)| b.env(k, v))
    }

    /// `RUST_LOG`; `info,kube=warn` unless set.
    pub fn log_level(mut self, level: &str) -> Self {
        self.log_level = level.to_string();
        self
    }

    /// The status file somewhere a test controls (a tmpfs it fills or makes read-only);
    /// in the daemon's own temporary directory otherwise.
    pub fn status_file(mut self, path: &Path) -> Self {
        self.status_file = Some(path.to_path_buf());
        self
    }

    /// The git cache directory, likewise.
    pub fn cache_dir(mut self, path: &Path) -> Self {
        self.cache_dir = Some(path.to_path_buf());
        self
    }

    /// How long `wait_status` waits before failing the test.
    pub fn wait(mut self, limit: Duration) -> Self {
        self.wait = limit;
        self
    }

    /// How long `stop` gives the daemon to exit after SIGTERM before failing the test.
    pub fn stop_within(mut self, limit: Duration) -> Self {
        self.stop_within = limit;
        self
    }

    /// `driftless [--kubeconfig K] --instance I run <args> --metrics-addr <free loopback
    /// port> --status-file … --cache-dir …`, stdout and stderr each in a file.
    pub fn start(self) -> Daemon {
        let state = TempDir::new().unwrap();
        let metrics: SocketAddr = self
            .metrics
            .unwrap_or_else(|| format!("127.0.0.1:{}", free_port()).parse().unwrap());
        let status_file = self
            .status_file
            .unwrap_or_else(|| state.path().join("status.json"));
        let cache_dir = self.cache_dir.unwrap_or_else(|| state.path().join("cache"));
        let mut argv: Vec<OsString> = Vec::new();
        let mut env = vec![("RUST_LOG".into(), self.log_level.into())];
        match self.kubeconfig {
            Kubeconfig::Flag(path) => argv.extend(["--kubeconfig".into(), path.into()]),
            Kubeconfig::Env(path) => env.push(("KUBECONFIG".into(), path.into())),
        }
        argv.extend(["--instance".into(), self.instance.into(), "run".into()]);
        argv.extend(self.args);
        argv.extend([
            "--metrics-addr".into(),
            metrics.to_string().into(),
            "--status-file".into(),
            status_file.clone().into(),
            "--cache-dir".into(),
            cache_dir.clone().into(),
        ]);
        env.extend(self.env);
        let mut daemon = Daemon {
            child: None,
            state,
            argv,
            env,
            status_file,
            cache_dir,
            wait: self.wait,
            stop_within: self.stop_within,
            metrics,
        };
        daemon.restart();
        daemon
    }
}

/// A running `driftless run`; killed on drop if the test did not stop it.
pub struct Daemon {
    child: Option<Child>,
    state: TempDir,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    status_file: PathBuf,
    cache_dir: PathBuf,
    wait: Duration,
    stop_within: Duration,
    /// Where it serves `/metrics`, the probes and the hook.
    pub metrics: SocketAddr,
}

impl Daemon {
    /// A daemon of `instance` on the local cluster, every option at its default.
    pub fn builder(instance: &str) -> RunOptions {
        RunOptions {
            instance: instance.to_string(),
            kubeconfig: Kubeconfig::Flag(admin_kubeconfig()),
            args: Vec::new(),
            env: Vec::new(),
            log_level: "info,kube=warn".to_string(),
            status_file: None,
            cache_dir: None,
            wait: WAIT,
            stop_within: Duration::from_secs(15),
            metrics: None,
        }
    }

    /// `driftless --kubeconfig <kubeconfig> --instance <instance> run <args>`.
    pub fn start(kubeconfig: &Path, instance: &str, args: &[&str]) -> Daemon {
        Daemon::builder(instance)
            .kubeconfig(kubeconfig)
            .args(args)
            .start()
    }

    /// Starts it (again, after `sigkill`): the same arguments, status file and cache; its
    /// output appended to the same logs.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the daemon is still running");
        let append = |name: &str| -> File {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.path(name))
                .unwrap()
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
        scrub_env(&mut cmd);
        cmd.args(&self.argv)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(append("stdout.log"))
            .stderr(append("stderr.log"));
        self.child = Some(cmd.spawn().expect("start driftless run"));
    }

    /// A file in the daemon's own temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.state.path().join(name)
    }

    pub fn status_file(&self) -> &Path {
        &self.status_file
    }

    /// What `driftless status --status-file <its status file>` prints (the table).
    pub fn status_table(&self) -> String {
        let path = self.status_file.to_string_lossy();
        let out = driftless(&["status", "--status-file", &path]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon started").id()
    }

    /// Its stderr so far: the log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("stderr.log")).unwrap_or_default()
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.path("stdout.log")).unwrap_or_default()
    }

    pub fn status_text(&self) -> Option<String> {
        std::fs::read_to_string(&self.status_file).ok()
    }

    pub fn status(&self) -> Option<Value> {
        let text = self.status_text()?;
        // Written atomically: whenever it exists, it parses.
        Some(
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("torn or invalid status file: {e}\n{text}")),
        )
    }

    pub async fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        eventually(what, self.wait, || async {
            match self.status() {
                Some(s) if pred(&s) => Ok(s),
                other => Err(format!(
                    "{other:#?}\nlog (tail):\n{}",
                    tail(&self.log(), 8000)
                )),
            }
        })
        .await
    }

    /// The status once it reports an error (`what`: which, for the failure's message).
    pub async fn wait_errors(&self, what: &str) -> Value {
        self.wait_status(what, |s| {
            s["errors"].as_array().is_some_and(|e| !e.is_empty())
        })
        .await
    }

    /// Everything the daemon wrote so far, with the status file.
    pub fn outputs(&self) -> Vec<(String, String)> {
        vec![
            ("daemon stdout".into(), self.stdout()),
            ("daemon stderr".into(), self.log()),
            ("status file".into(), self.status_text().unwrap_or_default()),
        ]
    }

    /// Still running (not crashed, not exited).
    pub fn assert_alive(&mut self, when: &str) {
        let child = self.child.as_mut().expect("daemon started");
        if let Some(code) = child.try_wait().unwrap() {
            panic!("the daemon exited ({code}) {when}\n{}", self.log());
        }
    }

    /// SIGKILL, as a crash would; `restart` starts it again.
    pub fn sigkill(&mut self) {
        let mut child = self.child.take().expect("daemon started");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        let deadline = std::time::Instant::now() + self.stop_within;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "driftless did not exit within {:?} of SIGTERM\n{}",
                    self.stop_within,
                    tail(&self.log(), 8000)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Every spec in the status file is ready (and there is at least one).
pub fn all_ready(status: &Value) -> bool {
    status["specs"]
        .as_array()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|s| s["ready"] == true))
}

/// Spec `id` of `status`, or null while the status does not list it yet: for the
/// predicates of `wait_status`, which see the status of a daemon still starting.
pub fn spec_or_null<'a>(status: &'a Value, id: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    status["specs"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id))
        .unwrap_or(&NULL)
}

pub fn spec<'a>(status: &'a Value, id: &str) -> &'a Value {
    status["specs"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id))
        .unwrap_or_else(|| panic!("no spec {id} in {status:#}"))
}
