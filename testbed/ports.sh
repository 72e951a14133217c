# shellcheck shell=bash
# Sourced by testbed/cluster.sh and testbed/keycloak.sh.
#
# Drawn below the kernel's ephemeral range: a port the kernel picks itself (bind to 0) is
# what it also gives outgoing connections, which may take it before the server binds.
free_port() {
  python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port)); print(port); break
    except OSError:
        pass
    finally:
        s.close()
else:
    raise SystemExit("no free loopback port below the ephemeral range")'
}
