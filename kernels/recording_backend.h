// A backend that runs nothing: it notes which ops are called, on which element types and shapes, so
// a caller can dry-run its sequence of ops and ask a real backend about exactly those -- ggml's
// supports_op over a graph's nodes, where the graph is the code that would run. Its memory is
// addresses only, never read or written; what the host reads back (copy_out) comes as the int32
// words 0, 1, 2, ..., so host code that branches on results still reaches every op (a mixture's
// routing then sends one row to each expert).
#pragma once
#include <vector>
#include "kernels/backend.h"

namespace flashserve::kernels {

struct OpUse {
  Op op;
  DType type;
  OpShape shape;
  bool operator==(const OpUse&) const = default;
};

// "attention on F16 (head_dim 64, group 4, window 4096)": the shape's facts that are set.
std::string describe(const OpUse& use);

class RecordingBackend final : public Backend {
 public:
  // Each distinct use once, in the order first called.
  const std::vector<OpUse>& uses() const { return uses_; }

  std::string name() const override { return "recording"; }
  bool is_host() const override { return true; }
  bool supports(Op, DType, const OpShape&) const override { return true; }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override;
  void* allocate(size_t bytes) override;
  void deallocate(void*) override {}
  void copy_in(void*, const void*, size_t) override {}
  void copy_out(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override {}
  const void* map_weights(const void* host, size_t) override { return host; }
  void reserve(const StepLimits&) override {}

  void get_rows(const void*, DType type, int64_t, const int32_t*, int64_t, float*) override { note(Op::GetRows, type); }
  void matmul(const float*, int64_t, const void*, DType type, int64_t, int64_t, float*) override { note(Op::Matmul, type); }
  void rmsnorm(const float*, const float*, float*, int64_t, int64_t, float) override { note(Op::RmsNorm); }
  void add_rmsnorm(float*, const float*, const float*, float*, int64_t, int64_t, float) override { note(Op::AddRmsNorm); }
  void rope(float*, const int32_t*, int64_t, int64_t, int64_t, const RopeParams&) override { note(Op::Rope); }
  void swiglu(const float*, const float*, float*, int64_t) override { note(Op::SwiGLU); }
  void geglu(const float*, const float*, float*, int64_t) override { note(Op::GeGLU); }
  void add_bias(float*, const float*, int64_t, int64_t) override { note(Op::AddBias); }
  void scale(float*, float, int64_t) override { note(Op::Scale); }
  void kv_write(const KvCacheView& kv, const float*, const float*, const int32_t*, int64_t) override {
    note(Op::KvWrite, kv.type, {.head_dim = kv.layout.head_dim});
  }
  void attention(const float*, const KvCacheView& kv, const AttentionBatch& batch, int32_t num_heads, float,
                 float*) override;
  void moe_route(const float*, int64_t, int32_t experts, int32_t top_k, bool, const MoeRouting&) override {
    note(Op::MoeRoute, DType::F32, {.experts = experts, .top_k = top_k});
  }
  void scatter_rows(const float*, int64_t, int64_t, const int32_t*, float*) override { note(Op::ScatterRows); }
  void weighted_sum_rows(const float*, const float*, int64_t, int32_t, int64_t, float*) override {
    note(Op::WeightedSumRows);
  }
  void sample_rows(float*, int32_t, int32_t, const SamplingRow*, const TokenAdjust*, const uint32_t*, int32_t*) override {
    note(Op::SampleRows);
  }

  bool can_record() const override { return false; }
  std::unique_ptr<RecordedStep> record(const std::function<void()>& enqueue) override;

 private:
  void note(Op op, DType type = DType::F32, const OpShape& shape = {});

  std::vector<OpUse> uses_;
  uintptr_t next_address_ = 4096;
};

}  // namespace flashserve::kernels
