//! One shape for every rendering tool. Kustomize, Helm and Jsonnet each say what they
//! need once per revision (a program found and its version, an index of the files) and
//! how one item renders (a kustomization directory, a release, a Jsonnet file); the
//! stage's one loop does the rest alike for all of them: an error per item when the tool
//! cannot run at all, the items rendered side by side, each answered from the render
//! cache by the key of its inputs or run and kept, and each output handed on at its file
//! with its provenance. A new tool is a file with one `impl Tool` and a line in
//! `Hydrator::hydrate` (docs/src/contributing/layout.md, "Adding a render tool").

use crate::spec::settings::Settings;
use crate::spec::{AppId, Location, RenderedBy, SourceFile};

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) use super::cache::KeyBuilder;
pub use super::cache::{Entry, Key};
pub(crate) use super::error::{FindError, ToolError};
use super::marks::AppMarks;
use super::stage::{Hydrated, Input, Shared, error_at, to_yaml};

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
    pub output: Output,
    pub by: RenderedBy,
    /// What `validate`, `diff --base` and the daemon say of this render (a chart's
    /// lookups that read nothing).
    pub notices: Vec<String>,
    /// It read the live cluster (a chart's `lookup`): what it rendered may change with
    /// no change of the revision, so the daemon renders it again (`Hydrated::read_cluster`).
    pub read_cluster: bool,
}

/// What a tool printed, or the objects it made of it (a tool that reads its output
/// itself hands on what it read, so that its app's marks go on with no second reading).
pub enum Output {
    Yaml(Vec<u8>),
    Objects(Vec<serde_json::Value>),
}

impl Output {
    /// As it is handed on: YAML.
    pub fn into_yaml(self) -> Vec<u8> {
        match self {
            Output::Yaml(yaml) => yaml,
            Output::Objects(objects) => to_yaml(&objects),
        }
    }
}

/// A rendering tool as the stage drives it. An item renders in three steps, so that the
/// render cache is the stage's, alike for every tool: `prepare` reads what the run needs
/// and names its inputs (the [`Key`]); the stage answers from the cache by that key or
/// calls `run` and keeps what it gave; `finish` makes the output (or the failure, fresh or
/// kept) what is handed on.
pub trait Tool: Sync {
    /// What renders once: a kustomization directory, a release, a Jsonnet file.
    type Item: Sync;
    /// What every item of a revision shares: the program found, its version.
    type Ready: Sync;
    /// What an item's run needs, read before it: the files it reads, a copy to run in.
    type Prepared;

    /// What the tool renders, as an error names it when the tree is not on disk ("a
    /// kustomization"); `None` when it reads the revision's files in memory.
    fn reads_disk(&self) -> Option<&'static str>;

    /// Where an item's errors are said.
    fn at(&self, item: &Self::Item) -> Location;

    /// The app an item is (an app format's render, a `[helm.NAME]` release); none for
    /// what is the tree's own. Its output is then that app's, and of every app that made
    /// the file the item is written in ([`crate::spec::RenderedApps`]).
    fn app(&self, item: &Self::Item) -> Option<AppId>;

    /// The file an item's output is handed on as (and its provenance is keyed by).
    fn output_file(&self, item: &Self::Item) -> String;

    /// What the apps an item renders for put on its objects, the innermost last (a
    /// chart's release, then the Application whose source it is): the stage puts them on
    /// once the item is rendered, alike for every format.
    fn marks(&self, _item: &Self::Item) -> Vec<AppMarks> {
        Vec::new()
    }

    /// Once per revision, before any item: the tool found (or why it cannot run).
    fn ready(&self, r: &Shared, cx: &Context) -> Result<Self::Ready, FindError>;

    /// What `item`'s run needs, and the key its output is kept by. Runs beside the
    /// revision's other items, so it takes `&self` only.
    fn prepare(
        &self,
        r: &Shared,
        ready: &Self::Ready,
        item: &Self::Item,
        cx: &Context,
    ) -> Result<Keyed<Self::Prepared>, ToolError>;

    /// The tool's run, when the cache holds nothing for the prepared key: its output.
    fn run(
        &self,
        r: &Shared,
        ready: &Self::Ready,
        item: &Self::Item,
        prepared: &Self::Prepared,
        cx: &Context,
    ) -> Ran;

