//! How driftless ships: the systemd units (checked by `systemd-analyze verify` and the
//! offline `systemd-analyze security`), the Dockerfile (parsed: a non-root, shell-free
//! runtime stage whose flags exist), and the generated shell completions and man pages
//! (the committed copies must be current). No cluster needed.
//!
//! Tools this needs (installed by testbed/install.sh): `systemd-analyze` (package
//! systemd) and `man` (package man-db, for the units' Documentation= check).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;

const BIN: &str = env!("CARGO_BIN_EXE_driftless");
/// Where the units and the image install the binary.
const INSTALLED_BIN: &str = "/usr/local/bin/driftless";
const UNITS: [&str; 2] = ["driftless.service", "driftless@.service"];
/// Where the host keeps its own units (the targets ours are ordered against).
const HOST_UNIT_DIR: &str = "/usr/lib/systemd/system";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Runs a tool the test needs; a missing tool fails the test, naming how to install it.
fn tool(program: &str, package: &str) -> Command {
    match Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => Command::new(program),
        Ok(out) => panic!(
            "`{program} --version` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "`{program}` is not available ({e}): it comes from the apt package `{package}`, \
             which testbed/install.sh installs (APT_PKGS); run testbed/install.sh"
        ),
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------
// Flags against the binary's own --help

/// Every long and short option `driftless <subcommand> --help` lists.
fn known_flags(subcommand: &str) -> BTreeSet<String> {
    let out = run(Command::new(BIN).args([subcommand, "--help"]));
    assert!(
        out.status.success(),
        "driftless {subcommand} --help: {}",
        text(&out.stderr)
    );
    let help = text(&out.stdout);
    let mut flags = BTreeSet::new();
    for word in help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']') {
        let name: String = word
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let long = name.starts_with("--") && name.len() > 2;
        let short = name.len() == 2 && name.starts_with('-') && name != "--";
        if long || short {
            flags.insert(name);
        }
    }
    assert!(flags.contains("--help"), "no flags parsed from:\n{help}");
    flags
}

/// The flags (`--name`, `--name=value`, `-x`) among `args`, without their values.
fn flags_in<'a>(args: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    args.into_iter()
        .filter(|a| a.starts_with('-'))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect()
}

fn assert_flags_exist(what: &str, subcommand: &str, args: &[&str]) {
    let known = known_flags(subcommand);
    let flags = flags_in(args.iter().copied());
    let unknown: Vec<&String> = flags.iter().filter(|f| !known.contains(*f)).collect();
    assert!(
        unknown.is_empty(),
        "{what} passes {unknown:?}, which `driftless {subcommand} --help` does not list \
         (it lists {known:?})"
    );
}

// ---------------------------------------------------------------------------------------
// systemd

