//! The evaluator: a file and its imports, by rsjsonnet-lang, with the tree's settings;
//! its output walked as Tanka walks it. Bounded by a stack depth, a time limit and an
//! output size; errors at Jsonnet's own `file:line:col`.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rsjsonnet_lang::arena::Arena;
use rsjsonnet_lang::interner::InternedStr;
use rsjsonnet_lang::program::{
    Callbacks, EvalError, EvalErrorKind, EvalStackTraceItem, ImportError, LoadError, NativeError,
    Program, Thunk, Value,
};
use rsjsonnet_lang::span::{SpanContextId, SpanId};

use crate::spec::settings::JsonnetSettings;

/// Calls deeper than this are an error (as `jsonnet --max-stack`, whose default it is).
const MAX_STACK: usize = 500;

/// Where a Jsonnet error is: a file of the tree, 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonnetError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// What an evaluation gave, and what it read: the files (itself and its imports) and the
/// places an import looked in and found nothing. The cache keys it by both, a failure
/// too: a file added where an import looked in vain may mend it.
#[derive(Debug, Clone)]
pub(crate) struct Evaluated {
    pub objects: Result<Vec<serde_json::Value>, JsonnetError>,
    pub read: Vec<String>,
    pub missed: Vec<String>,
}

/// The files imports may reach: the spec tree's, by path from its root.
pub type Files = Arc<HashMap<String, Arc<Vec<u8>>>>;

/// Evaluates `entry` on a thread of its own; past `timeout` the caller is answered with
/// an error. (The evaluator cannot be interrupted: the thread runs on to its end, and the
/// caller's cache keeps a file that timed out from being started again until it changes.)
pub(crate) fn evaluate(
    entry: &str,
    files: &Files,
    settings: &JsonnetSettings,
    timeout: Duration,
    max_output: usize,
) -> Evaluated {
    let (tx, rx) = mpsc::channel();
    let (entry_owned, files, settings) = (entry.to_string(), files.clone(), settings.clone());
    let spawned = std::thread::Builder::new()
        .name("jsonnet".into())
        // Deep (but bounded) recursion of the evaluator's own.
        .stack_size(16 << 20)
        .spawn(move || {
            let _ = tx.send(run(&entry_owned, &files, &settings, max_output));
        });
    let at_start = |message: String| JsonnetError {
        file: entry.to_string(),
        line: 1,
        column: 1,
        message,
    };
    // What stopped it before it ended: known to have read the file itself.
    let stopped = |message: String| Evaluated {
        objects: Err(at_start(message)),
        read: vec![entry.to_string()],
        missed: Vec::new(),
    };
    if let Err(e) = spawned {
        return stopped(format!("cannot start the evaluation: {e}"));
    }
    match rx.recv_timeout(timeout) {
        Ok(evaluated) => evaluated,
        Err(mpsc::RecvTimeoutError::Timeout) => stopped(format!(
            "Jsonnet evaluation did not finish within {}; stopped",
            humantime::format_duration(timeout)
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            stopped("the Jsonnet evaluation stopped without a result".into())
        }
    }
}

/// A loaded source: its path and text, for positions.
struct Source {
    path: String,
    text: Vec<u8>,
}

struct Imports<'p> {
    files: Files,
    libs: Vec<String>,
    sources: Vec<(SpanContextId, Source)>,
    loaded: HashMap<String, Thunk<'p>>,
    read: BTreeSet<String>,
    missed: BTreeSet<String>,
    /// The first import that failed to load, with why (the evaluator only says it failed).
    import_problem: Option<JsonnetError>,
}

impl<'p> Imports<'p> {
    fn source_of(&self, ctx: SpanContextId) -> Option<&Source> {
        self.sources.iter().find(|(c, _)| *c == ctx).map(|(_, s)| s)
    }

