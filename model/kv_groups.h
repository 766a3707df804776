// How a model's layers share the KV pool. Layers that attend alike (to every position, or to a
// sliding window) form KV groups of g layers each; a block holds those g layers' K and V for
// block_size positions and belongs to one group, and each group keeps its own block table per
// sequence. So a sliding-window group's blocks go back to the pool once no later query can see them,
// while the full-attention groups keep theirs (vLLM's hybrid allocator works the same way). A model
// without windows is one group of all its layers.
#pragma once
#include <cstdint>
#include <vector>
#include "model/model_config.h"

namespace flashserve {

struct KvGroups {
  int32_t layers_per_group = 0;         // g: the KV tensors of the pool, one per place in a group
  std::vector<int32_t> windows;         // [group]: 0 attends to every position, else its window
  std::vector<int32_t> group_of_layer;  // [layer]
  std::vector<int32_t> slot_of_layer;   // [layer]: its place in its group, so its KV tensor

  int32_t num_groups() const { return int32_t(windows.size()); }
};

// Full-attention and sliding-window layers, each kind cut into groups of g = gcd(how many of each)
// layers in layer order (Gemma 3 270M: 3 global and 15 local layers, 6 groups of 3).
KvGroups kv_groups(const ModelConfig& cfg);

}  // namespace flashserve
