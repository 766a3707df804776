#!/usr/bin/env bash
# Host overhead per decode step before and after the block tables stayed on the backend
# (model/resident_tables.h) and the sampler kept its adjust list: the runner's share
# (bench_forward's BM_RunnerStepOverhead, the real model on a backend that runs nothing) and the
# engine's (bench_engine's BM_StepOverhead, with and without repetition_penalty). Alternates the
# build folders named in SIDES (default "BEFORE AFTER", each a variable holding a build/bench path),
# ROUNDS rounds (default 3) of 3 repetitions each.
#   BEFORE=/tmp/oldtree/build/bench AFTER=build/bench run.sh
set -euo pipefail
rounds=${ROUNDS:-3}
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400
for ((r = 1; r <= rounds; ++r)); do
  for side in ${SIDES:-BEFORE AFTER}; do
    echo "== round $r $side"
    for bench in "bench_forward --benchmark_filter=RunnerStepOverhead" "bench_engine --benchmark_filter=StepOverhead"; do
      set -- $bench
      "${!side}/$1" "$2" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "_median"
    done
  done
done
