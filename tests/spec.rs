//! The spec loader and renderer, without a cluster: golden output, the invalid-input
//! corpus with exact positions, robustness against arbitrary input, the JSON Schema.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use driftless::render::{Facts, NodeFacts, render, to_yaml};
use driftless::spec::model::SpecFile;
use driftless::spec::{SourceFile, SpecBody, load_dir, parse_files, read_dir};
use proptest::prelude::*;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn golden_facts() -> Facts {
    let node = |name: &str, zone: &str| NodeFacts {
        name: name.to_string(),
        labels: BTreeMap::from([("topology.kubernetes.io/zone".to_string(), zone.to_string())]),
    };
    Facts {
        instance: "golden".to_string(),
        nodes: vec![
            node("node-1", "a"),
            node("node-2", "b"),
            // Not a valid Service-name part: gets a sanitised, hashed name.
            node("ip-10-0-0-7.eu-west-1.compute.internal", "a"),
        ],
    }
}

/// Set UPDATE_GOLDEN=1 to rewrite the expected file after an intended change (and read
/// the diff before committing it).
#[test]
fn golden_tree_renders_to_the_expected_yaml() {
    let tree = load_dir(&repo("tests/golden/specs")).expect("golden tree is valid");
    let yaml = to_yaml(&render(&tree, &golden_facts()).unwrap()).unwrap();
    let expected_path = repo("tests/golden/expected.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&expected_path, &yaml).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path)
        .expect("tests/golden/expected.yaml (UPDATE_GOLDEN=1 writes it)");
    if yaml != expected {
        let diff = similar::TextDiff::from_lines(&expected, &yaml);
        panic!(
            "render output differs from tests/golden/expected.yaml:\n{}",
            diff.unified_diff().header("expected", "rendered")
        );
    }
}

#[test]
fn render_is_deterministic() {
    let tree = load_dir(&repo("tests/golden/specs")).unwrap();
    let mut facts = golden_facts();
    let first = to_yaml(&render(&tree, &facts).unwrap()).unwrap();
    // Node order from the cluster must not matter either.
    facts.nodes.reverse();
    for _ in 0..3 {
        assert_eq!(first, to_yaml(&render(&tree, &facts).unwrap()).unwrap());
    }
}

#[test]
fn render_puts_namespaces_then_crds_first() {
    let tree = load_dir(&repo("specs")).unwrap();
    let objects = render(&tree, &Facts::default()).unwrap();
    let phases: Vec<u8> = objects.iter().map(|o| o.apply_phase()).collect();
    let mut sorted = phases.clone();
    sorted.sort();
    assert_eq!(phases, sorted);
    assert_eq!(objects[0].kind, "CustomResourceDefinition");
    let golden = render(
        &load_dir(&repo("tests/golden/specs")).unwrap(),
        &golden_facts(),
    )
    .unwrap();
    assert_eq!(golden[0].kind, "Namespace");
}

/// The loader (hand-written for positions and all-errors) and the serde model (which the
/// schema comes from) must agree on every valid file.
#[test]
fn loader_agrees_with_the_serde_model() {
    for root in ["tests/golden/specs", "specs"] {
        let files = read_dir(&repo(root)).unwrap();
        for file in &files {
            let text = std::str::from_utf8(&file.contents).unwrap();
            let model: SpecFile =
                toml::from_str(text).unwrap_or_else(|e| panic!("{}: {e}", file.path));
            let tree = parse_files(std::slice::from_ref(file)).unwrap();
            let mut loaded = SpecFile {
                namespace: model.namespace.clone(),
                ..SpecFile::default()
            };
            for spec in tree.specs {
                match spec.body {
                    SpecBody::Workspace(w) => drop(loaded.workspace.insert(spec.id.name, w)),
                    SpecBody::ElasticWeb(e) => drop(loaded.elasticweb.insert(spec.id.name, e)),
                    SpecBody::LocalService(l) => drop(loaded.localservice.insert(spec.id.name, l)),
                    SpecBody::Manifest(m) => loaded.manifest.push(m),
                }
            }
            // The loader resolves `namespace` into the identity; the model keeps it raw.
            let mut model = model;
            model
                .workspace
                .values_mut()
                .for_each(|w| w.namespace = None);
            model
                .elasticweb
                .values_mut()
                .for_each(|w| w.namespace = None);
            model
                .localservice
                .values_mut()
                .for_each(|w| w.namespace = None);
            assert_eq!(loaded, model, "{root}/{}", file.path);
        }
    }
}

#[test]
fn shipped_specs_cover_every_kind() {
    let tree = load_dir(&repo("specs")).unwrap();
    let counts = tree.count_by_kind();
    for kind in driftless::spec::Kind::ALL {
        assert!(
            counts.get(&kind).copied().unwrap_or(0) > 0,
            "specs/ has no {kind}"
        );
    }
}

/// Each corpus case (a file, or a directory of files) lists the errors it must produce as
/// `# error: [FILE:]LINE:COL: message` lines; exactly those, nothing else.
#[test]
fn invalid_corpus_reports_exact_positions_and_messages() {
    let dir = repo("tests/corpus/invalid");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 25, "corpus shrank to {}", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let files = read_dir(&case).unwrap();
        let single = files.len() == 1 && case.is_file();
        let mut expected: Vec<String> = files
            .iter()
            .flat_map(|f| {
                let text = String::from_utf8_lossy(&f.contents).into_owned();
                let path = f.path.clone();
                text.lines()
                    .filter_map(|l| l.strip_prefix("# error: "))
                    .map(|e| {
                        if single {
                            format!("{path}:{e}")
                        } else {
                            e.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(
            !expected.is_empty(),
            "{} has no `# error:` line",
            case.display()
        );
        expected.sort();
        let mut got: Vec<String> = match parse_files(&files) {
            Ok(_) => vec![],
            Err(errors) => errors.0.iter().map(|e| e.to_string()).collect(),
        };
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
fn errors_come_in_file_order_from_every_file() {
    let files = vec![
        SourceFile {
            path: "b.toml".into(),
            contents: b"[workspace.x]\nport = 0\n".to_vec(),
        },
        SourceFile {
            path: "a.toml".into(),
            contents: b"[elasticweb.y]\n".to_vec(),
        },
    ];
    let errors = parse_files(&files).unwrap_err();
    let places: Vec<String> = errors.0.iter().map(|e| e.at.to_string()).collect();
    assert_eq!(
        places,
        [
            "a.toml:1:13",
            "a.toml:1:13",
            "a.toml:1:13",
            "b.toml:1:12",
            "b.toml:2:8"
        ]
    );
}

#[test]
fn invalid_utf8_and_huge_files_are_errors_not_panics() {
    let files = vec![
        SourceFile {
            path: "bin.toml".into(),
            contents: b"namespace = \"a\"\n\xff\xfe".to_vec(),
        },
        SourceFile {
            path: "big.toml".into(),
            contents: vec![b'#'; driftless::spec::MAX_FILE_BYTES + 1],
        },
    ];
    let errors: Vec<String> = parse_files(&files)
        .unwrap_err()
        .0
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errors,
        [
            "big.toml:1:1: file is larger than 4 MiB, the limit for a spec file; not read",
            "bin.toml:2:1: file is not valid UTF-8: binary data, or text in another encoding; a spec file is UTF-8 TOML"
        ]
    );
}

#[test]
fn hidden_dirs_are_skipped_and_symlinked_dirs_followed_once() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    // A ConfigMap mount: real files under a hidden, timestamped dir, `..data` pointing at
    // it, and top-level links through `..data`.
    std::fs::create_dir(r.join("..2026_11_22")).unwrap();
    std::fs::write(
        r.join("..2026_11_22/app.toml"),
        "[workspace.a]\nimage = \"x\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("..2026_11_22", r.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/app.toml", r.join("app.toml")).unwrap();
    std::fs::create_dir(r.join(".git")).unwrap();
    std::fs::write(r.join(".git/x.toml"), "garbage = [").unwrap();
    std::fs::create_dir(r.join("sub")).unwrap();
    std::fs::write(r.join("sub/b.toml"), "[workspace.b]\nimage = \"x\"\n").unwrap();
    std::fs::write(r.join("sub/notes.md"), "not a spec").unwrap();
    // A loop back to the root must not recurse forever.
    std::os::unix::fs::symlink("..", r.join("sub/loop")).unwrap();
    let files: Vec<String> = read_dir(r).unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(files, ["app.toml", "sub/b.toml"]);
}

fn valid_files() -> Vec<SourceFile> {
    let mut files = read_dir(&repo("tests/golden/specs")).unwrap();
    files.extend(read_dir(&repo("specs")).unwrap());
    files
}

/// Every prefix of every valid file: a half-written save must give errors, never a panic.
#[test]
fn truncated_files_never_panic() {
    for file in valid_files() {
        for end in 0..=file.contents.len() {
            let cut = SourceFile {
                path: file.path.clone(),
                contents: file.contents[..end].to_vec(),
            };
            let _ = parse_files(&[cut]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_files(&[SourceFile { path: "x.toml".into(), contents: bytes }]);
    }

    #[test]
    fn mutated_valid_files_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let files = valid_files();
        let mut contents = files[pick.index(files.len())].contents.clone();
        for (at, byte) in edits {
            let i = at.index(contents.len().max(1)).min(contents.len().saturating_sub(1));
            if !contents.is_empty() {
                contents[i] = byte;
            }
        }
        if let Ok(tree) = parse_files(&[SourceFile { path: "x.toml".into(), contents }]) {
            // Whatever validates must render.
            render(&tree, &golden_facts()).unwrap();
        }
    }

    #[test]
    fn arbitrary_toml_values_never_panic(
        key in "[a-z-]{1,12}",
        value in prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            "[ -~]{0,20}".prop_map(|s| format!("{s:?}")),
            any::<f64>().prop_map(|f| format!("{f:?}")),
            Just("[]".to_string()),
            Just("{}".to_string()),
            Just("1979-05-27T07:32:00Z".to_string()),
        ],
        kind in prop_oneof![Just("workspace"), Just("elasticweb"), Just("localservice")],
    ) {
        let text = format!("[{kind}.x]\nimage = \"i\"\nsingle-pod-qps = 1\ntotal-qps = 1\nselector = {{ a = \"b\" }}\nports = [{{ port = 1 }}]\n{key} = {value}\n");
        if let Ok(tree) = parse_files(&[SourceFile { path: "x.toml".into(), contents: text.into_bytes() }]) {
            render(&tree, &golden_facts()).unwrap();
        }
    }
}

#[test]
fn committed_schema_is_current() {
    let generated = driftless::spec::schema::generate().unwrap();
    let committed =
        std::fs::read_to_string(repo(driftless::spec::schema::COMMITTED_PATH)).unwrap_or_default();
    assert!(
        generated == committed,
        "{} is stale; regenerate it with `cargo run -q -- schema > {}`",
        driftless::spec::schema::COMMITTED_PATH,
        driftless::spec::schema::COMMITTED_PATH
    );
}

/// The loader's field lists (as its "unknown field" error reports them) and the schema's
/// properties must be the same sets, kind by kind.
#[test]
fn schema_describes_every_field_the_loader_knows() {
    let schema: serde_json::Value =
        serde_json::from_str(&driftless::spec::schema::generate().unwrap()).unwrap();
    for (kind, def) in [
        ("workspace", "Workspace"),
        ("elasticweb", "ElasticWeb"),
        ("localservice", "LocalService"),
    ] {
        let text = format!("[{kind}.x]\nzzzz-not-a-field = 1\n");
        let errors = parse_files(&[SourceFile {
            path: "x.toml".into(),
            contents: text.into_bytes(),
        }])
        .unwrap_err();
        let listed = errors
            .0
            .iter()
            .find_map(|e| {
                e.message
                    .split_once("known fields: ")
                    .map(|(_, l)| l.to_string())
            })
            .unwrap_or_else(|| panic!("no field list in {errors}"));
        let mut loader: Vec<String> = listed.split(", ").map(str::to_string).collect();
        loader.sort();
        let mut schema_props: Vec<String> = schema["definitions"][def]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        schema_props.sort();
        assert_eq!(loader, schema_props, "{kind}");
    }
    // The helm kind is read apart (for the rendering stage), against the same schema.
    let (_, errors) = driftless::spec::helm::releases(&[SourceFile {
        path: "x.toml".into(),
        contents: b"[helm.x]\nchart = \"c\"\nzzzz-not-a-field = 1\n".to_vec(),
    }]);
    let listed = errors
        .iter()
        .find_map(|e| {
            e.message
                .split_once("known fields: ")
                .map(|(_, l)| l.to_string())
        })
        .unwrap_or_else(|| panic!("no field list in {errors:?}"));
    let mut loader: Vec<String> = listed.split(", ").map(str::to_string).collect();
    loader.sort();
    let mut schema_props: Vec<String> = schema["definitions"]["Helm"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    schema_props.sort();
    assert_eq!(loader, schema_props, "helm");
}

/// A YAML manifest whose `labels:` or `annotations:` is empty (null) still renders with
/// driftless's ownership marks: without them the object could never be recognised as
/// ours, nor pruned. (Found by the fuzzer.)
#[test]
fn yaml_null_labels_and_annotations_still_carry_the_ownership_marks() {
    let files = [SourceFile {
        path: "bare.yaml".into(),
        contents: b"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: ns\n  labels:\n  annotations:\n"
            .to_vec(),
    }];
    let tree = parse_files(&files).unwrap();
    let objects = render(&tree, &Facts::default()).unwrap();
    let body = objects[0].body.value();
    let meta = &body["metadata"];
    assert_eq!(meta["labels"]["driftless.dev/instance"], "default");
    assert_eq!(
        meta["annotations"]["driftless.dev/spec"],
        "manifest/ns/ServiceAccount/a"
    );
}

#[test]
fn a_workload_kind_takes_replace_and_wave_keys_into_its_policy() {
    use driftless::spec::policy::Replace;
    let file = |text: &str| SourceFile {
        path: "apps.toml".into(),
        contents: text.as_bytes().to_vec(),
    };
    let tree = parse_files(&[file(
        "[elasticweb.web]\nimage = \"nginx\"\nsingle-pod-qps = 1\ntotal-qps = 1\nreplace = \"on-immutable\"\nwave = -2\n",
    )])
    .unwrap();
    let policy = &tree.specs[0].policy;
    assert_eq!(policy.replace, Some(Replace::OnImmutable));
    assert_eq!(policy.wave, -2);
    let objects = render(&tree, &golden_facts()).unwrap();
    assert!(objects.iter().all(|o| o.policy.wave == -2));

    let errors: Vec<String> = parse_files(&[file(
        "[elasticweb.web]\nimage = \"nginx\"\nsingle-pod-qps = 1\ntotal-qps = 1\nreplace = \"always\"\nwave = \"1\"\n",
    )])
    .unwrap_err()
    .0
    .iter()
    .map(|e| e.to_string())
    .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("apps.toml:5:11: invalid `replace` \"always\"")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("apps.toml:6:8:")),
        "{errors:?}"
    );
}
