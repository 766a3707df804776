// The batched sampling op (kernels::sample_rows, the CPU twin of the CUDA kernel) against the
// scheduler's RequestSampler: same logits, params, history and draw -> the same token, step after step.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/sampling.h"
#include "scheduler/sampler.h"
#include "scheduler/sampling_params.h"

namespace flashserve {
namespace {

using kernels::SamplingRow;
using kernels::TokenAdjust;

float pick(std::mt19937& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
bool chance(std::mt19937& rng, double p) { return std::bernoulli_distribution(p)(rng); }

SamplingParams random_params(std::mt19937& rng, int32_t vocab) {
  SamplingParams p;
  p.temperature = chance(rng, 0.2) ? 0.0f : chance(rng, 0.1) ? pick(rng, 0.01f, 0.1f) : pick(rng, 0.1f, 2.0f);
  if (chance(rng, 0.5)) p.top_k = chance(rng, 0.2) ? 1 : std::uniform_int_distribution<int32_t>(1, 300)(rng);
  if (chance(rng, 0.05)) p.top_k = vocab + 5;  // at or past the vocabulary: off
  if (chance(rng, 0.5)) p.top_p = pick(rng, 0.05f, 1.0f);
  if (chance(rng, 0.4)) p.min_p = chance(rng, 0.1) ? 1.0f : pick(rng, 0.0f, 0.5f);
  if (chance(rng, 0.5)) p.repetition_penalty = pick(rng, 0.5f, 2.0f);
  if (chance(rng, 0.5)) p.presence_penalty = pick(rng, -2.0f, 2.0f);
  if (chance(rng, 0.5)) p.frequency_penalty = pick(rng, -2.0f, 2.0f);
  if (chance(rng, 0.3)) {
    // Distinct ids: one TokenAdjust per token carries one bias (see kernels/sampling.h).
    std::set<int32_t> ids;
    const int n = std::uniform_int_distribution<int>(1, 10)(rng);
    while (int(ids.size()) < n) ids.insert(std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng));
    const float range = chance(rng, 0.5) ? 100.0f : 3.0f;
    for (int32_t id : ids) p.logit_bias.emplace_back(id, pick(rng, -range, range));
  }
  p.seed = rng();
  EXPECT_EQ(validate(p, vocab), std::nullopt);
  return p;
}

// Normal logits at a random scale; some rows on a coarse grid, so many tokens tie (also at the top).
std::vector<float> random_logits(std::mt19937& rng, int32_t vocab) {
  const float scale = std::array<float, 4>{0.5f, 2.0f, 5.0f, 15.0f}[rng() % 4];
  std::normal_distribution<float> dist(0.0f, scale);
  const bool grid = chance(rng, 0.3);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = grid ? std::round(dist(rng) * 2.0f) / 2.0f : dist(rng);
  return logits;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t vocab) {
  // Ids from a small pool, so the prompt repeats tokens and outputs often hit it.
  const int32_t pool = std::min<int32_t>(vocab, 64);
  std::vector<int32_t> prompt(std::uniform_int_distribution<size_t>(0, 80)(rng));
  for (int32_t& id : prompt) id = std::uniform_int_distribution<int32_t>(0, pool - 1)(rng);
  return prompt;
}

// One request sampled both ways: `host` through RequestSampler::sample, `device` through its
// device_row (the engine's path to a runner that samples on the GPU) and the op.
struct Request {
  RequestSampler host, device;
  bool draws;  // RequestSampler draws a uniform only when sampling, not when greedy

  Request(const SamplingParams& p, const std::vector<int32_t>& prompt)
      : host(p, prompt, 0), device(p, prompt, 0), draws(p.temperature != 0.0f) {}
};

// Batches of requests sharing a vocabulary, stepped together: each step samples every row with the
// op in one call (parameters, draw and history from device_row) and with RequestSampler::sample.
TEST(SamplingOp, PicksRequestSamplersTokenStepAfterStep) {
  std::mt19937 rng(20240611);
  constexpr int kBatches = 200, kBatchSize = 8, kSteps = 3;
  int compared = 0, sampled = 0, mismatches = 0;
  for (int b = 0; b < kBatches; ++b) {
    const int32_t vocab = std::uniform_int_distribution<int32_t>(1000, 50000)(rng);
    std::vector<Request> requests;
    requests.reserve(kBatchSize);
    for (int i = 0; i < kBatchSize; ++i) requests.emplace_back(random_params(rng, vocab), random_prompt(rng, vocab));
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> logits;
      std::vector<SamplingRow> rows(kBatchSize);
      std::vector<TokenAdjust> adjusts;
      std::vector<int32_t> expected;
      for (int i = 0; i < kBatchSize; ++i) {
        Request& r = requests[i];
        const auto row_logits = random_logits(rng, vocab);
        expected.push_back(r.host.sample(row_logits.data(), vocab).token);
        ASSERT_TRUE(r.device.device_row(rows[i], adjusts));
        logits.insert(logits.end(), row_logits.begin(), row_logits.end());
        sampled += r.draws;
      }
      std::vector<int32_t> tokens(kBatchSize, -1);
      kernels::sample_rows(logits.data(), kBatchSize, vocab, rows.data(), adjusts.data(), tokens.data());
      for (int i = 0; i < kBatchSize; ++i) {
        ++compared;
        if (tokens[i] != expected[i]) {
          ++mismatches;
          ADD_FAILURE() << "batch " << b << " step " << step << " row " << i << " vocab " << vocab << ": op "
                        << tokens[i] << ", RequestSampler " << expected[i];
        }
        requests[i].device.record(tokens[i]);
      }
    }
  }
  std::cout << "compared " << compared << " tokens (" << sampled << " sampled, " << compared - sampled
            << " greedy), " << mismatches << " mismatches\n";
}

TEST(SamplingOp, RejectsBadArguments) {
  float logits[4] = {0, 1, 2, 3};
  int32_t token = -1;
  SamplingRow row;
  EXPECT_THROW(kernels::sample_rows(logits, 1, 0, &row, nullptr, &token), std::invalid_argument);
  EXPECT_THROW(kernels::sample_rows(logits, -1, 4, &row, nullptr, &token), std::invalid_argument);
  const TokenAdjust outside{4, 1, 1, 0.0f};
  row.adjust_end = 1;
  EXPECT_THROW(kernels::sample_rows(logits, 1, 4, &row, &outside, &token), std::invalid_argument);
  row.adjust_begin = 2;
  EXPECT_THROW(kernels::sample_rows(logits, 1, 4, &row, &outside, &token), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve
