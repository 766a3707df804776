// One forward step over a ragged batch. All sequences' new tokens are flattened into rows
// [num_tokens][...]; every op is row-wise except attention, which reads each sequence's own KV
// blocks. No op reduces across rows, so a row's result does not depend on what else is batched;
// mixture-of-experts layers regroup rows by expert but still compute and sum each row alone.
#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/moe_routing.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/flat_batch.h"
#include "model/llama_model.h"

namespace flashserve {
namespace {

void linear(const float* x, int64_t num_tokens, const WeightMatrix& w, float* y) {
  kernels::matmul(x, num_tokens, w.cols, w.data, w.type, w.rows, y);
}

void add_in_place(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

// Scratch activations for one step, all [num_tokens][...].
struct Activations {
  Activations(int64_t t, const ModelConfig& c)
      : x(t * c.dim), h(t * c.dim), q(t * c.num_heads * c.head_dim), k(t * c.num_kv_heads * c.head_dim),
        v(k.size()), attn(q.size()), gate(t * c.ffn_dim), up(gate.size()) {}
  std::vector<float> x, h, q, k, v, attn, gate, up;
};

// Mixture-of-experts scratch for one step; empty for a dense model.
struct MoeScratch {
  MoeScratch(int64_t t, const ModelConfig& c)
      : logits(t * c.num_experts), weights(t * c.num_experts_used), ids(weights.size()),
        offsets(c.num_experts + 1), sorted(weights.size()), rows(c.is_moe() ? t * c.dim : 0),
        per_choice(weights.size() * c.dim) {}
  std::vector<float> logits, weights;
  std::vector<int32_t> ids, offsets, sorted;
  std::vector<float> rows;        // [tokens routed to one expert][dim]: their inputs, then its outputs
  std::vector<float> per_choice;  // [num_tokens][top_k][dim]: each assignment's expert output
};

// The SwiGLU MLP, a.h -> a.h.
void dense_ffn(const LayerWeights& l, int64_t T, Activations& a) {
  linear(a.h.data(), T, l.w_gate, a.gate.data());
  linear(a.h.data(), T, l.w_up, a.up.data());
  kernels::swiglu(a.gate.data(), a.up.data(), a.gate.data(), a.gate.size());
  linear(a.gate.data(), T, l.w_down, a.h.data());
}

// Gathers the rows routed to expert e (assignment / top_k is the token), runs its MLP on them
// together, and scatters each result to its assignment's slot in per_choice.
void run_expert(const MoeWeights& w, int32_t e, const int32_t* assignments, int64_t n, const ModelConfig& c,
                Activations& a, MoeScratch& s) {
  const int32_t top_k = c.num_experts_used;
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(a.h.data() + int64_t(assignments[i] / top_k) * c.dim, c.dim, s.rows.data() + i * c.dim);
  }
  linear(s.rows.data(), n, w.gate.expert(e), a.gate.data());
  linear(s.rows.data(), n, w.up.expert(e), a.up.data());
  kernels::swiglu(a.gate.data(), a.up.data(), a.gate.data(), n * c.ffn_dim);
  linear(a.gate.data(), n, w.down.expert(e), s.rows.data());
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(s.rows.data() + i * c.dim, c.dim, s.per_choice.data() + int64_t(assignments[i]) * c.dim);
  }
}

// Sums each token's weighted expert outputs from their slots in choice order j = 0..top_k-1: that
// order belongs to the token alone, not to how experts were grouped or scheduled, so batching
// cannot move a bit (float addition is not associative).
void sum_choices(const MoeScratch& s, int64_t T, const ModelConfig& c, float* out) {
  const int32_t top_k = c.num_experts_used;
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * c.dim;
    std::fill_n(o, c.dim, 0.0f);
    for (int32_t j = 0; j < top_k; ++j) {
      const int64_t a = t * top_k + j;
      const float* r = s.per_choice.data() + a * c.dim;
      for (int32_t i = 0; i < c.dim; ++i) o[i] += s.weights[a] * r[i];
    }
  }
}

