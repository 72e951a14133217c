//! An `[elasticweb.NAME]`'s own fields.

use super::FileCtx;
use super::fields::Fields;
use crate::spec::model::{ElasticWeb, defaults};
use crate::spec::quantity;

pub(super) fn read(ctx: &mut FileCtx, f: &mut Fields) -> Option<ElasticWeb> {
    let image = f.image(ctx);
    let port = f
        .int(
            ctx,
            "port",
            false,
            (30000, 32767),
            "is a NodePort and must be between 30000 and 32767",
        )
        .and_then(|n| u16::try_from(n).ok());
    let container_port = f
        .port(ctx, "container-port", false)
        .unwrap_or_else(defaults::container_port);
    let single = qps(ctx, f, "single-pod-qps", 1);
    let total = qps(ctx, f, "total-qps", 0);
    let cpu = f
        .quantity(ctx, "cpu", quantity::Unit::Cpu)
        .unwrap_or_else(defaults::elasticweb_cpu);
    let memory = f
        .quantity(ctx, "memory", quantity::Unit::Bytes)
        .unwrap_or_else(defaults::elasticweb_memory);
    let adopt = f.boolean(ctx, "adopt").unwrap_or(false);
    let web = ElasticWeb {
        namespace: None,
        image: image?.into_inner(),
        port,
        container_port,
        single_pod_qps: single?,
        total_qps: total?,
        cpu,
        memory,
        adopt,
        ignore_fields: Vec::new(),
        prune: true,
        depends_on: Vec::new(),
        replace: None,
        wave: 0,
    };
    if web.replicas() > i32::MAX as u64 {
        let span = f.get("total-qps").map(|v| v.span()).unwrap_or_default();
        ctx.err(
            &span,
            format!(
                "`total-qps` / `single-pod-qps` needs {} replicas, more than a Deployment can have",
                web.replicas()
            ),
        );
        return None;
    }
    Some(web)
}

/// A required queries-per-second figure of at least `min`; at most `i64::MAX`, as the
/// replica count divides one by the other in 64 bits.
fn qps(ctx: &mut FileCtx, f: &mut Fields, key: &'static str, min: i128) -> Option<u64> {
    let range_msg = format!("must be at least {min}");
    f.int(ctx, key, true, (min, i64::MAX as i128), &range_msg)
        .and_then(|n| u64::try_from(n).ok())
}