    /// The tree's file `path` names from the file that holds span `from`. The places
    /// looked in before it are missed: a file added at one of them is imported instead.
    fn resolve(&mut self, program: &Program<'p>, from: SpanId, path: &str) -> Option<String> {
        let (ctx, _, _) = program.span_manager().get_span(from);
        let here = self
            .source_of(ctx)
            .map(|s| crate::hydrate::tree::dir_of(&s.path).to_string())
            .unwrap_or_default();
        let candidates: Vec<String> = std::iter::once(here)
            .chain(self.libs.iter().cloned())
            .filter_map(|dir| normalize(&dir, path))
            .collect();
        for c in candidates {
            if self.files.contains_key(&c) {
                return Some(c);
            }
            self.missed.insert(c);
        }
        None
    }

    /// A source about to be loaded: read (for the cache), and known by its context (for
    /// positions).
    fn add_source(&mut self, program: &mut Program<'p>, path: &str, text: &[u8]) -> SpanContextId {
        self.read.insert(path.to_string());
        let (ctx, _) = program.span_manager_mut().insert_source_context(text.len());
        self.sources.push((
            ctx,
            Source {
                path: path.to_string(),
                text: text.to_vec(),
            },
        ));
        ctx
    }

    fn load(
        &mut self,
        program: &mut Program<'p>,
        path: &str,
        at: (SpanId, &str),
    ) -> Result<Thunk<'p>, ImportError> {
        if let Some(t) = self.loaded.get(path) {
            return Ok(t.clone());
        }
        let Some(text) = self.files.get(path).cloned() else {
            return Err(ImportError);
        };
        let ctx = self.add_source(program, path, &text);
        match program.load_source(ctx, &text, true, path) {
            Ok(t) => {
                self.loaded.insert(path.to_string(), t.clone());
                Ok(t)
            }
            Err(e) => {
                if self.import_problem.is_none() {
                    let _ = at;
                    self.import_problem = Some(load_error(program, self, &e, path));
                }
                Err(ImportError)
            }
        }
    }
}

impl<'p> Callbacks<'p> for Imports<'p> {
    fn import(
        &mut self,
        program: &mut Program<'p>,
        from: SpanId,
        path: &str,
    ) -> Result<Thunk<'p>, ImportError> {
        let resolved = self.resolve(program, from, path).ok_or(ImportError)?;
        self.load(program, &resolved, (from, path))
    }

    fn import_str(
        &mut self,
        program: &mut Program<'p>,
        from: SpanId,
        path: &str,
    ) -> Result<String, ImportError> {
        let resolved = self.resolve(program, from, path).ok_or(ImportError)?;
        let text = self.files.get(&resolved).ok_or(ImportError)?;
        self.read.insert(resolved.clone());
        String::from_utf8(text.to_vec()).map_err(|_| ImportError)
    }

    fn import_bin(
        &mut self,
        program: &mut Program<'p>,
        from: SpanId,
        path: &str,
    ) -> Result<Vec<u8>, ImportError> {
        let resolved = self.resolve(program, from, path).ok_or(ImportError)?;
        let text = self.files.get(&resolved).ok_or(ImportError)?;
        self.read.insert(resolved.clone());
        Ok(text.to_vec())
    }

    // std.trace is a debugging aid: driftless's output stays its own.
    fn trace(&mut self, _: &mut Program<'p>, _: &str, _: &[EvalStackTraceItem]) {}

    fn native_call(
        &mut self,
        _: &mut Program<'p>,
        _: InternedStr<'p>,
        _: &[Value<'p>],
    ) -> Result<Value<'p>, NativeError> {
        Err(NativeError)
    }
}

