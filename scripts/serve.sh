#!/usr/bin/env bash
# Sets everything up on a fresh machine and serves the default model (SmolLM2-135M-Instruct) on
# the CPU: OpenAI-compatible HTTP on 127.0.0.1:8000, gRPC on 127.0.0.1:50051. Extra arguments go
# to `flashserve serve` (e.g. --host 0.0.0.0 --port 9000 --api-key KEY). Ctrl-C stops it cleanly.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
exec "${FLASHSERVE_BUILD_DIR:-$root/build}/server/flashserve" serve \
  --model "$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$@"
