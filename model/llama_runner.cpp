// One step = check and flatten the batch, bring the block tables kept on the backend up to date
// (ResidentTables), stage the other inputs as one packed int32 array, run the layer sequence (or
// replay a recorded decode step), then sample on the backend. Buffers are sized once for
// `capacity` rows and reused, so a recorded step finds its inputs and activations at fixed
// addresses.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/llama_runner_state.h"

namespace flashserve {
namespace {

using kernels::DType;

// The batch sizes decode steps are recorded for: powers of two, then max_num_seqs itself.
std::vector<int32_t> record_buckets(int32_t max_num_seqs) {
  std::vector<int32_t> b;
  for (int32_t n = 1; n < max_num_seqs; n *= 2) b.push_back(n);
  b.push_back(max_num_seqs);
  return b;
}

// One token's K (or V) for one KV head: head_dim values of the cache type (q8_0: in blocks of 32).
size_t kv_head_bytes(DType t, int32_t head_dim) { return kernels::row_bytes(t, head_dim); }

// The backend, once it can run every op this model's steps call.
std::unique_ptr<kernels::Backend> checked(std::unique_ptr<kernels::Backend> be, const Model& model,
                                          const RunnerConfig& config) {
  for (const kernels::OpUse& use : LlamaRunner::ops_needed(model, config)) {
    if (!be->supports(use.op, use.type, use.shape)) {
      throw std::invalid_argument("the " + be->name() + " backend cannot run " + kernels::describe(use) +
                                  ", which this model needs");
    }
  }
  return be;
}

}  // namespace

LlamaRunner::State::State(const Model& m, std::unique_ptr<kernels::Backend> backend, const RunnerConfig& config)
    : model(m),
      cfg(m.config()),
      opt(config),
      be(std::move(backend)),
      groups(kv_groups(cfg)),
      tables(*be, groups.num_groups(), (cfg.context_len + config.block_size - 1) / config.block_size,
             config.max_num_seqs) {
  if (opt.block_size <= 0 || opt.max_num_seqs <= 0 || opt.max_num_batched_tokens <= 0) {
    throw std::invalid_argument("block size, max_num_seqs and max_num_batched_tokens must be positive");
  }
  map_weights();
  if (opt.record_steps && be->can_record() && !cfg.is_moe()) buckets = record_buckets(opt.max_num_seqs);
  allocate_step_buffers(std::max(opt.max_num_batched_tokens, opt.max_num_seqs));
}

namespace {

// A weight's form on the backend, one overload per kind; unbound (absent) ones stay empty.
BackendMatrix on_backend(kernels::Backend& be, const WeightMatrix& w) {
  if (!w.data) return {};
  return BackendMatrix{be.map_matrix(w.data, w.type, w.rows, w.cols), w.type, w.rows, w.cols};
}

BackendExperts on_backend(kernels::Backend& be, const StackedWeights& w) {
  if (!w.data) return {};
  const size_t bytes = size_t(w.count) * size_t(w.rows) * kernels::row_bytes(w.type, w.cols);
  return BackendExperts{be.map_weights(w.data, bytes), w.type, w.rows, w.cols};
}

const float* on_backend(kernels::Backend& be, const std::vector<float>& v) {
  return v.empty() ? nullptr : static_cast<const float*>(be.map_weights(v.data(), v.size() * sizeof(float)));
}

}  // namespace

void LlamaRunner::State::map_weights() {
  const WeightMatrix& embd = model.token_embedding();
  token_embd = BackendMatrix{be->map_weights(embd.data, size_t(embd.rows) * kernels::row_bytes(embd.type, embd.cols)),
                             embd.type, embd.rows, embd.cols};
  output = on_backend(*be, model.output_weight());  // tied to the embedding or not: a backend maps one image once
  output_norm = on_backend(*be, model.output_norm());
  rope_freq_factors = on_backend(*be, model.rope_freq_factors());
  for (const LayerWeights& w : model.layers()) {
    for_each_weight(w, layers.emplace_back(), [&](const auto& from, auto& to) { to = on_backend(*be, from); });
  }
}

// (Re)allocates every per-step buffer for `rows` rows. Steps recorded against the old buffers
// would write to freed memory, so they go too.
void LlamaRunner::State::allocate_step_buffers(int32_t rows) {
  be->synchronize();
  recorded.clear();
  capacity = rows;
  kernels::Backend& b = *be;
  const size_t n = size_t(rows), f = sizeof(float);
  const size_t q_dim = size_t(cfg.num_heads) * cfg.head_dim, kv_dim = size_t(cfg.num_kv_heads) * cfg.head_dim;
  x = {b, n * cfg.dim * f};
  h = {b, n * cfg.dim * f};
  tmp = {b, n * cfg.dim * f};
  q = {b, n * q_dim * f};
  k = {b, n * kv_dim * f};
  v = {b, n * kv_dim * f};
  attn = {b, n * q_dim * f};
  gate = {b, n * cfg.ffn_dim * f};
  up = {b, n * cfg.ffn_dim * f};
  last = {b, n * cfg.dim * f};
  logits = {b, n * cfg.vocab_size * f};
  const InputLayout most(rows, rows, rows, groups.num_groups());
  inputs = {b, size_t(most.total) * sizeof(int32_t)};
  staging.assign(size_t(most.total), 0);
  if (cfg.is_moe()) {
    const size_t assignments = n * size_t(cfg.num_experts_used), experts = size_t(cfg.num_experts);
    router_logits = {b, n * experts * f};
    topk_ids = {b, assignments * sizeof(int32_t)};
    topk_weights = {b, assignments * f};
    expert_offsets = {b, (experts + 1) * sizeof(int32_t)};
    sorted = {b, assignments * sizeof(int32_t)};
    assignment_tokens = {b, assignments * sizeof(int32_t)};
    expert_in = {b, n * cfg.dim * f};
    expert_out = {b, n * cfg.dim * f};
    per_choice = {b, assignments * cfg.dim * f};
    host_offsets.assign(experts + 1, 0);
    host_sorted.assign(assignments, 0);
    host_tokens.assign(assignments, 0);
  }
  const int64_t widest_in = std::max<int64_t>({cfg.dim, int64_t(q_dim), cfg.ffn_dim});
  const int64_t widest_out = std::max<int64_t>({cfg.vocab_size, cfg.ffn_dim, int64_t(q_dim), cfg.dim, cfg.num_experts});
  b.reserve({rows, widest_in, widest_out, cfg.num_heads, cfg.head_dim, cfg.context_len, cfg.num_experts,
             cfg.num_experts_used});
}

void LlamaRunner::State::allocate_kv_pool(int32_t blocks) {
  if (blocks < 1) throw std::runtime_error("the KV cache budget holds no block");
  num_blocks = blocks;
  const size_t bytes = size_t(blocks) * opt.block_size * cfg.num_kv_heads * kv_head_bytes(opt.kv_type, cfg.head_dim);
  for (int32_t l = 0; l < groups.layers_per_group; ++l) {
    k_cache.emplace_back(*be, bytes);
    v_cache.emplace_back(*be, bytes);
  }
}

int32_t LlamaRunner::State::bucket_for(int32_t seqs) const {
  for (int32_t b : buckets) {
    if (b >= seqs) return b;
  }
  return 0;
}

void LlamaRunner::State::stage(const FlatBatch& fb, const std::vector<int32_t>& table_rows, const InputLayout& at) {
  int32_t* p = staging.data();
  std::copy(fb.token_ids.begin(), fb.token_ids.end(), p + at.token_ids);
  std::copy(fb.positions.begin(), fb.positions.end(), p + at.positions);
  const size_t tokens = fb.token_ids.size();
  for (int32_t g = 0; g < groups.num_groups(); ++g) {
    const auto slots = fb.slot_mapping.begin() + ptrdiff_t(g * tokens);
    std::copy(slots, slots + ptrdiff_t(tokens), p + at.slots_of(g));
  }
  std::copy(fb.logit_rows.begin(), fb.logit_rows.end(), p + at.logit_rows);
  std::copy(table_rows.begin(), table_rows.end(), p + at.table_rows);
  const int64_t seqs = int64_t(fb.seqs.size());
  for (int64_t s = 0; s < seqs; ++s) {
    p[at.query_start + s] = fb.seqs[s].query_start;
    p[at.context_lens + s] = fb.seqs[s].context_len;
  }
  p[at.query_start + seqs] = int32_t(fb.token_ids.size());
}

// A decode batch padded to its bucket. Padding rows write no KV (slot -1) and attend to an empty
// context; their logits are computed and ignored.
void LlamaRunner::State::stage_padded_decode(const FlatBatch& fb, const std::vector<int32_t>& table_rows,
                                             int32_t bucket, const InputLayout& at) {
  stage(fb, table_rows, at);
  int32_t* p = staging.data();
  for (int32_t r = int32_t(fb.token_ids.size()); r < bucket; ++r) {
    p[at.token_ids + r] = 0;
    p[at.positions + r] = 0;
    for (int32_t g = 0; g < groups.num_groups(); ++g) p[at.slots_of(g) + r] = -1;
    p[at.logit_rows + r] = r;
    p[at.query_start + r] = r;
    p[at.context_lens + r] = 0;
    p[at.table_rows + r] = 0;
  }
  p[at.query_start + bucket] = bucket;
}

void LlamaRunner::State::run_recorded(const StepShape& shape) {
  auto it = recorded.find(shape.seqs);
  if (it != recorded.end()) {
    it->second->replay();
    return;
  }
  recorded.emplace(shape.seqs, be->record([&] { enqueue(shape); }));
}

// Picks the tokens of the sequences that asked for it from the logits still on the backend. Rows of
// other sequences are sampled greedily too (one launch for all rows), and the result is dropped.
// Logprobs come from the raw rows, copied to the host before sampling overwrites them.
void LlamaRunner::State::sample(const ForwardBatch& batch, int32_t rows, ForwardOutput& out) {
  host_rows.assign(size_t(rows), kernels::SamplingRow{});
  for (kernels::SamplingRow& r : host_rows) r.temperature = 0.0f;
  host_adjusts.clear();
  host_masks.clear();
  const size_t mask_words = size_t(kernels::mask_words(cfg.vocab_size));
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    for (int32_t k = 0; batch.seqs[i].sample >= 0 && k < out.num_rows[i]; ++k) {
      const SamplingStep& d = batch.samples[size_t(batch.seqs[i].sample + k)];
      kernels::SamplingRow& r = host_rows[size_t(out.first_row[i] + k)];
      r = d.row;
      r.adjust_begin = int32_t(host_adjusts.size()) + d.row.adjust_begin;
      r.adjust_end = int32_t(host_adjusts.size()) + d.row.adjust_end;
      host_adjusts.insert(host_adjusts.end(), d.adjusts.begin(), d.adjusts.end());
      r.mask_row = -1;
      if (!d.mask.empty()) {
        if (d.mask.size() != mask_words) throw std::invalid_argument("sample: a token mask of the wrong size");
        r.mask_row = int32_t(host_masks.size() / mask_words);
        host_masks.insert(host_masks.end(), d.mask.begin(), d.mask.end());
      }
    }
  }
  auto fit = [&](kernels::Buffer& buf, size_t bytes) {
    if (buf.bytes() < bytes) buf = kernels::Buffer(*be, bytes);
  };
  fit(sampling_rows, host_rows.size() * sizeof(kernels::SamplingRow));
  fit(sampling_adjusts, std::max<size_t>(1, host_adjusts.size()) * sizeof(kernels::TokenAdjust));
  fit(sampling_masks, std::max<size_t>(1, host_masks.size()) * sizeof(uint32_t));
  fit(sampled_tokens, size_t(rows) * sizeof(int32_t));
  be->copy_in(sampling_rows.get(), host_rows.data(), host_rows.size() * sizeof(kernels::SamplingRow));
  if (!host_adjusts.empty())
    be->copy_in(sampling_adjusts.get(), host_adjusts.data(), host_adjusts.size() * sizeof(kernels::TokenAdjust));
  if (!host_masks.empty()) be->copy_in(sampling_masks.get(), host_masks.data(), host_masks.size() * sizeof(uint32_t));
  be->sample_rows(logits.get<float>(), rows, cfg.vocab_size, sampling_rows.get<kernels::SamplingRow>(),
                  sampling_adjusts.get<kernels::TokenAdjust>(), sampling_masks.get<uint32_t>(), sampled_tokens.get<int32_t>());
  host_tokens_out.resize(size_t(rows));
  be->copy_out(host_tokens_out.data(), sampled_tokens.get(), size_t(rows) * sizeof(int32_t));
  be->synchronize();
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    for (int32_t k = 0; batch.seqs[i].sample >= 0 && k < out.num_rows[i]; ++k) {
      const size_t step = size_t(batch.seqs[i].sample + k);
      SampledToken& t = out.tokens[step];
      t.token = host_tokens_out[size_t(out.first_row[i] + k)];
      const int32_t n = batch.samples[step].logprobs;
      if (n >= 0) kernels::token_logprobs(out.row(int32_t(i), k), cfg.vocab_size, t.token, n, t.logprob, t.top_logprobs);
    }
  }
}

