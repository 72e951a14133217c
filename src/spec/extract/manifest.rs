//! `[[manifest]]` entries: any Kubernetes object, its metadata checked, the rest carried as
//! JSON.

use std::collections::BTreeMap;

use toml::de::{DeTable, DeValue};

use super::fields::{Fields, MetaMap, integer, meta_map};
use super::messages::q;
use super::{FileCtx, Found, Value};
use crate::spec::model::{Manifest, ManifestMetadata};
use crate::spec::names;

/// Every entry of the file's `manifest` array.
pub(super) fn all(ctx: &mut FileCtx, v: &Value, file_ns: Option<&str>, found: &mut Vec<Found>) {
    let Some(items) = ctx.value_as(
        v,
        DeValue::as_array,
        "`manifest`",
        "an array of tables ([[manifest]])",
    ) else {
        return;
    };
    for item in items.iter() {
        if let Some(m) = manifest(ctx, item) {
            let at = ctx.loc(item.span().start);
            let depends_at = || ctx.loc(depends_on_span(item).unwrap_or(item.span()).start);
            found.push(Found::manifest(
                m,
                file_ns.map(str::to_string),
                at,
                depends_at,
            ));
        }
    }
}

/// Where a `[[manifest]]` entry's `driftless.dev/depends-on` annotation is written.
fn depends_on_span(item: &Value) -> Option<std::ops::Range<usize>> {
    let mut v = item;
    for key in ["metadata", "annotations", crate::spec::policy::DEPENDS_ON] {
        v = v.get_ref().as_table()?.get(key)?;
    }
    Some(v.span())
}

/// One `[[manifest]]` entry: apiVersion, kind and metadata.name required.
fn manifest(ctx: &mut FileCtx, item: &Value) -> Option<Manifest> {
    let t = ctx.value_as(item, DeValue::as_table, "a `manifest` entry", "a table")?;
    let errors_before = ctx.count();
    let mut f = Fields::new(t, "manifest".to_string(), item.span());
    let api_version = f.req_string(ctx, "apiVersion");
    let kind = f.req_string(ctx, "kind");
    let (mut name, mut namespace, mut meta_rest) = (None, None, BTreeMap::new());
    match f.get("metadata") {
        None => f.missing(ctx, "metadata.name"),
        Some(mv) => {
            if let Some(mt) = ctx.value_as(mv, DeValue::as_table, "`metadata`", "a table") {
                let rule = names::NameRule::of(
                    api_version.as_ref().map_or("", |v| v.get_ref()),
                    kind.as_ref().map_or("", |k| k.get_ref()),
                );
                (name, namespace, meta_rest) = metadata(ctx, mt, rule);
                if name.is_none() && mt.iter().all(|(k, _)| k.get_ref() != "name") {
                    ctx.err(
                        &mv.span(),
                        "manifest: missing required field `metadata.name`",
                    );
                }
            }
        }
    }
    let mut rest = BTreeMap::new();
    for (k, val) in t.iter() {
        let key = k.get_ref().as_ref();
        if matches!(key, "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(j) = to_json(ctx, val) {
            rest.insert(key.to_string(), j);
        }
    }
    // Other keys are the object's own (spec, data, rules...): nothing is unknown here.
    let (api_version, kind, name) = (api_version?, kind?, name?);
    if api_version.get_ref().is_empty() || api_version.get_ref().split('/').count() > 2 {
        ctx.err(
            &api_version.span(),
            format!(
                "invalid apiVersion {}: expected VERSION or GROUP/VERSION",
                q(api_version.get_ref())
            ),
        );
    }
    if kind.get_ref().is_empty() || !kind.get_ref().chars().all(|c| c.is_ascii_alphanumeric()) {
        ctx.err(&kind.span(), format!("invalid kind {}", q(kind.get_ref())));
    }
    if ctx.count() != errors_before {
        return None;
    }
    let m = Manifest {
        api_version: api_version.into_inner(),
        kind: kind.into_inner(),
        metadata: ManifestMetadata {
            name,
            namespace,
            generated: false,
            rest: meta_rest,
        },
        rest,
    };
    if let Some(why) = crate::spec::manifest::too_large(&m) {
        ctx.err(&item.span(), why);
        return None;
    }
    Some(m)
}

/// `metadata`'s name and namespace (checked; `None` when absent or not a string), and the
/// rest of it as JSON (labels and annotations checked).
fn metadata(
    ctx: &mut FileCtx,
    mt: &DeTable,
    rule: names::NameRule,
) -> (
    Option<String>,
    Option<String>,
    BTreeMap<String, serde_json::Value>,
) {
    let (mut name, mut namespace, mut rest) = (None, None, BTreeMap::new());
    for (k, val) in mt.iter() {
        match (k.get_ref().as_ref(), val.get_ref()) {
            ("name", DeValue::String(s)) => {
                ctx.check(&val.span(), "metadata.name", s, |n| rule.check(n));
                name = Some(s.to_string());
            }
            ("namespace", DeValue::String(s)) => {
                ctx.check(&val.span(), "metadata.namespace", s, names::dns1123_label);
                namespace = Some(s.to_string());
            }
            ("name" | "namespace", _) => {
                ctx.wrong_type(val, format_args!("`metadata.{}`", k.get_ref()), "a string");
            }
            (map @ ("labels" | "annotations"), _) => {
                let kind = if map == "labels" {
                    MetaMap::OwnLabels
                } else {
                    MetaMap::OwnAnnotations
                };
                if let Some(m) = meta_map(ctx, &format!("metadata.{map}"), val, kind) {
                    rest.insert(map.to_string(), serde_json::json!(m));
                }
            }
            (other, _) => {
                if let Some(j) = to_json(ctx, val) {
                    rest.insert(other.to_string(), j);
                }
            }
        }
    }
    (name, namespace, rest)
}

/// A TOML value as JSON; `None` (reported) for numbers a Kubernetes object cannot hold.
pub(super) fn to_json(ctx: &mut FileCtx, v: &Value) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    Some(match v.get_ref() {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Datetime(d) => J::String(d.to_string()),
        DeValue::Integer(_) => match integer(v.get_ref()).and_then(|n| i64::try_from(n.ok()?).ok())
        {
            Some(n) => J::from(n),
            None => {
                ctx.err(
                    &v.span(),
                    "integer out of range for a Kubernetes object (64-bit)",
                );
                return None;
            }
        },
        DeValue::Float(x) => {
            let parsed = x.as_str().replace('_', "").parse::<f64>().ok();
            match parsed.and_then(serde_json::Number::from_f64) {
                Some(n) => J::Number(n),
                None => {
                    ctx.err(
                        &v.span(),
                        format!("float {} cannot be represented in JSON", x.as_str()),
                    );
                    return None;
                }
            }
        }
        DeValue::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items.iter() {
                out.push(to_json(ctx, item)?);
            }
            J::Array(out)
        }
        DeValue::Table(t) => {
            let mut out = serde_json::Map::new();
            for (k, item) in t.iter() {
                out.insert(k.get_ref().to_string(), to_json(ctx, item)?);
            }
            J::Object(out)
        }
    })
}
