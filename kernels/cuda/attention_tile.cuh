// What both attention kernels share (argument checks, type dispatch, the paged-KV view, warp
// reductions), and decode's tile loop. A thread block holds up to kWarps * R query rows in shared
// memory (R rows per warp) and streams one KV head's context through shared memory in tiles of
// kBlockK positions read from the pages. Per tile each warp scores its rows against the tile (lane =
// key), folds the scores into an online softmax and accumulates P V into registers (lane = output
// dims), so a warp only ever talks to itself between the two block-wide syncs of a tile. Scores live
// in the log2 domain: queries are pre-scaled by scale * log2(e) and exp2f does the rest. Decode has
// at most 8 query rows per KV head, half an mma's 16, so its math stays f32 on CUDA cores;
// prefill (prefill_attention.cu) runs on tensor cores. An fp8 (E4M3) cache is widened to f16 on its
// way into shared memory, exactly (every E4M3 value is an f16 value), so past the load both kernels
// run their f16 code: the cache type T is only what stream_kv reads, Staged<T> what the tiles hold.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/paged_attention.h"

namespace flashserve::kernels::cuda::attention {

constexpr int kWarp = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kBlockK = kWarp;  // scoring gives each lane one key of the tile
constexpr float kLog2e = 1.4426950408889634f;

// ---- host side --------------------------------------------------------------------------------

inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Everything prefill and decode reject, checked on the host before any CUDA call so a bad request
// fails the same way with or without a device.
inline void check_attention_args(const char* op, const float* q, const void* k_cache, const void* v_cache,
                                 DType kv_type, const KvLayout& layout, const AttentionBatch& batch,
                                 int32_t num_heads, const float* out) {
  require(kv_cache_type_supported(kv_type), op, "KV cache type must be F16, BF16 or F8_E4M3");
  require(attention_head_dim_supported(layout.head_dim), op,
          "head_dim " + std::to_string(layout.head_dim) + " is not supported (64, 128 or 256)");
  require(layout.block_size > 0 && layout.num_kv_heads > 0, op, "block_size and num_kv_heads must be positive");
  require(num_heads > 0 && num_heads % layout.num_kv_heads == 0, op,
          "num_heads must be a positive multiple of num_kv_heads");
  // Both are grid dimensions limited to 65535.
  require(num_heads <= 65535 && batch.num_seqs >= 0 && batch.num_seqs <= 65535, op,
          "num_heads or num_seqs out of range");
  require(batch.max_num_queries >= 0 && batch.max_context_len >= 0 && batch.max_blocks_per_seq >= 0, op,
          "negative batch bound");
  require(int64_t(batch.max_blocks_per_seq) * layout.block_size >= batch.max_context_len, op,
          "block tables cannot cover max_context_len");
  // Rows are read and written as 16-byte vectors.
  require(aligned16(q) && aligned16(k_cache) && aligned16(v_cache) && aligned16(out), op,
          "q, caches and out must be 16-byte aligned");
}

// What a tile holds of a cache of element type T.
template <class T>
struct StagedAs {
  using type = T;
};
template <>
struct StagedAs<__nv_fp8_e4m3> {
  using type = __half;
};
template <class T>
using Staged = typename StagedAs<T>::type;

// Calls f(T{}, std::integral_constant<int, D>{}) for the cache element type and head dim; the
// arguments were checked by check_attention_args.
template <class F>
void dispatch(DType kv_type, int32_t head_dim, F&& f) {
  const auto by_dim = [&](auto tag) {
    if (head_dim == 64) f(tag, std::integral_constant<int, 64>{});
    else if (head_dim == 128) f(tag, std::integral_constant<int, 128>{});
    else f(tag, std::integral_constant<int, 256>{});
  };
  if (kv_type == DType::F16) by_dim(__half{});
  else if (kv_type == DType::BF16) by_dim(__nv_bfloat16{});
  else by_dim(__nv_fp8_e4m3{});
}

// ---- device side ------------------------------------------------------------------------------

// Two cache elements packed little-endian in a word (lower address in the low half), widened
// exactly to f32.
template <class T>
__device__ __forceinline__ float2 widen(uint32_t w);
template <>
__device__ __forceinline__ float2 widen<__half>(uint32_t w) {
  return make_float2(__half2float(__ushort_as_half(uint16_t(w))), __half2float(__ushort_as_half(uint16_t(w >> 16))));
}
template <>
__device__ __forceinline__ float2 widen<__nv_bfloat16>(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__device__ __forceinline__ float warp_max(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// The butterfly adds the same two operands in every pair of lanes, so all lanes end bit-identical.
__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <int D, int R>
struct TileSmem {
  static constexpr int kRows = kWarps * R;
  static constexpr int kWords = D / 2;   // a row of D cache elements as packed pairs
  alignas(16) float q[kRows][D];         // pre-scaled query rows
  uint32_t k[kBlockK][kWords + 1];       // the odd stride puts lanes reading different keys in different banks
  uint32_t v[kBlockK][kWords];           // read along rows, so unpadded
  alignas(16) float p[kWarps][kBlockK][R];  // each warp's softmax weights, key-major for broadcast reads
};

// One KV head's pages of one sequence, read in vectors of 8 elements.
struct PagedKv {
  const void* k;
  const void* v;
  const int32_t* block_table;
  int32_t block_size;
  int32_t num_kv_heads;
  int32_t kv_head;
};

// Which positions a warp's rows may see: rows r < count (query heads of one token) sit at pos and
// see positions up to there (only its last `window` of them when window > 0); rows from count on
// are padding and see nothing.
struct WarpRows {
  int32_t pos;
  int32_t count;
  int32_t window;
};

// Per row: running max (log2 domain, identical in every lane), this lane's share of the running sum,
// and the unnormalised output for the dims 2 * (lane + 32 i) and 2 * (lane + 32 i) + 1.
template <int D, int R>
struct RowState {
  static constexpr int kPairs = D / (2 * kWarp);
  float m[R];
  float l[R];
  float2 acc[R][kPairs];
};

// Rows [0, rows) of the tile from first_row + row * row_stride, times qscale; the rest zero.
template <int D, int R>
__device__ void load_q(TileSmem<D, R>& sh, const float* first_row, int64_t row_stride, int rows, float qscale) {
  constexpr int kVecs = D / 4;
  for (int i = threadIdx.x; i < TileSmem<D, R>::kRows * kVecs; i += kThreads) {
    const int row = i / kVecs, vec = i % kVecs;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) {
      x = __ldg(reinterpret_cast<const float4*>(first_row + row * row_stride) + vec);
      x = make_float4(x.x * qscale, x.y * qscale, x.z * qscale, x.w * qscale);
    }
    *reinterpret_cast<float4*>(&sh.q[row][vec * 4]) = x;
  }
}

__device__ __forceinline__ void store_words(uint32_t* dst, uint4 w) {
  dst[0] = w.x;
  dst[1] = w.y;
  dst[2] = w.z;
  dst[3] = w.w;
}

// Elements 8 at .. 8 at + 7 of a cache of T, as a tile holds them (8 Staged<T> in 16 bytes).
template <class T>
__device__ __forceinline__ uint4 load8(const void* cache, int64_t at) {
  return __ldg(static_cast<const uint4*>(cache) + at);
}
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two), __NV_E4M3);
  return uint32_t(h.x) | uint32_t(h.y) << 16;
}
template <>
__device__ __forceinline__ uint4 load8<__nv_fp8_e4m3>(const void* cache, int64_t at) {
  const uint2 w = __ldg(static_cast<const uint2*>(cache) + at);
  return make_uint4(e4m3x2_to_f16x2(w.x & 0xffffu), e4m3x2_to_f16x2(w.x >> 16), e4m3x2_to_f16x2(w.y & 0xffffu),
                    e4m3x2_to_f16x2(w.y >> 16));
}

