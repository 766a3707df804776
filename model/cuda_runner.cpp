// One step = upload the flattened batch as one packed int32 array, run every layer's kernels on the
// runner's stream, copy back only the logit rows. All buffers are sized once for `capacity` rows
// and reused, so a captured decode graph finds its inputs and activations at fixed addresses.
#include "model/cuda_runner.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/swiglu.h"
#include "model/flat_batch.h"

namespace flashserve {
namespace {

namespace kc = kernels::cuda;
using kernels::DType;

// Device memory freed with its owner.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) FLASHSERVE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  DeviceMemory(DeviceMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceMemory() {
    if (ptr_) cudaFree(ptr_);
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

DeviceMemory upload(const void* host, size_t bytes) {
  DeviceMemory d(bytes);
  FLASHSERVE_CUDA_CHECK(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice));
  return d;
}

// Copies a host vector to `dst`, growing it when too small (never inside a graph: sampling runs
// after the captured step).
template <typename T>
void copy_growing(const std::vector<T>& host, DeviceMemory& dst, cudaStream_t stream) {
  const size_t bytes = host.size() * sizeof(T);
  if (dst.bytes() < bytes) dst = DeviceMemory(bytes);
  if (bytes > 0) FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), host.data(), bytes, cudaMemcpyHostToDevice, stream));
}

DeviceMemory upload(const std::vector<float>& v) { return upload(v.data(), v.size() * sizeof(float)); }

// A weight matrix in device memory, in its stored (possibly quantized) type.
struct DeviceMatrix {
  DeviceMemory data;
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
};

DeviceMatrix upload(const WeightMatrix& w) {
  return DeviceMatrix{upload(w.data, size_t(w.rows) * kernels::row_bytes(w.type, w.cols)), w.type, w.rows, w.cols};
}

struct DeviceLayer {
  DeviceMemory attn_norm, ffn_norm;
  DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

// Pinned host memory: the only kind a copy can overlap with, and the only kind a copy may read from
// without the driver staging it first.
class PinnedInts {
 public:
  PinnedInts() = default;
  explicit PinnedInts(size_t n) { FLASHSERVE_CUDA_CHECK(cudaMallocHost(&ptr_, std::max<size_t>(n, 1) * sizeof(int32_t))); }
  PinnedInts(PinnedInts&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  PinnedInts& operator=(PinnedInts&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  ~PinnedInts() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  int32_t* get() const { return ptr_; }

 private:
  int32_t* ptr_ = nullptr;
};

// Where one step's inputs sit in the packed int32 array. It depends only on the step's shape, so a
// decode graph for a bucket always reads its inputs from the same addresses.
struct InputLayout {
  InputLayout(int64_t tokens, int64_t num_logit_rows, int64_t seqs, int64_t table_stride)
      : positions(tokens),
        slots(2 * tokens),
        logit_rows(3 * tokens),
        query_start(num_logit_rows + 3 * tokens),
        context_lens(query_start + seqs + 1),
        block_tables(context_lens + seqs),
        total(block_tables + seqs * table_stride) {}
  int64_t token_ids = 0, positions, slots, logit_rows, query_start, context_lens, block_tables, total;
};

// What one enqueue of the forward pass computes.
struct StepShape {
  int32_t tokens, logit_rows, seqs;
  int32_t max_num_queries, max_context_len;  // grid bounds for attention (see kc::AttentionBatch)
  bool decode;                               // one query per sequence: the flash-decoding kernel
};

// The batch sizes decode graphs are captured for: powers of two, then max_num_seqs itself.
std::vector<int32_t> graph_buckets(int32_t max_num_seqs) {
  std::vector<int32_t> b;
  for (int32_t n = 1; n < max_num_seqs; n *= 2) b.push_back(n);
  b.push_back(max_num_seqs);
  return b;
}

void check_options(const ModelConfig& c, const CudaRunnerOptions& o) {
  if (o.kv_type != DType::F16 && o.kv_type != DType::BF16) {
    throw std::invalid_argument("the CUDA KV cache holds f16 or bf16, not " + std::string(kernels::dtype_name(o.kv_type)));
  }
  if (c.head_dim != 64 && c.head_dim != 128) {
    throw std::invalid_argument("the CUDA attention kernels support head dims 64 and 128, not " + std::to_string(c.head_dim));
  }
  if (c.num_heads / c.num_kv_heads > kc::kDecodeMaxGroup) {
    throw std::invalid_argument("the CUDA decode kernel serves at most " + std::to_string(kc::kDecodeMaxGroup) +
                                " query heads per KV head, not " + std::to_string(c.num_heads / c.num_kv_heads));
  }
  if (c.is_moe()) {
    throw std::invalid_argument("the CUDA runner does not run mixture-of-experts models yet; use --device cpu");
  }
  if (o.memory_fraction <= 0.0 || o.memory_fraction > 1.0) throw std::invalid_argument("memory fraction must be in (0, 1]");
  if (o.block_size <= 0 || o.max_num_seqs <= 0 || o.max_num_batched_tokens <= 0) {
    throw std::invalid_argument("block size, max_num_seqs and max_num_batched_tokens must be positive");
  }
}

}  // namespace

struct CudaLlamaRunner::State {
  State(const LlamaModel& model, const CudaRunnerOptions& options);
  ~State();

  void allocate_step_buffers(int32_t rows);
  void size_kv_pool();
  int32_t bucket_for(int32_t seqs) const;
  void stage(const FlatBatch& fb, const InputLayout& at);
  void stage_padded_decode(const FlatBatch& fb, int32_t bucket, const InputLayout& at);
  void enqueue(const StepShape& shape);
  void enqueue_layer(const DeviceLayer& l, int32_t li, const StepShape& shape, const InputLayout& at);
  void linear(const float* x, int64_t tokens, const DeviceMatrix& w, float* y);
  void run_decode_graph(const StepShape& shape);
  void sample_on_device(const ForwardBatch& batch, int32_t rows, ForwardOutput& out);

  const ModelConfig cfg;
  const CudaRunnerOptions opt;
  const int32_t table_stride;  // block-table row length: enough blocks for the whole context window
  cudaStream_t stream = nullptr;
  kc::MatmulContext matmul;

  DeviceMatrix token_embd, output;
  DeviceMemory output_norm, rope_freq_factors;
  std::vector<DeviceLayer> layers;

  int32_t capacity = 0;  // rows (tokens, logit rows, sequences) the step buffers hold
  DeviceMemory x, h, tmp, q, k, v, attn, gate, up, last, logits, inputs, decode_workspace;
  PinnedInts staging;

  int32_t num_blocks = 0;
  std::vector<DeviceMemory> k_cache, v_cache;  // [layer]

  DeviceMemory sampling_rows, sampling_adjusts, sampled_tokens;  // grown as batches need

