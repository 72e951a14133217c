//! The example files as the tests use them: copied, with names made unique per test.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `examples/<rel>` in this repository.
pub fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel)
}

/// Writes `text` to `root/path`, making its directories.
pub fn write_file(root: &Path, path: &str, text: &str) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The part of a `namespace` name that makes it unique.
pub fn suffix(ns: &str) -> String {
    ns.rsplit('-').next().unwrap_or(ns).to_string()
}

/// Copies the tree `src` into `dst`, applying `replace` (in order) to every file's text.
/// Panics when a replacement finds nothing in the whole tree: a test that silently stops
/// rewriting (and so starts sharing names with other tests) is a broken test.
pub fn copy_tree(src: &Path, dst: &Path, replace: &[(&str, &str)]) {
    let mut used = vec![false; replace.len()];
    copy_rec(src, dst, replace, &mut used);
    for ((from, _), hit) in replace.iter().zip(used) {
        assert!(hit, "{from:?} occurs nowhere in {}", src.display());
    }
}

fn copy_rec(src: &Path, dst: &Path, replace: &[(&str, &str)], used: &mut [bool]) {
    std::fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let target = dst.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_rec(&path, &target, replace, used);
            continue;
        }
        let mut text = read(&path);
        for (i, (from, to)) in replace.iter().enumerate() {
            if text.contains(from) {
                used[i] = true;
                text = text.replace(from, to);
            }
        }
        std::fs::write(&target, text).unwrap();
    }
}

/// Replaces `from` by `to` in the file, which must contain it exactly once.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = read(path);
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} in {}:\n{text}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Every document of a multi-document YAML text.
pub fn yaml_docs(text: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The files of a directory, by name, with their bytes.
fn dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read"))
        })
        .collect();
    out.sort();
    out
}

/// A committed directory of generated files holds exactly what was just generated, byte
/// for byte; the failure names `committed` (as the repository names it) and the command
/// that regenerates it.
pub fn assert_generated_current(generated: &Path, committed: &str, regenerate: &str) {
    let fresh = dir_files(generated);
    let kept = dir_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join(committed));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&kept),
        names(&fresh),
        "{committed} does not hold the files the binary generates; regenerate with {regenerate}"
    );
    for ((name, fresh), (_, kept)) in fresh.iter().zip(&kept) {
        assert!(
            fresh == kept,
            "{committed}/{name} is stale; regenerate with {regenerate}"
        );
    }
}

/// A Deployment of one replica whose one container, `main`, runs `image` (the testbed's
/// kubelet crash-loops an image named `crashloop`).
pub fn one_pod_deployment(ns: &str, name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    \
         metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: main, image: \"{image}\"}}]}}\n"
    )
}
