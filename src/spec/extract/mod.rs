//! From one file's spanned TOML to typed specs, collecting every error with its exact
//! position rather than stopping at the first (which serde deserialization would do).
//!
//! Here: the file's top level and what every spec of a workload kind shares (its name, its
//! namespace). `fields` reads one table's fields; each kind's own fields have a file.

mod elasticweb;
mod fields;
mod helm;
mod localservice;
mod manifest;
mod messages;
mod render_settings;
mod settings;
mod substitute;
mod syntax;
mod workspace;

pub(super) use helm::releases as helm_releases;
pub(super) use settings::settings;
pub(super) use substitute::raw_offset;

use std::fmt;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::model::defaults;
use super::vars::Vars;
use super::{Kind, Location, ObjectPolicy, SpecBody, SpecError, names, policy};
use fields::{Fields, namespace_field};
use messages::{q, short, suggest, type_name};

type Value<'i> = Spanned<DeValue<'i>>;

/// Error collection and offset → line:column for one file.
pub(super) struct FileCtx<'a> {
    file: &'a str,
    text: &'a str,
    line_starts: Vec<usize>,
    pub errors: Vec<SpecError>,
    /// Errors past [`super::MAX_ERRORS_PER_FILE`]: counted, not kept.
    pub dropped_errors: usize,
}

impl<'a> FileCtx<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        FileCtx {
            file,
            text,
            line_starts,
            errors: Vec::new(),
            dropped_errors: 0,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub(crate) fn loc(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1);
        let start = self.line_starts[line - 1];
        let column = self
            .text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        Location {
            file: self.file.to_string(),
            line,
            column,
        }
    }

    /// Every error found so far, kept or not.
    pub fn count(&self) -> usize {
        self.errors.len() + self.dropped_errors
    }

    /// Whether the next error would only be counted.
    pub(crate) fn is_full(&self) -> bool {
        self.errors.len() >= super::MAX_ERRORS_PER_FILE
    }

    pub fn err(&mut self, span: &Range<usize>, message: impl Into<String>) {
        if self.is_full() {
            self.dropped_errors += 1;
            return;
        }
        let at = self.loc(span.start);
        self.errors.push(SpecError {
            at,
            message: message.into(),
        });
    }

    /// The text at `span` as written (an integer's literal: a value past 128 bits has no
    /// other form), cut like [`short`].
    fn written(&self, span: Range<usize>) -> String {
        short(self.text.get(span).unwrap_or_default())
    }

    /// Reports that `what` must be `expected` and is not.
    fn wrong_type(&mut self, v: &Value, what: impl fmt::Display, expected: impl fmt::Display) {
        self.err(
            &v.span(),
            format!(
                "{what} must be {expected}, found {}",
                type_name(v.get_ref())
            ),
        );
    }

    /// `v`'s table or array, as `as_type` (`DeValue::as_table`, `DeValue::as_array`) picks
    /// it out; a value of any other type is reported as [`FileCtx::wrong_type`].
    fn value_as<'t, 'i, T: ?Sized>(
        &mut self,
        v: &'t Value<'i>,
        as_type: impl FnOnce(&'t DeValue<'i>) -> Option<&'t T>,
        what: impl fmt::Display,
        expected: impl fmt::Display,
    ) -> Option<&'t T> {
        let typed = as_type(v.get_ref());
        if typed.is_none() {
            self.wrong_type(v, what, expected);
        }
        typed
    }

    /// Whether `rule` accepts `s`; if not, reports `invalid {what} "s": why` at `span`.
    fn check(
        &mut self,
        span: &Range<usize>,
        what: impl fmt::Display,
        s: &str,
        rule: impl Fn(&str) -> Result<(), String>,
    ) -> bool {
        match rule(s) {
            Ok(()) => true,
            Err(why) => {
                self.err(span, format!("invalid {what} {}: {why}", q(s)));
                false
            }
        }
    }
}

/// A spec as found in one file; a manifest's namespace and identity are settled once
/// the whole tree is known (a CRD elsewhere in it may say the kind is cluster-scoped).
pub(super) struct Found {
    pub kind: Kind,
    pub name: String,
    /// Resolved for the three workload kinds; for a manifest, the file's default.
    pub namespace: Option<String>,
    pub at: Location,
    pub body: SpecBody,
    pub policy: crate::spec::ObjectPolicy,
    /// The ids of the specs it depends on, as written, each with its place.
    pub depends_on: Vec<(String, Location)>,
}

