#include "kernels/softmax.h"
#include "kernels/cpu/cpu_ops.h"

#include "kernels/cpu/simd.h"

namespace flashserve::kernels::FLASHSERVE_ISA {

void softmax(float* x, int64_t num_rows, int64_t n) {
#pragma omp parallel for schedule(static) if (num_rows > 1 && num_rows * n >= (1 << 14))
  for (int64_t r = 0; r < num_rows; ++r) {
    float* row = x + r * n;
    const float sum = simd::exp_sub_sum(row, n, simd::max_of(row, n));
    simd::scale_inplace(row, n, 1.0f / sum);
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
