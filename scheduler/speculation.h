// Speculative decoding without a second model. A decoding sequence proposes up to K draft tokens
// guessed from text already seen -- its own prompt and output (n-gram prompt lookup), or also the
// outputs of recent requests (a suffix index) -- and the step verifies them: the sequence
// contributes its last real token and every draft as query tokens, each row is sampled exactly as
// plain decoding would sample it (same parameters, same uniform, the drafts before it taken as
// given), and drafts are kept while they equal the sampled token. For a draft that is one fixed
// token this is rejection sampling (accept with probability p(draft), else draw from p without
// it), so the output distribution is unchanged; with the CPU's chunk-invariant forward pass the
// tokens are the same bits as without speculation, greedy or seeded.
//
// Drafts cost rows, so a sequence proposes only as many as pay for themselves: the k-th draft is
// reached and kept with probability p^k (p: the request's measured chance that a draft is kept once
// the ones before it were), and it is worth a row when that beats what a row costs against the
// step's cost per token (StepBudget's fit: one row in a lone decode step is cheap, in a wide batch
// it is nearly a token's worth). A request whose drafts miss stops drafting; its estimate drifts
// back up while it does not, so it tries again later.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>
#include "scheduler/suffix_index.h"

namespace flashserve {

enum class SpeculativeMethod { Off, Ngram, Suffix };
std::string_view to_string(SpeculativeMethod m);
std::optional<SpeculativeMethod> parse_speculative_method(std::string_view name);

// The most drafts one sequence may have verified in one step (server or request).
constexpr int32_t kMaxSpeculativeTokens = 16;

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::Off;  // the server's default for every request
  int32_t num_speculative_tokens = 7;                  // K, 1 .. kMaxSpeculativeTokens
  // > 0: the chance of being kept a draft needs, instead of what the measured step cost says
  // (tests pin it: a measured bound depends on the machine's timing).
  double min_acceptance = 0;
  int32_t min_ngram = 2, max_ngram = 8;                // prompt lookup's context lengths
  int64_t suffix_index_tokens = int64_t(1) << 16;      // recent outputs the suffix index remembers
};

// A request's own choice (API field), each part defaulting to the server's.
struct SpeculativeOverride {
  std::optional<SpeculativeMethod> method;
  std::optional<int32_t> num_speculative_tokens;  // 0: off
};
// nullopt if valid, else a message naming the field.
std::optional<std::string> validate(const SpeculativeOverride& o);

// One request's drafting, kept across its steps.
struct DraftState {
  SpeculativeMethod method = SpeculativeMethod::Off;
  int32_t max_drafts = 0;  // the request's K
  double acceptance = 0.6;  // p: the chance a draft is kept, given that the drafts before it were
};

// Counters as vLLM names them (spec_decode_*); per position: drafts accepted at that index.
struct SpeculationStats {
  int64_t num_drafts = 0;           // verifications (a sequence's step that carried drafts)
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::array<int64_t, kMaxSpeculativeTokens> accepted_per_position{};  // copied into EngineStats every step
};

class Speculator {
 public:
  explicit Speculator(SpeculativeConfig cfg);

  const SpeculativeConfig& config() const { return cfg_; }
  // A new request's drafting, from the server's defaults and its override.
  DraftState start(const SpeculativeOverride& o) const;
  // At most `limit` drafts to follow `tokens` (a decoding sequence's prompt and output), each with a
  // chance of being kept of at least `min_acceptance` (what a row costs, as a share of a token).
  std::vector<int32_t> propose(DraftState& d, const std::vector<int32_t>& tokens, int32_t limit,
                               double min_acceptance) const;
  // After a verification: `accepted` of `proposed` drafts were kept.
  void observe(DraftState& d, int32_t proposed, int32_t accepted);
  // A finished request's output, for the suffix index.
  void learn(const DraftState& d, std::span<const int32_t> output);
  const SpeculationStats& stats() const { return stats_; }

 private:
  SpeculativeConfig cfg_;
  SuffixIndex suffix_;
  SpeculationStats stats_;
};

}  // namespace flashserve
