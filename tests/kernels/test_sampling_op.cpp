// The CPU sampling op (kernels::sample_rows, linear-time candidate search) against the plain
// reference of the same rules (full sorts, serial sums): same logits, parameters, adjusts and
// uniform -> the same token, over thousands of random rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <random>
#include <set>
#include <vector>

#include "kernels/sampling.h"
#include "tests/kernels/reference_sampling.h"

namespace flashserve {
namespace {

using kernels::SamplingRow;
using kernels::TokenAdjust;

float pick(std::mt19937& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
bool chance(std::mt19937& rng, double p) { return std::bernoulli_distribution(p)(rng); }

// A request's step as the engine builds it: parameters, a uniform, and one adjust per distinct
// token its bias or history touches.
SamplingRow random_row(std::mt19937& rng, int32_t vocab, std::vector<TokenAdjust>& adjusts) {
  SamplingRow r;
  r.temperature = chance(rng, 0.2) ? 0.0f : chance(rng, 0.1) ? pick(rng, 0.01f, 0.1f) : pick(rng, 0.1f, 2.0f);
  if (chance(rng, 0.5)) r.top_k = chance(rng, 0.2) ? 1 : std::uniform_int_distribution<int32_t>(1, 300)(rng);
  if (chance(rng, 0.05)) r.top_k = vocab + 5;  // at or past the vocabulary: off
  if (chance(rng, 0.5)) r.top_p = pick(rng, 0.05f, 1.0f);
  if (chance(rng, 0.4)) r.min_p = chance(rng, 0.1) ? 1.0f : pick(rng, 0.0f, 0.5f);
  if (chance(rng, 0.5)) r.repetition_penalty = pick(rng, 0.5f, 2.0f);
  if (chance(rng, 0.5)) r.presence_penalty = pick(rng, -2.0f, 2.0f);
  if (chance(rng, 0.5)) r.frequency_penalty = pick(rng, -2.0f, 2.0f);
  r.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  std::set<int32_t> ids;  // from a small pool, so adjusted tokens are often among the best
  const int n = std::uniform_int_distribution<int>(0, 40)(rng);
  while (int(ids.size()) < n) ids.insert(std::uniform_int_distribution<int32_t>(0, std::min(vocab, 64) - 1)(rng));
  r.adjust_begin = int32_t(adjusts.size());
  const float range = chance(rng, 0.5) ? 100.0f : 3.0f;
  for (int32_t id : ids) {
    adjusts.push_back({id, chance(rng, 0.5) ? int32_t(rng() % 4) : 0, int32_t(rng() % 2),
                       chance(rng, 0.3) ? pick(rng, -range, range) : 0.0f});
  }
  r.adjust_end = int32_t(adjusts.size());
  return r;
}

// Constrained decoding's allowed tokens: a few (often not the best), or about half; never none.
std::vector<uint32_t> random_mask(std::mt19937& rng, int32_t vocab) {
  std::vector<uint32_t> mask(size_t(kernels::mask_words(vocab)), 0);
  const bool sparse = chance(rng, 0.5);
  for (int32_t i = 0; i < vocab; ++i) {
    if (sparse ? chance(rng, 8.0 / vocab) : chance(rng, 0.5)) mask[size_t(i / 32)] |= uint32_t(1) << (i % 32);
  }
  const int32_t one = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
  mask[size_t(one / 32)] |= uint32_t(1) << (one % 32);
  return mask;
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

TEST(SamplingOp, PicksTheReferencesToken) {
  std::mt19937 rng(20240611);
  constexpr int kBatches = 300, kBatchSize = 8;
  int compared = 0, sampled = 0, mismatches = 0;
  for (int b = 0; b < kBatches; ++b) {
    const int32_t vocab = std::uniform_int_distribution<int32_t>(1000, 50000)(rng);
    std::vector<float> logits;
    std::vector<SamplingRow> rows;
    std::vector<TokenAdjust> adjusts;
    std::vector<uint32_t> masks;
    for (int i = 0; i < kBatchSize; ++i) {
      rows.push_back(random_row(rng, vocab, adjusts));
      if (chance(rng, 0.3)) {
        rows.back().mask_row = int32_t(masks.size() / size_t(kernels::mask_words(vocab)));
        const auto mask = random_mask(rng, vocab);
        masks.insert(masks.end(), mask.begin(), mask.end());
      }
      const auto row_logits = random_logits(rng, vocab);
      logits.insert(logits.end(), row_logits.begin(), row_logits.end());
      sampled += rows.back().temperature != 0.0f;
    }
    std::vector<float> scratch = logits;
    std::vector<int32_t> want(kBatchSize, -1), got(kBatchSize, -1);
    reference::sample_rows(scratch.data(), kBatchSize, vocab, rows.data(), adjusts.data(), masks.data(), want.data());
    scratch = logits;
    kernels::sample_rows(scratch.data(), kBatchSize, vocab, rows.data(), adjusts.data(), masks.data(), got.data());
    for (int i = 0; i < kBatchSize; ++i) {
      ++compared;
      if (rows[i].mask_row >= 0) {
        const uint32_t* mask = masks.data() + size_t(rows[i].mask_row) * size_t(kernels::mask_words(vocab));
        EXPECT_TRUE((mask[got[i] / 32] >> (got[i] % 32)) & 1) << "a masked-out token was picked";
      }
      if (got[i] != want[i]) {
        ++mismatches;
        ADD_FAILURE() << "batch " << b << " row " << i << " vocab " << vocab << ": op " << got[i] << ", reference "
                      << want[i];
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
  EXPECT_THROW(kernels::sample_rows(logits, 1, 0, &row, nullptr, nullptr, &token), std::invalid_argument);
  EXPECT_THROW(kernels::sample_rows(logits, -1, 4, &row, nullptr, nullptr, &token), std::invalid_argument);
  SamplingRow masked;
  masked.mask_row = 0;
  EXPECT_THROW(kernels::sample_rows(logits, 1, 4, &masked, nullptr, nullptr, &token), std::invalid_argument);
  const TokenAdjust outside{4, 1, 1, 0.0f};
  row.adjust_end = 1;
  EXPECT_THROW(kernels::sample_rows(logits, 1, 4, &row, &outside, nullptr, &token), std::invalid_argument);
  row.adjust_begin = 2;
  EXPECT_THROW(kernels::sample_rows(logits, 1, 4, &row, &outside, nullptr, &token), std::invalid_argument);
}

TEST(SamplingOp, LogprobsAreTheRawLogSoftmax) {
  const std::vector<float> raw = {0.5f, -1.0f, 2.0f, 0.1f, 1.2f};
  double sum = 0.0;
  for (float l : raw) sum += std::exp(double(l));
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
  kernels::token_logprobs(raw.data(), 5, 3, 2, logprob, top);
  EXPECT_NEAR(logprob, 0.1 - std::log(sum), 1e-6);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].first, 2);
  EXPECT_EQ(top[1].first, 4);
  EXPECT_NEAR(top[1].second, 1.2 - std::log(sum), 1e-6);
  EXPECT_THROW(kernels::token_logprobs(raw.data(), 5, 5, 0, logprob, top), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve
