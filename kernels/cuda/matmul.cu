// y[t][o] = x[t] . W[o] on the device. Up to kGemvMaxTokens tokens (decode) our GEMV streams W
// once, in place, in its GGUF layout; larger batches (prefill) are compute bound, so W is expanded
// to 16 bits and cuBLASLt runs the product on tensor cores with f32 accumulation.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/quant_decode.cuh"
#include "kernels/matmul.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kGroup = kChunk;  // weights per decoded chunk, and per staged group of x

void check_lt(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(call) + " failed: " + cublasLtGetStatusName(status) + " (" +
                             cublasLtGetStatusString(status) + ")");
  }
}
#define FLASHSERVE_LT_CHECK(stmt) check_lt((stmt), #stmt)

// ---- Weight decoding: quantized types in quant_decode.cuh (shared with the embedding gather) ----

// p[0 .. N-1]; vec: p is 16-byte aligned, so N / 4 float4 loads do.
template <int N>
__device__ __forceinline__ void load_floats(const float* __restrict__ p, bool vec, float (&v)[N]) {
  static_assert(N % 4 == 0);
  if (vec) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(p) + q);
      v[4 * q] = f.x;
      v[4 * q + 1] = f.y;
      v[4 * q + 2] = f.z;
      v[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = __ldg(p + i);
  }
}

// Float-typed rows: element i of a row (any k, so no block structure to rely on), and eight
// consecutive ones from a 16-byte aligned address.
constexpr int kVecElems = 8;
struct F32Elem {
  static constexpr int kElems = 1;
  __device__ static float load(const char* row, int64_t i) { return __ldg(reinterpret_cast<const float*>(row) + i); }
  __device__ static void load8(const char* row, int64_t i, float (&w)[kVecElems]) {
    load_floats(reinterpret_cast<const float*>(row) + i, true, w);
  }
};
// The eight 16-bit values at row + 2 i, as four little-endian pairs.
__device__ __forceinline__ uint4 load_16bit8(const char* row, int64_t i) {
  return __ldg(reinterpret_cast<const uint4*>(row + 2 * i));
}
struct F16Elem {
  static constexpr int kElems = 1;
  __device__ static float load(const char* row, int64_t i) { return half_value(load_u16(row + 2 * i)); }
  __device__ static void load8(const char* row, int64_t i, float (&w)[kVecElems]) {
    const uint4 v = load_16bit8(row, i);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      w[2 * j] = half_value(uint16_t(words[j] & 0xffffu));
      w[2 * j + 1] = half_value(uint16_t(words[j] >> 16));
    }
  }
};
struct BF16Elem {
  static constexpr int kElems = 1;
  __device__ static float load(const char* row, int64_t i) {
    return __uint_as_float(uint32_t(load_u16(row + 2 * i)) << 16);
  }
  __device__ static void load8(const char* row, int64_t i, float (&w)[kVecElems]) {
    const uint4 v = load_16bit8(row, i);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      w[2 * j] = __uint_as_float(words[j] << 16);
      w[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
    }
  }
};

// ---- GEMV: num_tokens <= kGemvMaxTokens ----
// Each warp owns kRowsPerWarp rows of W and walks them on its own: no shared memory and no block
// barrier, so a warp's weight loads never wait for another warp (a staged x tile did, and its
// staging cost one round trip to memory per 1,024 columns). Quantized rows: lane g takes 32-weight
// chunks g, g + 32, g + 64, ... (a block, or an eighth of a K-quant super-block), decodes each once
// for all its rows and reads that chunk's 32 x values per token straight from memory (L1 serves
// the other warps). Float rows: lane j takes eight columns at a time in 16-byte loads (or, on
// unaligned rows, columns j, j + 32, ...), so a warp's loads coalesce. Every
// lane accumulates its slice of a row in column order and the warp reduces in a fixed shuffle
// tree, so a token's result never depends on the other tokens.

constexpr int kGemvWarps = 4;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = kGemvWarps * kRowsPerWarp;

template <class D, int T>
__device__ void accumulate_blocks(const float* __restrict__ x, int num_tokens, bool x_vec, const char* __restrict__ w,
                                  size_t row_bytes, int64_t row0, int64_t n_out, int64_t k, int lane,
                                  float (&acc)[kRowsPerWarp][T]) {
  const int64_t groups = k / kGroup;
#pragma unroll 2
  for (int64_t group = lane; group < groups; group += kWarp) {
    // Both rows decoded up front, so each x value is loaded once for both.
    float wv[kRowsPerWarp][kGroup];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (row0 + r < n_out) {
        decode_chunk<D>(w + (row0 + r) * row_bytes, group, wv[r]);
      } else {
#pragma unroll
        for (float& v : wv[r]) v = 0.0f;  // a row past n_out: accumulated, never stored
      }
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
      if (t >= num_tokens) break;  // uniform: padding tokens are neither read nor stored
      float xv[kGroup];
      load_floats(x + t * k + group * kGroup, x_vec, xv);
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r][t] = fmaf(wv[r][i], xv[i], acc[r][t]);
      }
    }
  }
}

