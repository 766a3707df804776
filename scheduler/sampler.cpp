#include "scheduler/sampler.h"

#include <algorithm>
#include <map>

namespace flashserve {
namespace {

// 53 random bits as a double in [0, 1). Fixed arithmetic, unlike std::uniform_real_distribution,
// whose algorithm the standard leaves to each library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

RequestSampler::RequestSampler(const SamplingParams& params, const std::vector<int32_t>& prompt,
                               uint64_t fallback_seed)
    : params_(params), rng_(params.seed.value_or(fallback_seed)), prompt_tokens_(prompt) {
  std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
  prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()), prompt_tokens_.end());
  if (params_.grammar) grammar_.emplace(params_.grammar);
}

void RequestSampler::record(int32_t token) {
  ++output_counts_[token];
  if (grammar_) grammar_->accept(token);  // the mask allowed it, so this always succeeds
}

SamplingStep RequestSampler::step() {
  SamplingStep s;
  kernels::SamplingRow& row = s.row;
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
  for (const auto& [id, e] : touched) s.adjusts.push_back(e);
  row.adjust_begin = 0;
  row.adjust_end = int32_t(s.adjusts.size());
  s.logprobs = params_.logprobs;
  if (grammar_) grammar_->fill_mask(s.mask);
  return s;
}

}  // namespace flashserve
