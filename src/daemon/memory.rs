//! What the daemon asks of glibc's allocator: a sync allocates and frees whole object
//! trees, and glibc's defaults keep much of that from the OS.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" {
    fn malloc_trim(pad: usize) -> i32;
    fn mallopt(param: i32, value: i32) -> i32;
}

/// glibc's `M_ARENA_MAX`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const M_ARENA_MAX: i32 = -8;

/// At most two malloc arenas, before any thread starts (unless `MALLOC_ARENA_MAX` says
/// otherwise). glibc gives every thread that meets a locked arena one of its own, up to
/// eight a core, and memory a sync frees in one is not reused by another: at a
/// 10,000-spec restart the daemon's peak RSS was 240-275 MiB with the default, 199 MiB
/// with two, for a heap of 133 MiB. Two threads rarely wait on each other's arena on the
/// small machines this matters on.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a tunable of glibc's allocator, under its own lock.
        unsafe {
            mallopt(M_ARENA_MAX, 2);
        }
    }
}

/// Hands memory freed by a sync back to the OS. glibc keeps freed memory in its arenas,
/// and over a burst of saves at 5,000 specs the daemon's RSS grew from 380 to 650 MiB
/// without it (the load test in tests/faults.rs). mimalloc instead raised the peak at
/// 1,000 specs by a fifth.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's heaps to the kernel; it
    // takes the allocator's own locks and touches no memory of ours.
    unsafe {
        malloc_trim(0);
    }
}
