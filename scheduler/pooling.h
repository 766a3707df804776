// An embedding request's pooled hidden state, gathered as its prompt is computed chunk by chunk
// (the engine adds each step's rows) and finished into the unit-length vector the API returns.
#pragma once
#include <cstdint>
#include <vector>
#include "model/model_config.h"

namespace flashserve {

class PooledState {
 public:
  PooledState() = default;
  PooledState(Pooling pooling, int32_t prompt_len) : pooling_(pooling), prompt_len_(prompt_len) {}

  Pooling pooling() const { return pooling_; }
  // Rows [n][dim] of the prompt's tokens first .. first + n - 1.
  void add(const float* rows, int32_t n, int32_t dim, int32_t first);
  // Preempted: the prompt is computed again from its start.
  void reset() { sum_.clear(); }
  // Mean, first or last row, scaled to unit length (a zero vector stays zero).
  std::vector<float> embedding() const;

 private:
  Pooling pooling_ = Pooling::Last;
  int32_t prompt_len_ = 0;
  std::vector<double> sum_;  // the rows pooled so far (Mean), or the one kept (Cls, Last)
};

}  // namespace flashserve
