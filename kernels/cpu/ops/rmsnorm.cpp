#include "kernels/rmsnorm.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <cmath>

#include "kernels/cpu/simd.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using namespace simd;

// Below this many elements a fork/join costs more than the work.
constexpr int64_t kParallelMin = 1 << 14;

void rmsnorm_row(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  V acc = zero();
  for (int64_t i = 0; i < dim; i += W) {
    const V v = load_upto(x + i, dim - i);
    acc = fma(v, v, acc);
  }
  const float mean = reduce_add(acc) / float(dim);
  const V scale = set1(1.0f / std::sqrt(mean + eps));
  // (x * scale) * weight, in ggml's order, so norms match llama.cpp's rounding.
  for (int64_t i = 0; i < dim; i += W)
    store_upto(y + i, mul(mul(load_upto(x + i, dim - i), scale), load_upto(weight + i, dim - i)), dim - i);
}

void add_row(float* x, const float* residual, int64_t dim) {
  for (int64_t i = 0; i < dim; i += W)
    store_upto(x + i, add(load_upto(x + i, dim - i), load_upto(residual + i, dim - i)), dim - i);
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps) {
  parallel_for(
      num_rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) rmsnorm_row(x + r * dim, weight, y + r * dim, dim, eps);
      },
      num_rows * dim >= kParallelMin);
}

// Row by row, so the norm reads the summed row while it is still in cache; the add is exact IEEE
// addition either way, so y equals a separate add followed by rmsnorm() bit for bit.
void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t num_rows, int64_t dim,
                 float eps) {
  parallel_for(
      num_rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          add_row(x + r * dim, residual + r * dim, dim);
          rmsnorm_row(x + r * dim, weight, y + r * dim, dim, eps);
        }
      },
      num_rows * dim >= kParallelMin);
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
