// Attention over a paged KV cache. A layer's K and V caches are pools of blocks:
// [num_blocks][block_size][num_kv_heads][head_dim] f32; a sequence's block_table lists the blocks
// holding its positions 0..context_len-1 in order (position p lives in block_table[p / block_size]
// at offset p % block_size). A slot is block * block_size + offset.
#pragma once
#include <cstdint>

namespace flashserve::kernels {

struct KvLayout {
  int32_t block_size;
  int32_t num_kv_heads;
  int32_t head_dim;
};

// Copies the new tokens' K and V rows into their slots.
// k, v: [num_tokens][num_kv_heads][head_dim]; slot_mapping: [num_tokens].
void kv_write(const KvLayout& layout, float* k_cache, float* v_cache, const float* k, const float* v,
              const int32_t* slot_mapping, int64_t num_tokens);

// One sequence's slice of a ragged batch: its queries are rows query_start .. query_start+num_queries-1
// of q and out; query i sits at position context_len - num_queries + i and attends causally to
// positions 0..that position (all already written to the cache).
struct AttentionSeq {
  int32_t query_start;
  int32_t num_queries;
  int32_t context_len;
  const int32_t* block_table;
};

// out[t][h] = sum_j softmax_j(scale * q[t][h] . K[j][h / group]) V[j][h / group],
// group = num_heads / num_kv_heads (grouped-query attention).
// q, out: [num_tokens][num_heads][head_dim]. Each (token, head) row is reduced over its positions
// in ascending order, so results do not depend on batching or on how a prompt was chunked.
void paged_attention(const float* q, const float* k_cache, const float* v_cache, const KvLayout& layout,
                     const AttentionSeq* seqs, int32_t num_seqs, int32_t num_heads, float scale,
                     float* out);

}  // namespace flashserve::kernels
