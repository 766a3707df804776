// One request's side of sampling: its parameters, its RNG and the tokens it has produced. Each
// step it hands the runner a SamplingStep -- parameters, the uniform to draw with, the tokens that
// bias and history touch -- and the runner picks the token where the logits are (kernels'
// sample_rows, the same rules on every backend). The state outlives KV blocks, so preemption
// changes nothing, and draws depend only on the request's own logits, seed and history, never on
// what else is batched.
//
// Logprobs describe the model, not the sampler: log_softmax of the RAW logits, before bias,
// penalties and temperature (vLLM's default, "raw_logprobs"), computed only when asked for.
#pragma once
#include <cstdint>
#include <random>
#include <optional>
#include <vector>
#include "grammar/token_masks.h"
#include "model/forward_batch.h"
#include "scheduler/sampling_params.h"

namespace flashserve {

class RequestSampler {
 public:
  // `fallback_seed` is used when params.seed is unset (the engine draws it per request).
  RequestSampler(const SamplingParams& params, const std::vector<int32_t>& prompt, uint64_t fallback_seed);

  // This step's sampling for the runner, with the uniform the request's RNG draws next when
  // sampling (not when greedy); record() consumes it, so the stream of draws is a function of the
  // request's tokens alone.
  SamplingStep step();
  // Appends one step per row to `out`: the last real token's, then each draft's (speculative
  // verification), each as step() would give once the drafts before it were recorded. A draft the
  // grammar refuses cannot be sampled at its row, so the rows after it (never used) repeat that
  // row's step. Without drafts: step() alone, nothing copied.
  void append_steps(const std::vector<int32_t>& drafts, std::vector<SamplingStep>& out);
  // Records the token the runner picked, for later penalties, the grammar's place and the
  // reasoning budget, and consumes the step's uniform.
  void record(int32_t token);

 private:
  // Where the output is with respect to its reasoning (params_.reasoning_budget).
  enum class Reasoning { Opening, Inside, Done };
  void track_reasoning(int32_t token);
  // record(), or false (nothing changes) where the grammar refuses the token.
  bool advance(int32_t token);
  // The entry of `token` in adjusts_, made if absent.
  kernels::TokenAdjust& entry(int32_t token);

  const SamplingParams params_;
  std::mt19937_64 rng_;
  double next_uniform_;  // the next step's draw, taken when the previous token is recorded
  const bool counts_output_;  // a penalty reads the output's tokens
  // The tokens bias and history touch, by token id, kept as tokens are recorded: a step copies it
  // rather than rebuilding it from the whole prompt and output.
  std::vector<kernels::TokenAdjust> adjusts_;
  std::optional<grammar::GrammarMatcher> grammar_;  // where the output is in params_.grammar
  Reasoning reasoning_ = Reasoning::Done;
  size_t tag_matched_ = 0;         // Opening: open tag tokens seen; Inside: close tag tokens seen or forced
  int32_t reasoning_tokens_ = 0;
};

}  // namespace flashserve
