#include "kernels/elementwise.h"
#include "kernels/cpu/cpu_ops.h"

namespace flashserve::kernels::FLASHSERVE_ISA {

void add_bias(float* x, const float* bias, int64_t num_rows, int64_t dim) {
  for (int64_t r = 0; r < num_rows; ++r) {
    float* row = x + r * dim;
    for (int64_t i = 0; i < dim; ++i) row[i] += bias[i];
  }
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