// The final norm's rows of the sequences that asked for them.
void LlamaRunner::State::copy_hidden(const ForwardBatch& batch, const FlatBatch& fb, ForwardOutput& out) {
  out.dim = cfg.dim;
  out.hidden.assign(batch.seqs.size(), {});
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (!batch.seqs[i].hidden) continue;
    const SeqSpan& span = fb.seqs[i];
    std::vector<float>& rows = out.hidden[i];
    rows.resize(size_t(span.num_queries) * size_t(cfg.dim));
    be->copy_out(rows.data(), h.get<float>() + size_t(span.query_start) * size_t(cfg.dim), rows.size() * sizeof(float));
  }
}

LlamaRunner::LlamaRunner(const Model& model, std::unique_ptr<kernels::Backend> backend, const RunnerConfig& config,
                         const KvPoolSizer& kv_blocks)
    : s_(std::make_unique<State>(model, checked(std::move(backend), model, config), config)) {
  s_->allocate_kv_pool(kv_blocks(*s_->be, kv_block_bytes(model.config(), config.block_size, config.kv_type)));
}

LlamaRunner::~LlamaRunner() = default;

// One step of one token run on a recording backend: the model's layer sequence (llama_forward.cpp)
// is the only list of what it needs, so the check cannot drift from what runs. Sampling is the
// runner's own, the same for every model.
std::vector<kernels::OpUse> LlamaRunner::ops_needed(const Model& model, const RunnerConfig& config) {
  auto recorder = std::make_unique<kernels::RecordingBackend>();
  const kernels::RecordingBackend& seen = *recorder;
  RunnerConfig one_token = config;
  one_token.max_num_seqs = one_token.max_num_batched_tokens = 1;
  State dry(model, std::move(recorder), one_token);
  dry.allocate_kv_pool(1);
  dry.enqueue({.tokens = 1, .logit_rows = 1, .seqs = 1, .max_num_queries = 1, .max_context_len = 1});
  std::vector<kernels::OpUse> uses = seen.uses();
  uses.push_back({kernels::Op::SampleRows, DType::F32, {}});
  return uses;
}

