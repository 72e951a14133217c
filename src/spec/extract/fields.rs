//! Reading the fields of one table (a spec, or an entry of its `ports`): typed, checked,
//! every problem reported at its place, and every key nobody asked for reported as unknown.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::messages::{q, short, suggest};
use super::{FileCtx, Value};
use crate::spec::policy::MarkProblem;
use crate::spec::{names, quantity};

/// An image reference's longest form is about 530 bytes (a 255-byte name, a 128-byte tag
/// and a sha512 digest); anything longer is not an image.
const MAX_IMAGE: usize = 1024;

/// An integer's value; `Some(Err(()))` for one too large even for 128 bits.
pub(super) fn integer(v: &DeValue) -> Option<Result<i128, ()>> {
    match v {
        DeValue::Integer(i) => Some(i128::from_str_radix(i.as_str(), i.radix()).map_err(|_| ())),
        _ => None,
    }
}

/// Reports that the value of `key` is not `expected`.
pub(super) fn type_error(ctx: &mut FileCtx, key: &str, expected: &str, v: &Value) {
    ctx.wrong_type(v, format_args!("`{key}`"), expected);
}

/// The fields of one table. Every key asked for is "known"; `finish` reports the rest as
/// unknown, with a suggestion for near misses.
pub(super) struct Fields<'t, 'i> {
    table: &'t DeTable<'i>,
    /// The table in messages: "elasticweb `shop`", "localservice `x` ports[1]"...
    pub what: String,
    /// Where an error about the whole table (a missing field) points.
    header: Range<usize>,
    known: Vec<&'static str>,
}

impl<'t, 'i> Fields<'t, 'i> {
    pub fn new(table: &'t DeTable<'i>, what: String, header: Range<usize>) -> Self {
        Fields {
            table,
            what,
            header,
            known: Vec::new(),
        }
    }

    pub fn get(&mut self, key: &'static str) -> Option<&'t Value<'i>> {
        self.known.push(key);
        self.table
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    }

    /// Whether the table has `key`, whatever its value.
    pub fn has(&self, key: &str) -> bool {
        self.table.iter().any(|(k, _)| k.get_ref() == key)
    }

    pub fn missing(&self, ctx: &mut FileCtx, key: &str) {
        ctx.err(
            &self.header,
            format!("{}: missing required field `{key}`", self.what),
        );
    }

    pub fn string(&mut self, ctx: &mut FileCtx, key: &'static str) -> Option<Spanned<String>> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(Spanned::new(v.span(), s.to_string())),
            _ => {
                type_error(ctx, key, "a string", v);
                None
            }
        }
    }

    pub(crate) fn req_string(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
    ) -> Option<Spanned<String>> {
        if !self.has(key) {
            self.known.push(key);
            self.missing(ctx, key);
            return None;
        }
        self.string(ctx, key)
    }

    /// An integer within `min..=max`; `range_msg` explains a value outside it.
    pub fn int(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        required: bool,
        (min, max): (i128, i128),
        range_msg: &str,
    ) -> Option<i128> {
        let Some(v) = self.get(key) else {
            if required {
                self.missing(ctx, key);
            }
            return None;
        };
        let n = match integer(v.get_ref()) {
            None => {
                type_error(ctx, key, "an integer", v);
                return None;
            }
            Some(Ok(n)) if n < min => {
                ctx.err(&v.span(), format!("`{key}` {range_msg} (is {n})"));
                return None;
            }
            Some(Ok(n)) if n <= max => n,
            // Above the range, or beyond 128 bits: the literal as written.
            Some(_) => {
                let written = ctx.written(v.span());
                let msg = if max >= i128::from(i64::MAX) {
                    format!("`{key}` is too large (is {written}; at most {max})")
                } else {
                    format!("`{key}` {range_msg} (is {written})")
                };
                ctx.err(&v.span(), msg);
                return None;
            }
        };
        Some(n)
    }

    /// The required `image`: an image reference is one word of at most [`MAX_IMAGE`] bytes.
    pub fn image(&mut self, ctx: &mut FileCtx) -> Option<Spanned<String>> {
        let image = self.req_string(ctx, "image")?;
        let s = image.get_ref();
        let why = if s.is_empty() {
            "must not be empty".to_string()
        } else if s.len() > MAX_IMAGE {
            format!(
                "is {} bytes long; an image reference is at most {MAX_IMAGE}",
                s.len()
            )
        } else if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            "must not contain spaces or control characters".to_string()
        } else {
            return Some(image);
        };
        ctx.err(&image.span(), format!("invalid `image` {}: {why}", q(s)));
        None
    }

    pub fn port(&mut self, ctx: &mut FileCtx, key: &'static str, required: bool) -> Option<u16> {
        self.int(
            ctx,
            key,
            required,
            (1, 65535),
            "must be a port between 1 and 65535",
        )
        .and_then(|n| u16::try_from(n).ok())
    }

    pub fn quantity(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        unit: quantity::Unit,
    ) -> Option<String> {
        let s = self.string(ctx, key)?;
        match quantity::check(s.get_ref(), unit) {
            Ok(()) => Some(s.into_inner()),
            Err(why) => {
                ctx.err(
                    &s.span(),
                    format!("invalid quantity for `{key}`: {} {why}", q(s.get_ref())),
                );
                None
            }
        }
    }

    pub fn boolean(&mut self, ctx: &mut FileCtx, key: &'static str) -> Option<bool> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                type_error(ctx, key, "a boolean", v);
                None
            }
        }
    }

    pub(crate) fn choice<T: Copy>(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        options: &[(&str, T)],
    ) -> Option<T> {
        let s = self.string(ctx, key)?;
        if let Some((_, v)) = options.iter().find(|(name, _)| *name == s.get_ref()) {
            return Some(*v);
        }
        let list: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
        let mut msg = format!(
            "invalid `{key}` {}: expected one of {}",
            q(s.get_ref()),
            list.join(", ")
        );
        if let Some(near) = suggest(s.get_ref(), options.iter().map(|(n, _)| *n)) {
            msg.push_str(&format!(" (did you mean {near:?}?)"));
        }
        ctx.err(&s.span(), msg);
        None
    }

    /// The strings of an array under `key`, each `rule` accepts, with its place.
    pub fn strings(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        rule: impl Fn(&str) -> Result<(), String>,
    ) -> Vec<(String, crate::spec::Location)> {
        let mut out = Vec::new();
        let Some(v) = self.get(key) else {
            return out;
        };
        let Some(items) = ctx.value_as(
            v,
            DeValue::as_array,
            format_args!("`{key}`"),
            "an array of strings",
        ) else {
            return out;
        };
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => match rule(s) {
                    Ok(()) => out.push((s.to_string(), ctx.loc(item.span().start))),
                    Err(why) => ctx.err(&item.span(), format!("in `{key}`: {why}")),
                },
                _ => ctx.wrong_type(item, format_args!("each of `{key}`"), "a string"),
            }
        }
        out
    }

    /// A table of labels (or annotations) under `key`.
    pub fn labels(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        kind: MetaMap,
    ) -> Option<Spanned<BTreeMap<String, String>>> {
        let v = self.get(key)?;
        meta_map(ctx, key, v, kind).map(|m| Spanned::new(v.span(), m))
    }

    pub fn finish(self, ctx: &mut FileCtx) {
        for (k, _) in self.table.iter() {
            let key = k.get_ref().as_ref();
            if self.known.contains(&key) {
                continue;
            }
            let near = suggest(key, self.known.iter().copied());
            let key = short(key);
            let msg = match near {
                Some(near) => format!(
                    "unknown field `{key}` in {} (did you mean `{near}`?)",
                    self.what
                ),
                None => format!(
                    "unknown field `{key}` in {}; known fields: {}",
                    self.what,
                    self.known.join(", ")
                ),
            };
            ctx.err(&k.span(), msg);
        }
    }
}

/// What a table of strings holds, for its key and value rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MetaMap {
    /// Labels an object is selected by (a node-selector): any valid label.
    Labels,
    /// Labels driftless writes itself, or selects Pods with: its own keys are refused.
    OwnLabels,
    /// Annotations driftless writes: its own keys are refused; values are free text.
    OwnAnnotations,
}

/// A table of string → string under `key`: label keys, and label values unless these are
/// annotations. Every bad entry is reported.
pub(super) fn meta_map(
    ctx: &mut FileCtx,
    key: &str,
    v: &Value,
    kind: MetaMap,
) -> Option<BTreeMap<String, String>> {
    let noun = match kind {
        MetaMap::Labels | MetaMap::OwnLabels => "label",
        MetaMap::OwnAnnotations => "annotation",
    };
    let t = ctx.value_as(
        v,
        DeValue::as_table,
        format_args!("`{key}`"),
        format_args!("a table of {noun}s"),
    )?;
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (k, val) in t.iter() {
        let name = k.get_ref();
        let DeValue::String(s) = val.get_ref() else {
            type_error(ctx, &format!("{key}.{}", short(name)), "a string", val);
            ok = false;
            continue;
        };
        if let Err(why) = names::label_key(name) {
            ctx.err(
                &k.span(),
                format!("invalid {noun} key {} in `{key}`: {why}", q(name)),
            );
            ok = false;
        } else if kind == MetaMap::OwnAnnotations {
            match crate::spec::policy::annotation(name, s) {
                Ok(()) => {}
                Err(MarkProblem::Key(why)) => {
                    ctx.err(&k.span(), why);
                    ok = false;
                }
                Err(MarkProblem::Value(why)) => {
                    ctx.err(&val.span(), why);
                    ok = false;
                }
            }
        } else if kind != MetaMap::Labels && names::is_driftless_key(name) {
            ctx.err(
                &k.span(),
                format!("{noun} `{name}` in `{key}` is set by driftless; remove it"),
            );
            ok = false;
        }
        if kind != MetaMap::OwnAnnotations
            && let Err(why) = names::label_value(s)
        {
            ctx.err(
                &val.span(),
                format!("invalid {noun} value {} in `{key}`: {why}", q(s)),
            );
            ok = false;
        }
        out.insert(name.to_string(), s.to_string());
    }
    ok.then_some(out)
}

/// A workload spec's namespace: its own `namespace` field, else the file's, else its
/// kind's default. An invalid one is reported and still returned (the spec is dropped).
pub(super) fn namespace_field(
    ctx: &mut FileCtx,
    f: &mut Fields,
    default: Option<&str>,
    kind_default: &str,
) -> String {
    match f.string(ctx, "namespace") {
        Some(ns) => {
            ctx.check(&ns.span(), "namespace", ns.get_ref(), names::dns1123_label);
            ns.into_inner()
        }
        None => default.unwrap_or(kind_default).to_string(),
    }
}
