//! The layout's rules that a reader of the code relies on (docs/src/contributing/layout.md):
//! dependencies point one way, so no two files of a crate import each other (a module and
//! its own child apart: the child is part of it). Checked on the source text, as a
//! reviewer reads it: `crate::` and `super::` paths, outside the files' test modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module by its path from the crate root (`["daemon", "source"]`).
type Module = Vec<String>;

/// Every `.rs` file under `root`, by the module it is.
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut module: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            out.insert(module, path);
        }
    }
    out
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The paths `text` (of module `module`) names through `crate::` or `super::`, each as
/// segments from the crate root; `use x::{a, b}` gives one path per item.
fn named_paths(text: &str, module: &Module) -> Vec<Module> {
    let mut out = Vec::new();
    for (at, start) in text
        .match_indices("crate::")
        .chain(text.match_indices("super::"))
    {
        // `foo_crate::` or `$crate::` is not ours.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        // `super` is the parent module, for a `mod.rs` as for any file.
        let mut base: Module = match start {
            "crate::" => Vec::new(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        let mut rest = &text[at + start.len()..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        loop {
            let name = ident(rest);
            if name.is_empty() {
                if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    for item in group[..end].split(',') {
                        let first = ident(item.trim());
                        if !first.is_empty() && first != "self" {
                            let mut p = base.clone();
                            p.push(first.to_string());
                            out.push(p);
                        }
                    }
                }
                break;
            }
            base.push(name.to_string());
            rest = &rest[name.len()..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.push(base);
    }
    out
}

/// The longest module that `path` starts with.
fn module_of<'m>(path: &[String], known: &'m BTreeMap<Module, PathBuf>) -> Option<&'m Module> {
    (1..=path.len())
        .rev()
        .find_map(|n| known.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// The pairs of files under `root` that import each other, as `a.rs <-> b.rs`.
fn pairs_importing_each_other(root: &Path) -> Vec<String> {
    let known = modules(root);
    let mut edges: BTreeSet<(Module, Module)> = BTreeSet::new();
    for (module, path) in &known {
        let text = std::fs::read_to_string(path).unwrap();
        // What only a test reads is no dependency of the code.
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        for named in named_paths(text, module) {
            if let Some(to) = module_of(&named, &known)
                && to != module
            {
                edges.insert((module.clone(), to.clone()));
            }
        }
    }
    let file = |m: &Module| known[m].strip_prefix(root).unwrap().display().to_string();
    edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .filter(|(a, b)| !a.starts_with(b) && !b.starts_with(a))
        .map(|(a, b)| format!("{} <-> {}", file(a), file(b)))
        .collect()
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn no_two_files_import_each_other() {
    for root in ["src", "bench/src", "testbed/standin/src"] {
        let pairs = pairs_importing_each_other(&repo(root));
        assert!(
            pairs.is_empty(),
            "{root}: files that import each other (one of them should own what both use, \
             or be the other's child):\n{}",
            pairs.join("\n")
        );
    }
}

#[test]
fn the_scanner_finds_two_files_that_import_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n");
    write("a/mod.rs", "mod inner;\nuse super::b::Thing;\n");
    write("a/inner.rs", "use super::super::c;\nuse super::Own;\n");
    write("b.rs", "use crate::{a::Other, c};\n");
    write(
        "c.rs",
        "fn f() { crate::a::inner::g(); }\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n",
    );
    assert_eq!(
        pairs_importing_each_other(dir.path()),
        ["a/mod.rs <-> b.rs", "a/inner.rs <-> c.rs"]
    );
}
