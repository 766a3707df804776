// One thread block per row: each thread sums squares over a strided slice, the block reduces them
// in a fixed tree (so a row's result never depends on the grid), then every thread scales its slice.
#include "kernels/cuda/cuda_check.h"
#include "kernels/rmsnorm.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? warp_sums[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;  // every thread holds the total
}

__global__ void rmsnorm_kernel(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  const float* row = x + blockIdx.x * dim;
  float* out = y + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss += row[i] * row[i];
  const float scale = rsqrtf(block_sum(ss) / float(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) out[i] = row[i] * scale * weight[i];
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps,
             CUstream_st* stream) {
  if (num_rows <= 0 || dim <= 0) throw std::invalid_argument("cuda::rmsnorm: empty input");
  if (num_rows > int64_t(INT32_MAX)) throw std::invalid_argument("cuda::rmsnorm: too many rows for one grid");
  rmsnorm_kernel<<<unsigned(num_rows), kThreads, 0, stream>>>(x, weight, y, dim, eps);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::kernels::cuda
