// The runner's insides, shared by llama_runner.cpp (setup, staging, sampling) and
// llama_forward.cpp (the layer sequence). Not for other users.
#pragma once
#include <map>
#include <memory>
#include <vector>
#include "kernels/backend.h"
#include "model/flat_batch.h"
#include "model/kv_groups.h"
#include "model/llama_runner.h"
#include "model/resident_tables.h"

namespace flashserve {

// A weight matrix in the backend's memory, in its stored (possibly quantized) type.
struct BackendMatrix {
  const void* data = nullptr;
  kernels::DType type = kernels::DType::F32;
  int64_t rows = 0, cols = 0;
};

// `count` matrices of [rows][cols] back to back: a mixture's experts.
struct BackendExperts {
  const void* data = nullptr;
  kernels::DType type = kernels::DType::F32;
  int64_t rows = 0, cols = 0;
  BackendMatrix expert(int64_t e) const;
};

using BackendLayer = LayerOf<const float*, BackendMatrix, BackendExperts>;

// Where one step's inputs sit in the packed int32 array. It depends only on the step's shape, so a
// recorded decode step for a bucket always reads its inputs from the same addresses. Slots come
// once per KV group; the block tables stay on the backend (ResidentTables), a sequence's row named
// in table_rows.
struct InputLayout {
  InputLayout(int64_t tokens, int64_t num_logit_rows, int64_t seqs, int64_t groups)
      : positions(tokens),
        slots(2 * tokens),
        logit_rows((2 + groups) * tokens),
        query_start(logit_rows + num_logit_rows),
        context_lens(query_start + seqs + 1),
        table_rows(context_lens + seqs),
        total(table_rows + seqs),
        slots_per_group(tokens) {}
  int64_t token_ids = 0, positions, slots, logit_rows, query_start, context_lens, table_rows, total;
  int64_t slots_per_group;
  int64_t slots_of(int32_t group) const { return slots + group * slots_per_group; }
};

// What one enqueue of the forward pass computes.
struct StepShape {
  int32_t tokens, logit_rows, seqs;
  int32_t max_num_queries, max_context_len;  // attention's bounds (see kernels::AttentionBatch)
  bool hidden = false;  // the final norm runs over every row even without logit rows (embeddings)
};

struct LlamaRunner::State {
  State(const Model& model, std::unique_ptr<kernels::Backend> backend, const RunnerConfig& config);

  void map_weights();
  void allocate_step_buffers(int32_t rows);
  void allocate_kv_pool(int32_t blocks);
  int32_t bucket_for(int32_t seqs) const;
  void stage(const FlatBatch& fb, const std::vector<int32_t>& table_rows, const InputLayout& at);
  void stage_padded_decode(const FlatBatch& fb, const std::vector<int32_t>& table_rows, int32_t bucket,
                           const InputLayout& at);
  void run_recorded(const StepShape& shape);
  void sample(const ForwardBatch& batch, int32_t rows, ForwardOutput& out);
  void copy_hidden(const ForwardBatch& batch, const FlatBatch& fb, ForwardOutput& out);

  // llama_forward.cpp
  void enqueue(const StepShape& shape);
  void enqueue_layer(int32_t li, const StepShape& shape, const InputLayout& at);
  void dense_ffn(const BackendLayer& l, int64_t tokens);
  void moe_ffn(const BackendLayer& l, int64_t tokens);
  void scale_branch(int64_t tokens);
  void linear(const float* x, int64_t tokens, const BackendMatrix& w, float* y);

  const Model& model;
  const ModelConfig& cfg;
  const RunnerConfig opt;
  std::unique_ptr<kernels::Backend> be;
  const KvGroups groups;

  BackendMatrix token_embd, output;
  const float* output_norm = nullptr;
  const float* rope_freq_factors = nullptr;
  std::vector<BackendLayer> layers;

  int32_t capacity = 0;  // rows (tokens, logit rows, sequences) the step buffers hold
  kernels::Buffer x, h, tmp, q, k, v, attn, gate, up, last, logits, inputs;
  std::vector<int32_t> staging;

  // Mixture-of-experts scratch (empty for a dense model): the router's output, its routing, each
  // expert's gathered inputs and outputs, and every assignment's output before the weighted sum.
  kernels::Buffer router_logits, topk_ids, topk_weights, expert_offsets, sorted, assignment_tokens, expert_in,
      expert_out, per_choice;
  std::vector<int32_t> host_offsets, host_sorted, host_tokens;

  int32_t num_blocks = 0;
  std::vector<kernels::Buffer> k_cache, v_cache;  // [place in a KV group]: a block holds one row of each
  KeptTables kept;  // the running sequences' block tables, on the host
  // The same on the backend, rows as long as the context window's blocks.
  ResidentTables tables;

  kernels::Buffer sampling_rows, sampling_adjusts, sampling_masks, sampled_tokens;  // grown as batches need
  std::vector<kernels::SamplingRow> host_rows;
  std::vector<kernels::TokenAdjust> host_adjusts;
  std::vector<uint32_t> host_masks;
  std::vector<int32_t> host_tokens_out;

  std::vector<int32_t> buckets;  // decode batch sizes steps are recorded for; empty: none
  std::map<int32_t, std::unique_ptr<kernels::RecordedStep>> recorded;
};

}  // namespace flashserve
