// Small element-wise ops some architectures add around the shared layer sequence.
#pragma once
#include <cstdint>

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

// x[r][i] += bias[i]   x: [num_rows][dim] (Qwen2's Q/K/V projections carry a bias).
void add_bias(float* x, const float* bias, int64_t num_rows, int64_t dim);

// x[i] *= s   (Gemma scales its embeddings by sqrt(dim)).
void scale(float* x, float s, int64_t n);

namespace cuda {
void add_bias(float* x, const float* bias, int64_t num_rows, int64_t dim, CUstream_st* stream);
void scale(float* x, float s, int64_t n, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
