//! A second kube-apiserver on the shared local cluster's etcd, started as the first one
//! was (`testbed/cluster.sh` keeps its command line in `$DRIFTLESS_TESTBED_DIR/cmds`)
//! with flags of a test's own, such as tight in-flight limits: what a busy production
//! apiserver does to a client, on loopback. It serves the same objects; its users are
//! its own (a token file), and it is killed when the guard drops, also on a panic.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tempfile::TempDir;

use super::{await_ready, free_port};

/// How long a second apiserver may take to boot on a loaded 2-core machine.
const BOOT: Duration = Duration::from_secs(90);

pub struct SecondApiserver {
    child: Option<Child>,
    /// Its command line, to start it again as it was (`start_again`).
    args: Vec<String>,
    dir: TempDir,
    /// A ClusterRoleBinding made for its user through the first apiserver, deleted on drop.
    binding: String,
    pub port: u16,
}

impl SecondApiserver {
    /// Boots one with `extra` flags and one user, `user`, authenticated by a token and
    /// in no group but `system:authenticated` (so not `system:masters`, whose requests
    /// the apiserver exempts from its in-flight limits), bound to `cluster-admin` by a
    /// ClusterRoleBinding made through the first apiserver with `admin`. Returns once
    /// it serves and has seen the binding.
    pub async fn start(admin: &Client, user: &str, extra: &[&str]) -> SecondApiserver {
        let dir = TempDir::new().unwrap();
        let token = format!("{:032x}", rand_u128());
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!("{token},{user},{user}\n"),
        )
        .unwrap();
        let binding = format!("driftless-test-{user}");
        let crb: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": binding, "labels": {"driftless-test": "second-apiserver"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }))
        .unwrap();
        let crbs: Api<ClusterRoleBinding> = Api::all(admin.clone());
        let _ = crbs.delete(&binding, &DeleteParams::default()).await;
        crbs.create(&PostParams::default(), &crb)
            .await
            .unwrap_or_else(|e| panic!("creating ClusterRoleBinding {binding}: {e}"));
        let server = SecondApiserver::boot(dir, binding, &token, extra, None);
        // Its RBAC authorizer reads the binding from its own cache of etcd: wait until
        // the user may read.
        let client = server.client().await;
        super::eventually(
            "the second apiserver to see the ClusterRoleBinding",
            BOOT,
            || async {
                let req =
                    http::Request::get("/apis/apps/v1/namespaces/default/deployments?limit=1")
                        .body(Vec::new())
                        .unwrap();
                client
                    .request_text(req)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        )
        .await;
        server
    }

    /// A cluster of its own: an apiserver on the local cluster's etcd under a key prefix
    /// of its own (`--etcd-prefix`), so it shares no object with the first one, and
    /// without controllers (a namespace is never finalized there, a Deployment never
    /// rolls out); its one user, `admin`, is in `system:masters`. What a fleet's second
    /// cluster is to a test.
    pub async fn apart() -> SecondApiserver {
        SecondApiserver::apart_with(None).await
    }

    /// [`apart`](Self::apart), of the other Kubernetes version the testbed builds (1.34
    /// beside a 1.37 cluster, 1.37 beside a 1.34 one): a fleet of two versions. Returns it
    /// and its version (`v1.37.2`).
    pub async fn apart_of_other_version() -> (SecondApiserver, String) {
        let own = std::env::var("DRIFTLESS_TEST_K8S").expect(
            "DRIFTLESS_TEST_K8S names the local cluster's version (source the testbed's env file)",
        );
        let lanes = std::env::var("DRIFTLESS_TEST_APISERVERS").expect(
            "DRIFTLESS_TEST_APISERVERS names each lane's kube-apiserver (testbed/cluster.sh writes it in the env file)",
        );
        let (version, binary) = lanes
            .split_whitespace()
            .filter_map(|l| l.split_once('='))
            .find(|(v, _)| *v != own)
            .unwrap_or_else(|| panic!("no Kubernetes version other than {own} in {lanes:?}"));
        assert!(
            Path::new(binary).is_file(),
            "{binary} is not built: a fleet of two versions needs both lanes' apiservers \
             (testbed/build-k8s.sh; scripts/test runs this test on the 1.34 lane, after both builds)"
        );
        let server = SecondApiserver::apart_with(Some(Path::new(binary))).await;
        (server, version.to_string())
    }

