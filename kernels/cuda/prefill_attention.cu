// FlashAttention-2 style prefill over a ragged batch, on tensor cores. Grid (query tiles, heads,
// sequences): a block owns kTileQ consecutive queries of one sequence for one head, 16 per warp,
// and streams the head's KV pages through shared memory kTileK positions at a time, stopping at
// the last position its latest query can see (starting, under a sliding window, at the first one
// its earliest query sees). Per tile each warp computes its 16 x kTileK scores with mma.sync
// (mma.cuh), masks them, folds them into an online softmax in registers (log2 domain: queries are
// pre-scaled by scale * log2(e)) and adds P V with mma.sync again; the running sums stay in f32.
// The queries and the softmax weights enter the tensor cores rounded to the cache type (K and V
// already are; f16 for an fp8 cache), as in FlashAttention; docs/cuda.md gives the error bounds.
// The query tile passes through shared memory into registers before the first K/V tile, so the two
// share their space: 9 KiB at head_dim 64, 17 at 128, 33 at 256 (Gemma), under the 48 KiB a launch
// gets without opt-in.
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/mma.cuh"

namespace flashserve::kernels::cuda {
namespace {

using namespace attention;

constexpr int kRowsPerWarp = 16;  // an mma's M
constexpr int kTileQ = kWarps * kRowsPerWarp;
constexpr int kTileK = 32;
constexpr int kKeyGroups = kTileK / 8;  // the score tile's mma N blocks

template <class T, int D>
struct PrefillSmem {
  // 8 elements of padding move each row 4 banks on, so the 8 rows a fragment load touches hit 32
  // different banks.
  static constexpr int kStride = D + 8;
  union {
    alignas(16) T q[kTileQ][kStride];  // until every warp holds its query fragments
    struct {
      alignas(16) T k[kTileK][kStride];
      alignas(16) T v[kTileK][kStride];
    };
  };
};

template <class T>
__device__ __forceinline__ uint32_t load_pair(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Two elements from different rows (V read down a column), the first in the low half.
template <class T>
__device__ __forceinline__ uint32_t column_pair(const T& lo, const T& hi) {
  return uint32_t(*reinterpret_cast<const uint16_t*>(&lo)) | (uint32_t(*reinterpret_cast<const uint16_t*>(&hi)) << 16);
}

// Rows [0, rows) of the tile from first_row + row * row_stride, times qscale and rounded to T; the
// rest zero.
template <class T, int D>
__device__ void stage_q(PrefillSmem<T, D>& sh, const float* first_row, int64_t row_stride, int rows, float qscale) {
  constexpr int kVecs = D / 4;
  for (int i = threadIdx.x; i < kTileQ * kVecs; i += kThreads) {
    const int row = i / kVecs, vec = i % kVecs;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) x = __ldg(reinterpret_cast<const float4*>(first_row + row * row_stride) + vec);
    *reinterpret_cast<uint2*>(&sh.q[row][vec * 4]) =
        make_uint2(pack2<T>(x.x * qscale, x.y * qscale), pack2<T>(x.z * qscale, x.w * qscale));
  }
}

// Positions t0 .. t0 + kTileK - 1 into shared memory.
template <class T, int D>
__device__ void stage_kv(PrefillSmem<Staged<T>, D>& sh, const PagedKv& kv, int32_t t0, int32_t kv_end) {
  stream_kv<T, D>(kv, t0, kTileK, kv_end, [&](int row, int vec, uint4 k, uint4 v) {
    *reinterpret_cast<uint4*>(&sh.k[row][vec * 8]) = k;
    *reinterpret_cast<uint4*>(&sh.v[row][vec * 8]) = v;
  });
}

// One warp's 16 rows: fragment row g is query r0 + g (h = 0) and r0 + g + 8 (h = 1).
template <int D>
struct WarpState {
  float o[D / 8][4] = {};  // unnormalised output, mma accumulator layout
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};  // this lane's share of each row's sum
};

// s[j][i]: the score of row h = i / 2 with key t0 + 8 j + 2 t + i % 2.
template <class T, int D>
__device__ void score_tile(const PrefillSmem<T, D>& sh, const uint32_t (&qa)[D / 16][4], int g, int t,
                           float (&s)[kKeyGroups][4]) {
#pragma unroll
  for (int j = 0; j < kKeyGroups; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t b[2] = {load_pair(&sh.k[8 * j + g][16 * kk + 2 * t]),
                             load_pair(&sh.k[8 * j + g][16 * kk + 2 * t + 8])};
      mma_16x8x16<T>(s[j], qa[kk], b);
    }
  }
}

// Masks the scores, folds them into the running max and sums, and leaves the weights in s.
template <int D>
__device__ void softmax_tile(WarpState<D>& st, float (&s)[kKeyGroups][4], int32_t t0, int t, int32_t kv_end,
                             const int32_t (&pos)[2], const bool (&valid)[2], int32_t window) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeyGroups; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int32_t key = t0 + 8 * j + 2 * t + e;
        const bool seen = valid[h] && key < kv_end && key <= pos[h] && !(window > 0 && key <= pos[h] - window);
        float& x = s[j][2 * h + e];
        if (!seen) x = -INFINITY;
        mx = fmaxf(mx, x);
      }
    }
    // The four lanes of a fragment row hold its 32 scores.
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[h], mx);
    // A row that has seen nothing keeps max -inf; subtracting 0 then gives weights exp2(-inf) = 0
    // instead of exp2(-inf + inf) = NaN.
    const float base = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(st.m[h] - base);
    st.m[h] = m_new;
    st.l[h] *= alpha;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      st.o[nd][2 * h] *= alpha;
      st.o[nd][2 * h + 1] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < kKeyGroups; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[j][2 * h + e];
        x = exp2f(x - base);
        st.l[h] += x;
      }
    }
  }
}

