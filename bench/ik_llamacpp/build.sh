#!/usr/bin/env bash
# Builds the higher anchor of issue 30: ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp, a llama.cpp
# fork with repacked K-quant CPU kernels), pinned to one commit, CPU only, native, Release, into
# .cache/ik_llamacpp/ (git-ignored): llama-bench and llama-server only. Not part of scripts/test.sh.
# Its source comes from a git directory holding that commit (a clone, or the snapshot the search
# tool's `fetch github:ikawrakow/ik_llama.cpp` brings), named by IK_LLAMA_GIT. Snapshots lack a few
# large blobs (vocab GGUFs under models/, web UI pages) that neither binary needs: those paths are
# left out of the checkout, and named.
#   IK_LLAMA_GIT=/path/to/repo.git bench/ik_llamacpp/build.sh   # JOBS=N, default nproc
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${FLASHSERVE_CACHE:-$root/.cache}/ik_llamacpp"
commit=8337e4cd3861406fc04e0854b1409cd1b027fbc9
git_dir="${IK_LLAMA_GIT:-/work/.mirror/ikawrakow+ik_llama.cpp/repo}"
src="$cache/src-${commit:0:12}"
build="$cache/build"
bin="$build/bin"
targets=(llama-bench llama-server)

if [ ! -f "$src/CMakeLists.txt" ]; then
  git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2> /dev/null ||
    { echo "ik_llamacpp: $git_dir does not hold commit $commit (set IK_LLAMA_GIT)" >&2; exit 1; }
  excludes=()
  while read -r path; do
    echo "ik_llamacpp: left out (not in the snapshot): $path"
    excludes+=(":(exclude)$path")
  done < <(git --git-dir="$git_dir" ls-tree -r "$commit" | awk '$2 == "blob" {print $3, $4}' |
             while read -r hash path; do
               git --git-dir="$git_dir" cat-file -e "$hash" 2> /dev/null || echo "$path"
             done)
  rm -rf "$src.tmp" && mkdir -p "$src.tmp"
  # git archive still names the blobs it skips on stderr: the ones listed above.
  git --git-dir="$git_dir" archive "$commit" -- . "${excludes[@]}" 2> /dev/null | tar -x -C "$src.tmp"
  mv "$src.tmp" "$src"
fi

# As bench/llamacpp/build.sh: no AMX (flashserve has no AMX kernels), no network at build time.
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
    -DGGML_IQK_FA_ALL_QUANTS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
    -DLLAMA_BUILD_SERVER=ON
fi
missing=()
for t in "${targets[@]}"; do [ -x "$bin/$t" ] || missing+=("$t"); done
if [ "${#missing[@]}" -gt 0 ]; then
  start=$SECONDS
  echo "ik_llamacpp: building ${missing[*]} with ${JOBS:-$(nproc)} jobs"
  nice -n 19 cmake --build "$build" --target "${missing[@]}" -j "${JOBS:-$(nproc)}"
  echo "ik_llamacpp: built in $((SECONDS - start)) s"
fi
echo "ik_llamacpp: commit   $commit"
echo "ik_llamacpp: binaries $bin"
for t in "${targets[@]}"; do echo "  $bin/$t"; done
