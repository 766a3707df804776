#include "model/kv_groups.h"

#include <numeric>

namespace flashserve {

KvGroups kv_groups(const ModelConfig& cfg) {
  std::vector<int32_t> full, local;
  for (int32_t li = 0; li < cfg.num_layers; ++li) (cfg.is_local_layer(li) ? local : full).push_back(li);
  KvGroups g;
  g.layers_per_group = std::gcd(int32_t(full.size()), int32_t(local.size()));
  g.group_of_layer.assign(size_t(cfg.num_layers), 0);
  g.slot_of_layer.assign(size_t(cfg.num_layers), 0);
  auto cut = [&](const std::vector<int32_t>& layers, int32_t window) {
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % size_t(g.layers_per_group) == 0) g.windows.push_back(window);
      g.group_of_layer[size_t(layers[i])] = g.num_groups() - 1;
      g.slot_of_layer[size_t(layers[i])] = int32_t(i % size_t(g.layers_per_group));
    }
  };
  cut(full, 0);
  cut(local, cfg.sliding_window);
  return g;
}

}  // namespace flashserve
