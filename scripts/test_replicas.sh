#!/usr/bin/env bash
# Replicas behind the Shepherd Model Gateway (smg, pinned in tests/requirements.txt), run and
# measured on this machine. Takes minutes, so it is not part of the README's test command.
#
#   scripts/test_replicas.sh [OUT_DIR]      (default bench/results/replicas-<date>/)
#
# Environment: REPLICAS (3), REQUESTS per policy (160), RATE requests/s, Poisson (0.8), TENANTS (8),
# PREFIX_WORDS per tenant's system prompt (960: 1,000+ tokens), KV_MIB per replica (100: room for
# about four tenants' prompts, not all eight), THREADS per replica (1).
#
# 1. REPLICAS x `flashserve serve` (SmolLM2) on loopback ports, one gateway per policy:
#    `smg launch --policy cache_aware`, then `--policy round_robin`, each on fresh replicas (empty
#    prefix caches). flashserve-bench sends the same multi-tenant shared-prefix workload
#    (bench/replicas/tenants.py) through the gateway; per-replica prefix-cache hit rates come from
#    each replica's /metrics. Both runs go into report.md side by side.
# 2. cache_aware again, with one replica killed (SIGKILL) a third of the way in and restarted on
#    its port 20 s later: what clients saw (errors), whether the gateway stopped sending to it and
#    whether it rejoined (its /workers status, requests it served after the restart).
# Raw bench JSON, gateway and replica logs stay in OUT_DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh" > /dev/null
"$root/scripts/build.sh" > /dev/null
build="${FLASHSERVE_BUILD_DIR:-$root/build}"
py="$root/.cache/venv/bin/python"
smg="$root/.cache/venv/bin/smg"
model="$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
name=SmolLM2-135M-Instruct.Q4_1
out="${1:-$root/bench/results/replicas-$(date -u +%Y-%m-%d)}"
replicas="${REPLICAS:-3}" requests="${REQUESTS:-160}" rate="${RATE:-0.8}"
tenants="${TENANTS:-8}" prefix_words="${PREFIX_WORDS:-960}" kv_mib="${KV_MIB:-100}" threads="${THREADS:-1}"
mkdir -p "$out"
"$py" "$root/bench/replicas/tenants.py" "$out/workload.jsonl" --tenants "$tenants" --requests "$requests" \
  --prefix-words "$prefix_words"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() {  # URL: until it answers 200 (60 s)
  for _ in $(seq 600); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "test_replicas: $1 never answered" >&2; return 1
}

declare -a ports rpids
start_replica() {  # INDEX LOG
  "$build/server/flashserve" --threads "$threads" serve --model "$model" --host 127.0.0.1 --port "${ports[$1]}" \
    --grpc-port 0 --kv-cache-bytes $((kv_mib << 20)) > "$2" 2>&1 &
  rpids[$1]=$!
  pids+=($!)
}
start_replicas() {  # TAG
  for i in $(seq 0 $((replicas - 1))); do
    ports[$i]=$(free_port)
    start_replica "$i" "$out/$1-replica$i.log"
  done
  for i in $(seq 0 $((replicas - 1))); do wait_for "http://127.0.0.1:${ports[$i]}/ready"; done
}
stop_replicas() { for i in $(seq 0 $((replicas - 1))); do kill -9 "${rpids[$i]}" 2> /dev/null || true; done; }

start_gateway() {  # POLICY TAG -> gateway_port
  gateway_port=$(free_port)
  local urls=()
  for i in $(seq 0 $((replicas - 1))); do urls+=("http://127.0.0.1:${ports[$i]}"); done
  "$smg" launch --host 127.0.0.1 --port "$gateway_port" --policy "$1" --health-check-endpoint /ready \
    --health-check-interval-secs 1 --load-monitor-interval 1 --worker-startup-check-interval 1 \
    --prometheus-host 127.0.0.1 --prometheus-port "$(free_port)" --worker-urls "${urls[@]}" > "$out/$2-smg.log" 2>&1 &
  gateway_pid=$!
  pids+=($!)
  for _ in $(seq 600); do
    [ "$(curl -s "http://127.0.0.1:$gateway_port/workers" | "$py" -c \
      'import json,sys; print(sum(w.get("is_healthy", False) for w in json.load(sys.stdin).get("workers", [])))' \
      2> /dev/null || echo 0)" = "$replicas" ] && return 0
    sleep 0.1
  done
  echo "test_replicas: the gateway never saw $replicas healthy workers" >&2; return 1
}

# Per replica: prefix-cache hit tokens and queried tokens so far ("hits queries" lines).
cache_counters() {
  for i in $(seq 0 $((replicas - 1))); do
    curl -s "http://127.0.0.1:${ports[$i]}/metrics" | awk '
      /^flashserve_prefix_cache_hits_total/ {h=$2} /^flashserve_prefix_cache_queries_total/ {q=$2}
      END {printf "%d %d\n", h, q}'
  done
}

bench() {  # TAG: the workload through the gateway
  "$build/client/flashserve-bench" --host 127.0.0.1 --port "$gateway_port" --model "$name" \
    --dataset "$out/workload.jsonl" --num-requests "$requests" --request-rate "$rate" --burstiness 1 \
    --seed 7 --no-progress --json "$out/$1.json" > "$out/$1.txt"
}

run_policy() {  # POLICY
  start_replicas "$1"
  start_gateway "$1" "$1"
  cache_counters > "$out/$1-cache-before.txt"
  bench "$1"
  cache_counters > "$out/$1-cache-after.txt"
  kill -9 "$gateway_pid"
  stop_replicas
}

echo "test_replicas: $replicas replicas, $tenants tenants x $prefix_words-word prefixes, $requests requests at $rate/s"
run_policy cache_aware
run_policy round_robin

# Kill and rejoin, under cache_aware.
start_replicas failover
start_gateway cache_aware failover
victim=$((replicas - 1))
(
  sleep "$("$py" -c "print($requests / $rate / 3)")"
  kill -9 "${rpids[$victim]}"
  echo "killed replica $victim at $(date -u +%T)"
  sleep 3
  curl -s "http://127.0.0.1:$gateway_port/workers" > "$out/failover-workers-after-kill.json"
  sleep 17
  start_replica "$victim" "$out/failover-replica$victim-restarted.log"
  echo "restarted replica $victim at $(date -u +%T) (pid ${rpids[$victim]})"
  wait_for "http://127.0.0.1:${ports[$victim]}/ready"
  sleep 5
  curl -s "http://127.0.0.1:$gateway_port/workers" > "$out/failover-workers-after-restart.json"
) > "$out/failover-events.txt" 2>&1 &
killer=$!
bench failover || true  # the requests the killed replica held fail: the bench says so in its exit status
wait "$killer" || true
restarted_served=$(curl -s "http://127.0.0.1:${ports[$victim]}/metrics" |
  awk '/^flashserve_request_success_total/ {n += $2} END {print n + 0}')
echo "$restarted_served" > "$out/failover-restarted-served.txt"

"$py" "$root/bench/replicas/report.py" "$out" "$replicas" | tee "$out/report.md"
