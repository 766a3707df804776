// Builds the runner a deployment asks for: picks the backend (--device), sizes the KV pool -- the
// one place that policy lives -- and logs what it chose. Callers (server/, bench/) pass flags in.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include "model/model.h"
#include "model/model_runner.h"

namespace flashserve {

struct RunnerOptions {
  std::string device = "auto";     // cpu, cuda, or auto (cuda when a GPU is visible)
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  // The KV pool: exactly kv_cache_bytes when > 0; else on the CPU kv_cache_fraction of
  // host_memory_available (the server reads MemAvailable and cgroup limits), on a GPU what
  // gpu_memory_fraction of its memory leaves once weights and activations are in place.
  int64_t kv_cache_bytes = 0;
  double kv_cache_fraction = 0.2;
  int64_t host_memory_available = 0;
  double gpu_memory_fraction = 0.9;
  // The KV cache's element type: f16 or bf16 on a GPU, f32 or f16 on the CPU; empty: the device's
  // default, f16 on a GPU and f32 (exact, the reference) on the CPU.
  std::string kv_dtype;
  bool cuda_graphs = true;
  // GPU: a request's tokens are the same alone as in any batch (kernels::make_cuda_backend); the CPU
  // always is, so there it changes nothing.
  bool batch_invariant = false;
  bool cpu_q8_activations = false;  // CPU: 8-bit activations and integer dots where the weights allow
};

// Throws std::invalid_argument for options or a model the chosen backend cannot run (naming what),
// std::runtime_error when a GPU is asked for and none is usable or the KV budget holds no block.
std::unique_ptr<ModelRunner> make_runner(const Model& model, const RunnerOptions& options);

// Worker threads the CPU kernels use (0: one per physical core).
void set_cpu_threads(int n);

// The compiled copy of the CPU kernels to run: "auto" (the best this CPU supports) or a level of
// kernels/cpu_isa.h ("scalar", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "avx512-amx"). Logs the choice. Throws
// std::invalid_argument for an unknown name or a level this CPU cannot run.
void set_cpu_kernels(const std::string& name);

}  // namespace flashserve
