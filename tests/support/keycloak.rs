//! A real OpenID Connect provider on loopback: Keycloak (the Quarkus distribution
//! testbed/keycloak.sh installs) in development mode, the realms of
//! `tests/fixtures/keycloak` imported at its start:
//!
//! - `driftless`: the confidential client `driftless` (secret `driftless-secret`; the
//!   authorization code flow with PKCE S256 required, redirect URIs `http://127.0.0.1/*`
//!   and `http://localhost/*`, which Keycloak matches on any port, as RFC 8252 has loopback
//!   redirects; the password grant on), whose tokens carry the user's group names in
//!   `groups`; `other` (`other-secret`, the password grant): tokens for another audience;
//!   `short` (`short-secret`, the password grant): tokens of 2 s, for driftless's audience;
//!   the users `alice`/`alice-pw` (group `team-a`) and `bob`/`bob-pw` (group `viewers`).
//! - `elsewhere`: another issuer, with a client `driftless` (`driftless-secret`) and a user
//!   `alice`/`alice-pw`.
//!
//! Other tokens live Keycloak's default 5 minutes, the ID token as the access token.
//!
//! Each Keycloak has a home of its own in a temporary directory (links to the install's
//! conf, lib, providers and themes, and a data directory of its own) and ports of its own,
//! so test processes run theirs side by side and none writes into the install; its
//! database is in memory. It listens on 127.0.0.1 only and reads names from a hosts file
//! of its own (no lookup reaches the machine's resolver). A watchdog shell keeps it: when
//! the watchdog's stdin closes (the `Keycloak` dropped, or the test process gone however
//! it went: the shared one is never dropped), it kills Keycloak's process group and
//! removes the directory.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::{form, free_port, status_and_body, tail};

/// The install to run: a Keycloak home (`bin/kc.sh`) where testbed/keycloak.sh has also
/// written `driftless-java-home` and `driftless-build`. testbed/cluster.sh's env file sets
/// it; without it, `$DRIFTLESS_CACHE/keycloak-VERSION` (`~/.cache/driftless/...`).
pub const KEYCLOAK_ENV: &str = "DRIFTLESS_TEST_KEYCLOAK";

/// The release testbed/keycloak.sh installs.
const KEYCLOAK_VERSION: &str = "26.5.6";

/// A bound on a start (twice `WAIT`): 14 s on an idle 2-core machine, the realms' import
/// among it, and more when test processes start theirs at once.
const START_LIMIT: Duration = Duration::from_secs(240);

/// What would change how kc.sh starts the JVM or configure Keycloak from the test's
/// environment (besides every `KC_*` and `QUARKUS_*`).
const JAVA_ENV: &[&str] = &[
    "JAVA",
    "JAVA_OPTS",
    "JAVA_OPTS_APPEND",
    "JAVA_OPTS_KC_HEAP",
    "JAVA_ADD_OPENS",
    "JAVA_LOCALE",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "DEBUG",
    "DEBUG_PORT",
    "DEBUG_SUSPEND",
    "PRINT_ENV",
];

/// `bash -c WATCHDOG watchdog DIR KC.SH ARGS...`: starts kc.sh in a session (so a process
/// group) of its own, and
/// - when its stdin closes (the test process let go of it, or is gone): kills that group
///   (kc.sh and its JVM), removes DIR and exits;
/// - when Keycloak exits of itself first (a port taken, say): exits with its status, DIR
///   kept for its log.
///
/// (`setsid` does not fork here: a background job of a shell without job control leads no
/// group, so `$!` is kc.sh's pid, which is its group's id.)
const WATCHDOG: &str = r#"
dir=$1
shift
exec 3<&0 </dev/null
setsid "$@" 3<&- &
kc=$!
{
  read -r _ <&3
  : >"$dir/released"
  kill -KILL -- "-$kc"
} 2>/dev/null &
reader=$!
exec 3<&-
wait "$kc"
status=$?
if [ -e "$dir/released" ]; then
  rm -rf -- "$dir"
else
  kill "$reader" 2>/dev/null
fi
exit "$status"
"#;

/// The installed Keycloak the tests run.
struct Install {
    home: PathBuf,
    /// The Java testbed/keycloak.sh chose and built with.
    java_home: String,
    /// The build options testbed/keycloak.sh built with; given again at every start, or
    /// Keycloak would build afresh, into the install.
    build: Vec<String>,
}

