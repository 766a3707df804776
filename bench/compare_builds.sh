#!/usr/bin/env bash
# usage: bench/compare_builds.sh BASE_BUILD NEW_BUILD [ROUNDS]
# Times two builds of flashserve side by side on this machine, alternating base and new in each
# round (absolute figures drift between runs; the ratio within a round is the result): decode on
# every compiled copy of the CPU kernels and a 512-token prefill (bench_forward), paged attention on
# the AVX2 and AVX-512 VNNI copies (bench_kernels), and a prompt prefilled on the AVX2 copy through
# `flashserve generate`. Build both first (cmake --build DIR --target flashserve bench_forward
# bench_kernels); bench/compare_builds_summary.py OUTPUT puts each figure's rounds side by side.
set -euo pipefail
base=$1 new=$2 rounds=${3:-3}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model=${FLASHSERVE_MODEL:-$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
prompt=$(printf 'The history of the Eiffel Tower, told year by year, with every date and name. %.0s' $(seq 24))
echo "# $(date -u +%F) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
echo "# flags: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "# base: $(git -C "$base/.." rev-parse --short HEAD 2>/dev/null || echo "$base"), new: $(git -C "$new/.." rev-parse --short HEAD 2>/dev/null || echo "$new")"
for round in $(seq "$rounds"); do
  for which in base new; do
    dir=${!which}
    echo "## round $round, $which"
    FLASHSERVE_MODEL=$model "$dir/bench/bench_forward" --benchmark_min_time=1 \
      --benchmark_filter='BM_DecodeOnKernels|BM_Prefill/tokens:512' 2>/dev/null | grep -E '^BM_'
    "$dir/bench/bench_kernels" --benchmark_min_time=0.5 --benchmark_filter='Paged' 2>/dev/null | grep -E '^BM_'
    for act in q8 f32; do
      echo "generate --cpu-kernels avx2 --cpu-activations $act: $("$dir/server/flashserve" --cpu-kernels avx2 generate \
        --model "$model" --cpu-activations $act --prompt "$prompt" --max-tokens 64 --ignore-eos --temperature 0 \
        2>&1 >/dev/null | grep -E '^prompt:')"
    done
  done
done
