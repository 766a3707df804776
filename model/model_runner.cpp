#include "model/model_runner.h"

#include <algorithm>
#include <limits>

namespace flashserve {

LlamaRunner::LlamaRunner(const LlamaModel& model, int32_t num_blocks, int32_t block_size)
    : model_(model), cache_(model.config(), num_blocks, block_size) {}

int32_t kv_blocks_for_budget(const ModelConfig& cfg, int32_t block_size, int64_t kv_cache_bytes) {
  const int64_t n = kv_cache_bytes / int64_t(KvCache::bytes_per_block(cfg, block_size));
  return int32_t(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
}

}  // namespace flashserve
