# syntax=docker/dockerfile:1
# flashserve: OpenAI-compatible HTTP + gRPC LLM server, CUDA 13 on Ubuntu 24.04.
#
#   docker build -t flashserve .
#   docker run --gpus all -p 8000:8000 -p 50051:50051 -v /path/to/models:/models:ro flashserve
#
# Extra flags go after the image name (they are appended to the ENTRYPOINT), e.g.
#   docker run ... flashserve --served-model-name smollm2 --api-key "$KEY"
# or pass the key as -e FLASHSERVE_API_KEY=... . The model is always /models/model.gguf: mount
# the file under that name (e.g. -v /path/SmolLM2.gguf:/models/model.gguf:ro), or override
# --entrypoint to serve another path.

ARG CUDA_VERSION=13.0.0
ARG UBUNTU_VERSION=24.04

# ---------------------------------------------------------------------------------------------
# Build stage: the packages scripts/setup.sh installs, then scripts/build.sh.
# ---------------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS build

# Same apt list as scripts/setup.sh, less what only the test suite, the benchmarks and the
# model fetch need (libgtest-dev, libbenchmark-dev, prometheus, python3-pip/-venv, unzip):
# the image builds with tests and benchmarks off.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ninja-build python3 \
      libpcre2-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libxxhash-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libcpp-httplib-dev prometheus-cpp-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .

# sm_90 (H100/H200) by default; e.g. --build-arg FLASHSERVE_CUDA_ARCHS="80;90;100" for more GPUs.
ARG FLASHSERVE_CUDA_ARCHS=90
# The CPU kernels are built for every x86-64 level and chosen at start-up: no -march of this machine.
RUN FLASHSERVE_BUILD_DIR=/src/build ./scripts/build.sh \
      -DFLASHSERVE_BUILD_TESTS=OFF -DFLASHSERVE_BUILD_BENCH=OFF \
      -DFLASHSERVE_CUDA_ARCHS="${FLASHSERVE_CUDA_ARCHS}" \
 && install -D -m 0755 build/server/flashserve /out/usr/local/bin/flashserve

# The Ubuntu packages that own the shared libraries the binary loads (libspdlog, libgrpc++,
# libprotobuf, prometheus-cpp, ...): the runtime stage installs exactly these, so this list
# never drifts from what the build linked. CUDA libraries come with the runtime base image.
RUN ldd /out/usr/local/bin/flashserve \
  | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' \
  | while read -r lib; do \
      real="$(realpath "$lib")"; \
      dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true; \
    done \
  | cut -d: -f1 | sort -u \
  | grep -Ev '^(cuda-|libcuda|libnv|libcublas|libc6$|libgcc-s1$|libstdc\+\+6$)' > /out/runtime-packages.txt \
 && echo "runtime packages:" && cat /out/runtime-packages.txt

# ---------------------------------------------------------------------------------------------
# Runtime stage: CUDA runtime, the shared libraries above, curl for the health check.
# ---------------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION} AS runtime

COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl $(cat /tmp/runtime-packages.txt) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt

COPY --from=build /out/usr/local/bin/flashserve /usr/local/bin/flashserve

# Unprivileged user with a fixed uid (for runAsUser / fsGroup in Kubernetes).
RUN groupadd --system --gid 10001 flashserve \
 && useradd --system --uid 10001 --gid flashserve --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin flashserve \
 && mkdir -p /models && chown flashserve:flashserve /models
USER 10001:10001

# The GGUF model is mounted here (read-only is enough): /models/model.gguf.
VOLUME ["/models"]

# 8000: HTTP (OpenAI API, /health, /ready, /metrics). 50051: gRPC.
EXPOSE 8000 50051

# /health answers as soon as the process serves HTTP; /ready (model loaded, not draining) is
# for load balancers and Kubernetes readiness, not for restarting the container.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8000/health > /dev/null || exit 1

# SIGTERM drains in-flight requests for --grace-period seconds (default 30), then exits 0:
# give `docker stop -t` more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["flashserve", "serve", "--host", "0.0.0.0", "--port", "8000", "--grpc-port", "50051", \
            "--model", "/models/model.gguf"]
