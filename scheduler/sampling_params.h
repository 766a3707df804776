// Per-request sampling and stopping parameters, as the OpenAI API and our gRPC API name them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flashserve {

namespace grammar {
class CompiledGrammar;
}

// Reasoning models: once the reasoning (the tokens after `open_ids`, or from the first token when
// `starts_inside`) has run `max_tokens` without `close_ids`, the close tag is forced, one token a
// step, and the answer follows.
struct ReasoningBudget {
  int32_t max_tokens = 0;
  std::vector<int32_t> open_ids, close_ids;
  bool starts_inside = false;
  int32_t vocab_size = 0;  // the forced step's mask width: the runner's vocabulary
};

struct SamplingParams {
  float temperature = 1.0f;          // 0: greedy
  int32_t top_k = 0;                 // 0: off
  float top_p = 1.0f;                // nucleus mass kept, (0, 1]
  float min_p = 0.0f;                // drop tokens below min_p * p(top token), [0, 1]
  float repetition_penalty = 1.0f;   // > 1 discourages any token seen in prompt or output (CTRL rule)
  float presence_penalty = 0.0f;     // subtracted once from tokens already generated, [-2, 2]
  float frequency_penalty = 0.0f;    // subtracted per occurrence in the generated tokens, [-2, 2]
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logit, [-100, 100]
  std::optional<uint64_t> seed;      // same seed + same request = same tokens
  int32_t logprobs = -1;             // -1: none; n >= 0: the sampled token's logprob and the top n

  int32_t max_tokens = 16;
  // The model's end-of-generation tokens (eos, eot, turn ends): Engine::submit sets them from the
  // tokenizer, so the scheduler needs no tokenizer to stop. ignore_eos: generation goes past them.
  std::vector<int32_t> end_ids;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;     // stop strings: generation ends before them; never emitted

  // Constrained decoding (response_format, grammar, regex, tools): only text the grammar allows is
  // sampled, and end of generation only where it is complete. Null: unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Not with a grammar (which decides every token itself).
  std::optional<ReasoningBudget> reasoning_budget;
};

// Stop strings are matched against the text after every token, so their number and length bound
// that work (OpenAI also allows 4).
constexpr size_t kMaxStopStrings = 4;
constexpr size_t kMaxStopBytes = 256;
// logit_bias entries and stop_token_ids, each: OpenAI documents no limit; this bounds the work every
// step does for them, the same on every API.
constexpr size_t kMaxTokenListSize = 1024;

// nullopt if valid, else a message naming the offending field (for a 400 / INVALID_ARGUMENT).
std::optional<std::string> validate(const SamplingParams& p, int32_t vocab_size);

}  // namespace flashserve
