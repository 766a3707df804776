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
      next_uniform_(params.temperature == 0.0f ? 0.0 : uniform01(rng_)),
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
  if (const auto& b = params_.reasoning_budget) {
    reasoning_ = b->starts_inside ? Reasoning::Inside : b->open_ids.empty() ? Reasoning::Done : Reasoning::Opening;
  }
}

kernels::TokenAdjust& RequestSampler::entry(int32_t token) {
  auto it = std::lower_bound(adjusts_.begin(), adjusts_.end(), token,
                             [](const kernels::TokenAdjust& e, int32_t t) { return e.token < t; });
  if (it == adjusts_.end() || it->token != token) it = adjusts_.insert(it, kernels::TokenAdjust{token, 0, 0, 0.0f});
  return *it;
}

void RequestSampler::record(int32_t token) { advance(token); }

bool RequestSampler::advance(int32_t token) {
  if (grammar_ && !grammar_->accept(token)) return false;
  if (params_.temperature != 0.0f) next_uniform_ = uniform01(rng_);
  if (counts_output_) {
    kernels::TokenAdjust& e = entry(token);
    ++e.output_count;
    e.seen = 1;
  }
  if (reasoning_ != Reasoning::Done) track_reasoning(token);
  return true;
}

// The reasoning opens only with the open tag's tokens first; it ends once the close tag's tokens
// came in a row (sampled or forced).
void RequestSampler::track_reasoning(int32_t token) {
  const ReasoningBudget& b = *params_.reasoning_budget;
  if (reasoning_ == Reasoning::Opening) {
    if (token != b.open_ids[tag_matched_]) {
      reasoning_ = Reasoning::Done;
    } else if (++tag_matched_ == b.open_ids.size()) {
      reasoning_ = Reasoning::Inside;
      tag_matched_ = 0;
    }
    return;
  }
  ++reasoning_tokens_;
  tag_matched_ = token == b.close_ids[tag_matched_] ? tag_matched_ + 1 : token == b.close_ids[0] ? 1 : 0;
  if (tag_matched_ == b.close_ids.size()) reasoning_ = Reasoning::Done;
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
  row.uniform = next_uniform_;
  s.adjusts = adjusts_;
  row.adjust_begin = 0;
  row.adjust_end = int32_t(s.adjusts.size());
  s.logprobs = params_.logprobs;
  if (grammar_) grammar_->fill_mask(s.mask);
  const auto& budget = params_.reasoning_budget;
  if (reasoning_ == Reasoning::Inside && reasoning_tokens_ - int32_t(tag_matched_) >= budget->max_tokens) {
    // Out of budget: the close tag's next token is the only one allowed.
    const int32_t forced = budget->close_ids[tag_matched_];
    s.mask.assign(size_t(kernels::mask_words(budget->vocab_size)), 0);
    s.mask[size_t(forced) / 32] = 1u << (forced % 32);
  }
  return s;
}

void RequestSampler::append_steps(const std::vector<int32_t>& drafts, std::vector<SamplingStep>& out) {
  const size_t end = out.size() + drafts.size() + 1;
  out.push_back(step());
  if (drafts.empty()) return;
  RequestSampler ahead = *this;
  for (int32_t d : drafts) {
    if (!ahead.advance(d)) {
      const SamplingStep refused_at = out.back();
      out.resize(end, refused_at);
      return;
    }
    out.push_back(ahead.step());
  }
}

}  // namespace flashserve