int32_t LlamaRunner::vocab_size() const { return s_->cfg.vocab_size; }
int32_t LlamaRunner::context_len() const { return s_->cfg.context_len; }
int32_t LlamaRunner::num_kv_blocks() const { return s_->num_blocks; }
int32_t LlamaRunner::block_size() const { return s_->opt.block_size; }
std::vector<int32_t> LlamaRunner::kv_group_windows() const { return s_->groups.windows; }
const kernels::Backend& LlamaRunner::backend() const { return *s_->be; }

size_t LlamaRunner::kv_block_bytes(const ModelConfig& cfg, int32_t block_size, kernels::DType kv_type) {
  const size_t layers = size_t(kv_groups(cfg).layers_per_group);
  return 2 * kv_head_bytes(kv_type, cfg.head_dim) * size_t(block_size) * cfg.num_kv_heads * layers;
}

// Sampling sequences must ask for their last rows only, and point at a step for each.
static void check_sampling(const ForwardBatch& batch) {
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SequenceInput& s = batch.seqs[i];
    if (s.sample < 0) continue;
    if (s.logits != LogitRows::Last || size_t(s.sample) + size_t(s.last_rows) > batch.samples.size()) {
      throw std::invalid_argument("forward batch, sequence " + std::to_string(i) +
                                  ": sampling needs its last rows and a sampling step for each");
    }
  }
}

