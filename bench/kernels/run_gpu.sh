#!/usr/bin/env bash
# Produces the raw GPU kernel benchmark results on the lent GPU machine (see bench/README.md,
# "GPU kernel benchmarks"). Run from the repository root:
#
#   GIT_COMMIT=<sha> bash bench/kernels/run_gpu.sh [all|ours|torch] [bench args...]
#   bash bench/kernels/run_gpu.sh combine OURS.txt TORCH.txt      # anywhere: join two split runs
#
#   all    (default) bench_cuda_ops, then torch_baselines.py, then compare.py
#   ours   bench_cuda_ops only            torch   torch_baselines.py only
#   bench args (--quick, --filter SUBSTR, --runs N, ...) go to both programs.
#
# Writes to $OUT (the device tool's folder) or, without it, bench/results/:
#   ours.txt, torch.txt      header + raw output of each program
#   gpu-kernels-<date>.txt   header + both raw outputs (the file to commit)   [all, combine]
#   gpu-kernels-<date>.md    compare.py's side-by-side table                  [all, combine]
#   build.log                when the benchmark had to be built here
#
# The benchmark binary: $BENCH_BIN, else the first of build-bench/bench/kernels/bench_cuda_ops,
# .device/bin/bench_cuda_ops (scripts/device_bundle.sh) and build/bench/kernels/bench_cuda_ops that
# runs (built on the development machine and carried), else it is built here with nvcc straight from the
# sources (no CMake: the project's CMake wants libraries this machine lacks); CUDA_ARCH (default
# 90) picks the target, e.g. CUDA_ARCH=90a.
# The commit: $GIT_COMMIT, else `git rev-parse HEAD` when .git travelled, else "unknown".
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
MODE=all
case "${1:-}" in
  all|ours|torch|combine) MODE=$1; shift ;;
esac
DEST=${OUT:-$ROOT/bench/results}
mkdir -p "$DEST"
STAMP=$(date -u +%Y-%m-%d)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

header() {  # $1: what follows
  echo "# flashserve GPU kernel benchmarks: $1"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local commit=${GIT_COMMIT:-}
  if [ -z "$commit" ]; then commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown); fi
  echo "# commit: $commit"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,pstate \
      --format=csv,noheader 2>/dev/null | sed 's/^/# device: /'
  else
    echo "# device: (nvidia-smi not found)"
  fi
  echo "# host: $(uname -srm), $(nproc) cpus"
  if command -v nvcc >/dev/null 2>&1; then echo "# nvcc: $(nvcc --version | tail -1)"; fi
}

combine() {  # $1 ours file, $2 torch file
  local res="$DEST/gpu-kernels-$STAMP.txt"
  {
    echo "# flashserve GPU kernel benchmarks: bench_cuda_ops and torch_baselines.py, raw output"
    echo "# table: python3 bench/kernels/compare.py $(basename "$res")"
    echo
    cat "$1"
    echo
    cat "$2"
  } >"$res"
  "$PY" "$ROOT/bench/kernels/compare.py" "$res" >"$DEST/gpu-kernels-$STAMP.md"
  echo "wrote $res and $DEST/gpu-kernels-$STAMP.md"
}

