#!/usr/bin/env bash
# Builds the llama.cpp anchor: the llama.cpp vendored in the PyPI sdist of llama-cpp-python (pinned,
# sha256-checked), CPU only, native, Release, into .cache/llamacpp/ (git-ignored), plus our
# dump_logits tool compiled against its libllama. Idempotent: what is built is skipped.
# Not part of scripts/test.sh (it takes ~20 min on 2 cores).
#   bench/llamacpp/build.sh            # build (JOBS=N to change the parallelism, default nproc)
#   ISA=avx2 bench/llamacpp/build.sh   # a second build, into build-avx2/, using AVX2 at most: what an
#                                      # AVX2-only machine runs, for comparing there on an AVX-512 one
# Prints the paths of the binaries at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${FLASHSERVE_CACHE:-$root/.cache}/llamacpp"
version=0.3.36
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
src="$cache/llama_cpp_python-$version/vendor/llama.cpp"
isa="${ISA:-native}"
case "$isa" in
  # Without AMX: llama.cpp 0.3.36's AMX matmul crashes on a Sapphire Rapids VM (SIGSEGV in
  # ggml_backend_amx_mul_mat on every model), and flashserve has no AMX kernels, so like for like.
  native) build="$cache/build"
          isa_flags=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                     "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16") ;;
  avx2) build="$cache/build-avx2"
        isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                   -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF) ;;
  *) echo "llamacpp: ISA must be native or avx2, not '$isa'" >&2; exit 2 ;;
esac
bin="$build/bin"
jobs="${JOBS:-$(nproc)}"
targets=(llama-quantize llama-bench llama-server llama-tokenize llama-gguf-split)

# 1. Source: the sdist from PyPI, checked, unpacked once.
if [ ! -f "$src/include/llama.h" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "llamacpp: downloading the llama-cpp-python==$version sdist from PyPI"
  python3 -m pip download --quiet --no-binary :all: --no-deps -d "$tmp" "llama-cpp-python==$version"
  tarball="$tmp/llama_cpp_python-$version.tar.gz"
  echo "$sdist_sha  $tarball" | sha256sum -c --quiet
  tar -xzf "$tarball" -C "$cache"
fi

# 2. llama.cpp itself. No network at build time: no prebuilt web UI, no OpenSSL/curl downloads.
# A build configured with other flags (an older version of this script) is started over.
stamp="$build/flashserve-flags.txt"
if [ -f "$build/build.ninja" ] && [ "$(cat "$stamp" 2>/dev/null)" != "${isa_flags[*]}" ]; then
  echo "llamacpp: $build was configured with other flags; building it again"
  rm -rf "$build"
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF "${isa_flags[@]}" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  echo "${isa_flags[*]}" > "$stamp"
fi
missing=()
for t in "${targets[@]}"; do [ -x "$bin/$t" ] || missing+=("$t"); done
if [ "${#missing[@]}" -gt 0 ]; then
  start=$SECONDS
  echo "llamacpp: building ${missing[*]} with $jobs jobs"
  nice -n 19 cmake --build "$build" --target "${missing[@]}" -j "$jobs"
  echo "llamacpp: built in $((SECONDS - start)) s"
fi

# 3. Our tool, against the built libllama (shared, in $bin; rpath so it runs from anywhere).
tool="$bin/dump_logits"
tool_src="$root/bench/llamacpp/dump_logits.cpp"
if [ ! -x "$tool" ] || [ "$tool_src" -nt "$tool" ]; then
  echo "llamacpp: compiling dump_logits"
  nice -n 19 g++ -std=c++17 -O2 -Wall -Wextra -I"$src/include" -I"$src/ggml/include" "$tool_src" \
    -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin" -o "$tool"
fi

echo "llamacpp: source   $src"
echo "llamacpp: binaries $bin"
for t in "${targets[@]}" dump_logits; do echo "  $bin/$t"; done
