// What a model needs of its backend is found by running its layer sequence once on a recording
// backend (LlamaRunner::ops_needed), and a backend that lacks any one of those uses is refused
// before anything loads, with the use named.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/recording_backend.h"
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
class RefusingBackend final : public kernels::Backend {
 public:
  explicit RefusingBackend(OpUse refused) : in_(kernels::make_cpu_backend()), refused_(refused) {}
  std::string name() const override { return "refusing"; }
  bool is_host() const override { return true; }
  bool supports(Op op, DType type, const kernels::OpShape& shape) const override {
    return !(OpUse{op, type, shape} == refused_) && in_->supports(op, type, shape);
  }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override { in_->memory_info(free_bytes, total_bytes); }
  void* allocate(size_t bytes) override { return in_->allocate(bytes); }
  void deallocate(void* p) override { in_->deallocate(p); }
  void copy_in(void* dst, const void* src, size_t bytes) override { in_->copy_in(dst, src, bytes); }
  void copy_out(void* dst, const void* src, size_t bytes) override { in_->copy_out(dst, src, bytes); }
  void synchronize() override {}
  const void* map_weights(const void* host, size_t bytes) override { return in_->map_weights(host, bytes); }
  void reserve(const kernels::StepLimits& l) override { in_->reserve(l); }
  void get_rows(const void* t, DType type, int64_t cols, const int32_t* ids, int64_t n, float* out) override {
    in_->get_rows(t, type, cols, ids, n, out);
  }
  void matmul(const float* x, int64_t n, const void* w, DType type, int64_t rows, int64_t cols, float* y) override {
    in_->matmul(x, n, w, type, rows, cols, y);
  }
  void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t dim, float eps) override {
    in_->rmsnorm(x, w, y, rows, dim, eps);
  }
  void add_rmsnorm(float* x, const float* r, const float* w, float* y, int64_t rows, int64_t dim, float eps) override {
    in_->add_rmsnorm(x, r, w, y, rows, dim, eps);
  }
  void rope(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t hd, const kernels::RopeParams& p) override {
    in_->rope(x, pos, n, heads, hd, p);
  }
  void swiglu(const float* g, const float* u, float* out, int64_t n) override { in_->swiglu(g, u, out, n); }
  void geglu(const float* g, const float* u, float* out, int64_t n) override { in_->geglu(g, u, out, n); }
  void add_bias(float* x, const float* b, int64_t rows, int64_t dim) override { in_->add_bias(x, b, rows, dim); }
  void scale(float* x, float s, int64_t n) override { in_->scale(x, s, n); }
  void kv_write(const kernels::KvCacheView& kv, const float* k, const float* v, const int32_t* slots, int64_t n) override {
    in_->kv_write(kv, k, v, slots, n);
  }
  void attention(const float* q, const kernels::KvCacheView& kv, const kernels::AttentionBatch& b, int32_t heads,
                 float s, float* out) override {
    in_->attention(q, kv, b, heads, s, out);
  }
  void moe_route(const float* l, int64_t n, int32_t e, int32_t k, bool renorm, const kernels::MoeRouting& out) override {
    in_->moe_route(l, n, e, k, renorm, out);
  }
  void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst) override {
    in_->scatter_rows(src, n, dim, ids, dst);
  }
  void weighted_sum_rows(const float* rows, const float* w, int64_t n, int32_t k, int64_t dim, float* out) override {
    in_->weighted_sum_rows(rows, w, n, k, dim, out);
  }
  void sample_rows(float* logits, int32_t rows, int32_t vocab, const kernels::SamplingRow* p,
                   const kernels::TokenAdjust* a, const uint32_t* m, int32_t* tokens) override {
    in_->sample_rows(logits, rows, vocab, p, a, m, tokens);
  }
  bool can_record() const override { return false; }
  std::unique_ptr<kernels::RecordedStep> record(const std::function<void()>& f) override { return in_->record(f); }

 private:
  std::unique_ptr<kernels::Backend> in_;
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
