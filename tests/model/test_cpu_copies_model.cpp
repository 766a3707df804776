// The real SmolLM2 forward pass once per compiled copy of the CPU ops this machine runs (scalar,
// AVX2, AVX2-VNNI, AVX-512, AVX-512 VNNI; kernels/cpu_isa.h), in both activation modes: a prefill
// of a few hundred tokens, decode steps alone, then a prefill batched with a decode and decode steps
// batched. Every logit must be the scalar copy's bit for bit; when one is not, the per-op trace
// (tests/util/op_trace_backend.h) names the first op and layer that parted. This is what makes "the
// same request gives the same tokens on any x86-64 machine" a promise: a copy this CPU lacks is
// checked on the machines that have it, against the same scalar arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"
#include "tests/util/bit_difference.h"
#include "tests/util/op_trace_backend.h"
#include "tests/util/runners.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using kernels::CpuIsa;
using kernels::DType;

struct CopyRun {
  std::vector<float> logits;         // every step's rows, in order
  std::vector<test::TracedOp> trace;  // every op's output hash, in order
};

int32_t greedy(const float* row, int32_t vocab) { return int32_t(std::max_element(row, row + vocab) - row); }

// One sequence's next input after `out` row `seq`: its greedy token.
void advance(SequenceInput& s, const ForwardOutput& out, int32_t seq) {
  s.num_computed_tokens += int32_t(s.token_ids.size());
  s.token_ids = {greedy(out.row(seq), out.vocab_size)};
}

class CpuCopiesModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(test::real_model_path()).release(); }
  static void TearDownTestSuite() { delete model_; }

  static std::vector<int32_t> chat(const std::string& text) {
    return model_->encode_chat(model_->chat_template(), {{"user", text}});
  }

  // The steps, on one copy of the ops.
  static CopyRun run(CpuIsa isa, bool q8, DType kv) {
    CopyRun r;
    auto runner = test::cpu_runner_on(*model_, test::op_trace_backend(kernels::make_cpu_backend(q8, isa), r.trace), 64,
                                      16, kv);
    auto keep = [&](const ForwardOutput& out) { r.logits.insert(r.logits.end(), out.logits.begin(), out.logits.end()); };
    std::vector<int32_t> table_a(32), table_b(32);
    std::iota(table_a.begin(), table_a.end(), 0);
    std::iota(table_b.begin(), table_b.end(), 32);

    SequenceInput a;
    a.token_ids = chat(std::string(kPassage) + "\nSummarise this passage in three sentences, then list its dates.");
    a.block_tables = test::per_group(*runner, table_a);
    for (int step = 0; step < 4; ++step) {  // prefill, then decode alone
      const ForwardOutput out = runner->forward(ForwardBatch{{a}});
      keep(out);
      advance(a, out, 0);
    }
    SequenceInput b;
    b.token_ids = chat("What are the three most famous symbols of France? Answer in one line each.");
    b.block_tables = test::per_group(*runner, table_b);
    b.logits = LogitRows::All;  // every prefill row, not just the last
    const ForwardOutput mixed = runner->forward(ForwardBatch{{a, b}});  // a decodes while b prefills
    keep(mixed);
    advance(a, mixed, 0);
    b.num_computed_tokens += int32_t(b.token_ids.size());
    b.token_ids = {greedy(mixed.row(1, mixed.num_rows[1] - 1), mixed.vocab_size)};
    b.logits = LogitRows::Last;
    for (int step = 0; step < 3; ++step) {  // decode batched
      const ForwardOutput out = runner->forward(ForwardBatch{{a, b}});
      keep(out);
      advance(a, out, 0);
      advance(b, out, 1);
    }
    return r;
  }

  static constexpr const char* kPassage =
      "The Eiffel Tower was built for the 1889 World's Fair in Paris, to mark the hundredth anniversary of the French "
      "Revolution. Gustave Eiffel's company designed and built it; the engineers Maurice Koechlin and Emile Nouguier "
      "drew the first sketches in 1884, and the architect Stephen Sauvestre gave it its arches and its decoration. "
      "Work began in January 1887 and ended in March 1889, two years, two months and five days later. At 300 metres it "
      "was the tallest structure in the world until the Chrysler Building in New York passed it in 1930. Many artists "
      "of the day protested against it, calling it useless and monstrous, and its permit was for twenty years only. "
      "It survived because it proved useful for radio: from 1906 on it carried a military transmitter, and during the "
      "First World War its station intercepted enemy messages. Today it receives about seven million visitors a year, "
      "is repainted every seven years with sixty tonnes of paint, and grows by up to fifteen centimetres on hot summer "
      "days, as its iron expands in the heat.";

  static Model* model_;
};
Model* CpuCopiesModel::model_ = nullptr;

TEST_F(CpuCopiesModel, EveryCopyGivesTheScalarCopysLogitsBitForBit) {
  const size_t prefill = chat(kPassage).size();
  ASSERT_GE(prefill, 200u) << "the prefill should be a few hundred tokens";
  std::printf("[ copies ] a prefill of about %zu tokens, then 3 decode steps; a 2-sequence step, then 3 more\n", prefill);
  struct Mode {
    bool q8;
    DType kv;
  };
  for (const Mode mode : {Mode{false, DType::F32}, Mode{true, DType::F16}}) {
    const std::string label = std::string(mode.q8 ? "8-bit" : "f32") + " activations, " +
                              std::string(kernels::dtype_name(mode.kv)) + " KV";
    SCOPED_TRACE(label);
    const CopyRun want = run(CpuIsa::Scalar, mode.q8, mode.kv);
    for (const CpuIsa isa : kernels::supported_cpu_isas()) {
      if (isa == CpuIsa::Scalar) continue;
      const CopyRun got = run(isa, mode.q8, mode.kv);
      const std::string where = test::first_traced_difference(got.trace, want.trace, model_->config().num_layers);
      EXPECT_EQ(where, "") << kernels::cpu_isa_name(isa) << " against scalar";
      EXPECT_EQ(test::first_bit_difference(got.logits, want.logits), "") << kernels::cpu_isa_name(isa) << " against scalar";
      std::printf("[ copies ] %s, %s: %zu logits and %zu op outputs equal to the scalar copy's: %s\n", label.c_str(),
                  std::string(kernels::cpu_isa_name(isa)).c_str(), got.logits.size(), got.trace.size(),
                  where.empty() && got.logits == want.logits ? "yes" : "NO");
    }
  }
}

}  // namespace
}  // namespace flashserve
