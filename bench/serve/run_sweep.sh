#!/usr/bin/env bash
# Serving benchmark: flashserve on SmolLM2-135M-Instruct (CPU) swept over request rates with
# flashserve-bench, then llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) on the
# same model file with the same workload, when it is installed, so the two are measured side by
# side in one run. Reports (table, JSON, latency-vs-rate PNG) go to bench/results/.
#
#   bench/serve/run_sweep.sh            # RATES, NUM_REQUESTS, INPUT_LEN, OUTPUT_LEN override
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FLASHSERVE_BUILD_DIR:-$root/build}"
model="$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
rates="${RATES:-0.5,1,2,4}"
num_requests="${NUM_REQUESTS:-16}"
input_len="${INPUT_LEN:-64}"
output_len="${OUTPUT_LEN:-64}"
out="$root/bench/results/serve-sweep-$(date -u +%Y-%m-%d)"
port=8471

"$root/scripts/setup.sh"
"$root/scripts/build.sh" > /dev/null

wait_ready() {  # url pid
  for _ in $(seq 1 120); do
    curl -sf -o /dev/null "$1" && return 0
    kill -0 "$2" 2> /dev/null || { echo "server exited during startup" >&2; return 1; }
    sleep 1
  done
  echo "server not ready after 120 s" >&2
  return 1
}

sweep() {  # name
  "$build/client/flashserve-bench" --host 127.0.0.1 --port "$port" --model "$(basename "$model" .gguf)" \
    --sweep-rates "$rates" --num-requests "$num_requests" --input-len "$input_len" --output-len "$output_len" \
    --seed 1 --no-progress --json "$out-$1.json" --plot "$out-$1.png" | tee "$out-$1.txt" ||
    echo "($1: some requests failed; see the errors column)"
}

header() {  # name
  {
    echo "# $1 on $(basename "$model"), $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
    echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  flashserve commit: $(git -C "$root" rev-parse --short HEAD)"
    echo "# workload: $num_requests requests per rate, ~$input_len prompt words, $output_len output tokens, seed 1"
  } > "$out-$1.txt.head"
}

echo "== flashserve"
"$build/server/flashserve" serve --model "$model" --host 127.0.0.1 --port "$port" --grpc-port 0 \
  --kv-cache-bytes $((1 << 30)) > "$out-flashserve.log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
wait_ready "http://127.0.0.1:$port/ready" "$pid"
header flashserve
sweep flashserve
kill -INT "$pid" && wait "$pid" || true

if python3 -c "import llama_cpp.server" 2> /dev/null; then
  echo "== llama.cpp (llama-cpp-python $(python3 -c 'import llama_cpp; print(llama_cpp.__version__)'))"
  # --interrupt_requests False: by default a new request cuts off the one being generated; queue
  # them instead, as a serving benchmark needs.
  python3 -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" --n_ctx 2048 \
    --n_threads "$(nproc)" --interrupt_requests False > "$out-llamacpp.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port/v1/models" "$pid"
  header llamacpp
  sweep llamacpp
  kill "$pid" && wait "$pid" || true
else
  echo "== llama.cpp server not installed (pip install 'llama-cpp-python[server]'): skipped"
fi
for f in "$out"-*.txt.head; do cat "$f" "${f%.head}" > "${f%.head}.tmp" && mv "${f%.head}.tmp" "${f%.head}" && rm "$f"; done
echo "reports: $out-*.txt / .json / .png"
