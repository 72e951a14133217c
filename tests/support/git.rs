//! git on loopback: the CLI in temporary repositories, `git daemon`, smart HTTP
//! (`git http-backend` behind a tiny HTTP server that checks Basic auth), and OpenSSH's
//! `sshd`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::{await_ready, free_port};

/// `git` in `dir`, with nothing of the user's configuration.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ]);
    cmd
}

/// Runs git, panicking on failure; its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Standard base64 with padding (RFC 4648).
pub fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An `Authorization` header value for HTTP Basic auth (RFC 7617).
pub fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

// ---------------------------------------------------------------------------------------
// git daemon

/// `git daemon` serving a directory of bare repositories on loopback (pushes too); killed
/// when dropped, so a failing test does not leave it running. `down` and `up` stop and
/// start it again at the same address.
pub struct GitDaemon {
    child: Option<Child>,
    base: PathBuf,
    pub port: u16,
    _owned: Option<TempDir>,
}

impl GitDaemon {
    /// Serves a temporary directory of its own; `create` makes repositories in it.
    pub fn start() -> GitDaemon {
        let base = TempDir::new().unwrap();
        let mut daemon = GitDaemon::serve(base.path());
        daemon._owned = Some(base);
        daemon
    }

    /// Serves the repositories under `base`.
    pub fn serve(base: &Path) -> GitDaemon {
        // A free port can be taken before the daemon binds it: then another.
        for _ in 0..5 {
            let port = free_port();
            if let Some(child) = launch(base, port) {
                return GitDaemon {
                    child: Some(child),
                    base: base.to_path_buf(),
                    port,
                    _owned: None,
                };
            }
        }
        panic!("git daemon did not start");
    }

    /// A new bare repository served as `name`: its URL and path.
    pub fn create(&self, name: &str) -> (String, PathBuf) {
        git(&self.base, &["init", "-q", "--bare", "-b", "main", name]);
        (self.url(name), self.base.join(name))
    }

    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }

    /// Stopped: connections to its port are refused.
    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert!(
            TcpStream::connect(("127.0.0.1", self.port)).is_err(),
            "git daemon still answering"
        );
    }

    /// Serving again, on the same port.
    pub fn up(&mut self) {
        assert!(self.child.is_none(), "git daemon already running");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = launch(&self.base, self.port) {
                self.child = Some(child);
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("git daemon did not start again on port {}", self.port);
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `git-daemon` on `port`, once it accepts connections; `None` when it exits first (the
/// port was taken) or does not answer within 10 s.
fn launch(base: &Path, port: u16) -> Option<Child> {
    // The daemon binary itself: `git daemon` would run it as a child of its own, which
    // killing `git` leaves running.
    let exec_path = PathBuf::from(git(base, &["--exec-path"]));
    let child = Command::new(exec_path.join("git-daemon"))
        .current_dir(base)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "--reuseaddr",
            "--export-all",
            "--informative-errors",
            "--enable=receive-pack",
            "--listen=127.0.0.1",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", base.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start git daemon");
    await_ready(child, Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
}

// ---------------------------------------------------------------------------------------
// Smart HTTP with Basic auth

/// One request the HTTP server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub authorization: Option<String>,
}

enum Mode {
    /// Refuses every request.
    Unauthorized,
    /// Serves the repositories under `root` to requests with exactly this Authorization.
    Backend {
        root: PathBuf,
        authorization: String,
    },
}

/// A one-connection-at-a-time HTTP/1.1 server in front of `git http-backend`, recording
/// what it was asked; stopped and joined when dropped.
pub struct GitHttp {
    pub port: u16,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    thread: Option<JoinHandle<()>>,
}

impl GitHttp {
    /// Answers 401 to everything.
    pub fn refusing() -> GitHttp {
        GitHttp::start(Mode::Unauthorized)
    }

    /// Serves the repositories under `root` to requests carrying exactly `authorization`,
    /// 401 to everything else.
    pub fn serving(root: &Path, authorization: String) -> GitHttp {
        GitHttp::start(Mode::Backend {
            root: root.to_path_buf(),
            authorization,
        })
    }

    fn start(mode: Mode) -> GitHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let _ = serve(stream, &mode, &seen);
                    }
                }
            })
        };
        GitHttp {
            port,
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// `http://<userinfo>127.0.0.1:<port>/<repo>`; `userinfo` empty or ending in `@`.
    pub fn url(&self, userinfo: &str, repo: &str) -> String {
        format!("http://{userinfo}127.0.0.1:{}/{repo}", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Ref advertisements served (each fetch asks for one), with the right credentials.
    pub fn fetches(&self, authorization: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| {
                s.path.contains("/info/refs") && s.authorization.as_deref() == Some(authorization)
            })
            .count()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(stream: TcpStream, mode: &Mode, seen: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut stream = stream;
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if let Some(len) = headers.get("content-length") {
        body.resize(len.parse().unwrap_or(0), 0);
        reader.read_exact(&mut body)?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 {
                let mut end = String::new();
                reader.read_line(&mut end)?;
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let authorization = headers.get("authorization").cloned();
    seen.lock().unwrap().push(Seen {
        path: target.clone(),
        authorization: authorization.clone(),
    });

    let unauthorized = b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
                         Content-Length: 0\r\nConnection: close\r\n\r\n";
    let (root, expected) = match mode {
        Mode::Unauthorized => return stream.write_all(unauthorized),
        Mode::Backend {
            root,
            authorization,
        } => (root, authorization),
    };
    if authorization.as_deref() != Some(expected.as_str()) {
        return stream.write_all(unauthorized);
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_USER", "git")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (header, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
    ] {
        if let Some(v) = headers.get(header) {
            cgi.env(var, v);
        }
    }
    let mut child = cgi.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&body)?;
    }
    let out = child.wait_with_output()?;
    // A CGI head ends with a blank line, in CRLF or bare LF.
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, 2))
        })
        .unwrap_or((out.stdout.len(), 0));
    let head = String::from_utf8_lossy(&out.stdout[..split.0]).into_owned();
    let content = &out.stdout[(split.0 + split.1).min(out.stdout.len())..];
    let mut status = "200 OK".to_string();
    let mut response_headers = String::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_string(),
            Some(_) => {
                response_headers.push_str(line.trim_end());
                response_headers.push_str("\r\n");
            }
            None => {}
        }
    }
    let mut response = Vec::new();
    write!(
        response,
        "HTTP/1.1 {status}\r\n{response_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        content.len()
    )?;
    response.extend_from_slice(content);
    stream.write_all(&response)
}

