#!/usr/bin/env bash
# The files issue 30 measures on: real models' layer shapes made of random weights
# (bench/synthetic_gguf.py writes each shape once in F16), quantized by the anchor's llama-quantize
# (bench/llamacpp/build.sh) to the formats people download. Into .cache/models/synthetic/ (git-ignored);
# existing files are kept. Prints the paths, ready for bench/compare_llamacpp.sh.
#   bench/synthetic_models.sh                                   # llama-3.2-1b in Q4_K_M
#   SHAPES="qwen2.5-0.5b llama-3.2-1b llama-3.2-3b" TYPES="Q4_K_M Q5_K_M Q6_K Q8_0 IQ4_XS" bench/synthetic_models.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${FLASHSERVE_CACHE:-$root/.cache}"
quantize="$cache/llamacpp/build/bin/llama-quantize"
py="$root/.cache/venv/bin/python"
out="$cache/models/synthetic"
[ -x "$quantize" ] || { echo "synthetic_models: no $quantize (run bench/llamacpp/build.sh)" >&2; exit 1; }
mkdir -p "$out"
for shape in ${SHAPES:-llama-3.2-1b}; do
  f16="$out/$shape.F16.gguf"
  [ -f "$f16" ] || "$py" "$root/bench/synthetic_gguf.py" --shape "$shape" --type f16 --out "$f16" >&2
  for type in ${TYPES:-Q4_K_M}; do
    file="$out/$shape.$type.gguf"
    if [ ! -f "$file" ]; then
      # No imatrix: IQ4_XS and the K-quants quantize without one (llama-quantize warns only for IQ2/IQ1).
      "$quantize" "$f16" "$file.tmp" "$type" "${THREADS:-$(nproc)}" > "$file.log" 2>&1 ||
        { echo "synthetic_models: llama-quantize $type failed, see $file.log" >&2; exit 1; }
      mv "$file.tmp" "$file"
    fi
    echo "$file"
  done
done
