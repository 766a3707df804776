// The real SmolLM2-135M-Instruct file against llama.cpp on the same file
// (tests/fixtures/smollm2_llamacpp.json, from scripts/gen_llamacpp_fixture.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "model/chat_template.h"
#include "model/model.h"
#include "tests/util/llamacpp_agreement.h"
#include "tests/util/reference_llama.h"
#include "tests/util/runners.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using nlohmann::json;

class SmolLM2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::load(test::real_model_path()).release();
    std::ifstream in(test::fixture_path("smollm2_llamacpp.json"));
    fixture_ = new json(json::parse(in));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete fixture_;
  }

  static Model* model_;
  static json* fixture_;
};
Model* SmolLM2::model_ = nullptr;
json* SmolLM2::fixture_ = nullptr;

TEST_F(SmolLM2, PromptsTokenizeLikeLlamaCpp) {
  ASSERT_GE((*fixture_)["prompts"].size(), 8u);
  for (const json& p : (*fixture_)["prompts"]) {
    const auto ids = model_->tokenizer().encode(p["text"].get<std::string>(), true, true);
    EXPECT_EQ(ids, p["prompt_ids"].get<std::vector<int32_t>>()) << p["text"];
  }
}

// Teacher-forced on llama.cpp's greedy continuation, our top-1 must equal llama.cpp's wherever its
// top-1/top-2 gap exceeds 0.1. llama.cpp's own logits carry rounding (8-bit activations, f16 KV and
// attention) worth ~0.1-0.5 on a logit -- it disagrees with itself that much between decoding token by
// token and scoring in one batch -- so a near-tie can flip on its side. A disagreement therefore
// stands only if exact arithmetic (the plain f64 forward pass on the same weights) sides with us, and
// such arbitrated cases must stay rare.
TEST_F(SmolLM2, TopOneAgreesWithLlamaCppWhereDecisive) {
  for (const json& p : (*fixture_)["prompts"]) ASSERT_EQ(p["generated_ids"].size(), 32u);
  const test::Top1Agreement a = test::top1_agreement(*model_, *fixture_, 0.1, "SmolLM2");
  std::printf("[ agreement ] top-1 equal to llama.cpp at %d/%d positions with gap > 0.1 (%d more where exact f64 "
              "arithmetic sides with us); %d/%d overall\n", a.agree, a.decisive, a.arbitrated, a.agree_all, a.total);
  std::printf("[ agreement ] |our logit - llama.cpp's| for its top-1: max %.4f, mean %.4f; llama.cpp's own top-1 "
              "differs between its batched and token-by-token passes at %d/%d positions\n",
              a.max_diff, a.sum_diff / a.total, a.self_flips, a.total);
  EXPECT_GE(a.decisive, a.total * 3 / 4);  // the check must cover most positions to mean anything
  EXPECT_LE(a.arbitrated * 50, a.decisive) << "more than 2% of decisive positions disagree with llama.cpp";
}

// Our logits on the real model against the plain f64 forward pass over the same quantized weights.
TEST_F(SmolLM2, LogitsMatchF64Reference) {
  const auto tokens = (*fixture_)["prompts"][7]["prompt_ids"].get<std::vector<int32_t>>();
  const ForwardOutput out = test::score_all_positions(*model_, tokens);
  const auto ref = test::ReferenceLlama(model_->file()).logits(tokens);
  double worst = 0;
  for (size_t i = 0; i < tokens.size(); ++i) worst = std::max(worst, test::relative_error(out.row(0, int32_t(i)), ref[i]));
  std::printf("[ reference ] max relative error vs f64 over %zu positions: %.2e\n", tokens.size(), worst);
  EXPECT_LT(worst, 1e-5);
  // What a q8_0 KV cache alone costs (f32 activations otherwise): each K and V value rounded to its
  // block's step, max|x| / 127.
  const ForwardOutput q8_kv = test::score_all_positions(*model_, tokens, /*q8=*/false, kernels::DType::Q8_0);
  double worst_q8_kv = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    worst_q8_kv = std::max(worst_q8_kv, test::relative_error(q8_kv.row(0, int32_t(i)), ref[i]));
  }
  std::printf("[ reference ] with a q8_0 KV cache: max relative error vs f64 %.2e\n", worst_q8_kv);  // 1.98e-2 measured
  EXPECT_LT(worst_q8_kv, 5e-2);
  // And an fp8 (E4M3) one: each value rounded to 3 mantissa bits, up to 2^-4 of itself, where a
  // q8_0 block's step is 1/127 of its largest value: 1.82e-1 measured, nine times q8_0's.
  const ForwardOutput fp8_kv = test::score_all_positions(*model_, tokens, /*q8=*/false, kernels::DType::F8_E4M3);
  double worst_fp8_kv = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    worst_fp8_kv = std::max(worst_fp8_kv, test::relative_error(fp8_kv.row(0, int32_t(i)), ref[i]));
  }
  std::printf("[ reference ] with an fp8 KV cache: max relative error vs f64 %.2e\n", worst_fp8_kv);
  EXPECT_LT(worst_fp8_kv, 3e-1);
}

