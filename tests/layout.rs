//! The layout's rules that a reader of the code relies on (docs/src/contributing/layout.md):
//! dependencies point one way, so no files of a crate import each other, directly or
//! through others (a module and its own child apart: the child is part of it). Checked on the source text, as a
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

/// The circles of files under `root`: files that import each other, directly or through
/// others (the strongly connected components of the import graph, a module and its own
/// children being one), each as `a.rs -> b.rs -> c.rs`, its files in order.
fn circles(root: &Path) -> Vec<String> {
    let known = modules(root);
    let mut edges: BTreeMap<&Module, BTreeSet<&Module>> = BTreeMap::new();
    for (module, path) in &known {
        let text = std::fs::read_to_string(path).unwrap();
        // What only a test reads is no dependency of the code.
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        let to = edges.entry(module).or_default();
        for named in named_paths(text, module) {
            if let Some(target) = module_of(&named, &known)
                && !target.starts_with(module)
                && !module.starts_with(target)
            {
                to.insert(target);
            }
        }
    }
    let file = |m: &Module| known[m].strip_prefix(root).unwrap().display().to_string();
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.iter().map(|m| file(m)).collect::<Vec<_>>().join(" -> "))
        .collect()
}

/// Tarjan's strongly connected components of `edges`, each sorted, in the order of their
/// first node.
fn strongly_connected<'m>(
    edges: &BTreeMap<&'m Module, BTreeSet<&'m Module>>,
) -> Vec<Vec<&'m Module>> {
    struct Walk<'m, 'e> {
        edges: &'e BTreeMap<&'m Module, BTreeSet<&'m Module>>,
        index: BTreeMap<&'m Module, usize>,
        low: BTreeMap<&'m Module, usize>,
        stack: Vec<&'m Module>,
        on_stack: BTreeSet<&'m Module>,
        out: Vec<Vec<&'m Module>>,
    }
    impl<'m> Walk<'m, '_> {
        fn visit(&mut self, v: &'m Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                component.sort();
                self.out.push(component);
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out.sort();
    walk.out
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    for root in ["src", "bench/src", "testbed/standin/src"] {
        let circles = circles(&repo(root));
        assert!(
            circles.is_empty(),
            "{root}: files that import each other, directly or through others (one of them \
             should own what they share, or be the other's child):\n{}",
            circles.join("\n")
        );
    }
}

#[test]
fn the_scanner_finds_files_that_import_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\npub mod f;\n",
    );
    write("a/mod.rs", "mod inner;\nuse super::b::Thing;\n");
    write("a/inner.rs", "use super::super::c;\nuse super::Own;\n");
    write("b.rs", "use crate::{a::Other, c};\n");
    write(
        "c.rs",
        "fn f() { crate::a::inner::g(); }\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n",
    );
    // A circle of three, none of whose pairs imports each other.
    write("d.rs", "use crate::e::X;\n");
    write("e.rs", "use crate::f::Y;\n");
    write("f.rs", "fn g() { crate::d::h(); }\n");
    assert_eq!(
        circles(dir.path()),
        [
            "a/mod.rs -> b.rs",
            "a/inner.rs -> c.rs",
            "d.rs -> e.rs -> f.rs"
        ]
    );
}

/// The layout page's entry for each top-level part of `src/` (`src/apply/`, and
/// `src/lib.rs` for the files beside it), as its text: the entry's first line up to the
/// next entry.
fn page_entries(page: &str) -> BTreeMap<String, String> {
    let mut entries: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        if !line.starts_with(' ') {
            current = line
                .split_whitespace()
                .next()
                .filter(|w| w.starts_with("src/"))
                .map(str::to_string);
        }
        if let Some(c) = &current {
            let text = entries.entry(c.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    entries
}

/// The files of `src/` the layout page does not name in its entry for their part: a
/// file by its name (without `.rs`), a `mod.rs` by its directory's.
fn left_off_the_page(root: &Path, page: &str) -> Vec<String> {
    let entries = page_entries(page);
    let words = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    let mut out = Vec::new();
    for (module, path) in modules(root) {
        let Some(name) = module.last() else { continue };
        // A test module is the tests of the file beside it.
        if module.iter().any(|m| m == "tests") {
            continue;
        }
        let is_dir = path.file_name().is_some_and(|f| f == "mod.rs");
        let entry = match (module.len(), is_dir) {
            (1, false) => "src/lib.rs".to_string(),
            _ => format!("src/{}/", module[0]),
        };
        let named = entries.get(&entry).is_some_and(|t| words(t).contains(name));
        if !named {
            out.push(format!("{} (under {entry})", module.join("/")));
        }
    }
    out
}

#[test]
fn the_layout_page_names_every_module() {
    let page = std::fs::read_to_string(repo("docs/src/contributing/layout.md")).unwrap();
    let missing = left_off_the_page(&repo("src"), &page);
    assert!(
        missing.is_empty(),
        "docs/src/contributing/layout.md does not name these modules in their part's entry \
         (a phrase each: what it is for):\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_module_left_off_the_page_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for rel in [
        "lib.rs",
        "gate.rs",
        "apply/mod.rs",
        "apply/plan.rs",
        "apply/prune.rs",
    ] {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    let page = "```\nsrc/lib.rs     the modules; gate.rs\nsrc/apply/     the engine: plan, and\n               what prune does not say\nsrc/report/    prune\n```\n";
    assert_eq!(left_off_the_page(dir.path(), page), Vec::<String>::new());
    let page = page.replace("what prune does not say", "nothing more");
    assert_eq!(
        left_off_the_page(dir.path(), &page),
        ["apply/prune (under src/apply/)"]
    );
}
