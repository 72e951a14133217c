//! A file's TOML syntax errors, bounded by the error cap.
//!
//! The TOML reader's recovering parse (`DeTable::parse_recoverable`) builds every error of
//! a file, a message string each, before the caller can drop any: a 4 MiB file of garbage
//! gave 6.3 million (4 s and 1.3 GiB in a debug build) of which 100 were shown. So a file
//! is parsed once without recovery (the reader then keeps only its first error), and only
//! when that fails are its grammar and the decoding of its keys and values (where most
//! errors of garbage are found) run again, with a sink that formats the errors shown and
//! only counts the rest.

use std::ops::Range;

use toml_parser::decoder::Encoding;
use toml_parser::parser::{EventReceiver, RecursionGuard, ValidateWhitespace};
use toml_parser::{ErrorSink, Expected, ParseError, Raw, Source, Span};

use super::FileCtx;

/// The TOML reader's nesting limit (`toml`'s own, not exported), for the grammar pass to
/// stop where the reader stops.
const NESTING_LIMIT: u32 = 80;

/// Reports the syntax errors of `text`, whose parse failed with `first`. Errors of the
/// grammar and of decoding keys and values are all counted and the first ones shown; an
/// error the reader finds only as it builds the tables (a duplicate key, a table defined
/// twice, a date that does not exist) is known as `first`, shown alone when the rest is
/// fine.
pub(super) fn report(ctx: &mut FileCtx, text: &str, first: &toml::de::Error) {
    let source = Source::new(text);
    let tokens = source.lex().into_vec();
    let mut decode = Decode { text };
    let mut whitespace = ValidateWhitespace::new(&mut decode, source);
    let mut guard = RecursionGuard::new(&mut whitespace, NESTING_LIMIT);
    let mut found = 0usize;
    let mut sink = |e: ParseError| {
        found += 1;
        if ctx.is_full() {
            // Counted, never formatted: this is what keeps garbage cheap.
            ctx.dropped_errors += 1;
        } else {
            let span = e.unexpected().map_or(0..0, |s| s.start()..s.end());
            push(ctx, &span, &message(&e));
        }
    };
    toml_parser::parser::parse_document(&tokens, &mut guard, &mut sink);
    if found == 0 {
        push(ctx, &first.span().unwrap_or(0..0), first.message());
    }
}

/// Decodes each key and value as the reader does, for the errors only.
struct Decode<'i> {
    text: &'i str,
}

impl<'i> Decode<'i> {
    fn raw(&self, span: Span, encoding: Option<Encoding>) -> Option<Raw<'i>> {
        let text = self.text.get(span.start()..span.end())?;
        Some(Raw::new_unchecked(text, encoding, span))
    }
}

impl EventReceiver for Decode<'_> {
    fn simple_key(&mut self, span: Span, encoding: Option<Encoding>, error: &mut dyn ErrorSink) {
        if let Some(raw) = self.raw(span, encoding) {
            raw.decode_key(&mut (), error);
        }
    }

    fn scalar(&mut self, span: Span, encoding: Option<Encoding>, error: &mut dyn ErrorSink) {
        if let Some(raw) = self.raw(span, encoding) {
            let _kind = raw.decode_scalar(&mut (), error);
        }
    }
}

fn push(ctx: &mut FileCtx, span: &Range<usize>, message: &str) {
    let message = message.trim().replace('\n', "; ");
    // The parser's own words for its nesting limit say little to a user.
    let message = if message.contains("recurs") {
        "nested too deeply (arrays, inline tables or dotted keys)".to_string()
    } else {
        message
    };
    ctx.err(span, format!("invalid TOML: {message}"));
}

/// The reader's message for a grammar error, word for word (`toml::de::Error::new`), so
/// both passes say the same.
fn message(e: &ParseError) -> String {
    let mut out = e.description().to_string();
    if let Some(expected) = e.expected() {
        out.push_str(", expected ");
        if expected.is_empty() {
            out.push_str("nothing");
        }
        for (i, x) in expected.iter().enumerate() {
            if i != 0 {
                out.push_str(", ");
            }
            match x {
                Expected::Literal(lit) => out.push_str(&literal(lit)),
                Expected::Description(desc) => out.push_str(desc),
                _ => out.push_str("etc"),
            }
        }
    }
    out
}

fn literal(lit: &str) -> String {
    match lit {
        "\n" => "newline".to_string(),
        "`" => "'`'".to_string(),
        s if s.chars().all(|c| c.is_ascii_control()) => format!("`{}`", s.escape_debug()),
        s => format!("`{s}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::MAX_ERRORS_PER_FILE;
    use toml::de::DeTable;

    /// What the reader's recovering parse reports, as this module words it.
    fn recovered(text: &str) -> Vec<String> {
        let (_, errors) = DeTable::parse_recoverable(text);
        let mut ctx = FileCtx::new("t.toml", text);
        for e in &errors {
            push(&mut ctx, &e.span().unwrap_or(0..0), e.message());
        }
        let mut out: Vec<String> = ctx.errors.iter().map(|e| e.to_string()).collect();
        out.sort();
        out
    }

    fn reported(text: &str) -> (Vec<String>, usize) {
        let first = DeTable::parse(text).unwrap_err();
        let mut ctx = FileCtx::new("t.toml", text);
        report(&mut ctx, text, &first);
        let mut shown: Vec<String> = ctx.errors.iter().map(|e| e.to_string()).collect();
        // In file order, as the loader lists them.
        shown.sort();
        (shown, ctx.dropped_errors)
    }

    /// Errors of grammar and decoding come out as the reader's recovering parse words and
    /// places them.
    #[test]
    fn grammar_errors_match_the_readers_own() {
        for text in [
            "[workspace.a\nimage = \"x\"\n",
            "a = [1, 2\nb = \n[c]]\n",
            "a = { b = 1\n",
            "= 1\n",
            "a = \"x\" b\n",
        ] {
            let (got, dropped) = reported(text);
            assert_eq!(got, recovered(text), "{text:?}");
            assert_eq!(dropped, 0);
        }
        // Under a broken table header the reader decodes nothing; this pass still does,
        // and finds the string left open too.
        let text = "[[a]\nx = 'unclosed\n";
        let (got, _) = reported(text);
        assert_eq!(
            got,
            [
                "t.toml:1:5: invalid TOML: unclosed array table, expected `]`",
                "t.toml:2:14: invalid TOML: invalid literal string, expected `'`"
            ]
        );
        assert_eq!(recovered(text), got[..1]);
    }

    /// An error past the grammar is the reader's first, alone.
    #[test]
    fn a_duplicate_key_is_the_readers_first_error() {
        let (got, _) = reported("a = 1\na = 2\na = 3\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("t.toml:2:1: invalid TOML: "), "{got:?}");
    }

    /// Past the cap errors are counted, not formatted: every one the reader finds but
    /// the duplicate keys (found as it builds tables, which this pass does not).
    #[test]
    fn garbage_is_counted_past_the_cap() {
        let text = "=\n".repeat(5_000);
        let (got, dropped) = reported(&text);
        assert_eq!(got.len(), MAX_ERRORS_PER_FILE);
        let (_, all) = DeTable::parse_recoverable(&text);
        let found = all.iter().filter(|e| e.message() != "duplicate key");
        assert_eq!(got.len() + dropped, found.count());
    }
}
