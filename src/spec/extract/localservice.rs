//! A `[localservice.NAME]`'s own fields, and its `ports`.

use std::collections::BTreeSet;

use toml::Spanned;
use toml::de::DeValue;

use super::fields::{Fields, MetaMap, integer, type_error};
use super::messages::q;
use super::{FileCtx, Value};
use crate::spec::model::{LocalService, Protocol, ServicePort, ServiceType, TargetPort};
use crate::spec::names;

/// Per-node Service names are `<name>-<node>`, or `<name>-<hash>` at the least (a 9-byte
/// suffix) when the node's name does not fit: a localservice name leaves room for that.
pub(super) const MAX_NAME: usize = 63 - 9;

pub(super) fn read(ctx: &mut FileCtx, f: &mut Fields) -> Option<LocalService> {
    let selector = match f.labels(ctx, "selector", MetaMap::OwnLabels) {
        Some(s) if s.get_ref().is_empty() => {
            ctx.err(
                &s.span(),
                "`selector` must not be empty: it would select every Pod of the namespace",
            );
            None
        }
        Some(s) => Some(s.into_inner()),
        None => {
            if !f.has("selector") {
                f.missing(ctx, "selector");
            }
            None
        }
    };
    let node_selector = f
        .labels(ctx, "node-selector", MetaMap::Labels)
        .map(Spanned::into_inner)
        .unwrap_or_default();
    let type_ = f.choice(ctx, "type", &ServiceType::ALL).unwrap_or_default();
    let ports = match f.get("ports") {
        None => {
            f.missing(ctx, "ports");
            None
        }
        Some(v) => ports(ctx, &f.what, v),
    };
    let adopt = f.boolean(ctx, "adopt").unwrap_or(false);
    Some(LocalService {
        namespace: None,
        selector: selector?,
        node_selector,
        type_,
        ports: ports?,
        adopt,
        ignore_fields: Vec::new(),
        prune: true,
        depends_on: Vec::new(),
        replace: None,
        wave: 0,
    })
}

/// `ports = [...]`: at least one, each well-formed; several need distinct names and ports.
fn ports(ctx: &mut FileCtx, what: &str, v: &Value) -> Option<Vec<ServicePort>> {
    let items = ctx.value_as(v, DeValue::as_array, "`ports`", "an array of tables")?;
    if items.is_empty() {
        ctx.err(&v.span(), "`ports` must list at least one port");
        return None;
    }
    let errors_before = ctx.count();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(t) = ctx.value_as(
            item,
            DeValue::as_table,
            format_args!("`ports[{i}]`"),
            "a table",
        ) else {
            continue;
        };
        let mut f = Fields::new(t, format!("{what} ports[{i}]"), item.span());
        let name = f.string(ctx, "name");
        if let Some(n) = &name {
            ctx.check(&n.span(), "port name", n.get_ref(), names::dns1123_label);
        }
        let port = f.port(ctx, "port", true);
        let target_port = f.get("target-port").and_then(|tv| target_port(ctx, tv));
        let protocol = f
            .choice(ctx, "protocol", &Protocol::ALL)
            .unwrap_or_default();
        f.finish(ctx);
        if let Some(port) = port {
            out.push(Spanned::new(
                item.span(),
                ServicePort {
                    name: name.map(Spanned::into_inner),
                    port,
                    target_port,
                    protocol,
                },
            ));
        }
    }
    if out.len() > 1 {
        distinct(ctx, &out);
    }
    (ctx.count() == errors_before).then(|| out.into_iter().map(Spanned::into_inner).collect())
}

/// `target-port`: a port number, or the name of a container's port.
fn target_port(ctx: &mut FileCtx, tv: &Value) -> Option<TargetPort> {
    match tv.get_ref() {
        DeValue::String(s) => match names::dns1123_label(s) {
            Ok(()) if s.len() <= 15 => Some(TargetPort::Name(s.to_string())),
            _ => {
                ctx.err(&tv.span(), format!("invalid `target-port` name {}: must be a port name of at most 15 lowercase letters, digits and '-'", q(s)));
                None
            }
        },
        other => match integer(other) {
            Some(Ok(n)) if (1..=65535).contains(&n) => {
                u16::try_from(n).ok().map(TargetPort::Number)
            }
            Some(_) => {
                let written = ctx.written(tv.span());
                ctx.err(
                    &tv.span(),
                    format!("`target-port` must be a port between 1 and 65535 (is {written})"),
                );
                None
            }
            None => {
                type_error(ctx, "target-port", "a port number or name", tv);
                None
            }
        },
    }
}

/// A Service of several ports needs every one named, no name twice and no port twice.
fn distinct(ctx: &mut FileCtx, ports: &[Spanned<ServicePort>]) {
    let mut seen_names = BTreeSet::new();
    let mut seen_ports = BTreeSet::new();
    for p in ports {
        match &p.get_ref().name {
            None => ctx.err(
                &p.span(),
                "every port needs a `name` when a Service has several ports",
            ),
            Some(n) => {
                if !seen_names.insert(n) {
                    ctx.err(&p.span(), format!("port name {n:?} is used twice"));
                }
            }
        }
        let key = (p.get_ref().port, p.get_ref().protocol.as_str());
        if !seen_ports.insert(key) {
            ctx.err(
                &p.span(),
                format!("port {}/{} is listed twice", key.0, key.1),
            );
        }
    }
}