// vec: rows start 16-byte aligned and k % 8 == 0, so lane j takes eight columns at a time (8 j,
// 8 j + 256, ...) in 16-byte loads; otherwise one column at a time (j, j + 32, ...).
template <class D, int T>
__device__ void accumulate_elems(const float* __restrict__ x, int num_tokens, bool x_vec, bool vec,
                                 const char* __restrict__ w, size_t row_bytes, int64_t row0, int64_t n_out,
                                 int64_t k, int lane, float (&acc)[kRowsPerWarp][T]) {
  if (vec) {
#pragma unroll 2
    for (int64_t col = int64_t(lane) * kVecElems; col < k; col += kWarp * kVecElems) {
      float wv[kRowsPerWarp][kVecElems];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (row0 + r < n_out) {
          D::load8(w + (row0 + r) * row_bytes, col, wv[r]);
        } else {
#pragma unroll
          for (float& v : wv[r]) v = 0.0f;  // a row past n_out: accumulated, never stored
        }
      }
#pragma unroll
      for (int t = 0; t < T; ++t) {
        if (t >= num_tokens) break;
        float xv[kVecElems];
        load_floats(x + t * k + col, x_vec, xv);
#pragma unroll
        for (int i = 0; i < kVecElems; ++i) {
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) acc[r][t] = fmaf(wv[r][i], xv[i], acc[r][t]);
        }
      }
    }
    return;
  }
#pragma unroll 4
  for (int64_t col = lane; col < k; col += kWarp) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (row0 + r >= n_out) break;
      const float wv = D::load(w + (row0 + r) * row_bytes, col);
#pragma unroll
      for (int t = 0; t < T; ++t) {
        if (t >= num_tokens) break;
        acc[r][t] = fmaf(wv, __ldg(x + t * k + col), acc[r][t]);
      }
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <class D, int T>
__global__ void __launch_bounds__(kGemvWarps * kWarp)
    gemv_kernel(const float* __restrict__ x, int num_tokens, bool x_vec, bool w_vec, int64_t k,
                const char* __restrict__ w, size_t row_bytes, int64_t n_out, float* __restrict__ y) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row0 = int64_t(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp;
  if (row0 >= n_out) return;  // the whole warp: nothing below waits for other warps
  float acc[kRowsPerWarp][T] = {};
  if constexpr (D::kElems > 1)
    accumulate_blocks<D, T>(x, num_tokens, x_vec, w, row_bytes, row0, n_out, k, lane, acc);
  else
    accumulate_elems<D, T>(x, num_tokens, x_vec, w_vec, w, row_bytes, row0, n_out, k, lane, acc);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (row0 + r >= n_out) break;  // warp-uniform, so every lane joins the shuffles
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const float sum = warp_sum(acc[r][t]);
      if (lane == 0 && t < num_tokens) y[t * n_out + row0 + r] = sum;
    }
  }
}

