#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the default model (SmolLM2-135M-Instruct) on the
# CPU. Until the server lands this is the `generate` CLI; arguments replace the default prompt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
model="$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if (($#)); then
  exec "${FLASHSERVE_BUILD_DIR:-$root/build}/server/flashserve" generate --model "$model" "$@"
fi
exec "${FLASHSERVE_BUILD_DIR:-$root/build}/server/flashserve" generate --model "$model" --chat \
  --prompt "What is the capital of France?" --max-tokens 128
