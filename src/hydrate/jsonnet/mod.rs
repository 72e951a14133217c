//! Jsonnet, evaluated in process (rsjsonnet-lang) with the tree's `[jsonnet]` settings,
//! its output walked as Tanka walks it: an object with `apiVersion` and `kind` is a
//! Kubernetes object; other objects and arrays are descended into. Imports resolve from
//! the importing file's directory, then each library path, within the spec tree. Bounded
//! by a stack depth, a time limit and an output size; errors at Jsonnet's own
//! `file:line:col`.
//!
//! This file is the tool as the stage drives it (`tool::Tool`) and its cache; `eval.rs`
//! is the evaluator.

pub(crate) mod eval;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

pub use eval::{Evaluated, Files, JsonnetError, evaluate, extract};

use super::stage::{Shared, to_yaml};
use super::tool::{Context, FindError, Rendered, Tool, ToolError};
use crate::spec::settings::JsonnetSettings;
use crate::spec::{Location, RenderedBy};

/// The Jsonnet evaluator, as provenance names it.
pub const JSONNET_VERSION: &str = "rsjsonnet 0.5.1";

/// Jsonnet as the stage drives it: evaluated in process, each file's result kept while
/// the settings and every file it read are as they were (what it reads is known only
/// once it ran, so it is not keyed like a tool's run).
#[derive(Default)]
pub struct Evaluations {
    cache: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    settings: JsonnetSettings,
    read: Vec<(String, u64)>,
    result: Result<Arc<Vec<u8>>, JsonnetError>,
}

/// A digest of a file's contents, as an evaluation records what it read.
fn digest_of(files: &Files, path: &str) -> Option<u64> {
    files
        .get(path)
        .map(|t| crate::spec::names::fnv1a64(t.iter().copied()))
}

impl Tool for Evaluations {
    /// A `.jsonnet` file's path.
    type Item = String;
    /// The revision's files, as imports reach them.
    type Ready = Files;

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
        // The cache holds what this revision has, not every file ever evaluated.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|path, _| files.contains_key(path));
        Ok(files)
    }

    fn render(
        &self,
        r: &Shared,
        files: &Files,
        path: &String,
        cx: &Context,
    ) -> Result<Rendered, ToolError> {
        let settings = &cx.settings.jsonnet;
        let cached = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache
                .get(path)
                .filter(|e| {
                    e.settings == *settings
                        && e.read.iter().all(|(p, h)| digest_of(files, p) == Some(*h))
                })
                .map(|e| e.result.clone())
        };
        let result = match cached {
            Some(result) => result,
            None => {
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
                let (read, result) = match evaluated {
                    Ok(ev) => (ev.read, Ok(Arc::new(to_yaml(&ev.objects)))),
                    Err(e) => (
                        vec![(path.clone(), digest_of(files, path).unwrap_or_default())],
                        Err(e),
                    ),
                };
                tracing::info!(file = %path, ok = result.is_ok(), "evaluated Jsonnet");
                let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                cache.insert(
                    path.clone(),
                    Entry {
                        settings: settings.clone(),
                        read,
                        result: result.clone(),
                    },
                );
                result
            }
        };
        match result {
            Ok(yaml) if yaml.is_empty() => Err(ToolError::from(
                "the Jsonnet file yields no Kubernetes objects (no object with apiVersion and kind); a library is named *.libsonnet".to_string(),
            )),
            Ok(yaml) => Ok(Rendered {
                yaml: yaml.to_vec(),
                by: RenderedBy {
                    tool: "jsonnet".into(),
                    version: JSONNET_VERSION.into(),
                    command: command(path, settings),
                    release: None,
                },
                notices: Vec::new(),
                read_cluster: false,
            }),
            Err(e) => Err(ToolError {
                at: Some(Location {
                    file: e.file,
                    line: e.line,
                    column: e.column,
                }),
                message: e.message,
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
