#!/usr/bin/env bash
# Stages built programs for the runtime image: each binary into OUT/usr/local/bin, the CUDA
# libraries they load (from the toolkit they were built with) into OUT/usr/local/lib/flashserve-cuda,
# and into OUT/usr/share/flashserve/runtime-packages.txt the Debian packages that own every other
# shared library they load, so the runtime stage installs exactly what the build linked.
#
#   deploy/image/stage_binary.sh OUT BINARY...
set -euo pipefail
out="$1"
shift
mkdir -p "$out/usr/local/bin" "$out/usr/share/flashserve" "$out/usr/local/lib/flashserve-cuda"
: > "$out/usr/share/flashserve/runtime-packages.txt"
for binary in "$@"; do
  install -m 0755 "$binary" "$out/usr/local/bin/"
  ldd "$binary"
done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libcudart.so*|libcublas.so*|libcublasLt.so*)
      cp -L "$lib" "$out/usr/local/lib/flashserve-cuda/$(basename "$lib")"
      continue ;;
  esac
  real="$(realpath "$lib")"
  # usrmerge: a library found under /lib may be owned as /usr/lib, or the other way round.
  owner="$(dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true)"
  [ -n "$owner" ] || { echo "stage_binary: no Debian package owns $lib" >&2; exit 1; }
  echo "${owner%%:*}" >> "$out/usr/share/flashserve/runtime-packages.txt"
done
sort -u -o "$out/usr/share/flashserve/runtime-packages.txt" "$out/usr/share/flashserve/runtime-packages.txt"
echo "stage_binary: runtime packages: $(tr '\n' ' ' < "$out/usr/share/flashserve/runtime-packages.txt")"
echo "stage_binary: CUDA libraries: $(ls "$out/usr/local/lib/flashserve-cuda" | tr '\n' ' ')"
