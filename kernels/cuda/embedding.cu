// Embedding gather: one block per requested row. F32/F16/BF16/Q4_0/Q4_1/Q8_0: each thread decodes
// single elements of it; a quantized block's scale is re-read by each of its 32 elements, but those
// loads hit L1, and the f32 output writes coalesce. The other quantized types (Q5_x, IQ4, K-quants),
// whose codes and scales are scattered over a block: each thread decodes a 32-element chunk with
// quant_decode.cuh's decoders (the matmul's), and writes it out.
//
// GGUF rows of 16-bit and quantized types may start at any 2-byte aligned address (block sizes 18,
// 20, 34, 110, ... bytes), so those are read with 16-bit and byte loads only.
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/quant_decode.cuh"
#include "kernels/matmul.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Exact for every finite half (the conversion the CPU codec does by bit manipulation).
__device__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(p)));
}

// The 4-bit code of element j (0..31) of a Q4 block: byte j holds j (low nibble) and j + 16 (high).
__device__ int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

// Element i of a row. Each quantized value is d * q (+ m) with d a half and |q| < 256: the product
// has at most 19 significant bits, so it is exact in f32 and the result equals the CPU codec's bit
// for bit whether or not either side fuses the multiply-add.
template <DType T>
__device__ float element(const uint8_t* row, int64_t i) {
  const int64_t b = i / kQuantBlock;
  const int j = int(i % kQuantBlock);
  if constexpr (T == DType::F32) {
    return reinterpret_cast<const float*>(row)[i];
  } else if constexpr (T == DType::F16) {
    return half_at(row + 2 * i);
  } else if constexpr (T == DType::BF16) {
    return __uint_as_float(uint32_t(*reinterpret_cast<const uint16_t*>(row + 2 * i)) << 16);
  } else if constexpr (T == DType::Q4_0) {
    const uint8_t* blk = row + b * int64_t(sizeof(BlockQ4_0));
    return float(nibble(blk + 2, j) - 8) * half_at(blk);
  } else if constexpr (T == DType::Q4_1) {
    const uint8_t* blk = row + b * int64_t(sizeof(BlockQ4_1));
    return fmaf(float(nibble(blk + 4, j)), half_at(blk), half_at(blk + 2));
  } else {
    static_assert(T == DType::Q8_0);
    const uint8_t* blk = row + b * int64_t(sizeof(BlockQ8_0));
    return float(static_cast<int8_t>(blk[2 + j])) * half_at(blk);
  }
}

template <DType T>
__global__ void get_rows_kernel(const uint8_t* w, size_t row_stride, int64_t k, const int32_t* ids, float* out) {
  const uint8_t* row = w + size_t(ids[blockIdx.x]) * row_stride;
  float* dst = out + blockIdx.x * k;
  for (int64_t i = threadIdx.x; i < k; i += kThreads) dst[i] = element<T>(row, i);
}

// One thread per 32-element chunk. Thread t's 32 stores are strided across the warp; L2 merges
// them before they reach memory, and a gather is a few rows per step.
template <class D>
__global__ void get_rows_chunks_kernel(const char* w, size_t row_stride, int64_t k, const int32_t* ids, float* out) {
  const char* row = w + size_t(ids[blockIdx.x]) * row_stride;
  float* dst = out + blockIdx.x * k;
  for (int64_t g = threadIdx.x; g < k / kChunk; g += kThreads) {
    float v[kChunk];
    decode_chunk<D>(row, g, v);
#pragma unroll
    for (int l = 0; l < kChunk; ++l) dst[g * kChunk + l] = v[l];
  }
}

template <DType T>
void launch(const void* w, int64_t k, const int32_t* ids, int64_t n, float* out, cudaStream_t stream) {
  const size_t row_stride = size_t(k / block_layout(T).elems * block_layout(T).bytes);
  FLASHSERVE_LAUNCH(unsigned(n), kThreads, 0, stream, get_rows_kernel<T>)(
      static_cast<const uint8_t*>(w), row_stride, k, ids, out);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

template <class D>
void launch_chunks(const void* w, int64_t k, const int32_t* ids, int64_t n, float* out, cudaStream_t stream) {
  const size_t row_stride = size_t(k / D::kElems * D::kBytes);
  FLASHSERVE_LAUNCH(unsigned(n), kThreads, 0, stream, get_rows_chunks_kernel<D>)(
      static_cast<const char*>(w), row_stride, k, ids, out);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

// launch_chunks with the decoder with_decoder picks.
struct ChunksLauncher {
  const void* w;
  int64_t k;
  const int32_t* ids;
  int64_t n;
  float* out;
  cudaStream_t stream;
  template <class D>
  void operator()() const {
    launch_chunks<D>(w, k, ids, n, out, stream);
  }
};

void check_args(const void* w, DType wtype, int64_t k, int64_t n) {
  if (k <= 0 || n < 0) throw std::invalid_argument("cuda::get_rows: empty row or negative count");
  if (n > int64_t(INT32_MAX)) throw std::invalid_argument("cuda::get_rows: too many rows for one grid");
  const BlockLayout l = block_layout(wtype);
  if (l.elems == 0) throw std::invalid_argument("cuda::get_rows: unsupported dtype");
  if (k % l.elems != 0) throw std::invalid_argument("cuda::get_rows: k=" + std::to_string(k) + " is not whole blocks");
  const uintptr_t align = wtype == DType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(w) % align != 0) throw std::invalid_argument("cuda::get_rows: weights misaligned");
}

}  // namespace

void get_rows(const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out,
              CUstream_st* stream) {
  check_args(w, wtype, k, n);
  if (n == 0) return;
  switch (wtype) {
    case DType::F32: return launch<DType::F32>(w, k, ids, n, out, stream);
    case DType::F16: return launch<DType::F16>(w, k, ids, n, out, stream);
    case DType::BF16: return launch<DType::BF16>(w, k, ids, n, out, stream);
    case DType::Q4_0: return launch<DType::Q4_0>(w, k, ids, n, out, stream);
    case DType::Q4_1: return launch<DType::Q4_1>(w, k, ids, n, out, stream);
    case DType::Q8_0: return launch<DType::Q8_0>(w, k, ids, n, out, stream);
    default: with_decoder(wtype, ChunksLauncher{w, k, ids, n, out, stream});
  }
}

}  // namespace flashserve::kernels::cuda
