//! The docs a newcomer reads: the book's generated reference is what the code generates
//! now, every link inside the book and the README leads somewhere, the README stays a
//! front door (short, its commands real), and its 5-minute start runs as written against
//! the local cluster. `mdbook build docs` itself runs in scripts/test (no warnings).

use crate::support;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::show;

const BIN: &str = env!("CARGO_BIN_EXE_driftless");

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn committed_reference_pages_are_current() {
    let fresh = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["reference", "--out-dir"])
        .arg(fresh.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    support::assert_generated_current(fresh.path(), "docs/src/reference", "scripts/gen-dist");
}

/// The pages SUMMARY.md lists, relative to docs/src.
fn summary_pages() -> Vec<String> {
    links(&read(&repo("docs/src/SUMMARY.md")))
        .into_iter()
        .filter(|l| l.ends_with(".md"))
        .collect()
}

/// Every `.md` file under docs/src (but SUMMARY.md), relative to it.
fn book_pages() -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let root = repo("docs/src");
    let mut out = BTreeSet::new();
    walk(&root, &root, &mut out);
    out.remove("SUMMARY.md");
    out
}

#[test]
fn every_page_is_in_the_summary_and_every_reference_page_too() {
    let listed: BTreeSet<String> = summary_pages().into_iter().collect();
    assert_eq!(
        listed,
        book_pages(),
        "SUMMARY.md and the pages of docs/src differ"
    );
    for entry in fs::read_dir(repo("docs/src/reference")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            listed.contains(&format!("reference/{name}")),
            "reference/{name} is not in SUMMARY.md"
        );
    }
}

/// The targets of the inline links and images of a Markdown text, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Code spans hold `](` that are not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// The anchors mdbook gives a page's headings: lowercased, spaces as `-`, anything but
/// letters, digits, `-` and `_` dropped; a repeated one gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        // A link in a heading counts by its text.
        let mut plain = String::new();
        let mut rest = title;
        while let Some(open) = rest.find('[') {
            plain.push_str(&rest[..open]);
            match rest[open..].find("](").zip(rest[open..].find(')')) {
                Some((mid, close)) if mid < close => {
                    plain.push_str(&rest[open + 1..open + mid]);
                    rest = &rest[open + close + 1..];
                }
                _ => {
                    plain.push('[');
                    rest = &rest[open + 1..];
                }
            }
        }
        plain.push_str(rest);
        let id: String = plain
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_ascii_lowercase())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 1;
        while out.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        out.insert(unique);
    }
    out
}

/// Every relative link of `file` that leads nowhere: a missing file, or an anchor its
/// page does not have.
fn broken_links(file: &Path) -> Vec<String> {
    let dir = file.parent().unwrap();
    let mut broken = Vec::new();
    for link in links(&read(file)) {
        if link.contains("://") || link.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match link.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (link.as_str(), None),
        };
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        if !target.exists() {
            broken.push(format!("{link}: no {}", target.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let known = anchors(&read(&target));
            if !known.contains(anchor) {
                broken.push(format!("{link}: no heading #{anchor} (has {known:?})"));
            }
        }
    }
    broken
}

#[test]
fn every_link_of_the_book_and_the_readme_leads_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    let mut files: Vec<PathBuf> = book_pages()
        .iter()
        .map(|p| repo("docs/src").join(p))
        .collect();
    files.push(repo("docs/src/SUMMARY.md"));
    files.push(repo("README.md"));
    for file in &files {
        checked += links(&read(file)).len();
        for b in broken_links(file) {
            broken.push(format!("{}: {b}", file.display()));
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: the reader is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_checker_catches_a_broken_link() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("a.md"),
        "# A page\n\n## Its `second` part\n\n[ok](#its-second-part) [ok](a.md#a-page)\n\
         [gone](b.md) [no anchor](a.md#nope) `[code](c.md)`\n",
    )
    .unwrap();
    let broken = broken_links(&dir.path().join("a.md"));
    assert_eq!(broken.len(), 2, "{broken:#?}");
    assert!(broken[0].starts_with("b.md: no "), "{broken:#?}");
    assert!(
        broken[1].starts_with("a.md#nope: no heading"),
        "{broken:#?}"
    );
}

#[test]
fn every_schema_field_flag_and_metric_is_in_the_generated_reference() {
    let reference = |page: &str| read(&repo(&format!("docs/src/reference/{page}")));
    // The schema's fields, each on the page of its kind (nested types included).
    let schema: serde_json::Value =
        serde_json::from_str(&driftless::spec::schema::generate().unwrap()).unwrap();
    let kinds = [
        "workspace",
        "elasticweb",
        "localservice",
        "manifest",
        "helm",
    ];
    let all_kind_pages: String = kinds
        .iter()
        .map(|k| reference(&format!("{k}.md")))
        .collect();
    for (name, def) in schema["definitions"].as_object().unwrap() {
        for field in def["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(f, _)| f)
        {
            assert!(
                all_kind_pages.contains(&format!("| `{field}` |")),
                "{name}.{field} is not in the reference"
            );
        }
    }
    // Every metric of the registry.
    let metrics = reference("metrics.md");
    for m in driftless::report::metrics::documented() {
        assert!(metrics.contains(&format!("`{}", m.name)), "{}", m.name);
    }
    // Every long flag `--help` shows, for every command.
    let cli = reference("cli.md");
    let help = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let commands: Vec<String> = help(&["--help"])
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 9, "{commands:?}");
    for command in &commands {
        assert!(
            cli.contains(&format!("## `driftless {command}`")),
            "{command}"
        );
        for word in help(&[command, "--help"]).split_whitespace() {
            let flag = word.trim_end_matches(',');
            if let Some(long) = flag.strip_prefix("--")
                && !long.is_empty()
                && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !["help", "version"].contains(&long)
            {
                assert!(cli.contains(&format!("`--{long}`")), "{command} --{long}");
            }
        }
    }
}

/// The README's sections: `## Title` to the next.
fn readme_section(readme: &str, title: &str) -> String {
    readme
        .split("\n## ")
        .find(|s| s.starts_with(title))
        .unwrap_or_else(|| panic!("no `## {title}` in README.md"))
        .to_string()
}

/// The shell blocks of a Markdown text, in order.
fn shell_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn the_readme_is_a_front_door_and_its_commands_are_real() {
    let readme = read(&repo("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the book holds the rest"
    );
    // The two set-up commands, exactly as CI and the demo run them.
    let setup = shell_blocks(&readme_section(&readme, "Working on driftless"));
    let commands: Vec<&str> = setup
        .iter()
        .flat_map(|b| b.lines())
        .filter_map(|l| l.split('#').next().map(str::trim))
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["scripts/demo", "scripts/test"]);
    assert!(read(&repo(".ci/run")).contains("exec scripts/test"));
    for script in commands {
        let mode = fs::metadata(repo(script)).unwrap();
        assert!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111 != 0,
            "{script} is not executable"
        );
    }
    // Install: what the commands name exists, with the flags the binary has.
    let install = readme_section(&readme, "Install");
    for path in ["Dockerfile", "examples/kubernetes/namespace.yaml", "specs"] {
        assert!(install.contains(path), "{path} is no longer in Install");
        assert!(repo(path).exists(), "Install names {path}, which is gone");
    }
    // Every path a command of the section names exists.
    for word in shell_blocks(&install).join(" ").split_whitespace() {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        let path = word.split(':').next().unwrap_or(word);
        let path = path.trim_start_matches("$PWD/");
        if path.starts_with("examples/") || path.starts_with("specs") {
            assert!(repo(path).exists(), "Install names {path}, which is gone");
        }
    }
    let dockerfile = read(&repo("Dockerfile"));
    assert!(
        install.contains("--entrypoint /usr/local/bin/driftless")
            && dockerfile.contains("/usr/local/bin/driftless"),
        "the image's binary moved"
    );
    // The image's one-shot command, with the binary the image holds.
    assert!(install.contains("driftless validate /specs"));
    let out = Command::new(BIN)
        .args(["validate", repo("specs").to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let cargo = read(&repo("Cargo.toml"));
    let rust = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version");
    assert!(
        readme.contains(&format!("(Rust {rust} or newer)")),
        "README names another Rust than Cargo.toml's {rust}"
    );
}

/// The shell blocks between the quick start's marks.
fn quick_start() -> String {
    let readme = read(&repo("README.md"));
    let start = readme
        .find("<!-- quickstart")
        .expect("the quick start's start mark");
    let end = readme.find("<!-- /quickstart -->").expect("its end mark");
    let blocks = shell_blocks(&readme[start..end]);
    assert!(blocks.len() >= 4, "{blocks:#?}");
    blocks.join("")
}

/// The README's 5-minute start, run as written by bash in an empty directory, with
/// `driftless` on PATH and the local cluster as the kubeconfig's. Its daemon listens on
/// the default address, which tests/security.rs's daemon also takes: when that one holds
/// it, the run is repeated once it is free.
#[test]
fn the_readme_quick_start_runs_as_written() {
    let script = quick_start();
    let kubeconfig = support::admin_kubeconfig();
    let bin_dir = Path::new(BIN).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let deadline = Instant::now() + support::WAIT;
    loop {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", dir.path())
            .env_remove("XDG_STATE_HOME")
            .env_remove("DRIFTLESS_INSTANCE")
            .env_remove("DRIFTLESS_STATUS_FILE")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own, so the daemon it starts in the background goes with it
            // even when a step fails before the script's own `kill %1`.
            .process_group(0)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(300) {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", child.id())])
            .stderr(Stdio::null())
            .status();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("binding 127.0.0.1:9477") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_secs(2));
            continue;
        }
        assert!(
            out.status.success(),
            "the quick start failed:\n{}",
            show(&out)
        );
        // render: a Deployment and a Service; the API: the change applied and ready.
        assert!(stdout.lines().any(|l| l.trim() == "2"), "{}", show(&out));
        assert!(
            stdout.contains("\"desired_replicas\": 4"),
            "the daemon did not apply the change:\n{}",
            show(&out)
        );
        assert!(
            stdout.contains("\"available_replicas\": 4"),
            "not ready:\n{}",
            show(&out)
        );
        break;
    }
}

/// The fenced blocks of one language in a Markdown text, in order.
fn fenced(text: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut current {
            None if trimmed == open => current = Some(String::new()),
            Some(block) if trimmed == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// The clusters the book's examples name (docs "Fleets" declares them so).
const BOOK_CLUSTERS: &str = "[cluster.prod-eu]\nkubeconfig = \"eu\"\nlabels = { env = \"prod\" }\n[cluster.prod-us]\nkubeconfig = \"us\"\nlabels = { env = \"prod\" }\n";

/// A reader copies an example from a guide: every TOML block, and every YAML block that
/// is a Kubernetes object, is a valid spec file (or `.driftless.toml`) on its own.
#[test]
fn every_spec_example_of_the_book_validates() {
    let mut checked = 0;
    for page in book_pages().iter().filter(|p| !p.starts_with("reference/")) {
        let text = read(&repo("docs/src").join(page));
        let toml = fenced(&text, "toml").into_iter().map(|b| (b, "toml"));
        let yaml = fenced(&text, "yaml")
            .into_iter()
            // An Argo CD plugin's definition is the operator's file, never a tree's.
            .filter(|b| {
                b.contains("apiVersion:")
                    && b.contains("kind:")
                    && !b.contains("kind: ConfigManagementPlugin")
            })
            .map(|b| (b, "yaml"));
        for (i, (block, ext)) in toml.chain(yaml).enumerate() {
            let dir = tempfile::tempdir().unwrap();
            // `#:schema` points at the schema next to the tree; it is a comment to us. A
            // block of tree-level settings is validated as the tree's `.driftless.toml`.
            let settings = ext == "toml"
                && block.lines().any(|l| {
                    [
                        "[vars]",
                        "[apps]",
                        "[[namespace]]",
                        "[[ignore]]",
                        "[[health]]",
                        "[kustomize]",
                        "[jsonnet]",
                        "[repository]",
                        "[[cluster]]",
                    ]
                    .contains(&l.trim())
                });
            // The operator's clusters file (docs "Fleets"): read as `--clusters` reads
            // it, beside an empty tree; the tree-level examples name its clusters.
            let clusters_file = ext == "toml"
                && block
                    .lines()
                    .any(|l| l.trim_start().starts_with("[cluster."));
            let name = match (settings, clusters_file) {
                (true, _) => ".driftless.toml".to_string(),
                (false, true) => "clusters.toml".to_string(),
                (false, false) => format!("example.{ext}"),
            };
            // A release from a chart repository or registry on the internet is not pulled here
            // (tests reach loopback only): its fields are checked as the loader reads them.
            if block.contains("repository = \"https://") || block.contains("chart = \"oci://") {
                let (releases, errors) =
                    driftless::spec::helm::releases(&[driftless::spec::SourceFile {
                        path: "example.toml".into(),
                        contents: block.clone().into_bytes(),
                    }]);
                assert!(
                    errors.is_empty() && !releases.is_empty(),
                    "{page}: example {} is not valid: {errors:?}\n{block}",
                    i + 1
                );
                checked += 1;
                continue;
            }
            let tree = dir.path().join("tree");
            fs::create_dir_all(&tree).unwrap();
            match clusters_file {
                true => fs::write(dir.path().join(&name), &block).unwrap(),
                false => fs::write(tree.join(&name), &block).unwrap(),
            }
            if !clusters_file {
                fs::write(dir.path().join("clusters.toml"), BOOK_CLUSTERS).unwrap();
            }
            // A release needs its chart (podinfo's, from ../shared/sources) and helm.
            let mut helm = Vec::new();
            if block.contains("[helm.") {
                support::copy_tree(
                    &repo("../shared/sources/podinfo/6.2.3/charts/podinfo"),
                    &tree.join("charts/podinfo"),
                    &[],
                );
                fs::create_dir_all(tree.join("values")).unwrap();
                fs::write(tree.join("values/prod.yaml"), "{}\n").unwrap();
                helm = vec![
                    "--helm".to_string(),
                    std::env::var("DRIFTLESS_TEST_HELM4")
                        .expect("DRIFTLESS_TEST_HELM4 names the testbed's helm 4"),
                ];
            }
            let out = Command::new(BIN)
                .arg("validate")
                .arg(&tree)
                .arg("--clusters")
                .arg(dir.path().join("clusters.toml"))
                .args(["--cluster", "in-cluster"])
                .args(&helm)
                .env("RUST_LOG", "warn")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{page}: example {} ({ext}) is not valid:\n{block}\n{}",
                i + 1,
                show(&out)
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} examples found");
}
