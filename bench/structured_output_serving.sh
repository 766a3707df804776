#!/usr/bin/env bash
# Constrained decoding's cost in serving (issue 15): flashserve-bench closed loop at 16 streams,
# 128 words in / 128 tokens out, every request constrained to bench/schemas/orders.json (a nested
# schema no output completes within 128 tokens, so both sides generate exactly 128) against the same
# load unconstrained, alternating, ROUNDS times on one server; each run has prompts of its own, so
# neither finds the other's in the prefix cache. Prints the ratio of output tokens/s;
# raw reports go to bench/results/structured-output-<date>-<commit>/.
#
#   bench/structured_output_serving.sh        # after scripts/test.sh or cmake --build build
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
model="${MODEL:-$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
rounds="${ROUNDS:-2}"
port=18800
out="bench/results/structured-output-$(date -u +%F)-$(git rev-parse --short HEAD)"
mkdir -p "$out"
{
  echo "model: $model"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) logical cpus"
  echo "date: $(date -u +%FT%TZ); commit $(git rev-parse HEAD)"
} > "$out/machine.txt"
build/server/flashserve serve --model "$model" --port "$port" --grpc-port $((port + 1)) --served-model-name bench \
  > "$out/flashserve.log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/ready" > /dev/null && break; sleep 0.2; done
load() {  # name extra-args...
  local name=$1
  shift
  build/client/flashserve-bench --port "$port" --model bench --input-len 128 --output-len 128 --concurrency 16 \
    --num-requests 48 --warmup 16 --no-progress --json "$out/$name.json" "$@" > "$out/$name.txt" 2>&1
}
for r in $(seq 1 "$rounds"); do
  echo "structured output: round $r"
  load "plain.$r" --seed "$r"
  load "schema.$r" --seed $((r + 1000)) --json-schema bench/schemas/orders.json  # prompts of its own: none cached
done
python3 - "$out" "$rounds" <<'PY' | tee "$out/ratios.txt"
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for r in range(1, rounds + 1):
    p, s = (json.load(open(f"{out}/{k}.{r}.json")) for k in ("plain", "schema"))
    print(f"round {r}: output tok/s constrained {s['output_throughput']:.1f} / unconstrained {p['output_throughput']:.1f}"
          f" = {s['output_throughput'] / p['output_throughput']:.2f}x; median TPOT {s['tpot']['median_ms']:.0f} vs "
          f"{p['tpot']['median_ms']:.0f} ms; output tokens {s['total_output_tokens']} vs {p['total_output_tokens']}")
PY
