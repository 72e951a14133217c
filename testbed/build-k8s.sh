#!/usr/bin/env bash
# Builds one Kubernetes control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler) from its Go modules, into $CACHE/k8s-<version>-<build>, and etcd (one
# for every version) into $CACHE/etcd-<version>-<build>.
#
#   testbed/build-k8s.sh 1.37      (or 1.34: the versions testbed/versions.env names)
#
# No Kubernetes binary can be downloaded here, but Kubernetes is a Go module. Its own go.mod
# replaces every staging module (k8s.io/api, k8s.io/apiserver, ...) with a directory of its
# tree, which `go install k8s.io/kubernetes/...@v` refuses; so a scratch module requires
# k8s.io/kubernetes at that version and replaces each staging module that go.mod names with
# the published v0.<minor>.<patch> of the same release. The list is read from that version's
# go.mod, never written by hand: it changes from release to release.
#
# etcd comes from go.etcd.io/etcd/server/v3's etcdmain, in a module of its own (its
# dependencies need not agree with Kubernetes').
#
# Cached per version and build number: a second run builds nothing.
set -euo pipefail

TESTBED="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=testbed/versions.env
. "$TESTBED/versions.env"
LANE="${1:?usage: build-k8s.sh 1.37|1.34}"
k8s_lane "$LANE"   # sets K8S_VERSION and K8S_BIN

CACHE="${DRIFTLESS_CACHE:-$HOME/.cache/driftless}"
log() { printf '[install] %s\n' "$*" >&2; }

# One build at a time (scripts/demo and scripts/test may both start one; etcd is shared).
mkdir -p "$CACHE"
exec 9>"$CACHE/.build-k8s.lock"
flock 9

bins=(kube-apiserver kube-controller-manager kube-scheduler)
have_all() {
  local b
  for b in "${bins[@]}"; do [ -x "$K8S_BIN/$b" ] || return 1; done
  [ -x "$ETCD_BIN" ]
}
if have_all; then
  log "Kubernetes $K8S_VERSION and etcd $ETCD_VERSION cached in $K8S_BIN"
  exit 0
fi

command -v go >/dev/null || { log "error: go is missing (Go $GO_MIN or newer builds Kubernetes $K8S_VERSION)"; exit 1; }

WORK="$CACHE/build/k8s-$K8S_VERSION-$K8S_BUILD"
rm -rf "$WORK"
mkdir -p "$WORK/kube" "$WORK/etcd" "$WORK/out"
# A Go build cache of the project's own, shared by both versions (they share most
# dependencies): kept, so a rebuild after a K8S_BUILD bump is quick.
export GOCACHE="$CACHE/gocache"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
# Go's own toolchain switch stays off: go.mod's `go` line is read, never a download.
export GOTOOLCHAIN=local

build_kube() {
  local minor=${K8S_VERSION#v1.}
  local staging_version="v0.$minor" gomod go_line godebug_line staging ldflags m
  log "reading k8s.io/kubernetes@$K8S_VERSION's go.mod from the Go module proxy"
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  [ -f "$gomod" ] || { log "error: no go.mod for k8s.io/kubernetes@$K8S_VERSION"; exit 1; }

  # The staging modules: those its go.mod replaces with ./staging/src/<path>.
  mapfile -t staging < <(sed -nE 's#^[[:space:]]*(k8s\.io/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/src/k8s\.io/.*#\1#p' "$gomod" | sort -u)
  [ "${#staging[@]}" -gt 10 ] || { log "error: found ${#staging[@]} staging modules in $gomod; its layout changed"; exit 1; }
  go_line=$(grep -m1 -E '^go [0-9]' "$gomod")
  godebug_line=$(grep -m1 -E '^godebug ' "$gomod" || true)
  {
    echo "module driftless.local/k8s-build"
    echo
    echo "$go_line"
    [ -z "$godebug_line" ] || { echo; echo "$godebug_line"; }
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    echo ")"
  } >"$WORK/kube/go.mod"
  # The packages to build are main packages of another module: a blank import of a
  # package of it keeps the requirement, and `go build` names the commands themselves.
  printf '%s\n' '// Package build only pins k8s.io/kubernetes in this module'"'"'s requirements.' \
    'package build' '' 'import _ "k8s.io/kubernetes/pkg/kubelet/types"' >"$WORK/kube/deps.go"

  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION from Go modules (${#staging[@]} staging modules at $staging_version; about 15 minutes on 2 cores the first time)"
  (
    cd "$WORK/kube"
    go mod tidy >"$WORK/tidy.log" 2>&1 || { tail -n 30 "$WORK/tidy.log" >&2; exit 1; }
    go build -trimpath -ldflags "$ldflags" -o "$WORK/out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
      >"$WORK/build.log" 2>&1 || { tail -n 40 "$WORK/build.log" >&2; exit 1; }
  )
  mkdir -p "$K8S_BIN"
  local b
  for b in "${bins[@]}"; do install -m 0755 "$WORK/out/$b" "$K8S_BIN/$b"; done
  "$K8S_BIN/kube-apiserver" --version >&2
}

build_etcd() {
  log "building etcd $ETCD_VERSION from go.etcd.io/etcd/server/v3's etcdmain (about 2 minutes)"
  printf '%s\n' 'module driftless.local/etcd-build' '' 'go 1.25.0' '' "require go.etcd.io/etcd/server/v3 $ETCD_VERSION" >"$WORK/etcd/go.mod"
  printf '%s\n' 'package main' '' 'import (' '	"os"' '' '	"go.etcd.io/etcd/server/v3/etcdmain"' ')' '' \
    'func main() { etcdmain.Main(os.Args) }' >"$WORK/etcd/main.go"
  (
    cd "$WORK/etcd"
    go mod tidy >"$WORK/etcd-tidy.log" 2>&1 || { tail -n 30 "$WORK/etcd-tidy.log" >&2; exit 1; }
    go build -trimpath -ldflags "-s -w" -o "$WORK/out/etcd" . >"$WORK/etcd-build.log" 2>&1 || { tail -n 40 "$WORK/etcd-build.log" >&2; exit 1; }
  )
  mkdir -p "$(dirname "$ETCD_BIN")"
  install -m 0755 "$WORK/out/etcd" "$ETCD_BIN"
}

if [ -x "$K8S_BIN/kube-apiserver" ] && [ -x "$K8S_BIN/kube-controller-manager" ] && [ -x "$K8S_BIN/kube-scheduler" ]; then
  log "Kubernetes $K8S_VERSION cached in $K8S_BIN"
else
  build_kube
fi
if [ -x "$ETCD_BIN" ]; then
  log "etcd $ETCD_VERSION cached in $ETCD_BIN"
else
  build_etcd
fi
rm -rf "$WORK"
log "installed into $K8S_BIN and $(dirname "$ETCD_BIN")"
