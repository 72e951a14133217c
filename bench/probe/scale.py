#!/usr/bin/env python3
"""The #47 scale probe (not the harness): runs `driftless run --dir DIR` until every one of
N specs is ready and the last sync succeeded, then SIGKILLs it, and prints the time, the
daemon's RSS (sampled, and VmHWM), the CPU seconds of the daemon and of each control-plane
process, and the apiserver's own write counts (apiserver_request_total, leases and events
left out; READS=1 adds reads). STEADY=S keeps it S seconds longer first.

    bench/probe/gen-elasticweb.sh /tmp/s10000 10000 scale     # N files of one elasticweb each
    source .testbed-bench/env                                 # a cluster of its own
    bench/probe/scale.py /tmp/s10000 10000 s10k first         # the first sync
    bench/probe/scale.py /tmp/s10000 10000 s10k restart       # after SIGKILL: converged again

DRV names the binary (default target/release/driftless). Work files go to /tmp/w.
"""
import json, os, subprocess, sys, time, signal, re
d, n, inst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mode = sys.argv[4] if len(sys.argv) > 4 else "first"
extra = sys.argv[5:] if len(sys.argv) > 5 else []
drv = os.environ.get("DRV", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/driftless"))
os.makedirs("/tmp/w", exist_ok=True)
st = f"/tmp/w/status-{inst}.json"
if mode == "first" and os.path.exists(st): os.remove(st)
CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller", "kube-scheduler", "driftless-testb")
def cpu(pid):
    """CPU seconds (user + system) the process has used."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def procs():
    """CPU seconds of each control-plane process, by its name."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                name = open(f"/proc/{pid}/comm").read().strip()
                if name in CONTROL_PLANE:
                    out[name] = out.get(name, 0) + cpu(pid)
            except Exception: pass
    return out
def kib(pid, field):
    return int(re.search(field + r":\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))
def writes():
    out = subprocess.run(["kubectl", "get", "--raw", "/metrics"], capture_output=True, text=True).stdout
    tot = {}
    for line in out.splitlines():
        if line.startswith("apiserver_request_total{"):
            m = re.search(r'verb="([A-Z]+)"', line); r = re.search(r'resource="([a-z]+)"', line)
            v = m.group(1); res = r.group(1) if r else "?"
            if res not in ("leases", "events") and (v in ("POST", "PATCH", "PUT", "DELETE", "APPLY") or os.environ.get("READS")):
                k = v + ":" + res
                tot[k] = tot.get(k, 0) + float(line.rsplit(" ", 1)[1])
    return tot
w0 = writes()
log = open(f"/tmp/w/daemon-{inst}-{mode}.log", "w")
t0 = time.time()
c0 = procs()
p = subprocess.Popen([drv, "run", "--dir", d, "--instance", inst, "--status-file", st,
                      "--metrics-addr", "127.0.0.1:0", "--cache-dir", f"/tmp/w/cache-{inst}"] + extra,
                     stdout=log, stderr=log)
peak = 0; conv = None; mtime = 0
while True:
    try: peak = max(peak, kib(p.pid, "VmRSS"))
    except Exception: pass
    if p.poll() is not None: print("daemon exited", p.returncode); break
    try:
        m = os.stat(st).st_mtime
        if m != mtime and time.time() - t0 > 0.5:
            mtime = m
            j = json.load(open(st))
            specs = j.get("specs", [])
            ok = (j.get("revision_applied") and j.get("revision_applied") == j.get("revision_seen")
                  and (j.get("last_sync") or {}).get("result") == "success"
                  and len(specs) == n and all(x.get("ready") for x in specs))
            if ok and (mode == "first" or m > t0):
                conv = time.time() - t0; break
    except Exception as e: pass
    if time.time() - t0 > 1800: print("timeout"); break
    # Often: the status file is read only when its mtime changed.
    time.sleep(0.1)
print("cpu: daemon", cpu(p.pid), {k: round(v - c0.get(k, 0), 1) for k, v in procs().items()})
hwm = kib(p.pid, "VmHWM")
w1 = writes()
dw = {k: w1.get(k, 0) - w0.get(k, 0) for k in w1 if w1.get(k, 0) - w0.get(k, 0) > 0}
took = "never" if conv is None else f"{conv:.1f}s"
print(f"{mode} N={n}: converged {took}, peak RSS sampled {peak/1024:.0f} MiB, VmHWM {hwm/1024:.0f} MiB, apiserver writes {dw}")
# STEADY: S seconds more, the RSS still sampled.
if os.environ.get("STEADY"):
    t1 = time.time()
    while time.time() - t1 < float(os.environ["STEADY"]):
        peak = max(peak, kib(p.pid, "VmRSS")); time.sleep(0.5)
    print(f"after steady: peak RSS sampled {peak/1024:.0f} MiB, VmHWM {kib(p.pid, 'VmHWM')/1024:.0f} MiB")
os.kill(p.pid, signal.SIGKILL); p.wait()
