// FlashAttention-2 style prefill over a ragged batch. Grid (query tiles, heads, sequences): a block
// owns kBlockQ consecutive queries of one sequence for one head, keeps them in shared memory and
// streams the head's KV pages through in tiles of 32 positions (attention_tile.cuh), stopping at the
// last position its latest query can see (from the first one its earliest query sees, under a
// sliding window). Each warp owns R query rows, so the causal mask, the online
// softmax and P V stay inside the warp. Shared memory: 36 KB at head_dim 128 (32 queries), 32 KB at
// head_dim 64 (64 queries), under the 48 KB a launch gets without opt-in.
// f32 math on CUDA cores for now; tensor cores are a later tuning step on a real GPU.
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"

namespace flashserve::kernels::cuda {
namespace {

using namespace attention;

// Rows per warp: 32 queries per block at head_dim 128, 64 at 64, which keeps 32 accumulators per lane.
template <int D>
constexpr int kPrefillRows = 1024 / D;

template <int D>
constexpr int kBlockQ = kWarps * kPrefillRows<D>;

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    prefill_kernel(const float* q, const uint4* k_cache, const uint4* v_cache, KvLayout layout, AttentionBatch batch,
                   int32_t num_heads, float qscale, float* out) {
  constexpr int R = kPrefillRows<D>;
  __shared__ TileSmem<D, R> sh;
  const int32_t seq = blockIdx.z, head = blockIdx.y, q0 = blockIdx.x * kBlockQ<D>;
  const int32_t first = batch.query_start[seq], n = batch.query_start[seq + 1] - first;
  if (q0 >= n) return;  // grids are sized for the longest sequence (or a graph's limit)
  const int32_t rows = min(kBlockQ<D>, n - q0);
  // Query i of the sequence sits at position context - n + i.
  const int32_t pos0 = batch.context_lens[seq] - n + q0;

  const int64_t row_stride = int64_t(num_heads) * D;
  const int64_t base = (first + q0) * row_stride + int64_t(head) * D;
  load_q(sh, q + base, row_stride, rows, qscale);

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const WarpRows mine{pos0 + warp * R, 1, max(0, min(R, rows - warp * R)), batch.window};
  const PagedKv kv{k_cache, v_cache, batch.block_tables + int64_t(seq) * batch.max_blocks_per_seq, layout.block_size,
                   layout.num_kv_heads, head / (num_heads / layout.num_kv_heads)};
  RowState<D, R> st;
  // With a sliding window, the tile's first query sees nothing before pos0 - window + 1.
  attend<T>(sh, kv, batch.window > 0 ? max(0, pos0 - batch.window + 1) : 0, pos0 + rows, mine, st);

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float l = warp_sum(st.l[r]);
    // Every real row sees its own position, so l > 0; the guard only keeps a malformed batch finite.
    if (r < mine.count)
      store_row(st.acc[r], lane, l > 0.0f ? 1.0f / l : 0.0f, out + base + (warp * R + r) * row_stride);
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
    const dim3 grid(unsigned((batch.max_num_queries + kBlockQ<D> - 1) / kBlockQ<D>), unsigned(num_heads),
                    unsigned(batch.num_seqs));
    FLASHSERVE_LAUNCH(grid, kThreads, 0, stream, prefill_kernel<T, D>)(
        q, static_cast<const uint4*>(k_cache), static_cast<const uint4*>(v_cache), layout, batch, num_heads,
        scale * kLog2e, out);
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace flashserve::kernels::cuda
