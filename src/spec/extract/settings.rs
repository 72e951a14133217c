//! `.driftless.toml`: the tree-level settings (`spec::settings`), read as a spec file is,
//! every problem at its `file:line:col`.

use std::collections::BTreeMap;
use std::sync::Arc;

use toml::de::{DeTable, DeValue};

use super::fields::{Fields, MetaMap};
use super::messages::{short, suggest};
use super::{FileCtx, Value, syntax};
use crate::spec::settings::{
    AppDir, BUILT_IN_GROUPS, ClusterRule, Expr, HealthRule, IgnoreRule, NamespaceRule, Settings,
};
use crate::spec::{names, policy, vars};

const SECTIONS: [&str; 10] = [
    "apps",
    "cluster",
    "vars",
    "substitute",
    "namespace",
    "ignore",
    "health",
    "kustomize",
    "jsonnet",
    "repository",
];

/// The settings in `text`; what is wrong is reported on `ctx` and left out.
pub(in crate::spec) fn settings(ctx: &mut FileCtx, text: &str) -> Settings {
    let root = match DeTable::parse(text) {
        Ok(root) => root.into_inner(),
        Err(first) => {
            syntax::report(ctx, text, &first);
            return Settings::default();
        }
    };
    let mut out = Settings {
        text: text.to_string(),
        ..Settings::default()
    };
    for (k, v) in root.iter() {
        match k.get_ref().as_ref() {
            "vars" => {
                out.declared_vars = true;
                out.vars = var_table(ctx, v);
            }
            "substitute" => out.skip = substitute_table(ctx, v),
            "namespace" => {
                for (t, at) in tables(ctx, "namespace", v) {
                    out.namespaces.extend(namespace_rule(ctx, t, at));
                }
            }
            "cluster" => {
                for (t, at) in tables(ctx, "cluster", v) {
                    out.clusters.extend(cluster_rule(ctx, t, at));
                }
            }
            "ignore" => {
                for (t, at) in tables(ctx, "ignore", v) {
                    out.ignore.extend(ignore_rule(ctx, t, at));
                }
            }
            "health" => {
                for (t, at) in tables(ctx, "health", v) {
                    out.health.extend(health_rule(ctx, t, at).map(Arc::new));
                }
            }
            "kustomize" => out.remote_bases = super::render_settings::kustomize(ctx, v),
            "jsonnet" => out.jsonnet = super::render_settings::jsonnet(ctx, v),
            "repository" => out.repository_urls = super::render_settings::repository(ctx, v),
            "apps" => out.app_dirs = apps(ctx, v),
            key => {
                let msg = match suggest(key, SECTIONS) {
                    Some(near) => {
                        format!("unknown setting `{}` (did you mean `{near}`?)", short(key))
                    }
                    None => format!(
                        "unknown setting `{}`; .driftless.toml holds [apps], [vars], [substitute], [[namespace]], [[cluster]], [[ignore]], [[health]], [kustomize], [jsonnet] and [repository]",
                        short(key)
                    ),
                };
                ctx.err(&k.span(), msg);
            }
        }
    }
    out
}

/// `[vars]`: names to string values.
fn var_table(ctx: &mut FileCtx, v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(table) = ctx.value_as(v, DeValue::as_table, "`vars`", "a table of strings") else {
        return out;
    };
    for (k, v) in table.iter() {
        let name = k.get_ref();
        if !vars::is_name(name) {
            ctx.err(
                &k.span(),
                format!(
                    "invalid variable name `{}`: a letter or `_`, then letters, digits and `_`",
                    short(name)
                ),
            );
            continue;
        }
        match v.get_ref() {
            DeValue::String(s) => {
                out.insert(name.to_string(), s.to_string());
            }
            _ => ctx.wrong_type(
                v,
                format_args!("variable `{name}`"),
                "a string (quote numbers: \"3\")",
            ),
        }
    }
    out
}

/// `[substitute]`: `skip`, globs of files whose values are left as written.
fn substitute_table(ctx: &mut FileCtx, v: &Value) -> Vec<globset::GlobMatcher> {
    let Some(table) = ctx.value_as(v, DeValue::as_table, "`substitute`", "a table") else {
        return Vec::new();
    };
    let mut f = Fields::new(table, "[substitute]".into(), v.span());
    let globs = f.strings(ctx, "skip", |_| Ok(()));
    f.finish(ctx);
    globs
        .into_iter()
        .filter_map(|(pattern, at)| match glob(&pattern) {
            Ok(g) => Some(g),
            Err(why) => {
                ctx.errors.push(crate::spec::SpecError {
                    at,
                    message: format!("in `skip`: invalid path pattern: {why}"),
                });
                None
            }
        })
        .collect()
}