impl Found {
    /// A manifest found at `at`, its policy read from its (checked) annotations;
    /// `depends_at` is where its `driftless.dev/depends-on` annotation is.
    pub(super) fn manifest(
        m: crate::spec::Manifest,
        namespace: Option<String>,
        at: Location,
        depends_at: impl FnOnce() -> Location,
    ) -> Found {
        let (policy, depends) =
            crate::spec::policy::of_annotations(m.metadata.rest.get("annotations"));
        let depends_on = match depends.is_empty() {
            true => Vec::new(),
            false => {
                let place = depends_at();
                depends.into_iter().map(|id| (id, place.clone())).collect()
            }
        };
        Found {
            kind: Kind::Manifest,
            name: String::new(),
            namespace,
            at,
            body: SpecBody::Manifest(m),
            policy,
            depends_on,
        }
    }
}

/// Reads one file. Syntax errors stop that file (anything read past them would only add
/// confusing follow-on errors); every other error is collected and reading goes on.
pub(super) fn file(ctx: &mut FileCtx, text: &str, vars: Option<&Vars>) -> Vec<Found> {
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(first) => {
            syntax::report(ctx, text, &first);
            return Vec::new();
        }
    };
    let mut root = root.into_inner();
    if let Some(vars) = vars {
        substitute::table(ctx, text, &mut root, vars);
    }

    let mut file_ns = None;
    for (k, v) in root.iter() {
        if k.get_ref() != "namespace" {
            continue;
        }
        match v.get_ref() {
            DeValue::String(s) => {
                if ctx.check(&v.span(), "namespace", s, names::dns1123_label) {
                    file_ns = Some(s.to_string());
                }
            }
            _ => ctx.wrong_type(v, "`namespace`", "a string"),
        }
    }

    let mut found = Vec::new();
    for (k, v) in root.iter() {
        let key = k.get_ref().as_ref();
        if key == "namespace" {
            continue;
        }
        // Read by `helm_releases`, for the rendering stage: its objects come back as manifests.
        if key == "helm" {
            continue;
        }
        match Kind::parse(key) {
            Some(Kind::Manifest) => manifest::all(ctx, v, file_ns.as_deref(), &mut found),
            Some(kind) => {
                let Some(specs) = ctx.value_as(
                    v,
                    DeValue::as_table,
                    format_args!("`{key}`"),
                    format_args!("a table of {key} specs ([{key}.NAME])"),
                ) else {
                    continue;
                };
                for (name, body) in specs.iter() {
                    if let Some(f) = spec(ctx, kind, name, body, file_ns.as_deref()) {
                        found.push(f);
                    }
                }
            }
            None => {
                let known = Kind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .chain(["namespace", "helm"]);
                let near = suggest(key, known);
                let key = short(key);
                let msg = match near {
                    Some(near) => format!("unknown kind `{key}` (did you mean `{near}`?)"),
                    None => format!(
                        "unknown kind `{key}`; a file holds `namespace` and tables of workspace, elasticweb, localservice, manifest or helm"
                    ),
                };
                ctx.err(&k.span(), msg);
            }
        }
    }
    found
}

/// The policy keys every workload kind has (docs/src/policies.md), checked.
struct PolicyKeys {
    pub ignore_fields: Vec<String>,
    pub prune: bool,
    pub depends_on: Vec<(String, Location)>,
    pub replace: Option<crate::spec::model::ReplaceKey>,
    pub wave: i32,
}

