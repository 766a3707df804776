#!/usr/bin/env bash
# Configures and builds into build/ (Release). Extra arguments go to CMake's configure step,
# e.g. -DFLASHSERVE_CUDA=OFF to skip nvcc.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FLASHSERVE_BUILD_DIR:-$root/build}"
# nvcc lives outside PATH in the CUDA Toolkit's default install.
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j "$(nproc)"
