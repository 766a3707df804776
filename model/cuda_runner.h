// The forward pass on one NVIDIA GPU (CUDA builds only): weights uploaded once (quantized ones as
// they are stored, never expanded to a full-precision copy), the KV pool in device memory, and each
// step a sequence of our CUDA kernels on one stream. Decode steps -- one new token per sequence --
// are captured as CUDA graphs, one per batch-size bucket, and replayed.
#pragma once
#include <cstdint>
#include <memory>
#include "kernels/dtype.h"
#include "model/model_runner.h"

namespace flashserve {

struct CudaRunnerOptions {
  // Share of the device's memory this process may fill: weights, activations and the KV pool,
  // which takes whatever the rest leaves.
  double memory_fraction = 0.9;
  int64_t kv_cache_bytes = 0;  // > 0: the KV pool's size instead of what the fraction leaves
  int32_t block_size = 16;
  kernels::DType kv_type = kernels::DType::F16;  // F16 or BF16
  int32_t max_num_seqs = 64;             // the largest decode batch a graph is captured for
  int32_t max_num_batched_tokens = 512;  // activations are allocated for this many tokens up front
  bool cuda_graphs = true;
};

class CudaLlamaRunner : public ModelRunner {
 public:
  // Throws std::runtime_error without a CUDA device, or when the weights leave no room for a KV
  // block within the memory fraction; std::invalid_argument for options the kernels do not support.
  CudaLlamaRunner(const LlamaModel& model, const CudaRunnerOptions& options);
  ~CudaLlamaRunner() override;

  int32_t vocab_size() const override;
  int32_t context_len() const override;
  int32_t num_kv_blocks() const override;
  int32_t block_size() const override;
  // Same contract as the CPU runner; logits come back to the host only for the rows asked for.
  ForwardOutput forward(const ForwardBatch& batch) override;
  bool samples_on_device() const override { return true; }

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace flashserve
