// Engine and KV-cache flags shared by the commands that run the engine.
#pragma once
#include <cstdint>
#include <CLI/CLI.hpp>
#include "model/model_config.h"
#include "scheduler/engine.h"

namespace flashserve {

struct EngineOptions {
  int64_t kv_cache_bytes = 0;        // 0: kv_cache_fraction of available memory
  double kv_cache_fraction = 0.2;
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_waiting = 1024;
  bool no_prefix_caching = false;
  bool priority_scheduling = false;

  void add_to(CLI::App& app);
  EngineConfig engine_config() const;
  // KV blocks for this model: the byte budget, or the fraction of MemAvailable.
  int32_t num_kv_blocks(const ModelConfig& cfg) const;
};

}  // namespace flashserve