// Hands store(row, vec, k, v) every vector of 8 elements of the K and V rows of positions t0 ..
// t0 + rows - 1 as the tile holds them, spread over the block (consecutive threads read consecutive
// vectors of a row). Positions from kv_end on come as zeros, so that their (zero) weights never
// meet garbage.
template <class T, int D, class Store>
__device__ void stream_kv(const PagedKv& kv, int32_t t0, int rows, int32_t kv_end, Store&& store) {
  constexpr int kVecs = D / 8;
  for (int i = threadIdx.x; i < rows * kVecs; i += kThreads) {
    const int row = i / kVecs, vec = i % kVecs;
    const int32_t pos = t0 + row;
    uint4 k = make_uint4(0, 0, 0, 0), v = k;
    if (pos < kv_end) {
      const int64_t slot = int64_t(kv.block_table[pos / kv.block_size]) * kv.block_size + pos % kv.block_size;
      const int64_t at = (slot * kv.num_kv_heads + kv.kv_head) * kVecs + vec;
      k = load8<T>(kv.k, at);
      v = load8<T>(kv.v, at);
    }
    store(row, vec, k, v);
  }
}

// Positions t0 .. t0 + kBlockK - 1 into shared memory.
template <class T, int D, int R>
__device__ void load_kv_tile(TileSmem<D, R>& sh, const PagedKv& kv, int32_t t0, int32_t kv_end) {
  stream_kv<T, D>(kv, t0, kBlockK, kv_end, [&](int row, int vec, uint4 k, uint4 v) {
    store_words(&sh.k[row][vec * 4], k);
    store_words(&sh.v[row][vec * 4], v);
  });
}