    /// What is handed on, made of the run's output or failure (the cache's or a fresh
    /// run's, alike).
    fn finish(
        &self,
        r: &Shared,
        ready: &Self::Ready,
        item: &Self::Item,
        prepared: Self::Prepared,
        output: Entry,
        cx: &Context,
    ) -> Result<Rendered, ToolError>;
}

/// What an item's run needs, and the key of its inputs: `None` when the run reads
/// what no key names (a remote base, fetched as it runs), so it is never kept.
pub struct Keyed<P> {
    pub inputs: P,
    pub key: Option<Key>,
}

/// A run's output, and how the cache keeps it.
pub struct Ran {
    pub output: Entry,
    pub keep: Keep,
}

/// How the cache keeps a run's output (a failure too: the same inputs fail the same way
/// until they change).
pub enum Keep {
    /// By the prepared key.
    Prepared,
    /// Not at all: a failure that may pass with the same inputs (a chart dependency's
    /// repository out of reach).
    Not,
    /// By a key the run learned: what a Jsonnet evaluation imported is known once it ran.
    Learned(Key),
}

impl Ran {
    /// An output kept by the prepared key.
    pub fn kept(output: Entry) -> Ran {
        Ran {
            output,
            keep: Keep::Prepared,
        }
    }
}

/// One item: prepared, answered from the cache or run (and kept), finished.
fn render_one<T: Tool>(
    tool: &T,
    r: &Shared,
    ready: &T::Ready,
    item: &T::Item,
    cx: &Context,
) -> Result<Rendered, ToolError> {
    let Keyed { inputs, key } = tool.prepare(r, ready, item, cx)?;
    let output = match key.as_ref().and_then(|k| r.cache.get(k)) {
        Some(hit) => hit,
        None => {
            let ran = tool.run(r, ready, item, &inputs, cx);
            match (ran.keep, key) {
                (Keep::Prepared, Some(key)) | (Keep::Learned(key), _) => {
                    r.cache.put(key, ran.output.clone())
                }
                _ => {}
            }
            ran.output
        }
    };
    tool.finish(r, ready, item, inputs, output, cx)
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
    // Whatever comes of an item, its output file is its app's and of every app that made
    // the file it is written in: its errors hold that app.
    for item in items {
        let mut apps = out.rendered_apps.of(&tool.at(item).file).to_vec();
        apps.extend(tool.app(item));
        out.rendered_apps.insert(tool.output_file(item), apps);
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
    let results = side_by_side(items, shared.opts.concurrency, |item| {
        render_one(tool, shared, ready, item, cx)
            .and_then(|rendered| marked(rendered, &tool.marks(item)))
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
                    contents: rendered.output.into_yaml(),
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

/// `rendered` with `marks` put on its objects: the one place every format's apps mark
/// what they render. Not YAML, it is the item's error, as its first app says it.
fn marked(mut rendered: Rendered, marks: &[AppMarks]) -> Result<Rendered, ToolError> {
    let Some(first) = marks.first() else {
        return Ok(rendered);
    };
    let read_cluster = rendered.read_cluster;
    let mut objects = match rendered.output {
        Output::Objects(objects) => objects,
        Output::Yaml(yaml) => {
            let text = String::from_utf8_lossy(&yaml);
            let docs = crate::spec::yaml::read_all(&text).map_err(|e| {
                let said = crate::spec::yaml::said(&e);
                let said = said.lines().next().unwrap_or_default();
                ToolError {
                    read_cluster,
                    ..ToolError::from(format!("{}: what it renders is not YAML: {said}", first.of))
                }
            })?;
            docs.into_iter()
                .filter(serde_json::Value::is_object)
                .collect()
        }
    };
    AppMarks::put_all(marks, &mut objects);
    rendered.output = Output::Objects(objects);
    Ok(rendered)
}

/// `render` of every item, in the items' order, by a few threads that take the items in
/// turn: twice as many as tool runs may be at once (`concurrency`), so that while some
/// run a tool the others read and hash the next items' files. A thread per item held
/// every item's stack and preparation at once (1,000 releases: 1,000 threads, most of
/// them waiting for a slot; the daemon's peak 245 MiB). An item whose render panics is
/// that item's error alone.
fn side_by_side<I: Sync, R: Send>(
    items: &[I],
    concurrency: usize,
    render: impl Fn(&I) -> Result<R, ToolError> + Sync,
) -> Vec<Result<R, ToolError>> {
    let workers = items.len().min(concurrency.max(1) * 2);
    let next = AtomicUsize::new(0);
    let stopped = || {
        Err(ToolError::from(
            "the render stopped unexpectedly".to_string(),
        ))
    };
    let done: Vec<(usize, Result<R, ToolError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        let result = std::panic::catch_unwind(AssertUnwindSafe(|| render(item)))
                            .unwrap_or_else(|_| stopped());
                        mine.push((i, result));
                    }
                })
            })
            .collect();
        // A worker's own panic is outside `render`, where nothing panics: its items
        // stay unfilled below.
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut results: Vec<Option<Result<R, ToolError>>> = items.iter().map(|_| None).collect();
    for (i, result) in done {
        results[i] = Some(result);
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(stopped))
        .collect()
}

