//! Plain Kubernetes YAML, as Kubernetes software ships it: every document of a
//! `*.yaml`/`*.yml` file is one object. Documents are read into a tree that remembers
//! where each key and value was written, so that every error, of YAML syntax or of
//! validation, names its `file:line:col`.
//!
//! The YAML is read as Kubernetes reads it (YAML 1.1, through go-yaml): `0644` is octal
//! (`defaultMode`), empty documents are skipped, and nulls are kept as written
//! (`creationTimestamp: null` in every generated CRD). Duplicate keys are errors, and
//! aliases are bounded (the parser's budget), so a small file cannot expand into a huge
//! one.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::extract::{FileCtx, Found};
use super::vars::Vars;
use super::{Location, SpecError, manifest};

/// A YAML value and where it was written.
pub(super) type Node = Spanned<Tree>;

/// A YAML value as the JSON Kubernetes takes: maps keep their order and their keys'
/// places.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tree {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Spanned<String>, Node)>),
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tree, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

/// An unsigned integer, as a signed one where it fits (as JSON parsers read it).
fn unsigned(n: u64) -> Tree {
    i64::try_from(n).map_or(Tree::UInt(n), Tree::Int)
}

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }

    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Tree, E> {
        Ok(Tree::Int(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Tree, E> {
        Ok(unsigned(n))
    }

    fn visit_i128<E: de::Error>(self, n: i128) -> Result<Tree, E> {
        i64::try_from(n)
            .map(Tree::Int)
            .map_err(|_| E::custom("integer out of range for a Kubernetes object (64-bit)"))
    }

    fn visit_u128<E: de::Error>(self, n: u128) -> Result<Tree, E> {
        u64::try_from(n)
            .map(unsigned)
            .map_err(|_| E::custom("integer out of range for a Kubernetes object (64-bit)"))
    }

    fn visit_f64<E>(self, x: f64) -> Result<Tree, E> {
        Ok(Tree::Float(x))
    }

    fn visit_str<E>(self, s: &str) -> Result<Tree, E> {
        Ok(Tree::Str(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Tree, E> {
        Ok(Tree::Str(s))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Tree, E> {
        Err(E::custom(
            "binary (!!binary) values are not allowed: write the base64 text as a string",
        ))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element::<Node>()? {
            out.push(item);
        }
        Ok(Tree::Seq(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Node>()?;
            out.push((key, value));
        }
        Ok(Tree::Map(out))
    }
}

/// A place in a YAML text, as the parser reports it.
pub(super) type Place = serde_saphyr::Location;

/// A YAML error in our words: the place it names (if any), and its message without the
/// parser's own rendering of the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct YamlError {
    pub at: Option<Place>,
    pub message: String,
}

/// The parser's options for `text`: its defaults, with the budget grown with the text's
/// length. The defaults refused what is written out in full past a fixed size (1,025
/// documents, a chart's CRDs past 250,000 nodes), which a bundle, a chart or a
/// Kustomization's build reaches; grown so, only aliases that expand past the text can
/// breach it, which is what the budget is for.
pub(crate) fn sized(text: &str) -> serde_saphyr::Options {
    let len = text.len();
    let mut budget = serde_saphyr::Budget::default();
    // A document takes at least its `---` line; a node, a byte; an event, half of one.
    budget.max_documents = budget.max_documents.max(len / 4);
    budget.max_nodes = budget.max_nodes.max(len);
    budget.max_events = budget.max_events.max(2 * len);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len);
    let mut o = serde_saphyr::Options::default();
    o.budget = Some(budget);
    o.with_snippet = false;
    o
}

/// One YAML document of `text` as `T`, within the budget [`sized`] gives it.
pub(crate) fn read_one<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, sized(text))
}

/// Every non-empty document of `text` as `T`, within the budget [`sized`] gives it.
pub(crate) fn read_all<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<Vec<T>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, sized(text))
}

/// A parser's error in our words: a budget breach said as what it guards against, never
/// as the parser's own structure; any other as the parser says it, without its snippet.
pub(crate) fn said(e: &serde_saphyr::Error) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    // The breach, under what says where an alias was used or shows the text.
    let mut inner = e;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = inner
    {
        inner = error;
    }
    let serde_saphyr::Error::Budget { breach, .. } = inner else {
        return e.without_snippet().to_string();
    };
    match breach {
        B::Depth { depth } => format!("nested {depth} levels deep, deeper than driftless reads"),
        B::Aliases { .. }
        | B::Anchors { .. }
        | B::AliasAnchorRatio { .. }
        | B::RecordedAnchorEvents { .. }
        | B::RecordedAnchorBytes { .. }
        | B::Events { .. }
        | B::Nodes { .. } => {
            "its aliases expand past what is written, and driftless does not expand them so far"
                .to_string()
        }
        B::MergeKeys { merge_keys } => {
            format!("{merge_keys} merge keys (<<), more than driftless reads")
        }
        _ => "larger than driftless reads in one file".to_string(),
    }
}

