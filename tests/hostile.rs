//! Hostile input (issue 8, "Bad input"): deep nesting, huge strings and files, binary
//! garbage, invalid UTF-8, colliding names, overflowing numbers, NodePort collisions,
//! manifests claiming driftless's ownership marks or protected namespaces. Each gives a
//! clear error at a position, never a panic, a stack overflow or a hang; and a tree with
//! any of them applies nothing (the one cluster-backed test at the end).
//!
//! Small cases are files in `tests/corpus/hostile/` with `# error:` lines (as in
//! `tests/corpus/invalid/`); big ones are generated here at run time, never committed.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use driftless::render::{Facts, NodeFacts, RenderError, render};
use driftless::spec::{
    MAX_ERRORS_PER_FILE, MAX_FILE_BYTES, Policy, SourceFile, parse_files, parse_files_with,
    read_dir,
};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn file(path: &str, contents: impl Into<Vec<u8>>) -> SourceFile {
    SourceFile {
        path: path.to_string(),
        contents: contents.into(),
    }
}

/// Every error of a tree, as `validate` prints them; empty when valid.
fn errors(files: &[SourceFile]) -> Vec<String> {
    match parse_files(files) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

fn errors_of(path: &str, contents: impl Into<Vec<u8>>) -> Vec<String> {
    errors(&[file(path, contents)])
}

/// A deterministic stream of pseudo-random bytes (xorshift64).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Each case of `tests/corpus/hostile` (a file, or a directory of files) gives exactly
/// the errors its `# error: [FILE:]LINE:COL: message` lines list.
#[test]
fn hostile_corpus_reports_exact_positions_and_messages() {
    let dir = repo("tests/corpus/hostile");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 13, "corpus shrank to {}", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let files = read_dir(&case).unwrap();
        let single = case.is_file();
        let mut expected: Vec<String> = files
            .iter()
            .flat_map(|f| {
                let text = String::from_utf8_lossy(&f.contents).into_owned();
                text.lines()
                    .filter_map(|l| l.strip_prefix("# error: "))
                    .map(|e| {
                        if single {
                            format!("{}:{e}", f.path)
                        } else {
                            e.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(!expected.is_empty(), "{} has no `# error:`", case.display());
        expected.sort();
        let mut got = errors(&files);
        got.sort();
        if got != expected {
            failures.push(format!(
                "{}:\n  expected {expected:#?}\n  got {got:#?}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_file_over_the_size_limit_is_refused_unparsed() {
    // 10 MB of what would be valid TOML: refused for its size alone.
    let mut big = b"[workspace.a]\nimage = \"x\"\n".to_vec();
    big.resize(10_000_000, b'#');
    assert_eq!(
        errors_of("big.toml", big),
        ["big.toml:1:1: file is larger than 4 MiB, the limit for a spec file; not read"]
    );
    // Exactly at the limit is fine.
    let mut full = b"[workspace.a]\nimage = \"x\"\n#".to_vec();
    full.resize(MAX_FILE_BYTES, b'#');
    assert_eq!(errors_of("full.toml", full), Vec::<String>::new());
}

#[test]
fn the_size_limit_holds_when_reading_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.toml"), vec![b'#'; 10_000_000]).unwrap();
    let files = read_dir(dir.path()).unwrap();
    // Read up to one byte past the limit, no more.
    assert_eq!(files[0].contents.len(), MAX_FILE_BYTES + 1);
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let n = 100_000;
    let nested = "nested too deeply (arrays, inline tables or dotted keys)";
    let cases = [
        (
            "arrays.toml",
            format!("a = {}{}", "[".repeat(n), "]".repeat(n)),
            "1:85",
        ),
        ("unclosed.toml", format!("a = {}", "[".repeat(n)), "1:85"),
        (
            "tables.toml",
            format!("a = {}1{}", "{ b = ".repeat(n), " }".repeat(n)),
            "1:485",
        ),
        (
            "dotted.toml",
            format!("{} = 1", vec!["a"; n].join(".")),
            "1:1",
        ),
        (
            "header.toml",
            format!("[{}]", vec!["a"; n].join(".")),
            "1:1",
        ),
        (
            "array-tables.toml",
            format!("[[{}]]", vec!["a"; n].join(".")),
            "1:1",
        ),
    ];
    for (path, text, at) in cases {
        let got = errors_of(path, text);
        assert_eq!(
            got.first().map(String::as_str),
            Some(format!("{path}:{at}: invalid TOML: {nested}").as_str()),
            "{got:?}"
        );
    }
    // Just under the limit, in a manifest: loads, converts and renders (recursively).
    let text = format!(
        "[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"x\" }}\nspec = {}1{}\n",
        "[".repeat(78),
        "]".repeat(78)
    );
    let tree = parse_files(&[file("ok.toml", text)]).unwrap();
    render(&tree, &Facts::default()).unwrap();
}

#[test]
fn huge_strings_give_short_errors() {
    let mb3 = 3 << 20;
    let cases = [
        (
            format!("[workspace.a]\nimage = \"{}\"\n", "x".repeat(mb3)),
            format!(
                "s.toml:2:9: invalid `image` \"{}\"… ({mb3} bytes): is {mb3} bytes long; an image reference is at most 1024",
                "x".repeat(64)
            ),
        ),
        (
            format!("[workspace.{}]\nimage = \"x\"\n", "a".repeat(mb3)),
            format!(
                "s.toml:1:12: invalid workspace name \"{}\"… ({mb3} bytes): must be at most 63 characters (is {mb3})",
                "a".repeat(64)
            ),
        ),
        (
            format!(
                "[workspace.a]\nimage = \"x\"\n{} = 1\n",
                "imag".repeat(mb3 / 4)
            ),
            format!(
                "s.toml:3:1: unknown field `{}… ({mb3} bytes)` in workspace `a`; known fields: namespace, image, port, cpu, memory, storage, storage-class, access-mode, mount-path, state, adopt, ignore-fields, depends-on, prune, replace, wave",
                "imag".repeat(16)
            ),
        ),
        (
            format!(
                "[workspace.a]\nimage = \"x\"\ncpu = \"{}\"\n",
                "9".repeat(mb3)
            ),
            format!(
                "s.toml:3:7: invalid quantity for `cpu`: \"{}\"… ({mb3} bytes) (too large: at most 9223372036854775807m)",
                "9".repeat(64)
            ),
        ),
        (
            format!(
                "[workspace.a]\nimage = \"x\"\nmount-path = \"/{}\"\n",
                "d".repeat(mb3)
            ),
            format!(
                "s.toml:3:14: `mount-path` is {} bytes long; a path is at most 4096",
                mb3 + 1
            ),
        ),
        (
            format!(
                "[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"big\" }}\ndata = {{ a = \"{}\" }}\n",
                "x".repeat(mb3)
            ),
            format!(
                "s.toml:1:1: manifest ConfigMap/big is {} bytes as JSON, more than the 1536 KiB the apiserver stores for one object",
                mb3 + 80
            ),
        ),
    ];
    for (text, expected) in cases {
        let got = errors_of("s.toml", text);
        assert_eq!(got, [expected]);
    }
}

#[test]
fn binary_garbage_and_invalid_utf8_are_named_as_such() {
    let not_utf8 = "file is not valid UTF-8: binary data, or text in another encoding; a spec file is UTF-8 TOML";
    // Random bytes: not UTF-8 early on; one error.
    let got = errors_of("noise.toml", noise(1 << 20, 7));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("noise.toml:1:"), "{got:?}");
    assert!(got[0].ends_with(not_utf8), "{got:?}");
    // Invalid UTF-8 in the middle of a line: its exact place.
    let got = errors_of(
        "latin1.toml",
        b"[workspace.a]\nimage = \"x\"\n# caf\xe9\n".to_vec(),
    );
    assert_eq!(got, [format!("latin1.toml:3:6: {not_utf8}")]);
    // UTF-16 (a byte order mark, then NULs).
    let utf16: Vec<u8> = [0xff, 0xfe]
        .into_iter()
        .chain("a = 1\n".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    assert_eq!(
        errors_of("utf16.toml", utf16),
        [format!("utf16.toml:1:1: {not_utf8}")]
    );
    // Valid UTF-8 but binary: a NUL byte.
    assert_eq!(
        errors_of("nul.toml", b"[workspace.a]\nimage = \"x\"\0\n".to_vec()),
        ["nul.toml:2:12: file contains a NUL byte: binary data, not a TOML text file"]
    );
}

/// A file of garbage makes the parser report an error per token: millions of them. The
/// first hundred are kept, and one more line says how many were left out.
#[test]
fn a_file_of_garbage_gives_a_bounded_list_of_errors() {
    let lines = 200_000;
    let got = errors_of("garbage.toml", "=\n".repeat(lines));
    assert_eq!(got.len(), MAX_ERRORS_PER_FILE + 1);
    let last = got.last().unwrap();
    assert!(
        last.starts_with(&format!("garbage.toml:{}:1: ", lines + 1))
            && last.ends_with(" more errors in this file not shown (only the first 100 are)"),
        "{last}"
    );
    // Printable noise: also bounded, also positioned.
    let text: String = noise(1 << 20, 11)
        .into_iter()
        .map(|b| b" =[]{}\"'.,\na1#"[usize::from(b) % 14] as char)
        .collect();
    let got = errors_of("noise.toml", text);
    assert!(
        !got.is_empty() && got.len() <= MAX_ERRORS_PER_FILE + 1,
        "{}",
        got.len()
    );
    assert!(got.iter().all(|e| e.starts_with("noise.toml:")), "{got:?}");
}

/// Names that only collide once a localservice's node names are sanitised, or with
/// another spec's objects, are known at render time: rendering refuses them.
#[test]
fn names_colliding_after_sanitising_are_a_render_error() {
    let node = |name: &str| NodeFacts {
        name: name.to_string(),
        labels: BTreeMap::new(),
    };
    let local = |name: &str| {
        format!(
            "[localservice.{name}]\nselector = {{ app = \"{name}\" }}\nports = [{{ port = 80 }}]\n"
        )
    };
    let facts = |nodes: &[&str]| Facts {
        instance: "t".to_string(),
        nodes: nodes.iter().map(|n| node(n)).collect(),
    };
    // `a` on node `b-c` and `a-b` on node `c`: both `a-b-c`.
    let tree = parse_files(&[file("l.toml", local("a") + &local("a-b"))]).unwrap();
    render(&tree, &facts(&["n1"])).unwrap();
    let err = render(&tree, &facts(&["b-c", "c"])).unwrap_err();
    assert!(matches!(err, RenderError::Collision { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "Service default/a-b-c is rendered by both localservice/default/a and localservice/default/a-b; rename one of them"
    );
    // A per-node Service against an elasticweb's Service.
    let web = "[elasticweb.demo-n1]\nimage = \"nginx\"\nsingle-pod-qps = 1\ntotal-qps = 1\n";
    let tree = parse_files(&[file("l.toml", local("demo") + web)]).unwrap();
    assert_eq!(
        render(&tree, &facts(&["n1"])).unwrap_err().to_string(),
        "Service default/demo-n1 is rendered by both localservice/default/demo and elasticweb/default/demo-n1; rename one of them"
    );
    // Sanitised node names stay apart, and fit: the longest spec name, dotted and long nodes.
    let long = "l".repeat(54);
    let tree = parse_files(&[file("l.toml", local(&long))]).unwrap();
    let nodes = [
        "a.b",
        "a-b",
        "a_b",
        &"n".repeat(200),
        "ip-10-0-0-1.ec2.internal",
    ];
    let objects = render(&tree, &facts(&nodes)).unwrap();
    assert_eq!(objects.len(), nodes.len());
    for o in &objects {
        assert!(
            driftless::spec::names::dns1035_label(&o.name).is_ok(),
            "{}",
            o.name
        );
    }
}

/// Validation's list of what each kind renders must match the renderer, or a collision
/// would slip through validation (and fail later, without a position).
#[test]
fn validation_knows_every_object_a_spec_renders() {
    let tree = driftless::spec::load_dir(&repo("tests/golden/specs")).unwrap();
    // No nodes: only what does not depend on the cluster.
    let objects = render(&tree, &Facts::default()).unwrap();
    for o in objects {
        // A manifest of the same identity in the same tree must be refused.
        let kind = &o.kind;
        let ns = o.namespace.clone().unwrap_or_default();
        let text = format!(
            "[[manifest]]\napiVersion = \"{}\"\nkind = \"{kind}\"\nmetadata = {{ name = \"{}\", namespace = \"{ns}\" }}\n",
            o.api_version, o.name
        );
        if ns.is_empty() {
            continue;
        }
        let mut files = read_dir(&repo("tests/golden/specs")).unwrap();
        files.push(file("zz-extra.toml", text));
        let got = errors(&files);
        assert!(
            got.len() == 1
                && got[0].starts_with("zz-extra.toml:1:1: ")
                && (got[0].contains("is also rendered by") || got[0].contains("duplicate spec")),
            "{}: {got:?}",
            o.display_ref()
        );
    }
}

#[test]
fn protected_namespaces_are_allowed_only_by_policy() {
    let text = "namespace = \"kube-system\"\n\n[workspace.ide]\nimage = \"x\"\n";
    let files = [file("k.toml", text)];
    assert_eq!(
        errors(&files),
        [
            "k.toml:3:12: namespace \"kube-system\" is protected; driftless writes there only with --allow-namespace kube-system"
        ]
    );
    let tree = parse_files_with(&files, &Policy::allowing(["kube-system"])).unwrap();
    assert_eq!(tree.specs[0].id.namespace, "kube-system");
    // Allowing one does not allow the others.
    assert!(parse_files_with(&files, &Policy::allowing(["kube-public"])).is_err());
    // Any namespace can be protected too (a non-default inventory namespace).
    let files = [file("d.toml", "[workspace.ide]\nimage = \"x\"\n")];
    assert_eq!(
        parse_files_with(&files, &Policy::default().protect("cloud-ide"))
            .unwrap_err()
            .to_string(),
        "d.toml:1:12: namespace \"cloud-ide\" is protected; driftless writes there only with --allow-namespace cloud-ide"
    );
    // Cluster-scoped objects are in no namespace: a file default does not matter to them.
    let files = [file(
        "c.toml",
        "namespace = \"kube-system\"\n\n[[manifest]]\napiVersion = \"rbac.authorization.k8s.io/v1\"\nkind = \"ClusterRole\"\nmetadata = { name = \"r\" }\n",
    )];
    assert_eq!(errors(&files), Vec::<String>::new());
}

// ---- the binary: exit 2 and `file:line:col: message` on stderr, never a panic ----

fn driftless(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

fn hostile_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, contents: &[u8]| std::fs::write(dir.path().join(name), contents).unwrap();
    w(
        "ok.toml",
        b"[elasticweb.web]\nimage = \"nginx\"\nsingle-pod-qps = 1\ntotal-qps = 1\n",
    );
    let mut big = vec![b'#'; 10_000_000];
    big.push(b'\n');
    w("big.toml", &big);
    w(
        "deep.toml",
        format!("a = {}", "[".repeat(100_000)).as_bytes(),
    );
    w("noise.toml", &noise(4096, 3));
    w(
        "claim.toml",
        b"[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = { name = \"c\", labels = { \"driftless.dev/instance\" = \"other\" } }\n",
    );
    w(
        "sys.toml",
        b"[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = { name = \"c\", namespace = \"kube-system\" }\n",
    );
    dir
}

#[test]
fn validate_reports_every_hostile_file_and_exits_2() {
    let dir = hostile_tree();
    let out = driftless(&["validate", &dir.path().to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "big.toml:1:1: file is larger than 4 MiB, the limit for a spec file; not read",
            "claim.toml:4:37: label `driftless.dev/instance` in `metadata.labels` is set by driftless; remove it",
            "deep.toml:1:85: invalid TOML: nested too deeply (arrays, inline tables or dotted keys)",
            "deep.toml:1:100005: invalid TOML: unclosed array, expected `]`",
            "noise.toml:1:1: file is not valid UTF-8: binary data, or text in another encoding; a spec file is UTF-8 TOML",
            "sys.toml:1:1: namespace \"kube-system\" is protected; driftless writes there only with --allow-namespace kube-system",
            "6 errors",
        ]
    );
}

#[test]
fn allow_namespace_is_the_one_way_into_a_protected_namespace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sys.toml"),
        "[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = { name = \"c\", namespace = \"kube-system\" }\n",
    )
    .unwrap();
    let path = dir.path().to_string_lossy().into_owned();
    let out = driftless(&["validate", &path]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sys.toml:1:1: namespace \"kube-system\" is protected; driftless writes there only with --allow-namespace kube-system\n1 error\n"
    );
    let out = driftless(&["validate", &path, "--allow-namespace", "kube-system"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // render takes it too (and needs no cluster for a manifest).
    let out = driftless(&["render", &path, "--allow-namespace", "kube-system"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("namespace: kube-system"));
    // Not a namespace name: a usage error.
    let out = driftless(&["validate", &path, "--allow-namespace", "Kube_System"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("invalid value 'Kube_System' for '--allow-namespace <NAMESPACE>'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn render_refuses_names_that_collide_on_the_given_nodes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("l.toml"),
        "[localservice.demo]\nselector = { app = \"x\" }\nports = [{ port = 80 }]\n\n[elasticweb.demo-n1]\nimage = \"nginx\"\nsingle-pod-qps = 1\ntotal-qps = 1\n",
    )
    .unwrap();
    let path = dir.path().to_string_lossy().into_owned();
    let out = driftless(&["render", &path, "--nodes", "n2"]);
    assert_eq!(out.status.code(), Some(0));
    let out = driftless(&["render", &path, "--nodes", "n1,n2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "driftless: Service default/demo-n1 is rendered by both localservice/default/demo and elasticweb/default/demo-n1; rename one of them\n"
    );
}

// ---- against the local cluster: nothing is applied from a hostile revision ----

#[tokio::test]
async fn a_tree_with_a_hostile_file_applies_nothing() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams};

    let client = support::client().await;
    let ns = support::namespace(&client, "hostile").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("web.toml"),
        format!(
            "namespace = \"{ns}\"\n\n[elasticweb.web]\nimage = \"nginx:1.17.1\"\nsingle-pod-qps = 100\ntotal-qps = 100\n\n[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = {{ name = \"settings\" }}\ndata = {{ a = \"1\" }}\n"
        ),
    )
    .unwrap();
    let apply = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
            .args(["apply", &dir.path().to_string_lossy(), "--instance", &ns])
            .env(
                "KUBECONFIG",
                std::env::var_os(support::CLUSTER_ENV).unwrap(),
            )
            .output()
            .unwrap()
    };
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let inventory = Api::<ConfigMap>::namespaced(client.clone(), "driftless-system");
    let owned = ListParams::default().labels(&format!("driftless.dev/instance={ns}"));

    let mut big = vec![b'#'; 10_000_000];
    big.push(b'\n');
    let hostile: [(&str, Vec<u8>, &str); 5] = [
        (
            "big.toml",
            big,
            "big.toml:1:1: file is larger than 4 MiB, the limit for a spec file; not read",
        ),
        ("noise.toml", noise(4096, 5), "noise.toml:1:"),
        (
            "deep.toml",
            format!("a = {}", "{ b = ".repeat(100_000)).into_bytes(),
            "deep.toml:1:485: invalid TOML: nested too deeply",
        ),
        (
            "claim.toml",
            b"[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata.name = \"theirs\"\nmetadata.labels = { \"driftless.dev/instance\" = \"default\" }\n".to_vec(),
            "claim.toml:5:21: label `driftless.dev/instance` in `metadata.labels` is set by driftless; remove it",
        ),
        (
            "system.toml",
            b"[[manifest]]\napiVersion = \"v1\"\nkind = \"ConfigMap\"\nmetadata = { name = \"x\", namespace = \"kube-system\" }\n".to_vec(),
            "system.toml:1:1: namespace \"kube-system\" is protected; driftless writes there only with --allow-namespace kube-system",
        ),
    ];
    for (name, contents, expected) in hostile {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        let out = apply();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        // Nothing of the valid spec, and no inventory: not a single write.
        assert!(
            deployments.get_opt("web").await.unwrap().is_none(),
            "{name}"
        );
        assert!(
            configmaps.get_opt("settings").await.unwrap().is_none(),
            "{name}"
        );
        assert!(
            deployments.list(&owned).await.unwrap().items.is_empty()
                && configmaps.list(&owned).await.unwrap().items.is_empty()
                && inventory.list(&owned).await.unwrap().items.is_empty(),
            "{name}: objects were written"
        );
        std::fs::remove_file(&path).unwrap();
    }

    // The same tree without the hostile file applies: the test above could have seen writes.
    let out = apply();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(deployments.get_opt("web").await.unwrap().is_some());
    assert!(configmaps.get_opt("settings").await.unwrap().is_some());
}
