#!/usr/bin/env python3
"""The #47 sharding probe (not the harness): K replicas of one instance share a tree of N
specs (`run --shard`). Prints the time until the members together show every spec ready
(each member's last sync a success), each member's specs, RSS (sampled peak) and VmHWM,
the apiserver's own write counts (leases and events left out); then SIGKILLs the member
holding the most specs and prints how long the others took to show every spec ready
again, and the writes that took (0: the objects were as applied).

    bench/probe/gen-elasticweb.sh /tmp/s3000 3000 scale3k   # N files of one elasticweb each
    bench/probe/shards.py /tmp/s3000 3000 s3k 3             # three members
    bench/probe/shards.py /tmp/s3000 3000 s3k1 1            # one member, for comparison

DRV names the binary (default target/release/driftless); LEASE the members' lease
(default 15s). Work files go to /tmp/w.
"""
import json, os, re, signal, subprocess, sys, time

d, n, inst, k = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
drv = os.environ.get("DRV", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/driftless"))
lease = os.environ.get("LEASE", "15s")
os.makedirs("/tmp/w", exist_ok=True)


def kib(pid, field):
    return int(re.search(field + r":\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))


def writes():
    """(object writes, ConfigMap writes: the inventory, the holders' table, the members'
    parts of the status); Leases and Events left out."""
    out = subprocess.run(["kubectl", "get", "--raw", "/metrics"], capture_output=True, text=True).stdout
    objects, maps = 0.0, 0.0
    for line in out.splitlines():
        if line.startswith("apiserver_request_total{"):
            v = re.search(r'verb="([A-Z]+)"', line).group(1)
            r = re.search(r'resource="([a-z]+)"', line)
            if (r and r.group(1) in ("leases", "events")) or 'subresource="' in line and 'subresource=""' not in line:
                continue
            if v in ("POST", "PATCH", "PUT", "DELETE", "APPLY"):
                if r and r.group(1) == "configmaps":
                    maps += float(line.rsplit(" ", 1)[1])
                else:
                    objects += float(line.rsplit(" ", 1)[1])
    return int(objects), int(maps)


def since(a, b):
    return f"{b[0] - a[0]} object writes, {b[1] - a[1]} ConfigMap writes"


def own(s, i):
    """The specs member i's status says it holds (all of them before statuses named the
    member)."""
    specs = (s or {}).get("specs", [])
    return [x for x in specs if x.get("member", f"m{i}") == f"m{i}"]


def status(i):
    try:
        return json.load(open(f"/tmp/w/status-{inst}-{i}.json"))
    except Exception:
        return None


def ready_specs(alive):
    """Spec ids shown ready by live members whose last sync succeeded."""
    out = set()
    for i in alive:
        s = status(i)
        if not s or (s.get("last_sync") or {}).get("result") != "success":
            continue
        out |= {x["id"] for x in s.get("specs", []) if x.get("ready")}
    return out


def wait(alive, procs, peak, label, t0):
    while True:
        for i in alive:
            try:
                peak[i] = max(peak[i], kib(procs[i].pid, "VmRSS"))
            except Exception:
                pass
        got = ready_specs(alive)
        if len(got) >= n:
            el = time.time() - t0
            print(f"{label}: every spec ready after {el:.1f} s", flush=True)
            return el
        if time.time() - t0 > 3600:
            sys.exit(f"{label}: timed out with {len(got)} of {n} ready")
        time.sleep(1)


w0 = writes()
t0 = time.time()
procs, peak = {}, {}
for i in range(k):
    st = f"/tmp/w/status-{inst}-{i}.json"
    if os.path.exists(st):
        os.remove(st)
    log = open(f"/tmp/w/shard-{inst}-{i}.log", "w")
    procs[i] = subprocess.Popen([drv, "run", "--dir", d, "--instance", inst, "--status-file", st,
                                 "--metrics-addr", "127.0.0.1:0", "--cache-dir", f"/tmp/w/cache-{inst}-{i}",
                                 "--shard", "--shard-identity", f"m{i}", "--shard-lease", lease],
                                stdout=log, stderr=log)
    peak[i] = 0
first = wait(list(range(k)), procs, peak, "first sync", t0)
time.sleep(5)
w1 = writes()
for i in range(k):
    s = status(i) or {}
    print(f"member m{i}: {len(own(s, i))} specs of {len(s.get('specs', []))} shown, {len((s.get('shard') or {}).get('buckets', []))} buckets, "
          f"RSS peak {peak[i] / 1024:.0f} MiB, VmHWM {kib(procs[i].pid, 'VmHWM') / 1024:.0f} MiB", flush=True)
print(f"writes during the first sync: {since(w0, w1)}", flush=True)
if k > 1:
    victim = max(range(k), key=lambda i: len(own(status(i), i)))
    held = len(own(status(victim), victim))
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    alive = [i for i in range(k) if i != victim]
    t1 = time.time()
    # Until the survivors hold the victim's buckets: its status file stays as it was.
    while any(len((status(i) or {}).get("shard", {}).get("members", [])) != len(alive) for i in alive):
        time.sleep(0.5)
    wait(alive, procs, peak, f"m{victim} ({held} specs) killed; taken over", t1)
    time.sleep(5)
    print(f"writes during the takeover: {since(w1, writes())}", flush=True)
for p in procs.values():
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
for p in procs.values():
    p.wait()
