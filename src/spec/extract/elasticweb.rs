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
    let single = f.int(
        ctx,
        "single-pod-qps",
        true,
        (1, i64::MAX as i128),
        "must be at least 1",
    );
    let total = f.int(
        ctx,
        "total-qps",
        true,
        (0, i64::MAX as i128),
        "must be at least 0",
    );
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
        single_pod_qps: u64::try_from(single?).ok()?,
        total_qps: u64::try_from(total?).ok()?,
        cpu,
        memory,
        adopt,
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
