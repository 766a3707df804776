// CUDA sampling against its CPU twin (itself checked against RequestSampler in
// tests/scheduler/test_sampling_op.cpp): same logits, rows, adjusts and uniforms -> same tokens.
// Greedy rows must always agree. Sampled rows use the device's expf, so a draw could in principle
// differ when the uniform falls within a few ulps of a boundary between two tokens' cumulative
// masses: odds far below one in a million per row, so any mismatch here is a bug.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/sampling.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashserve {
namespace {

using kernels::SamplingRow;
using kernels::TokenAdjust;
using test::DeviceBuffer;
using CudaSampling = test::CudaTest;

// Which rules a batch's rows switch on.
struct Features {
  bool greedy = false, top_k = false, top_p = false, min_p = false, penalties = false, mask = false;
};

struct Batch {
  int32_t vocab = 0;
  std::vector<float> logits;
  std::vector<SamplingRow> rows;
  std::vector<TokenAdjust> adjusts;
  std::vector<uint32_t> masks;
};

float pick(std::mt19937& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

SamplingRow random_row(std::mt19937& rng, const Features& f) {
  SamplingRow row;
  row.temperature = f.greedy ? 0.0f : pick(rng, 0.05f, 2.0f);
  if (f.top_k) row.top_k = std::uniform_int_distribution<int32_t>(1, 400)(rng);
  if (f.top_p) row.top_p = pick(rng, 0.05f, 0.99f);
  if (f.min_p) row.min_p = pick(rng, 0.001f, 0.5f);
  if (f.penalties) {
    row.repetition_penalty = pick(rng, 0.5f, 2.0f);
    row.presence_penalty = pick(rng, -2.0f, 2.0f);
    row.frequency_penalty = pick(rng, -2.0f, 2.0f);
  }
  row.uniform = double(rng() >> 5) * 0x1.0p-27;
  return row;
}

// Distinct tokens, biased toward the top of the row so that penalties move the winners.
void append_adjusts(std::mt19937& rng, const float* logits, int32_t vocab, std::vector<TokenAdjust>& out) {
  std::set<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.insert(std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng));
  std::vector<int32_t> by_logit(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) by_logit[i] = i;
  std::partial_sort(by_logit.begin(), by_logit.begin() + std::min(20, vocab), by_logit.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  tokens.insert(by_logit.begin(), by_logit.begin() + std::min(20, vocab));
  for (int32_t token : tokens) {
    const int32_t count = rng() % 3 == 0 ? 0 : int32_t(rng() % 4);
    const int32_t seen = count > 0 || rng() % 2 == 0;
    const float bias = rng() % 4 == 0 ? pick(rng, -5.0f, 5.0f) : 0.0f;
    out.push_back(TokenAdjust{token, count, seen, bias});
  }
}

Batch random_batch(std::mt19937& rng, int32_t num_rows, int32_t vocab, const Features& f) {
  Batch b;
  b.vocab = vocab;
  for (int32_t r = 0; r < num_rows; ++r) {
    // Every other row on a coarse grid, so many logits tie (the top included).
    const bool grid = r % 2 == 1;
    std::normal_distribution<float> dist(0.0f, pick(rng, 0.5f, 10.0f));
    const size_t first = b.logits.size();
    for (int32_t i = 0; i < vocab; ++i) {
      const float l = dist(rng);
      b.logits.push_back(grid ? std::round(l * 2.0f) / 2.0f : l);
    }
    SamplingRow row = random_row(rng, f);
    row.adjust_begin = int32_t(b.adjusts.size());
    if (f.penalties) append_adjusts(rng, &b.logits[first], vocab, b.adjusts);
    row.adjust_end = int32_t(b.adjusts.size());
    if (f.mask) {  // a few allowed tokens, one of them the row's last
      row.mask_row = r;
      std::vector<uint32_t> mask(size_t(kernels::mask_words(vocab)), 0);
      for (int32_t id = vocab - 1; id >= 0; id -= 1 + int32_t(rng() % 499)) mask[size_t(id / 32)] |= uint32_t(1) << (id % 32);
      b.masks.insert(b.masks.end(), mask.begin(), mask.end());
    }
    b.rows.push_back(row);
  }
  return b;
}

void expect_gpu_matches_cpu(const Batch& b, const std::string& what) {
  const auto num_rows = int32_t(b.rows.size());
  std::vector<float> cpu_logits = b.logits;
  std::vector<int32_t> cpu(num_rows, -1);
  kernels::sample_rows(cpu_logits.data(), num_rows, b.vocab, b.rows.data(), b.adjusts.data(), b.masks.data(), cpu.data());

  DeviceBuffer<float> logits(b.logits);
  DeviceBuffer<SamplingRow> rows(b.rows);
  DeviceBuffer<TokenAdjust> adjusts(b.adjusts.empty() ? std::vector<TokenAdjust>(1) : b.adjusts);
  DeviceBuffer<uint32_t> masks(b.masks.empty() ? std::vector<uint32_t>(1) : b.masks);
  DeviceBuffer<int32_t> tokens(std::vector<int32_t>(num_rows, -1));
  kernels::cuda::sample_rows(logits.get(), num_rows, b.vocab, rows.get(), adjusts.get(), masks.get(), tokens.get(),
                             nullptr);
  const auto gpu = tokens.to_host();
  for (int32_t r = 0; r < num_rows; ++r) {
    EXPECT_EQ(gpu[r], cpu[r]) << what << " vocab " << b.vocab << " row " << r << " temperature "
                              << b.rows[r].temperature << " top_k " << b.rows[r].top_k << " top_p "
                              << b.rows[r].top_p << " min_p " << b.rows[r].min_p;
  }
}

TEST_F(CudaSampling, MatchesCpuTwin) {
  std::mt19937 rng(41);
  const std::pair<const char*, Features> configs[] = {
      {"greedy", {.greedy = true}},
      {"greedy+penalties", {.greedy = true, .penalties = true}},
      {"plain", {}},
      {"top_k", {.top_k = true}},
      {"top_p", {.top_p = true}},
      {"min_p", {.min_p = true}},
      {"penalties", {.penalties = true}},
      {"all", {.top_k = true, .top_p = true, .min_p = true, .penalties = true}},
      {"top_k+top_p", {.top_k = true, .top_p = true}},
      {"greedy+mask", {.greedy = true, .mask = true}},
      {"all+mask", {.top_k = true, .top_p = true, .min_p = true, .penalties = true, .mask = true}},
  };
  for (const auto& [name, features] : configs) {
    expect_gpu_matches_cpu(random_batch(rng, 24, 49152, features), name);
  }
}

// A vocabulary too large for the shared-memory row cache, and one smaller than the block.
TEST_F(CudaSampling, MatchesCpuTwinOnLargeAndTinyVocabularies) {
  std::mt19937 rng(42);
  const Features all{.top_k = true, .top_p = true, .min_p = true, .penalties = true};
  for (int32_t vocab : {152064, 100, 1}) {
    for (const Features& f : {Features{.greedy = true}, Features{}, all})
      expect_gpu_matches_cpu(random_batch(rng, 6, vocab, f), "vocab " + std::to_string(vocab));
  }
}

// Argument errors throw before any CUDA call, so this runs without a device.
TEST(CudaSamplingWithoutDevice, RejectsBadArguments) {
  SamplingRow row;
  int32_t token = 0;
  float logit = 0.0f;
  EXPECT_THROW(kernels::cuda::sample_rows(&logit, 1, 0, &row, nullptr, nullptr, &token, nullptr), std::invalid_argument);
  EXPECT_THROW(kernels::cuda::sample_rows(&logit, -1, 1, &row, nullptr, nullptr, &token, nullptr), std::invalid_argument);
  EXPECT_THROW(kernels::cuda::sample_rows(nullptr, 1, 1, &row, nullptr, nullptr, &token, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve
