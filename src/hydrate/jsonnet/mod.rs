//! Jsonnet, evaluated in process (rsjsonnet-lang) with the tree's `[jsonnet]` settings,
//! its output walked as Tanka walks it: an object with `apiVersion` and `kind` is a
//! Kubernetes object; other objects and arrays are descended into. Imports resolve from
//! the importing file's directory, then each library path, within the spec tree. Bounded
//! by a stack depth, a time limit and an output size; errors at Jsonnet's own
//! `file:line:col`.
//!
//! This file is the tool as the stage drives it (`tool::Tool`) and the key its output is
//! kept by; `eval.rs` is the evaluator.

pub(crate) mod eval;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

pub(crate) use eval::evaluate;
pub use eval::{Files, extract};

use super::stage::{Shared, to_yaml};
use super::tool::{
    Context, Entry, FindError, Keep, Key, KeyBuilder, Keyed, Output, Ran, Rendered, Tool, ToolError,
};
use crate::spec::settings::JsonnetSettings;
use crate::spec::{AppId, Location, RenderedBy};

/// The Jsonnet evaluator, as provenance names it.
pub(crate) const JSONNET_VERSION: &str = "rsjsonnet 0.5.1";

/// Jsonnet as the stage drives it: evaluated in process. What an evaluation reads is
/// known only once it ran, so its output is kept by the key it learned (the settings and
/// every file it read); the next revision's key is made of the same files, as they are
/// then, and answers from the cache while none of them changed.
#[derive(Default)]
pub(crate) struct Evaluations {
    /// What each file's last evaluation read, and where its imports looked in vain.
    read: Mutex<HashMap<String, Read>>,
}

#[derive(Clone, Default)]
struct Read {
    files: Vec<String>,
    missed: Vec<String>,
}

/// The key of `path`'s evaluation with `settings`, having read `read` of `files`; none
/// when one of them is no longer there, or one an import missed now is (the evaluation
/// runs, and reads anew).
fn key(settings: &JsonnetSettings, path: &str, read: &Read, files: &Files) -> Option<Key> {
    let mut key = KeyBuilder::new("jsonnet");
    key.part(path.as_bytes());
    for (what, list) in [("-J", &settings.libs)] {
        for l in list {
            key.part(what.as_bytes()).part(l.as_bytes());
        }
    }
    for (what, map) in [("ext", &settings.ext_vars), ("tla", &settings.tlas)] {
        for (k, v) in map {
            key.part(what.as_bytes())
                .part(k.as_bytes())
                .part(v.as_bytes());
        }
    }
    for f in &read.files {
        key.part(f.as_bytes()).part(files.get(f)?);
    }
    for m in &read.missed {
        if files.contains_key(m) {
            return None;
        }
        key.part(b"missed").part(m.as_bytes());
    }
    Some(key.finish())
}

impl Tool for Evaluations {
    /// A `.jsonnet` file's path.
    type Item = String;
    /// The revision's files, as imports reach them.
    type Ready = Files;
    type Prepared = ();

    fn reads_disk(&self) -> Option<&'static str> {
        None
    }

    fn at(&self, path: &String) -> Location {
        Location {
            file: path.clone(),
            line: 1,
            column: 1,
        }
    }

    fn app(&self, _: &String) -> Option<AppId> {
        None
    }

    fn output_file(&self, path: &String) -> String {
        path.clone()
    }

    fn ready(&self, _: &Shared, cx: &Context) -> Result<Files, FindError> {
        let files: Files = Arc::new(
            cx.input
                .files
                .iter()
                .map(|f| (f.path.clone(), Arc::new(f.contents.clone())))
                .collect(),
        );
        // What this revision has, not every file ever evaluated.
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        read.retain(|path, _| files.contains_key(path));
        Ok(files)
    }

    fn prepare(
        &self,
        _: &Shared,
        files: &Files,
        path: &String,
        cx: &Context,
    ) -> Result<Keyed<()>, ToolError> {
        // Out of the lock: the key reads every file the evaluation read, and the
        // revision's other files are prepared beside this one.
        let read = {
            let known = self.read.lock().unwrap_or_else(|e| e.into_inner());
            known.get(path).cloned()
        };
        let key = read.and_then(|read| key(&cx.settings.jsonnet, path, &read, files));
        Ok(Keyed { inputs: (), key })
    }

    fn run(&self, r: &Shared, files: &Files, path: &String, _: &(), cx: &Context) -> Ran {
        let settings = &cx.settings.jsonnet;
        r.runs.fetch_add(1, Ordering::Relaxed);
        let evaluated = {
            // In process, yet bounded as the tools' runs are (--render-concurrency).
            let _slot = r.slots.take();
            evaluate(
                path,
                files,
                settings,
                r.opts.limits.timeout,
                r.opts.limits.max_output,
            )
        };
        tracing::info!(file = %path, ok = evaluated.objects.is_ok(), "evaluated Jsonnet");
        let read = Read {
            files: evaluated.read,
            missed: evaluated.missed,
        };
        let output = match evaluated.objects {
            Ok(objects) => Ok(Arc::new(to_yaml(&objects))),
            Err(e) => Err(ToolError {
                at: Some(Location {
                    file: e.file,
                    line: e.line,
                    column: e.column,
                }),
                message: e.message,
                read_cluster: false,
            }),
        };
        let keep = match key(settings, path, &read, files) {
            Some(key) => Keep::Learned(key),
            None => Keep::Not,
        };
        let mut known = self.read.lock().unwrap_or_else(|e| e.into_inner());
        known.insert(path.clone(), read);
        Ran { output, keep }
    }

    fn finish(
        &self,
        _: &Shared,
        _: &Files,
        path: &String,
        _: (),
        output: Entry,
        cx: &Context,
    ) -> Result<Rendered, ToolError> {
        match output? {
            yaml if yaml.is_empty() => Err(ToolError::from(
                "the Jsonnet file yields no Kubernetes objects (no object with apiVersion and kind); a library is named *.libsonnet".to_string(),
            )),
            yaml => Ok(Rendered {
                output: Output::Yaml(Arc::unwrap_or_clone(yaml)),
                by: RenderedBy {
                    tool: "jsonnet".into(),
                    version: JSONNET_VERSION.into(),
                    command: command(path, &cx.settings.jsonnet),
                    release: None,
                },
                notices: Vec::new(),
                read_cluster: false,
            }),
        }
    }
}

/// The command `jsonnet` would be run with for the same output.
fn command(path: &str, s: &JsonnetSettings) -> String {
    let mut parts = vec!["jsonnet".to_string()];
    for l in &s.libs {
        parts.push(format!("-J {l}"));
    }
    for k in s.ext_vars.keys() {
        parts.push(format!("--ext-str {k}"));
    }
    for k in s.tlas.keys() {
        parts.push(format!("--tla-str {k}"));
    }
    parts.push(path.to_string());
    parts.join(" ")
}
