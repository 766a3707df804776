// The sampling op's rules written as plainly as possible (full sorts, serial sums): the reference
// the backends' sample_rows are checked against, token for token.
#pragma once
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/softmax.h"

namespace flashserve::reference {
namespace plain_sampling {

using kernels::SamplingRow;
using kernels::TokenAdjust;

// Unfused, like the op (see kernels/cpu/sampling.cpp).
[[gnu::optimize("fp-contract=off")]] float frequency_presence(float logit, int32_t count, const SamplingRow& row) {
  return logit - (static_cast<float>(count) * row.frequency_penalty + row.presence_penalty);
}

// Per token: bias, then the repetition penalty (CTRL's rule), then frequency and presence.
inline void apply_adjusts(float* logits, const SamplingRow& row, const TokenAdjust* adjusts) {
  for (int32_t i = row.adjust_begin; i < row.adjust_end; ++i) {
    const TokenAdjust& a = adjusts[i];
    float l = logits[a.token] + a.bias;
    if (row.repetition_penalty != 1.0f && a.seen) l = l > 0.0f ? l / row.repetition_penalty : l * row.repetition_penalty;
    if ((row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f) && a.output_count > 0)
      l = frequency_presence(l, a.output_count, row);
    logits[a.token] = l;
  }
}

// The lowest id among the largest values, NaNs ignored (token 0 if all are NaN).
inline int32_t argmax(const float* logits, int32_t vocab) {
  float best = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i) best = std::max(best, logits[i]);  // max(best, NaN) keeps best
  const int32_t at = static_cast<int32_t>(std::find(logits, logits + vocab, best) - logits);
  return at < vocab ? at : 0;
}

inline std::vector<float> tempered_probs(const float* logits, int32_t vocab, float temperature, float max) {
  std::vector<float> probs(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) probs[i] = (logits[i] - max) / temperature;
  kernels::softmax(probs.data(), 1, vocab);
  return probs;
}

// Top-k, then top-p over the top-k survivors' mass, then min-p; the kept ids in ascending order.
inline std::vector<int32_t> kept_ids(const float* logits, const std::vector<float>& probs, int32_t best,
                              const SamplingRow& row, int32_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const bool top_k_on = row.top_k > 0 && row.top_k < vocab;
  const bool top_p_on = row.top_p < 1.0f;
  size_t n = ids.size();
  if (top_k_on) n = static_cast<size_t>(row.top_k);
  if (top_k_on || top_p_on) {
    // The n best first: higher logit, lower id on ties -- a total order, so "the n best" is one set.
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
  }
  double top_p_base = 1.0;
  if (top_k_on) {
    top_p_base = 0.0;
    for (size_t i = 0; i < n; ++i) top_p_base += probs[ids[i]];
  }
  if (top_p_on) {
    const double target = row.top_p * top_p_base;
    double cumulative = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cumulative += probs[ids[i]];
      if (cumulative >= target) {
        n = i + 1;
        break;
      }
    }
  }
  const float min_prob = row.min_p * probs[best];
  ids.resize(n);
  std::erase_if(ids, [&](int32_t id) { return probs[id] < min_prob; });
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The first id, walking in id order, where the cumulative probability passes uniform * total; the
// target stays strictly below the total so rounding cannot walk off the end. With no mass kept
// (NaN logits, min_p > 1) the best token, as the CUDA kernel does.
inline int32_t draw(const std::vector<float>& probs, const std::vector<int32_t>& ids, double uniform, int32_t best) {
  double total = 0.0;
  for (int32_t id : ids) total += probs[id];
  if (!(total > 0.0)) return best;
  const double target = std::min(uniform * total, std::nextafter(total, 0.0));
  double cumulative = 0.0;
  int32_t chosen = ids.front();
  for (int32_t id : ids) {
    if (probs[id] <= 0.0f) continue;
    chosen = id;
    cumulative += probs[id];
    if (cumulative > target) break;
  }
  return chosen;
}

inline int32_t sample_row(float* logits, int32_t vocab, const SamplingRow& row, const TokenAdjust* adjusts,
                          const uint32_t* masks) {
  apply_adjusts(logits, row, adjusts);
  if (row.mask_row >= 0) {
    const uint32_t* mask = masks + size_t(row.mask_row) * size_t(kernels::mask_words(vocab));
    for (int32_t i = 0; i < vocab; ++i) {
      if (!(mask[i / 32] & (uint32_t(1) << (i % 32)))) logits[i] = -INFINITY;
    }
  }
  const int32_t best = argmax(logits, vocab);
  if (row.temperature == 0.0f) return best;
  const auto probs = tempered_probs(logits, vocab, row.temperature, logits[best]);
  return draw(probs, kept_ids(logits, probs, best, row, vocab), row.uniform, best);
}

inline void check_row(const SamplingRow& row, const TokenAdjust* adjusts, const uint32_t* masks, int32_t vocab) {
  if (row.adjust_begin < 0 || row.adjust_end < row.adjust_begin || (row.adjust_end > row.adjust_begin && !adjusts))
    throw std::invalid_argument("sample_rows: bad adjust range");
  if (row.mask_row < -1 || (row.mask_row >= 0 && !masks)) throw std::invalid_argument("sample_rows: bad mask row");
  for (int32_t i = row.adjust_begin; i < row.adjust_end; ++i) {
    if (adjusts[i].token < 0 || adjusts[i].token >= vocab)
      throw std::invalid_argument("sample_rows: adjusted token " + std::to_string(adjusts[i].token) +
                                  " outside the vocabulary");
  }
}

}  // namespace plain_sampling

// As kernels::sample_rows, including its argument checks.
inline void sample_rows(float* logits, int32_t num_rows, int32_t vocab, const kernels::SamplingRow* rows,
                 const kernels::TokenAdjust* adjusts, const uint32_t* masks, int32_t* tokens) {
  if (num_rows < 0 || vocab <= 0) throw std::invalid_argument("sample_rows: need num_rows >= 0 and vocab > 0");
  for (int32_t r = 0; r < num_rows; ++r) plain_sampling::check_row(rows[r], adjusts, masks, vocab);
  for (int32_t r = 0; r < num_rows; ++r) {
    tokens[r] = plain_sampling::sample_row(logits + static_cast<size_t>(r) * vocab, vocab, rows[r], adjusts, masks);
  }
}

}  // namespace flashserve::reference
