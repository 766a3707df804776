// The CUDA backend: device memory, every op queued on one stream, and steps recorded as CUDA graphs.
// Scratch the ops need (cuBLASLt's expanded weights, decode-attention partials, MoE routing) is
// sized once by reserve(), so a recorded step allocates nothing.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/elementwise.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_decode.cuh"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"

namespace flashserve::kernels {
namespace {

// Weight types the gather and matmul kernels decode: the float types and every block type of
// kernels/dtype.h, each with its decoder (kernels/cuda/quant_decode.cuh).
bool stored_type(DType t) { return cuda::block_layout(t).elems != 0; }

class CudaGraphStep final : public RecordedStep {
 public:
  CudaGraphStep(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraphStep() override { cudaGraphExecDestroy(exec_); }
  void replay() override { FLASHSERVE_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(bool batch_invariant) : batch_invariant_(batch_invariant), matmul_(batch_invariant) {
    cudaDeviceProp prop{};
    FLASHSERVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    device_name_ = prop.name;
    FLASHSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override {
    for (const Upload& u : uploads_) cudaFree(u.device);
    if (decode_workspace_) cudaFree(decode_workspace_);
    if (moe_workspace_) cudaFree(moe_workspace_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda (" + device_name_ + ")"; }
  bool is_host() const override { return false; }

  bool supports(Op op, DType type, const OpShape& s) const override {
    switch (op) {
      case Op::GetRows:
      case Op::Matmul: return stored_type(type);
      case Op::KvWrite: return cuda::kv_cache_type_supported(type);
      case Op::Attention:
        return cuda::kv_cache_type_supported(type) && cuda::attention_head_dim_supported(s.head_dim) &&
               s.group >= 1 && s.group <= cuda::kDecodeMaxGroup && s.window >= 0;
      case Op::MoeRoute:
        return type == DType::F32 && s.experts >= 1 && s.experts <= kMoeMaxExperts && s.top_k >= 1 &&
               s.top_k <= kMoeMaxTopK;
      default: return type == DType::F32;
    }
  }

  void memory_info(size_t& free_bytes, size_t& total_bytes) const override {
    FLASHSERVE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    FLASHSERVE_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void deallocate(void* p) override { cudaFree(p); }
  void copy_in(void* dst, const void* src, size_t bytes) override {
    FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void copy_out(void* dst, const void* src, size_t bytes) override {
    FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  void synchronize() override { FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // A range mapped twice (an output head tied to the embedding table) is uploaded once.
  const void* map_weights(const void* host, size_t bytes) override {
    for (const Upload& u : uploads_) {
      if (u.host == host && u.bytes == bytes) return u.device;
    }
    void* d = allocate(bytes);
    uploads_.push_back({host, bytes, d});
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
  }

  void reserve(const StepLimits& l) override {
    synchronize();
    matmul_.reserve(l.max_tokens, l.max_k, l.max_n_out);
    // A batch-invariant backend never runs flash-decoding.
    if (!batch_invariant_)
      grow(decode_workspace_, decode_workspace_bytes_,
           cuda::decode_attention_workspace_bytes(int32_t(l.max_tokens), l.num_heads, l.head_dim, l.max_context_len));
    if (l.experts > 0)
      grow(moe_workspace_, moe_workspace_bytes_, cuda::moe_route_workspace_bytes(l.max_tokens, l.experts, l.top_k));
  }

  void get_rows(const void* table, DType type, int64_t cols, const int32_t* ids, int64_t n, float* out) override {
    cuda::get_rows(table, type, cols, ids, n, out, stream_);
  }
  void matmul(const float* x, int64_t tokens, const void* w, DType type, int64_t rows, int64_t cols,
              float* y) override {
    cuda::matmul(matmul_, x, tokens, cols, w, type, rows, y, stream_);
  }
  void rmsnorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps) override {
    cuda::rmsnorm(x, weight, y, rows, dim, eps, stream_);
  }
  void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t rows, int64_t dim,
                   float eps) override {
    cuda::add_rmsnorm(x, residual, weight, y, rows, dim, eps, stream_);
  }
  void rope(float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
            const RopeParams& p) override {
    cuda::rope(x, positions, tokens, heads, head_dim, p, stream_);
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    cuda::swiglu(gate, up, out, n, stream_);
  }
  void geglu(const float* gate, const float* up, float* out, int64_t n) override {
    cuda::geglu(gate, up, out, n, stream_);
  }
  void add_bias(float* x, const float* bias, int64_t rows, int64_t dim) override {
    cuda::add_bias(x, bias, rows, dim, stream_);
  }
  void scale(float* x, float s, int64_t n) override { cuda::scale(x, s, n, stream_); }
  void kv_write(const KvCacheView& kv, const float* k, const float* v, const int32_t* slots, int64_t tokens) override {
    cuda::kv_write(kv.layout, kv.type, kv.k, kv.v, k, v, slots, tokens, stream_);
  }
  // One query per sequence is decoding: the flash-decoding kernel splits long contexts across
  // blocks; anything else goes to the prefill kernel. A batch-invariant backend sends decoding there
  // too: its key tiles start at position 0 whatever the batch, so a row's bits depend only on its
  // own query and context (without a sliding window, whose first tile follows the chunk's start).
  void attention(const float* q, const KvCacheView& kv, const AttentionBatch& b, int32_t num_heads, float scale,
                 float* out) override {
    if (b.max_num_queries == 1 && !batch_invariant_) {
      const size_t need = cuda::decode_attention_workspace_bytes(b.num_seqs, num_heads, kv.layout.head_dim,
                                                                 b.max_context_len);
      if (need > decode_workspace_bytes_)
        throw std::logic_error("cuda attention: a decode batch beyond what reserve() was told");
      cuda::decode_attention(q, kv.k, kv.v, kv.type, kv.layout, b, num_heads, scale, out, decode_workspace_, stream_);
    } else {
      cuda::prefill_attention(q, kv.k, kv.v, kv.type, kv.layout, b, num_heads, scale, out, stream_);
    }
  }
  void moe_route(const float* logits, int64_t tokens, int32_t experts, int32_t top_k, bool renormalize,
                 const MoeRouting& out) override {
    if (cuda::moe_route_workspace_bytes(tokens, experts, top_k) > moe_workspace_bytes_)
      throw std::logic_error("cuda moe_route: a batch beyond what reserve() was told");
    cuda::moe_route(logits, tokens, experts, top_k, renormalize, out, moe_workspace_, stream_);
  }
  void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst) override {
    cuda::scatter_rows(src, n, dim, ids, dst, stream_);
  }
  void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim,
                         float* out) override {
    cuda::weighted_sum_rows(rows, weights, n, k, dim, out, stream_);
  }
  void sample_rows(float* logits, int32_t rows, int32_t vocab, const SamplingRow* params, const TokenAdjust* adjusts,
                   const uint32_t* masks, int32_t* tokens) override {
    cuda::sample_rows(logits, rows, vocab, params, adjusts, masks, tokens, stream_);
  }

  bool can_record() const override { return true; }
  // The first run is eager (it also loads kernels and lets cuBLASLt pick algorithms outside the
  // capture); the second is captured.
  std::unique_ptr<RecordedStep> record(const std::function<void()>& enqueue) override {
    enqueue();
    synchronize();
    cudaGraph_t graph = nullptr;
    FLASHSERVE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    FLASHSERVE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    FLASHSERVE_CUDA_CHECK(err);
    return std::make_unique<CudaGraphStep>(exec, stream_);
  }

 private:
  void grow(void*& p, size_t& have, size_t need) {
    if (need <= have) return;
    if (p) cudaFree(p);
    p = nullptr;
    have = 0;
    FLASHSERVE_CUDA_CHECK(cudaMalloc(&p, need));
    have = need;
  }

  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  const bool batch_invariant_;
  cuda::MatmulContext matmul_;
  struct Upload {
    const void* host;
    size_t bytes;
    void* device;
  };
  std::vector<Upload> uploads_;  // map_weights' copies
  void* decode_workspace_ = nullptr;
  size_t decode_workspace_bytes_ = 0;
  void* moe_workspace_ = nullptr;
  size_t moe_workspace_bytes_ = 0;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  // No driver or no GPU is an answer here (0), not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(bool batch_invariant) {
  if (cuda_device_count() == 0) throw std::runtime_error("--device cuda: no CUDA device is visible to this process");
  return std::make_unique<CudaBackend>(batch_invariant);
}

}  // namespace flashserve::kernels
