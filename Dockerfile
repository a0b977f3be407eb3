# syntax=docker/dockerfile:1
#
# gpujoind container image: gpujoind (server), gpujoin (CLI) and
# gpujoin-loadtest, built with the CUDA backend.
#
#   docker build -t gpujoin:latest .
#   docker run --rm --gpus all -p 127.0.0.1:50051:50051 -p 127.0.0.1:9464:9464 gpujoin:latest
#
# or through deploy/docker-compose.yml (docs/operations.md). The build stage
# runs scripts/build, the developers' build command, so the image has the same
# CMake options (Ninja, RelWithDebInfo, build dir "build") and the same
# binaries (build/bin/gpujoind, build/bin/gpujoin-router, build/bin/gpujoin, build/bin/gpujoin-loadtest)
# as a local build. The runtime stage has only the shared libraries those
# binaries load (found by deploy/docker/runtime-packages.sh) and runs as a
# non-root user. The CUDA runtime is linked statically; the NVIDIA container
# toolkit injects the driver (libcuda) at run time.

ARG CUDA_VERSION=13.0.2
ARG UBUNTU_VERSION=24.04

# ------------------------------------------------------------------ build
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS build

# The distribution's packages, as scripts/install-deps installs them on Debian
# (gRPC 1.51, protobuf, Abseil 20220623, prometheus-cpp on Ubuntu 24.04).
# GoogleTest and Google Benchmark are needed because scripts/build builds
# every target, tests and benchmarks included, exactly as CI does.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev \
      nlohmann-json3-dev libsimdjson-dev zlib1g-dev libzstd-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .

# JOBS bounds the build's parallelism (scripts/build's default is nproc).
# -DGPUJOIN_CUDA=ON only turns the default AUTO detection (which finds
# /usr/local/cuda/bin/nvcc in this image) into a hard requirement, so an image
# without the CUDA backend can never be produced by accident.
ARG JOBS=
RUN JOBS="${JOBS:-$(nproc)}" BUILD_DIR=build scripts/build -DGPUJOIN_CUDA=ON \
 && for b in gpujoind gpujoin-router gpujoin gpujoin-loadtest; do \
      test -x "build/bin/$b" || { echo "missing build/bin/$b" >&2; exit 1; }; \
    done \
 && deploy/docker/runtime-packages.sh build/bin/gpujoind build/bin/gpujoin-router build/bin/gpujoin build/bin/gpujoin-loadtest \
      > /runtime-packages.txt \
 && cat /runtime-packages.txt

# ---------------------------------------------------------------- runtime
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION}

ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG CUDA_VERSION
ARG UBUNTU_VERSION
LABEL org.opencontainers.image.title="gpujoin" \
      org.opencontainers.image.description="gpujoind: uint32 hash indexes resident in GPU memory, served over gRPC (lookups, inner joins, grouped aggregation, hashing), with Prometheus metrics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.documentation="docs/operations.md" \
      org.opencontainers.image.base.name="nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION}"

COPY --from=build /runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/runtime-packages.txt \
      apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 gpujoin \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gpujoin \
 && mkdir -p /var/lib/gpujoin && chown 10001:10001 /var/lib/gpujoin

COPY --from=build /src/build/bin/gpujoind /src/build/bin/gpujoin-router /src/build/bin/gpujoin /src/build/bin/gpujoin-loadtest \
     /usr/local/bin/

USER 10001:10001
WORKDIR /tmp

# gRPC API and Prometheus /metrics.
EXPOSE 50051 9464

# Index snapshots (--data-dir, docs/operations.md "Snapshots"): mount a volume
# here so that indexes survive a restart or an upgrade of the container.
VOLUME /var/lib/gpujoin

# The CLI's default server, so `docker exec <container> gpujoin info` works.
ENV GPUJOIN_SERVER=127.0.0.1:50051

# Readiness through the gRPC health service (grpc.health.v1), over loopback
# inside the container; the call's own deadline is below Docker's timeout.
# Without --tls-cert/--auth-token-file on the server; a deployment that
# enables them overrides the healthcheck (docs/operations.md).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["gpujoin", "--server", "127.0.0.1:50051", "--timeout", "3", "health"]

# gpujoind listens on loopback unless told otherwise, so the default command
# binds all interfaces of the container. A replacement command must repeat
# --listen and --metrics-listen.
ENTRYPOINT ["gpujoind"]
CMD ["--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9464", "--backend=auto", "--data-dir=/var/lib/gpujoin"]
