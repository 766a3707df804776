// What the engine needs from a model: execute a batch plan over KV storage the runner owns and
// return the sampled tokens. The scheduler decides which blocks a sequence uses; the runner only
// reads and writes them. Tests drive the engine with fakes of this interface.
#pragma once
#include <cstdint>
#include <vector>
#include "model/forward_batch.h"

namespace flashserve {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t context_len() const = 0;
  virtual int32_t num_kv_blocks() const = 0;
  virtual int32_t block_size() const = 0;
  // Per KV group, in SequenceInput::block_tables' order: 0 for full attention, else the sliding
  // window, whose blocks the scheduler frees once out of every later query's sight.
  virtual std::vector<int32_t> kv_group_windows() const { return {0}; }
  // Throws std::invalid_argument for a malformed batch.
  virtual ForwardOutput forward(const ForwardBatch& batch) = 0;
};

}  // namespace flashserve
