#!/usr/bin/env bash
# One serve flag A/B on the CPU: flashserve serve with FLAG set to each of VALUES in turn (alternating,
# ROUNDS times), each value under the closed loops of bench/compare_llamacpp.sh (concurrency in CS,
# 4 x c requests after c warm-up ones, 128 in / 128 out), for every model file given. One server per
# value and round, nothing else running; then one table line per load (bench/serve/flag_ab_report.py).
#
#   FLAG=--max-step-ratio VALUES="0 1.7" bench/serve/flag_ab.sh OUT_DIR model.gguf...
#   # ROUNDS (2), CS ("8 16"), THREADS (2) override
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FLASHSERVE_BUILD_DIR:-$root/build}"
flag="${FLAG:?FLAG: the serve flag to vary}"
values="${VALUES:?VALUES: its values, space-separated}"
rounds="${ROUNDS:-2}"
cs="${CS:-8 16}"
threads="${THREADS:-2}"
out="${1:?usage: FLAG=... VALUES=... flag_ab.sh OUT_DIR model.gguf...}"
shift
[ $# -gt 0 ] || { echo "flag_ab: no model files given" >&2; exit 1; }
mkdir -p "$out"
port=18800
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null || true' EXIT

wait_ready() {
  for _ in $(seq 1 300); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/ready" && return 0
    kill -0 "$pid" 2> /dev/null || { echo "flag_ab: server exited during startup" >&2; return 1; }
    sleep 0.2
  done
  echo "flag_ab: server not ready after 60 s" >&2
  return 1
}

for model in "$@"; do
  name=$(basename "$model" .gguf)
  for r in $(seq 1 "$rounds"); do
    for v in $values; do
      "$build/server/flashserve" serve --model "$model" --threads "$threads" --host 127.0.0.1 --port "$port" \
        --grpc-port 0 --served-model-name bench "$flag" "$v" > "$out/$name.$v.$r.log" 2>&1 &
      pid=$!
      wait_ready
      for c in $cs; do
        "$build/client/flashserve-bench" --port "$port" --model bench --input-len 128 --output-len 128 \
          --no-progress --concurrency "$c" --num-requests $((4 * c)) --warmup "$c" --seed "$r" \
          --json "$out/$name.c$c.$v.$r.json" > "$out/$name.c$c.$v.$r.txt" 2>&1
      done
      kill "$pid"; wait "$pid" 2> /dev/null || true
      pid=""
    done
  done
done
"$root/.cache/venv/bin/python" "$root/bench/serve/flag_ab_report.py" "$out" | tee "$out/summary.txt"
