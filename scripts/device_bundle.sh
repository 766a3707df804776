#!/usr/bin/env bash
# Packs what a lent GPU machine (see the device tool) needs to run our GPU tests and benchmarks.
# That machine has CUDA 13, CMake and PyTorch but none of our Debian libraries, and a call carries at
# most 64 MiB, the working tree and .git included: so the binaries built here travel with the shared
# libraries they load (CUDA's and the C/C++ runtimes excepted, which the machine has in newer
# versions), xz-compressed, and the 98 MB model is split across the first two calls. Ignored paths stay
# on the machine between calls while it is warm (30 s), so each call must follow the last at once.
#   ./scripts/device_bundle.sh  -> .device-1/ (run.sh, device.tar.xz, first part of the model)
#                                  .device-2/ (the rest of the model)
#                                  .device-3/ (run.sh, device.tar.xz, suites.tar.xz, a tokenizer, the gguf wheel)
# Device calls: carry [".device-1"] with `bash .device-1/run.sh part1` (op tests, compute-sanitizer),
# then at once carry [".device-2"] with `bash .device-1/run.sh part2` (runner tests, benchmarks,
# serving), then, if wanted, at once carry [".device-3"] with `bash .device-3/run.sh suites` (the
# server test suites on the GPU). Alone: carry [".device-3"] with `bash .device-3/run.sh big`
# (synthetic Llama-3-8B-shaped models, Q4_0 and BF16, served under load). Raw output comes back
# under $OUT; commit it under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${FLASHSERVE_BUILD_DIR:-build}"
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"

targets=(flashserve flashserve-bench test_backend_ops test_cuda_ops test_cuda_runner bench_cuda_ops bench_cuda_decode)
# The server suites, run there against the GPU (device_run.sh's `suites`).
suites=(test_http test_grpc test_http_errors test_http_tools test_http_disconnect test_hostile_input test_api_key
        test_client_http test_client_grpc test_limits test_prometheus_scrape test_serve_lifecycle
        test_binary_end_to_end test_grpc_lifecycle test_overload test_auth_tls)
targets+=("${suites[@]}")
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHSERVE_CUDA_ARCHS=90 >/dev/null
cmake --build "$build" --target "${targets[@]}"

rm -rf .device .device-1 .device-2 .device-3
mkdir -p .device/bin .device/lib .device-1 .device-2 .device-3
for t in "${targets[@]}"; do
  find "$build" -type f -name "$t" -perm -u+x -exec cp {} .device/bin/ \;
done
strip .device/bin/*
# Shared libraries the binaries load, less those the GPU machine provides itself.
ldd .device/bin/* | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libgomp|libcuda|libcudart|libcublas|libcublasLt)\.so' |
  xargs -r cp -L -t .device/lib/
git rev-parse HEAD >.device/commit
echo "${suites[@]}" >.device/suites
pwd >.device/source_dir
model=".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || ./scripts/fetch_model.sh
sha256sum "$model" | cut -d' ' -f1 >.device/model.sha256
# The suites' binaries travel in the third call, so the first two keep room for the model.
(cd .device/bin && tar -cf - "${suites[@]}") | xz -9 -T2 >.device-3/suites.tar.xz
(cd .device/bin && rm "${suites[@]}")
tar -cf - .device | xz -9 -T2 >.device-1/device.tar.xz
cp scripts/device_run.sh .device-1/run.sh
cp .device-1/device.tar.xz .device-1/run.sh .device-3/
# The synthetic models' tokenizer (bench/synthetic_gguf.py copies it), and the package that writes them.
.cache/venv/bin/python - "$model" <<'PY'
import sys
sys.path.insert(0, "bench")
from gguf import GGUFWriter
from synthetic_gguf import copy_tokenizer
w = GGUFWriter(".device-3/tokenizer.gguf", "llama")
copy_tokenizer(w, sys.argv[1])
w.write_header_to_file()
w.write_kv_data_to_file()
w.close()
PY
.cache/venv/bin/pip download -q --no-deps --only-binary=:all: -d .device-3 "$(grep '^gguf==' tests/requirements.txt)"

# Each call carries its folder, the working tree and .git: 64 MiB in all, less a margin. The model is
# xz-compressed (98 -> 90 MB) and the stream split across the two folders.
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)
limit=$((64 * 1024 * 1024 - tree - $(du -sb .git | cut -f1) - 1000000))
xz -9 -T2 -c "$model" >.device/model.xz
first=$((limit - $(stat -c %s .device-1/device.tar.xz) - $(stat -c %s .device-1/run.sh)))
size=$(stat -c %s .device/model.xz)
[ $((size - first)) -le $limit ] || { echo "device_bundle: the model does not fit in two calls" >&2; exit 1; }
head -c "$first" .device/model.xz >.device-1/model.part
tail -c +$((first + 1)) .device/model.xz >.device-2/model.part
rm .device/model.xz
du -sb .device-1 .device-2 .device-3
