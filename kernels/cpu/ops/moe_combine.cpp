#include <algorithm>

#include "kernels/moe_routing.h"
#include "kernels/cpu/cpu_ops.h"

namespace flashserve::kernels::FLASHSERVE_ISA {

void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(src + i * dim, dim, dst + int64_t(ids[i]) * dim);
}

void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * dim;
    std::fill_n(o, dim, 0.0f);
    for (int32_t j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float* r = rows + (t * k + j) * dim;
      for (int64_t i = 0; i < dim; ++i) o[i] += w * r[i];
    }
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