fn options(text: &str) -> serde_saphyr::Options {
    let mut o = sized(text);
    o.legacy_octal_numbers = true;
    o
}

/// The non-empty documents of `text`, or the first syntax error.
pub(super) fn documents(text: &str) -> Result<Vec<Node>, YamlError> {
    serde_saphyr::from_multiple_with_options::<Node>(text, options(text)).map_err(|e| {
        let location = e.location();
        let message = said(&e);
        // The parser's message names the place again; ours says it once, in front.
        let message = match message.rsplit_once(" at line ") {
            Some((head, tail)) if tail.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
                head.to_string()
            }
            _ => message,
        };
        YamlError {
            at: location,
            message: format!("YAML: {}", message.trim()),
        }
    })
}

/// Where a node's value starts (a key's own place is that of its `Spanned<String>`).
pub(super) fn place<T>(node: &Spanned<T>) -> Place {
    node.referenced
}

/// Our `file:line:col` for a place: lines counted by `\n`, as for TOML and as editors
/// count them (YAML also breaks lines at a bare `\r`, and its own numbers would point
/// past the end of such a file), through the byte offset the parser keeps.
pub(super) fn location(ctx: &FileCtx, text: &str, at: Option<Place>) -> Location {
    ctx.loc(at.map_or(0, |p| offset(text, p)))
}