ForwardOutput LlamaRunner::forward(const ForwardBatch& batch) {
  State& s = *s_;
  ForwardOutput out;
  s.tables.release(batch.released);  // before anything can refuse the batch, as flatten does
  const FlatBatch fb = flatten(batch, s.kept, s.cfg, s.opt.block_size, s.num_blocks, s.groups.windows, out);
  check_sampling(batch);
  const int32_t tokens = int32_t(fb.token_ids.size()), seqs = int32_t(fb.seqs.size());
  const int32_t rows = int32_t(fb.logit_rows.size());
  const bool hidden = std::any_of(batch.seqs.begin(), batch.seqs.end(), [](const SequenceInput& q) { return q.hidden; });
  const bool decode = tokens == seqs;
  const int32_t bucket = decode && rows == seqs && !hidden ? s.bucket_for(seqs) : 0;
  const int64_t moves = s.tables.moves();
  const std::vector<int32_t> table_rows = s.tables.update(batch, fb);
  if (s.tables.moves() != moves) s.recorded.clear();  // they read the tables at the old address

  if (bucket > 0) {
    if (bucket > s.capacity) s.allocate_step_buffers(bucket);
    // Attention's bounds are the model's limits, not this step's, so one recording serves every step.
    const StepShape shape{bucket, bucket, bucket, 1, s.cfg.context_len};
    const InputLayout at(bucket, bucket, bucket, s.groups.num_groups());
    s.stage_padded_decode(fb, table_rows, bucket, at);
    s.be->copy_in(s.inputs.get(), s.staging.data(), size_t(at.total) * sizeof(int32_t));
    s.run_recorded(shape);
  } else {
    if (tokens > s.capacity) s.allocate_step_buffers(tokens);
    int32_t max_queries = 0, max_context = 0;
    for (const SeqSpan& a : fb.seqs) {
      max_queries = std::max(max_queries, a.num_queries);
      max_context = std::max(max_context, a.context_len);
    }
    const StepShape shape{tokens, rows, seqs, max_queries, max_context, hidden};
    const InputLayout at(tokens, rows, seqs, s.groups.num_groups());
    s.stage(fb, table_rows, at);
    s.be->copy_in(s.inputs.get(), s.staging.data(), size_t(at.total) * sizeof(int32_t));
    s.enqueue(shape);
  }
  bool any_sampled = false, any_host_row = false;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const int32_t sample = batch.seqs[i].sample;
    any_sampled |= sample >= 0;
    any_host_row |= out.num_rows[i] > 0 && (sample < 0 || batch.samples[sample].logprobs >= 0);
  }
  if (any_host_row) {
    out.logits.resize(size_t(rows) * s.cfg.vocab_size);
    s.be->copy_out(out.logits.data(), s.logits.get(), out.logits.size() * sizeof(float));
  }
  if (hidden) s.copy_hidden(batch, fb, out);
  out.tokens.assign(batch.samples.size(), SampledToken{});
  if (any_sampled) s.sample(batch, rows, out);  // after the copy: sampling overwrites the logits
  s.be->synchronize();
  return out;
}

}  // namespace flashserve
