// The sampling op on the CPU: the engine's sampler for CPU runs and the twin the CUDA kernel is
// tested against (a plain reference in tests/kernels/reference_sampling.h checks this one). Written
// to stay linear in the vocabulary: candidate sets are found by widening logit thresholds, and
// only as many tokens are sorted as a top-k or top-p needs.
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/softmax.h"

namespace flashserve::kernels {
namespace {

// Rows reused across calls: sample() runs per token per request, and a fresh vocab-sized allocation
// each time would cost as much as the arithmetic. Per thread, so samplers may run concurrently.
struct Scratch {
  std::vector<float> logits;  // adjusted logits
  std::vector<float> probs;   // their tempered softmax; later the raw softmax, for logprobs
  std::vector<int32_t> ids;   // candidate, then kept, token ids
  std::vector<double> block_mass;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// A strict total order on tokens: higher logit first, lower id on ties. Being total, "the n best
// tokens" is one set whichever algorithm picks it, so draws stay reproducible.
struct Better {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

float max_value(const float* x, int32_t n) {
  // Independent lanes: a single running max would wait on its own latency every element.
  float lane[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = std::max(lane[j], x[i + j]);
  }
  for (; i < n; ++i) lane[0] = std::max(lane[0], x[i]);
  return *std::max_element(lane, lane + 8);
}

// The lowest id among the largest values (token 0 for an all-NaN row, rather than out of range).
int32_t argmax(const float* x, int32_t n) {
  const int32_t at = static_cast<int32_t>(std::find(x, x + n, max_value(x, n)) - x);
  return at < n ? at : 0;
}

// Sum of probs over ids[begin, end), in independent lanes so the adds do not wait on each other.
double mass(const float* probs, const int32_t* begin, const int32_t* end) {
  double lane[4] = {0.0, 0.0, 0.0, 0.0};
  for (; begin + 4 <= end; begin += 4) {
    for (int j = 0; j < 4; ++j) lane[j] += probs[begin[j]];
  }
  for (; begin < end; ++begin) lane[0] += probs[*begin];
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

double mass(const float* probs, const std::vector<int32_t>& ids) {
  return mass(probs, ids.data(), ids.data() + ids.size());
}

// Sets ids to the tokens i < vocab with keep(i), in id order. Written without a branch per token:
// most of a vocabulary-sized loop is spent on tokens that are dropped.
template <typename Keep>
void collect(int32_t vocab, std::vector<int32_t>& ids, Keep keep) {
  ids.resize(vocab);
  int32_t* out = ids.data();
  size_t n = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    out[n] = i;
    n += keep(i) ? 1 : 0;
  }
  ids.resize(n);
}

// softmax(logits / T) into probs. Subtracting the max before dividing keeps a tiny temperature from
// overflowing into inf - inf = NaN.
void tempered_probs(const float* logits, int32_t vocab, float temperature, float max, float* probs) {
  for (int32_t i = 0; i < vocab; ++i) probs[i] = (logits[i] - max) / temperature;
  softmax(probs, 1, vocab);
}

// Sets ids to the tokens whose logit is within `delta` of the max, widening delta until `enough(ids)`
// (or every token is in). Such a set is always a prefix of the Better order, so it holds the best
// tokens -- found in a few linear passes instead of a selection over the whole vocabulary.
template <typename Enough>
void gather_best(const float* logits, int32_t vocab, float max, float delta, std::vector<int32_t>& ids,
                 Enough enough) {
  for (;; delta *= 2.0f) {
    const float floor = max - delta;
    collect(vocab, ids, [&](int32_t i) { return logits[i] >= floor; });
    if (enough(ids) || ids.size() == static_cast<size_t>(vocab) || std::isinf(delta)) return;
  }
}

// The first widening admits tokens 256 times less likely than the best: usually all a top-k or
// top-p needs. The floor keeps a near-zero temperature from creeping up in near-zero steps.
float first_delta(float temperature) { return std::max(temperature * 5.545177f /* ln 256 */, 1e-3f); }

// Makes ids[done, want) the next best of ids[done, limit), sorted best first.
size_t sort_more(std::vector<int32_t>& ids, size_t done, size_t want, size_t limit, Better better) {
  if (want < limit) std::nth_element(ids.begin() + done, ids.begin() + want, ids.begin() + limit, better);
  std::sort(ids.begin() + done, ids.begin() + want, better);
  return want;
}

// How many of the best of ids (in any order) it takes to reach `target` probability. Sorts only as
// far as that: nuclei are usually far smaller than the candidate set.
size_t nucleus_size(std::vector<int32_t>& ids, const float* probs, double target, Better better) {
  const size_t limit = ids.size();
  double cumulative = 0.0;
  size_t sorted = 0;
  for (size_t i = 0; i < limit; ++i) {
    if (i == sorted) {
      sorted = sort_more(ids, sorted, std::min(limit, std::max<size_t>(64, 2 * sorted)), limit, better);
    }
    cumulative += probs[ids[i]];
    if (cumulative >= target) return i + 1;
  }
  return limit;
}

// Sets ids to what top-k, then top-p (over the top-k survivors' mass, as in vLLM), keep; false, with
// ids untouched, when neither is on.
bool truncate(const SamplingRow& p, const float* logits, const float* probs, int32_t vocab, float max,
              std::vector<int32_t>& ids) {
  const bool top_k_on = p.top_k > 0 && p.top_k < vocab;
  const bool top_p_on = p.top_p < 1.0f;
  if (!top_k_on && !top_p_on) return false;
  const Better better{logits};
  const float delta = first_delta(p.temperature);
  double top_p_base = 1.0;  // the mass top-p takes its fraction of
  if (top_k_on) {
    gather_best(logits, vocab, max, delta, ids,
                [&](const std::vector<int32_t>& c) { return c.size() >= static_cast<size_t>(p.top_k); });
    const size_t k = std::min<size_t>(p.top_k, ids.size());  // fewer only if some logits are NaN
    std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(), better);
    ids.resize(k);
    top_p_base = mass(probs, ids);
  } else {
    gather_best(logits, vocab, max, delta, ids,
                [&](const std::vector<int32_t>& c) { return mass(probs, c) >= p.top_p; });
  }
  if (top_p_on) ids.resize(nucleus_size(ids, probs, p.top_p * top_p_base, better));
  return true;
}

// The tokens to draw from, in id order: the truncated set (or all) less those under min_prob.
void kept_tokens(bool truncated, const float* probs, int32_t vocab, float min_prob, std::vector<int32_t>& ids) {
  if (truncated) {
    std::erase_if(ids, [&](int32_t id) { return probs[id] < min_prob; });
    std::sort(ids.begin(), ids.end());
    return;
  }
  if (min_prob > 0.0f) {
    collect(vocab, ids, [&](int32_t i) { return probs[i] >= min_prob; });
  } else {
    ids.resize(vocab);
    std::iota(ids.begin(), ids.end(), 0);
  }
}

// Walks ids in order to where the cumulative probability passes u of their total: first over the
// masses of blocks of ids, then inside one block, so the serial part stays short even over the whole
// vocabulary. The best token is always kept (min_p <= 1), so ids is never empty.
int32_t draw(const float* probs, const std::vector<int32_t>& ids, double u, int32_t best,
             std::vector<double>& block_mass) {
  constexpr size_t kBlock = 64;
  const size_t size = ids.size();
  block_mass.clear();
  double total = 0.0;
  for (size_t b = 0; b < size; b += kBlock) {
    block_mass.push_back(mass(probs, ids.data() + b, ids.data() + std::min(size, b + kBlock)));
    total += block_mass.back();
  }
  if (!(total > 0.0)) return best;  // NaN logits: no mass anywhere, as the CUDA kernel does
  // Strictly below the total (which the block walk re-adds exactly), so the walk stops in a block
  // that has mass.
  const double target = std::min(u * total, std::nextafter(total, 0.0));
  size_t block = 0;
  double cumulative = 0.0;
  for (; block + 1 < block_mass.size() && cumulative + block_mass[block] <= target; ++block) {
    cumulative += block_mass[block];
  }
  // The serial sum may round below the block's lane sum: then its last token with mass it is.
  int32_t chosen = ids[block * kBlock];
  for (size_t i = block * kBlock; i < std::min(size, (block + 1) * kBlock); ++i) {
    if (probs[ids[i]] <= 0.0f) continue;
    chosen = ids[i];
    cumulative += probs[chosen];
    if (cumulative > target) break;
  }
  return chosen;
}

// The sampler's original library was built without -march, so its `count * f + p` rounds the
// product before the add; keep that (-march=native would let GCC fuse the two and move a bit).
[[gnu::optimize("fp-contract=off")]] float frequency_presence(float logit, int32_t count, const SamplingRow& row) {
  return logit - (static_cast<float>(count) * row.frequency_penalty + row.presence_penalty);
}

// Per touched token: bias, then the repetition penalty (CTRL's rule: once per distinct token, and
// dividing a negative logit would raise it), then OpenAI's frequency and presence penalties.
void apply_adjusts(float* logits, const SamplingRow& row, const TokenAdjust* adjusts) {
  for (int32_t i = row.adjust_begin; i < row.adjust_end; ++i) {
    const TokenAdjust& a = adjusts[i];
    float l = logits[a.token] + a.bias;
    if (row.repetition_penalty != 1.0f && a.seen) l = l > 0.0f ? l / row.repetition_penalty : l * row.repetition_penalty;
    if ((row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f) && a.output_count > 0)
      l = frequency_presence(l, a.output_count, row);
    logits[a.token] = l;
  }
}

void apply_mask(float* logits, int32_t vocab, const uint32_t* mask) {
  for (int32_t i = 0; i < vocab; ++i) {
    if (!((mask[i >> 5] >> (i & 31)) & 1)) logits[i] = -INFINITY;
  }
}

int32_t sample_row(float* logits, int32_t vocab, const SamplingRow& row, const TokenAdjust* adjusts,
                   const uint32_t* masks) {
  apply_adjusts(logits, row, adjusts);
  if (row.mask_row >= 0) apply_mask(logits, vocab, masks + size_t(row.mask_row) * size_t(mask_words(vocab)));
  const int32_t best = argmax(logits, vocab);
  if (row.temperature == 0.0f) return best;
  Scratch& s = scratch();
  s.probs.resize(vocab);
  const float* probs = s.probs.data();
  tempered_probs(logits, vocab, row.temperature, logits[best], s.probs.data());
  const bool truncated = truncate(row, logits, probs, vocab, logits[best], s.ids);
  kept_tokens(truncated, probs, vocab, row.min_p * probs[best], s.ids);
  return draw(probs, s.ids, row.uniform, best, s.block_mass);
}

void check_row(const SamplingRow& row, const TokenAdjust* adjusts, const uint32_t* masks, int32_t vocab) {
  if (row.adjust_begin < 0 || row.adjust_end < row.adjust_begin || (row.adjust_end > row.adjust_begin && !adjusts))
    throw std::invalid_argument("sample_rows: bad adjust range");
  if (row.mask_row < -1 || (row.mask_row >= 0 && !masks)) throw std::invalid_argument("sample_rows: bad mask row");
  for (int32_t i = row.adjust_begin; i < row.adjust_end; ++i) {
    if (adjusts[i].token < 0 || adjusts[i].token >= vocab)
      throw std::invalid_argument("sample_rows: adjusted token " + std::to_string(adjusts[i].token) +
                                  " outside the vocabulary");
  }
}

}  // namespace

void sample_rows(float* logits, int32_t num_rows, int32_t vocab, const SamplingRow* rows,
                 const TokenAdjust* adjusts, const uint32_t* masks, int32_t* tokens) {
  if (num_rows < 0 || vocab <= 0) throw std::invalid_argument("sample_rows: need num_rows >= 0 and vocab > 0");
  for (int32_t r = 0; r < num_rows; ++r) check_row(rows[r], adjusts, masks, vocab);
  for (int32_t r = 0; r < num_rows; ++r) {
    tokens[r] = sample_row(logits + static_cast<size_t>(r) * vocab, vocab, rows[r], adjusts, masks);
  }
}

void token_logprobs(const float* raw, int32_t vocab, int32_t token, int32_t top_n, float& logprob,
                    std::vector<std::pair<int32_t, float>>& top) {
  if (vocab <= 0 || token < 0 || token >= vocab || top_n < 0)
    throw std::invalid_argument("token_logprobs: token " + std::to_string(token) + " outside a vocabulary of " +
                                std::to_string(vocab));
  // softmax's entry for the best token is exp(0) / sum, which gives log(sum) without a second exp
  // pass; subtracting it from each logit keeps tail logprobs exact where probabilities underflow.
  Scratch& s = scratch();
  const int32_t best = argmax(raw, vocab);
  s.probs.assign(raw, raw + vocab);
  softmax(s.probs.data(), 1, vocab);
  const double log_norm = static_cast<double>(raw[best]) - std::log(static_cast<double>(s.probs[best]));
  logprob = static_cast<float>(raw[token] - log_norm);
  top.clear();
  if (top_n == 0) return;
  gather_best(raw, vocab, raw[best], first_delta(1.0f), s.ids,
              [&](const std::vector<int32_t>& c) { return c.size() >= static_cast<size_t>(top_n); });
  const size_t n = std::min<size_t>(top_n, s.ids.size());
  std::partial_sort(s.ids.begin(), s.ids.begin() + n, s.ids.end(), Better{raw});
  for (size_t i = 0; i < n; ++i) top.emplace_back(s.ids[i], static_cast<float>(raw[s.ids[i]] - log_norm));
}

}  // namespace flashserve::kernels