impl Tree {
    /// The value under `key`, with the key's own place, in a map.
    pub(super) fn get(&self, key: &str) -> Option<(&Spanned<String>, &Node)> {
        match self {
            Tree::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.value == key)
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// The value as JSON, or the place and reason of the first value JSON cannot hold.
    pub(super) fn to_json(&self) -> Result<serde_json::Value, (Option<Place>, String)> {
        use serde_json::Value as J;
        Ok(match self {
            Tree::Null => J::Null,
            Tree::Bool(b) => J::Bool(*b),
            Tree::Int(n) => J::from(*n),
            Tree::UInt(n) => J::from(*n),
            Tree::Str(s) => J::String(s.clone()),
            Tree::Float(x) => match serde_json::Number::from_f64(*x) {
                Some(n) => J::Number(n),
                // Placed by the caller, which knows the node.
                None => return Err((None, format!("float {x} cannot be represented in JSON"))),
            },
            Tree::Seq(items) => J::Array(
                items
                    .iter()
                    .map(|i| node_to_json(i).map_err(|(at, m)| (Some(at), m)))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Tree::Map(entries) => {
                let mut out = serde_json::Map::with_capacity(entries.len());
                for (k, v) in entries {
                    let v = node_to_json(v).map_err(|(at, m)| (Some(at), m))?;
                    out.insert(k.value.clone(), v);
                }
                J::Object(out)
            }
        })
    }
}

/// `Tree::to_json` with a float's error placed at its node.
fn node_to_json(node: &Node) -> Result<serde_json::Value, (Place, String)> {
    node.value
        .to_json()
        .map_err(|(at, message)| (at.unwrap_or(node.referenced), message))
}

/// The document as JSON (see `Tree::to_json`).
pub(super) fn document_json(doc: &Node) -> Result<serde_json::Value, (Place, String)> {
    node_to_json(doc)
}

/// The place `path` names in `doc`: the key of its last element found, or the document.
fn locate(doc: &Node, path: &[String]) -> Place {
    let mut at = place(doc);
    let mut node = doc;
    for step in path {
        match node.value.get(step) {
            Some((key, value)) => {
                at = place(key);
                node = value;
            }
            None => break,
        }
    }
    at
}

/// The objects a document stands for: the items of a `List` (or `ConfigMapList`,
/// `RoleList`, ... as kubectl reads them: a kind ending in `List` with `items`), each at
/// its own place; otherwise the document itself.
fn list_items(doc: &Node) -> Vec<&Node> {
    let is_list = matches!(doc.value.get("kind"), Some((_, k)) if matches!(&k.value, Tree::Str(s) if s.ends_with("List")));
    match doc.value.get("items") {
        Some((_, items)) if is_list => match &items.value {
            Tree::Seq(items) => items.iter().collect(),
            Tree::Null => Vec::new(),
            _ => vec![doc],
        },
        _ => vec![doc],
    }
}

/// The byte offset of a place in `text`.
fn offset(text: &str, p: Place) -> usize {
    let span = p.span();
    match span.byte_offset() {
        Some(b) => usize::try_from(b).unwrap_or(usize::MAX),
        None => {
            let chars = usize::try_from(span.offset()).unwrap_or(usize::MAX);
            text.char_indices()
                .nth(chars)
                .map_or(text.len(), |(b, _)| b)
        }
    }
}

/// Replaces the variables in every string value under `node` (`spec::vars`); each unset
/// one is pushed to `unset` with its offset. A plain scalar that is one reference and
/// nothing else is read as YAML reads the value written there (`replicas: ${n}` is a
/// number), as if the text had been substituted; a quoted one stays a string. A map
/// whose `metadata.annotations` say `driftless.dev/substitute: disabled` is left whole.
fn substitute(node: &mut Node, text: &str, vars: &Vars, unset: &mut Vec<(usize, String)>) {
    // Placed only where a value changes: a place without a byte offset costs a scan of
    // the text.
    let place = node.referenced;
    match &mut node.value {
        Tree::Str(s) => match vars.expand(s) {
            Ok(std::borrow::Cow::Borrowed(_)) => {}
            Ok(std::borrow::Cow::Owned(new)) => {
                let at = offset(text, place);
                let plain = !matches!(text.as_bytes().get(at), Some(b'"' | b'\'' | b'|' | b'>'));
                node.value = match plain && Vars::whole_reference(s) {
                    true => match documents(&new) {
                        Ok(docs) if docs.is_empty() => Tree::Null,
                        Ok(mut docs)
                            if docs.len() == 1
                                && !matches!(docs[0].value, Tree::Seq(_) | Tree::Map(_)) =>
                        {
                            docs.remove(0).value
                        }
                        _ => Tree::Str(new),
                    },
                    false => Tree::Str(new),
                };
            }
            Err(refs) => {
                let at = offset(text, place);
                let end = text.len().min(at.saturating_add(s.len() + 64));
                for r in refs {
                    let found = super::extract::raw_offset(text, at..end, &r.name);
                    unset.push((found, r.message()));
                }
            }
        },
        Tree::Seq(items) => {
            for item in items {
                substitute(item, text, vars, unset);
            }
        }
        Tree::Map(entries) => {
            let disabled = matches!(
                node_at(entries, &["metadata", "annotations", crate::spec::policy::SUBSTITUTE]),
                Some(Tree::Str(v)) if v.trim() == "disabled"
            );
            if !disabled {
                for (_, v) in entries {
                    substitute(v, text, vars, unset);
                }
            }
        }
        _ => {}
    }
}

/// The value at `path` under a map's entries.
fn node_at<'a>(entries: &'a [(Spanned<String>, Node)], path: &[&str]) -> Option<&'a Tree> {
    let (first, rest) = path.split_first()?;
    let (_, v) = entries.iter().find(|(k, _)| k.value == *first)?;
    match (rest.is_empty(), &v.value) {
        (true, t) => Some(t),
        (false, Tree::Map(inner)) => node_at(inner, rest),
        _ => None,
    }
}

