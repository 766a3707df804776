#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs every test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
ctest --test-dir "${FLASHSERVE_BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)"
# A short libFuzzer pass (clang, ASan + UBSan) over every fuzz target; scripts/fuzz.sh runs longer ones.
"$root/scripts/fuzz.sh" --seconds 20
