#include "tests/util/llamacpp_agreement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>

#include "tests/util/reference_llama.h"
#include "tests/util/runners.h"

namespace flashserve::test {
namespace {

int32_t argmax(const float* row, int32_t n) { return int32_t(std::max_element(row, row + n) - row); }

}  // namespace

ForwardOutput score_all_positions(const Model& model, const std::vector<int32_t>& tokens, bool q8,
                                  kernels::DType kv_type) {
  auto runner = cpu_runner(model, int32_t(tokens.size() + 15) / 16, 16, q8, kv_type);
  SequenceInput s;
  s.token_ids = tokens;
  std::vector<int32_t> table(size_t(tokens.size() + 15) / 16);
  std::iota(table.begin(), table.end(), 0);
  s.block_tables = per_group(*runner, table);
  s.logits = LogitRows::All;
  return runner->forward(ForwardBatch{{s}});
}

double top_gap(const nlohmann::json& top) { return top[0][1].get<double>() - top[1][1].get<double>(); }

Top1Agreement top1_agreement(const Model& model, const nlohmann::json& fixture, double decisive_gap,
                             const std::string& label, bool q8, bool arbitrate) {
  Top1Agreement a;
  std::unique_ptr<ReferenceLlama> exact;
  for (size_t pi = 0; pi < fixture["prompts"].size(); ++pi) {
    const nlohmann::json& p = fixture["prompts"][pi];
    auto tokens = p["prompt_ids"].get<std::vector<int32_t>>();
    const auto generated = p["generated_ids"].get<std::vector<int32_t>>();
    const size_t first = tokens.size() - 1;
    tokens.insert(tokens.end(), generated.begin(), generated.end() - 1);
    const ForwardOutput out = score_all_positions(model, tokens, q8);
    for (size_t i = 0; i < generated.size(); ++i) {
      const float* row = out.row(0, int32_t(first + i));
      const int32_t ours = argmax(row, out.vocab_size);
      const nlohmann::json& top = p["top_logits"][i];
      const int32_t theirs = top[0][0];
      const double diff = std::abs(row[theirs] - top[0][1].get<double>());
      a.max_diff = std::max(a.max_diff, diff);
      a.sum_diff += diff;
      ++a.total;
      a.agree_all += ours == theirs;
      a.self_flips += p["top_logits_incremental"][i][0][0] != theirs;
      if (top_gap(top) <= decisive_gap) continue;
      ++a.decisive;
      if (ours == theirs) {
        ++a.agree;
        continue;
      }
      if (!exact) exact = std::make_unique<ReferenceLlama>(model.file());
      const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + std::ptrdiff_t(first + i + 1));
      const std::vector<double> ref = exact->logits(prefix).back();
      const int32_t exact_top = int32_t(std::max_element(ref.begin(), ref.end()) - ref.begin());
      std::printf("[ %s ] arbitrate prompt %zu, position %zu: llama.cpp picks %d (gap %.3f), we pick %d (our logits "
                  "%.4f vs %.4f); exact f64 picks %d (%.4f vs %.4f)\n",
                  label.c_str(), pi, i, theirs, top_gap(top), ours, row[ours], row[theirs], exact_top, ref[ours],
                  ref[theirs]);
      if (arbitrate) {
        EXPECT_EQ(ours, exact_top) << "[ " << label << " ] we disagree with llama.cpp and with exact arithmetic";
      }
      a.arbitrated += ours == exact_top;
    }
  }
  return a;
}

}  // namespace flashserve::test
