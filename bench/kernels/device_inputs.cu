// Inputs and output checks for the GPU benchmarks: random fills (never zeros: they hide indexing
// bugs and can run faster), the L2 flush, and counts of non-finite or out-of-range outputs.
#include "bench/kernels/device_inputs.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cctype>

namespace flashserve::bench {
namespace fk = flashserve::kernels;
namespace {

int g_num_sms = 132;
uint64_t g_seed = 1;

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ float uniform01(uint64_t seed, uint64_t i) {
  return float(mix64(seed * 0x632BE59BD9B4E019ull + i) >> 40) * (1.0f / 16777216.0f);
}
__device__ __forceinline__ void store_as(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_as(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store_as(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

template <typename T>
__global__ void fill_uniform_kernel(T* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    store_as(p + i, lo + (hi - lo) * uniform01(seed, i));
}

__global__ void fill_bytes_kernel(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t(mix64(seed * 0x632BE59BD9B4E019ull + i) >> 56);
}

// Quantized blocks after fill_bytes: give every block a sane f16 scale d (and min m for Q4_1), so
// the weights dequantize to values of order 0.1 rather than random f16 bit patterns (inf, NaN).
__global__ void fix_quant_scales_kernel(uint8_t* w, size_t num_blocks, int block_bytes, int has_min, uint64_t seed) {
  for (size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x; b < num_blocks; b += size_t(gridDim.x) * blockDim.x) {
    uint16_t* h = reinterpret_cast<uint16_t*>(w + b * size_t(block_bytes));  // block_bytes is even
    const float u = uniform01(seed, 2 * b), s = uniform01(seed, 2 * b + 1) < 0.5f ? -1.0f : 1.0f;
    h[0] = __half_as_ushort(__float2half(s * (0.002f + 0.02f * u)));
    if (has_min) h[1] = __half_as_ushort(__float2half(-0.1f + 0.2f * uniform01(seed ^ 0x5555u, b)));
  }
}

// Reads the whole buffer (16-byte loads) and writes nothing unless the data hold an impossible
// value: evicts L2 without leaving dirty lines to be written back inside the next timed run.
__global__ void read_all_kernel(const int4* p, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7A5E11E5) *sink = acc;  // buffers read this way hold zeros
}

__global__ void count_nonfinite_kernel(const float* p, size_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    c += isfinite(p[i]) ? 0 : 1;
  if (c) atomicAdd(count, c);
}

__global__ void count_outside_kernel(const int32_t* p, size_t n, int32_t lo, int32_t hi, unsigned long long* count) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    c += (p[i] < lo || p[i] >= hi) ? 1 : 0;
  if (c) atomicAdd(count, c);
}

}  // namespace

void set_grid_sms(int sms) { g_num_sms = sms; }

unsigned grid_for(size_t n, int threads) {
  const size_t want = (n + threads - 1) / threads;
  return unsigned(std::max<size_t>(1, std::min<size_t>(want, size_t(g_num_sms) * 16)));
}

template <typename T>
void fill_uniform(T* p, size_t n, float lo, float hi, cudaStream_t s) {
  fill_uniform_kernel<T><<<grid_for(n), 256, 0, s>>>(p, n, g_seed++, lo, hi);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}
template void fill_uniform<float>(float*, size_t, float, float, cudaStream_t);
template void fill_uniform<__half>(__half*, size_t, float, float, cudaStream_t);
template void fill_uniform<__nv_bfloat16>(__nv_bfloat16*, size_t, float, float, cudaStream_t);

void fill_bytes(uint8_t* p, size_t n, cudaStream_t s) {
  fill_bytes_kernel<<<grid_for(n), 256, 0, s>>>(p, n, g_seed++);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

std::string type_name(fk::DType t) {
  std::string s(fk::dtype_name(t));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return s;
}

void fill_weights(void* w, fk::DType t, int64_t rows, int64_t k, cudaStream_t s) {
  const size_t n = size_t(rows) * size_t(k);
  switch (t) {
    case fk::DType::F32: fill_uniform(static_cast<float*>(w), n, -0.1f, 0.1f, s); return;
    case fk::DType::F16: fill_uniform(static_cast<__half*>(w), n, -0.1f, 0.1f, s); return;
    case fk::DType::BF16: fill_uniform(static_cast<__nv_bfloat16*>(w), n, -0.1f, 0.1f, s); return;
    default: break;
  }
  const size_t bytes = size_t(rows) * fk::row_bytes(t, k);
  const size_t blocks = size_t(rows) * size_t(k / fk::kQuantBlock);
  const int block_bytes = int(bytes / blocks);
  fill_bytes_kernel<<<grid_for(bytes), 256, 0, s>>>(static_cast<uint8_t*>(w), bytes, g_seed++);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  fix_quant_scales_kernel<<<grid_for(blocks), 256, 0, s>>>(static_cast<uint8_t*>(w), blocks, block_bytes,
                                                           t == fk::DType::Q4_1 ? 1 : 0, g_seed++);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

void fill_cache(void* p, fk::DType t, size_t n, cudaStream_t s) {
  if (t == fk::DType::F16) fill_uniform(static_cast<__half*>(p), n, -1.0f, 1.0f, s);
  else if (t == fk::DType::BF16) fill_uniform(static_cast<__nv_bfloat16*>(p), n, -1.0f, 1.0f, s);
  else throw std::invalid_argument("fill_cache: F16 or BF16");
}

std::string check_finite(const float* p, size_t n, cudaStream_t s) {
  Buf<unsigned long long> count(1);
  FLASHSERVE_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), s));
  count_nonfinite_kernel<<<grid_for(n), 256, 0, s>>>(p, n, count.get());
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  unsigned long long c = 0;
  FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(&c, count.get(), sizeof c, cudaMemcpyDeviceToHost, s));
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(s));
  return c == 0 ? "ok" : "nonfinite:" + std::to_string(c);
}

std::string check_range(const int32_t* p, size_t n, int32_t lo, int32_t hi, cudaStream_t s) {
  Buf<unsigned long long> count(1);
  FLASHSERVE_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), s));
  count_outside_kernel<<<grid_for(n), 256, 0, s>>>(p, n, lo, hi, count.get());
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  unsigned long long c = 0;
  FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(&c, count.get(), sizeof c, cudaMemcpyDeviceToHost, s));
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(s));
  return c == 0 ? "ok" : "out_of_range:" + std::to_string(c);
}

std::string join_checks(const std::string& a, const std::string& b) {
  if (a == "ok") return b;
  if (b == "ok") return a;
  return a + "," + b;
}

void launch_l2_flush(const void* buf, size_t bytes, cudaStream_t stream) {
  const size_t n = bytes / sizeof(int4);
  read_all_kernel<<<unsigned(g_num_sms) * 4, 512, 0, stream>>>(static_cast<const int4*>(buf), n,
                                                               const_cast<int*>(static_cast<const int*>(buf)));
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::bench
