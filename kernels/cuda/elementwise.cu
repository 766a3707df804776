#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/elementwise.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

unsigned blocks_for(int64_t n) { return unsigned(std::min((n + kThreads - 1) / kThreads, kMaxBlocks)); }

__global__ void add_bias_kernel(float* x, const float* bias, int64_t total, int64_t dim) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += bias[i % dim];
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) x[i] *= s;
}

}  // namespace

void add_bias(float* x, const float* bias, int64_t num_rows, int64_t dim, CUstream_st* stream) {
  const int64_t total = num_rows * dim;
  if (total <= 0) return;
  FLASHSERVE_LAUNCH(blocks_for(total), kThreads, 0, stream, add_bias_kernel)(x, bias, total, dim);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

void scale(float* x, float s, int64_t n, CUstream_st* stream) {
  if (n <= 0) return;
  FLASHSERVE_LAUNCH(blocks_for(n), kThreads, 0, stream, scale_kernel)(x, s, n);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::kernels::cuda