  std::vector<int32_t> buckets;
  std::map<int32_t, cudaGraphExec_t> graphs;  // decode batch bucket -> captured step
};

CudaLlamaRunner::State::State(const LlamaModel& model, const CudaRunnerOptions& options)
    : cfg(model.config()), opt(options), table_stride((cfg.context_len + options.block_size - 1) / options.block_size) {
  if (kc::device_count() == 0) throw std::runtime_error("--device cuda: no CUDA device is visible to this process");
  check_options(cfg, opt);
  FLASHSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  token_embd = upload(model.token_embedding());
  output = upload(model.output_weight());
  output_norm = upload(model.output_norm());
  if (!model.rope_freq_factors().empty()) rope_freq_factors = upload(model.rope_freq_factors());
  for (const LayerWeights& w : model.layers()) {
    layers.push_back(DeviceLayer{upload(w.attn_norm), upload(w.ffn_norm), upload(w.wq), upload(w.wk), upload(w.wv),
                                 upload(w.wo), upload(w.w_gate), upload(w.w_up), upload(w.w_down)});
  }
  if (opt.cuda_graphs) buckets = graph_buckets(opt.max_num_seqs);
  allocate_step_buffers(std::max(opt.max_num_batched_tokens, opt.max_num_seqs));
  size_kv_pool();
}

CudaLlamaRunner::State::~State() {
  for (auto& [bucket, exec] : graphs) cudaGraphExecDestroy(exec);
  if (stream) cudaStreamDestroy(stream);
}

// (Re)allocates every per-step buffer for `rows` rows. Graphs captured against the old buffers
// would write to freed memory, so they go too.
void CudaLlamaRunner::State::allocate_step_buffers(int32_t rows) {
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (auto& [bucket, exec] : graphs) cudaGraphExecDestroy(exec);
  graphs.clear();
  capacity = rows;
  const size_t n = size_t(rows), f = sizeof(float);
  const size_t q_dim = size_t(cfg.num_heads) * cfg.head_dim, kv_dim = size_t(cfg.num_kv_heads) * cfg.head_dim;
  x = DeviceMemory(n * cfg.dim * f);
  h = DeviceMemory(n * cfg.dim * f);
  tmp = DeviceMemory(n * cfg.dim * f);
  q = DeviceMemory(n * q_dim * f);
  k = DeviceMemory(n * kv_dim * f);
  v = DeviceMemory(n * kv_dim * f);
  attn = DeviceMemory(n * q_dim * f);
  gate = DeviceMemory(n * cfg.ffn_dim * f);
  up = DeviceMemory(n * cfg.ffn_dim * f);
  last = DeviceMemory(n * cfg.dim * f);
  logits = DeviceMemory(n * cfg.vocab_size * f);
  const InputLayout most(rows, rows, rows, table_stride);
  inputs = DeviceMemory(size_t(most.total) * sizeof(int32_t));
  staging = PinnedInts(size_t(most.total));
  decode_workspace = DeviceMemory(kc::decode_attention_workspace_bytes(rows, cfg.num_heads, cfg.head_dim, cfg.context_len));
  const int64_t widest_in = std::max<int64_t>({cfg.dim, int64_t(q_dim), cfg.ffn_dim});
  const int64_t widest_out = std::max<int64_t>({cfg.vocab_size, cfg.ffn_dim, int64_t(q_dim), cfg.dim});
  matmul.reserve(rows, widest_in, widest_out);
}

// The KV pool gets what the weights and step buffers leave of the memory fraction (or exactly
// kv_cache_bytes): blocks are all the same size, so this fixes the number of blocks for good.
void CudaLlamaRunner::State::size_kv_pool() {
  size_t free_bytes = 0, total_bytes = 0;
  FLASHSERVE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t elem = 2;  // f16 / bf16
  const size_t block_elems = size_t(opt.block_size) * cfg.num_kv_heads * cfg.head_dim;
  const size_t bytes_per_block = 2 * elem * block_elems * size_t(cfg.num_layers);
  const double used = double(total_bytes - free_bytes);
  const double budget = opt.kv_cache_bytes > 0 ? double(opt.kv_cache_bytes) : opt.memory_fraction * double(total_bytes) - used;
  num_blocks = budget > 0 ? int32_t(std::min(budget / double(bytes_per_block), double(INT32_MAX))) : 0;
  if (num_blocks < 1) {
    throw std::runtime_error("GPU memory: weights and activations use " + std::to_string(int64_t(used) >> 20) + " MiB of " +
                             std::to_string(total_bytes >> 20) + " MiB, leaving no KV block within the memory fraction " +
                             std::to_string(opt.memory_fraction));
  }
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    k_cache.emplace_back(size_t(num_blocks) * block_elems * elem);
    v_cache.emplace_back(size_t(num_blocks) * block_elems * elem);
  }
}

int32_t CudaLlamaRunner::State::bucket_for(int32_t seqs) const {
  for (int32_t b : buckets) {
    if (b >= seqs) return b;
  }
  return 0;
}

void CudaLlamaRunner::State::stage(const FlatBatch& fb, const InputLayout& at) {
  int32_t* p = staging.get();
  std::copy(fb.token_ids.begin(), fb.token_ids.end(), p + at.token_ids);
  std::copy(fb.positions.begin(), fb.positions.end(), p + at.positions);
  std::copy(fb.slot_mapping.begin(), fb.slot_mapping.end(), p + at.slots);
  std::copy(fb.logit_rows.begin(), fb.logit_rows.end(), p + at.logit_rows);
  const int64_t seqs = int64_t(fb.attn_seqs.size());
  std::fill(p + at.block_tables, p + at.total, 0);
  for (int64_t s = 0; s < seqs; ++s) {
    const kernels::AttentionSeq& a = fb.attn_seqs[s];
    p[at.query_start + s] = a.query_start;
    p[at.context_lens + s] = a.context_len;
    const int32_t used = (a.context_len + opt.block_size - 1) / opt.block_size;
    std::copy(a.block_table, a.block_table + used, p + at.block_tables + s * table_stride);
  }
  p[at.query_start + seqs] = int32_t(fb.token_ids.size());
}

// A decode batch padded to its graph's bucket. Padding rows write no KV (slot -1) and attend to an
// empty context; their logits are computed and ignored.
void CudaLlamaRunner::State::stage_padded_decode(const FlatBatch& fb, int32_t bucket, const InputLayout& at) {
  stage(fb, at);
  int32_t* p = staging.get();
  for (int32_t r = int32_t(fb.token_ids.size()); r < bucket; ++r) {
    p[at.token_ids + r] = 0;
    p[at.positions + r] = 0;
    p[at.slots + r] = -1;
    p[at.logit_rows + r] = r;
    p[at.query_start + r] = r;
    p[at.context_lens + r] = 0;
  }
  p[at.query_start + bucket] = bucket;
}

void CudaLlamaRunner::State::linear(const float* x_in, int64_t tokens, const DeviceMatrix& w, float* y) {
  kc::matmul(matmul, x_in, tokens, w.cols, w.data.get(), w.type, w.rows, y, stream);
}

void CudaLlamaRunner::State::enqueue_layer(const DeviceLayer& l, int32_t li, const StepShape& shape,
                                           const InputLayout& at) {
  const int64_t T = shape.tokens;
  const int32_t* in = inputs.get<int32_t>();
  const kernels::KvLayout kv{opt.block_size, cfg.num_kv_heads, cfg.head_dim};
  const kernels::RopeParams rope{cfg.rope_dim, cfg.rope_theta, cfg.rope_freq_scale, rope_freq_factors.get<float>()};
  const float scale = 1.0f / std::sqrt(float(cfg.head_dim));

  // The previous layer's MLP output (in tmp) joins the residual stream as this layer's norm reads it.
  if (li == 0) {
    kc::rmsnorm(x.get<float>(), l.attn_norm.get<float>(), h.get<float>(), T, cfg.dim, cfg.rms_eps, stream);
  } else {
    kc::add_rmsnorm(x.get<float>(), tmp.get<float>(), l.attn_norm.get<float>(), h.get<float>(), T, cfg.dim, cfg.rms_eps,
                    stream);
  }
  linear(h.get<float>(), T, l.wq, q.get<float>());
  linear(h.get<float>(), T, l.wk, k.get<float>());
  linear(h.get<float>(), T, l.wv, v.get<float>());
  kc::rope(q.get<float>(), in + at.positions, T, cfg.num_heads, cfg.head_dim, rope, stream);
  kc::rope(k.get<float>(), in + at.positions, T, cfg.num_kv_heads, cfg.head_dim, rope, stream);
  kc::kv_write(kv, opt.kv_type, k_cache[li].get(), v_cache[li].get(), k.get<float>(), v.get<float>(), in + at.slots, T,
               stream);
  const kc::AttentionBatch batch{in + at.query_start, in + at.context_lens, in + at.block_tables, shape.seqs,
                                 table_stride,        shape.max_num_queries, shape.max_context_len};
  if (shape.decode) {
    kc::decode_attention(q.get<float>(), k_cache[li].get(), v_cache[li].get(), opt.kv_type, kv, batch, cfg.num_heads,
                         scale, attn.get<float>(), decode_workspace.get(), stream);
  } else {
    kc::prefill_attention(q.get<float>(), k_cache[li].get(), v_cache[li].get(), opt.kv_type, kv, batch, cfg.num_heads,
                          scale, attn.get<float>(), stream);
  }
  linear(attn.get<float>(), T, l.wo, tmp.get<float>());

  kc::add_rmsnorm(x.get<float>(), tmp.get<float>(), l.ffn_norm.get<float>(), h.get<float>(), T, cfg.dim, cfg.rms_eps,
                  stream);
  linear(h.get<float>(), T, l.w_gate, gate.get<float>());
  linear(h.get<float>(), T, l.w_up, up.get<float>());
  kc::swiglu(gate.get<float>(), up.get<float>(), gate.get<float>(), T * cfg.ffn_dim, stream);
  linear(gate.get<float>(), T, l.w_down, tmp.get<float>());
}

// The whole step on `stream`, inputs already in `inputs`. Launches only: no allocation, no sync, so
// the same call records a decode graph.
void CudaLlamaRunner::State::enqueue(const StepShape& shape) {
  const InputLayout at(shape.tokens, shape.logit_rows, shape.seqs, table_stride);
  const int32_t* in = inputs.get<int32_t>();
  kc::get_rows(token_embd.data.get(), token_embd.type, cfg.dim, in + at.token_ids, shape.tokens, x.get<float>(), stream);
  for (int32_t li = 0; li < cfg.num_layers; ++li) enqueue_layer(layers[li], li, shape, at);
  if (shape.logit_rows == 0) return;
  // Final norm over every row (cheap next to the LM head), then only the logit rows go on.
  kc::add_rmsnorm(x.get<float>(), tmp.get<float>(), output_norm.get<float>(), h.get<float>(), shape.tokens, cfg.dim,
                  cfg.rms_eps, stream);
  kc::get_rows(h.get<float>(), DType::F32, cfg.dim, in + at.logit_rows, shape.logit_rows, last.get<float>(), stream);
  linear(last.get<float>(), shape.logit_rows, output, logits.get<float>());
}

// First use of a bucket runs the step eagerly (its results are this step's; it also loads kernels
// and lets cuBLASLt choose algorithms outside the capture), then records it for later steps.
void CudaLlamaRunner::State::run_decode_graph(const StepShape& shape) {
  auto it = graphs.find(shape.seqs);
  if (it != graphs.end()) {
    FLASHSERVE_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
    return;
  }
  enqueue(shape);
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  FLASHSERVE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue(shape);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  FLASHSERVE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  FLASHSERVE_CUDA_CHECK(err);
  graphs.emplace(shape.seqs, exec);
}

// Picks the tokens of the sequences that asked for it from the logits still on the device. Rows of
// other sequences are sampled greedily too (one launch for all rows), after their logits went to
// the host, and the result is dropped.
void CudaLlamaRunner::State::sample_on_device(const ForwardBatch& batch, int32_t rows, ForwardOutput& out) {
  std::vector<kernels::SamplingRow> params(rows);
  std::vector<kernels::TokenAdjust> adjusts;
  for (kernels::SamplingRow& r : params) r.temperature = 0.0f;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (batch.seqs[i].sample < 0 || out.num_rows[i] != 1) continue;
    const DeviceSampling& d = batch.samples.at(batch.seqs[i].sample);
    kernels::SamplingRow& r = params[out.first_row[i]];
    r = d.row;
    r.adjust_begin = int32_t(adjusts.size()) + d.row.adjust_begin;
    r.adjust_end = int32_t(adjusts.size()) + d.row.adjust_end;
    adjusts.insert(adjusts.end(), d.adjusts.begin(), d.adjusts.end());
  }
  copy_growing(params, sampling_rows, stream);
  copy_growing(adjusts, sampling_adjusts, stream);
  if (sampled_tokens.bytes() < size_t(rows) * sizeof(int32_t)) sampled_tokens = DeviceMemory(size_t(rows) * sizeof(int32_t));
  kc::sample_rows(logits.get<float>(), rows, cfg.vocab_size, sampling_rows.get<kernels::SamplingRow>(),
                  sampling_adjusts.get<kernels::TokenAdjust>(), sampled_tokens.get<int32_t>(), stream);
  std::vector<int32_t> tokens(rows);
  FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(tokens.data(), sampled_tokens.get(), tokens.size() * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost, stream));
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.sampled.assign(batch.seqs.size(), -1);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (batch.seqs[i].sample >= 0 && out.num_rows[i] == 1) out.sampled[i] = tokens[out.first_row[i]];
  }
}

