// Activations times a weight matrix stored in any DType, read in place (never expanded to f32).
#pragma once
#include <cstdint>
#include <memory>
#include "kernels/dtype.h"

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

// y[t][o] = sum_k x[t][k] * W[o][k]      x: [num_tokens][k] f32, y: [num_tokens][n_out] f32
// W: n_out rows of k elements in `wtype`, row o at (const char*)w + o * row_bytes(wtype, k).
// Batch invariant: y[t][o] is bit-identical whatever num_tokens, the other rows of x, or the thread
// count -- each dot product runs in one fixed order; threads split output rows, never a reduction.
void matmul(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype,
            int64_t n_out, float* y);

// The same product with 8-bit activations, as the fastest CPU engines compute it: each token's row
// of x quantized once to blocks of 32 (a float scale, round to nearest even), then integer dot
// products with the weights' codes (AVX2 maddubs, AVX-512 VNNI where present). Close to matmul, not
// equal: each activation moves by up to half its block's step. Still batch invariant, and
// bit-identical between the scalar and the vector code. For every quantized weight format
// (matmul_q8_supports); float weights throw std::invalid_argument.
bool matmul_q8_supports(DType wtype);
void matmul_q8(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y);

// The rows of a Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, K-quant (not Q8_K) or IQ4_XS matrix (q8_packs) rearranged
// for matmul_q8_packed: sixteen rows interleaved four bytes at a time (kernels/cpu/q8_packed_layout.h),
// so that one integer dot instruction serves eight or sixteen rows and their sums come out one row
// a lane. A last group of fewer than sixteen rows is padded with zero rows: `out` takes
// q8_packed_bytes. A CPU backend packs each weight matrix once when it maps it (Backend::map_matrix).
bool q8_packs(DType wtype);
size_t q8_packed_bytes(DType wtype, int64_t n_out, int64_t k);
void pack_rows_for_q8(const void* w, DType wtype, int64_t n_out, int64_t k, void* out);
// matmul_q8 over pack_rows_for_q8's layout, bit-identical to matmul_q8 over the original rows.
void matmul_q8_packed(const float* x, int64_t num_tokens, int64_t k, const void* packed, DType wtype, int64_t n_out,
                      float* y);

// Row `row` of W expanded to f32 (embedding lookup).  out: [k]
void get_row(const void* w, DType wtype, int64_t k, int64_t row, float* out);

// Rows ids[0..n-1] of W expanded to f32 (the embedding gather for a batch).  out: [n][k]
void get_rows(const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out);

namespace cuda {
// The CUDA twins (CUDA builds only); every pointer is device memory, W in the same GGUF layout.

// Owns the cuBLASLt handle and the scratch that large-batch products expand weights into.
// gemv_only: every product runs the GEMV, kGemvMaxTokens rows at a time. The GEMV computes each row
// on its own, so a row's bits do not depend on the batch (the CUDA backend's batch-invariant mode);
// such a context never creates a handle or scratch.
class MatmulContext {
 public:
  explicit MatmulContext(bool gemv_only = false);
  ~MatmulContext();
  MatmulContext(const MatmulContext&) = delete;
  MatmulContext& operator=(const MatmulContext&) = delete;
  // Grows the scratch so that products up to these sizes allocate nothing: call it before capturing
  // a CUDA graph, which must not allocate.
  void reserve(int64_t max_tokens, int64_t max_k, int64_t max_n_out);
  bool gemv_only() const { return gemv_only_; }

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  const bool gemv_only_;
  std::unique_ptr<Impl> impl_;
};

// Up to this many rows of x, our dequantizing kernel reads W in place (decode: bandwidth bound).
// Above it, W is expanded to F16 (BF16 for BF16 weights) in the scratch and cuBLASLt multiplies with
// f32 accumulation (prefill: compute bound). F32 weights always go to cuBLASLt in f32.
constexpr int64_t kGemvMaxTokens = 8;

// The CPU contract: y[t][o] = sum_k x[t][k] * W[o][k]. Queued on `stream`.
void matmul(MatmulContext& ctx, const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype,
            int64_t n_out, float* y, CUstream_st* stream);

// ids: [n] on the device; an id outside W's rows is the caller's bug (the model checks token ids).
void get_rows(const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out,
              CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
