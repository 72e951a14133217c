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

/// The longest a function may be, from its `fn` line to its closing brace, and the longest
/// a file's body may be (the lines before its test module; `tests.rs` files are tests):
/// past them a reader no longer holds the whole in mind (#72). A long one is split by
/// meaning: the steps it goes through, or a group of items that belong together.
const FUNCTION_LINES: usize = 150;
const BODY_LINES: usize = 600;

/// `text` with its comments, strings and character literals blanked (newlines kept), so
/// that the braces left are the code's.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let start = i;
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_at(rest) {
            // r#"..."#, br"...": ends at the quote followed by as many hashes.
            let open = rest.iter().position(|&c| c == b'"').unwrap_or(0);
            i += open + 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i = (i + close.len()).min(b.len());
        } else if b[i] == b'"' || rest.starts_with(b"b\"") {
            i += if b[i] == b'"' { 1 } else { 2 };
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{7b}') or a lifetime ('a): only the
            // former closes with a quote within a few bytes.
            let len = if rest.get(1) == Some(&b'\\') {
                rest.iter().skip(2).position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            match len {
                Some(len) => i += len,
                None => {
                    out.push('\'');
                    i += 1;
                    continue;
                }
            }
        } else {
            let ch = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + ch]);
            i += ch;
            continue;
        }
        blank(&mut out, &b[start..i.min(b.len())]);
    }
    out
}

/// How many `#`s the raw string starting at `rest` has (`r"` 0, `br##"` 2), if one does.
fn raw_string_at(rest: &[u8]) -> Option<usize> {
    let r = match rest {
        [b'r', ..] => &rest[1..],
        [b'b', b'r', ..] => &rest[2..],
        _ => return None,
    };
    let hashes = r.iter().take_while(|&&c| c == b'#').count();
    (r.get(hashes) == Some(&b'"')).then_some(hashes)
}

/// The body of a file: its lines before its test module.
fn body_of(text: &str) -> &str {
    match text.find("\n#[cfg(test)]") {
        Some(at) => &text[..at + 1],
        None => text,
    }
}

/// The functions of `body` longer than `limit` lines, as `name (N lines)`; a function
/// inside another counts as part of it.
fn long_functions(body: &str, limit: usize) -> Vec<String> {
    let code = code_only(body);
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let Some(name) = fn_named(lines[at]) else {
            at += 1;
            continue;
        };
        // To the brace that closes the first one opened; a `;` first is a declaration.
        let (mut depth, mut end) = (0i32, None);
        'scan: for (n, line) in lines.iter().enumerate().skip(at) {
            for c in line.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(n);
                            break 'scan;
                        }
                    }
                    ';' if depth == 0 => break 'scan,
                    _ => {}
                }
            }
        }
        match end {
            Some(end) => {
                let len = end - at + 1;
                if len > limit {
                    out.push(format!("{name} ({len} lines)"));
                }
                at = end + 1;
            }
            None => at += 1,
        }
    }
    out
}

/// The name of the function a line declares, if it declares one.
fn fn_named(line: &str) -> Option<&str> {
    let mut words = line.trim_start();
    loop {
        let word = words.split_whitespace().next()?;
        if word == "fn" {
            let name = ident(words[2..].trim_start());
            return (!name.is_empty()).then_some(name);
        }
        let qualifier = matches!(word, "async" | "const" | "unsafe" | "extern" | "default")
            || word.starts_with("pub")
            || word == "\"C\"";
        if !qualifier {
            return None;
        }
        words = words[word.len()..].trim_start();
    }
}

/// Every function and body of the `.rs` files under `root` over the limits.
fn too_long(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for path in modules(root).into_values() {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let body = body_of(&text);
        let lines = body.lines().count();
        if lines > BODY_LINES {
            out.push(format!("{rel}: {lines} lines before its tests"));
        }
        for f in long_functions(body, FUNCTION_LINES) {
            out.push(format!("{rel}: fn {f}"));
        }
    }
    out.sort();
    out
}

#[test]
fn no_function_over_150_lines_and_no_body_over_600() {
    let long = too_long(&repo("src"));
    assert!(
        long.is_empty(),
        "src/: over {FUNCTION_LINES} lines a function, or {BODY_LINES} a file's body (split by \
         meaning: the steps it goes through, or items that belong together):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_size_rule_counts_a_function_to_its_closing_brace() {
    let long = |n: usize| "    x();\n".repeat(n);
    let text = format!(
        "/// fn not_this() {{\npub(crate) async fn over() -> Result<(), String> {{\n{}    \
         let s = \"}}}}{{\"; let c = '}}'; let r = r#\"}}\"#; // }}\n    fn inner<'a>(x: &'a str) \
         {{ }}\n}}\nfn under() {{\n{}}}\nfn decl();\n#[cfg(test)]\nmod tests {{\n    fn \
         in_tests() {{\n{}    }}\n}}\n",
        long(3),
        long(2),
        long(9)
    );
    let body = body_of(&text);
    assert!(!body.contains("in_tests"), "{body}");
    // over: its line, three calls, the literals' line, inner's line, the closing brace.
    assert_eq!(long_functions(body, 6), ["over (7 lines)"]);
    assert_eq!(long_functions(body, 7), Vec::<String>::new());
    assert_eq!(
        long_functions(body, 3),
        ["over (7 lines)", "under (4 lines)"]
    );
}