// Mixtral's FFN, a.h -> a.h: softmax over the router logits, top-k experts renormalised.
void moe_ffn(const MoeWeights& w, int64_t T, const ModelConfig& c, Activations& a, MoeScratch& s) {
  linear(a.h.data(), T, w.router, s.logits.data());
  kernels::moe_route(s.logits.data(), T, c.num_experts, c.num_experts_used, /*renormalize=*/true,
                     {s.ids.data(), s.weights.data(), s.offsets.data(), s.sorted.data()});
  for (int32_t e = 0; e < c.num_experts; ++e) {
    const int32_t begin = s.offsets[e], n = s.offsets[e + 1] - begin;
    if (n > 0) run_expert(w, e, s.sorted.data() + begin, n, c, a, s);
  }
  sum_choices(s, T, c, a.h.data());
}

}  // namespace

ForwardOutput LlamaModel::forward(const ForwardBatch& batch, KvCache& cache) const {
  const ModelConfig& c = cfg_;
  ForwardOutput out;
  const FlatBatch fb = flatten(batch, c, cache.block_size(), cache.num_blocks(), out);
  const int64_t T = int64_t(fb.token_ids.size());
  Activations a(T, c);
  MoeScratch moe(T, c);

  for (int64_t t = 0; t < T; ++t) {
    kernels::get_row(token_embd_.data, token_embd_.type, c.dim, fb.token_ids[t], a.x.data() + t * c.dim);
  }
  const kernels::RopeParams rope{c.rope_dim, c.rope_theta, c.rope_freq_scale,
                                 rope_freq_factors_.empty() ? nullptr : rope_freq_factors_.data()};
  const float scale = 1.0f / std::sqrt(float(c.head_dim));

  for (int32_t li = 0; li < c.num_layers; ++li) {
    const LayerWeights& l = layers_[li];
    kernels::rmsnorm(a.x.data(), l.attn_norm.data(), a.h.data(), T, c.dim, c.rms_eps);
    linear(a.h.data(), T, l.wq, a.q.data());
    linear(a.h.data(), T, l.wk, a.k.data());
    linear(a.h.data(), T, l.wv, a.v.data());
    kernels::rope(a.q.data(), fb.positions.data(), T, c.num_heads, c.head_dim, rope);
    kernels::rope(a.k.data(), fb.positions.data(), T, c.num_kv_heads, c.head_dim, rope);
    kernels::kv_write(cache.layout(), cache.k(li), cache.v(li), a.k.data(), a.v.data(), fb.slot_mapping.data(), T);
    kernels::paged_attention(a.q.data(), cache.k(li), cache.v(li), cache.layout(), fb.attn_seqs.data(),
                             int32_t(fb.attn_seqs.size()), c.num_heads, scale, a.attn.data());
    linear(a.attn.data(), T, l.wo, a.h.data());
    add_in_place(a.x.data(), a.h.data(), a.x.size());

    kernels::rmsnorm(a.x.data(), l.ffn_norm.data(), a.h.data(), T, c.dim, c.rms_eps);
    if (c.is_moe()) {
      moe_ffn(l.moe, T, c, a, moe);
    } else {
      dense_ffn(l, T, a);
    }
    add_in_place(a.x.data(), a.h.data(), a.x.size());
  }

  const int64_t R = int64_t(fb.logit_rows.size());
  if (R == 0) return out;
  std::vector<float> last(R * c.dim);
  for (int64_t r = 0; r < R; ++r) {
    std::copy_n(a.x.data() + int64_t(fb.logit_rows[r]) * c.dim, c.dim, last.data() + r * c.dim);
  }
  kernels::rmsnorm(last.data(), output_norm_.data(), last.data(), R, c.dim, c.rms_eps);
  out.logits.resize(size_t(R) * c.vocab_size);
  linear(last.data(), R, output_, out.logits.data());
  return out;
}

}  // namespace flashserve