/// `path` from directory `dir`, `..` resolved; `None` when it climbs out of the tree.
fn normalize(dir: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

fn run(entry: &str, files: &Files, settings: &JsonnetSettings, max_output: usize) -> Evaluated {
    let arena = Arena::new();
    let mut program = Program::new(&arena);
    program.set_max_stack(MAX_STACK);
    for (name, value) in &settings.ext_vars {
        let v = program.value_to_thunk(&Value::string(value));
        let name = program.intern_str(name);
        program.add_ext_var(name, &v);
    }
    let mut imports = Imports {
        files: files.clone(),
        libs: settings.libs.clone(),
        sources: Vec::new(),
        loaded: HashMap::new(),
        read: BTreeSet::new(),
        missed: BTreeSet::new(),
        import_problem: None,
    };
    let at_start = |message: String| JsonnetError {
        file: entry.to_string(),
        line: 1,
        column: 1,
        message,
    };
    let objects = objects(
        entry,
        files,
        settings,
        max_output,
        &mut program,
        &mut imports,
        at_start,
    );
    Evaluated {
        objects,
        read: imports.read.into_iter().collect(),
        missed: imports.missed.into_iter().collect(),
    }
}

/// The objects `entry` evaluates to, what it reads recorded in `imports`.
fn objects<'p>(
    entry: &str,
    files: &Files,
    settings: &JsonnetSettings,
    max_output: usize,
    program: &mut Program<'p>,
    imports: &mut Imports<'p>,
    at_start: impl Fn(String) -> JsonnetError,
) -> Result<Vec<serde_json::Value>, JsonnetError> {
    let Some(text) = files.get(entry).cloned() else {
        return Err(at_start("not found".into()));
    };
    let ctx = imports.add_source(program, entry, &text);
    let thunk = program
        .load_source(ctx, &text, true, entry)
        .map_err(|e| load_error(program, imports, &e, entry))?;
    let mut value = program
        .eval_value(&thunk, imports)
        .map_err(|e| eval_error(program, imports, &e, entry))?;
    if value.is_function() {
        // Top-level arguments, as `jsonnet --tla-str`.
        let named: Vec<(InternedStr<'_>, Thunk<'_>)> = settings
            .tlas
            .iter()
            .map(|(k, v)| {
                let t = program.value_to_thunk(&Value::string(v));
                (program.intern_str(k), t)
            })
            .collect();
        value = program
            .eval_call(&thunk, &[], &named, imports)
            .map_err(|e| eval_error(program, imports, &e, entry))?;
    }
    let json = program
        .manifest_json(&value, false)
        .map_err(|e| eval_error(program, imports, &e, entry))?;
    if json.len() > max_output {
        return Err(at_start(format!(
            "the Jsonnet output is larger than {} MiB; not read",
            max_output >> 20
        )));
    }
    let doc: serde_json::Value = serde_json::from_str(&json)
        .map_err(|e| at_start(format!("the Jsonnet output is not JSON: {e}")))?;
    let mut objects = Vec::new();
    extract(doc, &mut objects);
    Ok(objects)
}

