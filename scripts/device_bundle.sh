#!/usr/bin/env bash
# Packs what a lent GPU machine (see the device tool) needs to run our GPU tests and benchmarks.
# That machine has CUDA 13, CMake and PyTorch but none of our Debian libraries, and a call carries at
# most 64 MiB: so the binaries built here travel with the shared libraries they load (CUDA's and the
# C/C++ runtimes excepted, which the machine has in newer versions). Each of the three folders it
# writes is under 64 MiB (the 98 MB model in two halves), so each travels in its own call; ignored
# paths stay on the machine between calls while it is warm, and the model is joined there.
#   ./scripts/device_bundle.sh   -> .device/ (~42 MiB: bin/, lib/, run.sh), .device-model-1/, .device-model-2/
# Device calls: carry [".device-model-1"] (command `true`), then [".device-model-2"], then [".device"]
# with `.device/run.sh join-model && .device/run.sh tests`; later `.device/run.sh bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${FLASHSERVE_BUILD_DIR:-build}"
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"

targets=(flashserve flashserve-bench test_backend_ops test_cuda_ops test_cuda_runner bench_cuda_ops bench_cuda_decode)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHSERVE_CUDA_ARCHS=90 >/dev/null
cmake --build "$build" --target "${targets[@]}"

rm -rf .device .device-model-1 .device-model-2
mkdir -p .device/bin .device/lib .device-model-1 .device-model-2
for t in "${targets[@]}"; do
  find "$build" -type f -name "$t" -perm -u+x -exec cp {} .device/bin/ \;
done
# Shared libraries the binaries load, less those the GPU machine provides itself.
ldd .device/bin/* | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libgomp|libcuda|libcudart|libcublas|libcublasLt)\.so' |
  xargs -r cp -L -t .device/lib/
git rev-parse HEAD >.device/commit

model=".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || ./scripts/fetch_model.sh
half=$(( ($(stat -c %s "$model") + 1) / 2 ))
head -c "$half" "$model" >.device-model-1/part
tail -c +$((half + 1)) "$model" >.device-model-2/part
sha256sum "$model" | cut -d' ' -f1 >.device/model.sha256

cat >.device/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine from the repository root. $OUT (the device tool's) collects raw output.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLASHSERVE_MODEL="$here/../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
out="${OUT:-/tmp}"
case "${1:-}" in
  join-model)
    mkdir -p "$(dirname "$FLASHSERVE_MODEL")"
    cat "$here/../.device-model-1/part" "$here/../.device-model-2/part" >"$FLASHSERVE_MODEL"
    echo "$(cat "$here/model.sha256")  $FLASHSERVE_MODEL" | sha256sum -c - ;;
  tests)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/tests.txt"
    "$here/bin/test_backend_ops" 2>&1 | tee -a "$out/tests.txt"
    "$here/bin/test_cuda_ops" 2>&1 | tee -a "$out/tests.txt"
    "$here/bin/test_cuda_runner" 2>&1 | tee -a "$out/tests.txt"
    compute-sanitizer --tool memcheck "$here/bin/test_cuda_ops" --gtest_brief=1 2>&1 | tail -5 | tee -a "$out/tests.txt"
    compute-sanitizer --tool racecheck "$here/bin/test_cuda_ops" --gtest_brief=1 2>&1 | tail -5 | tee -a "$out/tests.txt" ;;
  bench)  # kernels against PyTorch (bench/kernels/run_gpu.sh), then end-to-end decode
    GIT_COMMIT="$(cat "$here/commit")" BENCH_BIN="$here/bin/bench_cuda_ops" bash "$here/../bench/kernels/run_gpu.sh" all
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/decode.txt"
    "$here/bin/bench_cuda_decode" 2>&1 | tee -a "$out/decode.txt" ;;
  *) echo "usage: run.sh join-model|tests|bench" >&2; exit 2 ;;
esac
RUN
chmod +x .device/run.sh
du -sh .device .device-model-1 .device-model-2