/// A path pattern over files relative to the spec root: `*` stays within a directory,
/// `**` crosses them.
fn glob(pattern: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

/// `[apps] directories`: patterns of directories (relative to the spec root, `*` within
/// one name) each of which is an app of its own.
fn apps(ctx: &mut FileCtx, v: &Value) -> Vec<AppDir> {
    let Some(table) = ctx.value_as(v, DeValue::as_table, "`apps`", "a table") else {
        return Vec::new();
    };
    let mut f = Fields::new(table, "[apps]".into(), v.span());
    let dirs = f.strings(ctx, "directories", |p| {
        let p = p.trim_end_matches('/');
        if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c == "..") {
            return Err(format!(
                "{p:?} is not a directory inside the spec tree: relative to its root, without `..`"
            ));
        }
        glob(p)
            .map(|_| ())
            .map_err(|why| format!("invalid directory pattern: {why}"))
    });
    f.finish(ctx);
    dirs.into_iter()
        .filter_map(|(p, _)| {
            let p = p.trim_end_matches('/').to_string();
            Some(AppDir {
                glob: glob(&p).ok()?,
                pattern: p,
            })
        })
        .collect()
}

/// The tables of an array of tables (`[[key]]`), each with where its header is.
fn tables<'t, 'i>(
    ctx: &mut FileCtx,
    key: &str,
    v: &'t Value<'i>,
) -> Vec<(&'t DeTable<'i>, std::ops::Range<usize>)> {
    let Some(items) = ctx.value_as(
        v,
        DeValue::as_array,
        format_args!("`{key}`"),
        format_args!("an array of tables ([[{key}]])"),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items.iter() {
        match item.get_ref().as_table() {
            Some(t) => out.push((t, item.span())),
            None => ctx.wrong_type(item, format_args!("each `{key}`"), "a table"),
        }
    }
    out
}

fn namespace_rule(
    ctx: &mut FileCtx,
    table: &DeTable,
    at: std::ops::Range<usize>,
) -> Option<NamespaceRule> {
    let mut f = Fields::new(table, "[[namespace]]".into(), at);
    let path = f.req_string(ctx, "path");
    let namespace = f.req_string(ctx, "namespace");
    f.finish(ctx);
    let (path, namespace) = (path?, namespace?);
    if !ctx.check(
        &namespace.span(),
        "namespace",
        namespace.get_ref(),
        names::dns1123_label,
    ) {
        return None;
    }
    match glob(path.get_ref()) {
        Ok(glob) => Some(NamespaceRule {
            path: path.get_ref().clone(),
            glob,
            namespace: namespace.into_inner(),
        }),
        Err(why) => {
            ctx.err(&path.span(), format!("invalid path pattern: {why}"));
            None
        }
    }
}

/// `[[cluster]]`: a path pattern and the clusters its files go to, by name, by labels,
/// or both. The names are checked against the operator's clusters when the tree is read.
fn cluster_rule(
    ctx: &mut FileCtx,
    table: &DeTable,
    at: std::ops::Range<usize>,
) -> Option<ClusterRule> {
    let header = at.clone();
    let mut f = Fields::new(table, "[[cluster]]".into(), at);
    let path = f.req_string(ctx, "path");
    let names = f.strings(ctx, "names", |n| match n.is_empty() {
        true => Err("a cluster's name is not empty".into()),
        false => names::label_value(n),
    });
    let labels = f
        .labels(ctx, "labels", MetaMap::Labels)
        .map(|l| l.into_inner());
    let given = f.has("names") || f.has("labels");
    f.finish(ctx);
    if !given {
        ctx.err(
            &header,
            "[[cluster]]: give `names` (clusters by name) or `labels` (clusters by their labels), or both",
        );
        return None;
    }
    let path = path?;
    match glob(path.get_ref()) {
        Ok(glob) => Some(ClusterRule {
            at: ctx.loc(header.start),
            path: path.get_ref().clone(),
            glob,
            names,
            labels,
        }),
        Err(why) => {
            ctx.err(&path.span(), format!("invalid path pattern: {why}"));
            None
        }
    }
}

/// An anchored regular expression under `key`: it must match the whole value.
fn anchored(
    ctx: &mut FileCtx,
    f: &mut Fields,
    key: &'static str,
) -> Result<Option<regex::Regex>, ()> {
    let Some(s) = f.string(ctx, key) else {
        return Ok(None);
    };
    match regex::Regex::new(&format!("^(?:{})$", s.get_ref())) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            let why = e.to_string();
            let why = why.lines().last().unwrap_or_default().trim();
            let why = why.trim_start_matches("error: ");
            ctx.err(
                &s.span(),
                format!("invalid regular expression in `{key}`: {why}"),
            );
            Err(())
        }
    }
}