/// Tanka's rule: an object with `apiVersion` and `kind` is a Kubernetes object; other
/// objects (in key order) and arrays are descended into; anything else is left out.
pub fn extract(v: serde_json::Value, out: &mut Vec<serde_json::Value>) {
    match v {
        serde_json::Value::Object(map) => {
            if crate::hydrate::tree::is_manifest_json(&serde_json::Value::Object(map.clone())) {
                out.push(serde_json::Value::Object(map));
            } else {
                let mut fields: Vec<_> = map.into_iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                for (_, v) in fields {
                    extract(v, out);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                extract(v, out);
            }
        }
        _ => {}
    }
}

/// `file:line:col` of a span.
fn place(
    program: &Program<'_>,
    imports: &Imports<'_>,
    span: SpanId,
) -> Option<(String, usize, usize)> {
    let (ctx, start, _) = program.span_manager().get_span(span);
    let src = imports.source_of(ctx)?;
    let before = &src.text[..start.min(src.text.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    Some((src.path.clone(), line, column))
}

fn at(
    program: &Program<'_>,
    imports: &Imports<'_>,
    span: Option<SpanId>,
    entry: &str,
    message: String,
) -> JsonnetError {
    let (file, line, column) = span
        .and_then(|s| place(program, imports, s))
        .unwrap_or_else(|| (entry.to_string(), 1, 1));
    JsonnetError {
        file,
        line,
        column,
        message,
    }
}

/// A variant's name as words: `InvalidIndexedType` → "invalid indexed type".
fn words(debug: &str) -> String {
    let name: String = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn load_error(
    program: &Program<'_>,
    imports: &Imports<'_>,
    e: &LoadError,
    entry: &str,
) -> JsonnetError {
    use rsjsonnet_lang::lexer::LexError;
    use rsjsonnet_lang::parser::ParseError;
    use rsjsonnet_lang::program::AnalyzeError;
    let (span, message) = match e {
        LoadError::Lex(l) => {
            let span = match l {
                LexError::InvalidChar { span, .. }
                | LexError::InvalidUtf8 { span, .. }
                | LexError::UnfinishedMultilineComment { span }
                | LexError::LeadingZeroInNumber { span }
                | LexError::MissingFracDigits { span }
                | LexError::MissingExpDigits { span } => Some(*span),
                _ => None,
            };
            (
                span,
                format!("Jsonnet syntax: {}", words(&format!("{l:?}"))),
            )
        }
        LoadError::Parse(ParseError::Expected { span, instead, .. }) => (
            Some(*span),
            format!(
                "Jsonnet syntax: unexpected {}",
                words(&format!("{instead:?}"))
            ),
        ),
        LoadError::Analyze(a) => match a {
            AnalyzeError::UnknownVariable { span, name } => {
                (Some(*span), format!("unknown variable `{name}`"))
            }
            AnalyzeError::RepeatedFieldName {
                repeated_span,
                name,
                ..
            } => (
                Some(*repeated_span),
                format!("field `{name}` is defined twice"),
            ),
            AnalyzeError::RepeatedLocalName {
                repeated_span,
                name,
                ..
            } => (
                Some(*repeated_span),
                format!("local `{name}` is defined twice"),
            ),
            other => (None, format!("Jsonnet: {}", words(&format!("{other:?}")))),
        },
    };
    at(program, imports, span, entry, message)
}

fn eval_error(
    program: &Program<'_>,
    imports: &Imports<'_>,
    e: &EvalError,
    entry: &str,
) -> JsonnetError {
    // The innermost place the evaluation was at, for kinds that carry none.
    let innermost = e.stack_trace.iter().rev().find_map(|t| match t {
        EvalStackTraceItem::Expr { span }
        | EvalStackTraceItem::Variable { span, .. }
        | EvalStackTraceItem::Import { span } => Some(*span),
        EvalStackTraceItem::Call { span, .. }
        | EvalStackTraceItem::ArrayItem { span, .. }
        | EvalStackTraceItem::ObjectField { span, .. } => *span,
        _ => None,
    });
    let (span, message) = match &e.kind {
        EvalErrorKind::ExplicitError { span, message } => {
            (Some(*span), format!("error: {message}"))
        }
        EvalErrorKind::AssertFailed { span, message } => (
            Some(*span),
            match message {
                Some(m) => format!("assertion failed: {m}"),
                None => "assertion failed".to_string(),
            },
        ),
        EvalErrorKind::ImportFailed { span, path } => {
            if let Some(problem) = &imports.import_problem {
                return problem.clone();
            }
            (
                Some(*span),
                format!(
                    "cannot import {path:?}: no such file in the spec tree or its [jsonnet] libs"
                ),
            )
        }
        EvalErrorKind::UnknownExtVar { name } => (
            innermost,
            format!(
                "external variable `{name}` is not set; set it in .driftless.toml [jsonnet] ext-vars"
            ),
        ),
        EvalErrorKind::StackOverflow => (
            innermost,
            format!("stack overflow: calls deeper than {MAX_STACK}"),
        ),
        EvalErrorKind::InfiniteRecursion => (innermost, "infinite recursion".to_string()),
        other => (innermost, words(&format!("{other:?}"))),
    };
    at(program, imports, span, entry, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Files {
        Arc::new(
            list.iter()
                .map(|(p, t)| (p.to_string(), Arc::new(t.as_bytes().to_vec())))
                .collect(),
        )
    }

    fn eval(
        list: &[(&str, &str)],
        settings: &JsonnetSettings,
    ) -> Result<Vec<serde_json::Value>, JsonnetError> {
        evaluated(list, settings).objects
    }

    fn evaluated(list: &[(&str, &str)], settings: &JsonnetSettings) -> Evaluated {
        evaluate(
            list[0].0,
            &files(list),
            settings,
            Duration::from_secs(20),
            1 << 20,
        )
    }

    #[test]
    fn objects_are_found_as_tanka_finds_them() {
        let out = evaluated(
            &[
                (
                    "app/main.jsonnet",
                    "local l = import 'lib.libsonnet'; { a: l.cm('a'), b: [l.cm('b'), { c: l.cm(std.extVar('v')) }], n: 3 }",
                ),
                (
                    "lib/lib.libsonnet",
                    "{ cm(n):: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: n } } }",
                ),
            ],
            &JsonnetSettings {
                libs: vec!["lib".into()],
                ext_vars: [("v".to_string(), "c".to_string())].into(),
                ..JsonnetSettings::default()
            },
        );
        let names: Vec<&str> = out
            .objects
            .as_ref()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(out.read, ["app/main.jsonnet", "lib/lib.libsonnet"]);
        // Looked for beside the importing file first: a file put there is imported instead.
        assert_eq!(out.missed, ["app/lib.libsonnet"]);
    }

    #[test]
    fn an_import_found_nowhere_names_every_place_it_looked() {
        let out = evaluated(
            &[("app/main.jsonnet", "import 'gone.libsonnet'")],
            &JsonnetSettings {
                libs: vec!["lib".into()],
                ..JsonnetSettings::default()
            },
        );
        assert!(out.objects.is_err());
        assert_eq!(out.read, ["app/main.jsonnet"]);
        assert_eq!(out.missed, ["app/gone.libsonnet", "lib/gone.libsonnet"]);
    }

    #[test]
    fn top_level_arguments_are_passed() {
        let out = eval(
            &[(
                "f.jsonnet",
                "function(name) { apiVersion: 'v1', kind: 'Namespace', metadata: { name: name } }",
            )],
            &JsonnetSettings {
                tlas: [("name".to_string(), "x".to_string())].into(),
                ..JsonnetSettings::default()
            },
        )
        .unwrap();
        assert_eq!(out[0]["metadata"]["name"], "x");
    }

    #[test]
    fn errors_are_at_jsonnets_own_place() {
        let e = eval(
            &[("a.jsonnet", "{\n  x: 1,\n  y: error 'boom',\n}")],
            &JsonnetSettings::default(),
        )
        .unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.column),
            ("a.jsonnet", 3, 6),
            "{e:?}"
        );
        assert_eq!(e.message, "error: boom");

        let e = eval(
            &[("b.jsonnet", "{ x: \n  y }")],
            &JsonnetSettings::default(),
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (2, "unknown variable `y`"),
            "{e:?}"
        );

        let e = eval(
            &[("c.jsonnet", "{ x: std.extVar('nope') }")],
            &JsonnetSettings::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("`nope` is not set"), "{e:?}");

        let e = eval(
            &[("d.jsonnet", "import 'missing.libsonnet'")],
            &JsonnetSettings::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("cannot import"), "{e:?}");

        let e = eval(
            &[("e.jsonnet", "local f(x) = f(x + 1) + 1; f(0)")],
            &JsonnetSettings::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("stack overflow"), "{e:?}");

        let e = eval(&[("g.jsonnet", "{ x: ")], &JsonnetSettings::default()).unwrap_err();
        assert!(e.message.starts_with("Jsonnet syntax"), "{e:?}");
    }

    #[test]
    fn imports_stay_in_the_tree() {
        assert_eq!(
            normalize("a/b", "../c.libsonnet").as_deref(),
            Some("a/c.libsonnet")
        );
        assert_eq!(normalize("a", "../../x"), None);
        assert_eq!(normalize("", "/etc/passwd"), None);
    }
}
