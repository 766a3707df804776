// The real model the end-to-end benchmarks run: $FLASHSERVE_MODEL, else the project cache
// (scripts/fetch_model.sh). Loaded once per process. $FLASHSERVE_THREADS sets the kernel threads,
// like flashserve's --threads (default: one per physical core), so a comparison can match another
// engine's thread count; $FLASHSERVE_CPU_KERNELS the kernel copy, like --cpu-kernels.
#pragma once
#include <cstdlib>
#include <memory>
#include <string>

#include "model/model.h"
#include "model/llama_runner.h"
#include "model/runner_factory.h"

namespace flashserve {

inline const Model& real_model() {
  static const auto m = [] {
    if (const char* threads = std::getenv("FLASHSERVE_THREADS")) set_cpu_threads(std::atoi(threads));
    if (const char* kernels = std::getenv("FLASHSERVE_CPU_KERNELS")) set_cpu_kernels(kernels);
    const char* env = std::getenv("FLASHSERVE_MODEL");
    return Model::load(env && *env ? env : FLASHSERVE_DEFAULT_MODEL);
  }();
  return *m;
}

// The real model through the serving factory with exactly `blocks` KV blocks (f32 on the CPU, f16
// on a GPU).
inline std::unique_ptr<ModelRunner> real_runner(const std::string& device, int32_t blocks, RunnerOptions o = {}) {
  o.device = device;
  const auto kv_type = device == "cuda" ? kernels::DType::F16 : kernels::DType::F32;
  o.kv_cache_bytes = blocks * int64_t(LlamaRunner::kv_block_bytes(real_model().config(), o.block_size, kv_type));
  return make_runner(real_model(), o);
}

}  // namespace flashserve
