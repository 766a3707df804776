#include "scheduler/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "kernels/softmax.h"

namespace flashserve {
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

// 53 random bits as a double in [0, 1). Fixed arithmetic, unlike std::uniform_real_distribution,
// whose algorithm the standard leaves to each library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

void apply_logit_bias(const SamplingParams& p, float* logits) {
  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
}

// CTRL's rule: once per distinct token, whatever its count; dividing a negative logit would raise it.
void apply_repetition_penalty(float penalty, const std::vector<int32_t>& prompt,
                              const std::unordered_map<int32_t, int32_t>& counts, float* logits) {
  auto penalise = [&](int32_t id) {
    float& l = logits[id];
    l = l > 0.0f ? l / penalty : l * penalty;
  };
  for (int32_t id : prompt) penalise(id);
  for (const auto& entry : counts) {
    if (!std::binary_search(prompt.begin(), prompt.end(), entry.first)) penalise(entry.first);
  }
}

// OpenAI's rule, over generated tokens only: frequency per occurrence, presence once.
void apply_frequency_presence(const SamplingParams& p, const std::unordered_map<int32_t, int32_t>& counts,
                              float* logits) {
  for (const auto& [id, count] : counts) {
    logits[id] -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
}

// softmax(logits / T) into probs. Subtracting the max before dividing keeps a tiny temperature from
// overflowing into inf - inf = NaN.
void tempered_probs(const float* logits, int32_t vocab, float temperature, float max, float* probs) {
  for (int32_t i = 0; i < vocab; ++i) probs[i] = (logits[i] - max) / temperature;
  kernels::softmax(probs, 1, vocab);
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
bool truncate(const SamplingParams& p, const float* logits, const float* probs, int32_t vocab, float max,
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
// vocabulary. The best token is always kept, so ids is never empty and the total is positive.
int32_t draw(const float* probs, const std::vector<int32_t>& ids, double u, std::vector<double>& block_mass) {
  constexpr size_t kBlock = 64;
  const size_t size = ids.size();
  block_mass.clear();
  double total = 0.0;
  for (size_t b = 0; b < size; b += kBlock) {
    block_mass.push_back(mass(probs, ids.data() + b, ids.data() + std::min(size, b + kBlock)));
    total += block_mass.back();
  }
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

// log_softmax of the raw logits. softmax's entry for the best token is exp(0) / sum, which gives
// log(sum) without a second exp pass; subtracting it from each logit keeps tail logprobs exact
// where their probabilities underflow.
void fill_logprobs(const float* raw, int32_t vocab, int32_t top_n, Scratch& s, SampledToken& out) {
  const int32_t best = argmax(raw, vocab);
  s.probs.assign(raw, raw + vocab);
  kernels::softmax(s.probs.data(), 1, vocab);
  const double log_norm = static_cast<double>(raw[best]) - std::log(static_cast<double>(s.probs[best]));
  out.logprob = static_cast<float>(raw[out.token] - log_norm);
  if (top_n == 0) return;
  gather_best(raw, vocab, raw[best], first_delta(1.0f), s.ids,
              [&](const std::vector<int32_t>& c) { return c.size() >= static_cast<size_t>(top_n); });
  const size_t n = std::min<size_t>(top_n, s.ids.size());
  std::partial_sort(s.ids.begin(), s.ids.begin() + n, s.ids.end(), Better{raw});
  for (size_t i = 0; i < n; ++i) {
    out.top_logprobs.emplace_back(s.ids[i], static_cast<float>(raw[s.ids[i]] - log_norm));
  }
}

}  // namespace

RequestSampler::RequestSampler(const SamplingParams& params, const std::vector<int32_t>& prompt,
                               uint64_t fallback_seed)
    : params_(params), rng_(params.seed.value_or(fallback_seed)), prompt_tokens_(prompt) {
  std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
  prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()), prompt_tokens_.end());
}

SampledToken RequestSampler::sample(const float* logits, int32_t vocab) {
  Scratch& s = scratch();
  s.logits.assign(logits, logits + vocab);
  float* adjusted = s.logits.data();
  apply_logit_bias(params_, adjusted);
  if (params_.repetition_penalty != 1.0f) {
    apply_repetition_penalty(params_.repetition_penalty, prompt_tokens_, output_counts_, adjusted);
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    apply_frequency_presence(params_, output_counts_, adjusted);
  }

  SampledToken out;
  const int32_t best = argmax(adjusted, vocab);
  if (params_.temperature == 0.0f) {
    out.token = best;
  } else {
    s.probs.resize(vocab);
    const float* probs = s.probs.data();
    tempered_probs(adjusted, vocab, params_.temperature, adjusted[best], s.probs.data());
    const bool truncated = truncate(params_, adjusted, probs, vocab, adjusted[best], s.ids);
    kept_tokens(truncated, probs, vocab, params_.min_p * probs[best], s.ids);
    out.token = draw(probs, s.ids, uniform01(rng_), s.block_mass);
  }
  if (params_.logprobs >= 0) fill_logprobs(logits, vocab, params_.logprobs, s, out);
  ++output_counts_[out.token];
  return out;
}

bool RequestSampler::device_row(kernels::SamplingRow& row, std::vector<kernels::TokenAdjust>& adjusts) {
  if (params_.logprobs >= 0) return false;
  std::map<int32_t, kernels::TokenAdjust> touched;  // ordered, so the list is the same every run
  auto entry = [&](int32_t id) -> kernels::TokenAdjust& {
    return touched.try_emplace(id, kernels::TokenAdjust{id, 0, 0, 0.0f}).first->second;
  };
  for (const auto& [id, bias] : params_.logit_bias) entry(id).bias += bias;
  const bool repetition = params_.repetition_penalty != 1.0f;
  if (repetition) {
    for (int32_t id : prompt_tokens_) entry(id).seen = 1;
  }
  if (repetition || params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    for (const auto& [id, count] : output_counts_) {
      kernels::TokenAdjust& e = entry(id);
      e.output_count = count;
      e.seen = 1;
    }
  }
  row.temperature = params_.temperature;
  row.top_k = params_.top_k;
  row.top_p = params_.top_p;
  row.min_p = params_.min_p;
  row.repetition_penalty = params_.repetition_penalty;
  row.presence_penalty = params_.presence_penalty;
  row.frequency_penalty = params_.frequency_penalty;
  row.uniform = params_.temperature == 0.0f ? 0.0 : uniform01(rng_);
  row.adjust_begin = int32_t(adjusts.size());
  for (const auto& [id, e] : touched) adjusts.push_back(e);
  row.adjust_end = int32_t(adjusts.size());
  return true;
}

}  // namespace flashserve
