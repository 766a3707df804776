// Attention over a paged KV cache. A layer's K and V caches are pools of blocks:
// [num_blocks][block_size][num_kv_heads][head_dim] of the cache's element type; a sequence's block_table lists the blocks
// holding its positions 0..context_len-1 in order (position p lives in block_table[p / block_size]
// at offset p % block_size). A slot is block * block_size + offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/dtype.h"

struct CUstream_st;  // cudaStream_t, without pulling CUDA headers into CPU code

namespace flashserve::kernels {

struct KvLayout {
  int32_t block_size;
  int32_t num_kv_heads;
  int32_t head_dim;
};

// Which rows of q a sequence owns and which KV blocks hold its context: one descriptor for every
// backend, in the backend's memory. Sequence s owns rows query_start[s] .. query_start[s+1]-1; row
// i of them is at position context_lens[s] - num_queries + i and attends causally to positions
// 0..that position, all already written to the cache (chunked prefill and prefix-cache hits need
// nothing special). A sequence with context_len 0 is padding: its rows are left untouched.
struct AttentionBatch {
  const int32_t* query_start = nullptr;   // [num_seqs + 1]
  const int32_t* context_lens = nullptr;  // [num_seqs]: positions 0 .. context_len-1, the new ones included
  const int32_t* block_tables = nullptr;  // [rows][max_blocks_per_seq]: one row per sequence (table_rows)
  int32_t num_seqs = 0;
  int32_t max_blocks_per_seq = 0;
  // Upper bounds over the batch, known on the host. A GPU sizes its grid by them; a recorded step
  // (CUDA graph) keeps its grid, so the runner passes the model's limits there rather than the
  // step's, and work beyond a sequence's extent exits. One query per sequence selects decoding.
  int32_t max_num_queries = 0;
  int32_t max_context_len = 0;
  // > 0: sliding-window attention, each query sees only its last `window` positions (itself
  // included); block-table entries wholly before the first query's window are never read (they may
  // be -1: the scheduler has returned those blocks).
  int32_t window = 0;
  // [num_seqs]: the row of block_tables sequence s reads (a runner that keeps the tables on the
  // backend across steps leaves each sequence in its row, model/resident_tables.h); null: row s.
  const int32_t* table_rows = nullptr;
};

// Copies the new tokens' K and V rows into their slots, rounded to nearest (even) `kv_type`.
// k, v: [num_tokens][num_kv_heads][head_dim] f32; slot_mapping: [num_tokens]. A negative slot is
// skipped, so padding rows can carry slot -1. The CPU stores F32 only (std::invalid_argument else).
void kv_write(const KvLayout& layout, DType kv_type, void* k_cache, void* v_cache, const float* k, const float* v,
              const int32_t* slot_mapping, int64_t num_tokens);

// out[t][h] = sum_j softmax_j(scale * q[t][h] . K[j][h / group]) V[j][h / group],
// group = num_heads / num_kv_heads (grouped-query attention).
// q, out: [num_tokens][num_heads][head_dim] f32; the caches hold `kv_type`, math is f32. Each
// (token, head) row is reduced over its positions in ascending order, so results do not depend on
// batching or on how a prompt was chunked.
void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type, const KvLayout& layout,
                     const AttentionBatch& batch, int32_t num_heads, float scale, float* out);

namespace cuda {
// The CUDA twins (CUDA builds only): the same contract with caches of F16 or BF16, device pointers,
// work queued on `stream`. Head dims 64, 128 and 256 are supported. Shape errors throw
// std::invalid_argument, a failed launch std::runtime_error.
void kv_write(const KvLayout& layout, DType kv_type, void* k_cache, void* v_cache, const float* k,
              const float* v, const int32_t* slot_mapping, int64_t num_tokens, CUstream_st* stream);

// FlashAttention-2 style over a ragged batch: each thread block owns a tile of one sequence's
// queries for one head, streams that sequence's K/V pages through shared memory and keeps an online
// softmax, so no [queries x context] matrix is ever stored. Reads earlier context from the pages,
// so chunked prefill and prefix-cache hits need nothing special.
void prefill_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type,
                       const KvLayout& layout, const AttentionBatch& batch, int32_t num_heads, float scale,
                       float* out, CUstream_st* stream);

// Flash-decoding: every sequence has one query (query_start[s] == s). The context is split into
// partitions of kDecodePartition positions, each reduced by its own thread block, then merged; the
// split depends only on the context length, never on the batch. Each K/V page is read once per KV
// head, for all the query heads of its group.
constexpr int32_t kDecodePartition = 512;
constexpr int32_t kDecodeMaxGroup = 8;  // query heads per KV head one decode block serves
// The head dims both attention kernels are instantiated for (attention_tile.cuh's dispatch).
constexpr bool attention_head_dim_supported(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}
// The cache types kv_write and both attention kernels take.
constexpr bool kv_cache_type_supported(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F8_E4M3; }
size_t decode_attention_workspace_bytes(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                        int32_t max_context_len);
void decode_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type,
                      const KvLayout& layout, const AttentionBatch& batch, int32_t num_heads, float scale,
                      float* out, void* workspace, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
