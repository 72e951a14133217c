//! A `[workspace.NAME]`'s own fields.

use toml::Spanned;

use super::FileCtx;
use super::fields::Fields;
use super::messages::q;
use crate::spec::model::{AccessMode, Workspace, WorkspaceState, defaults};
use crate::spec::{names, quantity};

/// Linux's PATH_MAX: the longest `mount-path` a container runtime takes.
const MAX_PATH: usize = 4096;

pub(super) fn read(ctx: &mut FileCtx, f: &mut Fields) -> Option<Workspace> {
    let image = f.image(ctx);
    let port = f
        .port(ctx, "port", false)
        .unwrap_or_else(defaults::workspace_port);
    let cpu = f.quantity(ctx, "cpu", quantity::Unit::Cpu);
    let memory = f.quantity(ctx, "memory", quantity::Unit::Bytes);
    let storage = f.quantity(ctx, "storage", quantity::Unit::Bytes);
    let storage_class = f.string(ctx, "storage-class");
    if let Some(sc) = &storage_class {
        ctx.check(
            &sc.span(),
            "`storage-class`",
            sc.get_ref(),
            names::dns1123_subdomain,
        );
    }
    let storage_class = storage_class.map(Spanned::into_inner);
    let access_mode = f
        .choice(ctx, "access-mode", &AccessMode::ALL)
        .unwrap_or_default();
    let mount_path = match f.string(ctx, "mount-path") {
        Some(p) if p.get_ref().len() > MAX_PATH => {
            ctx.err(
                &p.span(),
                format!(
                    "`mount-path` is {} bytes long; a path is at most {MAX_PATH}",
                    p.get_ref().len()
                ),
            );
            None
        }
        Some(p) if !p.get_ref().starts_with('/') => {
            ctx.err(
                &p.span(),
                format!(
                    "`mount-path` must be an absolute path, found {}",
                    q(p.get_ref())
                ),
            );
            None
        }
        Some(p) => Some(p.into_inner()),
        None => Some(defaults::mount_path()),
    };
    let state = f
        .choice(
            ctx,
            "state",
            &[
                ("running", WorkspaceState::Running),
                ("stopped", WorkspaceState::Stopped),
            ],
        )
        .unwrap_or_default();
    // Every field is read before any early return, so none is misreported as unknown.
    let adopt = f.boolean(ctx, "adopt").unwrap_or(false);
    Some(Workspace {
        namespace: None,
        image: image?.into_inner(),
        port,
        cpu,
        memory,
        storage,
        storage_class,
        access_mode,
        mount_path: mount_path?,
        state,
        adopt,
        ignore_fields: Vec::new(),
        prune: true,
        depends_on: Vec::new(),
        replace: None,
        wave: 0,
    })
}