impl PolicyKeys {
    /// Writes them into `body` (the model keeps them as written), and gives the spec's
    /// policy and dependencies.
    fn set(self, body: &mut SpecBody) -> (ObjectPolicy, Vec<(String, Location)>) {
        let ids = || self.depends_on.iter().map(|(id, _)| id.clone()).collect();
        let (ignore_fields, prune, depends_on, replace, wave) = match body {
            SpecBody::Workspace(w) => (
                &mut w.ignore_fields,
                &mut w.prune,
                &mut w.depends_on,
                &mut w.replace,
                &mut w.wave,
            ),
            SpecBody::ElasticWeb(e) => (
                &mut e.ignore_fields,
                &mut e.prune,
                &mut e.depends_on,
                &mut e.replace,
                &mut e.wave,
            ),
            SpecBody::LocalService(l) => (
                &mut l.ignore_fields,
                &mut l.prune,
                &mut l.depends_on,
                &mut l.replace,
                &mut l.wave,
            ),
            SpecBody::Manifest(_) => return (ObjectPolicy::default(), Vec::new()),
        };
        ignore_fields.clone_from(&self.ignore_fields);
        *prune = self.prune;
        *depends_on = ids();
        *replace = self.replace;
        *wave = self.wave;
        use crate::spec::model::ReplaceKey;
        let policy = ObjectPolicy {
            ignore_fields: self.ignore_fields,
            keep: !self.prune,
            replace: self.replace.map(|r| match r {
                ReplaceKey::OnImmutable => crate::spec::policy::Replace::OnImmutable,
                ReplaceKey::Never => crate::spec::policy::Replace::Never,
            }),
            wave: self.wave,
            ..ObjectPolicy::default()
        };
        (policy, self.depends_on)
    }
}

/// `ignore-fields`, `prune` and `depends-on` of a workload spec.
fn policy_keys(ctx: &mut FileCtx, f: &mut Fields) -> PolicyKeys {
    let ignore_fields = f
        .strings(ctx, "ignore-fields", policy::check_pointer)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let depends_on = f.strings(ctx, "depends-on", policy::check_spec_id);
    let prune = f.boolean(ctx, "prune").unwrap_or(true);
    use crate::spec::model::ReplaceKey;
    let replace = f.choice(
        ctx,
        "replace",
        &[
            ("on-immutable", ReplaceKey::OnImmutable),
            ("never", ReplaceKey::Never),
        ],
    );
    let wave = f
        .int(
            ctx,
            "wave",
            false,
            (i128::from(i32::MIN), i128::from(i32::MAX)),
            "is out of range",
        )
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0);
    PolicyKeys {
        ignore_fields,
        prune,
        depends_on,
        replace,
        wave,
    }
}

/// One spec of a workload kind: `[kind.NAME]`.
fn spec(
    ctx: &mut FileCtx,
    kind: Kind,
    name: &Spanned<std::borrow::Cow<str>>,
    body: &Value,
    file_ns: Option<&str>,
) -> Option<Found> {
    let what = format!("{kind} `{}`", short(name.get_ref()));
    let table = ctx.value_as(body, DeValue::as_table, &what, "a table")?;
    let errors_before = ctx.count();
    // Every workload kind names a Service after the spec, hence DNS-1035 (starts with a letter).
    if ctx.check(
        &name.span(),
        format_args!("{kind} name"),
        name.get_ref(),
        names::dns1035_label,
    ) && kind == Kind::LocalService
        && name.get_ref().len() > localservice::MAX_NAME
    {
        ctx.err(
            &name.span(),
            format!(
                "invalid localservice name {}: must be at most {} characters (is {}), leaving room for the node in each Service's name",
                q(name.get_ref()),
                localservice::MAX_NAME,
                name.get_ref().len()
            ),
        );
    }
    let mut f = Fields::new(table, what, name.span());
    let (namespace, body) = match kind {
        Kind::Workspace => {
            let ns = namespace_field(ctx, &mut f, file_ns, defaults::WORKSPACE_NAMESPACE);
            (ns, workspace::read(ctx, &mut f).map(SpecBody::Workspace))
        }
        Kind::ElasticWeb => {
            let ns = namespace_field(ctx, &mut f, file_ns, defaults::NAMESPACE);
            (ns, elasticweb::read(ctx, &mut f).map(SpecBody::ElasticWeb))
        }
        Kind::LocalService => {
            let ns = namespace_field(ctx, &mut f, file_ns, defaults::NAMESPACE);
            (
                ns,
                localservice::read(ctx, &mut f).map(SpecBody::LocalService),
            )
        }
        Kind::Manifest => return None,
    };
    let keys = policy_keys(ctx, &mut f);
    f.finish(ctx);
    let mut body = body?;
    let (policy, depends_on) = keys.set(&mut body);
    (ctx.count() == errors_before).then(|| Found {
        kind,
        name: name.get_ref().to_string(),
        namespace: Some(namespace),
        at: ctx.loc(name.span().start),
        body,
        policy,
        depends_on,
    })
}
