#include "scheduler/pooling.h"

#include <cmath>

namespace flashserve {

void PooledState::add(const float* rows, int32_t n, int32_t dim, int32_t first) {
  if (sum_.empty()) sum_.assign(size_t(dim), 0.0);
  auto keep = [&](int32_t row) {
    for (int32_t d = 0; d < dim; ++d) sum_[size_t(d)] = rows[size_t(row) * size_t(dim) + size_t(d)];
  };
  switch (pooling_) {
    case Pooling::Mean:
      for (int32_t r = 0; r < n; ++r) {
        for (int32_t d = 0; d < dim; ++d) sum_[size_t(d)] += rows[size_t(r) * size_t(dim) + size_t(d)];
      }
      break;
    case Pooling::Cls:
      if (first == 0 && n > 0) keep(0);
      break;
    case Pooling::Last:
    case Pooling::Rank:
      if (first + n == prompt_len_ && n > 0) keep(n - 1);
      break;
  }
}

std::vector<float> PooledState::embedding() const {
  double norm = 0;
  for (double v : sum_) norm += v * v;
  norm = std::sqrt(norm);  // the mean's 1/n cancels in the normalisation
  std::vector<float> out(sum_.size());
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = norm > 0 ? float(sum_[i] / norm) : 0.0f;
  return out;
}

}  // namespace flashserve
