// Mixture-of-experts routing: each token picks its top_k experts from router logits, and the
// (token, expert) assignments are grouped by expert so each expert's rows can be multiplied together.
#pragma once
#include <cstddef>
#include <cstdint>

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

// Where moe_route writes; all arrays are the caller's. Assignment a = token * top_k + j names the
// token's j-th choice.
struct MoeRouting {
  int32_t* topk_ids;            // [num_tokens][top_k]: best first (higher logit; lower id on ties)
  float* topk_weights;          // [num_tokens][top_k]: softmax over all experts of those choices,
                                //   divided by their sum when `renormalize` (Mixtral), else as is
  int32_t* expert_offsets;      // [num_experts + 1]: expert e owns sorted_assignments[offsets[e] .. offsets[e+1])
  int32_t* sorted_assignments;  // [num_tokens * top_k]: grouped by expert, ascending within an expert
};

constexpr int32_t kMoeMaxExperts = 256;
constexpr int32_t kMoeMaxTopK = 8;

// logits: [num_tokens][num_experts]. Grouping is a counting sort over the bounded expert ids, so it
// is stable and the same on every backend. Throws std::invalid_argument unless
// 1 <= top_k <= min(num_experts, kMoeMaxTopK) and num_experts <= kMoeMaxExperts.
void moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,
               const MoeRouting& out);

// dst[ids[i]] = src[i] for rows of `dim` floats: each expert's outputs to their assignments' slots.
void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst);

// out[t] = sum_j weights[t * k + j] * rows[t * k + j], j = 0..k-1 in that order: a token's weighted
// expert outputs summed in its own choice order, so batching and expert grouping move no bit.
// rows: [n * k][dim], weights: [n * k], out: [n][dim].
void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out);

namespace cuda {
// The same contract on device pointers (CUDA builds only), with scratch the caller provides.
size_t moe_route_workspace_bytes(int64_t num_tokens, int32_t num_experts, int32_t top_k);
void moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,
               const MoeRouting& out, void* workspace, CUstream_st* stream);
void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst, CUstream_st* stream);
void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out,
                       CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