fn ignore_rule(
    ctx: &mut FileCtx,
    table: &DeTable,
    at: std::ops::Range<usize>,
) -> Option<IgnoreRule> {
    let header = at.clone();
    let mut f = Fields::new(table, "[[ignore]]".into(), at);
    let group = f.string(ctx, "group").map(|s| s.into_inner());
    let kind = f.string(ctx, "kind").map(|s| s.into_inner());
    let name = anchored(ctx, &mut f, "name");
    let namespace = anchored(ctx, &mut f, "namespace");
    let labels = f
        .labels(ctx, "labels", MetaMap::Labels)
        .map(|l| l.into_inner())
        .unwrap_or_default();
    let paths: Vec<String> = f
        .strings(ctx, "paths", policy::check_pointer)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let managers: Vec<String> = f
        .strings(ctx, "managers", |m| match m.is_empty() {
            true => Err("a field manager's name is not empty".into()),
            false => Ok(()),
        })
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    let has = |k: &str| f.has(k);
    let given = has("paths") || has("managers");
    f.finish(ctx);
    if !given {
        ctx.err(
            &header,
            "[[ignore]]: give `paths` (JSON pointers) or `managers` (field managers), or both",
        );
        return None;
    }
    let pattern = |r: Option<regex::Regex>| r.map(crate::spec::select::Pattern::Regex);
    Some(IgnoreRule {
        at: ctx.loc(header.start),
        select: crate::spec::select::ObjectSelector {
            group,
            version: None,
            kind,
            name: pattern(name.ok()?),
            namespace: pattern(namespace.ok()?),
            labels,
        },
        paths,
        managers,
    })
}

fn health_rule(
    ctx: &mut FileCtx,
    table: &DeTable,
    at: std::ops::Range<usize>,
) -> Option<HealthRule> {
    let header = at.clone();
    let mut f = Fields::new(table, "[[health]]".into(), at);
    let api_version = f.req_string(ctx, "api-version");
    let kind = f.req_string(ctx, "kind");
    let mut expr = |ctx: &mut FileCtx, key: &'static str| -> Result<Option<Expr>, ()> {
        let Some(s) = f.string(ctx, key) else {
            return Ok(None);
        };
        match Expr::compile(s.get_ref()) {
            Ok(expr) => Ok(Some(expr)),
            Err(why) => {
                ctx.err(
                    &s.span(),
                    format!("`{key}` is not a valid CEL expression: {why}"),
                );
                Err(())
            }
        }
    };
    let current = expr(ctx, "current");
    let failed = expr(ctx, "failed");
    let in_progress = expr(ctx, "in-progress");
    f.finish(ctx);
    let (api_version, kind) = (api_version?, kind?);
    let group = crate::object::group_of(api_version.get_ref());
    if BUILT_IN_GROUPS.contains(&group) {
        ctx.err(
            &api_version.span(),
            format!(
                "{} is a Kubernetes kind whose readiness driftless already judges (kstatus); [[health]] rules are for custom resources",
                api_version.get_ref()
            ),
        );
        return None;
    }
    let (current, failed, in_progress) = (current.ok()?, failed.ok()?, in_progress.ok()?);
    if current.is_none() {
        ctx.err(&header, "[[health]]: missing required field `current`");
        return None;
    }
    Some(HealthRule {
        at: ctx.loc(header.start),
        api_version: api_version.into_inner(),
        kind: kind.into_inner(),
        current,
        failed,
        in_progress,
        scope: None,
    })
}