/// A unit's `Key=value` lines (comments and sections dropped), in order.
fn directives(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .filter(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn values<'a>(directives: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    directives
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// A file system root for `systemd-analyze --root`: the host's units (for the targets
/// ours depend on), ours in /etc/systemd/system with the credentials drop-in, the
/// binary at the path ExecStart names, and the man pages (MANPATH) for Documentation=.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Root {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        let host_units = root.join(HOST_UNIT_DIR.trim_start_matches('/'));
        fs::create_dir_all(&host_units).expect("mkdir");
        let entries = fs::read_dir(HOST_UNIT_DIR).unwrap_or_else(|e| {
            panic!(
                "reading {HOST_UNIT_DIR} ({e}): the host's systemd units come with the apt \
                 package `systemd`, which testbed/install.sh installs"
            )
        });
        for entry in entries {
            let entry = entry.expect("dir entry");
            // Plain unit files only (fs::metadata follows aliases); *.wants/ are not needed.
            if fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
                fs::copy(entry.path(), host_units.join(entry.file_name())).expect("copy unit");
            }
        }
        let etc = root.join("etc/systemd/system");
        for unit in UNITS {
            fs::create_dir_all(etc.join(format!("{unit}.d"))).expect("mkdir");
            fs::copy(repo(&format!("systemd/{unit}")), etc.join(unit)).expect("copy unit");
            fs::copy(
                repo("systemd/credentials.conf.example"),
                etc.join(format!("{unit}.d/credentials.conf")),
            )
            .expect("copy drop-in");
        }
        let bin = root.join(INSTALLED_BIN.trim_start_matches('/'));
        fs::create_dir_all(bin.parent().expect("parent")).expect("mkdir");
        if fs::hard_link(BIN, &bin).is_err() {
            fs::copy(BIN, &bin).expect("copy the binary");
        }
        let man1 = root.join("man/man1");
        fs::create_dir_all(&man1).expect("mkdir");
        for page in fs::read_dir(repo("dist/man")).expect("dist/man") {
            let page = page.expect("dir entry");
            fs::copy(page.path(), man1.join(page.file_name())).expect("copy man page");
        }
        Root { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn analyze(&self, args: &[&str]) -> Output {
        // `man` is checked up front so that its absence is not mistaken for a missing page.
        let _ = tool("man", "man-db");
        let mut cmd = tool("systemd-analyze", "systemd");
        cmd.arg(format!("--root={}", self.path().display()))
            .arg("--no-pager")
            .args(args)
            .env("MANPATH", self.path().join("man"))
            .env("SYSTEMD_LOG_COLOR", "0")
            .current_dir(self.path());
        run(&mut cmd)
    }

    fn verify(&self, units: &[&str]) -> Output {
        let mut args = vec!["verify"];
        args.extend_from_slice(units);
        self.analyze(&args)
    }
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    let root = Root::new();
    let out = root.verify(&["driftless.service", "driftless@demo.service"]);
    // verify exits 0 on settings it could not parse ("..., ignoring"): any output fails.
    assert!(
        out.status.success() && out.stderr.is_empty() && out.stdout.is_empty(),
        "systemd-analyze verify ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The arrangement above really checks: a missing binary, a bad setting and a missing man
/// page each fail it.
#[test]
fn systemd_analyze_verify_catches_mistakes() {
    let root = Root::new();
    let bin = root.path().join(INSTALLED_BIN.trim_start_matches('/'));
    fs::remove_file(&bin).expect("rm binary");
    let out = root.verify(&["driftless.service"]);
    assert!(!out.status.success(), "verify passed without the binary");
    assert!(
        text(&out.stderr).contains(INSTALLED_BIN),
        "{}",
        text(&out.stderr)
    );

    let root = Root::new();
    let unit = root.path().join("etc/systemd/system/driftless@.service");
    let broken = fs::read_to_string(&unit)
        .expect("read")
        .replace("ProtectHome=yes", "ProtectHome=maybe");
    fs::write(&unit, broken).expect("write");
    let out = root.verify(&["driftless@demo.service"]);
    assert!(
        text(&out.stderr).contains("ProtectHome") || text(&out.stderr).contains("protect home"),
        "a bad setting went unnoticed: {}",
        text(&out.stderr)
    );

    let root = Root::new();
    fs::remove_file(root.path().join("man/man1/driftless-run.1")).expect("rm page");
    let out = root.verify(&["driftless.service"]);
    assert!(!out.status.success(), "verify passed without the man page");
}

/// `systemd-analyze security` rates exposure 0.0 (best) to 10.0: PERFECT 0.0, SAFE below
/// 1.0, OK below 5.0, then MEDIUM, EXPOSED, UNSAFE, DANGEROUS.
#[test]
fn systemd_units_are_rated_ok_or_better_by_systemd_analyze_security() {
    let root = Root::new();
    for unit in ["driftless.service", "driftless@demo.service"] {
        let out = root.analyze(&["security", "--offline=true", unit]);
        let report = text(&out.stdout);
        assert!(
            out.status.success(),
            "systemd-analyze security {unit} ({}):\n{report}{}",
            out.status,
            text(&out.stderr)
        );
        let prefix = format!("Overall exposure level for {unit}: ");
        let line = report
            .lines()
            .find_map(|l| l.split_once(&prefix).map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("no overall exposure level in:\n{report}"));
        let mut words = line.split_whitespace();
        let score: f64 = words
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no score in {line:?}"));
        let rating = words.next().unwrap_or_default();
        eprintln!("{unit}: exposure {score} {rating}");
        assert!(
            score < 5.0 && ["OK", "SAFE", "PERFECT"].contains(&rating),
            "{unit} is rated {score} {rating}, worse than OK:\n{report}"
        );
    }
}

/// The settings the issue asks for, in both units, and the two units hardened alike.
#[test]
fn systemd_units_are_hardened_and_restart_on_failure() {
    let mut hardening = Vec::new();
    for unit in UNITS {
        let d = directives(&read(&format!("systemd/{unit}")));
        for (key, want) in [
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"),
            ("DynamicUser", "yes"),
            ("CapabilityBoundingSet", ""),
            ("AmbientCapabilities", ""),
            ("Restart", "on-failure"),
        ] {
            assert_eq!(values(&d, key), [want], "{unit}: {key}");
        }
        assert!(
            values(&d, "SystemCallFilter").contains(&"@system-service"),
            "{unit}: SystemCallFilter"
        );
        for key in ["StateDirectory", "CacheDirectory", "EnvironmentFile"] {
            assert_eq!(values(&d, key).len(), 1, "{unit}: {key}");
        }
        let env_file = values(&d, "EnvironmentFile")[0];
        assert!(
            env_file.starts_with("/etc/driftless/"),
            "{unit}: {env_file}"
        );
        // The status file goes to the StateDirectory (%S is /var/lib).
        let state = values(&d, "StateDirectory")[0];
        let exec = values(&d, "ExecStart")[0];
        assert!(
            exec.contains(&format!("--status-file=%S/{state}/status.json")),
            "{unit}: the status file is not in StateDirectory={state}: {exec}"
        );
        let block: Vec<(String, String)> = d
            .iter()
            .skip_while(|(k, _)| k != "NoNewPrivileges")
            .cloned()
            .collect();
        hardening.push(block);
    }
    assert_eq!(
        hardening[0], hardening[1],
        "driftless.service and driftless@.service are hardened differently"
    );
}

#[test]
fn systemd_exec_start_and_env_example_use_existing_flags() {
    for unit in UNITS {
        let d = directives(&read(&format!("systemd/{unit}")));
        let exec = values(&d, "ExecStart");
        assert_eq!(exec.len(), 1, "{unit}: one ExecStart");
        let argv: Vec<&str> = exec[0].split_whitespace().collect();
        assert_eq!(argv[0], INSTALLED_BIN, "{unit}: ExecStart binary");
        assert_eq!(argv[1], "run", "{unit}: ExecStart runs the daemon");
        assert!(argv.contains(&"$DRIFTLESS_ARGS"), "{unit}: {argv:?}");
        assert_flags_exist(&format!("{unit} ExecStart"), "run", &argv[2..]);
    }
    // Every DRIFTLESS_ARGS in the example, commented out or not.
    let example = read("systemd/driftless.env.example");
    let mut seen = 0;
    for line in example.lines() {
        let Some(args) = line.trim_start_matches('#').strip_prefix("DRIFTLESS_ARGS=") else {
            continue;
        };
        seen += 1;
        let argv: Vec<&str> = args.split_whitespace().collect();
        assert_flags_exist("driftless.env.example's DRIFTLESS_ARGS", "run", &argv);
        assert!(
            !argv.iter().any(|a| a.starts_with("--status-file")),
            "the units pass --status-file already: {line}"
        );
    }
    assert!(seen >= 2, "no DRIFTLESS_ARGS examples found");
}

/// Every DRIFTLESS_* variable the shipped files mention is one the code reads.
#[test]
fn shipped_files_name_only_variables_the_code_reads() {
    let mut sources = String::new();
    let mut stack = vec![repo("src")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push_str(&fs::read_to_string(&path).expect("read source"));
            }
        }
    }
    for file in [
        "systemd/driftless.service",
        "systemd/driftless@.service",
        "systemd/driftless.env.example",
        "systemd/credentials.conf.example",
        "Dockerfile",
    ] {
        let content = read(file);
        let mut rest = content.as_str();
        while let Some(at) = rest.find("DRIFTLESS_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            // DRIFTLESS_ARGS is the units' own variable; `DRIFTLESS_GIT_*` is prose.
            if name == "DRIFTLESS_ARGS" || name.ends_with('_') {
                continue;
            }
            assert!(
                sources.contains(&format!("\"{name}\"")),
                "{file} mentions {name}, which nothing in src/ reads"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Dockerfile

#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
}

#[derive(Debug)]
struct Stage {
    from: String,
    instructions: Vec<Instruction>,
}

impl Stage {
    fn all(&self, keyword: &str) -> Vec<&str> {
        self.instructions
            .iter()
            .filter(|i| i.keyword == keyword)
            .map(|i| i.args.as_str())
            .collect()
    }

    /// The last one of a keyword (the one that counts for ENTRYPOINT, CMD, USER).
    fn last(&self, keyword: &str) -> Option<&str> {
        self.all(keyword).last().copied()
    }
}

/// Instructions grouped by stage: comments dropped, `\` continuations joined.
fn dockerfile_stages(text: &str) -> Vec<Stage> {
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for line in logical {
        let (keyword, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let instruction = Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_string(),
        };
        if instruction.keyword == "FROM" {
            stages.push(Stage {
                from: instruction.args.clone(),
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(instruction);
        }
    }
    stages
}

/// An exec-form (JSON array) ENTRYPOINT/CMD/HEALTHCHECK CMD; shell form needs a shell.
fn exec_form(what: &str, args: &str) -> Vec<String> {
    serde_json::from_str::<Vec<String>>(args)
        .unwrap_or_else(|e| panic!("{what} is not in exec form (a JSON array): {args} ({e})"))
}

#[test]
fn dockerfile_builds_locked_and_runs_non_root_without_a_shell() {
    let stages = dockerfile_stages(&read("Dockerfile"));
    assert!(stages.len() >= 2, "a multi-stage build: {stages:#?}");
    let (runtime, builders) = stages.split_last().expect("stages");

    // Build: locked dependencies, release profile, a pinned toolchain image.
    let builds: Vec<&str> = builders
        .iter()
        .flat_map(|s| s.all("RUN"))
        .filter(|r| r.contains("cargo build"))
        .collect();
    assert_eq!(builds.len(), 1, "one cargo build: {builds:?}");
    for flag in ["--locked", "--release"] {
        assert!(builds[0].contains(flag), "cargo build without {flag}");
    }
    for stage in &stages {
        let image = stage.from.split_whitespace().next().unwrap_or_default();
        assert!(
            image.contains(':') && !image.ends_with(":latest"),
            "FROM {image} is not pinned"
        );
    }
    // Every workspace member is in the build context, or cargo cannot read the workspace.
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml");
    let members = manifest["workspace"]["members"]
        .as_array()
        .expect("workspace members");
    let copies: Vec<&str> = builders.iter().flat_map(|s| s.all("COPY")).collect();
    let dockerignore = read(".dockerignore");
    for member in members.iter().filter_map(|m| m.as_str()) {
        let wanted: Vec<String> = if member == "." {
            vec!["Cargo.toml".into(), "Cargo.lock".into(), "src".into()]
        } else {
            vec![member.to_string()]
        };
        for path in wanted {
            assert!(
                copies
                    .iter()
                    .any(|c| c.split_whitespace().any(|w| w == path)),
                "the build stage does not COPY {path}"
            );
            assert!(
                dockerignore
                    .lines()
                    .any(|l| l.trim().trim_end_matches('/') == format!("!{path}")),
                ".dockerignore does not let {path} into the build context"
            );
        }
    }

    // Runtime: nothing runs a shell, a numeric non-root user, exec-form commands.
    assert!(
        runtime.all("RUN").is_empty() && runtime.all("SHELL").is_empty(),
        "the runtime stage runs shell commands (its image has no shell)"
    );
    let user = runtime.last("USER").expect("the runtime stage sets USER");
    let ids: Vec<u32> = user
        .split(':')
        .map(|id| {
            id.parse()
                .unwrap_or_else(|_| panic!("USER {user} is not numeric"))
        })
        .collect();
    assert!(
        !ids.is_empty() && ids.iter().all(|&id| id != 0),
        "USER {user} is root"
    );
    let entrypoint = exec_form(
        "ENTRYPOINT",
        runtime.last("ENTRYPOINT").expect("an ENTRYPOINT"),
    );
    let cmd = runtime
        .last("CMD")
        .map(|c| exec_form("CMD", c))
        .unwrap_or_default();
    if let Some(check) = runtime.last("HEALTHCHECK")
        && check != "NONE"
    {
        let (_, command) = check.split_once("CMD").expect("HEALTHCHECK ... CMD");
        exec_form("HEALTHCHECK CMD", command.trim());
    }

    // The binary it starts is the one the build installed, and its flags exist.
    assert_eq!(entrypoint[0], INSTALLED_BIN, "ENTRYPOINT binary");
    assert!(
        runtime
            .all("COPY")
            .iter()
            .any(|c| c.starts_with("--from=") && c.ends_with(INSTALLED_BIN)),
        "the runtime stage does not COPY the binary to {INSTALLED_BIN}"
    );
    let argv: Vec<&str> = entrypoint[1..]
        .iter()
        .chain(&cmd)
        .map(String::as_str)
        .collect();
    let subcommand = argv
        .iter()
        .find(|a| !a.starts_with('-'))
        .expect("ENTRYPOINT/CMD name a subcommand");
    assert_flags_exist("the Dockerfile's ENTRYPOINT + CMD", subcommand, &argv);
    // The HTTP port (/healthz, /readyz, /metrics) listens on all interfaces and is exposed.
    if *subcommand == "run" {
        let addr = argv
            .iter()
            .find_map(|a| a.strip_prefix("--metrics-addr="))
            .expect("--metrics-addr=ADDR (the default is loopback, unreachable from outside)");
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        assert!(host == "0.0.0.0" || host == "[::]", "--metrics-addr={addr}");
        let exposed = runtime.all("EXPOSE");
        assert!(
            exposed.iter().any(|e| e
                .split_whitespace()
                .any(|p| p.split('/').next() == Some(port))),
            "port {port} is not EXPOSEd ({exposed:?})"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Completions and man pages

#[test]
fn committed_completions_and_man_pages_are_current() {
    let fresh = tempfile::tempdir().expect("temp dir");
    for (what, dir) in [("completions", "dist/completions"), ("man", "dist/man")] {
        let out_dir = fresh.path().join(what);
        let out = run(Command::new(BIN).arg(what).arg("--out-dir").arg(&out_dir));
        assert!(
            out.status.success(),
            "driftless {what}: {}",
            text(&out.stderr)
        );
        support::assert_generated_current(&out_dir, dir, "scripts/gen-dist");
    }
}

#[test]
fn completions_and_man_print_to_stdout() {
    let out = run(Command::new(BIN).args(["completions", "bash"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        out.stdout,
        fs::read(repo("dist/completions/driftless.bash")).expect("read")
    );
    let out = run(Command::new(BIN).args(["man"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        out.stdout,
        fs::read(repo("dist/man/driftless.1")).expect("read")
    );
    let out = run(Command::new(BIN).args(["man", "run"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        out.stdout,
        fs::read(repo("dist/man/driftless-run.1")).expect("read")
    );
    let out = run(Command::new(BIN).args(["man", "nope"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("run"), "{}", text(&out.stderr));
    // Hidden: not in the top-level help.
    let help = text(&run(Command::new(BIN).arg("--help")).stdout);
    assert!(
        !help.contains("completions") && !help.contains("  man "),
        "{help}"
    );
}