// Token counts are rounded up to 1, 2, 4 or 8 to bound the instantiations.
template <class D>
void launch_gemv(const float* x, int64_t num_tokens, int64_t k, const void* w, size_t row_bytes, int64_t n_out,
                 float* y, cudaStream_t stream) {
  const unsigned grid = unsigned((n_out + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto* wb = static_cast<const char*>(w);
  const int nt = int(num_tokens);
  const bool x_vec = reinterpret_cast<uintptr_t>(x) % 16 == 0 && k % 4 == 0;
  const bool w_vec = reinterpret_cast<uintptr_t>(w) % 16 == 0 && row_bytes % 16 == 0 && k % kVecElems == 0;
  if (nt == 1)
    FLASHSERVE_LAUNCH(grid, kGemvWarps * kWarp, 0, stream, gemv_kernel<D, 1>)(x, nt, x_vec, w_vec, k, wb, row_bytes, n_out, y);
  else if (nt == 2)
    FLASHSERVE_LAUNCH(grid, kGemvWarps * kWarp, 0, stream, gemv_kernel<D, 2>)(x, nt, x_vec, w_vec, k, wb, row_bytes, n_out, y);
  else if (nt <= 4)
    FLASHSERVE_LAUNCH(grid, kGemvWarps * kWarp, 0, stream, gemv_kernel<D, 4>)(x, nt, x_vec, w_vec, k, wb, row_bytes, n_out, y);
  else
    FLASHSERVE_LAUNCH(grid, kGemvWarps * kWarp, 0, stream, gemv_kernel<D, 8>)(x, nt, x_vec, w_vec, k, wb, row_bytes, n_out, y);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}
static_assert(kGemvMaxTokens == 8, "launch_gemv instantiates token tiles up to 8");

// ---- Expansion to 16 bits for cuBLASLt ----

template <typename H>
__device__ H to_16bit(float v);
template <>
__device__ __half to_16bit<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __nv_bfloat16 to_16bit<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// One thread per 32-weight chunk, writing its weights as F16 (a quant weight is a scale times a small
// int, well inside F16's range for real scales). out: [n_out][k].
template <class D>
__global__ void dequantize_kernel(const char* __restrict__ w, int64_t num_chunks, __half* __restrict__ out) {
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= num_chunks) return;
  // Rows are whole blocks and lie back to back in both layouts, so chunk g of the matrix is weights
  // 32 g .. 32 g + 31 of the output.
  float wv[kGroup];
  decode_chunk<D>(w, g, wv);
  auto* dst = reinterpret_cast<__half2*>(out + g * kGroup);
#pragma unroll
  for (int j = 0; j < kGroup / 2; ++j) dst[j] = __floats2half2_rn(wv[2 * j], wv[2 * j + 1]);
}

template <typename H>
__global__ void convert_kernel(const float* __restrict__ x, int64_t n, H* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = to_16bit<H>(__ldg(x + i));
}

constexpr int kElementwiseThreads = 256;

unsigned elementwise_grid(int64_t n) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  if (blocks > int64_t(INT32_MAX)) throw std::invalid_argument("cuda::matmul: operand too large for one grid");
  return unsigned(blocks);
}

template <class D>
void launch_dequantize(const void* w, int64_t num_chunks, __half* out, cudaStream_t stream) {
  FLASHSERVE_LAUNCH(elementwise_grid(num_chunks), kElementwiseThreads, 0, stream, dequantize_kernel<D>)(
      static_cast<const char*>(w), num_chunks, out);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

bool quantized(DType t) { return block_layout(t).elems > 1; }

// row_bytes() lives in the CPU library; the CUDA library keeps its own copy of the layouts.
size_t weight_row_bytes(DType t, int64_t k) {
  const BlockLayout l = block_layout(t);
  if (l.elems == 0) throw std::invalid_argument("cuda::matmul: unknown weight type " + std::to_string(uint32_t(t)));
  return size_t(k / l.elems) * size_t(l.bytes);
}

void check_args(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out,
                const float* y) {
  weight_row_bytes(wtype, k);  // rejects unknown types
  if (num_tokens < 0 || n_out < 0) throw std::invalid_argument("cuda::matmul: negative num_tokens or n_out");
  if (k <= 0) throw std::invalid_argument("cuda::matmul: k must be positive");
  if (k % block_layout(wtype).elems != 0)
    throw std::invalid_argument("cuda::matmul: k=" + std::to_string(k) + " is not whole quant blocks");
  if (num_tokens > 0 && n_out > 0 && (x == nullptr || w == nullptr || y == nullptr))
    throw std::invalid_argument("cuda::matmul: null operand");
}

// Largest power of two (up to 256) dividing the address: what cuBLASLt may assume of the operand.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

}  // namespace

// ---- The context: cuBLASLt handle, workspace, scratch and per-shape plans ----

struct MatmulContext::Impl {
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  // A cuBLASLt product of one shape, types and operand alignment: descriptors and the chosen algo.
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  void* w16 = nullptr;  // expanded weights: [n_out][k] F16
  size_t w16_bytes = 0;
  void* x16 = nullptr;  // x in the weights' 16-bit type: [num_tokens][k]
  size_t x16_bytes = 0;
  std::map<PlanKey, Plan> plans;