CudaLlamaRunner::CudaLlamaRunner(const LlamaModel& model, const CudaRunnerOptions& options)
    : s_(std::make_unique<State>(model, options)) {}

CudaLlamaRunner::~CudaLlamaRunner() = default;

int32_t CudaLlamaRunner::vocab_size() const { return s_->cfg.vocab_size; }
int32_t CudaLlamaRunner::context_len() const { return s_->cfg.context_len; }
int32_t CudaLlamaRunner::num_kv_blocks() const { return s_->num_blocks; }
int32_t CudaLlamaRunner::block_size() const { return s_->opt.block_size; }

ForwardOutput CudaLlamaRunner::forward(const ForwardBatch& batch) {
  State& s = *s_;
  ForwardOutput out;
  const FlatBatch fb = flatten(batch, s.cfg, s.opt.block_size, s.num_blocks, out);
  const int32_t tokens = int32_t(fb.token_ids.size()), seqs = int32_t(fb.attn_seqs.size());
  const int32_t rows = int32_t(fb.logit_rows.size());
  const bool decode = tokens == seqs;
  const int32_t bucket = decode && rows == seqs ? s.bucket_for(seqs) : 0;

  if (bucket > 0) {
    if (bucket > s.capacity) s.allocate_step_buffers(bucket);
    // Grid bounds are the model's limits, not this step's, so one graph serves every step.
    const StepShape shape{bucket, bucket, bucket, 1, s.cfg.context_len, true};
    const InputLayout at(bucket, bucket, bucket, s.table_stride);
    s.stage_padded_decode(fb, bucket, at);
    FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(s.inputs.get(), s.staging.get(), size_t(at.total) * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, s.stream));
    s.run_decode_graph(shape);
  } else {
    if (tokens > s.capacity) s.allocate_step_buffers(tokens);
    int32_t max_queries = 0, max_context = 0;
    for (const kernels::AttentionSeq& a : fb.attn_seqs) {
      max_queries = std::max(max_queries, a.num_queries);
      max_context = std::max(max_context, a.context_len);
    }
    const StepShape shape{tokens, rows, seqs, max_queries, max_context, decode};
    const InputLayout at(tokens, rows, seqs, s.table_stride);
    s.stage(fb, at);
    FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(s.inputs.get(), s.staging.get(), size_t(at.total) * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, s.stream));
    s.enqueue(shape);
  }
  bool any_device_sampled = false, any_host_row = false;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const bool on_device = batch.seqs[i].sample >= 0 && out.num_rows[i] == 1;
    any_device_sampled |= on_device;
    any_host_row |= !on_device && out.num_rows[i] > 0;
  }
  if (any_host_row) {
    out.logits.resize(size_t(rows) * s.cfg.vocab_size);
    FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(out.logits.data(), s.logits.get(), out.logits.size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, s.stream));
  }
  if (any_device_sampled) {
    s.sample_on_device(batch, rows, out);  // after the copy: sampling overwrites the logits
  } else {
    out.sampled.assign(batch.seqs.size(), -1);
  }
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return out;
}

}  // namespace flashserve
