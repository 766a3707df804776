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
  d.window = d.max_drafts;
  return d;
}

std::vector<int32_t> Speculator::propose(DraftState& d, const std::vector<int32_t>& tokens, int32_t limit) const {
  limit = std::min(limit, d.window);
  if (d.method == SpeculativeMethod::Off || limit <= 0) return {};
  if (d.pause > 0) {
    --d.pause;
    return {};
  }
  const std::span<const int32_t> seen(tokens);
  DraftMatch own = ngram_lookup(seen, cfg_.min_ngram, cfg_.max_ngram, limit);
  if (d.method == SpeculativeMethod::Suffix) {
    DraftMatch recent = suffix_.propose(seen.last(std::min<size_t>(seen.size(), kSuffixDepth)), cfg_.min_ngram, limit,
                                        kSuffixMinShare);
    if (recent.match_len > own.match_len) own = std::move(recent);
  }
  // An even number of rows (the last real token and an odd number of drafts): the CPU's matmul
  // takes tokens in tiles of 8, 4 and 2, and an odd one out passes the weights again on its own
  // (BM_Verify: 2 drafts cost about three times what 1 does over a plain step). The last draft is
  // the likeliest to miss.
  if (own.tokens.size() > 1 && own.tokens.size() % 2 == 0) own.tokens.pop_back();
  return std::move(own.tokens);
}

// Acceptance decides the next window: all kept, one more; else one past what was kept. Drafts
// that all missed pause drafting for 1, 2, 4, ... steps: on text unlike anything seen, misses
// would otherwise cost every step.
void Speculator::observe(DraftState& d, int32_t proposed, int32_t accepted) {
  ++stats_.num_drafts;
  stats_.num_draft_tokens += proposed;
  stats_.num_accepted_tokens += accepted;
  for (int32_t i = 0; i < accepted; ++i) ++stats_.accepted_per_position[size_t(i)];
  d.window = accepted == proposed ? std::min(d.max_drafts, 2 * d.window) : std::max(1, accepted + 1);
  if (accepted > 0) {
    d.next_pause = 1;
    return;
  }
  d.pause = d.next_pause;
  d.next_pause = std::min(2 * d.next_pause, 64);
}

void Speculator::learn(const DraftState& d, const std::vector<int32_t>& output) {
  if (d.method != SpeculativeMethod::Suffix && cfg_.method != SpeculativeMethod::Suffix) return;
  if (!output.empty()) suffix_.add(output);
}

}  // namespace flashserve
