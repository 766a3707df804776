#pragma once
#include <cstdint>

struct CUstream_st;  // cudaStream_t, without pulling CUDA headers into CPU code

namespace flashserve::kernels {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight     x, y: [num_rows][dim]; y may alias x.
void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps);

// The residual add fused in front of the norm: x[r] += residual[r], then y[r] = rmsnorm(x[r]).
// x is updated in place (it is the residual stream); y must not alias x or residual.
void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t num_rows, int64_t dim,
                 float eps);

namespace cuda {
// The same contract on device pointers, queued on `stream` (CUDA builds only). Throws
// std::invalid_argument for bad shapes, std::runtime_error naming a failed CUDA call.
void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps,
             CUstream_st* stream);
void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t num_rows, int64_t dim,
                 float eps, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