/// The install, or a panic naming testbed/keycloak.sh: a test never passes by skipping.
fn install() -> Install {
    let home = std::env::var_os(KEYCLOAK_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("DRIFTLESS_CACHE")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/driftless"))
                })
                .unwrap_or_else(|| {
                    panic!("{KEYCLOAK_ENV}, DRIFTLESS_CACHE and HOME are all unset: no Keycloak")
                });
            cache.join(format!("keycloak-{KEYCLOAK_VERSION}"))
        });
    if !home.join("bin/kc.sh").is_file() {
        panic!(
            "no Keycloak in {} (no bin/kc.sh), and this test needs one: install it with \
             testbed/keycloak.sh (testbed/install.sh runs it), or name an install in \
             {KEYCLOAK_ENV}",
            home.display()
        );
    }
    let stamp = |name: &str| {
        std::fs::read_to_string(home.join(name)).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: Keycloak in {} is not built for the tests; run testbed/keycloak.sh",
                home.join(name).display(),
                home.display()
            )
        })
    };
    let java_home = stamp("driftless-java-home").trim().to_string();
    let build = stamp("driftless-build")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    Install {
        home,
        java_home,
        build,
    }
}

/// One Keycloak on loopback; killed when dropped (and when the test process ends).
pub struct Keycloak {
    /// Its HTTP listener on 127.0.0.1: the OpenID Connect endpoints and the login pages.
    port: u16,
    /// Its management listener on 127.0.0.1 (`/health/ready`).
    management_port: u16,
    watchdog: Option<Child>,
    /// The watchdog's stdin: closing it ends Keycloak.
    release: Option<ChildStdin>,
    dir: TempDir,
}

impl Keycloak {
    /// The test process's Keycloak, started by the first test that asks (the others wait
    /// for it); it ends with the process. Its start is blocking work, on a thread of the
    /// blocking pool: no test runtime holds it, so it serves every test's runtime.
    pub async fn shared() -> &'static Keycloak {
        static SHARED: OnceLock<Keycloak> = OnceLock::new();
        if let Some(keycloak) = SHARED.get() {
            return keycloak;
        }
        match tokio::task::spawn_blocking(|| SHARED.get_or_init(Keycloak::launch)).await {
            Ok(keycloak) => keycloak,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// `http://127.0.0.1:PORT/realms/REALM`: the issuer Keycloak names in the realm's
    /// discovery document and tokens. (In development mode it takes the host from the
    /// request: ask it as 127.0.0.1, as here, for this issuer.)
    pub fn issuer(&self, realm: &str) -> String {
        format!("http://127.0.0.1:{}/realms/{realm}", self.port)
    }

    /// The token endpoint's answer (JSON) to the password grant with scope `openid`:
    /// `id_token`, `access_token`, `refresh_token`, `expires_in`...; or its `error` and
    /// `error_description`, when refused.
    pub async fn password_tokens(
        &self,
        realm: &str,
        client: &str,
        secret: &str,
        user: &str,
        password: &str,
    ) -> Value {
        let path = format!("/realms/{realm}/protocol/openid-connect/token");
        let (code, body) = post_form(
            self.addr(),
            &path,
            &[
                ("grant_type", "password"),
                ("client_id", client),
                ("client_secret", secret),
                ("username", user),
                ("password", password),
                ("scope", "openid"),
            ],
        )
        .await;
        serde_json::from_str(&body).unwrap_or_else(|e| {
            panic!(
                "{path} answered HTTP {code}, not JSON ({e}): {body}\nKeycloak's log ends:\n{}",
                tail(&self.log(), 4000)
            )
        })
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// What Keycloak logged.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("keycloak.log")).unwrap_or_default()
    }

    /// Starts one on free ports, ready (the realms imported), or panics with its log.
    fn launch() -> Keycloak {
        let install = install();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port();
            let management_port = loop {
                let p = free_port();
                if p != port {
                    break p;
                }
            };
            match Keycloak::spawn(&install, port, management_port) {
                Ok(keycloak) => return keycloak,
                // A free port can be taken before Keycloak binds it: then others.
                Err((_, log))
                    if attempt < 5
                        && (log.contains("Port already bound")
                            || log.contains("Address already in use")) => {}
                Err((why, log)) => panic!(
                    "Keycloak ({}) did not start: {why}; its log ends:\n{}",
                    install.home.display(),
                    tail(&log, 8000)
                ),
            }
        }
    }

