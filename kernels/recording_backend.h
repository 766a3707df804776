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
  DType type = DType::F32;
  OpShape shape{};
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

  // Each op notes the use FLASHSERVE_BACKEND_OPS gives it, and reads no other argument.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define FLASHSERVE_OP_NOTE(op, name, params, args, use) \
  void name params override { note(OpUse{Op::op, FLASHSERVE_OPEN use}); }
  FLASHSERVE_BACKEND_OPS(FLASHSERVE_OP_NOTE)
#undef FLASHSERVE_OP_NOTE
#pragma GCC diagnostic pop

  bool can_record() const override { return false; }
  std::unique_ptr<RecordedStep> record(const std::function<void()>& enqueue) override;

 private:
  void note(const OpUse& use);

  std::vector<OpUse> uses_;
  uintptr_t next_address_ = 4096;
};

}  // namespace flashserve::kernels
