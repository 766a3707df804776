#!/usr/bin/env bash
# Runs on the lent GPU machine, from the repository root, as .device-1/run.sh (scripts/device_bundle.sh
# packs it). Every step's full output goes to $OUT/<part>.txt; stdout gets one summary line per step.
# DEVICE and SHAPE (big) override cuda and llama-3-8b for a dry run on a machine without a GPU; SANITIZERS
# (part1) names the compute-sanitizer tools to run (racecheck alone needs ~2 min).
# A step is cut at its own limit and at the part's deadline, so a hang costs that step only.
#   part1  unpack, op tests on the GPU, compute-sanitizer (memcheck, racecheck, synccheck), ncu on the GEMV
#   part2  join the model, runner tests, generate CPU vs GPU, decode benchmark, serving load, kernels vs PyTorch
#   big    Llama-3-8B-shaped models of random weights (bench/synthetic_gguf.py), Q4_0 then BF16, each
#          served on the GPU under load at concurrency 1, 64 and 256
#   suites (as .device-3/run.sh, right after part2: its binaries come in .device-3) join the model, then
#          the server suites (OpenAI HTTP, gRPC, the binary's lifecycle) with every
#          model on the GPU (--device auto finds it)
set -uo pipefail
part=${1:-}
out=${OUT:-/tmp/flashserve-device}
mkdir -p "$out"
log="$out/$part.txt"
case "$part" in part1) budget=320 ;; big) budget=250 ;; *) budget=300 ;; esac
deadline=$(($(date +%s) + ${DEADLINE_S:-$budget}))
model="$PWD/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# The binaries' own libraries, then CUDA's: the toolkit's, else those PyTorch's wheels bring.
library_path() {
  local dirs="$PWD/.device/lib" lib
  for lib in $(find /usr/local/cuda*/ /opt /usr/lib \( -name 'libcublasLt.so.13*' -o -name 'libcudart.so.13*' \) \
                2>/dev/null | head -6); do
    dirs="$dirs:$(dirname "$lib")"
  done
  echo "$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

header() {
  echo "# flashserve device run, $part"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit: $(cat .device/commit 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader | sed 's/^/# gpu: /'
  echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus"
  echo "# host: $(uname -srm)"
}

# step NAME LIMIT_S COMMAND...: runs COMMAND into the log, prints its exit status, time and gtest summary.
step() {
  local name=$1 limit=$2 left rc t0
  shift 2
  left=$((deadline - $(date +%s)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then echo "## $name: skipped, the part's deadline has passed" | tee -a "$log"; return; fi
  echo "## $name (limit ${limit} s): $*" >>"$log"
  t0=$(date +%s)
  timeout -k 5 "$limit" "$@" >"$out/step.tmp" 2>&1
  rc=$?
  cat "$out/step.tmp" >>"$log"
  echo "## $name: exit $rc in $(($(date +%s) - t0)) s" | tee -a "$log"
  grep -E '^### |^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|ERROR SUMMARY|RACECHECK SUMMARY|^BM_|tokens/s|Output token|TPOT|TTFT' "$out/step.tmp" | head -40
  rm -f "$out/step.tmp"
}

bundle=$(dirname "$0")
untar() {  # ARCHIVE DIR
  mkdir -p "$2"
  tar -xJf "$1" -C "$2" 2>/dev/null || python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"
}
unpack() {
  [ -x .device/bin/test_cuda_ops ] || untar "$bundle/device.tar.xz" .
  [ -f "$bundle/suites.tar.xz" ] && [ ! -x .device/bin/test_http ] && untar "$bundle/suites.tar.xz" .device/bin
  return 0
}

serve_load() {  # MODEL CONCURRENCY...: the server on the GPU, closed-loop load through its OpenAI API
  local m=$1 pid i c
  shift
  .device/bin/flashserve serve --model "$m" --device "${DEVICE:-cuda}" --port 8399 --grpc-port 8398 --max-num-seqs 256 &
  pid=$!
  for i in $(seq 1 240); do
    kill -0 "$pid" 2>/dev/null || return 1
    curl -sf http://127.0.0.1:8399/health >/dev/null 2>&1 && break
    python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8399/health")' 2>/dev/null && break
    sleep 0.5
  done
  for c in "$@"; do
    echo "### concurrency $c"
    .device/bin/flashserve-bench --port 8399 --concurrency "$c" --num-requests $((c * 2 > 16 ? c * 2 : 16)) \
      --input-len 128 --output-len 128 --no-progress
  done
  kill "$pid"
  wait "$pid"
}

join_model() {
  header | tee "$log"
  LD_LIBRARY_PATH=$(library_path)
  mkdir -p "$(dirname "$model")"
  cat .device-1/model.part .device-2/model.part | xz -dc >"$model" 2>/dev/null ||
    cat .device-1/model.part .device-2/model.part | python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))' >"$model"
  step model_sha256 20 bash -c "echo '$(cat .device/model.sha256)  $model' | sha256sum -c -"
  export FLASHSERVE_MODEL=$model
}

export LD_LIBRARY_PATH model
export -f serve_load
case "$part" in
  part1)
    unpack
    header | tee "$log"
    LD_LIBRARY_PATH=$(library_path)
    step libraries 20 bash -c 'ldd .device/bin/* | grep "not found" && exit 1 || echo "every library found"'
    step test_backend_ops 90 .device/bin/test_backend_ops
    step test_cuda_ops 120 .device/bin/test_cuda_ops
    for tool in ${SANITIZERS:-memcheck racecheck synccheck}; do
      step "sanitizer_$tool" 70 compute-sanitizer --tool "$tool" .device/bin/test_cuda_ops --gtest_brief=1
    done
    # Hardware counters of the one-token and eight-token GEMV (Q4_0, 4096 x 4096): where its time goes.
    for t in 1 8; do
      step "profile_gemv_tokens_$t" 60 ncu --clock-control none --kernel-name regex:gemv --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis .device/bin/bench_cuda_ops --no-flush --runs 2 --warmup 1 \
        --filter "matmul:wtype=q4_0,tokens=$t,n_out=4096,k=4096"
    done ;;
  part2)
    join_model
    step test_cuda_runner 100 .device/bin/test_cuda_runner
    for dev in cpu cuda; do
      step "generate_$dev" 40 .device/bin/flashserve generate --model "$model" --device "$dev" --chat --max-tokens 48 \
        --prompt "What is the capital of France?" --prompt "Write a haiku about the sea."
    done
    step bench_cuda_decode 100 .device/bin/bench_cuda_decode --benchmark_filter='device:1|device:0/graphs:0/invariant:0/seqs:(1|8)/'
    step serve_load 90 bash -c 'serve_load "$model" 1 64 256'
    export GIT_COMMIT=$(cat .device/commit) BENCH_BIN=$PWD/.device/bin/bench_cuda_ops
    step kernels_vs_torch 150 bash bench/kernels/run_gpu.sh all --quick ;;
  suites)
    unpack
    join_model
    # The suites find fixtures and the server binary under the source folder they were built in.
    src=$(cat .device/source_dir)
    mkdir -p "$(dirname "$src")"
    [ -e "$src" ] || ln -s "$PWD" "$src"
    export FLASHSERVE_TEST_BINARY=$PWD/.device/bin/flashserve
    # Left out: tests of the CPU's own KV types and of a stalled log pipe (hundreds of requests on a timer).
    skip='-*KvCacheDtypeOnTheCpu*:*StalledLogPipe*'
    for t in $(cat .device/suites); do
      step "$t" 60 ".device/bin/$t" --gtest_filter="$skip"
    done
    echo "## servers that said they run on the GPU: $(grep -c 'device: cuda' "$log"), on the CPU: $(grep -c 'device: cpu' "$log")" | tee -a "$log" ;;
  big)
    unpack
    header | tee "$log"
    LD_LIBRARY_PATH=$(library_path)
    python3 -m pip install -q --no-index --no-deps --target /tmp/site "$bundle"/gguf-*.whl
    export PYTHONPATH=/tmp/site
    for kind in q4_0 bf16; do
      m=/tmp/synthetic.$kind.gguf
      step "write_8b_$kind" 60 python3 bench/synthetic_gguf.py --shape "${SHAPE:-llama-3-8b}" --type "$kind" --out "$m" \
        --tokenizer "$bundle/tokenizer.gguf"
      step "serve_8b_$kind" 100 bash -c "serve_load $m 1 64 256"
      rm -f "$m"
    done ;;
  *) echo "usage: run.sh part1|part2|suites|big" >&2; exit 2 ;;
esac