// ---------------------------------------------------------------------------------------
// sshd

/// OpenSSH's server (Debian's `openssh-server`) on a free loopback port, as the current
/// user, with a configuration of its own: a temporary host key, and an authorized_keys
/// file that lets in one temporary client key. Serves the bare repositories it `create`s
/// (sshd runs `git-upload-pack` from the default PATH); killed when dropped.
pub struct Sshd {
    child: Option<Child>,
    pub port: u16,
    /// The login the URLs name: whoever runs the test.
    pub user: String,
    dir: TempDir,
}

/// `sshd` itself: it must be started by its absolute path (it re-executes itself).
const SSHD: &str = "/usr/sbin/sshd";

/// A new ed25519 key pair without passphrase at `path` (and `path.pub`); the public
/// key's `type base64` part.
pub fn ssh_keygen(path: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "driftless-test",
            "-f",
        ])
        .arg(path)
        .output()
        .expect("ssh-keygen (Debian's openssh-client; testbed/install.sh installs it)");
    assert!(
        out.status.success(),
        "ssh-keygen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    public
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Sshd {
    pub fn start() -> Sshd {
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} is missing: run testbed/install.sh (it installs Debian's openssh-server)"
        );
        let dir = TempDir::new().unwrap();
        ssh_keygen(&dir.path().join("host_ed25519"));
        let client = ssh_keygen(&dir.path().join("client_ed25519"));
        std::fs::write(dir.path().join("authorized_keys"), format!("{client}\n")).unwrap();
        std::fs::create_dir(dir.path().join("repos")).unwrap();
        let user = String::from_utf8(
            Command::new("id")
                .arg("-un")
                .output()
                .expect("id -un")
                .stdout,
        )
        .unwrap()
        .trim()
        .to_string();
        // As root, sshd separates privileges into an empty chroot directory that systemd
        // would otherwise create (RuntimeDirectory=sshd); as anyone else it needs none.
        if running_as_root() {
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        for _ in 0..5 {
            let port = free_port();
            if let Some(child) = launch_sshd(dir.path(), port) {
                return Sshd {
                    child: Some(child),
                    port,
                    user,
                    dir,
                };
            }
        }
        panic!(
            "sshd did not start; its log:\n{}",
            std::fs::read_to_string(dir.path().join("sshd.log")).unwrap_or_default()
        );
    }

    /// A new bare repository: its `ssh://` URL and path.
    pub fn create(&self, name: &str) -> (String, PathBuf) {
        let repos = self.dir.path().join("repos");
        git(&repos, &["init", "-q", "--bare", "-b", "main", name]);
        let path = repos.join(name);
        (
            format!(
                "ssh://{}@127.0.0.1:{}{}",
                self.user,
                self.port,
                path.display()
            ),
            path,
        )
    }

    /// The private key sshd lets in (its `.pub` beside it).
    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client_ed25519")
    }

    /// The host key's line for a known_hosts file (`[127.0.0.1]:port type base64`).
    pub fn known_hosts_line(&self) -> String {
        let public = std::fs::read_to_string(self.dir.path().join("host_ed25519.pub")).unwrap();
        let key: Vec<&str> = public.split_whitespace().take(2).collect();
        format!("[127.0.0.1]:{} {}", self.port, key.join(" "))
    }

    /// What sshd logged (LogLevel VERBOSE: every authentication attempt).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether the test runs as root (uid 0), from `id -u`: std has no getuid.
fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `sshd -D` on `port` with a configuration in `dir`, once it greets with its SSH banner;
/// `None` when it exits first (the port was taken) or does not greet within 10 s.
fn launch_sshd(dir: &Path, port: u16) -> Option<Child> {
    let d = dir.display();
    // Its own configuration only (-f replaces /etc/ssh/sshd_config). No PAM and no
    // StrictModes, since the files live in a temporary directory of the current user;
    // MaxAuthTries well above the client's own cap, so that a refused key shows how
    // often the client tries rather than when sshd gives up on it.
    let config = format!(
        "Port {port}\n\
         ListenAddress 127.0.0.1\n\
         HostKey {d}/host_ed25519\n\
         PidFile {d}/sshd.pid\n\
         AuthorizedKeysFile {d}/authorized_keys\n\
         UsePAM no\n\
         StrictModes no\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\n\
         MaxAuthTries 50\n\
         AllowTcpForwarding no\n\
         X11Forwarding no\n\
         PrintMotd no\n\
         LogLevel VERBOSE\n"
    );
    let config_path = dir.join(format!("sshd_config.{port}"));
    std::fs::write(&config_path, config).unwrap();
    let child = Command::new(SSHD)
        .arg("-D")
        .arg("-f")
        .arg(&config_path)
        .arg("-E")
        .arg(dir.join("sshd.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sshd");
    await_ready(child, Duration::from_secs(10), || {
        let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut banner = String::new();
        BufReader::new(stream).read_line(&mut banner).is_ok() && banner.starts_with("SSH-")
    })
}

/// A bare repository `config.git` in a directory of its own (serve it with
/// `GitDaemon::serve(repo.base())`) and a work tree whose commits go to its `main`.
pub struct ConfigRepo {
    base: TempDir,
    work: TempDir,
}

impl ConfigRepo {
    pub fn new() -> ConfigRepo {
        let base = TempDir::new().unwrap();
        let bare = base.path().join("config.git");
        std::fs::create_dir(&bare).unwrap();
        git(&bare, &["init", "--bare", "-q"]);
        let work = TempDir::new().unwrap();
        git(work.path(), &["init", "-q"]);
        git(
            work.path(),
            &["remote", "add", "origin", &bare.to_string_lossy()],
        );
        ConfigRepo { base, work }
    }

    /// Where `config.git` is.
    pub fn base(&self) -> &Path {
        self.base.path()
    }

    /// The work tree.
    pub fn work(&self) -> &Path {
        self.work.path()
    }

    /// Commits the whole work tree and pushes it to `main`; the commit's sha.
    pub fn commit(&self, msg: &str) -> String {
        let w = self.work();
        git(w, &["add", "-A"]);
        git(w, &["commit", "-q", "-m", msg]);
        git(w, &["push", "-q", "origin", "HEAD:main"]);
        git(w, &["rev-parse", "HEAD"]).trim().to_string()
    }
}
