#include "tests/util/op_trace_backend.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "tests/util/forwarding_backend.h"

namespace flashserve::test {
namespace {

using kernels::Backend;
using kernels::DType;

uint64_t fnv1a(const void* p, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// Ops that write nothing worth a hash (kv_write stores its inputs, converted, and attention reads
// it back; scatter_rows' rows are summed next) are forwarded untraced.
class OpTraceBackend final : public ForwardingBackend {
 public:
  OpTraceBackend(std::unique_ptr<Backend> inner, std::vector<TracedOp>& trace)
      : ForwardingBackend(std::move(inner)), trace_(trace) {
    if (!is_host()) throw std::invalid_argument("op_trace_backend reads outputs in place: a host backend only");
  }

  void get_rows(const void* table, DType type, int64_t cols, const int32_t* ids, int64_t n, float* out) override {
    inner().get_rows(table, type, cols, ids, n, out);
    note("get_rows", out, n * cols);
  }
  void matmul(const float* x, int64_t tokens, const void* w, DType type, int64_t rows, int64_t cols, float* y) override {
    inner().matmul(x, tokens, w, type, rows, cols, y);
    note("matmul", y, tokens * rows);
  }
  void rmsnorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps) override {
    inner().rmsnorm(x, weight, y, rows, dim, eps);
    ++norms_;
    note("rmsnorm", y, rows * dim);
  }
  void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t rows, int64_t dim,
                   float eps) override {
    inner().add_rmsnorm(x, residual, weight, y, rows, dim, eps);
    ++norms_;
    note("add_rmsnorm (sum)", x, rows * dim);
    note("add_rmsnorm", y, rows * dim);
  }
  void rope(float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
            const kernels::RopeParams& p) override {
    inner().rope(x, positions, tokens, heads, head_dim, p);
    note("rope", x, tokens * heads * head_dim);
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    inner().swiglu(gate, up, out, n);
    note("swiglu", out, n);
  }
  void geglu(const float* gate, const float* up, float* out, int64_t n) override {
    inner().geglu(gate, up, out, n);
    note("geglu", out, n);
  }
  void add_bias(float* x, const float* bias, int64_t rows, int64_t dim) override {
    inner().add_bias(x, bias, rows, dim);
    note("add_bias", x, rows * dim);
  }
  void scale(float* x, float s, int64_t n) override {
    inner().scale(x, s, n);
    note("scale", x, n);
  }
  void attention(const float* q, const kernels::KvCacheView& kv, const kernels::AttentionBatch& batch,
                 int32_t num_heads, float scale, float* out) override {
    inner().attention(q, kv, batch, num_heads, scale, out);
    note("attention", out, int64_t(batch.query_start[batch.num_seqs]) * num_heads * kv.layout.head_dim);
  }
  void moe_route(const float* logits, int64_t tokens, int32_t experts, int32_t top_k, bool renormalize,
                 const kernels::MoeRouting& out) override {
    inner().moe_route(logits, tokens, experts, top_k, renormalize, out);
    note("moe_route", out.topk_weights, tokens * top_k);
  }
  void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim,
                         float* out) override {
    inner().weighted_sum_rows(rows, weights, n, k, dim, out);
    note("weighted_sum_rows", out, n * dim);
  }
  void sample_rows(float* logits, int32_t rows, int32_t vocab, const kernels::SamplingRow* params,
                   const kernels::TokenAdjust* adjusts, const uint32_t* masks, int32_t* tokens) override {
    inner().sample_rows(logits, rows, vocab, params, adjusts, masks, tokens);
    trace_.push_back({"sample_rows", norms_, fnv1a(tokens, size_t(rows) * 4)});
  }
  bool can_record() const override { return false; }
  std::unique_ptr<kernels::RecordedStep> record(const std::function<void()>&) override {
    throw std::logic_error("op_trace_backend records no steps");
  }

 private:
  void note(const char* op, const float* out, int64_t n) {
    trace_.push_back({op, norms_, fnv1a(out, size_t(n) * sizeof(float))});
  }

  std::vector<TracedOp>& trace_;
  int32_t norms_ = 0;
};

}  // namespace

std::string first_traced_difference(const std::vector<TracedOp>& got, const std::vector<TracedOp>& want,
                                    int32_t num_layers) {
  int32_t total_norms = 0;
  for (const TracedOp& op : want) total_norms = std::max(total_norms, op.norm_index);
  const int32_t per_layer = num_layers > 0 ? std::max(1, (total_norms - 1) / num_layers) : 1;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i].name != want[i].name) return "op " + std::to_string(i) + " is " + got[i].name + ", not " + want[i].name;
    if (got[i].hash == want[i].hash) continue;
    const int32_t norm = want[i].norm_index;
    const int32_t layer = norm == 0 ? -1 : (norm - 1) / per_layer;
    const std::string where = layer < 0 ? "the embedding" : layer >= num_layers ? "the output head" : "layer " + std::to_string(layer);
    return "op " + std::to_string(i) + " (" + want[i].name + ") in " + where + " is the first to differ";
  }
  if (got.size() != want.size()) return std::to_string(got.size()) + " ops traced, not " + std::to_string(want.size());
  return "";
}

std::unique_ptr<Backend> op_trace_backend(std::unique_ptr<Backend> inner, std::vector<TracedOp>& trace) {
  return std::make_unique<OpTraceBackend>(std::move(inner), trace);
}

}  // namespace flashserve::test
