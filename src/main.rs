mod cli;

/// jemalloc, not glibc's malloc. A sync builds and drops whole object trees; with glibc
/// the daemon kept much of what a sync freed (at rest, a 10,000-spec daemon held 195 MiB
/// of RSS, and a 3,000-spec one's heap was 25 MiB, after `malloc_trim`), and spent a third more CPU
/// (3,000 specs, a restart and four no-op resyncs: 4.5-4.9 CPU-s, 2.8-3.2 with jemalloc:
/// bench/results/2026-11-29-scale-packed-bodies.md). mimalloc raised the peak instead.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the environment is
/// read after them and wins). Pages a sync frees go back to the OS at once: kept for a
/// second (`dirty_decay_ms:1000`), what a sync freed early stood beside what it made
/// later, and each no-op resync of 10,000 specs peaked 12-15 MiB higher (168-172 MiB
/// against 156-158). That costs CPU (a restart and five no-ops: 16.7-17.5 CPU-s against
/// 14.1-14.7), not time a no-op takes: bench/results/2026-11-30-scale-noop-window.md.
/// One arena, not four per CPU: each arena keeps its own freed pages, and a daemon that
/// spends a few CPU-seconds a sync gains nothing from more (a 10,000-spec restart's
/// VmHWM 165-197 MiB against 174-217, the same CPU:
/// bench/results/2026-11-29-scale-inventory-digests.md).
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 67] =
    b"narenas:1,background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0\0";

fn main() -> std::process::ExitCode {
    cli::main()
}
