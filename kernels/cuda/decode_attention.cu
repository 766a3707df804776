// Flash-decoding. Contract: every sequence has exactly one query, row s of q and out (query_start is
// not read; batch.max_num_queries is unused). Two kernels:
//  * split: grid (splits, KV heads, sequences). A block takes one kDecodePartition-long slice of one
//    sequence's context for one KV head and treats the query heads of that KV head's group as its
//    query rows (2 per warp, up to kMaxGroup), so each K/V page is read once per KV head. It runs the
//    tile loop of attention_tile.cuh (21 KB of shared memory at head_dim 128) and
//    leaves per (sequence, head, split) the max, the sum and the unnormalised output in the workspace.
//  * merge: grid (heads, sequences), one thread per dim, rescales and sums the splits in split order,
//    so the result depends only on the context length.
// A CUDA graph sizes the split grid by the model's context limit; slices starting at or beyond a
// sequence's context, or ending before its sliding window, return at once, and the merge reads
// only the slices the window and the context reach.
// f32 math on CUDA cores: a KV head's group has at most 8 query rows, half an mma's 16.
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"

namespace flashserve::kernels::cuda {
namespace {

using namespace attention;

constexpr int kRowsPerWarp = 2;
constexpr int kMaxGroup = kWarps * kRowsPerWarp;
static_assert(kMaxGroup == kDecodeMaxGroup, "the header promises callers this group size");

__host__ __device__ constexpr int32_t num_splits(int32_t context_len) {
  return (context_len + kDecodePartition - 1) / kDecodePartition;
}

// The first position the query (at context - 1) sees; the splits wholly before it do nothing.
__device__ int32_t first_visible(int32_t context_len, int32_t window) {
  return window > 0 ? max(0, context_len - window) : 0;
}

// Workspace: acc [items][head_dim], then max [items], then sum [items]; an item is
// (seq * num_heads + head) * splits + split. Max and sum are in the log2 domain of the split kernel.
struct Workspace {
  float* acc;
  float* max;
  float* sum;

  Workspace(void* base, int64_t items, int32_t head_dim)
      : acc(static_cast<float*>(base)), max(acc + items * head_dim), sum(max + items) {}
};

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    decode_split_kernel(const float* q, const void* k_cache, const void* v_cache, KvLayout layout,
                        AttentionBatch batch, int32_t num_heads, float qscale, Workspace ws, int32_t splits) {
  constexpr int R = kRowsPerWarp;
  __shared__ TileSmem<D, R> sh;
  const int32_t split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int32_t context = batch.context_lens[seq];
  const int32_t lo = first_visible(context, batch.window);
  const int32_t end = min((split + 1) * kDecodePartition, context);
  if (end <= lo) return;  // before the window, or past the context
  const int32_t begin = max(split * kDecodePartition, lo);

  const int32_t group = num_heads / layout.num_kv_heads;
  const int32_t head0 = kv_head * group;
  load_q(sh, q + (int64_t(seq) * num_heads + head0) * D, D, group, qscale);

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  // All heads of the one query sit at the last position.
  const WarpRows mine{context - 1, max(0, min(R, group - warp * R)), batch.window};
  const int32_t table_row = batch.table_rows ? batch.table_rows[seq] : seq;
  const PagedKv kv{k_cache, v_cache, batch.block_tables + int64_t(table_row) * batch.max_blocks_per_seq, layout.block_size,
                   layout.num_kv_heads, kv_head};
  RowState<D, R> st;
  attend<T>(sh, kv, begin, end, mine, st);

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float l = warp_sum(st.l[r]);
    if (r >= mine.count) continue;
    const int64_t item = (int64_t(seq) * num_heads + head0 + warp * R + r) * splits + split;
    store_row(st.acc[r], lane, 1.0f, ws.acc + item * D);
    if (lane == 0) {
      ws.max[item] = st.m[r];
      ws.sum[item] = l;
    }
  }
}

// Needs no cache type: it only reads the workspace.
template <int D>
__global__ void __launch_bounds__(D)
    decode_merge_kernel(Workspace ws, const int32_t* context_lens, int32_t window, int32_t num_heads, int32_t splits,
                        float* out) {
  const int32_t head = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int32_t used = min(num_splits(context_lens[seq]), splits);
  const int32_t skipped = first_visible(context_lens[seq], window) / kDecodePartition;
  const int64_t first = (int64_t(seq) * num_heads + head) * splits;
  float m = -INFINITY;
  for (int32_t i = skipped; i < used; ++i) m = fmaxf(m, ws.max[first + i]);
  float sum = 0.0f, acc = 0.0f;
  for (int32_t i = skipped; i < used; ++i) {
    const float w = exp2f(ws.max[first + i] - m);
    sum = fmaf(w, ws.sum[first + i], sum);
    acc = fmaf(w, ws.acc[(first + i) * D + d], acc);
  }
  // Only an empty context (no split) leaves sum 0.
  out[(int64_t(seq) * num_heads + head) * D + d] = sum > 0.0f ? acc / sum : 0.0f;
}

}  // namespace

size_t decode_attention_workspace_bytes(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                        int32_t max_context_len) {
  require(num_seqs >= 0 && num_heads >= 0 && head_dim >= 0 && max_context_len >= 0,
          "cuda::decode_attention_workspace_bytes", "negative size");
  const int64_t items = int64_t(num_seqs) * num_heads * num_splits(max_context_len);
  return size_t(items) * size_t(head_dim + 2) * sizeof(float);
}

void decode_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type,
                      const KvLayout& layout, const AttentionBatch& batch, int32_t num_heads, float scale,
                      float* out, void* workspace, CUstream_st* stream) {
  const char* op = "cuda::decode_attention";
  check_attention_args(op, q, k_cache, v_cache, kv_type, layout, batch, num_heads, out);
  require(num_heads / layout.num_kv_heads <= kMaxGroup, op,
          "at most " + std::to_string(kMaxGroup) + " query heads per KV head are supported");
  require(aligned16(workspace), op, "workspace must be 16-byte aligned");
  if (batch.num_seqs == 0 || batch.max_context_len == 0) return;
  const int32_t splits = num_splits(batch.max_context_len);
  const Workspace ws(workspace, int64_t(batch.num_seqs) * num_heads * splits, layout.head_dim);
  dispatch(kv_type, layout.head_dim, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    const dim3 split_grid(unsigned(splits), unsigned(layout.num_kv_heads), unsigned(batch.num_seqs));
    FLASHSERVE_LAUNCH(split_grid, kThreads, 0, stream, decode_split_kernel<T, D>)(
        q, k_cache, v_cache, layout, batch, num_heads, scale * kLog2e, ws, splits);
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
    FLASHSERVE_LAUNCH(dim3(unsigned(num_heads), unsigned(batch.num_seqs)), D, 0, stream, decode_merge_kernel<D>)(
        ws, batch.context_lens, batch.window, num_heads, splits, out);
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace flashserve::kernels::cuda
