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

/// `openssl ARGS` in `dir`; it must succeed.
pub fn openssl(dir: &Path, args: &[&str]) {
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

/// `NAME.pem` and `NAME.key` in `dir`: a self-signed P-256 certificate for two days,
/// of `subject`, with `-addext` `extensions` (none: openssl's defaults, CA:TRUE).
pub fn self_signed(dir: &Path, name: &str, subject: &str, extensions: &[&str]) -> PathBuf {
    let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
    let mut args = vec![
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &pem,
        "-days",
        "2",
        "-subj",
        subject,
    ];
    for e in extensions {
        args.extend(["-addext", e]);
    }
    openssl(dir, &args);
    dir.join(pem)
}

/// A CA of our own for two days: `NAME.pem` and `NAME.key` in `dir`.
pub fn test_ca(dir: &Path, name: &str, subject: &str) -> PathBuf {
    self_signed(
        dir,
        name,
        subject,
        &[
            "basicConstraints=critical,CA:TRUE",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    )
}

/// A P-256 certificate (for servers and clients) for `san` (`IP:127.0.0.1`, `DNS:host`) signed by the CA
/// `CA.pem`/`CA.key` in `dir`: (`NAME.pem`, `NAME.key`).
pub fn signed_by(dir: &Path, ca: &str, name: &str, subject: &str, san: &str) -> (PathBuf, PathBuf) {
    let (key, csr, pem, ext) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            subject,
        ],
    );
    std::fs::write(
        dir.join(&ext),
        format!(
            "subjectAltName={san}\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
        ),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &ext,
        ],
    );
    (dir.join(pem), dir.join(key))
}

/// A self-signed certificate for 127.0.0.1 as `openssl req -x509` makes it (its default
/// extensions: CA:TRUE), as Docker's registry docs make one.
pub fn self_signed_certificate(dir: &Path, name: &str) -> PathBuf {
    self_signed(dir, name, "/CN=127.0.0.1", &["subjectAltName=IP:127.0.0.1"])
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

    /// TLS with one self-signed certificate, made as Docker's registry docs make one
    /// (`openssl req -x509`, so CA:TRUE), anonymous; `ca` is that very certificate.
    pub fn self_signed(dir: &Path) -> TestRegistry {
        self_signed_certificate(dir, "registry");
        let mut registry = Self::start_with(dir, false);
        registry.down();
        let tls = format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("registry.pem").display(),
            dir.join("registry.key").display()
        );
        let mut text = std::fs::read_to_string(&registry.config).unwrap();
        text.push_str(&tls);
        std::fs::write(&registry.config, text).unwrap();
        registry.ca = Some(dir.join("registry.pem"));
        registry.up();
        registry
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
            test_ca(dir, "ca", "/CN=driftless test CA");
            signed_by(dir, "ca", "server", "/CN=127.0.0.1", "IP:127.0.0.1");
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

    pub fn url(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.host)
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.down();
    }
}

/// The token service of a registry under token auth (what Docker Hub, GHCR and Harbor
/// answer a challenge with): ES256 JWTs, signed with a key whose certificate (made by
/// `openssl`) the registry trusts, given only for [`REGISTRY_USER`]'s basic credentials.
pub struct TokenService {
    pub url: String,
    /// Token requests answered with a token, and refused.
    pub issued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

pub const TOKEN_SERVICE: &str = "driftless-test-registry";
pub const TOKEN_ISSUER: &str = "driftless-test-issuer";

impl TokenService {
    fn start(dir: &Path) -> TokenService {
        use std::io::{BufRead as _, BufReader, Write as _};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        self_signed(dir, "token", "/CN=driftless test token issuer", &[]);
        use p256::pkcs8::DecodePrivateKey as _;
        let key = p256::ecdsa::SigningKey::from_pkcs8_pem(
            &std::fs::read_to_string(dir.join("token.key")).unwrap(),
        )
        .expect("openssl writes PKCS#8");
        // x5c is the certificate's DER in base64: the PEM body, joined.
        let cert: String = std::fs::read_to_string(dir.join("token.pem"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let (issued, refused, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (i, r, s) = (issued.clone(), refused.clone(), stop.clone());
        let expected = format!(
            "Basic {}",
            super::base64(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}").as_bytes())
        );
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push(line.trim_end().to_string());
                }
                let target = head.first().and_then(|l| l.split(' ').nth(1)).unwrap_or("");
                let authorized = head.iter().any(|l| {
                    l.split_once(':').is_some_and(|(k, v)| {
                        k.eq_ignore_ascii_case("authorization") && v.trim() == expected
                    })
                });
                let scope = target
                    .split(['?', '&'])
                    .find_map(|p| p.strip_prefix("scope="))
                    .map(|s| {
                        s.replace("%3A", ":")
                            .replace("%2F", "/")
                            .replace("%2C", ",")
                    })
                    .unwrap_or_default();
                let mut stream = stream;
                if !authorized {
                    r.fetch_add(1, Ordering::Relaxed);
                    let body = r#"{"details":"invalid credentials"}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    continue;
                }
                i.fetch_add(1, Ordering::Relaxed);
                let token = jwt(&key, &cert, &scope);
                let body = format!(r#"{{"token":"{token}","expires_in":300}}"#);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        TokenService {
            url,
            issued,
            refused,
            stop,
        }
    }
}

impl Drop for TokenService {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// An ES256 JWT granting `scope` (`repository:NAME:ACTIONS`), as the registry's token
/// auth checks it: issuer, audience, times, and a signature by the certificate in `x5c`.
fn jwt(key: &p256::ecdsa::SigningKey, cert: &str, scope: &str) -> String {
    use base64::Engine as _;
    use p256::ecdsa::signature::Signer as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let mut parts = scope.splitn(3, ':');
    let (kind, name, actions) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [cert]});
    let claims = serde_json::json!({
        "iss": TOKEN_ISSUER, "sub": REGISTRY_USER, "aud": TOKEN_SERVICE,
        "exp": now + 300, "nbf": now - 10, "iat": now, "jti": format!("{now}-{name}"),
        "access": [{"type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()}],
    });
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature: p256::ecdsa::Signature = key.sign(input.as_bytes());
    format!("{input}.{}", b64(&signature.to_bytes()))
}

impl TestRegistry {
    /// Plain HTTP, under token auth: a bearer challenge naming `token`'s service.
    pub fn bearer(dir: &Path) -> (TestRegistry, TokenService) {
        let token = TokenService::start(dir);
        let port = super::free_port();
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: false\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: 127.0.0.1:{port}\n\
                 auth:\n  token:\n    realm: {}\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                dir.join("storage").display(),
                token.url,
                dir.join("token.pem").display()
            ),
        )
        .unwrap();
        let mut registry = TestRegistry {
            child: None,
            dir: dir.to_path_buf(),
            config,
            port,
            host: format!("127.0.0.1:{port}"),
            ca: None,
        };
        registry.up();
        (registry, token)
    }
}
