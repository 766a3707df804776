#!/bin/sh
# usage: older_cpus.sh TEST_KERNELS FLASHSERVE [MODEL]
# Runs the kernel tests, and the server binary on the model when it is there, on CPUs older than
# this one, emulated by qemu-user: a Nehalem (x86-64-v2, no AVX) must pick the scalar copy of the
# CPU ops and a Haswell the AVX2 one, and pass. QEMU 7.2 raises SIGILL for AVX-512 instructions on
# either (it does not for AVX2 on a Nehalem: check_isa_isolation.sh covers that statically).
# Exits 77 (skipped) without qemu-x86_64.
set -eu
tests=$1 server=$2 model=${3:-}
command -v qemu-x86_64 >/dev/null || { echo "qemu-x86_64 not installed (Debian: qemu-user): skipped"; exit 77; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# SamplingOp.PicksTheReferencesToken samples thousands of vocabulary-sized rows, minutes under
# qemu's emulation of AVX (its sampling runs natively on every copy in test_kernels_on_<isa>).
expect() {  # cpu, expected "[ this CPU ]" line
  if ! qemu-x86_64 -cpu "$1" "$tests" --gtest_filter=-SamplingOp.PicksTheReferencesToken >"$log" 2>&1; then
    tail -30 "$log"
    echo "FAIL: test_kernels on an emulated $1" >&2
    exit 1
  fi
  if ! grep -qx "\[ this CPU \] $2" "$log"; then
    grep "this CPU" "$log" || true
    echo "FAIL: an emulated $1 should run '$2'" >&2
    exit 1
  fi
  echo "$1: runs '$2'; $(grep -E '^\[  PASSED  \]' "$log")"
}
expect Nehalem "scalar"
expect Haswell "scalar avx2"

if [ -n "$model" ] && [ -f "$model" ]; then
  if ! qemu-x86_64 -cpu Nehalem "$server" generate --model "$model" --prompt "The capital of France is" \
      --max-tokens 4 --kv-cache-bytes 8000000 >"$log" 2>&1 || ! grep -q "CPU kernels: scalar" "$log"; then
    tail -20 "$log"
    echo "FAIL: flashserve generate on an emulated Nehalem" >&2
    exit 1
  fi
  echo "Nehalem: flashserve generate ran on the scalar kernels: $(grep -E '^prompt:' "$log")"
else
  echo "no model at '$model' (scripts/fetch_model.sh): the server run was left out"
fi