    async fn apart_with(binary: Option<&Path>) -> SecondApiserver {
        let dir = TempDir::new().unwrap();
        let token = format!("{:032x}", rand_u128());
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!("{token},admin,admin,\"system:masters\"\n"),
        )
        .unwrap();
        let prefix = format!("--etcd-prefix=/driftless-apart-{:016x}", rand_u128() as u64);
        let server = SecondApiserver::boot(dir, String::new(), &token, &[&prefix], binary);
        let client = server.client().await;
        super::eventually("the apart apiserver to serve namespaces", BOOT, || async {
            Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
                .get("default")
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await;
        server
    }

    /// Boots it with the first apiserver's flags, its own port, certificates and
    /// `tokens.csv` in `dir`, and `extra`; `binary`: another version's kube-apiserver,
    /// without the feature gates and API versions the first one's version was given.
    fn boot(
        dir: TempDir,
        binding: String,
        token: &str,
        extra: &[&str],
        binary: Option<&Path>,
    ) -> SecondApiserver {
        let testbed = testbed_dir();
        let first =
            std::fs::read_to_string(testbed.join("cmds/kube-apiserver")).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; testbed/cluster.sh up keeps the apiserver's command line there",
                    testbed.join("cmds/kube-apiserver").display()
                )
            });
        let mut first = shell_words(&first);
        if let Some(binary) = binary {
            first = of_version(&first, binary);
        }
        let mut server = SecondApiserver {
            child: None,
            args: Vec::new(),
            dir,
            binding,
            port: 0,
        };
        // A port free a moment ago may be taken by the time the apiserver binds it: then
        // it exits at once, and another port is tried.
        for _ in 0..3 {
            let port = free_port();
            let certs = server.dir.path().join(format!("certs-{port}"));
            let args = second_args(
                &first,
                port,
                &certs,
                &server.dir.path().join("tokens.csv"),
                extra,
            );
            let child = spawn(&args, server.dir.path());
            let kubeconfig = server.dir.path().join("kubeconfig");
            let ready = || {
                // The apiserver writes its self-signed serving certificate on start.
                let Ok(ca) = std::fs::read(certs.join("apiserver.crt")) else {
                    return false;
                };
                write_kubeconfig(&kubeconfig, port, &ca, token);
                readyz(port, &certs.join("apiserver.crt"), token)
            };
            if let Some(child) = await_ready(child, BOOT, ready) {
                server.child = Some(child);
                server.port = port;
                server.args = args;
                break;
            }
        }
        assert!(
            server.child.is_some(),
            "the second kube-apiserver did not come up; its log:\n{}",
            server.log()
        );
        server
    }

    /// Stops it (SIGKILL): its clients find nothing listening on its port.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again after [`stop`](Self::stop), as it was: the same port, certificates,
    /// users and storage, so its kubeconfig reaches it again.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "it is running");
        let child = spawn(&self.args, self.dir.path());
        let certs = self
            .args
            .iter()
            .find_map(|a| a.strip_prefix("--cert-dir="))
            .map(PathBuf::from)
            .expect("its --cert-dir");
        let token = std::fs::read_to_string(self.dir.path().join("tokens.csv"))
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_string();
        let port = self.port;
        self.child = await_ready(child, BOOT, || {
            readyz(port, &certs.join("apiserver.crt"), &token)
        });
        assert!(
            self.child.is_some(),
            "the second kube-apiserver did not come up again; its log:\n{}",
            self.log()
        );
    }

    /// A client of it, as its user.
    pub async fn client(&self) -> Client {
        driftless::cluster::Selection {
            kubeconfig: Some(self.kubeconfig()),
            ..Default::default()
        }
        .client()
        .await
        .unwrap_or_else(|e| panic!("a client of the second apiserver: {e}"))
    }

    /// A kubeconfig for its user.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    pub fn log(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default();
        super::tail(&text, 8 << 10).to_string()
    }
}

