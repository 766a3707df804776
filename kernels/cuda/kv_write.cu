// One thread per element of the new K and V rows: find the token's slot, round to the cache type
// (round to nearest even, as kernels/dtype.h does on the CPU; fp8 saturates at +-448) and store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/paged_attention.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__device__ T round_to(float x);
template <>
__device__ __half round_to<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __nv_bfloat16 round_to<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __nv_fp8_storage_t round_to<__nv_fp8_storage_t>(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

template <class T>
__global__ void kv_write_kernel(T* k_cache, T* v_cache, const float* k, const float* v, const int32_t* slot_mapping,
                                int64_t row, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  const int32_t slot = slot_mapping[i / row];
  if (slot < 0) return;  // padding token
  const int64_t dst = int64_t(slot) * row + i % row;
  k_cache[dst] = round_to<T>(k[i]);
  v_cache[dst] = round_to<T>(v[i]);
}

template <class T>
void launch(void* k_cache, void* v_cache, const float* k, const float* v, const int32_t* slot_mapping, int64_t row,
            int64_t total, CUstream_st* stream) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  FLASHSERVE_LAUNCH(unsigned(blocks), kThreads, 0, stream, kv_write_kernel<T>)(
      static_cast<T*>(k_cache), static_cast<T*>(v_cache), k, v, slot_mapping, row, total);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void kv_write(const KvLayout& layout, DType kv_type, void* k_cache, void* v_cache, const float* k,
              const float* v, const int32_t* slot_mapping, int64_t num_tokens, CUstream_st* stream) {
  if (!kv_cache_type_supported(kv_type))
    throw std::invalid_argument("cuda::kv_write: KV cache type must be F16, BF16 or F8_E4M3");
  if (layout.block_size <= 0 || layout.num_kv_heads <= 0 || layout.head_dim <= 0 || num_tokens < 0)
    throw std::invalid_argument("cuda::kv_write: bad shape");
  if (num_tokens == 0) return;
  const int64_t row = int64_t(layout.num_kv_heads) * layout.head_dim;
  if (num_tokens > (int64_t(INT32_MAX) * kThreads) / row)
    throw std::invalid_argument("cuda::kv_write: too many elements for one grid");
  const int64_t total = num_tokens * row;
  if (kv_type == DType::F16) launch<__half>(k_cache, v_cache, k, v, slot_mapping, row, total, stream);
  else if (kv_type == DType::BF16) launch<__nv_bfloat16>(k_cache, v_cache, k, v, slot_mapping, row, total, stream);
  else launch<__nv_fp8_storage_t>(k_cache, v_cache, k, v, slot_mapping, row, total, stream);
}

}  // namespace flashserve::kernels::cuda
