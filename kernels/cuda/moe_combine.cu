#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/moe_routing.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void scatter_kernel(const float* src, int64_t dim, const int32_t* ids, float* dst) {
  const int64_t row = blockIdx.x;
  float* d = dst + int64_t(ids[row]) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) d[i] = src[row * dim + i];
}

// One block per token; each thread owns columns and sums the token's choices in order j = 0..k-1.
__global__ void weighted_sum_kernel(const float* rows, const float* weights, int32_t k, int64_t dim, float* out) {
  const int64_t t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float acc = 0.0f;
    for (int32_t j = 0; j < k; ++j) acc += weights[t * k + j] * rows[(t * k + j) * dim + i];
    out[t * dim + i] = acc;
  }
}

}  // namespace

void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst, CUstream_st* stream) {
  if (n <= 0 || dim <= 0) return;
  FLASHSERVE_LAUNCH(unsigned(n), kThreads, 0, stream, scatter_kernel)(src, dim, ids, dst);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out,
                       CUstream_st* stream) {
  if (n <= 0 || dim <= 0) return;
  FLASHSERVE_LAUNCH(unsigned(n), kThreads, 0, stream, weighted_sum_kernel)(rows, weights, k, dim, out);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::kernels::cuda
