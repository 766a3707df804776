# flashserve on Debian 12, the same packages as the development machines. One Dockerfile, two
# variants: `--build-arg VARIANT=cpu` (the default: CPU kernels for every x86-64 level, picked at
# start-up from the host's CPU) or `VARIANT=cuda` (also the CUDA backend, sm_90 by default).
# scripts/build_image.sh builds either, making the base images it needs; see deploy/README.md.
#
#   BASE          a Debian 12 image: debian:bookworm-slim when a registry answers, else the one
#                 scripts/build_image.sh makes with debootstrap (flashserve-base:bookworm)
#   CUDA_TOOLKIT  (cuda only) an image holding the CUDA Toolkit at /usr/local/cuda, which
#                 scripts/build_image.sh imports from the build machine's toolkit
ARG BASE=flashserve-base:bookworm
ARG CUDA_TOOLKIT=flashserve-cuda-toolkit:13.0
ARG VARIANT=cpu

# ---- the build: scripts/setup.sh's packages less what only tests, benchmarks and fuzzing use ----
FROM ${BASE} AS build-deps
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ninja-build python3 \
      libpcre2-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libxxhash-dev libssl-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libcpp-httplib-dev prometheus-cpp-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .

FROM build-deps AS build-cpu
RUN FLASHSERVE_BUILD_DIR=/build ./scripts/build.sh -DFLASHSERVE_BUILD_TESTS=OFF -DFLASHSERVE_BUILD_BENCH=OFF \
      -DFLASHSERVE_CUDA=OFF \
 && deploy/image/stage_binary.sh /out /build/server/flashserve /build/client/flashserve-bench

FROM ${CUDA_TOOLKIT} AS cuda-toolkit
FROM build-deps AS build-cuda
COPY --from=cuda-toolkit /usr/local/cuda /usr/local/cuda
# sm_90 (H100/H200) by default; e.g. --build-arg FLASHSERVE_CUDA_ARCHS="80;90" for more GPUs.
ARG FLASHSERVE_CUDA_ARCHS=90
RUN FLASHSERVE_BUILD_DIR=/build ./scripts/build.sh -DFLASHSERVE_BUILD_TESTS=OFF -DFLASHSERVE_BUILD_BENCH=OFF \
      -DFLASHSERVE_CUDA=ON -DFLASHSERVE_CUDA_ARCHS="${FLASHSERVE_CUDA_ARCHS}" \
 && { ldd /build/server/flashserve | grep -q libcudart \
      || { echo "the CUDA variant was built without the CUDA backend (see CMake's output)" >&2; exit 1; }; } \
 && deploy/image/stage_binary.sh /out /build/server/flashserve /build/client/flashserve-bench

FROM build-${VARIANT} AS build

# ---- the runtime: the base, the packages the binary loads, the binary, an unprivileged user ----
FROM ${BASE}
COPY --from=build /out/ /
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $(cat /usr/share/flashserve/runtime-packages.txt) \
 && rm -rf /var/lib/apt/lists/* \
 && echo /usr/local/lib/flashserve-cuda > /etc/ld.so.conf.d/flashserve-cuda.conf && ldconfig \
 && groupadd --system --gid 10001 flashserve \
 && useradd --system --uid 10001 --gid flashserve --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin flashserve \
 && mkdir -p /models && chown flashserve:flashserve /models
COPY deploy/image/healthcheck.sh /usr/local/bin/flashserve-healthcheck
USER 10001:10001

# Every flag of `flashserve serve` is also a variable (FLASHSERVE_<FLAG>; a flag given after the
# image name wins). These are the image's defaults: all interfaces, the model in the volume.
ENV FLASHSERVE_HOST=0.0.0.0 \
    FLASHSERVE_PORT=8000 \
    FLASHSERVE_GRPC_PORT=50051 \
    FLASHSERVE_MODEL=/models/model.gguf
VOLUME ["/models"]
# 8000: HTTP (OpenAI API, /health, /ready, /metrics). 50051: gRPC.
EXPOSE 8000 50051

HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 CMD ["flashserve-healthcheck"]
# The server is PID 1 and handles SIGTERM itself: it drains in-flight requests for
# FLASHSERVE_GRACE_PERIOD seconds (30), then exits 0. Give `docker stop -t` more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["flashserve", "serve"]
