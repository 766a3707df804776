#!/usr/bin/env bash
# The container image end to end. Takes minutes, so it is not part of the README's test command.
#
#   scripts/test_image.sh
#
# Builds the CPU image (scripts/build_image.sh) and Debian's Prometheus image, then:
#   1. runs flashserve:cpu with the default model mounted and settings passed as variables; waits
#      for Docker's health check to say healthy; checks the server runs as a user other than root;
#   2. a chat completion over HTTP and streamed completions over gRPC (flashserve-bench, from the
#      image, in the container's network);
#   3. SIGTERM (docker stop) in the middle of a stream: the stream ends properly, the server logs
#      the drain and exits 0;
#   4. deploy/compose.yaml (flashserve + Prometheus): after some traffic Prometheus scrapes
#      flashserve and every query of the Grafana dashboard returns data; gRPC works there too, and
#      `docker-compose stop` ends flashserve with exit code 0.
# Prints one line per check; exits non-zero at the first failure, with the container's log.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
docker() {
  if [ -x /usr/bin/docker ]; then /usr/bin/docker "$@"; else command docker "$@"; fi
}
name=flashserve-image-test
project=flashserve-image-test
scratch="$(mktemp -d)"

"$root/scripts/build_image.sh"
"$root/scripts/build_image.sh" --prometheus
"$root/scripts/fetch_model.sh" > /dev/null
model="$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if ! command -v docker-compose > /dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose
fi

compose() {
  FLASHSERVE_MODEL="$model" FLASHSERVE_MODEL_NAME=smollm2 FLASHSERVE_HTTP_PORT="$compose_http" \
    FLASHSERVE_GRPC_HOST_PORT="$compose_grpc" PROMETHEUS_PORT="$compose_prom" \
    docker-compose -p "$project" -f "$root/deploy/compose.yaml" "$@"
}
cleanup() {
  docker rm -f "$name" > /dev/null 2>&1 || true
  [ -n "${compose_http:-}" ] && compose down -v > /dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

ok() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  docker logs "$name" 2>&1 | tail -40 || true
  exit 1
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_healthy() {  # container, seconds
  local status=""
  for ((i = 0; i < $2; i++)); do
    status="$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$1")"
    [ "$status" = healthy ] && { echo "$i"; return 0; }
    [ "$(docker inspect -f '{{.State.Running}}' "$1")" = true ] || return 1
    sleep 1
  done
  return 1
}
grpc_check() {  # container: 4 streamed Generate calls from flashserve-bench in its network
  docker run --rm --network "container:$1" --entrypoint bash flashserve:cpu -c \
    'flashserve-bench --backend grpc --grpc-address 127.0.0.1:50051 --model smollm2 --num-requests 4 \
       --input-len 16 --output-len 8 --no-progress --json /tmp/r.json > /dev/null && cat /tmp/r.json' \
    | json_check 'r["num_ok"] == 4 and r["total_output_tokens"] == 32' > /dev/null
}
json_check() {  # python expression over `r`, the JSON on stdin
  python3 -c "import json, sys; r = json.load(sys.stdin); ok = $1; print(ok if not isinstance(ok, bool) else ''); sys.exit(0 if ok else 1)"
}

# ---- 1. run, healthy, not root ----
http="$(free_port)"
grpc="$(free_port)"
docker run -d --name "$name" -p "127.0.0.1:$http:8000" -p "127.0.0.1:$grpc:50051" \
  -v "$model:/models/model.gguf:ro" -e FLASHSERVE_SERVED_MODEL_NAME=smollm2 -e FLASHSERVE_MAX_NUM_SEQS=8 \
  flashserve:cpu > /dev/null
seconds="$(wait_healthy "$name" 180)" || fail "the container did not become healthy"
ok "healthy after ${seconds} s (Docker's HEALTHCHECK)"
uid="$(docker exec "$name" id -u)"
[ "$uid" != 0 ] || fail "the server runs as root"
ok "runs as uid $uid ($(docker exec "$name" id -un)), not root"
curl -sf "localhost:$http/v1/models" | json_check 'r["data"][0]["id"] == "smollm2"' > /dev/null \
  || fail "FLASHSERVE_SERVED_MODEL_NAME did not name the model"
ok "settings from variables: the model is served as 'smollm2'"

# ---- 2. HTTP and gRPC ----
answer="$(curl -sf "localhost:$http/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "smollm2", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}' \
  | json_check 'r["choices"][0]["message"]["content"]')" || fail "chat completion"
ok "chat completion: ${answer//$'\n'/ }"
grpc_check "$name" || fail "gRPC Generate"
ok "gRPC: 4 streamed Generate calls, 32 tokens (flashserve-bench from the image)"

# ---- 3. SIGTERM mid-stream ----
curl -sN "localhost:$http/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": true, "stream": true}' \
  > "$scratch/stream" &
stream_pid=$!
for _ in $(seq 100); do [ "$(grep -c '^data:' "$scratch/stream" || true)" -ge 5 ] && break; sleep 0.1; done
docker stop -t 60 "$name" > /dev/null
wait "$stream_pid" || true
code="$(docker inspect -f '{{.State.ExitCode}}' "$name")"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
docker logs "$name" 2>&1 | grep -q "received Terminated" || fail "the server did not log the drain"
tail -n 2 "$scratch/stream" | grep -q '^data: \[DONE\]' || fail "the stream did not end with [DONE]"
tokens="$(grep -c '"text"' "$scratch/stream")"
ok "SIGTERM mid-stream: the stream finished ($tokens chunks, then [DONE]), exit code 0"
docker rm "$name" > /dev/null

# ---- 4. compose: flashserve + Prometheus ----
compose_http="$(free_port)"
compose_grpc="$(free_port)"
compose_prom="$(free_port)"
compose up -d > "$scratch/compose.log" 2>&1 || { cat "$scratch/compose.log"; fail "docker-compose up"; }
flashserve_container="$(compose ps -q flashserve)"
seconds="$(wait_healthy "$flashserve_container" 180)" || fail "compose: flashserve did not become healthy"
ok "compose: flashserve healthy after ${seconds} s"
traffic() {
  for i in 1 2 3 4; do
    curl -sf "localhost:$compose_http/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"model\": \"smollm2\", \"prompt\": \"hello $i\", \"max_tokens\": 8}" > /dev/null || fail "compose: completion"
  done
}
traffic
sleep 12  # two scrape intervals: rate() needs samples on both sides of the traffic
traffic
curl -sf "localhost:$compose_prom/api/v1/targets" | json_check \
  'any(t["health"] == "up" and t["labels"]["job"] == "flashserve" for t in r["data"]["activeTargets"])' > /dev/null \
  || fail "compose: Prometheus does not scrape flashserve"
ok "compose: Prometheus scrapes flashserve:8000"
python3 "$root/deploy/image/check_dashboard.py" "http://127.0.0.1:$compose_prom" smollm2 \
  "$root/deploy/grafana/dashboards/flashserve.json" 90 || fail "compose: dashboard queries"
ok "compose: every dashboard query returns data"
grpc_check "$flashserve_container" || fail "compose: gRPC Generate"
ok "compose: gRPC Generate"
compose stop -t 60 flashserve > /dev/null 2>&1
code="$(docker inspect -f '{{.State.ExitCode}}' "$flashserve_container")"
[ "$code" = 0 ] || fail "compose: exit code $code after SIGTERM"
ok "compose: docker-compose stop (SIGTERM) -> exit code 0"
echo "image tests passed"