  ~Impl() {
    for (auto& [key, plan] : plans) {
      cublasLtMatrixLayoutDestroy(plan.a);
      cublasLtMatrixLayoutDestroy(plan.b);
      cublasLtMatrixLayoutDestroy(plan.d);
      cublasLtMatmulDescDestroy(plan.desc);
    }
    // Errors are ignored: a destructor must not throw, and the process may be tearing CUDA down.
    cudaFree(x16);
    cudaFree(w16);
    cudaFree(workspace);
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  // Created on first use, so a context costs nothing (and needs no device) until a large batch.
  void ensure_handle() {
    if (handle != nullptr) return;
    FLASHSERVE_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    FLASHSERVE_LT_CHECK(cublasLtCreate(&handle));
  }

  // cudaFree synchronizes the device, so the old buffer is idle when it goes. Growth inside a
  // graph capture would be an allocation the graph cannot replay: reserve() must have been called.
  static void grow(void*& buf, size_t& capacity, size_t bytes, cudaStream_t stream) {
    if (bytes <= capacity) return;
    if (stream != nullptr) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      FLASHSERVE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
      if (capture != cudaStreamCaptureStatusNone)
        throw std::runtime_error("cuda::matmul: scratch too small during graph capture; call reserve() first");
    }
    FLASHSERVE_CUDA_CHECK(cudaFree(buf));
    buf = nullptr;
    capacity = 0;
    FLASHSERVE_CUDA_CHECK(cudaMalloc(&buf, bytes));
    capacity = bytes;
  }

  const Plan& plan(cudaDataType_t ab_type, int64_t num_tokens, int64_t k, int64_t n_out, const void* a,
                   const void* b, const void* d);

  void gemm(cudaDataType_t ab_type, const void* w, const void* x, int64_t num_tokens, int64_t k, int64_t n_out,
            float* y, cudaStream_t stream);
};

// Row-major y [T][N] = x [T][K] . W[N][K]^T in cuBLASLt's column-major terms. A row-major R x C
// matrix is a column-major C x R one with the same leading dimension C, so W is Wc = K x N (ld K),
// x is Xc = K x T (ld K) and y is Yc = N x T (ld N). Then Yc[o][t] = sum_k Wc[k][o] Xc[k][t], i.e.
// Yc = Wc^T Xc: A = Wc transposed (m = N, k = K), B = Xc as stored (n = T), D = Yc. This "TN" form
// reads both operands along their contiguous K, the layout cuBLASLt's tensor-core kernels prefer.
const MatmulContext::Impl::Plan& MatmulContext::Impl::plan(cudaDataType_t ab_type, int64_t num_tokens, int64_t k,
                                                           int64_t n_out, const void* a, const void* b,
                                                           const void* d) {
  const uint32_t align_a = alignment(a), align_b = alignment(b), align_d = alignment(d);
  const PlanKey key{int(ab_type), num_tokens, k, n_out, align_a, align_b, align_d};
  if (auto it = plans.find(key); it != plans.end()) return it->second;

  Plan p;
  FLASHSERVE_LT_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  FLASHSERVE_LT_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  FLASHSERVE_LT_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  FLASHSERVE_LT_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab_type, uint64_t(k), uint64_t(n_out), k));
  FLASHSERVE_LT_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab_type, uint64_t(k), uint64_t(num_tokens), k));
  FLASHSERVE_LT_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, uint64_t(n_out), uint64_t(num_tokens), n_out));

  cublasLtMatmulPreference_t pref = nullptr;
  FLASHSERVE_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // The pairs below are attribute, value; C is D (beta = 0 never reads it) so it shares D's alignment.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &workspace_bytes, sizeof(workspace_bytes));
  for (const auto& [attr, value] : aligns) {
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
  }
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && found == 0) status = CUBLAS_STATUS_NOT_SUPPORTED;
  if (status != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
    check_lt(status, "cublasLtMatmulAlgoGetHeuristic (with its preferences)");
  }
  p.algo = result.algo;
  return plans.emplace(key, p).first->second;
}

void MatmulContext::Impl::gemm(cudaDataType_t ab_type, const void* w, const void* x, int64_t num_tokens, int64_t k,
                               int64_t n_out, float* y, cudaStream_t stream) {
  const Plan& p = plan(ab_type, num_tokens, k, n_out, w, x, y);
  const float alpha = 1.0f, beta = 0.0f;
  FLASHSERVE_LT_CHECK(cublasLtMatmul(handle, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d, &p.algo,
                                     workspace, kWorkspaceBytes, stream));
}

MatmulContext::MatmulContext(bool gemv_only) : gemv_only_(gemv_only), impl_(std::make_unique<Impl>()) {}
MatmulContext::~MatmulContext() = default;

void MatmulContext::reserve(int64_t max_tokens, int64_t max_k, int64_t max_n_out) {
  if (max_tokens < 0 || max_k < 0 || max_n_out < 0) throw std::invalid_argument("MatmulContext::reserve: negative size");
  if (max_tokens <= kGemvMaxTokens || gemv_only_) return;  // the GEMV needs no scratch
  impl_->ensure_handle();
  Impl::grow(impl_->w16, impl_->w16_bytes, size_t(max_n_out) * size_t(max_k) * 2, nullptr);
  Impl::grow(impl_->x16, impl_->x16_bytes, size_t(max_tokens) * size_t(max_k) * 2, nullptr);
}

