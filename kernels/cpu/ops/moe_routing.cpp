#include "kernels/moe_routing.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/simd.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

void check_args(int64_t num_tokens, int32_t num_experts, int32_t top_k) {
  if (num_tokens < 0) throw std::invalid_argument("moe_route: negative token count");
  if (num_experts < 1 || num_experts > kMoeMaxExperts)
    throw std::invalid_argument("moe_route: num_experts must be in [1, kMoeMaxExperts]");
  if (top_k < 1 || top_k > std::min(num_experts, kMoeMaxTopK))
    throw std::invalid_argument("moe_route: top_k must be in [1, min(num_experts, kMoeMaxTopK)]");
}

// Expert a ranks before expert b: higher logit, lower id on ties.
bool ranks_before(const float* logits, int32_t a, int32_t b) {
  return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

// Insertion into the sorted `top` list; experts arrive in id order, so an equal logit never
// displaces an earlier (lower) id.
void select_top_k(const float* logits, int32_t num_experts, int32_t top_k, int32_t* top) {
  int32_t filled = 0;
  for (int32_t e = 0; e < num_experts; ++e) {
    if (filled == top_k && !ranks_before(logits, e, top[top_k - 1])) continue;
    int32_t pos = std::min(filled, top_k - 1);
    while (pos > 0 && ranks_before(logits, e, top[pos - 1])) {
      top[pos] = top[pos - 1];
      --pos;
    }
    top[pos] = e;
    filled = std::min(filled + 1, top_k);
  }
}

// One token: its top_k ids and their softmax probabilities (over all experts).
void route_token(const float* logits, int32_t num_experts, int32_t top_k, bool renormalize, int32_t* ids,
                 float* weights) {
  const float mx = *std::max_element(logits, logits + num_experts);
  float sum = 0.0f;
  for (int32_t e = 0; e < num_experts; ++e) sum += simd::exp(logits[e] - mx);
  select_top_k(logits, num_experts, top_k, ids);
  float picked = 0.0f;
  for (int32_t j = 0; j < top_k; ++j) {
    weights[j] = simd::exp(logits[ids[j]] - mx) / sum;
    picked += weights[j];
  }
  if (renormalize)
    for (int32_t j = 0; j < top_k; ++j) weights[j] /= picked;
}

// Counting sort of the assignments by expert: histogram, exclusive scan, then a scatter in
// assignment order, which keeps each expert's assignments ascending.
void group_by_expert(const int32_t* ids, int64_t num_assignments, int32_t num_experts, int32_t* offsets,
                     int32_t* sorted) {
  std::vector<int32_t> next(static_cast<size_t>(num_experts) + 1, 0);
  for (int64_t a = 0; a < num_assignments; ++a) ++next[ids[a] + 1];
  for (int32_t e = 0; e < num_experts; ++e) next[e + 1] += next[e];
  std::copy(next.begin(), next.end(), offsets);
  for (int64_t a = 0; a < num_assignments; ++a) sorted[next[ids[a]]++] = int32_t(a);
}

}  // namespace

void moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,
               const MoeRouting& out) {
  check_args(num_tokens, num_experts, top_k);
  if (num_tokens * top_k > INT32_MAX) throw std::invalid_argument("moe_route: assignments overflow int32");
  parallel_for(
      num_tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          route_token(logits + t * num_experts, num_experts, top_k, renormalize, out.topk_ids + t * top_k,
                      out.topk_weights + t * top_k);
      },
      num_tokens * num_experts >= (1 << 14));
  group_by_expert(out.topk_ids, num_tokens * top_k, num_experts, out.expert_offsets, out.sorted_assignments);
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
