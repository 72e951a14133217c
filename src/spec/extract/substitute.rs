//! Variables in a TOML spec file's string values (`spec::vars`), before its specs are
//! read: what a field's checks see is the value substituted.

use std::borrow::Cow;

use toml::de::{DeTable, DeValue};

use super::{FileCtx, Value};
use crate::spec::policy;
use crate::spec::vars::Vars;

/// Replaces the references in every string value of `table` (keys stay as written),
/// reporting each unset variable at its place. A table whose `metadata.annotations` say
/// `driftless.dev/substitute: disabled` is left whole.
pub(super) fn table(ctx: &mut FileCtx, text: &str, table: &mut DeTable, vars: &Vars) {
    if disabled(table) {
        return;
    }
    for (_, v) in table.iter_mut() {
        value(ctx, text, v, vars);
    }
}

fn value(ctx: &mut FileCtx, text: &str, v: &mut Value, vars: &Vars) {
    let span = v.span();
    match v.get_mut() {
        DeValue::String(s) => match vars.expand(s) {
            Ok(Cow::Borrowed(_)) => {}
            Ok(Cow::Owned(new)) => *s = new.into(),
            Err(unset) => {
                for u in unset {
                    let at = raw_offset(text, span.clone(), &u.name);
                    ctx.err(&(at..at), u.message());
                }
            }
        },
        DeValue::Table(t) => table(ctx, text, t, vars),
        DeValue::Array(items) => {
            for item in items.iter_mut() {
                value(ctx, text, item, vars);
            }
        }
        _ => {}
    }
}

/// Where `${name}` is written inside the value at `span`: its start when the value's
/// text differs from its source (escapes).
pub(crate) fn raw_offset(text: &str, span: std::ops::Range<usize>, name: &str) -> usize {
    let reference = format!("${{{name}}}");
    text.get(span.clone())
        .and_then(|raw| raw.find(&reference))
        .map_or(span.start, |i| span.start + i)
}

fn disabled(table: &DeTable) -> bool {
    fn get<'t, 'i>(t: &'t DeTable<'i>, k: &str) -> Option<&'t DeValue<'i>> {
        t.iter()
            .find(|(key, _)| key.get_ref() == k)
            .map(|(_, v)| v.get_ref())
    }
    let Some(DeValue::Table(meta)) = get(table, "metadata") else {
        return false;
    };
    let Some(DeValue::Table(ann)) = get(meta, "annotations") else {
        return false;
    };
    matches!(get(ann, policy::SUBSTITUTE), Some(DeValue::String(s)) if s.trim() == "disabled")
}
