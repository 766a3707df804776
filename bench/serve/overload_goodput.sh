#!/usr/bin/env bash
# Goodput under sustained overload: flashserve on SmolLM2-135M-Instruct (CPU), driven by
# flashserve-bench. First the saturation throughput (closed loop with twice as many requests in
# flight as the batch holds, so the queue never runs dry), then open-loop Poisson load at 1x and 2x
# that rate for DURATION seconds each, with clients that give up after CLIENT_TIMEOUT s.
# Goodput = requests/s that succeeded with TTFT under SLO_TTFT_MS. Each rate runs on a server with
# --max-queue-time MAX_QUEUE_TIME, and the 2x rate once more with no queue limit (the server before
# the front-door work), side by side in one run. Report and JSON to bench/results/.
#
#   bench/serve/overload_goodput.sh   # DURATION, INPUT_LEN, OUTPUT_LEN, SLO_TTFT_MS, CLIENT_TIMEOUT,
#                                     # MAX_QUEUE_TIME, CONCURRENCY override
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FLASHSERVE_BUILD_DIR:-$root/build}"
model="$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
duration="${DURATION:-60}"
input_len="${INPUT_LEN:-64}"
output_len="${OUTPUT_LEN:-32}"
slo_ttft_ms="${SLO_TTFT_MS:-5000}"
client_timeout="${CLIENT_TIMEOUT:-30}"
max_queue_time="${MAX_QUEUE_TIME:-3}"
concurrency="${CONCURRENCY:-16}"
out="$root/bench/results/overload-goodput-$(date -u +%Y-%m-%d)"
port=8472
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null || true' EXIT

start_server() {  # extra flags...
  "$build/server/flashserve" serve --model "$model" --host 127.0.0.1 --port "$port" --grpc-port 0 \
    --kv-cache-bytes $((1 << 30)) --max-num-seqs "$concurrency" "$@" >> "$out.server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/ready" && return 0
    sleep 0.5
  done
  echo "server not ready" >&2
  exit 1
}

stop_server() {
  kill -INT "$pid" && wait "$pid" || true
  pid=""
}

bench() {  # name, flashserve-bench flags...
  local name="$1"
  shift
  "$build/client/flashserve-bench" --port "$port" --model "$(basename "$model" .gguf)" --input-len "$input_len" \
    --output-len "$output_len" --seed 7 --timeout "$client_timeout" --slo-ttft-ms "$slo_ttft_ms" --no-progress \
    --json "$out-$name.json" "$@" > "$out-$name.txt" 2>&1 || true
}

field() {  # name, json field
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$out-$1.json" "$2"
}

: > "$out.server.log"
echo "== saturation: closed loop, $((2 * concurrency)) in flight"
start_server --max-queue-time "$max_queue_time"
bench saturation --concurrency $((2 * concurrency)) --num-requests $((concurrency * 12)) --warmup "$concurrency"
sat=$(field saturation request_throughput)
rate1=$(python3 -c "print(round($sat, 3))")
rate2=$(python3 -c "print(round(2 * $sat, 3))")
echo "   saturation: $rate1 requests/s"

echo "== ${rate1} req/s (1x), ${rate2} req/s (2x): --max-queue-time $max_queue_time"
bench rate1x --request-rate "$rate1" --duration "$duration" --num-requests 100000
bench rate2x --request-rate "$rate2" --duration "$duration" --num-requests 100000
stop_server
echo "== ${rate2} req/s (2x): no queue limit"
start_server --max-queue-time 0
bench rate2x-nolimit --request-rate "$rate2" --duration "$duration" --num-requests 100000
stop_server

g1=$(field rate1x goodput)
g2=$(field rate2x goodput)
g0=$(field rate2x-nolimit goodput)
{
  echo "# overload goodput on $(basename "$model"), $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  flashserve commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "# workload: ~$input_len prompt words, $output_len output tokens, Poisson arrivals for ${duration} s,"
  echo "#   clients give up after ${client_timeout} s, goodput = successes/s with TTFT <= ${slo_ttft_ms} ms"
  echo "# saturation (closed loop, $((2 * concurrency)) in flight, --max-num-seqs $concurrency): $rate1 requests/s"
  printf "%-34s %10s %10s %10s %10s %10s %10s\n" run offered goodput ok errors "TTFT p50" "TTFT p99"
  for run in "rate1x:$rate1:1x, --max-queue-time $max_queue_time" "rate2x:$rate2:2x, --max-queue-time $max_queue_time" \
             "rate2x-nolimit:$rate2:2x, no queue limit"; do
    IFS=: read -r name offered label <<< "$run"
    python3 - "$out-$name.json" "$offered" "$label" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
errors = sum(r["errors"].values())
print(f"{sys.argv[3]:34s} {float(sys.argv[2]):10.3f} {r['goodput']:10.3f} {r['num_ok']:10d} {errors:10d} "
      f"{r['ttft']['median_ms']:10.0f} {r['ttft']['p99_ms']:10.0f}  errors={r['errors']}")
EOF
  done
  python3 -c "print(f'goodput at 2x / goodput at 1x: {$g2 / $g1:.2f} (no queue limit: {$g0 / $g1:.2f})')"
} | tee "$out.txt"
echo "reports: $out.txt, $out-*.json, $out-*.txt"
