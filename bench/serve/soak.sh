#!/usr/bin/env bash
# Sustained overload, run long: flashserve on SmolLM2-135M-Instruct (CPU), one server process
# throughout. First its saturating rate (closed loop, CONCURRENCY in flight, SAT_SECONDS), then
# open-loop Poisson load at 1x and at 2x that rate for DURATION seconds each, with clients that
# give up after CLIENT_TIMEOUT s (the disconnects an overloaded service sees). Goodput counts the
# requests that succeed with TTFT <= SLO_TTFT_MS and TPOT <= SLO_TPOT_MS, per minute of sending
# (flashserve-bench --interval 60); the server's RSS is sampled every 5 s. The verdict: every
# minute of 2x keeps at least 80% of the 1x goodput, and RSS stays flat.
# Loopback only, bounded in time: about SAT_SECONDS + 2 x DURATION + a minute.
#
#   bench/serve/soak.sh   # DURATION (600), SAT_SECONDS (120), CONCURRENCY (32), INPUT_LEN (64),
#                         # OUTPUT_LEN (32), SLO_TTFT_MS (5000), SLO_TPOT_MS (200), CLIENT_TIMEOUT (30),
#                         # MAX_QUEUE_TIME (4): the server's --max-queue-time, below the TTFT objective
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FLASHSERVE_BUILD_DIR:-$root/build}"
model="$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
duration="${DURATION:-600}"
sat_seconds="${SAT_SECONDS:-120}"
concurrency="${CONCURRENCY:-32}"
input_len="${INPUT_LEN:-64}"
output_len="${OUTPUT_LEN:-32}"
slo_ttft_ms="${SLO_TTFT_MS:-5000}"
slo_tpot_ms="${SLO_TPOT_MS:-200}"
client_timeout="${CLIENT_TIMEOUT:-30}"
max_queue_time="${MAX_QUEUE_TIME:-4}"
out="$root/bench/results/soak-$(date -u +%Y-%m-%d)-$(git -C "$root" rev-parse --short HEAD)"
port=8473
pid=""
sampler=""
trap '[ -n "$sampler" ] && kill "$sampler" 2> /dev/null; [ -n "$pid" ] && kill "$pid" 2> /dev/null || true' EXIT

"$build/server/flashserve" serve --model "$model" --host 127.0.0.1 --port "$port" --grpc-port 0 \
  --kv-cache-bytes $((1 << 30)) --max-queue-time "$max_queue_time" > "$out.server.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/ready" && break
  sleep 0.5
done
curl -sf -o /dev/null "http://127.0.0.1:$port/ready" || { echo "server not ready" >&2; exit 1; }

# RSS in KiB every 5 s, with the seconds since the server started.
t0=$(date +%s)
(while kill -0 "$pid" 2> /dev/null; do
   echo "$(($(date +%s) - t0)) $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")"
   sleep 5
 done) > "$out.rss.tsv" &
sampler=$!

bench() {  # name, flashserve-bench flags...
  local name="$1"
  shift
  "$build/client/flashserve-bench" --port "$port" --model "$(basename "$model" .gguf)" --input-len "$input_len" \
    --output-len "$output_len" --range-ratio 0.5 --seed 28 --timeout "$client_timeout" --slo-ttft-ms "$slo_ttft_ms" \
    --slo-tpot-ms "$slo_tpot_ms" --no-progress --json "$out-$name.json" "$@" > "$out-$name.txt" 2>&1 || true
}

echo "== saturation: closed loop, $concurrency in flight, ${sat_seconds} s"
bench saturation --concurrency "$concurrency" --duration "$sat_seconds" --num-requests 100000 --warmup "$concurrency"
rate1=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['request_throughput'], 3))" \
  "$out-saturation.json")
rate2=$(python3 -c "print(round(2 * $rate1, 3))")
echo "== 1x: $rate1 requests/s for ${duration} s"
bench rate1x --request-rate "$rate1" --duration "$duration" --num-requests 1000000 --interval 60
echo "== 2x: $rate2 requests/s for ${duration} s"
bench rate2x --request-rate "$rate2" --duration "$duration" --num-requests 1000000 --interval 60
kill -TERM "$pid"
wait "$pid" && stopped="exit 0" || stopped="exit $?"
pid=""

{
  echo "# soak on $(basename "$model"), $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo "# flags: $(grep -m1 -o 'flags.*' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx_vnni|fma)$' | xargs)"
  echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  flashserve commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "# server: --max-queue-time $max_queue_time, --kv-cache-bytes 1 GiB, other flags default; SIGTERM at the end: $stopped"
  echo "# workload: ~$input_len prompt words, $output_len output tokens (both +-50%), Poisson arrivals,"
  echo "#   clients give up after ${client_timeout} s; goodput = successes/s with TTFT <= ${slo_ttft_ms} ms and TPOT <= ${slo_tpot_ms} ms"
  python3 "$root/bench/serve/soak_report.py" "$out-saturation.json" "$out-rate1x.json" "$out-rate2x.json" "$out.rss.tsv"
} | tee "$out.txt"
echo "reports: $out.txt, $out-*.json, $out-*.txt, $out.rss.tsv, $out.server.log"