namespace {

// launch_gemv and launch_dequantize with the decoder with_decoder picks.
struct GemvLauncher {
  const float* x;
  int64_t num_tokens, k;
  const void* w;
  size_t row_bytes;
  int64_t n_out;
  float* y;
  cudaStream_t stream;
  template <class D>
  void operator()() const {
    launch_gemv<D>(x, num_tokens, k, w, row_bytes, n_out, y, stream);
  }
};
struct DequantizeLauncher {
  const void* w;
  int64_t num_chunks;
  __half* out;
  cudaStream_t stream;
  template <class D>
  void operator()() const {
    launch_dequantize<D>(w, num_chunks, out, stream);
  }
};

void gemv(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y,
          cudaStream_t stream) {
  const size_t rb = weight_row_bytes(wtype, k);
  if ((n_out + kRowsPerBlock - 1) / kRowsPerBlock > int64_t(INT32_MAX))
    throw std::invalid_argument("cuda::matmul: n_out too large for one grid");
  switch (wtype) {
    case DType::F32: return launch_gemv<F32Elem>(x, num_tokens, k, w, rb, n_out, y, stream);
    case DType::F16: return launch_gemv<F16Elem>(x, num_tokens, k, w, rb, n_out, y, stream);
    case DType::BF16: return launch_gemv<BF16Elem>(x, num_tokens, k, w, rb, n_out, y, stream);
    default: with_decoder(wtype, GemvLauncher{x, num_tokens, k, w, rb, n_out, y, stream});
  }
}

// W as F16 in scratch (quantized types only).
void expand_weights(const void* w, DType wtype, int64_t k, int64_t n_out, __half* out, cudaStream_t stream) {
  const int64_t num_chunks = n_out * (k / kGroup);
  if (!with_decoder(wtype, DequantizeLauncher{w, num_chunks, out, stream})) {
    throw std::logic_error("expand_weights: not a quantized type");
  }
}

template <typename H>
void convert_x(const float* x, int64_t n, void* out, cudaStream_t stream) {
  FLASHSERVE_LAUNCH(elementwise_grid(n), kElementwiseThreads, 0, stream, convert_kernel<H>)(x, n, static_cast<H*>(out));
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

// F16 and BF16 weights feed cuBLASLt in place; quantized ones are expanded to F16 first. x is
// rounded to the weights' 16-bit type, which bounds this path's error (see the tests).
void large_batch(MatmulContext::Impl& ctx, const float* x, int64_t num_tokens, int64_t k, const void* w,
                 DType wtype, int64_t n_out, float* y, cudaStream_t stream) {
  ctx.ensure_handle();
  if (wtype == DType::F32) return ctx.gemm(CUDA_R_32F, w, x, num_tokens, k, n_out, y, stream);
  const bool bf16 = wtype == DType::BF16;
  if (quantized(wtype)) MatmulContext::Impl::grow(ctx.w16, ctx.w16_bytes, size_t(n_out) * size_t(k) * 2, stream);
  MatmulContext::Impl::grow(ctx.x16, ctx.x16_bytes, size_t(num_tokens) * size_t(k) * 2, stream);
  const void* w16 = w;
  if (quantized(wtype)) {
    expand_weights(w, wtype, k, n_out, static_cast<__half*>(ctx.w16), stream);
    w16 = ctx.w16;
  }
  if (bf16)
    convert_x<__nv_bfloat16>(x, num_tokens * k, ctx.x16, stream);
  else
    convert_x<__half>(x, num_tokens * k, ctx.x16, stream);
  ctx.gemm(bf16 ? CUDA_R_16BF : CUDA_R_16F, w16, ctx.x16, num_tokens, k, n_out, y, stream);
}

}  // namespace

void matmul(MatmulContext& ctx, const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype,
            int64_t n_out, float* y, CUstream_st* stream) {
  check_args(x, num_tokens, k, w, wtype, n_out, y);
  if (num_tokens == 0 || n_out == 0) return;
  if (num_tokens <= kGemvMaxTokens) return gemv(x, num_tokens, k, w, wtype, n_out, y, stream);
  if (!ctx.gemv_only()) return large_batch(ctx.impl(), x, num_tokens, k, w, wtype, n_out, y, stream);
  for (int64_t t = 0; t < num_tokens; t += kGemvMaxTokens)
    gemv(x + t * k, std::min(kGemvMaxTokens, num_tokens - t), k, w, wtype, n_out, y + t * n_out, stream);
}

}  // namespace flashserve::kernels::cuda
