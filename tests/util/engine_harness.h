// Runs requests through an Engine on the calling thread and collects what each one produced.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "model/tokenizer.h"
#include "scheduler/engine.h"

namespace flashserve::test {

struct Job {
  std::vector<int32_t> prompt;
  SamplingParams params;
  int32_t priority = 0;
  SpeculativeOverride speculative{};
};

struct JobResult {
  std::vector<int32_t> tokens;
  std::vector<SampledToken> sampled;  // the same tokens, with their logprobs when asked for
  std::string text;
  std::optional<FinishReason> finish;
  int32_t num_cached_tokens = 0;
  int32_t num_preemptions = 0;
  RequestTimings timings;
  int32_t num_events = 0;
};

struct RunStats {
  std::vector<JobResult> results;  // in job order
  EngineStats engine;              // after the last step
};

// Submits every job at once (ids "job-<i>"), steps until all finish. Fails the test on a rejection.
RunStats run_jobs(ModelRunner& runner, const Tokenizer& tok, const EngineConfig& cfg, const std::vector<Job>& jobs);

// Greedy params with `max_tokens` and EOS ignored, so every job runs its full length.
SamplingParams greedy(int32_t max_tokens);

// The tiny test model's tokenizer (byte-level, 261 tokens).
std::unique_ptr<Tokenizer> tiny_tokenizer();

}  // namespace flashserve::test
