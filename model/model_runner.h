// What the engine needs from a model: execute a batch plan over KV storage the runner owns. The
// scheduler decides which blocks a sequence uses; the runner only reads and writes them. Tests
// drive the engine with fakes of this interface.
#pragma once
#include <cstdint>
#include <memory>
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"

namespace flashserve {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t context_len() const = 0;
  virtual int32_t num_kv_blocks() const = 0;
  virtual int32_t block_size() const = 0;
  // Throws std::invalid_argument for a malformed batch.
  virtual ForwardOutput forward(const ForwardBatch& batch) = 0;
  // True if forward() honours SequenceInput::sample; the engine then sends sampling there.
  virtual bool samples_on_device() const { return false; }
};

// A LlamaModel with a KV cache of `num_blocks` blocks.
class LlamaRunner : public ModelRunner {
 public:
  LlamaRunner(const LlamaModel& model, int32_t num_blocks, int32_t block_size);
  int32_t vocab_size() const override { return model_.config().vocab_size; }
  int32_t context_len() const override { return model_.config().context_len; }
  int32_t num_kv_blocks() const override { return cache_.num_blocks(); }
  int32_t block_size() const override { return cache_.block_size(); }
  ForwardOutput forward(const ForwardBatch& batch) override { return model_.forward(batch, cache_); }

 private:
  const LlamaModel& model_;
  KvCache cache_;
};

// How many blocks of `block_size` tokens fit in `kv_cache_bytes` for this model.
int32_t kv_blocks_for_budget(const ModelConfig& cfg, int32_t block_size, int64_t kv_cache_bytes);

}  // namespace flashserve
