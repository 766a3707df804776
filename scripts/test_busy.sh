#!/usr/bin/env bash
# usage: scripts/test_busy.sh [--hogs N] [--runs R] [ctest arguments...]
# Runs ctest on the built tree (scripts/build.sh) R times while N busy loops (default: one per CPU)
# take the cores, as on a newcomer's machine that is never idle. No test may depend on an idle
# machine; this is how to show it. Prints each run's wall time and ctest's summary.
# Example, the load-sensitive suites three times: scripts/test_busy.sh --runs 3 -R "$(scripts/test_busy.sh --load-sensitive)"
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The emulated-GPU suites and those that start the server binary.
load_sensitive='_cuda_emu|serve_lifecycle|binary_end_to_end|grpc_lifecycle|auth_tls|test_limits|test_overload|dashboard_queries|prometheus_scrape|client_http|client_sweep|http_disconnect|openai_sdk'
if [ "${1:-}" = --load-sensitive ]; then echo "$load_sensitive"; exit 0; fi
hogs=$(nproc) runs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --hogs) hogs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) break ;;
  esac
done
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for _ in $(seq "$hogs"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "$hogs busy loops beside ctest on $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p'))"
status=0
for run in $(seq "$runs"); do
  start=$(date +%s)
  if ctest --test-dir "${FLASHSERVE_BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)" "$@" > "/tmp/test_busy_run$run.log" 2>&1; then
    result=passed
  else
    result=FAILED status=1
  fi
  echo "run $run: $result in $(( $(date +%s) - start )) s: $(grep -E 'tests passed' "/tmp/test_busy_run$run.log")"
  grep -E '\(Failed\)|\(Timeout\)|\(Not Run\)' "/tmp/test_busy_run$run.log" || true
done
exit $status
