#pragma once
#include <cstdint>

namespace flashserve::kernels {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight     x, y: [num_rows][dim]; y may alias x.
void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps);

}  // namespace flashserve::kernels
