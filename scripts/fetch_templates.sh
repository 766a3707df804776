#!/usr/bin/env bash
# Fetches real chat templates into .cache/templates/ (git ignores it; the templates are never
# committed) for tests/model/test_chat_template.cpp, which renders them with our Jinja engine and
# with jinja2 and compares. Idempotent: exits at once when every file is there with its sha256.
#   llama-3.1, llama-3.2, qwen2.5, qwen3, mistral-nemo, gemma-2: from the llama-cpp-python sdist
#     (pinned, sha256-checked), vendor/llama.cpp/models/templates/
#   smollm2: the tokenizer.chat_template of the default model (scripts/fetch_model.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${FLASHSERVE_CACHE:-$root/.cache}"
out="$cache/templates"
sdist_version=0.3.36
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# name  file in the sdist's templates folder  sha256
templates=(
  "llama-3.1 meta-llama-Llama-3.1-8B-Instruct.jinja e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65"
  "llama-3.2 meta-llama-Llama-3.2-3B-Instruct.jinja 5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4"
  "qwen2.5 Qwen-Qwen2.5-7B-Instruct.jinja cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f"
  "qwen3 Qwen-Qwen3-0.6B.jinja 87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"
  "mistral-nemo mistralai-Mistral-Nemo-Instruct-2407.jinja e4676cb56dffea7782fd3e2b577cfaf1e123537e6ef49b3ec7caa6c095c62272"
  "gemma-2 google-gemma-2-2b-it.jinja ecd6ae513fe103f0eb62e8ab5bfa8d0fe45c1074fa398b089c93a7e70c15cfd6"
)
smollm2_sha=872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788
model="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"

have() { [ -f "$out/$1.jinja" ] && echo "$2  $out/$1.jinja" | sha256sum -c --status; }

missing=0
for t in "${templates[@]}"; do
  read -r name _ sha <<<"$t"
  have "$name" "$sha" || missing=1
done
have smollm2 "$smollm2_sha" || missing=1
((missing)) || exit 0

mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [ -f "$model" ] && ! have smollm2 "$smollm2_sha"; then
  # The GGUF's metadata, read up to tokenizer.chat_template (no third-party reader needed).
  python3 - "$model" >"$tmp/smollm2.jinja" <<'PY'
import struct, sys
with open(sys.argv[1], "rb") as f:
    data = f.read(64 << 20)
assert data[:4] == b"GGUF", "not a GGUF file"
n_kv, = struct.unpack_from("<Q", data, 16)
pos = 24
fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def string():
    global pos
    n, = struct.unpack_from("<Q", data, pos)
    pos += 8 + n
    return data[pos - n:pos]
def skip(t):
    global pos
    if t == 8:
        string()
    elif t == 9:
        et, n = struct.unpack_from("<IQ", data, pos)
        pos += 12
        for _ in range(n):
            skip(et)
    else:
        pos += fixed[t]
for _ in range(n_kv):
    key = string()
    t, = struct.unpack_from("<I", data, pos)
    pos += 4
    if key == b"tokenizer.chat_template" and t == 8:
        sys.stdout.buffer.write(string())
        sys.exit(0)
    skip(t)
sys.exit("no tokenizer.chat_template")
PY
  echo "$smollm2_sha  $tmp/smollm2.jinja" | sha256sum -c --quiet
  mv "$tmp/smollm2.jinja" "$out/smollm2.jinja"
elif [ ! -f "$model" ]; then
  echo "fetch_templates: $model is missing (scripts/fetch_model.sh); skipping smollm2" >&2
fi

need_sdist=0
for t in "${templates[@]}"; do
  read -r name _ sha <<<"$t"
  have "$name" "$sha" || need_sdist=1
done
if ((need_sdist)); then
  echo "fetch_templates: downloading the llama-cpp-python==$sdist_version sdist from PyPI (templates only)"
  python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$sdist_version"
  sdist="$tmp/llama_cpp_python-$sdist_version.tar.gz"
  echo "$sdist_sha  $sdist" | sha256sum -c --quiet
  prefix="llama_cpp_python-$sdist_version/vendor/llama.cpp/models/templates"
  members=()
  for t in "${templates[@]}"; do
    read -r _ file _ <<<"$t"
    members+=("$prefix/$file")
  done
  tar -xzf "$sdist" -C "$tmp" "${members[@]}"
  for t in "${templates[@]}"; do
    read -r name file sha <<<"$t"
    echo "$sha  $tmp/$prefix/$file" | sha256sum -c --quiet
    mv "$tmp/$prefix/$file" "$out/$name.jinja"
  done
fi
echo "fetch_templates: $out"
