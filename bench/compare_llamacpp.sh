#!/usr/bin/env bash
# flashserve against llama.cpp on the same GGUFs and machine, alternating, printing ratios (issues 14, 30).
#
#   bench/compare_llamacpp.sh                 # SmolLM2 Q4_1, 2 threads, 2 rounds
#   bench/compare_llamacpp.sh a.gguf b.gguf   # each file in turn, then one table over all of them
#   MODEL=path.gguf THREADS=4 ROUNDS=3 QUICK=1 bench/compare_llamacpp.sh
#   SERVING_ONLY=1 OPEN=0 bench/compare_llamacpp.sh a.gguf   # closed-loop serving alone
#   ISA=avx2 bench/compare_llamacpp.sh         # both engines held to AVX2 (an AVX2-only machine's case)
#
# Builds the anchor first (bench/llamacpp/build.sh: the llama-cpp-python sdist, cached in .cache/),
# and flashserve's build/ must exist (scripts/test.sh or cmake --build build). Then for each file,
# each round runs, in this order: bench_forward (prefill 512; decode at 128 and 1024 cached, f32 and
# q8 activations), the machine's read bandwidth (bench_kernels' BM_ReadBandwidth, right after the
# decode it bounds: on a shared machine it moves by a third within an hour) and llama-bench (pp512, tg128 at depth 0 and 1024), and ik_llama.cpp's llama-bench with run-time
# repacking (-rtr 1; -gp 1024,128 is its tg128 at depth 1024) when bench/ik_llamacpp/build.sh has built
# it (IK=0 skips it); then llama-server -np 16 and flashserve serve
# under the same flashserve-bench loads: closed loop c8 and c16 (128 in / 128 out), and open loop Poisson
# at half of llama-server's c16 request rate, with prompts of its own (a seed the c16 run did not
# use, so no prompt is already in either server's cache). QUICK=1 skips the serving part,
# SERVING_ONLY=1 the kernels, OPEN=0 the open-loop runs (each lasts about one and a half times
# llama-server's c16 run). Raw outputs go to a folder under bench/results/ named for the date and
# commit (one subfolder per file), with the CPU model and flags; each file's ratios are printed,
# then one line per file: medians over the rounds, and decode as a fraction of the bandwidth bound
# (the bytes one decode step reads: every weight but the embedding table, unless it is the head;
# each round's decode against the bandwidth measured in that round, then the median).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("${MODEL:-$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}")
for m in "${models[@]}"; do [ -f "$m" ] || { echo "compare: no file $m" >&2; exit 1; }; done
threads="${THREADS:-2}"
rounds="${ROUNDS:-2}"
open_loop="${OPEN:-1}"
isa="${ISA:-native}"
case "$isa" in
  native) bin="$root/.cache/llamacpp/build/bin"; kernels=auto ;;
  avx2) bin="$root/.cache/llamacpp/build-avx2/bin"; kernels=avx2 ;;
  *) echo "compare: ISA must be native or avx2, not '$isa'" >&2; exit 2 ;;
esac
py="$root/.cache/venv/bin/python"
ik_bin="$root/.cache/ik_llamacpp/build/bin"
for f in build/bench/bench_forward build/server/flashserve build/client/flashserve-bench; do
  [ -x "$f" ] || { echo "compare: $f missing: build flashserve first (cmake --build build)" >&2; exit 1; }
done
ISA="$isa" bench/llamacpp/build.sh > /dev/null
out="bench/results/compare-llamacpp-$(date -u +%F)-$(git rev-parse --short HEAD)$([ "$isa" = native ] || echo "-$isa")"
mkdir -p "$out"
{
  for m in "${models[@]}"; do echo "model: $m ($(sha256sum "$m" | cut -c1-16))"; done
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) logical cpus; threads $threads"
  echo "flags: $(grep -m1 flags /proc/cpuinfo | grep -o 'avx2\|avx512f\|avx512_vnni\|avx_vnni\|amx_int8' | sort -u | xargs)"
  echo "date: $(date -u +%FT%TZ); commit $(git rev-parse HEAD)"
  echo "isa: $isa (llama.cpp from $bin; flashserve --cpu-kernels $kernels)"
} > "$out/machine.txt"
port=18700
wait_http() {  # url
  for _ in $(seq 1 300); do curl -sf "$1" > /dev/null 2>&1 && return 0; sleep 0.2; done
  echo "compare: $1 never answered" >&2
  return 1
}
load() {  # name port extra-args...: one flashserve-bench run, JSON report to $dir/<name>.json
  local name=$1 p=$2
  shift 2
  build/client/flashserve-bench --port "$p" --model bench --input-len 128 --output-len 128 --no-progress \
    --json "$dir/$name.json" "$@" > "$dir/$name.txt" 2>&1
}
serve_llamacpp() {
  "$bin/llama-server" -m "$model" -t "$threads" -np 16 -c $((16 * 512)) --port "$port" --host 127.0.0.1 \
    > "$dir/llama-server.log" 2>&1 &
  echo $!
}
serve_flashserve() {
  build/server/flashserve --cpu-kernels "$kernels" serve --model "$model" --threads "$threads" --port "$port" --grpc-port $((port + 1)) \
    --served-model-name bench > "$dir/flashserve.log" 2>&1 &
  echo $!
}

compare_one() {  # the rounds on $model, into $dir
  for r in $(seq 1 "$rounds"); do
    if [ "${SERVING_ONLY:-0}" != 1 ]; then
      echo "compare: round $r: kernels"
      FLASHSERVE_MODEL="$model" FLASHSERVE_THREADS="$threads" FLASHSERVE_CPU_KERNELS="$kernels" \
        build/bench/bench_forward --benchmark_min_time=2 --benchmark_out="$dir/bench_forward.$r.json" \
        --benchmark_out_format=json --benchmark_filter='BM_Prefill/tokens:512|BM_Decode/batch:1/context:(128|1024)' \
        > "$dir/bench_forward.$r.txt" 2>&1
      build/bench/bench_kernels --benchmark_filter=BM_ReadBandwidth --benchmark_min_time=1 --benchmark_format=json \
        > "$dir/read_bandwidth.$r.json" 2> /dev/null
      "$bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -d 0,1024 -r 3 -o json > "$dir/llama-bench.$r.json" 2> /dev/null
      if [ "$isa" = native ] && [ "${IK:-1}" = 1 ] && [ -x "$ik_bin/llama-bench" ]; then
        "$ik_bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -gp 1024,128 -r 3 -rtr 1 -o json \
          > "$dir/ik-llama-bench.$r.json" 2> /dev/null
      fi
    fi
    [ "${QUICK:-0}" = 1 ] && continue
    echo "compare: round $r: serving"
    pid=$(serve_llamacpp); wait_http "http://127.0.0.1:$port/health"
    load "llama-server.c8.$r" "$port" --concurrency 8 --num-requests 32 --warmup 8 --seed "$r"
    load "llama-server.c16.$r" "$port" --concurrency 16 --num-requests 64 --warmup 16 --seed "$r"
    if [ "$open_loop" != 0 ]; then
      rate=$("$py" -c "import json; print(json.load(open('$dir/llama-server.c16.$r.json'))['request_throughput'] / 2)")
      load "llama-server.open.$r" "$port" --request-rate "$rate" --num-requests 48 --seed $((r + 1000))
    fi
    kill "$pid"; wait "$pid" 2> /dev/null || true
    pid=$(serve_flashserve); wait_http "http://127.0.0.1:$port/ready"
    load "flashserve.c8.$r" "$port" --concurrency 8 --num-requests 32 --warmup 8 --seed "$r"
    load "flashserve.c16.$r" "$port" --concurrency 16 --num-requests 64 --warmup 16 --seed "$r"
    if [ "$open_loop" != 0 ]; then
      load "flashserve.open.$r" "$port" --request-rate "$rate" --num-requests 48 --seed $((r + 1000))
    fi
    kill "$pid"; wait "$pid" 2> /dev/null || true
  done

  "$py" bench/compare_llamacpp_report.py rounds "$dir" "$rounds" | tee "$dir/ratios.txt"
  # The servers' logs are kept, compressed: at ~200 KB each they would crowd the working tree that a
  # device call carries (scripts/device_bundle.sh).
  for f in "$dir"/*.log; do
    if [ -f "$f" ]; then xz -9f "$f"; fi
  done
}

for model in "${models[@]}"; do
  dir="$out/$(basename "$model" .gguf)"
  mkdir -p "$dir"
  echo "compare: $model"
  compare_one
done

"$py" bench/compare_llamacpp_report.py summary "$out" "$rounds" "${models[@]}" | tee "$out/summary.txt"
echo "compare: raw results in $out"
