// The one contract a forward pass is written against. A backend owns memory in its own address
// space (host memory on the CPU, device memory on a GPU) and runs ops on it in the order they are
// called; what an op wrote is visible to later ops at once, and to the host after synchronize().
// Every op means the same on every backend -- tests/kernels/test_backend_ops.cpp runs each one on
// every backend present against an f64 reference -- so a model's layer sequence is written once
// (model/llama_forward.cpp) and a new backend is a new implementation of this class, nothing more.
// Kernels know nothing of requests or models: the runner in model/ decides what to call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include "kernels/cpu_isa.h"
#include "kernels/dtype.h"
#include "kernels/moe_routing.h"
#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"

namespace flashserve::kernels {

// The ops, each once: its enumerator, its method (op_name gives the name), the method's parameters
// and the same names as arguments (so a backend that wraps another forwards every op without
// listing them), and what supports() is asked about when the method is called -- the element type
// and shape facts (OpShape) it depends on, F32 and none where empty. Backend's pure virtuals, the
// recording backend that finds what a model needs and the tests' forwarding backend are all made
// from this list; the contract of each op is in its header.
#define FLASHSERVE_BACKEND_OPS(X)                                                                                    \
  X(GetRows, get_rows, (const void* table, DType type, int64_t cols, const int32_t* ids, int64_t n, float* out),      \
    (table, type, cols, ids, n, out), (type))                                                                        \
  /* y[t][o] = sum_k x[t][k] W[o][k]; W is `rows` rows of `cols` elements of `type` (map_matrix's pointer) */       \
  X(Matmul, matmul, (const float* x, int64_t tokens, const void* w, DType type, int64_t rows, int64_t cols, float* y), \
    (x, tokens, w, type, rows, cols, y), (type))                                                                     \
  X(RmsNorm, rmsnorm, (const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps),          \
    (x, weight, y, rows, dim, eps), ())                                                                              \
  X(AddRmsNorm, add_rmsnorm,                                                                                         \
    (float* x, const float* residual, const float* weight, float* y, int64_t rows, int64_t dim, float eps),          \
    (x, residual, weight, y, rows, dim, eps), ())                                                                    \
  X(Rope, rope, (float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,                \
                 const RopeParams& p),                                                                               \
    (x, positions, tokens, heads, head_dim, p), ())                                                                  \
  X(SwiGLU, swiglu, (const float* gate, const float* up, float* out, int64_t n), (gate, up, out, n), ())              \
  X(GeGLU, geglu, (const float* gate, const float* up, float* out, int64_t n), (gate, up, out, n), ())                \
  X(AddBias, add_bias, (float* x, const float* bias, int64_t rows, int64_t dim), (x, bias, rows, dim), ())            \
  X(Scale, scale, (float* x, float s, int64_t n), (x, s, n), ())                                                     \
  X(KvWrite, kv_write, (const KvCacheView& kv, const float* k, const float* v, const int32_t* slots, int64_t tokens), \
    (kv, k, v, slots, tokens), (kv.type, {.head_dim = kv.layout.head_dim}))                                          \
  X(Attention, attention,                                                                                            \
    (const float* q, const KvCacheView& kv, const AttentionBatch& batch, int32_t num_heads, float scale, float* out), \
    (q, kv, batch, num_heads, scale, out),                                                                           \
    (kv.type, {.head_dim = kv.layout.head_dim,                                                                       \
               .group = num_heads / (kv.layout.num_kv_heads > 0 ? kv.layout.num_kv_heads : 1),                       \
               .window = batch.window}))                                                                             \
  X(MoeRoute, moe_route,                                                                                             \
    (const float* logits, int64_t tokens, int32_t experts, int32_t top_k, bool renormalize, const MoeRouting& out),  \
    (logits, tokens, experts, top_k, renormalize, out), (DType::F32, {.experts = experts, .top_k = top_k}))          \
  X(ScatterRows, scatter_rows, (const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst),            \
    (src, n, dim, ids, dst), ())                                                                                     \
  X(WeightedSumRows, weighted_sum_rows,                                                                              \
    (const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out),                        \
    (rows, weights, n, k, dim, out), ())                                                                             \
  X(SampleRows, sample_rows,                                                                                         \
    (float* logits, int32_t rows, int32_t vocab, const SamplingRow* params, const TokenAdjust* adjusts,              \
     const uint32_t* masks, int32_t* tokens),                                                                        \
    (logits, rows, vocab, params, adjusts, masks, tokens), ())

// The list's parenthesized columns, opened.
#define FLASHSERVE_OPEN(...) __VA_ARGS__

enum class Op {
#define FLASHSERVE_OP_ENUMERATOR(op, name, params, args, use) op,
  FLASHSERVE_BACKEND_OPS(FLASHSERVE_OP_ENUMERATOR)
#undef FLASHSERVE_OP_ENUMERATOR
};
const char* op_name(Op op);

// The shape facts support can depend on beyond the element type; zero where they do not apply.
// Callers name the fields (designated initializers): positional ones silently shifted when window
// was added, and the GPU then refused every MoE model.
struct OpShape {
  int64_t head_dim = 0;
  int64_t group = 0;  // query heads per KV head
  int32_t window = 0;  // sliding-window attention: positions a query sees (0: all)
  int32_t experts = 0;
  int32_t top_k = 0;
  bool operator==(const OpShape& o) const {  // spelled out: the .cu files are C++17
    return head_dim == o.head_dim && group == o.group && window == o.window && experts == o.experts && top_k == o.top_k;
  }
};

// One layer's K and V pools, [num_blocks][block_size][num_kv_heads][head_dim] of `type` each.
struct KvCacheView {
  void* k = nullptr;
  void* v = nullptr;
  DType type = DType::F32;
  KvLayout layout{};
};

// Sizes no op may exceed in a step, so a backend can set up its scratch once: ops then allocate
// nothing, which a recorded step (a CUDA graph) requires.
struct StepLimits {
  int64_t max_tokens = 0;    // rows of any activation
  int64_t max_k = 0;         // widest matmul input
  int64_t max_n_out = 0;     // widest matmul output
  int32_t num_heads = 0;
  int32_t head_dim = 0;
  int32_t max_context_len = 0;
  int32_t experts = 0;       // 0 for a dense model
  int32_t top_k = 0;
};

// A step recorded once and replayed with whatever its buffers hold at replay time.
class RecordedStep {
 public:
  virtual ~RecordedStep() = default;
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu (AVX-512, 16 threads)", "cuda (NVIDIA H100 80GB HBM3)": for logs and benchmark headers.
  virtual std::string name() const = 0;
  virtual bool is_host() const = 0;  // its memory is host memory (no copies needed to read it)
  // Whether `op` runs on `type` with this shape. A runner asks for every op a model needs before it
  // loads anything, so an unsupported model fails at start with the op named, not mid-request.
  virtual bool supports(Op op, DType type, const OpShape& shape = {}) const = 0;
  // Bytes this process may still fill, and the total (device memory; host memory on the CPU).
  virtual void memory_info(size_t& free_bytes, size_t& total_bytes) const = 0;

