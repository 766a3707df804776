// What a model needs of its backend is found by running its layer sequence once on a recording
// backend (LlamaRunner::ops_needed), and a backend that lacks any one of those uses is refused
// before anything loads, with the use named.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/recording_backend.h"
#include "tests/util/forwarding_backend.h"
#include "tests/util/runners.h"
#include "tests/util/tiny_model.h"

namespace flashserve::test {
namespace {

using kernels::DType;
using kernels::Op;
using kernels::OpUse;

bool has(const std::vector<OpUse>& uses, const OpUse& use) {
  return std::find(uses.begin(), uses.end(), use) != uses.end();
}
bool has_op(const std::vector<OpUse>& uses, Op op) {
  return std::any_of(uses.begin(), uses.end(), [&](const OpUse& u) { return u.op == op; });
}

// The CPU backend, but for one use it says it cannot run.
class RefusingBackend final : public ForwardingBackend {
 public:
  explicit RefusingBackend(OpUse refused) : ForwardingBackend(kernels::make_cpu_backend()), refused_(refused) {}
  std::string name() const override { return "refusing"; }
  bool supports(Op op, DType type, const kernels::OpShape& shape) const override {
    return !(OpUse{op, type, shape} == refused_) && ForwardingBackend::supports(op, type, shape);
  }

 private:
  OpUse refused_;
};

TEST(OpsNeeded, FollowEachFamilysLayerSequence) {
  TinyModelSpec llama;
  llama.matrix_type = DType::Q8_0;
  llama.embd_type = DType::Q5_0;
  const auto m = load_tiny_model(llama, "ops_llama");
  const auto uses = LlamaRunner::ops_needed(*m, RunnerConfig{});
  const int32_t head_dim = llama.dim / llama.num_heads, group = llama.num_heads / llama.num_kv_heads;
  EXPECT_TRUE(has(uses, {Op::GetRows, DType::Q5_0, {}}));
  EXPECT_TRUE(has(uses, {Op::Matmul, DType::Q8_0, {}}));
  EXPECT_TRUE(has(uses, {Op::Matmul, DType::Q5_0, {}})) << "the LM head, tied to the embedding";
  EXPECT_TRUE(has(uses, {Op::KvWrite, DType::F32, {.head_dim = head_dim}}));
  EXPECT_TRUE(has(uses, {Op::Attention, DType::F32, {.head_dim = head_dim, .group = group}}));
  for (Op op : {Op::RmsNorm, Op::AddRmsNorm, Op::Rope, Op::SwiGLU, Op::SampleRows}) {
    EXPECT_TRUE(has(uses, {op, DType::F32, {}})) << kernels::op_name(op);
  }
  for (Op op : {Op::GeGLU, Op::Scale, Op::AddBias, Op::MoeRoute, Op::ScatterRows}) {
    EXPECT_FALSE(has_op(uses, op)) << kernels::op_name(op);
  }

  TinyModelSpec qwen2;
  qwen2.arch = "qwen2";
  EXPECT_TRUE(has(LlamaRunner::ops_needed(*load_tiny_model(qwen2, "ops_qwen2"), RunnerConfig{}), {Op::AddBias, DType::F32, {}}));

  TinyModelSpec gemma3;
  gemma3.arch = "gemma3";
  gemma3.num_layers = 6;  // five local layers, then a global one
  RunnerConfig f16;
  f16.kv_type = DType::F16;
  const auto gemma_uses = LlamaRunner::ops_needed(*load_tiny_model(gemma3, "ops_gemma3"), f16);
  for (Op op : {Op::GeGLU, Op::Scale}) EXPECT_TRUE(has(gemma_uses, {op, DType::F32, {}})) << kernels::op_name(op);
  EXPECT_TRUE(has(gemma_uses, {Op::Attention, DType::F16, {.head_dim = head_dim, .group = group}}));
  EXPECT_TRUE(has(gemma_uses, {Op::Attention, DType::F16, {.head_dim = head_dim, .group = group, .window = 8}}));
  EXPECT_FALSE(has_op(gemma_uses, Op::SwiGLU));

  TinyModelSpec granite;  // the multipliers ride on scale: embeddings, each branch, the logits
  granite.arch = "granite";
  const auto granite_uses = LlamaRunner::ops_needed(*load_tiny_model(granite, "ops_granite"), RunnerConfig{});
  EXPECT_TRUE(has(granite_uses, {Op::Scale, DType::F32, {}}));
  EXPECT_FALSE(has_op(granite_uses, Op::AddBias));

  TinyModelSpec moe;
  moe.num_experts = 4;
  moe.experts_used = 2;
  moe.matrix_type = DType::Q4_0;
  const auto moe_uses = LlamaRunner::ops_needed(*load_tiny_model(moe, "ops_moe"), RunnerConfig{});
  EXPECT_TRUE(has(moe_uses, {Op::MoeRoute, DType::F32, {.experts = 4, .top_k = 2}}));
  for (Op op : {Op::ScatterRows, Op::WeightedSumRows, Op::SwiGLU}) {
    EXPECT_TRUE(has(moe_uses, {op, DType::F32, {}})) << kernels::op_name(op);
  }
  EXPECT_TRUE(has(moe_uses, {Op::GetRows, DType::F32, {}})) << "each expert gathers its rows";
  EXPECT_TRUE(has(moe_uses, {Op::Matmul, DType::Q4_0, {}})) << "the experts' and router's matrices";
}

// Every use the dry run finds is asked for: refusing any one of them refuses the model, naming it.
TEST(OpsNeeded, ABackendLackingAnyOneIsRefusedByName) {
  TinyModelSpec gemma3;
  gemma3.arch = "gemma3";
  gemma3.num_layers = 6;
  const auto m = load_tiny_model(gemma3, "ops_refused");
  const auto uses = LlamaRunner::ops_needed(*m, RunnerConfig{});
  ASSERT_GE(uses.size(), 10u);
  for (const OpUse& use : uses) {
    SCOPED_TRACE(kernels::describe(use));
    try {
      cpu_runner_on(*m, std::make_unique<RefusingBackend>(use), 8);
      ADD_FAILURE() << "the runner took a backend that cannot run it";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("cannot run " + kernels::describe(use)), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(cpu_runner_on(*m, std::make_unique<RefusingBackend>(OpUse{Op::MoeRoute, DType::F32, {}}), 8));
}

}  // namespace
}  // namespace flashserve::test