/// Reads one YAML file: each document a manifest spec, or errors at their places. A
/// syntax error stops the file, as in TOML.
pub(super) fn file(path: &str, text: &str, vars: Option<&Vars>) -> (Vec<Found>, Vec<SpecError>) {
    let ctx = FileCtx::new(path, text);
    let at = |p: Place| location(&ctx, text, Some(p));
    let mut docs = match documents(text) {
        Ok(docs) => docs,
        Err(e) => {
            return (
                Vec::new(),
                vec![SpecError {
                    at: location(&ctx, text, e.at),
                    message: e.message,
                }],
            );
        }
    };
    let mut found = Vec::with_capacity(docs.len());
    let mut errors = Vec::new();
    if let Some(vars) = vars {
        let mut unset = Vec::new();
        for doc in &mut docs {
            substitute(doc, text, vars, &mut unset);
        }
        if !unset.is_empty() {
            // A document with an unset variable is not read further: its value would be
            // a guess.
            let errors = unset
                .into_iter()
                .map(|(offset, message)| SpecError {
                    at: ctx.loc(offset),
                    message,
                })
                .collect();
            return (Vec::new(), errors);
        }
    }
    for doc in docs.iter().flat_map(list_items) {
        let json = match document_json(doc) {
            Ok(json) => json,
            Err((place, message)) => {
                errors.push(SpecError {
                    at: at(place),
                    message,
                });
                continue;
            }
        };
        match manifest::check(json) {
            Ok(m) => found.push(Found::manifest(m, None, at(place(doc)), || {
                let path = ["metadata", "annotations", crate::spec::policy::DEPENDS_ON];
                at(locate(doc, &path.map(String::from)))
            })),
            Err(problems) => errors.extend(problems.into_iter().map(|p| SpecError {
                at: at(locate(doc, &p.path)),
                message: p.message,
            })),
        }
    }
    (found, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (line, column) of a place in `text`, as errors give it.
    fn lc(text: &str, p: Place) -> (usize, usize) {
        let l = location(&FileCtx::new("t.yaml", text), text, Some(p));
        (l.line, l.column)
    }

    #[test]
    fn documents_keep_places_nulls_and_order() {
        let text = "# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  creationTimestamp: null\ndata:\n  b: \"1\"\n  a: two\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: y}\n";
        let docs = documents(text).unwrap();
        assert_eq!(docs.len(), 2, "empty documents are skipped");
        assert_eq!(lc(text, place(&docs[1])).0, 12);
        let (key, meta) = docs[0].value.get("metadata").unwrap();
        assert_eq!(lc(text, place(key)), (4, 1));
        let (key, _) = meta.value.get("creationTimestamp").unwrap();
        assert_eq!(lc(text, place(key)), (6, 3));
        let json = document_json(&docs[0]).unwrap();
        assert_eq!(
            json["metadata"]["creationTimestamp"],
            serde_json::Value::Null
        );
        assert_eq!(json["data"], serde_json::json!({"a": "two", "b": "1"}));
    }

    #[test]
    fn lists_are_read_as_their_items_each_at_its_place() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: rbac.authorization.k8s.io/v1\n  kind: Role\n  metadata: {name: 'system:r', namespace: ns}\n---\napiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: Bad_Name}\n---\nkind: RoleList\napiVersion: v1\nitems: []\n";
        let (found, errors) = file("l.yaml", text, None);
        let names: Vec<String> = found
            .iter()
            .map(|f| match &f.body {
                crate::spec::SpecBody::Manifest(m) => {
                    format!("{}/{}", m.kind, m.metadata.name)
                }
                _ => unreachable!("YAML holds manifests only"),
            })
            .collect();
        assert_eq!(names, ["ConfigMap/a", "Role/system:r"], "{errors:?}");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!((errors[0].at.line, errors[0].at.column), (16, 14));
        assert!(errors[0].message.contains("Bad_Name"), "{errors:?}");
    }

    #[test]
    fn a_kind_ending_in_list_without_items_is_an_object() {
        let text = "apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: a}\nspec: {items: [x]}\n";
        let (found, errors) = file("a.yaml", text, None);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn numbers_read_as_kubernetes_reads_them() {
        let docs =
            documents("a: 0644\nb: 12\nc: 1.5\nd: \"0644\"\ne: 18446744073709551615\n").unwrap();
        let json = document_json(&docs[0]).unwrap();
        assert_eq!(
            json["a"], 420,
            "YAML 1.1 octal, as go-yaml reads defaultMode"
        );
        assert_eq!(json["b"], 12);
        assert_eq!(json["c"], 1.5);
        assert_eq!(json["d"], "0644");
        assert_eq!(json["e"], u64::MAX);
    }

    #[test]
    fn syntax_errors_name_their_place_once() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n bad: indent\n";
        let e = documents(text).unwrap_err();
        assert_eq!(lc(text, e.at.unwrap()).0, 5, "{e:?}");
        assert!(e.message.starts_with("YAML: "), "{e:?}");
        assert!(!e.message.contains("line 5"), "{e:?}");
        let dup = documents("a: 1\na: 2\n").unwrap_err();
        assert_eq!(lc("a: 1\na: 2\n", dup.at.unwrap()).0, 2, "{dup:?}");
        assert!(dup.message.contains("duplicate"), "{dup:?}");
    }

    /// YAML breaks lines at a bare `\r` too; places are given in lines of `\n` (as for
    /// TOML, and as editors count them), so they never point past the file's end.
    /// (Found by the fuzzer.)
    #[test]
    fn places_count_lines_by_newline_only() {
        let text = "# a\r\r\r\r\r\rcomment\nkey: [\n";
        let (found, errors) = file("t.yaml", text, None);
        assert!(found.is_empty());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].at.line <= 2, "{errors:?}");
        let text = "a: 1\r\r\r\rb: [x\n";
        let (_, errors) = file("t.yaml", text, None);
        assert!(errors.iter().all(|e| e.at.line <= 2), "{errors:?}");
    }

    #[test]
    fn an_alias_bomb_is_refused_not_expanded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = documents(&text).unwrap_err();
        assert_eq!(
            e.message,
            "YAML: its aliases expand past what is written, and driftless does not expand them so far"
        );
    }

    #[test]
    fn what_is_written_out_in_full_is_read_whatever_its_size() {
        // 3,000 documents: a bundle, a chart's or a Kustomization's build. The parser's
        // own budget stopped at 1,024 ("budget breached: Documents { documents: 1025 }").
        let text: String = (0..3000)
            .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{a: '{i}'}}\n"))
            .collect();
        assert_eq!(documents(&text).unwrap().len(), 3000);
        // One document of 300,000 nodes (a CRD's schema is of this kind), past its 250,000.
        let items: String = (0..300_000).map(|i| format!("- {}\n", i % 10)).collect();
        let one = format!("list:\n{items}");
        assert_eq!(read_all::<serde_json::Value>(&one).unwrap().len(), 1);
    }

    #[test]
    fn non_finite_floats_are_errors_at_their_place() {
        // Refused by the parser or by the conversion: either way at line 2.
        let text = "a:\n  b: .nan\n";
        let place = match documents(text) {
            Err(e) => e.at.unwrap(),
            Ok(docs) => document_json(&docs[0]).unwrap_err().0,
        };
        assert_eq!(lc(text, place).0, 2);
    }
}