  // Memory. allocate() leaves the bytes uninitialised (pages of a large host KV pool are committed
  // only when written). copy_in/copy_out are queued with the ops; host buffers passed to them must
  // stay valid until synchronize().
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
  virtual void copy_in(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_out(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Weights, read from the host image (a memory-mapped file) for as long as the backend runs: the
  // CPU uses the image in place, a GPU uploads it. The returned pointer is this backend's.
  virtual const void* map_weights(const void* host, size_t bytes) = 0;
  // A weight matrix read only by matmul (`rows` rows of `cols` elements of `type`), mapped as
  // map_weights does unless the backend keeps matmul weights in a layout of its own: the CPU with
  // 8-bit activations packs the rows of most quantized formats sixteen at a time (kernels::pack_rows_for_q8), a
  // copy that lives as long as the backend. Pass the pointer it returns to matmul and nothing else.
  virtual const void* map_matrix(const void* host, DType type, int64_t rows, int64_t cols) {
    return map_weights(host, size_t(rows) * row_bytes(type, cols));
  }

  virtual void reserve(const StepLimits& limits) = 0;

  // The ops (FLASHSERVE_BACKEND_OPS). Pointers are this backend's memory; shapes as the op headers
  // describe.
#define FLASHSERVE_OP_METHOD(op, name, params, args, use) virtual void name params = 0;
  FLASHSERVE_BACKEND_OPS(FLASHSERVE_OP_METHOD)
#undef FLASHSERVE_OP_METHOD

  // Whether record() works here. The CPU cannot (its ops run as they are called, so there would be
  // nothing to gain); a GPU records a step as a graph and replays it with one launch.
  virtual bool can_record() const = 0;
  // Runs `enqueue` (its results are this step's), then records what it launches for replay.
  virtual std::unique_ptr<RecordedStep> record(const std::function<void()>& enqueue) = 0;
};

// Memory of one backend, freed with its owner.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& b, size_t bytes) : backend_(&b), ptr_(bytes ? b.allocate(bytes) : nullptr), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept { swap(o); return *this; }
  ~Buffer() { if (ptr_) backend_->deallocate(ptr_); }

  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(backend_, o.backend_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
  }
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// q8_activations: matmuls over quantized weights quantize their activations to 8 bits and use
// integer dots (kernels::matmul_q8); otherwise every matmul keeps f32 activations (the exact path).
// isa: the compiled copy of the ops it runs (kernels/cpu_isa.h), cpu_isa() when absent; one this CPU
// cannot run throws std::invalid_argument.
std::unique_ptr<Backend> make_cpu_backend(bool q8_activations = false, std::optional<CpuIsa> isa = std::nullopt);
// CUDA devices usable by this process: 0 in a build without CUDA, without a driver or a GPU.
int cuda_device_count();
// Device 0. Throws std::runtime_error when cuda_device_count() is 0 (naming why).
// batch_invariant: every row's result is independent of what else is in the step (see
// docs/cuda.md), at the price of the GEMM and flash-decoding kernels; the CPU always is.
std::unique_ptr<Backend> make_cuda_backend(bool batch_invariant = false);

}  // namespace flashserve::kernels
