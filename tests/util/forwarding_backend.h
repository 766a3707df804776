// A backend that hands every call to another: the base of the tests' wrappers, which override only
// what they change. Its ops are made from FLASHSERVE_BACKEND_OPS, so a new op needs nothing here.
#pragma once
#include <memory>
#include <utility>

#include "kernels/backend.h"

namespace flashserve::test {

class ForwardingBackend : public kernels::Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<kernels::Backend> inner) : in_(std::move(inner)) {}

  std::string name() const override { return in_->name(); }
  bool is_host() const override { return in_->is_host(); }
  bool supports(kernels::Op op, kernels::DType type, const kernels::OpShape& shape) const override {
    return in_->supports(op, type, shape);
  }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override { in_->memory_info(free_bytes, total_bytes); }
  void* allocate(size_t bytes) override { return in_->allocate(bytes); }
  void deallocate(void* p) override { in_->deallocate(p); }
  void copy_in(void* dst, const void* src, size_t bytes) override { in_->copy_in(dst, src, bytes); }
  void copy_out(void* dst, const void* src, size_t bytes) override { in_->copy_out(dst, src, bytes); }
  void synchronize() override { in_->synchronize(); }
  const void* map_weights(const void* host, size_t bytes) override { return in_->map_weights(host, bytes); }
  const void* map_matrix(const void* host, kernels::DType type, int64_t rows, int64_t cols) override {
    return in_->map_matrix(host, type, rows, cols);
  }
  void reserve(const kernels::StepLimits& limits) override { in_->reserve(limits); }

  // Inside the namespace the list's parameter types are spelled as in backend.h.
  using DType = kernels::DType;
  using KvCacheView = kernels::KvCacheView;
  using AttentionBatch = kernels::AttentionBatch;
  using MoeRouting = kernels::MoeRouting;
  using RopeParams = kernels::RopeParams;
  using SamplingRow = kernels::SamplingRow;
  using TokenAdjust = kernels::TokenAdjust;
#define FLASHSERVE_OP_FORWARD(op, name, params, args, use) \
  void name params override { in_->name args; }
  FLASHSERVE_BACKEND_OPS(FLASHSERVE_OP_FORWARD)
#undef FLASHSERVE_OP_FORWARD

  bool can_record() const override { return in_->can_record(); }
  std::unique_ptr<kernels::RecordedStep> record(const std::function<void()>& enqueue) override {
    return in_->record(enqueue);
  }

 protected:
  kernels::Backend& inner() { return *in_; }

 private:
  std::unique_ptr<kernels::Backend> in_;
};

}  // namespace flashserve::test
