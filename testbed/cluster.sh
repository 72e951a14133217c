#!/usr/bin/env bash
# The local Kubernetes control plane for driftless's tests and demo:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, all on loopback with
# free ports, plus `driftless-testbed` (fake Nodes, kubelet and volume-provisioner
# stand-ins).
#
#   testbed/cluster.sh up      boot it; prints the env file to source
#   testbed/cluster.sh down    stop every process it started (by PID) and clean up
#   testbed/cluster.sh status  say whether it is up
#   testbed/cluster.sh env     print the env file's path
#   testbed/cluster.sh kill NAME      SIGKILL one component (etcd, kube-apiserver, ...)
#   testbed/cluster.sh restart NAME   start it again as it was, and wait until it serves
#
# kill/restart are for the fault-injection tests (tests/faults.rs).
#
# The Kubernetes version is a lane of testbed/versions.env: 1.37 by default,
# DRIFTLESS_K8S=1.34 for the other. Each lane has state of its own, so both can run at
# once: $DRIFTLESS_TESTBED_DIR when set, else <repo>/.testbed (1.37) or <repo>/.testbed-1.34.
# Binaries come from testbed/install.sh (testbed/build-k8s.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DRIFTLESS_CACHE:-$HOME/.cache/driftless}"
# shellcheck source=testbed/versions.env
. "$ROOT/testbed/versions.env"
k8s_lane "${DRIFTLESS_K8S:-$K8S_DEFAULT_LANE}" || exit 2
if [ "$K8S_LANE" = "$K8S_DEFAULT_LANE" ]; then
  STATE="${DRIFTLESS_TESTBED_DIR:-$ROOT/.testbed}"
else
  STATE="${DRIFTLESS_TESTBED_DIR:-$ROOT/.testbed-$K8S_LANE}"
fi
NODES="${DRIFTLESS_TESTBED_NODES:-3}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# free_port: a loopback port below the kernel's ephemeral range.
# shellcheck source=testbed/ports.sh
source "$ROOT/testbed/ports.sh"

# The addresses the fake cluster hands out, none of them anyone's: Services' ClusterIPs
# (the apiserver's --service-cluster-ip-range), fake Nodes' InternalIPs and fake Pods' IPs
# (driftless-testbed). An admission webhook's or an APIService's Service, a Pod IP in an
# Endpoints: the apiserver dials them as a real one would, and without a route of their
# own that traffic would take this machine's default route out.
SERVICE_RANGE=10.96.0.0/16
NODE_RANGE=10.127.0.0/16
POD_RANGE=10.128.0.0/16

# Routes the ranges above to nowhere (a blackhole answers at once, so the apiserver's
# dial fails fast instead of timing out), refusing a range that holds this machine's
# resolver or gateway. The routes stay after `down`: they name only these ranges.
route_nowhere() {
  local range
  for range in "$SERVICE_RANGE" "$NODE_RANGE" "$POD_RANGE"; do
    local used
    used=$( { awk '/^nameserver/ {print $2}' /etc/resolv.conf 2>/dev/null; ip route show default 2>/dev/null | awk '{print $3}'; } |
      python3 -c 'import ipaddress,sys; net=ipaddress.ip_network(sys.argv[1]); print(" ".join(a for a in sys.stdin.read().split() if ipaddress.ip_address(a) in net))' "$range" 2>/dev/null || true)
    [ -z "$used" ] || die "cannot route $range to nowhere: this machine uses $used in it"
    ip route replace blackhole "$range" 2>/dev/null \
      || die "cannot route $range to nowhere (ip route replace blackhole $range): the fake cluster would dial out; run as root with iproute2"
  done
}

# Start a process in the background, in its own process group, and record its PID.
# Without proxy variables: the control plane dials Services and Pods directly (to
# loopback or to nowhere), never through a proxy off this machine.
start() {
  local name=$1; shift
  log "starting $name"
  mkdir -p "$STATE/cmds"
  # Kept so `restart` can start it again exactly as it was.
  printf '%q ' "$@" >"$STATE/cmds/$name"
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u all_proxy -u ALL_PROXY \
    -u no_proxy -u NO_PROXY setsid "$@" >>"$STATE/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$STATE/pids/$name.pid"
}

