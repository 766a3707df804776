// Activations times a weight matrix stored in any DType, read in place (never expanded to f32).
#pragma once
#include <cstdint>
#include "kernels/dtype.h"

namespace flashserve::kernels {

// y[t][o] = sum_k x[t][k] * W[o][k]      x: [num_tokens][k] f32, y: [num_tokens][n_out] f32
// W: n_out rows of k elements in `wtype`, row o at (const char*)w + o * row_bytes(wtype, k).
// Batch invariant: y[t][o] is bit-identical whatever num_tokens, the other rows of x, or the thread
// count -- each dot product runs in one fixed order; threads split output rows, never a reduction.
void matmul(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype,
            int64_t n_out, float* y);

// Row `row` of W expanded to f32 (embedding lookup).  out: [k]
void get_row(const void* w, DType wtype, int64_t k, int64_t row, float* out);

}  // namespace flashserve::kernels
