//! One shape for every rendering tool. Kustomize, Helm and Jsonnet each say what they
//! need once per revision (a program found and its version, an index of the files) and
//! how one item renders (a kustomization directory, a release, a Jsonnet file); the
//! stage's one loop does the rest alike for all of them: an error per item when the tool
//! cannot run at all, the items rendered side by side, and each output handed on at its
//! file with its provenance. A new tool is a file with one `impl Tool` and a line in
//! `Hydrator::hydrate` (docs/src/contributing/layout.md, "Adding a render tool").

use crate::spec::settings::Settings;
use crate::spec::{Location, RenderedBy, SourceFile};

use std::sync::Mutex;

pub use super::error::{FindError, ToolError};
use super::stage::{Hydrated, Input, Shared, error_at};

/// What a tool renders from: the revision's files (and its checkout), and the tree's
/// settings.
pub struct Context<'a> {
    pub input: &'a Input,
    pub settings: &'a Settings,
}

impl Context<'_> {
    /// The tree on disk, for a tool that reads files itself (`what` it renders, as an
    /// error names it). [`hydrate_with`] checks it once before any item; this is the
    /// item's own guard.
    pub fn disk(&self, what: &str) -> Result<&crate::source::Checkout, ToolError> {
        self.input
            .checkout
            .as_ref()
            .ok_or_else(|| ToolError::from(format!("{what} needs its tree on disk")))
    }
}

/// One item's output: YAML documents, handed on as a file, and what made them.
pub struct Rendered {
    pub yaml: Vec<u8>,
    pub by: RenderedBy,
    /// What `validate`, `diff --base` and the daemon say of this render (a chart's
    /// lookups that read nothing).
    pub notices: Vec<String>,
    /// It read the live cluster (a chart's `lookup`): what it rendered may change with
    /// no change of the revision, so the daemon renders it again (`Hydrated::read_cluster`).
    pub read_cluster: bool,
}

/// A rendering tool as the stage drives it.
pub trait Tool: Sync {
    /// What renders once: a kustomization directory, a release, a Jsonnet file.
    type Item: Sync;
    /// What every item of a revision shares: the program found, its version.
    type Ready: Sync;

    /// What the tool renders, as an error names it when the tree is not on disk ("a
    /// kustomization"); `None` when it reads the revision's files in memory.
    fn reads_disk(&self) -> Option<&'static str>;

    /// Where an item's errors are said.
    fn at(&self, item: &Self::Item) -> Location;

    /// The file an item's output is handed on as (and its provenance is keyed by).
    fn output_file(&self, item: &Self::Item) -> String;

    /// Once per revision, before any item: the tool found (or why it cannot run).
    fn ready(&self, r: &Shared, cx: &Context) -> Result<Self::Ready, FindError>;

    /// One item. Runs beside the revision's other items, so it takes `&self` only.
    fn render(
        &self,
        r: &Shared,
        ready: &Self::Ready,
        item: &Self::Item,
        cx: &Context,
    ) -> Result<Rendered, ToolError>;
}

/// Renders `items` with `tool` into `out`: the one loop every tool is driven by.
pub(super) fn hydrate_with<T: Tool>(
    shared: &Shared,
    tool: &T,
    items: &[T::Item],
    cx: &Context,
    out: &mut Hydrated,
) {
    if items.is_empty() {
        return;
    }
    let each_fails = |out: &mut Hydrated, why: &str| {
        for item in items {
            let at = tool.at(item);
            fails(
                out,
                tool.output_file(item),
                error_at(&at.file, at.line, at.column, why.to_string()),
            );
        }
    };
    if let Some(what) = tool.reads_disk()
        && cx.input.checkout.is_none()
    {
        each_fails(
            out,
            &format!("{what} needs its tree on disk, and this source has none"),
        );
        return;
    }
    let ready = match tool.ready(shared, cx) {
        Ok(ready) => ready,
        Err(why) => {
            each_fails(out, &why.to_string());
            return;
        }
    };
    let ready = &ready;
    // Side by side: each run waits for a slot of its own (runner::Slots), so this
    // bounds nothing itself.
    let results: Vec<Result<Rendered, ToolError>> = std::thread::scope(|s| {
        let handles: Vec<_> = items
            .iter()
            .map(|item| s.spawn(move || tool.render(shared, ready, item, cx)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ToolError::from(
                        "the render stopped unexpectedly".to_string(),
                    ))
                })
            })
            .collect()
    });
    for (item, result) in items.iter().zip(results) {
        match result {
            Ok(rendered) => {
                out.read_cluster |= rendered.read_cluster;
                let file = tool.output_file(item);
                out.made_by.insert(file.clone(), tool.at(item));
                out.rendered.insert(file.clone(), rendered.by);
                for n in rendered.notices {
                    if !out.notices.contains(&n) {
                        out.notices.push(n);
                    }
                }
                out.files.push(SourceFile {
                    path: file,
                    contents: rendered.yaml,
                });
            }
            Err(e) => {
                out.read_cluster |= e.read_cluster;
                let at = e.at.unwrap_or_else(|| tool.at(item));
                fails(
                    out,
                    tool.output_file(item),
                    error_at(&at.file, at.line, at.column, e.message),
                );
            }
        }
    }
}

/// An item that did not render: the error holds the app whose render it is (said where
/// that app is written, which is its parent's file or the tree's), else the tree.
fn fails(out: &mut Hydrated, output: String, error: crate::spec::SpecError) {
    match crate::spec::app_of(&output) {
        Some(app) => out.held.push(super::stage::AppError::new(app, error)),
        None => out.errors.push(error),
    }
}

/// A tool, found once; not finding it is asked again next time (it may be installed
/// meanwhile).
pub(super) fn found_once<T: Clone>(
    slot: &Mutex<Option<T>>,
    find: impl FnOnce() -> Result<T, FindError>,
) -> Result<T, FindError> {
    let mut found = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = found.as_ref() {
        return Ok(t.clone());
    }
    let t = find()?;
    *found = Some(t.clone());
    Ok(t)
}
