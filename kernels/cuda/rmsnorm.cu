// One thread block per row: each thread sums squares over a strided slice, the block reduces them
// in a fixed tree (so a row's result never depends on the grid), then every thread scales its slice.
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
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

// kVec consecutive floats moved as one access: float4 when the rows are 16-byte aligned.
template <int kVec>
struct Pack {
  float v[kVec];
};

template <int kVec>
__device__ Pack<kVec> load(const float* p) {
  if constexpr (kVec == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    return {{q.x, q.y, q.z, q.w}};
  } else {
    return {{*p}};
  }
}

template <int kVec>
__device__ void store(float* p, const Pack<kVec>& a) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(a.v[0], a.v[1], a.v[2], a.v[3]);
  } else {
    *p = a.v[0];
  }
}

// Rows up to this size keep the summed row in shared memory (32 KiB: inside the 48 KiB a block may
// use without opting in, next to block_sum's static array), so the second pass need not read back
// what the first wrote to global memory.
constexpr int64_t kMaxCachedDim = 8192;

// Each thread reads back only the elements it wrote itself, so the cache needs no barrier; the one
// in block_sum is what the scale waits for.
template <int kVec>
__global__ void add_rmsnorm_kernel(float* x, const float* residual, const float* weight, float* y, int64_t dim,
                                   float eps, bool cached) {
  FLASHSERVE_DYNAMIC_SHARED(float4, smem);  // float4 so the cache is 16-byte aligned for Pack<4>
  float* summed = reinterpret_cast<float*>(smem);
  float* row = x + blockIdx.x * dim;
  const float* res = residual + blockIdx.x * dim;
  float* out = y + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x * kVec; i < dim; i += kThreads * kVec) {
    Pack<kVec> a = load<kVec>(row + i);
    const Pack<kVec> b = load<kVec>(res + i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      a.v[k] += b.v[k];
      ss += a.v[k] * a.v[k];
    }
    store(row + i, a);
    if (cached) store(summed + i, a);
  }
  const float scale = rsqrtf(block_sum(ss) / float(dim) + eps);
  for (int64_t i = threadIdx.x * kVec; i < dim; i += kThreads * kVec) {
    Pack<kVec> a = load<kVec>(cached ? summed + i : row + i);
    const Pack<kVec> w = load<kVec>(weight + i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) a.v[k] = a.v[k] * scale * w.v[k];
    store(out + i, a);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void check_rows(int64_t num_rows, int64_t dim, const char* op) {
  if (num_rows <= 0 || dim <= 0) throw std::invalid_argument(std::string(op) + ": empty input");
  if (num_rows > int64_t(INT32_MAX)) throw std::invalid_argument(std::string(op) + ": too many rows for one grid");
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps,
             CUstream_st* stream) {
  check_rows(num_rows, dim, "cuda::rmsnorm");
  FLASHSERVE_LAUNCH(unsigned(num_rows), kThreads, 0, stream, rmsnorm_kernel)(x, weight, y, dim, eps);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t num_rows, int64_t dim,
                 float eps, CUstream_st* stream) {
  check_rows(num_rows, dim, "cuda::add_rmsnorm");
  const bool cached = dim <= kMaxCachedDim;
  const size_t smem = cached ? size_t(dim) * sizeof(float) : 0;
  // float4 needs every row start aligned, hence dim % 4 as well as aligned bases.
  if (dim % 4 == 0 && aligned16(x) && aligned16(residual) && aligned16(weight) && aligned16(y)) {
    FLASHSERVE_LAUNCH(unsigned(num_rows), kThreads, smem, stream, add_rmsnorm_kernel<4>)(
        x, residual, weight, y, dim, eps, cached);
  } else {
    FLASHSERVE_LAUNCH(unsigned(num_rows), kThreads, smem, stream, add_rmsnorm_kernel<1>)(
        x, residual, weight, y, dim, eps, cached);
  }
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::kernels::cuda