// o += P V: the score accumulators of key blocks 2 kk and 2 kk + 1 are exactly the A fragment of
// keys 16 kk .. 16 kk + 15, so P never leaves registers.
template <class T, int D>
__device__ void accumulate_tile(const PrefillSmem<T, D>& sh, const float (&p)[kKeyGroups][4], int g, int t,
                                WarpState<D>& st) {
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
    const uint32_t pa[4] = {pack2<T>(p[2 * kk][0], p[2 * kk][1]), pack2<T>(p[2 * kk][2], p[2 * kk][3]),
                            pack2<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                            pack2<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const int key = 16 * kk + 2 * t;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      const int d = 8 * nd + g;
      const uint32_t b[2] = {column_pair(sh.v[key][d], sh.v[key + 1][d]),
                             column_pair(sh.v[key + 8][d], sh.v[key + 9][d])};
      mma_16x8x16<T>(st.o[nd], pa, b);
    }
  }
}

// T is the cache's element type; the tiles and the tensor cores see S.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    prefill_kernel(const float* q, const void* k_cache, const void* v_cache, KvLayout layout, AttentionBatch batch,
                   int32_t num_heads, float qscale, float* out) {
  using S = Staged<T>;
  __shared__ PrefillSmem<S, D> sh;
  const int32_t seq = blockIdx.z, head = blockIdx.y, q0 = blockIdx.x * kTileQ;
  const int32_t first = batch.query_start[seq], n = batch.query_start[seq + 1] - first;
  if (q0 >= n) return;  // grids are sized for the longest sequence (or a graph's limit)
  const int32_t rows = min(kTileQ, n - q0);
  // Query i of the sequence sits at position context - n + i.
  const int32_t pos0 = batch.context_lens[seq] - n + q0;
  const int64_t row_stride = int64_t(num_heads) * D;
  const int64_t base = (first + q0) * row_stride + int64_t(head) * D;
  stage_q(sh, q + base, row_stride, rows, qscale);
  __syncthreads();

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int r0 = warp * kRowsPerWarp;
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    qa[kk][0] = load_pair(&sh.q[r0 + g][16 * kk + 2 * t]);
    qa[kk][1] = load_pair(&sh.q[r0 + g + 8][16 * kk + 2 * t]);
    qa[kk][2] = load_pair(&sh.q[r0 + g][16 * kk + 2 * t + 8]);
    qa[kk][3] = load_pair(&sh.q[r0 + g + 8][16 * kk + 2 * t + 8]);
  }
  __syncthreads();  // K and V overwrite the queries
  const int32_t pos[2] = {pos0 + r0 + g, pos0 + r0 + g + 8};
  const bool valid[2] = {r0 + g < rows, r0 + g + 8 < rows};
  const int32_t table_row = batch.table_rows ? batch.table_rows[seq] : seq;
  const PagedKv kv{k_cache, v_cache, batch.block_tables + int64_t(table_row) * batch.max_blocks_per_seq, layout.block_size,
                   layout.num_kv_heads, head / (num_heads / layout.num_kv_heads)};
  WarpState<D> st;
  // With a sliding window, the tile's first query sees nothing before pos0 - window + 1.
  const int32_t kv_begin = batch.window > 0 ? max(0, pos0 - batch.window + 1) : 0, kv_end = pos0 + rows;
  for (int32_t t0 = kv_begin; t0 < kv_end; t0 += kTileK) {
    stage_kv<T>(sh, kv, t0, kv_end);
    __syncthreads();
    if (r0 < rows) {  // warp-uniform: a warp with only padding rows just helps load
      float s[kKeyGroups][4];
      score_tile<S, D>(sh, qa, g, t, s);
      softmax_tile<D>(st, s, t0, t, kv_end, pos, valid, batch.window);
      accumulate_tile<S, D>(sh, s, g, t, st);
    }
    __syncthreads();  // the next tile overwrites K and V
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h] + __shfl_xor_sync(0xffffffffu, st.l[h], 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (!valid[h]) continue;
    // Every real row sees its own position, so l > 0; the guard only keeps a malformed batch finite.
    const float f = l > 0.0f ? 1.0f / l : 0.0f;
    float* dst = out + base + int64_t(r0 + g + 8 * h) * row_stride;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<float2*>(dst + 8 * nd + 2 * t) = make_float2(st.o[nd][2 * h] * f, st.o[nd][2 * h + 1] * f);
  }
}

}  // namespace

void prefill_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type,
                       const KvLayout& layout, const AttentionBatch& batch, int32_t num_heads, float scale,
                       float* out, CUstream_st* stream) {
  check_attention_args("cuda::prefill_attention", q, k_cache, v_cache, kv_type, layout, batch, num_heads, out);
  if (batch.num_seqs == 0 || batch.max_num_queries == 0) return;
  dispatch(kv_type, layout.head_dim, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    const dim3 grid(unsigned((batch.max_num_queries + kTileQ - 1) / kTileQ), unsigned(num_heads),
                    unsigned(batch.num_seqs));
    FLASHSERVE_LAUNCH(grid, kThreads, 0, stream, prefill_kernel<T, D>)(
        q, k_cache, v_cache, layout, batch, num_heads, scale * kLog2e, out);
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace flashserve::kernels::cuda
