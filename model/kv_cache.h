// The paged KV cache's storage: per layer, a K pool and a V pool of blocks. Which sequence owns
// which block is the scheduler's business; the model only reads and writes through block tables.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>
#include "kernels/paged_attention.h"
#include "model/model_config.h"

namespace flashserve {

class KvCache {
 public:
  KvCache(const ModelConfig& cfg, int32_t num_blocks, int32_t block_size = 16);

  // Bytes one block takes across all layers, K and V: for sizing the pool from a memory budget.
  static size_t bytes_per_block(const ModelConfig& cfg, int32_t block_size);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return layout_.block_size; }
  const kernels::KvLayout& layout() const { return layout_; }
  float* k(int32_t layer) { return k_[layer].get(); }  // [num_blocks][block_size][kv_heads][head_dim]
  float* v(int32_t layer) { return v_[layer].get(); }

 private:
  int32_t num_blocks_;
  kernels::KvLayout layout_;
  // Left uninitialised: pages are committed only when a block is first written, so a large budget
  // costs nothing until it is used (attention only reads slots that were written).
  std::vector<std::unique_ptr<float[]>> k_, v_;  // [layer]
};

}  // namespace flashserve