if [ "$MODE" = combine ]; then
  [ $# -eq 2 ] || { echo "usage: run_gpu.sh combine OURS.txt TORCH.txt" >&2; exit 2; }
  combine "$1" "$2"
  cat "$DEST/gpu-kernels-$STAMP.md"
  exit 0
fi

# Libraries the carried binary needs (libcudart.so.13, libcublasLt.so.13): the toolkit's, else
# the ones PyTorch's wheels bring.
add_lib_dirs() {
  local dirs=""
  [ -d /usr/local/cuda/lib64 ] && dirs=/usr/local/cuda/lib64
  local sp
  sp=$("$PY" -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
  if [ -n "$sp" ]; then
    while IFS= read -r lib; do dirs="$dirs:$(dirname "$lib")"; done \
      < <(find "$sp/nvidia" \( -name 'libcublasLt.so.*' -o -name 'libcudart.so.*' \) 2>/dev/null)
  fi
  export LD_LIBRARY_PATH="${dirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

runnable() {  # $1 binary: exists and every shared library resolves
  [ -x "$1" ] || return 1
  ! ldd "$1" 2>/dev/null | grep -q 'not found'
}

build_here() {  # builds /tmp/bench_cuda_ops/bench_cuda_ops from the sources; log in $DEST/build.log
  local arch=${CUDA_ARCH:-90} b=/tmp/bench_cuda_ops
  mkdir -p "$b"
  local log="$DEST/build.log" pids=() objs=() f o
  : >"$log"
  for f in "$ROOT"/kernels/cuda/*.cu "$ROOT"/bench/kernels/*.cu; do
    o="$b/$(basename "$f").o"
    objs+=("$o")
    nvcc -O3 -std=c++17 -lineinfo -gencode="arch=compute_$arch,code=sm_$arch" -I"$ROOT" \
      -DFLASHSERVE_HAVE_CUDA -c "$f" -o "$o" >>"$log" 2>&1 &
    pids+=($!)
  done
  for f in "$ROOT"/kernels/cpu/*.cpp; do
    o="$b/$(basename "$f").o"
    objs+=("$o")
    g++ -O3 -std=c++20 -pthread -I"$ROOT" -c "$f" -o "$o" >>"$log" 2>&1 &
    pids+=($!)
  done
  # The op files once per instruction set, as kernels/CMakeLists.txt builds them.
  local isa flags
  for isa in scalar avx2 avx2_vnni avx512 avx512_vnni; do
    case $isa in
      scalar) flags="" ;;
      avx2) flags="-march=x86-64-v3" ;;
      avx2_vnni) flags="-march=x86-64-v3 -mavxvnni" ;;
      avx512) flags="-march=x86-64-v4" ;;
      avx512_vnni) flags="-march=x86-64-v4 -mavx512vnni" ;;
    esac
    for f in "$ROOT"/kernels/cpu/ops/*.cpp; do
      o="$b/$isa.$(basename "$f").o"
      objs+=("$o")
      # shellcheck disable=SC2086
      g++ -O3 -std=c++20 -pthread $flags -DFLASHSERVE_ISA=isa_$isa -I"$ROOT" -c "$f" -o "$o" >>"$log" 2>&1 &
      pids+=($!)
    done
  done
  local ok=1 p
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  [ $ok = 1 ] || { echo "build failed; see $log" >&2; tail -40 "$log" >&2; return 1; }
  nvcc -gencode="arch=compute_$arch,code=sm_$arch" -o "$b/bench_cuda_ops" "${objs[@]}" -lcublasLt -lpthread >>"$log" 2>&1 \
    || { echo "link failed; see $log" >&2; tail -40 "$log" >&2; return 1; }
  echo "$b/bench_cuda_ops"
}

run_ours() {
  add_lib_dirs
  [ -d "$ROOT/.device/lib" ] && export LD_LIBRARY_PATH="$ROOT/.device/lib:$LD_LIBRARY_PATH"
  local bin="" how=carried c
  if [ -n "${BENCH_BIN:-}" ]; then
    bin=$BENCH_BIN
  else  # the first that runs: our build dir, scripts/device_bundle.sh's bundle, the default build dir
    for c in "$ROOT/build-bench/bench/kernels/bench_cuda_ops" "$ROOT/.device/bin/bench_cuda_ops" \
             "$ROOT/build/bench/kernels/bench_cuda_ops"; do
      if runnable "$c"; then bin=$c; break; fi
    done
    [ -n "$bin" ] || bin="$ROOT/build-bench/bench/kernels/bench_cuda_ops"
  fi
  if ! runnable "$bin"; then
    if [ -e "$bin" ]; then
      echo "run_gpu.sh: $bin does not run here:$(ldd "$bin" 2>&1 | grep 'not found' | tr -s ' \t' ' ' | head -3); building from source" >&2
    else
      echo "run_gpu.sh: no $bin; building from source" >&2
    fi
    bin=$(build_here) || return 1
    how="built on this machine, CUDA_ARCH=${CUDA_ARCH:-90}"
  fi
  {
    header "bench_cuda_ops"
    echo "# binary: $bin ($how)"
    echo "# args: $*"
    "$bin" "$@" 2>&1
    echo "# exit: $?"
  } | tee "$DEST/ours.txt"
}

run_torch() {
  {
    header "torch_baselines.py"
    echo "# args: $*"
    "$PY" "$ROOT/bench/kernels/torch_baselines.py" "$@" 2>&1
    echo "# exit: $?"
  } | tee "$DEST/torch.txt"
}

case "$MODE" in
  ours) run_ours "$@" ;;
  torch) run_torch "$@" ;;
  all)
    run_ours "$@"
    run_torch "$@"
    combine "$DEST/ours.txt" "$DEST/torch.txt"
    echo
    cat "$DEST/gpu-kernels-$STAMP.md"
    ;;
esac
