//! What the binary writes besides its results: the log on stderr, and how it ends when
//! its reader has gone.

use super::LogFormat;

/// Libraries whose logs one-shot commands leave out: kube's client logs every failed
/// request (`ERROR kube_client ...`) before driftless reports the failure in its own words,
/// and warns on every TLS handshake with `insecure-skip-tls-verify`, which driftless says
/// once. `RUST_LOG` naming one of them (or a prefix, `kube=debug`) lets it back in. The
/// daemon too: it logs each failure in its own words (`not applied`, `prune failed`).
const QUIET_LIBRARIES: &[&str] = &[
    "kube_client",
    "kube_runtime",
    "kube_lease_manager",
    "hyper",
    "hyper_util",
    "rustls",
    "tower",
    "h2",
];

/// The exit status when stdout's reader has gone (`driftless render | head -1`): the one
/// a shell shows for a process killed by SIGPIPE (128 + 13), as git and most Unix tools
/// end, so `set -o pipefail` scripts see the same as with them.
pub const BROKEN_PIPE: u8 = 141;

pub fn init_tracing(format: LogFormat, default_level: &str) {
    let asked = std::env::var("RUST_LOG").ok();
    let mut filter = asked
        .as_deref()
        .and_then(|spec| tracing_subscriber::EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_level));
    for target in quieted(asked.as_deref().unwrap_or("")) {
        if let Ok(directive) = format!("{target}=off").parse() {
            filter = filter.add_directive(directive);
        }
    }
    // Colour only for a person at a terminal: journald, files and pipes get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The libraries to silence, given `RUST_LOG`: all but those it names by a target that
/// covers them (`kube=debug` names kube_client; a bare level names none).
fn quieted(rust_log: &str) -> Vec<&'static str> {
    let named: Vec<&str> = rust_log
        .split(',')
        .filter_map(|d| {
            let target = d.split(['=', '[']).next()?.trim();
            let is_level = target.is_empty()
                || ["trace", "debug", "info", "warn", "error", "off"]
                    .iter()
                    .any(|l| target.eq_ignore_ascii_case(l))
                || target.parse::<u8>().is_ok();
            (!is_level).then_some(target)
        })
        .collect();
    QUIET_LIBRARIES
        .iter()
        .copied()
        .filter(|lib| !named.iter().any(|t| lib.starts_with(t)))
        .collect()
}

/// Whether `e` is a write to a pipe whose reader has gone.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_stay_quiet_unless_rust_log_names_them() {
        assert_eq!(quieted(""), QUIET_LIBRARIES);
        assert_eq!(quieted("debug"), QUIET_LIBRARIES);
        assert_eq!(quieted("warn,driftless=debug"), QUIET_LIBRARIES);
        let q = quieted("warn,kube=debug");
        assert!(!q.iter().any(|t| t.starts_with("kube")), "{q:?}");
        assert!(q.contains(&"hyper"), "{q:?}");
        let q = quieted("hyper_util[conn]=trace");
        assert!(!q.contains(&"hyper_util") && q.contains(&"hyper"), "{q:?}");
    }

    #[test]
    fn a_broken_pipe_is_found_under_context() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let e = anyhow::Error::new(io).context("writing the objects");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
