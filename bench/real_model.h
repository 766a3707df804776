// The real model the end-to-end benchmarks run: $FLASHSERVE_MODEL, else the project cache
// (scripts/fetch_model.sh). Loaded once per process.
#pragma once
#include <cstdlib>

#include "model/llama_model.h"

namespace flashserve {

inline const LlamaModel& real_model() {
  static const auto m = [] {
    const char* env = std::getenv("FLASHSERVE_MODEL");
    return LlamaModel::load(env && *env ? env : FLASHSERVE_DEFAULT_MODEL);
  }();
  return *m;
}

}  // namespace flashserve
