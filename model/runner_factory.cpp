#include "model/runner_factory.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "kernels/threads.h"
#include "model/llama_runner.h"

namespace flashserve {
namespace {

using kernels::DType;

int32_t blocks_in(double budget, size_t bytes_per_block) {
  if (budget <= 0) return 0;
  return int32_t(std::min(budget / double(bytes_per_block), double(std::numeric_limits<int32_t>::max())));
}

// Called once weights and step buffers hold their memory, so a GPU's "used" includes them.
int32_t kv_blocks(const kernels::Backend& be, const RunnerOptions& o, size_t bytes_per_block) {
  double budget = double(o.kv_cache_bytes);
  if (o.kv_cache_bytes <= 0 && be.is_host()) {
    budget = o.kv_cache_fraction * double(o.host_memory_available);
  } else if (o.kv_cache_bytes <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    be.memory_info(free_bytes, total_bytes);
    budget = o.gpu_memory_fraction * double(total_bytes) - double(total_bytes - free_bytes);
    if (budget < double(bytes_per_block)) {
      throw std::runtime_error("GPU memory: weights and activations use " +
                               std::to_string((total_bytes - free_bytes) >> 20) + " MiB of " +
                               std::to_string(total_bytes >> 20) + " MiB, leaving no KV block within the memory fraction " +
                               std::to_string(o.gpu_memory_fraction));
    }
  }
  const int32_t blocks = blocks_in(budget, bytes_per_block);
  if (blocks < 1) {
    throw std::invalid_argument("the KV cache budget of " + std::to_string(int64_t(budget)) + " bytes holds no block of " +
                                std::to_string(bytes_per_block) + " bytes");
  }
  return blocks;
}

DType kv_cache_type(const std::string& name, bool cuda) {
  if (name.empty()) return cuda ? DType::F16 : DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "fp8" || name == "fp8_e4m3") return DType::F8_E4M3;  // vLLM's names
  if (cuda && name == "bf16") return DType::BF16;
  if (!cuda && name == "f32") return DType::F32;
  if (!cuda && name == "q8_0") return DType::Q8_0;
  throw std::invalid_argument("--kv-cache-dtype must be " +
                              std::string(cuda ? "f16, bf16 or fp8" : "f16, f32, q8_0 or fp8") + " on the " +
                              (cuda ? "GPU" : "CPU") + ", not '" + name + "'");
}

bool wants_cuda(const std::string& device) {
  if (device == "cuda") return true;
  if (device == "cpu") return false;
  if (device == "auto") return kernels::cuda_device_count() > 0;
  throw std::invalid_argument("--device must be cpu, cuda or auto, not '" + device + "'");
}

}  // namespace

std::unique_ptr<ModelRunner> make_runner(const Model& model, const RunnerOptions& o) {
  const bool cuda = wants_cuda(o.device);
  const DType kv_type = kv_cache_type(o.kv_dtype, cuda);
  if (o.gpu_memory_fraction <= 0.0 || o.gpu_memory_fraction > 1.0) throw std::invalid_argument("memory fraction must be in (0, 1]");
  RunnerConfig c;
  c.block_size = o.block_size;
  c.kv_type = kv_type;
  c.max_num_seqs = o.max_num_seqs;
  c.max_num_batched_tokens = o.max_num_batched_tokens;
  c.record_steps = o.cuda_graphs;
  auto backend = cuda ? kernels::make_cuda_backend(o.batch_invariant)
                      : kernels::make_cpu_backend(o.cpu_q8_activations);  // throws first without a GPU
  if (!cuda && o.kv_cache_bytes <= 0) {
    spdlog::info("KV cache budget: {:.0f}% of {} MiB available", o.kv_cache_fraction * 100, o.host_memory_available >> 20);
  }
  auto runner = std::make_unique<LlamaRunner>(model, std::move(backend), c,
                                              [&](const kernels::Backend& be, size_t bytes) { return kv_blocks(be, o, bytes); });
  spdlog::info("device: {}, KV cache {}: {} blocks ({} tokens){}", runner->backend().name(),
               kernels::dtype_name(c.kv_type), runner->num_kv_blocks(),
               int64_t(runner->num_kv_blocks()) * runner->block_size(),
               cuda ? (c.record_steps ? ", CUDA graphs on" : ", CUDA graphs off") : "");
  return runner;
}

void set_cpu_threads(int n) { kernels::set_num_threads(n); }

void set_cpu_kernels(const std::string& name) {
  std::string supported;
  for (kernels::CpuIsa isa : kernels::supported_cpu_isas()) supported += std::string(" ") + kernels::cpu_isa_name(isa);
  if (name != "auto") {
    const std::optional<kernels::CpuIsa> isa = kernels::parse_cpu_isa(name);
    if (!isa) {
      throw std::invalid_argument("--cpu-kernels must be auto, scalar, avx2, avx2-vnni, avx512, avx512-vnni or avx512-amx, not '" + name + "'");
    }
    kernels::set_cpu_isa(*isa);
  }
  spdlog::info("CPU kernels: {} ({}; this CPU runs:{})", kernels::cpu_isa_name(kernels::cpu_isa()),
               name == "auto" ? "the best this CPU runs" : "forced by --cpu-kernels", supported);
}

}  // namespace flashserve
