//! Where the CPU time of a timed region went: the client, the local cluster, the rest of
//! the machine.

use super::*;

/// CPU time spent during a timed region, in seconds: by the client (driftless, kubectl
/// or the harness's own loop), by the local cluster's processes (etcd, apiserver,
/// controller-manager, scheduler, stand-ins), and by everything else on the machine
/// (other work sharing the cores).
#[derive(Debug, Serialize, Clone, Copy, Default)]
pub struct CpuUse {
    pub wall_s: f64,
    pub client_s: f64,
    pub cluster_s: Option<f64>,
    pub machine_s: f64,
    pub other_s: Option<f64>,
}

pub struct CpuProbe {
    start: Instant,
    client: f64,
    cluster: Option<f64>,
    machine: f64,
}

fn ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

fn rusage_s(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Our own CPU time plus that of every child waited for (the tools we run).
fn client_cpu_s() -> f64 {
    rusage_s(libc::RUSAGE_SELF) + rusage_s(libc::RUSAGE_CHILDREN)
}

/// The testbed's processes, from the pid files of `testbed/cluster.sh`.
fn cluster_pids() -> Vec<u32> {
    let Ok(dir) = std::env::var("DRIFTLESS_TESTBED_DIR") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(Path::new(&dir).join("pids")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .collect()
}

/// Waits (up to 60 s) until the local cluster uses under a fifth of a core over half a
/// second, so a measurement does not pay for the work the one before it left behind.
pub(super) async fn settle() {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let Some(before) = cluster_cpu_s() else {
            return;
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        match cluster_cpu_s() {
            Some(after) if (after - before) / 0.5 < 0.2 => {
                eprintln!("cluster quiet after {:.1}s", start.elapsed().as_secs_f64());
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
    eprintln!("cluster still busy after 60 s; measuring anyway");
}

fn cluster_cpu_s() -> Option<f64> {
    let pids = cluster_pids();
    if pids.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for pid in pids {
        total += process_cpu_s(pid)?;
    }
    Some(total)
}

/// The CPU time (user and system) process `pid` has used, in seconds.
pub(crate) fn process_cpu_s(pid: u32) -> Option<f64> {
    // utime, stime are fields 14, 15.
    stat_seconds(pid, 14)
}

/// The CPU time (user and system) of the children process `pid` has waited for (the tools
/// it ran), in seconds: apart from its own, so a daemon's share and its tools' are told
/// apart.
pub(crate) fn process_children_cpu_s(pid: u32) -> Option<f64> {
    // cutime, cstime are fields 16, 17.
    stat_seconds(pid, 16)
}

/// Fields `first` and `first + 1` of `/proc/PID/stat` (clock ticks), summed, in seconds.
fn stat_seconds(pid: u32, first: usize) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After "pid (comm) " the state is field 3: field N is at N - 3.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let a: f64 = f.get(first - 3)?.parse().ok()?;
    let b: f64 = f.get(first - 2)?.parse().ok()?;
    Some((a + b) / ticks())
}

/// Busy CPU time of the whole machine (all cores), from /proc/stat.
fn machine_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let busy: f64 = v
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    busy / ticks()
}

impl CpuProbe {
    pub fn start() -> CpuProbe {
        CpuProbe {
            start: Instant::now(),
            client: client_cpu_s(),
            cluster: cluster_cpu_s(),
            machine: machine_cpu_s(),
        }
    }

    pub fn finish(&self) -> CpuUse {
        let client_s = client_cpu_s() - self.client;
        let cluster_s = match (cluster_cpu_s(), self.cluster) {
            (Some(now), Some(then)) => Some(now - then),
            _ => None,
        };
        let machine_s = machine_cpu_s() - self.machine;
        CpuUse {
            wall_s: self.start.elapsed().as_secs_f64(),
            client_s,
            cluster_s,
            machine_s,
            other_s: cluster_s.map(|c| (machine_s - c - client_s).max(0.0)),
        }
    }
}