    /// One start, on these ports; `Err` with what happened and its log when it ended or
    /// was not ready within `START_LIMIT`.
    fn spawn(
        install: &Install,
        port: u16,
        management_port: u16,
    ) -> Result<Keycloak, (String, String)> {
        let dir = tempfile::Builder::new()
            .prefix("driftless-keycloak-")
            .tempdir()
            .unwrap();
        let home = dir.path().join("home");
        let import = home.join("data/import");
        std::fs::create_dir_all(&import).unwrap();
        for shared in ["conf", "lib", "providers", "themes"] {
            std::os::unix::fs::symlink(install.home.join(shared), home.join(shared)).unwrap();
        }
        // `--import-realm` reads the realms from the home's data/import.
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keycloak");
        for entry in
            std::fs::read_dir(&fixtures).unwrap_or_else(|e| panic!("{}: {e}", fixtures.display()))
        {
            let file = entry.unwrap().path();
            if file.extension().is_some_and(|e| e == "json") {
                std::fs::copy(&file, import.join(file.file_name().unwrap())).unwrap();
            }
        }
        // Names from this file alone: Keycloak asks for the reverse name of the machine's
        // addresses as it starts, a query for the machine's resolver otherwise.
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let hosts = dir.path().join("hosts");
        std::fs::write(
            &hosts,
            format!("127.0.0.1 localhost {}\n::1 localhost\n", hostname.trim()),
        )
        .unwrap();

        let log = std::fs::File::create(dir.path().join("keycloak.log")).unwrap();
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("keycloak-watchdog")
            .arg(dir.path())
            .arg(install.home.join("bin/kc.sh"))
            .arg("start-dev")
            // After kc.sh's own -Dkc.home.dir (the install): the last one is the JVM's.
            .arg(format!("-Dkc.home.dir={}", home.display()))
            .arg(format!("-Djdk.net.hosts.file={}", hosts.display()))
            .args(&install.build)
            .arg("--import-realm")
            .arg("--http-host=127.0.0.1")
            .arg(format!("--http-port={port}"))
            .arg(format!("--http-management-port={management_port}"))
            .env("JAVA_HOME", &install.java_home)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            // Its own group: a signal to the test's group (a runner's timeout) leaves the
            // watchdog to end Keycloak.
            .process_group(0);
        for (name, _) in std::env::vars_os() {
            let text = name.to_string_lossy();
            if text.starts_with("KC_") || text.starts_with("QUARKUS_") || JAVA_ENV.contains(&&*text)
            {
                command.env_remove(&name);
            }
        }
        let mut watchdog = command.spawn().expect("start bash (Keycloak's watchdog)");
        let release = watchdog.stdin.take();
        let mut keycloak = Keycloak {
            port,
            management_port,
            watchdog: Some(watchdog),
            release,
            dir,
        };

        let health = SocketAddr::from(([127, 0, 0, 1], keycloak.management_port));
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Some(watchdog) = keycloak.watchdog.as_mut()
                && let Ok(Some(status)) = watchdog.try_wait()
            {
                return Err((format!("it exited ({status})"), keycloak.log()));
            }
            if get(health, "/health/ready").is_ok_and(|(code, _)| code == 200) {
                break;
            }
            if Instant::now() >= deadline {
                // Dropped on return: killed, its directory removed.
                return Err((format!("not ready within {START_LIMIT:?}"), keycloak.log()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }

        let log = keycloak.log();
        assert!(
            !log.contains("Updating the configuration"),
            "Keycloak built itself again as it started (into {}, which every test process \
             shares): its build is not the one for the options in {}/driftless-build. \
             Run testbed/keycloak.sh again after removing that file. Its log:\n{}",
            install.home.display(),
            install.home.display(),
            tail(&log, 4000)
        );
        let discovery = get(
            keycloak.addr(),
            "/realms/driftless/.well-known/openid-configuration",
        );
        assert!(
            discovery.as_ref().is_ok_and(|(code, _)| *code == 200),
            "Keycloak is ready, but the realm driftless is not there ({discovery:?}); its log:\n{}",
            tail(&log, 4000)
        );
        Ok(keycloak)
    }
}

impl Drop for Keycloak {
    fn drop(&mut self) {
        // The watchdog sees its stdin close, kills Keycloak and removes the directory.
        drop(self.release.take());
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.wait();
        }
    }
}

/// A GET over HTTP/1.0 (so the reply is never chunked): status code and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    Ok(status_and_body(&raw))
}

/// A form POST over HTTP/1.0: status code and body.
async fn post_form(addr: SocketAddr, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let body = fields
        .iter()
        .map(|(k, v)| format!("{}={}", form(k), form(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr} (Keycloak): {e}"));
    let head = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    status_and_body(&raw)
}
