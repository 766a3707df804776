// A Llama-family model on any backend (kernels/backend.h): weights mapped once (in place on the
// CPU, uploaded as stored on a GPU -- quantized weights are never expanded to a full copy), the
// paged KV pool in the backend's memory, and each step the layer sequence of llama_forward.cpp.
// Where the backend can record steps (CUDA graphs), decode steps -- one new token per sequence --
// are recorded once per batch-size bucket and replayed. Sampling happens on the backend too, so
// only tokens come back (and logits rows only when asked for).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>
#include "kernels/backend.h"
#include "kernels/recording_backend.h"
#include "model/model.h"
#include "model/model_runner.h"

namespace flashserve {

struct RunnerConfig {
  int32_t block_size = 16;
  kernels::DType kv_type = kernels::DType::F32;
  int32_t max_num_seqs = 64;             // the largest decode batch a recorded step is made for
  int32_t max_num_batched_tokens = 512;  // step buffers are sized for this many tokens up front
  bool record_steps = true;              // replay decode steps where the backend can record them
};

// Blocks in the KV pool, decided once weights and step buffers hold their memory: given what one
// block takes, it returns how many to allocate (runner_factory.h has the serving policy).
using KvPoolSizer = std::function<int32_t(const kernels::Backend&, size_t bytes_per_block)>;

class LlamaRunner : public ModelRunner {
 public:
  // Throws std::invalid_argument naming the first op the backend cannot run for this model (or a
  // bad option), std::runtime_error when the KV pool gets no block.
  LlamaRunner(const Model& model, std::unique_ptr<kernels::Backend> backend, const RunnerConfig& config,
              const KvPoolSizer& kv_blocks);
  ~LlamaRunner() override;

  int32_t vocab_size() const override;
  int32_t context_len() const override;
  int32_t num_kv_blocks() const override;
  int32_t block_size() const override;
  std::vector<int32_t> kv_group_windows() const override;
  ForwardOutput forward(const ForwardBatch& batch) override;
  const kernels::Backend& backend() const;

  // Bytes of one KV block of this model: K and V of the layers of one KV group (all layers unless
  // the model has sliding-window layers; model/kv_groups.h).
  static size_t kv_block_bytes(const ModelConfig& cfg, int32_t block_size, kernels::DType kv_type);
  // Every op, element type and shape a step of this model calls on its backend (the constructor
  // asks the backend about each before loading anything).
  static std::vector<kernels::OpUse> ops_needed(const Model& model, const RunnerConfig& config);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace flashserve
