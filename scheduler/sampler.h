// Turns one row of logits into the next token for one request. Holds that request's RNG and token
// counts, so its draws depend only on its own logits and seed -- never on what else is batched, and
// not on preemption (the state outlives the KV blocks).
//
// Order, as vLLM: logit_bias; repetition_penalty (prompt and output tokens); frequency and presence
// penalties (output tokens); then argmax (temperature 0, lowest id on ties), or divide by temperature,
// keep top-k, then top-p of what top-k kept, then min-p, and draw from the renormalised rest with the
// request's mt19937_64, walking token ids in order -- so a draw depends only on logits, seed and
// history (on one build: the softmax is vectorised for the CPU it was compiled for).
//
// Logprobs describe the model, not the sampler: log_softmax of the RAW logits, before bias,
// penalties and temperature (vLLM's default, "raw_logprobs"). They cost an extra pass over the
// vocabulary, so they are computed only when params.logprobs >= 0; otherwise logprob stays 0.
#pragma once
#include <cstdint>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>
#include "kernels/sampling.h"
#include "scheduler/sampling_params.h"

namespace flashserve {

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;                             // log p of token under the raw logits (if asked)
  std::vector<std::pair<int32_t, float>> top_logprobs;  // params.logprobs best (token, logprob), best first
};

class RequestSampler {
 public:
  // `fallback_seed` is used when params.seed is unset (the engine draws it per request).
  RequestSampler(const SamplingParams& params, const std::vector<int32_t>& prompt, uint64_t fallback_seed);

  // Applies bias and penalties, then greedy / temperature + top-k + top-p + min-p sampling.
  // Records the chosen token for later penalties. logits: [vocab], not modified.
  SampledToken sample(const float* logits, int32_t vocab);

  // The same step for a sampler on the device (kernels::sample_rows): fills `row` with this
  // request's parameters and the uniform sample() would draw now (drawn from the same RNG, so the
  // stream of draws is the same either way), and appends the tokens bias and history touch to
  // `adjusts`. False, drawing nothing, when the request needs its logits on the host (logprobs).
  bool device_row(kernels::SamplingRow& row, std::vector<kernels::TokenAdjust>& adjusts);
  // Records a token the device picked, for later penalties (sample() records its own).
  void record(int32_t token) { ++output_counts_[token]; }

 private:
  const SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> output_counts_;  // generated token -> occurrences
  std::vector<int32_t> prompt_tokens_;                  // sorted unique, for repetition_penalty
};

}  // namespace flashserve
