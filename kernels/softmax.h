#pragma once
#include <cstdint>

namespace flashserve::kernels {

// Each row of x: [num_rows][n] replaced by its softmax (max-subtracted, so large logits are safe).
void softmax(float* x, int64_t num_rows, int64_t n);

}  // namespace flashserve::kernels
