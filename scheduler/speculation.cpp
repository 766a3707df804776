#include "scheduler/speculation.h"

#include <algorithm>
#include <span>
#include <string>

#include "scheduler/ngram_lookup.h"

namespace flashserve {

std::string_view to_string(SpeculativeMethod m) {
  switch (m) {
    case SpeculativeMethod::Off: return "off";
    case SpeculativeMethod::Ngram: return "ngram";
    case SpeculativeMethod::Suffix: return "suffix";
  }
  return "off";
}

std::optional<SpeculativeMethod> parse_speculative_method(std::string_view name) {
  for (SpeculativeMethod m : {SpeculativeMethod::Off, SpeculativeMethod::Ngram, SpeculativeMethod::Suffix}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::optional<std::string> validate(const SpeculativeOverride& o) {
  if (o.num_speculative_tokens && (*o.num_speculative_tokens < 0 || *o.num_speculative_tokens > kMaxSpeculativeTokens)) {
    return "num_speculative_tokens must be between 0 and " + std::to_string(kMaxSpeculativeTokens);
  }
  return std::nullopt;
}

// The suffix index's contexts: longer ones rarely add a match that the request's own history
// (searched at any length) would not find.
static constexpr int32_t kSuffixDepth = 8;
// A continuation the suffix index proposes must have followed its context at least this often.
static constexpr float kSuffixMinShare = 0.5f;

Speculator::Speculator(SpeculativeConfig cfg) : cfg_(cfg), suffix_(cfg.suffix_index_tokens, kSuffixDepth) {}

DraftState Speculator::start(const SpeculativeOverride& o) const {
  DraftState d;
  d.max_drafts = std::clamp(o.num_speculative_tokens.value_or(cfg_.num_speculative_tokens), 0, kMaxSpeculativeTokens);
  d.method = d.max_drafts == 0 ? SpeculativeMethod::Off : o.method.value_or(cfg_.method);
  return d;
}

// Where a request's estimate returns while it does not draft, and how fast (per step): a request
// that stopped drafting tries again some tens of steps later.
static constexpr double kPriorAcceptance = 0.6;
static constexpr double kRecovery = 0.02;
// How much one reached draft moves the estimate.
static constexpr double kLearning = 0.15;

std::vector<int32_t> Speculator::propose(DraftState& d, const std::vector<int32_t>& tokens, int32_t limit,
                                         double min_acceptance) const {
  if (d.method == SpeculativeMethod::Off) return {};
  int32_t worth = 0;
  for (double reach = d.acceptance; worth < std::min(limit, d.max_drafts) && reach >= min_acceptance;
       reach *= d.acceptance) {
    ++worth;
  }
  if (worth == 0) {
    d.acceptance += kRecovery * (kPriorAcceptance - d.acceptance);
    return {};
  }
  const std::span<const int32_t> seen(tokens);
  DraftMatch own = ngram_lookup(seen, cfg_.min_ngram, cfg_.max_ngram, worth);
  if (d.method == SpeculativeMethod::Suffix) {
    DraftMatch recent = suffix_.propose(seen.last(std::min<size_t>(seen.size(), kSuffixDepth)), cfg_.min_ngram, worth,
                                        kSuffixMinShare);
    if (recent.match_len > own.match_len) own = std::move(recent);
  }
  return std::move(own.tokens);
}

// Each draft verified up to the first rejected one is one observation of p: kept or not.
void Speculator::observe(DraftState& d, int32_t proposed, int32_t accepted) {
  ++stats_.num_drafts;
  stats_.num_draft_tokens += proposed;
  stats_.num_accepted_tokens += accepted;
  for (int32_t i = 0; i < accepted; ++i) ++stats_.accepted_per_position[size_t(i)];
  const int32_t reached = accepted + (accepted < proposed);
  for (int32_t i = 0; i < reached; ++i) d.acceptance += kLearning * (double(i < accepted) - d.acceptance);
}

void Speculator::learn(const DraftState& d, std::span<const int32_t> output) {
  if (d.method != SpeculativeMethod::Suffix && cfg_.method != SpeculativeMethod::Suffix) return;
  if (!output.empty()) suffix_.add(output);
}

}  // namespace flashserve
