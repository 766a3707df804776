#!/usr/bin/env bash
# Installs every Debian package flashserve needs (idempotent, non-interactive), then fetches the
# default model. Safe to run again: it only installs what is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

packages=(
  build-essential cmake pkg-config ninja-build python3 python3-pip python3-venv unzip
  libpcre2-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libcpp-httplib-dev prometheus-cpp-dev
  libgtest-dev libbenchmark-dev prometheus python3-yaml gnuplot-nox
  libssl-dev clang-14 libclang-rt-14-dev llvm-14 qemu-user
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

"$here/fetch_model.sh"

# Python tools the tests compare against (pinned in tests/requirements.txt, in a venv of our own).
root="$(cd "$here/.." && pwd)"
venv="$root/.cache/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! cmp -s "$root/tests/requirements.txt" "$venv/.requirements"; then
  "$venv/bin/pip" install --quiet -r "$root/tests/requirements.txt"
  cp "$root/tests/requirements.txt" "$venv/.requirements"
fi

# Real chat templates for the Jinja engine's comparison test (.cache/templates, never committed).
"$here/fetch_templates.sh"
