//! A SOPS file's YAML as sops sees it: each document's map, every scalar with its exact
//! byte range, quoting style and tag (sops's MAC depends on how a value was written: `true`
//! and `"true"` hash differently), and the `sops` metadata key. Built from the parser's
//! events with an explicit stack, so hostile nesting cannot overflow ours (the parser
//! bounds nesting at 255 levels, which the recursive walks over the result stay within).

use std::ops::Range;

use granit_parser::{Event, Options, Parser, ScalarStyle};

/// A scalar as written.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scalar {
    /// The value after YAML's escapes and folding.
    pub value: String,
    /// Plain (unquoted) scalars are typed by their text; quoted and block ones are strings.
    pub plain: bool,
    /// The suffix of a `!!type` tag (`str`, `int`, ...); `Some("")` for any other tag.
    pub tag: Option<String>,
    /// Bytes of the source text this scalar takes, quotes included.
    pub range: Range<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Scalar(Scalar),
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, usize),
    /// `*name`: sops expands aliases when it writes a file, so none belongs in one.
    Alias(usize),
}

impl Node {
    /// Where the node starts.
    pub fn start(&self) -> usize {
        match self {
            Node::Scalar(s) => s.range.start,
            Node::Seq(_, at) | Node::Map(_, at) | Node::Alias(at) => *at,
        }
    }

    /// Where the last scalar in it ends (its start, when there is none).
    pub fn end(&self) -> usize {
        match self {
            Node::Scalar(s) => s.range.end,
            Node::Seq(items, at) => items.iter().map(Node::end).max().unwrap_or(*at),
            Node::Map(entries, at) => entries
                .iter()
                .map(|(k, v)| k.end().max(v.end()))
                .max()
                .unwrap_or(*at),
            Node::Alias(at) => *at,
        }
    }

    /// The scalar text of a map key or metadata field.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.value),
            _ => None,
        }
    }

    /// The value under `key` in a map, with the key.
    pub fn get(&self, key: &str) -> Option<(&Node, &Node)> {
        match self {
            Node::Map(entries, _) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }
}

/// Where a collection being built started, and what it holds so far.
enum Open {
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize),
}

/// The documents of `text` (empty ones included, as sops keeps them), or `None` when the
/// parser refuses it: the YAML reader then reports that error at its place.
pub(super) fn documents(text: &str) -> Option<Vec<Option<Node>>> {
    let mut options = Options::default();
    // Comments are not data: sops keeps them (encrypted) out of its MAC.
    options.set_emit_comments(false);
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Node> = None;
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, span) = event.ok()?;
        let range = span.byte_range()?;
        let node = match event {
            Event::DocumentStart(..) => {
                root = None;
                continue;
            }
            Event::DocumentEnd => {
                docs.push(root.take());
                continue;
            }
            Event::Scalar(value, style, _, tag) => Node::Scalar(Scalar {
                value: value.into_owned(),
                plain: style == ScalarStyle::Plain,
                tag: tag.map(|t| {
                    if t.is_yaml_core_schema() {
                        t.suffix().to_string()
                    } else {
                        String::new()
                    }
                }),
                range,
            }),
            Event::Alias(_) | Event::UnresolvedAlias(_) => Node::Alias(range.start),
            Event::SequenceStart(..) => {
                stack.push(Open::Seq(Vec::new(), range.start));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Open::Map(Vec::new(), None, range.start));
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop()? {
                Open::Seq(items, at) => Node::Seq(items, at),
                Open::Map(entries, None, at) => Node::Map(entries, at),
                Open::Map(_, Some(_), _) => return None,
            },
            _ => continue,
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Open::Seq(items, _)) => items.push(node),
            Some(Open::Map(entries, key, _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
    Some(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(node: &Node) -> &Scalar {
        match node {
            Node::Scalar(s) => s,
            other => panic!("not a scalar: {other:?}"),
        }
    }

    #[test]
    fn scalars_keep_their_text_style_tag_and_place() {
        let text = "a: plain\nb: \"quo\\\"ted\"\nc: !!str 12\nd: |\n  block\n---\n- 'x'\n";
        let docs = documents(text).unwrap();
        assert_eq!(docs.len(), 2);
        let doc = docs[0].as_ref().unwrap();
        let a = scalar(doc.get("a").unwrap().1);
        assert_eq!((a.value.as_str(), a.plain), ("plain", true));
        assert_eq!(&text[a.range.clone()], "plain");
        let b = scalar(doc.get("b").unwrap().1);
        assert_eq!((b.value.as_str(), b.plain), ("quo\"ted", false));
        assert_eq!(&text[b.range.clone()], "\"quo\\\"ted\"", "quotes included");
        let c = scalar(doc.get("c").unwrap().1);
        assert_eq!(c.tag.as_deref(), Some("str"));
        let d = scalar(doc.get("d").unwrap().1);
        assert_eq!((d.value.as_str(), d.plain), ("block\n", false));
        let Some(Node::Seq(items, _)) = &docs[1] else {
            panic!("{docs:?}")
        };
        assert_eq!(&text[scalar(&items[0]).range.clone()], "'x'");
    }

    #[test]
    fn broken_yaml_is_left_to_the_reader() {
        assert!(documents("a: [\n").is_none());
        assert!(documents("a: 1\na: [x\n").is_none());
    }
}
