#!/usr/bin/env bash
# Builds the flashserve image on a Debian 12 machine: flashserve:cpu, or flashserve:cuda with --cuda.
#
#   scripts/build_image.sh [--cuda] [--tag NAME] [-- DOCKER_BUILD_ARGS...]
#   scripts/build_image.sh --prometheus     # Debian's Prometheus, for deploy/compose.yaml
#
# Installs Docker's engine from Debian (docker.io) if it is missing and starts it if it is not
# running. The Debian 12 base: debian:bookworm-slim when a registry answers, otherwise a minimal
# Debian made here with debootstrap from Debian's mirror and imported as flashserve-base:bookworm.
# --cuda also imports the build machine's CUDA Toolkit (/usr/local/cuda) as an image the build
# stage copies nvcc and the libraries from. Prints the image's size at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
variant=cpu
tag=""
extra=()
while (($#)); do
  case "$1" in
    --cuda) variant=cuda; shift ;;
    --prometheus) variant=prometheus; shift ;;
    --tag) tag="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
tag="${tag:-flashserve:$variant}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# Debian's docker.io CLI builds with the engine's built-in BuildKit; a newer CLI found first on PATH
# would want the buildx plugin, which Debian 12 does not package.
docker() {
  if [ -x /usr/bin/docker ]; then /usr/bin/docker "$@"; else command docker "$@"; fi
}

apt_install() {
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

ensure_engine() {
  command -v dockerd > /dev/null || { echo "build_image: installing docker.io"; apt_install docker.io; }
  docker info > /dev/null 2>&1 && return
  echo "build_image: starting the Docker engine"
  if [ -d /run/systemd/system ]; then
    $sudo systemctl start docker
  else
    $sudo sh -c 'nohup dockerd > /var/log/dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do docker info > /dev/null 2>&1 && return; sleep 1; done
  echo "build_image: the Docker engine did not start (see /var/log/dockerd.log)" >&2
  exit 1
}

# A pulled debian:bookworm-slim if a registry answers within a minute, else debootstrap's.
ensure_base() {
  if docker image inspect flashserve-base:bookworm > /dev/null 2>&1; then return; fi
  if timeout 60 docker pull -q debian:bookworm-slim > /dev/null 2>&1; then
    docker tag debian:bookworm-slim flashserve-base:bookworm
    echo "build_image: base: debian:bookworm-slim from the registry"
    return
  fi
  command -v debootstrap > /dev/null || apt_install debootstrap
  local dir
  dir="$(mktemp -d)"
  echo "build_image: no registry answers; making the base with debootstrap (about a minute)"
  $sudo debootstrap --variant=minbase bookworm "$dir" "$mirror" > "$dir.log" 2>&1 \
    || { tail -20 "$dir.log" >&2; exit 1; }
  # Updates and security fixes too, as on the machines the project is built on.
  $sudo tee "$dir/etc/apt/sources.list" > /dev/null <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
SOURCES
  $sudo rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  $sudo tar -C "$dir" -c . | docker import - flashserve-base:bookworm > /dev/null
  $sudo rm -rf "$dir" "$dir.log"
  echo "build_image: base: flashserve-base:bookworm (debootstrap, $mirror)"
}

# The toolkit nvcc and the binary's CUDA libraries come from: the build machine's own, the one
# the project already builds and tests its CUDA code with (no second toolkit to keep in step).
ensure_cuda_toolkit() {
  local cuda
  cuda="$(readlink -f /usr/local/cuda 2>/dev/null || true)"
  [ -x "$cuda/bin/nvcc" ] || { echo "build_image: --cuda needs the CUDA Toolkit in /usr/local/cuda" >&2; exit 1; }
  local version
  version="$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
  toolkit="flashserve-cuda-toolkit:$version"
  docker image inspect "$toolkit" > /dev/null 2>&1 && return
  echo "build_image: importing the CUDA Toolkit $version from $cuda"
  # What compiling and linking need: compilers, headers, the runtime and cuBLAS (the static runtime
  # too: CMake's compiler check links it); not the libraries flashserve never loads, nor profilers.
  local skip=()
  for p in '*/nsight*' compute-sanitizer extras 'libcudnn*' 'libnccl*' 'libcufft*' 'libcusparse*' 'libcusolver*' \
           'libcurand*' 'libnpp*' 'libnvjpeg*' 'libcupti*' 'libnvperf*' 'libcheckpoint*'; do
    skip+=(--exclude="$p")
  done
  tar -C "$cuda" -c "${skip[@]}" --transform 's,^\./,usr/local/cuda/,' . | docker import - "$toolkit" > /dev/null
}

ensure_engine
ensure_base
if [ "$variant" = prometheus ]; then
  tag="${tag/flashserve:prometheus/flashserve-prometheus:bookworm}"
  docker build -q -t "$tag" --build-arg BASE=flashserve-base:bookworm "$root/deploy/prometheus" > /dev/null
  echo "build_image: $tag is $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')"
  exit 0
fi
toolkit=flashserve-base:bookworm  # the cpu variant never reads it
[ "$variant" = cuda ] && ensure_cuda_toolkit
echo "build_image: building $tag (variant $variant)"
DOCKER_BUILDKIT=1 docker build -t "$tag" --build-arg VARIANT="$variant" --build-arg BASE=flashserve-base:bookworm \
  --build-arg CUDA_TOOLKIT="$toolkit" "${extra[@]}" "$root"
echo "build_image: $tag is $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')"