/// An item that did not render: the error holds the app whose render it is (said where
/// that app is written, which is its parent's file or the tree's), else the tree.
fn fails(out: &mut Hydrated, output: String, error: crate::spec::SpecError) {
    match out.rendered_apps.app_of(&output) {
        Some(app) => out
            .held
            .push(super::stage::AppError::new(app.to_string(), error)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn items_render_in_turn_in_their_order_each_with_its_own_error() {
        let items: Vec<usize> = (0..200).collect();
        let busy = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let out = side_by_side(&items, 3, |&i| {
            let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(1));
            busy.fetch_sub(1, Ordering::SeqCst);
            match i % 7 {
                0 => Err(ToolError::from(format!("item {i} failed"))),
                _ => Ok(i * 10),
            }
        });
        assert_eq!(out.len(), 200);
        for (i, r) in out.iter().enumerate() {
            match r {
                Ok(v) => assert_eq!(*v, i * 10),
                Err(e) => {
                    assert_eq!(i % 7, 0);
                    assert_eq!(e.message, format!("item {i} failed"));
                }
            }
        }
        // Never more threads at once than twice the tool runs allowed.
        let most = most.load(Ordering::SeqCst);
        assert!((1..=6).contains(&most), "{most} at once");
    }

    /// A tool whose item says how it runs: `NAME:ok`, `NAME:fails` (kept), `NAME:flaky`
    /// (a failure not kept), `NAME:unkeyed` (no key: never kept), `NAME:learns` (its key
    /// known once it ran).
    #[derive(Default)]
    struct Counted {
        runs: AtomicUsize,
        learned: Mutex<Vec<String>>,
    }

    fn key_of(name: &str) -> Key {
        let mut k = KeyBuilder::new("t");
        k.part(name.as_bytes());
        k.finish()
    }

    impl Tool for Counted {
        type Item = &'static str;
        type Ready = ();
        type Prepared = ();
        fn reads_disk(&self) -> Option<&'static str> {
            None
        }
        fn at(&self, _: &&'static str) -> Location {
            Location::default()
        }
        fn app(&self, _: &&'static str) -> Option<AppId> {
            None
        }
        fn output_file(&self, item: &&'static str) -> String {
            item.to_string()
        }
        fn ready(&self, _: &Shared, _: &Context) -> Result<(), FindError> {
            Ok(())
        }
        fn prepare(
            &self,
            _: &Shared,
            _: &(),
            item: &&'static str,
            _: &Context,
        ) -> Result<Keyed<()>, ToolError> {
            let key = match item.split_once(':') {
                Some((_, "unkeyed")) => None,
                Some((name, "learns")) => {
                    let learned = self.learned.lock().unwrap();
                    learned.iter().any(|l| l == name).then(|| key_of(name))
                }
                _ => Some(key_of(item)),
            };
            Ok(Keyed { inputs: (), key })
        }
        fn run(&self, _: &Shared, _: &(), item: &&'static str, _: &(), _: &Context) -> Ran {
            self.runs.fetch_add(1, Ordering::SeqCst);
            let ok = || Ok(Arc::new(item.as_bytes().to_vec()));
            let failed = || Err(ToolError::from(format!("{item} failed")));
            match item.split_once(':') {
                Some((_, "fails")) => Ran::kept(failed()),
                Some((_, "flaky")) => Ran {
                    output: failed(),
                    keep: Keep::Not,
                },
                Some((name, "learns")) => {
                    self.learned.lock().unwrap().push(name.to_string());
                    Ran {
                        output: ok(),
                        keep: Keep::Learned(key_of(name)),
                    }
                }
                _ => Ran::kept(ok()),
            }
        }
        fn finish(
            &self,
            _: &Shared,
            _: &(),
            _: &&'static str,
            _: (),
            output: Entry,
            _: &Context,
        ) -> Result<Rendered, ToolError> {
            Ok(Rendered {
                output: Output::Yaml(output?.to_vec()),
                by: RenderedBy {
                    tool: "counted".into(),
                    version: "1".into(),
                    command: "counted".into(),
                    release: None,
                },
                notices: Vec::new(),
                read_cluster: false,
            })
        }
    }

    #[test]
    fn the_stage_keeps_a_run_by_its_key_as_the_tool_says() {
        let shared = Shared::new(super::super::stage::Options::default());
        let input = Input::default();
        let settings = Settings::default();
        let cx = Context {
            input: &input,
            settings: &settings,
        };
        let tool = Counted::default();
        // Each item twice in turn: how many runs the second made.
        let second_runs = |item: &'static str| {
            let first = render_one(&tool, &shared, &(), &item, &cx).map(|r| r.output.into_yaml());
            let before = tool.runs.load(Ordering::SeqCst);
            let second = render_one(&tool, &shared, &(), &item, &cx).map(|r| r.output.into_yaml());
            assert_eq!(first, second, "{item}: the same answer both times");
            tool.runs.load(Ordering::SeqCst) - before
        };
        assert_eq!(second_runs("a:ok"), 0, "an output is kept");
        assert_eq!(second_runs("b:fails"), 0, "a failure is kept too");
        assert_eq!(
            second_runs("c:flaky"),
            1,
            "a failure the tool says may pass is not"
        );
        assert_eq!(
            second_runs("d:unkeyed"),
            1,
            "a run without a key is never kept"
        );
        assert_eq!(
            second_runs("e:learns"),
            0,
            "a key learned by the run keeps it"
        );
        assert_eq!(tool.runs.load(Ordering::SeqCst), 7);
    }

    #[test]
    fn a_render_that_panics_fails_that_item_alone() {
        let items = ["a", "boom", "c"];
        let out = side_by_side(&items, 1, |&s| match s {
            "boom" => panic!("a bug in one render"),
            s => Ok(s.to_uppercase()),
        });
        assert_eq!(out[0].as_ref().ok().map(String::as_str), Some("A"));
        assert_eq!(
            out[1].as_ref().err().map(|e| e.message.as_str()),
            Some("the render stopped unexpectedly")
        );
        assert_eq!(out[2].as_ref().ok().map(String::as_str), Some("C"));
    }

    #[test]
    fn an_items_apps_mark_its_objects_and_what_is_not_yaml_is_its_error() {
        use crate::hydrate::marks::{Put, Words};
        let rendered = |yaml: &str| Rendered {
            output: Output::Yaml(yaml.as_bytes().to_vec()),
            by: RenderedBy {
                tool: "plugin".into(),
                version: "1".into(),
                command: "plugin".into(),
                release: None,
            },
            notices: Vec::new(),
            read_cluster: false,
        };
        let app = AppMarks {
            namespace: Some("shop".into()),
            ..AppMarks::new("Application web".into(), Put::WhereMissing, Words::Argo)
        };
        let marked_yaml = |yaml: &str, marks: &[AppMarks]| {
            marked(rendered(yaml), marks).map(|r| String::from_utf8(r.output.into_yaml()).unwrap())
        };
        let map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n";
        assert_eq!(
            marked_yaml(map, &[]).unwrap(),
            map,
            "no app: as the tool gave it"
        );
        let out = marked_yaml(map, std::slice::from_ref(&app)).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out).unwrap();
        assert_eq!(docs[0]["metadata"]["namespace"], "shop", "{out}");
        let e = marked_yaml("a: [1\n", &[app]).err().unwrap();
        assert!(
            e.message
                .starts_with("Application web: what it renders is not YAML: "),
            "{}",
            e.message
        );
    }
}
