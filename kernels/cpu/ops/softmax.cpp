#include "kernels/softmax.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include "kernels/cpu/simd.h"

namespace flashserve::kernels::FLASHSERVE_ISA {

void softmax(float* x, int64_t num_rows, int64_t n) {
  parallel_for(
      num_rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* row = x + r * n;
          const float sum = simd::exp_sub_sum(row, n, simd::max_of(row, n));
          simd::scale_inplace(row, n, 1.0f / sum);
        }
      },
      num_rows * n >= (1 << 14));
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
