#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, everything under ASan and UBSan) into build-fuzz/ and runs
# each of them, or the ones named, over a scratch copy of its corpus (tests/fuzz/corpus/<target>/).
#
#   scripts/fuzz.sh [--seconds N] [--merge] [TARGET...]
#
#   --seconds N  how long each target runs (default 60)
#   --merge      afterwards, add the inputs that reached new code to the committed corpus
#
# Exits non-zero on a finding (crash, sanitizer report, leak, timeout, out of memory) and prints
# where the input that caused it was saved. $FLASHSERVE_FUZZ_BUILD_DIR overrides build-fuzz/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FLASHSERVE_FUZZ_BUILD_DIR:-$root/build-fuzz}"

seconds=60
merge=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# Release flags without -DNDEBUG: an assert a hostile input can reach is a finding too.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" \
  -DFLASHSERVE_FUZZ=ON -DFLASHSERVE_CUDA=OFF -DFLASHSERVE_BUILD_BENCH=OFF >/dev/null
if ((${#targets[@]} == 0)); then
  mapfile -t targets < "$build/tests/fuzz/fuzz_targets.txt"
fi
cmake --build "$build" --target "${targets[@]}"

# Sanitizer reports name functions and lines only with a symbolizer (Debian's llvm-14).
[ -x /usr/lib/llvm-14/bin/llvm-symbolizer ] && export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer

findings=0
for t in "${targets[@]}"; do
  corpus="$root/tests/fuzz/corpus/$t"
  scratch="$build/fuzz-runs/$t"
  rm -rf "$scratch"
  mkdir -p "$scratch/corpus" "$scratch/findings"
  cp "$corpus"/* "$scratch/corpus/"
  echo "fuzz.sh: $t for ${seconds}s over a copy of ${corpus#"$root"/} (log: $scratch/log)"
  # A target may have a dictionary of its input's tokens: tests/fuzz/<target>.dict.
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  # -timeout: an input that takes 10 s is a hang, not a slow case.
  if "$build/tests/fuzz/$t" "$scratch/corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$scratch/findings/" >"$scratch/log" 2>&1; then
    grep -E '^#[0-9]+[[:space:]]+DONE' "$scratch/log" || tail -n 3 "$scratch/log"
    if ((merge)); then
      before=$(find "$corpus" -type f | wc -l)
      "$build/tests/fuzz/$t" -merge=1 "$corpus" "$scratch/corpus" >"$scratch/merge.log" 2>&1
      echo "fuzz.sh: $t corpus $before -> $(find "$corpus" -type f | wc -l) inputs"
    fi
  else
    findings=1
    tail -n 40 "$scratch/log"
    for input in "$scratch/findings"/*; do
      [ -e "$input" ] || continue
      echo "fuzz.sh: FINDING in $t: $input"
      echo "fuzz.sh:   reproduce: $build/tests/fuzz/$t $input"
    done
  fi
done
exit "$findings"
