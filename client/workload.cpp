#include "client/workload.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

namespace flashserve::bench {
namespace {

// Frequent English words: each is one token in common BPE vocabularies (with its leading space).
constexpr std::array<const char*, 64> kWords = {
    "the",   "of",    "and",   "to",    "in",    "is",    "was",   "for",   "on",    "are",   "with",
    "as",    "at",    "be",    "this",  "have",  "from",  "or",    "one",   "had",   "by",   "word",
    "but",   "not",   "what",  "all",   "were",  "we",    "when",  "your",  "can",   "said", "there",
    "use",   "an",    "each",  "which", "she",   "do",    "how",   "their", "if",    "will", "up",
    "other", "about", "out",   "many",  "then",  "them",  "these", "so",    "some",  "her",  "would",
    "make",  "like",  "him",   "into",  "time",  "has",   "look",  "two",   "more"};

std::string random_prompt(int32_t num_words, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
  std::string prompt;
  for (int32_t i = 0; i < num_words; ++i) {
    if (i > 0) prompt += ' ';
    prompt += kWords[pick(rng)];
  }
  return prompt;
}

}  // namespace

std::pair<int32_t, int32_t> length_range(int32_t len, double range_ratio) {
  const auto lo = std::max<int32_t>(1, int32_t(std::floor(len * (1.0 - range_ratio))));
  const auto hi = std::max<int32_t>(lo, int32_t(std::ceil(len * (1.0 + range_ratio))));
  return {lo, hi};
}

std::vector<BenchRequest> make_synthetic_workload(const WorkloadOptions& options) {
  if (options.input_len < 1 || options.output_len < 1) throw std::invalid_argument("lengths must be at least 1");
  if (options.range_ratio < 0.0 || options.range_ratio >= 1.0) {
    throw std::invalid_argument("range ratio must be in [0, 1)");
  }
  if (options.shared_prefix_len < 0) throw std::invalid_argument("shared prefix length must be >= 0");
  std::mt19937_64 rng(options.seed);
  // Its own stream, so adding a prefix leaves the random parts and lengths as they were.
  std::mt19937_64 prefix_rng(options.seed ^ 0x9e3779b97f4a7c15ULL);
  const std::string prefix = random_prompt(options.shared_prefix_len, prefix_rng);
  const auto [in_lo, in_hi] = length_range(options.input_len, options.range_ratio);
  const auto [out_lo, out_hi] = length_range(options.output_len, options.range_ratio);
  std::uniform_int_distribution<int32_t> input_len(in_lo, in_hi), output_len(out_lo, out_hi);
  std::vector<BenchRequest> requests;
  requests.reserve(size_t(std::max(0, options.num_requests)));
  for (int32_t i = 0; i < options.num_requests; ++i) {
    BenchRequest r;
    r.input_len = input_len(rng);
    r.output_len = output_len(rng);
    r.prompt = random_prompt(r.input_len, rng);
    if (!prefix.empty()) {
      r.prompt = prefix + ' ' + r.prompt;
      r.input_len += options.shared_prefix_len;
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

int32_t word_count(const std::string& text) {
  std::istringstream in(text);
  int32_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

}  // namespace flashserve::bench