// s[r] = q_r . K[lane] for the warp's rows.
template <class T, int D, int R>
__device__ void score_tile(const TileSmem<D, R>& sh, int warp, int lane, float (&s)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) s[r] = 0.0f;
#pragma unroll 4
  for (int w = 0; w < D / 2; w += 2) {
    const float2 k01 = widen<Staged<T>>(sh.k[lane][w]), k23 = widen<Staged<T>>(sh.k[lane][w + 1]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4 q = *reinterpret_cast<const float4*>(&sh.q[warp * R + r][2 * w]);
      s[r] = fmaf(q.x, k01.x, s[r]);
      s[r] = fmaf(q.y, k01.y, s[r]);
      s[r] = fmaf(q.z, k23.x, s[r]);
      s[r] = fmaf(q.w, k23.y, s[r]);
    }
  }
}

// Folds the tile's masked scores into the running softmax and leaves the weights in p.
template <int D, int R>
__device__ void softmax_update(RowState<D, R>& st, const float (&s)[R], float (&p)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float m_new = fmaxf(st.m[r], warp_max(s[r]));
    // A row that has seen no visible position keeps max -inf; subtracting 0 then keeps its weights
    // at exp2(-inf) = 0 instead of exp2(-inf + inf) = NaN.
    const float base = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(st.m[r] - base);
    p[r] = exp2f(s[r] - base);
    st.m[r] = m_new;
    st.l[r] = fmaf(st.l[r], alpha, p[r]);
#pragma unroll
    for (int i = 0; i < RowState<D, R>::kPairs; ++i)
      st.acc[r][i] = make_float2(st.acc[r][i].x * alpha, st.acc[r][i].y * alpha);
  }
}

// acc_r += sum_j p[j][r] V[j] over the tile, keys in ascending order.
template <class T, int D, int R>
__device__ void accumulate_tile(const TileSmem<D, R>& sh, int warp, int lane, RowState<D, R>& st) {
  constexpr int kPairs = RowState<D, R>::kPairs;
#pragma unroll 4
  for (int j = 0; j < kBlockK; ++j) {
    float2 v[kPairs];
#pragma unroll
    for (int i = 0; i < kPairs; ++i) v[i] = widen<Staged<T>>(sh.v[j][lane + kWarp * i]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float p = sh.p[warp][j][r];
#pragma unroll
      for (int i = 0; i < kPairs; ++i)
        st.acc[r][i] = make_float2(fmaf(p, v[i].x, st.acc[r][i].x), fmaf(p, v[i].y, st.acc[r][i].y));
    }
  }
}

// Attends the block's rows over positions [kv_begin, kv_end). Every thread of the block must call
// it (it syncs); the rows must be in sh.q already (the first sync publishes them). Nothing before
// kv_begin is read, so a sliding window's caller starts there and the blocks before may be gone.
template <class T, int D, int R>
__device__ void attend(TileSmem<D, R>& sh, const PagedKv& kv, int32_t kv_begin, int32_t kv_end, const WarpRows& rows,
                       RowState<D, R>& st) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    st.m[r] = -INFINITY;
    st.l[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < RowState<D, R>::kPairs; ++i) st.acc[r][i] = make_float2(0.0f, 0.0f);
  }
  for (int32_t t0 = kv_begin; t0 < kv_end; t0 += kBlockK) {
    load_kv_tile<T>(sh, kv, t0, kv_end);
    __syncthreads();
    if (rows.count > 0) {  // warp-uniform: a warp with only padding rows just helps load
      float s[R];
      score_tile<T>(sh, warp, lane, s);
      const int32_t pos = t0 + lane;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r >= rows.count || pos >= kv_end || pos > rows.pos || (rows.window > 0 && pos <= rows.pos - rows.window))
          s[r] = -INFINITY;
      softmax_update(st, s, sh.p[warp][lane]);
      __syncwarp();
      accumulate_tile<T>(sh, warp, lane, st);
    }
    __syncthreads();  // the next tile overwrites K, V and P
  }
}

// dst[d] = f * acc[d] for the lane's dims; row-contiguous float2 stores across the warp.
template <int kPairs>
__device__ void store_row(const float2 (&acc)[kPairs], int lane, float f, float* dst) {
  float2* out = reinterpret_cast<float2*>(dst);
#pragma unroll
  for (int i = 0; i < kPairs; ++i) out[lane + kWarp * i] = make_float2(acc[i].x * f, acc[i].y * f);
}

}  // namespace flashserve::kernels::cuda::attention
