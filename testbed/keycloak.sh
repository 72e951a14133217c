#!/usr/bin/env bash
# Installs Keycloak, the OpenID Connect provider the tests run on loopback
# (tests/support/keycloak.rs, with the realms of tests/fixtures/keycloak), under
# $DRIFTLESS_CACHE/keycloak-$KEYCLOAK_VERSION (default ~/.cache/driftless/keycloak-26.5.6):
#
#   - the Quarkus distribution's release zip, from Maven Central, checked against its pinned
#     size, sha1 (Maven Central's own) and sha256; unpacked with python3's zipfile (a fresh
#     Debian has no unzip), the executable bits of bin/*.sh kept.
#   - a Java: Debian's OpenJDK 17 (openjdk-17-jre-headless, installed with apt when missing).
#     Keycloak 26.5 runs on 17, 21 and 25 alike (its "supported configurations" guide); 17 is
#     the one a fresh bookworm has a package of. Its JAVA_HOME goes in driftless-java-home.
#   - Keycloak's build, done once here: the tests start it in development mode (`start-dev`)
#     with the build options in driftless-build, and a start whose build is not the one
#     persisted re-augments first (10 s more, and a write into this shared directory by
#     every test process). `kc.sh build` cannot build for development mode, so one
#     `start-dev` with those options is run to readiness here, as a test runs it (a
#     temporary home and data directory of its own, loopback only), and stopped.
#
#   testbed/keycloak.sh          install (idempotent: nothing when in place)
#   testbed/keycloak.sh --home   print the install's directory (testbed/cluster.sh's env
#                                file exports it as DRIFTLESS_TEST_KEYCLOAK)
#
# testbed/install.sh runs this on every invocation (not with --demo); it also runs alone.
set -euo pipefail

CACHE="${DRIFTLESS_CACHE:-$HOME/.cache/driftless}"
KEYCLOAK_VERSION=26.5.6
KEYCLOAK_URL="https://repo1.maven.org/maven2/org/keycloak/keycloak-quarkus-dist/$KEYCLOAK_VERSION/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip"
KEYCLOAK_SIZE=164620457
KEYCLOAK_SHA1=756c15bb71be020dd4a43a6fdb3c1340cb84d4b5
KEYCLOAK_SHA256=490189d9dff05272432d51f71a069462eeca97f2920a694d539a1e6c26a5a347
KC_HOME="$CACHE/keycloak-$KEYCLOAK_VERSION"
# The build options of every start (tests/support/keycloak.rs reads them from
# driftless-build, one a line): the database in memory (each start imports the realms
# afresh; nothing on disk to share or clean), and the health checks on the management port
# (readiness).
BUILD_OPTIONS=(--db=dev-mem --health-enabled=true)
JAVA_PKG=openjdk-17-jre-headless
JAVA_SPEC=17

case "${1:-}" in
  --home) echo "$KC_HOME"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--home]" >&2; exit 2 ;;
esac

