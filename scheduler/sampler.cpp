#include "scheduler/sampler.h"

#include <algorithm>

namespace flashserve {
namespace {

// 53 random bits as a double in [0, 1). Fixed arithmetic, unlike std::uniform_real_distribution,
// whose algorithm the standard leaves to each library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

RequestSampler::RequestSampler(const SamplingParams& params, const std::vector<int32_t>& prompt,
                               uint64_t fallback_seed)
    : params_(params),
      rng_(params.seed.value_or(fallback_seed)),
      counts_output_(params.repetition_penalty != 1.0f || params.frequency_penalty != 0.0f ||
                     params.presence_penalty != 0.0f) {
  if (params_.repetition_penalty != 1.0f) {  // sorted once: one insert per prompt token would be quadratic
    std::vector<int32_t> seen = prompt;
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) adjusts_.push_back(kernels::TokenAdjust{id, 0, 1, 0.0f});
  }
  for (const auto& [id, bias] : params_.logit_bias) entry(id).bias += bias;
  if (params_.grammar) grammar_.emplace(params_.grammar);
}

kernels::TokenAdjust& RequestSampler::entry(int32_t token) {
  auto it = std::lower_bound(adjusts_.begin(), adjusts_.end(), token,
                             [](const kernels::TokenAdjust& e, int32_t t) { return e.token < t; });
  if (it == adjusts_.end() || it->token != token) it = adjusts_.insert(it, kernels::TokenAdjust{token, 0, 0, 0.0f});
  return *it;
}

void RequestSampler::record(int32_t token) {
  if (counts_output_) {
    kernels::TokenAdjust& e = entry(token);
    ++e.output_count;
    e.seen = 1;
  }
  if (grammar_) grammar_->accept(token);  // the mask allowed it, so this always succeeds
}

SamplingStep RequestSampler::step() {
  SamplingStep s;
  kernels::SamplingRow& row = s.row;
  row.temperature = params_.temperature;
  row.top_k = params_.top_k;
  row.top_p = params_.top_p;
  row.min_p = params_.min_p;
  row.repetition_penalty = params_.repetition_penalty;
  row.presence_penalty = params_.presence_penalty;
  row.frequency_penalty = params_.frequency_penalty;
  row.uniform = params_.temperature == 0.0f ? 0.0 : uniform01(rng_);
  s.adjusts = adjusts_;
  row.adjust_begin = 0;
  row.adjust_end = int32_t(s.adjusts.size());
  s.logprobs = params_.logprobs;
  if (grammar_) grammar_->fill_mask(s.mask);
  return s;
}

}  // namespace flashserve
