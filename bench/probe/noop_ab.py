#!/usr/bin/env python3
"""No-op resyncs of one daemon, for comparing binaries or allocator settings on one cluster
and one tree (the #47 probe beside scale.py, not the harness):

    bench/probe/noop_ab.py BIN DIR N INST REPEATS [ENV=VALUE ...]

starts `BIN run --dir DIR` as instance INST (with ENV set), waits until all N specs are
ready and the last sync succeeded, asks `POST /api/v1/sync?wait=true` REPEATS times and
prints each answer's time and the peak RSS of its own (VmHWM reset before it through
/proc/PID/clear_refs, read 2 s after the answer), then the daemon's VmRSS, its peak until the no-ops began, and its
CPU seconds, and SIGKILLs it. Run the same INST each time: a later daemon restarts on what the first applied.
Work files go to /tmp/w. HEAPTRACK=OUT attaches heaptrack (`heaptrack -p`, so only what the
no-ops allocate is recorded) before the no-ops and ends the daemon with SIGTERM, writing
OUT.zst: `heaptrack_print -F OUT.folded --flamegraph-cost-type peak OUT.zst` shows what
stood at the peak. Attaching needs a glibc-malloc build (no `#[global_allocator]`).
"""
import json, os, subprocess, sys, time, socket, signal
binp, d, n, inst, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
env = dict(os.environ)
for kv in sys.argv[6:]:
    k, v = kv.split("=", 1); env[k] = v
st = f"/tmp/w/ab-status-{inst}.json"
open("/tmp/w/ab-token", "w").write("abtoken\n")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
log = open(f"/tmp/w/ab-{inst}.log", "w")
p = subprocess.Popen([binp, "--instance", inst, "run", "--dir", d, "--status-file", st, "--metrics-addr",
                      f"127.0.0.1:{port}", "--api-token-file", "/tmp/w/ab-token", "--cache-dir", f"/tmp/w/ab-cache-{inst}"],
                     stdout=log, stderr=log, env=env)
t0 = time.time()
while True:
    time.sleep(0.5)
    try:
        s = json.load(open(st))
        specs = s.get("specs", [])
        if (s.get("revision_applied") and s.get("revision_applied") == s.get("revision_seen")
                and (s.get("last_sync") or {}).get("result") == "success"
                and len(specs) == n and all(x.get("ready") for x in specs)):
            break
    except Exception:
        pass
    if time.time() - t0 > 900: print("not converged"); p.kill(); sys.exit(1)
def status(field):
    return int(open(f"/proc/{p.pid}/status").read().split(field + ":")[1].split()[0])
def reset_peak():
    # 5: the peak RSS starts again from the RSS now (Linux 4.0 on).
    open(f"/proc/{p.pid}/clear_refs", "w").write("5")
print(f"converged {time.time()-t0:.1f}s", flush=True)
time.sleep(3)
before = status("VmHWM")
tracer = None
if os.environ.get("HEAPTRACK"):
    tracer = subprocess.Popen(["heaptrack", "-o", os.environ["HEAPTRACK"], "-p", str(p.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(10)
def ask():
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"POST /api/v1/sync?wait=true HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer abtoken\r\nContent-Length: 0\r\n\r\n")
    data = b""
    while True:
        b = c.recv(65536)
        if not b: break
        data += b
    return data.split(b"\r\n", 1)[0]
peaks = []
for i in range(reps):
    reset_peak()
    t = time.time(); line = ask(); took = time.time() - t
    # Read 2 s after the answer, not at it: the daemon answers before it writes the
    # status and judges readiness again, and those belong to the no-op's peak too.
    time.sleep(2)
    peaks.append(status("VmHWM"))
    print(f"noop {took:.3f}s {line.decode()} peak {peaks[-1]} kB", flush=True)
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
print(f"VmRSS {status('VmRSS')} kB")
print(f"VmHWM before the no-ops {before} kB, over them {max(peaks, default=0)} kB, cpu {cpu(p.pid):.1f}s")
if tracer:
    p.send_signal(signal.SIGTERM); p.wait(); tracer.wait()
else:
    p.send_signal(signal.SIGKILL); p.wait()