impl Drop for SecondApiserver {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let name = std::mem::take(&mut self.binding);
        if name.is_empty() {
            return;
        }
        super::cleanup_on_own_thread(move |admin| async move {
            let _ = Api::<ClusterRoleBinding>::all(admin)
                .delete(&name, &DeleteParams::default())
                .await;
        });
    }
}

fn testbed_dir() -> PathBuf {
    match std::env::var_os("DRIFTLESS_TESTBED_DIR") {
        Some(d) => d.into(),
        None => panic!(
            "DRIFTLESS_TESTBED_DIR is not set: this test starts a second apiserver as \
             testbed/cluster.sh started the first. Start the cluster with \
             `testbed/cluster.sh up` and `source .testbed/env`."
        ),
    }
}

/// Starts kube-apiserver with `args`, its output appended to `dir/kube-apiserver.log`,
/// without proxies (as testbed/cluster.sh starts it), so nothing it dials leaves the
/// machine through one.
fn spawn(args: &[String], dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("kube-apiserver.log"))
        .unwrap();
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    for var in [
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        cmd.env_remove(var);
    }
    cmd.spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", args[0]))
}

/// The first apiserver's arguments with its own port, certificates and users, and
/// `extra` appended.
fn second_args(
    first: &[String],
    port: u16,
    certs: &Path,
    tokens: &Path,
    extra: &[&str],
) -> Vec<String> {
    let own = [
        ("--secure-port", port.to_string()),
        ("--cert-dir", certs.display().to_string()),
        ("--token-auth-file", tokens.display().to_string()),
    ];
    let mut args = Vec::new();
    let mut it = first.iter();
    while let Some(a) = it.next() {
        match own
            .iter()
            .find(|(flag, _)| a == flag || a.starts_with(&format!("{flag}=")))
        {
            Some((flag, value)) => {
                if !a.contains('=') {
                    it.next();
                }
                args.push(format!("{flag}={value}"));
            }
            None => args.push(a.clone()),
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The first apiserver's command line for another version's `binary`: the feature gates
/// and API versions its own version was given (`--feature-gates`, `--runtime-config`) are
/// left out, since another version may not know them.
fn of_version(first: &[String], binary: &Path) -> Vec<String> {
    let versioned = ["--feature-gates", "--runtime-config"];
    let mut args = vec![binary.display().to_string()];
    let mut it = first.iter().skip(1);
    while let Some(a) = it.next() {
        match versioned
            .iter()
            .find(|f| a == *f || a.starts_with(&format!("{f}=")))
        {
            Some(_) if !a.contains('=') => {
                it.next();
            }
            Some(_) => {}
            None => args.push(a.clone()),
        }
    }
    args
}

/// Words of a command line as bash's `printf %q` wrote them: separated by spaces, with
/// backslashes escaping what would otherwise be special.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn write_kubeconfig(path: &Path, port: u16, ca: &[u8], token: &str) {
    use base64::Engine as _;
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "second", "cluster": {
            "server": format!("https://127.0.0.1:{port}"),
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca),
        }}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "second", "context": {"cluster": "second", "user": "user"}}],
        "current-context": "second",
    });
    std::fs::write(path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

/// `/readyz` answers 200 to the user, through curl (as testbed/cluster.sh checks the
/// first apiserver): a blocking check that needs no runtime.
fn readyz(port: u16, ca: &Path, token: &str) -> bool {
    Command::new("curl")
        .args(["-sf", "-m", "5", "--cacert"])
        .arg(ca)
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .arg(format!("https://127.0.0.1:{port}/readyz"))
        .env_remove("https_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn rand_u128() -> u128 {
    use std::hash::{BuildHasher, RandomState};
    let a = RandomState::new().hash_one(std::process::id());
    let b = RandomState::new().hash_one(std::time::SystemTime::now());
    (u128::from(a) << 64) | u128::from(b)
}
