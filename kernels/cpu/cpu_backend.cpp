// The CPU backend: host memory, ops run as they are called on the kernel threads (threads.cpp). Weights are used in
// place from the memory-mapped file, except the matrices that 8-bit activations read faster packed (map_matrix).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu_isa.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"

namespace flashserve::kernels {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(bool q8_activations, CpuIsa isa) : q8_(q8_activations), isa_(isa), ops_(cpu_ops(isa)) {}
  std::string name() const override {
    return std::string("cpu (") + cpu_isa_name(isa_) + " kernels, " + std::to_string(num_threads()) + " threads, " +
           (q8_ ? "8-bit activations for quantized weights" : "f32 activations") + ")";
  }
  bool is_host() const override { return true; }

  // Every weight type the GGUF reader accepts has a CPU decoder; the KV cache is f32, f16, q8_0 or fp8.
  bool supports(Op op, DType type, const OpShape& shape) const override {
    switch (op) {
      case Op::GetRows:
      case Op::Matmul: return true;
      case Op::KvWrite:
      case Op::Attention:
        return type == DType::F32 || type == DType::F16 || type == DType::F8_E4M3 ||
               (type == DType::Q8_0 && shape.head_dim % 32 == 0);
      default: return type == DType::F32;
    }
  }

  void memory_info(size_t& free_bytes, size_t& total_bytes) const override {
    const long page = sysconf(_SC_PAGESIZE);
    free_bytes = size_t(sysconf(_SC_AVPHYS_PAGES)) * size_t(page);
    total_bytes = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(page);
  }

  void* allocate(size_t bytes) override {
    // 64-byte aligned for the vector loads; malloc'd pages stay uncommitted until written.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p) override { std::free(p); }
  void copy_in(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_out(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
  const void* map_weights(const void* host, size_t) override { return host; }
  const void* map_matrix(const void* host, DType type, int64_t rows, int64_t cols) override {
    if (!q8_ || !q8_packs(type) || cols % 32 != 0) return host;
    Buffer copy(*this, q8_packed_bytes(type, rows, cols));
    pack_rows_for_q8(host, type, rows, cols, copy.get());
    const void* p = copy.get();
    packed_.emplace(p, std::move(copy));
    return p;
  }
  void reserve(const StepLimits&) override {}

  void get_rows(const void* table, DType type, int64_t cols, const int32_t* ids, int64_t n, float* out) override {
    ops_.get_rows(table, type, cols, ids, n, out);
  }
  void matmul(const float* x, int64_t tokens, const void* w, DType type, int64_t rows, int64_t cols,
              float* y) override {
    if (packed_.count(w)) {
      ops_.matmul_q8_packed(x, tokens, cols, w, type, rows, y);
    } else if (q8_ && matmul_q8_supports(type)) {
      ops_.matmul_q8(x, tokens, cols, w, type, rows, y);
    } else {
      ops_.matmul(x, tokens, cols, w, type, rows, y);
    }
  }
  void rmsnorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps) override {
    ops_.rmsnorm(x, weight, y, rows, dim, eps);
  }
  void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t rows, int64_t dim,
                   float eps) override {
    ops_.add_rmsnorm(x, residual, weight, y, rows, dim, eps);
  }
  void rope(float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
            const RopeParams& p) override {
    ops_.rope(x, positions, tokens, heads, head_dim, p);
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override { ops_.swiglu(gate, up, out, n); }
  void geglu(const float* gate, const float* up, float* out, int64_t n) override { ops_.geglu(gate, up, out, n); }
  void add_bias(float* x, const float* bias, int64_t rows, int64_t dim) override { ops_.add_bias(x, bias, rows, dim); }
  void scale(float* x, float s, int64_t n) override { ops_.scale(x, s, n); }
  void kv_write(const KvCacheView& kv, const float* k, const float* v, const int32_t* slots, int64_t tokens) override {
    ops_.kv_write(kv.layout, kv.type, kv.k, kv.v, k, v, slots, tokens);
  }
  void attention(const float* q, const KvCacheView& kv, const AttentionBatch& batch, int32_t num_heads, float scale,
                 float* out) override {
    ops_.paged_attention(q, kv.k, kv.v, kv.type, kv.layout, batch, num_heads, scale, out);
  }
  void moe_route(const float* logits, int64_t tokens, int32_t experts, int32_t top_k, bool renormalize,
                 const MoeRouting& out) override {
    ops_.moe_route(logits, tokens, experts, top_k, renormalize, out);
  }
  void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst) override {
    ops_.scatter_rows(src, n, dim, ids, dst);
  }
  void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim,
                         float* out) override {
    ops_.weighted_sum_rows(rows, weights, n, k, dim, out);
  }
  void sample_rows(float* logits, int32_t rows, int32_t vocab, const SamplingRow* params, const TokenAdjust* adjusts,
                   const uint32_t* masks, int32_t* tokens) override {
    kernels::sample_rows(logits, rows, vocab, params, adjusts, masks, tokens);
  }
  bool can_record() const override { return false; }
  std::unique_ptr<RecordedStep> record(const std::function<void()>&) override {
    throw std::logic_error("the CPU backend records no steps (can_record() is false)");
  }

 private:
  bool q8_;
  CpuIsa isa_;
  const CpuOps& ops_;
  std::unordered_map<const void*, Buffer> packed_;  // map_matrix's copies, by the pointer it returned
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(bool q8_activations, std::optional<CpuIsa> isa) {
  const CpuIsa level = isa.value_or(cpu_isa());
  require_cpu_isa(level);
  return std::make_unique<CpuBackend>(q8_activations, level);
}

}  // namespace flashserve::kernels