alive() { [ -f "$STATE/pids/$1.pid" ] && kill -0 "$(cat "$STATE/pids/$1.pid")" 2>/dev/null; }

stop_one() {
  local f=$1 pid name
  name=$(basename "$f" .pid)
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    # setsid made each process a group leader: signal the group so children go too.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name ($pid) ignored SIGTERM; killing"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$f"
}

down() {
  [ -d "$STATE/pids" ] || { log "not running"; return 0; }
  # Reverse start order: clients before the apiserver, etcd last. The first, when there:
  # the driftless daemon scripts/demo left running on this cluster (pids/driftless.pid).
  local n
  for n in driftless testbed kube-scheduler kube-controller-manager kube-apiserver etcd; do
    [ -f "$STATE/pids/$n.pid" ] && stop_one "$STATE/pids/$n.pid"
  done
  local f
  for f in "$STATE"/pids/*.pid; do [ -e "$f" ] && stop_one "$f"; done
  if [ -f "$STATE/etcd-data-dir" ]; then
    rm -rf "$(cat "$STATE/etcd-data-dir")"
  fi
  rm -rf "$STATE"
  log "stopped"
}

wait_for() {
  local what=$1 tries=$2; shift 2
  for _ in $(seq "$tries"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$what did not come up; see $STATE/logs/"
}

up() {
  if [ -d "$STATE/pids" ] && alive kube-apiserver; then
    log "already up"
    echo "$STATE/env"
    return 0
  fi
  [ -d "$STATE" ] && down
  for b in "$ETCD_BIN" "$K8S_BIN/kube-apiserver" "$K8S_BIN/kube-controller-manager" "$K8S_BIN/kube-scheduler"; do
    [ -x "$b" ] || die "$b missing: run testbed/install.sh (or testbed/build-k8s.sh $K8S_LANE)"
  done

  mkdir -p "$STATE"/{pids,logs,certs,pv}
  rm -f "$STATE"/logs/*.log
  trap 'log "boot failed; stopping what started"; down' ERR
  route_nowhere

  # Build the stand-in first: with a cold target dir this is the slow part, and the
  # control plane should not sit idle meanwhile.
  log "building driftless-testbed"
  (cd "$ROOT" && cargo build -q -p driftless-testbed) || die "cargo build -p driftless-testbed failed"

  local etcd_port peer_port api_port token etcd_dir
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

  # A throwaway cluster: tmpfs, and no fsync.
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    etcd_dir=$(mktemp -d /dev/shm/driftless-etcd.XXXXXX)
  else
    etcd_dir="$STATE/etcd"
  fi
  echo "$etcd_dir" >"$STATE/etcd-data-dir"
  start etcd "$ETCD_BIN" --name default --data-dir "$etcd_dir" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "default=http://127.0.0.1:$peer_port" \
    --quota-backend-bytes 4294967296 --unsafe-no-fsync --log-level warn
  wait_for etcd 100 curl -sf "http://127.0.0.1:$etcd_port/health"

  openssl genrsa -out "$STATE/certs/sa.key" 2048 2>/dev/null
  printf '%s,admin,admin,"system:masters"\n' "$token" >"$STATE/certs/tokens.csv"

  # Mutating admission policies are GA (on by default) in 1.36; on 1.34 they are beta and
  # off, so the lane turns the gate and the API version on, as a provider that offers
  # them would.
  local extra=()
  case "$K8S_LANE" in
    1.34) extra+=(--feature-gates MutatingAdmissionPolicy=true --runtime-config admissionregistration.k8s.io/v1beta1=true) ;;
  esac
  start kube-apiserver "$K8S_BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$STATE/certs" \
    --token-auth-file "$STATE/certs/tokens.csv" \
    --authorization-mode RBAC \
    --service-account-key-file "$STATE/certs/sa.key" \
    --service-account-signing-key-file "$STATE/certs/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range "$SERVICE_RANGE" \
    --disable-admission-plugins ServiceAccount \
    --endpoint-reconciler-type none \
    --allow-privileged=true \
    "${extra[@]}" \
    --v 1
  # The apiserver writes its self-signed serving cert + CA on start.
  wait_for "kube-apiserver" 300 curl -sfk -H "Authorization: Bearer $token" "https://127.0.0.1:$api_port/readyz"
  printf 'etcd_port=%s\napi_port=%s\ntoken=%s\n' "$etcd_port" "$api_port" "$token" >"$STATE/ports"

  local ca_data
  ca_data=$(base64 -w0 <"$STATE/certs/apiserver.crt")
  cat >"$STATE/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: driftless-testbed
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $ca_data
users:
- name: admin
  user:
    token: $token
contexts:
- name: driftless-testbed
  context:
    cluster: driftless-testbed
    user: admin
current-context: driftless-testbed
KC
  chmod 600 "$STATE/kubeconfig"

  start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig "$STATE/kubeconfig" \
    --controllers '*,-node-lifecycle-controller' --leader-elect=false --secure-port=0 \
    --service-account-private-key-file "$STATE/certs/sa.key" \
    --root-ca-file "$STATE/certs/apiserver.crt" \
    --concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 \
    --concurrent-endpoint-syncs 10 --concurrent-service-endpoint-syncs 10 \
    --kube-api-qps 500 --kube-api-burst 1000 \
    --v 1
  start kube-scheduler "$K8S_BIN/kube-scheduler" \
    --kubeconfig "$STATE/kubeconfig" --leader-elect=false --secure-port=0 \
    --kube-api-qps 500 --kube-api-burst 1000 \
    --v 1

  start testbed env RUST_LOG="${RUST_LOG:-info}" "$TARGET_DIR/debug/driftless-testbed" \
    --kubeconfig "$STATE/kubeconfig" --nodes "$NODES" --pv-dir "$STATE/pv" \
    --ready-file "$STATE/testbed.ready"
  wait_for "driftless-testbed (fake nodes)" 300 test -f "$STATE/testbed.ready"

  # The rendering tools testbed/tools.sh installs (testbed/tools.env names their paths):
  # the tests need them, the demo does not (install.sh --demo installs none).
  # shellcheck source=testbed/tools.env
  . "$ROOT/testbed/tools.env"
  local tool missing=()
  for tool in "$KUBECTL_V35" "$KUBECTL_V30" "$HELM4" "$HELM3" "$BITNAMI_CHARTS/mariadb/Chart.yaml" \
    "$ARGOCD_OLD/install.yaml" "$ARGOCD_NEW/install.yaml"; do
    [ -e "$tool" ] || missing+=("${tool#"$TOOLS_DIR"/}")
  done
  [ "${#missing[@]}" -eq 0 ] \
    || log "note: the tests' rendering tools are not installed (${missing[*]} in $TOOLS_DIR): testbed/install.sh installs them"
  # Keycloak, the tests' OpenID Connect provider (testbed/keycloak.sh installs and builds it).
  local keycloak
  keycloak=$("$ROOT/testbed/keycloak.sh" --home)
  [ -f "$keycloak/driftless-java-home" ] \
    || log "note: Keycloak is not installed in $keycloak: testbed/keycloak.sh (testbed/install.sh runs it) installs it"
  cat >"$STATE/env" <<ENVF
export KUBECONFIG=$STATE/kubeconfig
export DRIFTLESS_TEST_KUBECONFIG=$STATE/kubeconfig
export DRIFTLESS_TESTBED_DIR=$STATE
# Kubernetes $K8S_VERSION (lane $K8S_LANE); the pinned kubectl $KUBECTL_V35_VERSION comes last on PATH,
# for a machine that has none of its own.
export DRIFTLESS_TEST_K8S=$K8S_VERSION
# Each lane's kube-apiserver (built or not): a fleet test boots a cluster of the other
# version beside this one (tests/support/apiserver.rs).
export DRIFTLESS_TEST_APISERVERS="$(for l in 1.37 1.34; do (k8s_lane "$l" && printf '%s=%s ' "$K8S_VERSION" "$K8S_BIN/kube-apiserver"); done)"
export PATH=\$PATH:$(dirname "$KUBECTL_V35")
# Rendering tools (testbed/tools.env): kubectl $KUBECTL_V35_VERSION and $KUBECTL_V30_VERSION, helm $HELM4_VERSION and $HELM3_VERSION.
export DRIFTLESS_TEST_KUBECTL_V35=$KUBECTL_V35
export DRIFTLESS_TEST_KUBECTL_V30=$KUBECTL_V30
export DRIFTLESS_TEST_HELM4=$HELM4
export DRIFTLESS_TEST_HELM3=$HELM3
# A real chart that calls lookup (bitnami's mariadb, and the common chart it depends on).
export DRIFTLESS_TEST_BITNAMI_CHARTS=$BITNAMI_CHARTS
# Argo CD's own install.yaml as released, at $ARGOCD_OLD_VERSION and $ARGOCD_NEW_VERSION: a bundle installed, upgraded, uninstalled.
export DRIFTLESS_TEST_ARGOCD_INSTALL_OLD=$ARGOCD_OLD/install.yaml
export DRIFTLESS_TEST_ARGOCD_INSTALL_NEW=$ARGOCD_NEW/install.yaml
# Keycloak (testbed/keycloak.sh): the OpenID Connect provider tests/support/keycloak.rs runs on loopback.
export DRIFTLESS_TEST_KEYCLOAK=$keycloak
# driftless runs \`kubectl kustomize DIR\` when this program's file name is kubectl.
export DRIFTLESS_KUSTOMIZE=$KUBECTL_V35
ENVF
  trap - ERR
  log "up: Kubernetes $K8S_VERSION, apiserver https://127.0.0.1:$api_port, $NODES fake nodes, logs in $STATE/logs"
  log "use it with: source $STATE/env"
  echo "$STATE/env"
}

status() {
  local n ok=0
  for n in etcd kube-apiserver kube-controller-manager kube-scheduler testbed; do
    if alive "$n"; then echo "$n: running (pid $(cat "$STATE/pids/$n.pid"))"; else echo "$n: down"; ok=1; fi
  done
  return $ok
}

kill_one() {
  local name=${1:?usage: kill NAME} pid
  [ -f "$STATE/pids/$name.pid" ] || die "no such component: $name"
  pid=$(cat "$STATE/pids/$name.pid")
  log "killing $name ($pid)"
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
  die "$name ($pid) survived SIGKILL"
}

restart_one() {
  local name=${1:?usage: restart NAME}
  [ -f "$STATE/cmds/$name" ] || die "no such component: $name"
  alive "$name" && die "$name is running; kill it first"
  # shellcheck disable=SC1091
  . "$STATE/ports"
  eval "start $name $(cat "$STATE/cmds/$name")"
  case "$name" in
    etcd) wait_for etcd 200 curl -sf "http://127.0.0.1:$etcd_port/health" ;;
    kube-apiserver)
      wait_for kube-apiserver 600 curl -sfk -H "Authorization: Bearer $token" "https://127.0.0.1:$api_port/readyz" ;;
  esac
  case "$name" in
    etcd|kube-apiserver)
      # /readyz says yes well before writes work again after an etcd restart (the
      # apiserver's etcd client and quota admission catch up in about a minute): wait
      # for a dry-run create, which goes through admission and storage.
      wait_for "writes through the apiserver" 1500 curl -sfk -m 5 -X POST \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        "https://127.0.0.1:$api_port/api/v1/namespaces?dryRun=All" \
        -d '{"metadata":{"name":"driftless-restart-probe"}}'
      ;;
  esac
  log "$name serving again"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) echo "$STATE/env" ;;
  kill) kill_one "${2:-}" ;;
  restart) restart_one "${2:-}" ;;
  *) echo "usage: $0 up|down|status|env|kill NAME|restart NAME" >&2; exit 2 ;;
esac
