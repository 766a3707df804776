#!/usr/bin/env bash
# The engine's host overhead per decode step before and after the incremental step contract,
# alternating the builds named in SIDES (default "BEFORE AFTER", each a variable holding a
# bench_engine path), ROUNDS rounds (default 3) of 3 repetitions each.
#   BEFORE=/path/to/bench_engine-at-1bbb914 AFTER=build/bench/bench_engine run.sh
set -euo pipefail
rounds=${ROUNDS:-3}
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400
for ((r = 1; r <= rounds; ++r)); do
  for side in ${SIDES:-BEFORE AFTER}; do
    echo "== round $r $side"
    "${!side}" --benchmark_filter=StepOverhead --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      2>/dev/null | grep -E "_median"
  done
done