// The fast path (8-bit activations, integer dots; llama.cpp computes this way too): measured against
// llama.cpp and the f64 reference, without the arbitration, since its rounding is no longer exact
// arithmetic's. Two 8-bit implementations that round differently (our blocks' scales and ties are
// not ggml's) each move a logit by up to ~0.4 (|logit - llama.cpp's| reaches 0.8 here), so a
// position is decisive for this comparison when llama.cpp's top-1/top-2 gap exceeds 0.5, and at
// most 2% of those may disagree. Every disagreement is printed: all of them sit at gaps below 0.31,
// where the two roundings can fairly differ. The count is the same on every CPU (the kernels'
// results are, tests/model/test_cpu_copies_model.cpp); it was 2.3% of the gaps above 0.1, which
// made the old 0.1 bound pass or fail with the machine's vector width.
// With an f32 KV cache, the f16 one the server keeps by default (as llama.cpp does), and the 8-bit
// ones (q8_0, fp8).
TEST_F(SmolLM2, EightBitActivationsAgreeWithLlamaCppAndTheReference) {
  for (kernels::DType kv : {kernels::DType::F32, kernels::DType::F16, kernels::DType::Q8_0, kernels::DType::F8_E4M3}) {
    SCOPED_TRACE(kernels::dtype_name(kv));
    int decisive = 0, agree = 0, agree_all = 0, total = 0;
    double max_diff = 0;
    for (const json& p : (*fixture_)["prompts"]) {
      auto tokens = p["prompt_ids"].get<std::vector<int32_t>>();
      const auto generated = p["generated_ids"].get<std::vector<int32_t>>();
      const size_t first = tokens.size() - 1;
      tokens.insert(tokens.end(), generated.begin(), generated.end() - 1);
      const ForwardOutput out = test::score_all_positions(*model_, tokens, /*q8=*/true, kv);
      for (size_t i = 0; i < generated.size(); ++i) {
        const float* row = out.row(0, int32_t(first + i));
        const int32_t ours = int32_t(std::max_element(row, row + out.vocab_size) - row);
        const json& top = p["top_logits"][i];
        const int32_t theirs = top[0][0];
        max_diff = std::max(max_diff, double(std::abs(row[theirs] - top[0][1].get<float>())));
        ++total;
        agree_all += ours == theirs;
        if (ours != theirs)
          std::printf("[ q8 disagrees ] llama.cpp picks %d by a gap of %.3f; we pick %d by %.3f\n", theirs,
                      test::top_gap(top), ours, row[ours] - row[theirs]);
        if (test::top_gap(top) <= 0.5) continue;
        ++decisive;
        agree += ours == theirs;
      }
    }
    const auto tokens = (*fixture_)["prompts"][7]["prompt_ids"].get<std::vector<int32_t>>();
    const ForwardOutput out = test::score_all_positions(*model_, tokens, true, kv);
    const auto ref = test::ReferenceLlama(model_->file()).logits(tokens);
    double worst = 0;
    for (size_t i = 0; i < tokens.size(); ++i) worst = std::max(worst, test::relative_error(out.row(0, int32_t(i)), ref[i]));
    std::printf("[ q8, %s KV ] top-1 equal to llama.cpp at %d/%d positions with gap > 0.5, %d/%d overall; |logit - "
                "llama.cpp's| max %.4f; max relative error vs f64 %.2e\n", std::string(kernels::dtype_name(kv)).c_str(),
                agree, decisive, agree_all, total, max_diff, worst);
    EXPECT_GE(decisive, total * 3 / 4);  // the check must cover most positions to mean anything
    EXPECT_LE((decisive - agree) * 50, decisive) << "more than 2% of decisive positions disagree with llama.cpp";
    // Each activation moves by up to half its block's step (~0.4% of the block's largest), compounded
    // over 30 layers: measured 6.6e-2 of the largest logit (f32 path: < 1e-5). An fp8 cache adds its
    // own rounding, a relative 2^-4 at most: measured 1.57e-1.
    EXPECT_LT(worst, kv == kernels::DType::F8_E4M3 ? 3e-1 : 1e-1);
  }
}

TEST_F(SmolLM2, GreedyChatAnswerIsCoherent) {
  const Tokenizer& tok = model_->tokenizer();
  std::vector<int32_t> tokens =
      model_->encode_chat(model_->chat_template(), {{"user", "Explain photosynthesis in simple terms."}});
  auto cache = test::cpu_runner(*model_, 16);
  SequenceInput s;
  s.block_tables.assign(1, std::vector<int32_t>(16));
  std::iota(s.block_tables[0].begin(), s.block_tables[0].end(), 0);
  s.token_ids = tokens;
  std::vector<int32_t> answer;
  for (int step = 0; step < 40; ++step) {
    const ForwardOutput out = cache->forward(ForwardBatch{{s}});
    const int32_t next = int32_t(std::max_element(out.row(0), out.row(0) + out.vocab_size) - out.row(0));
    if (tok.is_end_of_generation(next)) break;
    answer.push_back(next);
    s.num_computed_tokens += int32_t(s.token_ids.size());
    s.token_ids = {next};
  }
  const std::string text = tok.decode(answer);
  std::printf("[ answer    ] %s\n", text.c_str());
  for (const char* word : {"Photosynthesis", "plants", "light", "energy"}) {
    EXPECT_NE(text.find(word), std::string::npos) << "missing '" << word << "' in: " << text;
  }
}

}  // namespace
}  // namespace flashserve
