//! `[kustomize]` and `[jsonnet]` in `.driftless.toml`: how the tree's rendered sources are
//! built (DESIGN 1.9).

use std::collections::BTreeMap;

use toml::de::DeValue;

use super::fields::Fields;
use super::{FileCtx, Value};
use crate::spec::settings::JsonnetSettings;

/// `[kustomize]`: `remote-bases` (default false).
pub(super) fn kustomize(ctx: &mut FileCtx, v: &Value) -> bool {
    let Some(table) = ctx.value_as(v, DeValue::as_table, "`kustomize`", "a table") else {
        return false;
    };
    let mut f = Fields::new(table, "[kustomize]".into(), v.span());
    let remote = f.boolean(ctx, "remote-bases").unwrap_or(false);
    f.finish(ctx);
    remote
}

/// `[repository]`: `urls`, more URLs this repository is named by.
pub(super) fn repository(ctx: &mut FileCtx, v: &Value) -> Vec<String> {
    let Some(table) = ctx.value_as(v, DeValue::as_table, "`repository`", "a table") else {
        return Vec::new();
    };
    let mut f = Fields::new(table, "[repository]".into(), v.span());
    let urls = f.strings(ctx, "urls", |u| match u.trim().is_empty() {
        true => Err("an empty URL".to_string()),
        false => Ok(()),
    });
    f.finish(ctx);
    urls.into_iter().map(|(u, _)| u).collect()
}

/// `[jsonnet]`: `libs`, `ext-vars`, `tlas`.
pub(super) fn jsonnet(ctx: &mut FileCtx, v: &Value) -> JsonnetSettings {
    let Some(table) = ctx.value_as(v, DeValue::as_table, "`jsonnet`", "a table") else {
        return JsonnetSettings::default();
    };
    let mut f = Fields::new(table, "[jsonnet]".into(), v.span());
    let libs = f.strings(ctx, "libs", lib_path);
    let ext_vars = f.get("ext-vars").map(|v| strings_table(ctx, "ext-vars", v));
    let tlas = f.get("tlas").map(|v| strings_table(ctx, "tlas", v));
    f.finish(ctx);
    JsonnetSettings {
        libs: libs
            .into_iter()
            .map(|(p, _)| p.trim_end_matches('/').to_string())
            .collect(),
        ext_vars: ext_vars.unwrap_or_default(),
        tlas: tlas.unwrap_or_default(),
    }
}

/// A library path stays inside the tree: relative, without `..`.
fn lib_path(p: &str) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c == "..") {
        Err(format!(
            "{p:?} is not a path inside the spec tree: relative to its root, without `..`"
        ))
    } else {
        Ok(())
    }
}

/// A table of names to strings (`ext-vars`, `tlas`).
fn strings_table(ctx: &mut FileCtx, key: &str, v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(table) = ctx.value_as(
        v,
        DeValue::as_table,
        format_args!("`{key}`"),
        "a table of strings",
    ) else {
        return out;
    };
    for (k, v) in table.iter() {
        match v.get_ref() {
            DeValue::String(s) => {
                out.insert(k.get_ref().to_string(), s.to_string());
            }
            _ => ctx.wrong_type(
                v,
                format_args!("`{key}.{}`", k.get_ref()),
                "a string (quote numbers: \"3\")",
            ),
        }
    }
    out
}
