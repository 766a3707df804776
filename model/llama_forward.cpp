// The layer sequence of the Llama lineage, written once against the backend contract, each
// family's additions (model/families/) behind a switch of ModelConfig or a tensor it brings:
// embedding (Gemma 3, Granite: scaled), then per layer RMSNorm, Q/K/V (Qwen2: biased; Qwen3, Gemma
// 3: per-head Q/K norms), RoPE, paged attention (Gemma 3's local layers: a sliding window; Granite:
// its own scale), output projection (Gemma 3: normed; Granite: scaled), RMSNorm and a SwiGLU or
// GeGLU MLP or a mixture of SwiGLU experts (Gemma 3: normed; Granite: scaled), with the residual
// add fused into the next norm; then the final norm and the LM head (Granite: scaled) for the rows
// that need logits. Every op is row-wise except attention, which reads each sequence's own
// KV blocks, so a row's result does not depend on what else is batched.
#include <cmath>

#include "model/llama_runner_state.h"

namespace flashserve {

using kernels::DType;

BackendMatrix BackendExperts::expert(int64_t e) const {
  const size_t bytes = size_t(rows) * kernels::row_bytes(type, cols);
  return BackendMatrix{static_cast<const char*>(data) + size_t(e) * bytes, type, rows, cols};
}

void LlamaRunner::State::linear(const float* in, int64_t tokens, const BackendMatrix& w, float* out) {
  be->matmul(in, tokens, w.data, w.type, w.rows, w.cols, out);
}

// The gated MLP (SwiGLU, or Gemma's GeGLU), h -> tmp.
void LlamaRunner::State::dense_ffn(const BackendLayer& l, int64_t T) {
  linear(h.get<float>(), T, l.w_gate, gate.get<float>());
  linear(h.get<float>(), T, l.w_up, up.get<float>());
  if (cfg.geglu) {
    be->geglu(gate.get<float>(), up.get<float>(), gate.get<float>(), T * cfg.ffn_dim);
  } else {
    be->swiglu(gate.get<float>(), up.get<float>(), gate.get<float>(), T * cfg.ffn_dim);
  }
  linear(gate.get<float>(), T, l.w_down, tmp.get<float>());
}

// Mixtral's FFN, h -> tmp: softmax over the router logits, top-k experts renormalised. Each expert
// multiplies the rows routed to it together; which rows those are is read back to the host, so a
// step of a mixture model is never recorded.
void LlamaRunner::State::moe_ffn(const BackendLayer& l, int64_t T) {
  const int32_t E = cfg.num_experts, K = cfg.num_experts_used;
  linear(h.get<float>(), T, l.router, router_logits.get<float>());
  be->moe_route(router_logits.get<float>(), T, E, K, /*renormalize=*/true,
                {topk_ids.get<int32_t>(), topk_weights.get<float>(), expert_offsets.get<int32_t>(), sorted.get<int32_t>()});
  const int64_t A = T * K;  // assignments
  be->copy_out(host_offsets.data(), expert_offsets.get(), size_t(E + 1) * sizeof(int32_t));
  be->copy_out(host_sorted.data(), sorted.get(), size_t(A) * sizeof(int32_t));
  be->synchronize();
  for (int64_t a = 0; a < A; ++a) host_tokens[a] = host_sorted[a] / K;
  be->copy_in(assignment_tokens.get(), host_tokens.data(), size_t(A) * sizeof(int32_t));
  for (int32_t e = 0; e < E; ++e) {
    const int32_t begin = host_offsets[e], n = host_offsets[e + 1] - begin;
    if (n == 0) continue;
    be->get_rows(h.get<float>(), DType::F32, cfg.dim, assignment_tokens.get<int32_t>() + begin, n, expert_in.get<float>());
    linear(expert_in.get<float>(), n, l.gate_exps.expert(e), gate.get<float>());
    linear(expert_in.get<float>(), n, l.up_exps.expert(e), up.get<float>());
    be->swiglu(gate.get<float>(), up.get<float>(), gate.get<float>(), int64_t(n) * cfg.ffn_dim);
    linear(gate.get<float>(), n, l.down_exps.expert(e), expert_out.get<float>());
    be->scatter_rows(expert_out.get<float>(), n, cfg.dim, sorted.get<int32_t>() + begin, per_choice.get<float>());
  }
  be->weighted_sum_rows(per_choice.get<float>(), topk_weights.get<float>(), T, K, cfg.dim, tmp.get<float>());
}

void LlamaRunner::State::enqueue_layer(int32_t li, const StepShape& shape, const InputLayout& at) {
  const BackendLayer& l = layers[li];
  const int64_t T = shape.tokens;
  const int32_t* in = inputs.get<int32_t>();
  const int32_t group = groups.group_of_layer[li], place = groups.slot_of_layer[li];
  const kernels::KvCacheView kv{k_cache[place].get(), v_cache[place].get(), opt.kv_type,
                                {opt.block_size, cfg.num_kv_heads, cfg.head_dim}};
  // Gemma 3's local layers: their own RoPE base, no RoPE scaling (and a sliding window, in the
  // layer's KV group).
  const bool local_rope = cfg.is_local_layer(li) && cfg.rope_theta_local > 0;
  const kernels::RopeParams rope{cfg.rope_dim, local_rope ? cfg.rope_theta_local : cfg.rope_theta,
                                 local_rope ? 1.0f : cfg.rope_freq_scale, rope_freq_factors, cfg.rope_neox};
  const float scale = cfg.attention_scale > 0 ? cfg.attention_scale : 1.0f / std::sqrt(float(cfg.head_dim));

  // The previous layer's FFN output (in tmp) joins the residual stream as this layer's norm reads it.
  if (li == 0) {
    be->rmsnorm(x.get<float>(), l.attn_norm, h.get<float>(), T, cfg.dim, cfg.rms_eps);
  } else {
    be->add_rmsnorm(x.get<float>(), tmp.get<float>(), l.attn_norm, h.get<float>(), T, cfg.dim, cfg.rms_eps);
  }
  linear(h.get<float>(), T, l.wq, q.get<float>());
  linear(h.get<float>(), T, l.wk, k.get<float>());
  linear(h.get<float>(), T, l.wv, v.get<float>());
  if (l.bq) {
    be->add_bias(q.get<float>(), l.bq, T, l.wq.rows);
    be->add_bias(k.get<float>(), l.bk, T, l.wk.rows);
    be->add_bias(v.get<float>(), l.bv, T, l.wv.rows);
  }
  if (l.q_norm) {  // each head's Q and K normalised on their own, before RoPE
    be->rmsnorm(q.get<float>(), l.q_norm, q.get<float>(), T * cfg.num_heads, cfg.head_dim, cfg.rms_eps);
    be->rmsnorm(k.get<float>(), l.k_norm, k.get<float>(), T * cfg.num_kv_heads, cfg.head_dim, cfg.rms_eps);
  }
  be->rope(q.get<float>(), in + at.positions, T, cfg.num_heads, cfg.head_dim, rope);
  be->rope(k.get<float>(), in + at.positions, T, cfg.num_kv_heads, cfg.head_dim, rope);
  be->kv_write(kv, k.get<float>(), v.get<float>(), in + at.slots_of(group), T);
  const kernels::AttentionBatch batch{.query_start = in + at.query_start,
                                      .context_lens = in + at.context_lens,
                                      .block_tables = tables.table(group),
                                      .num_seqs = shape.seqs,
                                      .max_blocks_per_seq = tables.stride(),
                                      .max_num_queries = shape.max_num_queries,
                                      .max_context_len = shape.max_context_len,
                                      .window = groups.windows[group],
                                      .table_rows = in + at.table_rows};
  be->attention(q.get<float>(), kv, batch, cfg.num_heads, scale, attn.get<float>());
  linear(attn.get<float>(), T, l.wo, tmp.get<float>());
  if (l.post_attn_norm) be->rmsnorm(tmp.get<float>(), l.post_attn_norm, tmp.get<float>(), T, cfg.dim, cfg.rms_eps);
  scale_branch(T);

  be->add_rmsnorm(x.get<float>(), tmp.get<float>(), l.ffn_norm, h.get<float>(), T, cfg.dim, cfg.rms_eps);
  if (cfg.is_moe()) {
    moe_ffn(l, T);
  } else {
    dense_ffn(l, T);
  }
  if (l.post_ffn_norm) be->rmsnorm(tmp.get<float>(), l.post_ffn_norm, tmp.get<float>(), T, cfg.dim, cfg.rms_eps);
  scale_branch(T);
}

// A branch's output (in tmp) times Granite's residual multiplier before it joins the stream.
void LlamaRunner::State::scale_branch(int64_t T) {
  if (cfg.residual_scale != 1.0f) be->scale(tmp.get<float>(), cfg.residual_scale, T * cfg.dim);
}

// The whole step, inputs already in `inputs`. Launches only -- no allocation, and no host sync for
// a dense model -- so the same call records a decode step.
void LlamaRunner::State::enqueue(const StepShape& shape) {
  const InputLayout at(shape.tokens, shape.logit_rows, shape.seqs, groups.num_groups());
  const int32_t* in = inputs.get<int32_t>();
  be->get_rows(token_embd.data, token_embd.type, cfg.dim, in + at.token_ids, shape.tokens, x.get<float>());
  if (cfg.embed_scale != 1.0f) be->scale(x.get<float>(), cfg.embed_scale, int64_t(shape.tokens) * cfg.dim);
  for (int32_t li = 0; li < cfg.num_layers; ++li) enqueue_layer(li, shape, at);
  if (shape.logit_rows == 0 && !shape.hidden) return;
  // Final norm over every row (cheap next to the LM head), then only the logit rows go on.
  be->add_rmsnorm(x.get<float>(), tmp.get<float>(), output_norm, h.get<float>(), shape.tokens, cfg.dim, cfg.rms_eps);
  if (shape.logit_rows == 0) return;
  be->get_rows(h.get<float>(), DType::F32, cfg.dim, in + at.logit_rows, shape.logit_rows, last.get<float>());
  linear(last.get<float>(), shape.logit_rows, output, logits.get<float>());
  if (cfg.logit_multiplier != 1.0f) {
    be->scale(logits.get<float>(), cfg.logit_multiplier, int64_t(shape.logit_rows) * cfg.vocab_size);
  }
}

}  // namespace flashserve
