//! What the finders of app objects (Flux's, Argo CD's) share: the documents of a YAML
//! stream by lines (so a taken-out object leaves every other document at its place), an
//! error at a place, and the readers of paths and repository URLs.

use serde_json::Value;

use super::stage::error_at;
use crate::spec::{Location, SourceFile, SpecError};

/// Hands every YAML document of `files` that `mentions` (a cheap look at a file's bytes)
/// may concern to `take`, parsed, with its place and text; the documents `take` says it
/// took are blanked line for line, so every other document keeps its `file:line`. TOML
/// files and documents that do not parse (the spec loader says why) are passed by.
pub(crate) fn take_out(
    files: &mut [SourceFile],
    mentions: impl Fn(&[u8]) -> bool,
    mut take: impl FnMut(Location, &str, Value) -> bool,
) {
    for f in files.iter_mut() {
        let Some(text) = yaml_text(f, &mentions) else {
            continue;
        };
        let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut blank = Vec::new();
        for ((start, end), doc, v) in parsed(&lines) {
            let at = Location {
                file: f.path.clone(),
                line: start + 1,
                column: 1,
            };
            if take(at, &doc, v) {
                blank.push((start, end));
            }
        }
        if blank.is_empty() {
            continue;
        }
        for (start, end) in blank {
            for l in &mut lines[start..end] {
                *l = if l.ends_with('\n') { "\n" } else { "" };
            }
        }
        f.contents = lines.concat().into_bytes();
    }
}

/// A file's text, when it is YAML (not TOML, UTF-8) that `mentions` may concern.
fn yaml_text(f: &SourceFile, mentions: impl Fn(&[u8]) -> bool) -> Option<&str> {
    if f.path.ends_with(".toml") || !mentions(&f.contents) {
        return None;
    }
    std::str::from_utf8(&f.contents).ok()
}

/// The documents of `lines` that parse: each one's line range, text and value.
fn parsed<'l>(lines: &'l [&str]) -> impl Iterator<Item = ((usize, usize), String, Value)> + 'l {
    documents(lines).into_iter().filter_map(|(start, end)| {
        let doc: String = lines[start..end].concat();
        let v = crate::spec::yaml::read_one::<Value>(&doc).ok()?;
        Some(((start, end), doc, v))
    })
}

/// The documents of a YAML stream, as line ranges (`---` lines between them).
pub(crate) fn documents(lines: &[&str]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_end();
        if t == "---" || t.starts_with("--- ") || t == "..." {
            if i > start {
                out.push((start, i));
            }
            start = i + 1;
        }
    }
    if start < lines.len() {
        out.push((start, lines.len()));
    }
    out
}

pub(crate) fn err(at: Location, message: String) -> SpecError {
    error_at(&at.file, at.line, at.column, message)
}

/// The line of `key:` in `doc` (its first), counted from the document's start.
pub(crate) fn line_of(doc: &str, key: &str) -> usize {
    doc.lines()
        .position(|l| {
            let l = l.trim_start();
            // A list item's first key too: `- list:`.
            let l = l.strip_prefix("- ").map_or(l, str::trim_start);
            l.starts_with(&format!("{key}:"))
        })
        .unwrap_or(0)
}

/// `./apps/staging/` as `apps/staging`; `None` when it climbs out.
pub(crate) fn clean_path(raw: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in raw.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// `https://github.com/Org/Repo.git/` and `ssh://git@github.com/org/repo` alike.
pub(crate) fn normalise_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/').trim_end_matches(".git");
    let url = url.split_once("://").map_or(url, |(_, rest)| rest);
    let url = url.split_once('@').map_or(url, |(_, rest)| rest);
    url.replacen(':', "/", 1).to_lowercase()
}

/// A key of object `v` that `known` does not list.
pub(crate) fn unknown<'a>(v: &'a Value, known: &[&str]) -> Option<&'a String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| !known.contains(&k.as_str()))
}

/// What becomes of a GitOps tool's own install (Flux's `gotk-components.yaml`, Argo CD's
/// `install.yaml`) in a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// Left out: the tree holds that tool's app objects, which driftless carries out in
    /// its place.
    LeftOut,
    /// Applied as any bundle: nothing in the tree would replace it.
    Applied,
}

impl Install {
    /// `LeftOut` when any YAML document of `files` is an object of `group` of one of
    /// `kinds` (a Flux Kustomization, an Argo CD Application), else `Applied`.
    pub fn of(files: &[SourceFile], groups: &[&str], kinds: &[&str]) -> Install {
        let mentions = |bytes: &[u8]| {
            groups
                .iter()
                .any(|g| super::tree::mentions(bytes, g.as_bytes()))
        };
        let app = files
            .iter()
            .filter_map(|f| yaml_text(f, mentions))
            .any(|text| {
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                parsed(&lines).any(|(_, _, v)| {
                    let group = v["apiVersion"]
                        .as_str()
                        .and_then(|a| a.split('/').next())
                        .unwrap_or_default();
                    groups.contains(&group)
                        && kinds.contains(&v["kind"].as_str().unwrap_or_default())
                })
            });
        match app {
            true => Install::LeftOut,
            false => Install::Applied,
        }
    }
}
