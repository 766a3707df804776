// Synthetic request mixes for the load-test client: prompt and output lengths drawn from fixed or
// uniform ranges, prompts spelled with random common words so a prompt of N words is roughly N
// tokens for a BPE tokenizer. Everything is a pure function of the options and the seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace flashserve::bench {

struct BenchRequest {
  std::string prompt;
  int32_t input_len = 0;   // words in the prompt (an estimate of its tokens)
  int32_t output_len = 0;  // tokens to generate (sent as max_tokens with ignore_eos)
};

struct WorkloadOptions {
  int32_t num_requests = 100;
  int32_t input_len = 128;
  int32_t output_len = 64;
  // Lengths are uniform in [len * (1 - r), len * (1 + r)]; 0 keeps them fixed.
  double range_ratio = 0.0;
  uint64_t seed = 0;
  // > 0: every prompt starts with the same this many words (a prefix-cache workload), then its
  // own input_len random words.
  int32_t shared_prefix_len = 0;
};

// Throws std::invalid_argument on a non-positive length or a range ratio outside [0, 1).
std::vector<BenchRequest> make_synthetic_workload(const WorkloadOptions& options);

// The inclusive range lengths are drawn from, never below 1.
std::pair<int32_t, int32_t> length_range(int32_t len, double range_ratio);

// Whitespace-separated words in `text`: how prompt length is measured here.
int32_t word_count(const std::string& text);

}  // namespace flashserve::bench