log() { printf '[keycloak] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

work_dirs=()
kc_pid=""
cleanup() {
  # A start still running (this script failed or was interrupted): its whole group.
  if [ -n "$kc_pid" ]; then kill -KILL -- "-$kc_pid" 2>/dev/null || true; fi
  if [ "${#work_dirs[@]}" -gt 0 ]; then rm -rf "${work_dirs[@]}"; fi
}
trap cleanup EXIT

# free_port: a loopback port below the kernel's ephemeral range, free a moment ago.
# shellcheck source=testbed/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# The release, unpacked into $KC_HOME, unless bin/kc.sh is there already.
install_dist() {
  if [ -x "$KC_HOME/bin/kc.sh" ]; then
    log "keycloak $KEYCLOAK_VERSION: unpacked in $KC_HOME"
    return 0
  fi
  command -v curl >/dev/null || die "curl missing: run testbed/install.sh (it installs it)"
  mkdir -p "$CACHE"
  local dir got
  dir=$(mktemp -d "$CACHE/.keycloak-fetch.XXXXXX")
  work_dirs+=("$dir")
  log "downloading keycloak-quarkus-dist $KEYCLOAK_VERSION ($((KEYCLOAK_SIZE / 1000000)) MB) from Maven Central"
  curl -fsSL --retry 3 -o "$dir/dist.zip" "$KEYCLOAK_URL" || die "downloading $KEYCLOAK_URL failed"
  got=$(stat -c %s "$dir/dist.zip")
  [ "$got" = "$KEYCLOAK_SIZE" ] || die "$KEYCLOAK_URL: $got bytes, pinned $KEYCLOAK_SIZE"
  got=$(sha1sum "$dir/dist.zip" | cut -d' ' -f1)
  [ "$got" = "$KEYCLOAK_SHA1" ] || die "$KEYCLOAK_URL: sha1 $got, pinned $KEYCLOAK_SHA1"
  got=$(sha256sum "$dir/dist.zip" | cut -d' ' -f1)
  [ "$got" = "$KEYCLOAK_SHA256" ] || die "$KEYCLOAK_URL: sha256 $got, pinned $KEYCLOAK_SHA256"
  # zipfile keeps no permissions: each file's are set again from the zip's Unix mode.
  python3 - "$dir/dist.zip" "$dir/out" <<'PY' || die "unpacking the Keycloak zip failed"
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
PY
  [ -x "$dir/out/keycloak-$KEYCLOAK_VERSION/bin/kc.sh" ] \
    || die "the zip has no executable keycloak-$KEYCLOAK_VERSION/bin/kc.sh"
  rm -f "$dir/dist.zip"
  # Whatever an interrupted run left there (no bin/kc.sh) goes; the new tree takes its
  # place with one rename, within the cache's filesystem.
  rm -rf "$KC_HOME"
  mv "$dir/out/keycloak-$KEYCLOAK_VERSION" "$KC_HOME"
  log "unpacked into $KC_HOME"
}

# Debian's OpenJDK 17, installed when missing; prints its JAVA_HOME.
java_home() {
  local home
  home="/usr/lib/jvm/java-$JAVA_SPEC-openjdk-$(dpkg --print-architecture)"
  if [ ! -x "$home/bin/java" ]; then
    log "apt-get install $JAVA_PKG (Keycloak's Java)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$JAVA_PKG" >/dev/null
  fi
  [ -x "$home/bin/java" ] || die "$JAVA_PKG installed no $home/bin/java"
  local spec
  spec=$("$home/bin/java" -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2}')
  [ "$spec" = "$JAVA_SPEC" ] || die "$home/bin/java is Java ${spec:-(unknown)}, not $JAVA_SPEC"
  echo "$home"
}

# The build: one start-dev with BUILD_OPTIONS, as tests/support/keycloak.rs starts it, to
# readiness, then stopped. Skipped when driftless-build says it was done with these options
# and this Java.
build() {
  local java=$1 stamp
  stamp=$(printf '%s\n' "${BUILD_OPTIONS[@]}")
  if [ "$(cat "$KC_HOME/driftless-build" 2>/dev/null || true)" = "$stamp" ] \
    && [ "$(cat "$KC_HOME/driftless-java-home" 2>/dev/null || true)" = "$java" ]; then
    log "keycloak $KEYCLOAK_VERSION: built for start-dev ${BUILD_OPTIONS[*]}, Java in $java"
    return 0
  fi
  rm -f "$KC_HOME/driftless-build" "$KC_HOME/driftless-java-home"

  local run port management
  run=$(mktemp -d "${TMPDIR:-/tmp}/driftless-keycloak-build.XXXXXX")
  work_dirs+=("$run")
  # A home of its own: the install's conf, lib, providers and themes, and a data directory
  # (transaction logs, caches) that is not the install's.
  mkdir -p "$run/home/data"
  local d
  for d in conf lib providers themes; do ln -s "$KC_HOME/$d" "$run/home/$d"; done
  # Names from a hosts file of its own: no lookup reaches the machine's resolver (it asks
  # for the reverse name of the machine's addresses at startup otherwise).
  printf '127.0.0.1 localhost %s\n::1 localhost\n' "$(cat /proc/sys/kernel/hostname)" >"$run/hosts"
  port=$(free_port)
  management=$(free_port)
  while [ "$management" = "$port" ]; do management=$(free_port); done

  log "building: kc.sh start-dev ${BUILD_OPTIONS[*]} with Java in $java, once (half a minute)"
  local started=$SECONDS
  env -u JAVA_OPTS -u JAVA_OPTS_APPEND -u JAVA_TOOL_OPTIONS -u JDK_JAVA_OPTIONS JAVA_HOME="$java" \
    setsid "$KC_HOME/bin/kc.sh" start-dev \
    "-Dkc.home.dir=$run/home" "-Djdk.net.hosts.file=$run/hosts" \
    "${BUILD_OPTIONS[@]}" \
    --http-host=127.0.0.1 "--http-port=$port" "--http-management-port=$management" \
    >"$run/keycloak.log" 2>&1 </dev/null &
  kc_pid=$!
  local ready=0
  for _ in $(seq 3000); do
    if curl -fs -o /dev/null "http://127.0.0.1:$management/health/ready"; then ready=1; break; fi
    kill -0 "$kc_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM -- "-$kc_pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$kc_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$kc_pid" 2>/dev/null || true
  wait "$kc_pid" 2>/dev/null || true
  kc_pid=""
  if [ "$ready" -ne 1 ]; then
    tail -n 40 "$run/keycloak.log" >&2 || true
    die "Keycloak did not become ready (its log's end above)"
  fi
  log "built and served in $((SECONDS - started)) s"
  printf '%s\n' "${BUILD_OPTIONS[@]}" >"$KC_HOME/driftless-build"
  # Last: the tests take an install with this file for a finished one.
  echo "$java" >"$KC_HOME/driftless-java-home"
}

install_dist
JAVA_HOME_DIR=$(java_home)
build "$JAVA_HOME_DIR"
