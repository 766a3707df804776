#include "model/kv_cache.h"

#include <stdexcept>

namespace flashserve {

static size_t floats_per_block(const ModelConfig& cfg, int32_t block_size) {
  return size_t(block_size) * cfg.num_kv_heads * cfg.head_dim;
}

KvCache::KvCache(const ModelConfig& cfg, int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), layout_{block_size, cfg.num_kv_heads, cfg.head_dim} {
  if (num_blocks <= 0 || block_size <= 0) {
    throw std::invalid_argument("KV cache needs a positive number of blocks and block size");
  }
  const size_t n = floats_per_block(cfg, block_size) * size_t(num_blocks);
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    k_.emplace_back(new float[n]);
    v_.emplace_back(new float[n]);
  }
}

size_t KvCache::bytes_per_block(const ModelConfig& cfg, int32_t block_size) {
  return 2 * sizeof(float) * floats_per_block(cfg, block_size) * size_t(cfg.num_layers);
}

}  // namespace flashserve
