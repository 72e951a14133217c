//! An OCI registry on loopback: Debian's `docker-registry` with a config and storage of
//! its own, over plain HTTP or over TLS (a test CA made with `openssl`) with htpasswd
//! basic auth; its access log kept, to count the requests a client made.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct TestRegistry {
    child: Option<Child>,
    dir: PathBuf,
    config: PathBuf,
    port: u16,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// The test CA (TLS only), to trust with `--ca-file`.
    pub ca: Option<PathBuf>,
}

/// User and password of the TLS registry's htpasswd.
pub const REGISTRY_USER: &str = "ci";
pub const REGISTRY_PASSWORD: &str = "s3cret-pass";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestRegistry {
    /// Plain HTTP, anonymous.
    pub fn plain(dir: &Path) -> TestRegistry {
        Self::start_with(dir, false)
    }

    /// TLS with a test CA, and htpasswd basic auth ([`REGISTRY_USER`]).
    pub fn tls(dir: &Path) -> TestRegistry {
        Self::start_with(dir, true)
    }

    fn start_with(dir: &Path, tls: bool) -> TestRegistry {
        let port = super::free_port();
        let config = dir.join("registry.yml");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.join("storage").display()
        );
        let mut ca = None;
        if tls {
            let ec = [
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
            ];
            let mut args = vec!["req", "-x509"];
            args.extend(ec);
            args.extend([
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=driftless test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
            openssl(dir, &args);
            let mut args = vec!["req"];
            args.extend(ec);
            args.extend([
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ]);
            openssl(dir, &args);
            std::fs::write(
                dir.join("server.ext"),
                "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
                 keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
            )
            .unwrap();
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    "server.csr",
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    "server.pem",
                    "-days",
                    "2",
                    "-extfile",
                    "server.ext",
                ],
            );
            let hash = bcrypt::hash_with_result(REGISTRY_PASSWORD, 4)
                .unwrap()
                .format_for_version(bcrypt::Version::TwoY);
            std::fs::write(dir.join("htpasswd"), format!("{REGISTRY_USER}:{hash}\n")).unwrap();
            text.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n\
                 auth:\n  htpasswd:\n    realm: driftless-test\n    path: {}\n",
                dir.join("server.pem").display(),
                dir.join("server.key").display(),
                dir.join("htpasswd").display()
            ));
            ca = Some(dir.join("ca.pem"));
        }
        std::fs::write(&config, text).unwrap();
        let mut registry = TestRegistry {
            child: None,
            dir: dir.to_path_buf(),
            config,
            port,
            host: format!("127.0.0.1:{port}"),
            ca,
        };
        registry.up();
        registry
    }

    /// Starts it (again, after `down`): the same port, storage and log.
    pub fn up(&mut self) {
        assert!(self.child.is_none(), "the registry is running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("access.log"))
            .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&self.config)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry (testbed/install.sh installs it)");
        let port = self.port;
        let child = super::await_ready(child, Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .expect("the registry did not start");
        self.child = Some(child);
    }

    /// Stops it, as a registry that is away.
    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The access log's request lines so far (`METHOD PATH`).
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let start = l.find('"')? + 1;
                let rest = &l[start..];
                let end = rest.find(" HTTP/")?;
                Some(rest[..end].to_string())
            })
            .collect()
    }

    /// Requests so far that start with `prefix` (e.g. `HEAD /v2/app/manifests/`).
    pub fn count(&self, prefix: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.starts_with(prefix))
            .count()
    }

    pub fn url(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.host)
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.down();
    }
}
